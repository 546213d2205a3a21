//! The per-host clock table `p5 merge` prints: for each clock domain (a host's boot, or a
//! process of its own), the method, offset, drift, error bound and the samples the fit used.

use crate::session::ProcessClock;
use std::fmt::Write;

/// Formats one line per clock domain (processes of one boot share a fit; the offset is the
/// one of the domain's first process, at its start).
pub fn render(clocks: &[ProcessClock]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    let mut o = String::new();
    let _ = writeln!(
        o,
        "  clocks per host: {:<14} {:<9} {:>18} {:>12} {:>14} {:>6} {:>6} {:>6}",
        "host", "method", "offset ns", "drift ppm", "bound", "fwd", "back", "msgs"
    );
    for c in clocks {
        let shared = c.domain.starts_with("host:");
        if shared && seen.contains(&c.domain.as_str()) {
            continue;
        }
        if shared {
            seen.push(&c.domain);
        }
        let bound = c.fit.error_bound_ns.map_or("none".to_owned(), micros);
        let name = if shared {
            c.hostname.clone()
        } else {
            format!("{} (pid {})", c.hostname, c.pid)
        };
        let _ = writeln!(
            o,
            "                   {:<14} {:<9} {:>18} {:>+12.3} {:>14} {:>6} {:>6} {:>6}",
            name,
            c.fit.method.name(),
            c.fit.map(0),
            c.fit.drift_ppm(),
            bound,
            c.fit.forward,
            c.fit.backward,
            c.fit.messages
        );
    }
    o
}

/// `±12.345 µs`.
fn micros(ns: i64) -> String {
    format!("±{:.3} µs", ns as f64 / 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Fit, Method};

    fn clock(pid: u32, host: &str, domain: &str, bound: Option<i64>) -> ProcessClock {
        ProcessClock {
            uid: pid as u64,
            pid,
            program: "hop".into(),
            hostname: host.into(),
            domain: domain.into(),
            fit: Fit {
                offset: 3e9,
                drift: -299.9e-6,
                method: Method::Messages,
                forward: 512,
                backward: 16,
                messages: 600,
                error_bound_ns: bound,
                ..Fit::NONE
            },
            tighten_ns: 0,
        }
    }

    /// One line per host however many processes it ran, each naming the method, offset, drift,
    /// bound and the three kinds of samples; processes of their own get a line each.
    #[test]
    fn one_line_per_host_with_method_bound_and_samples() {
        let t = render(&[
            clock(1, "b", "host:x", Some(12_345)),
            clock(2, "b", "host:x", Some(12_345)),
            clock(3, "c", "process", None),
            clock(4, "c", "process", None),
        ]);
        assert_eq!(t.lines().count(), 4, "{t}");
        let b = t.lines().nth(1).unwrap();
        for part in [
            "b ",
            "messages",
            "3000000000",
            "-299.900",
            "±12.345 µs",
            "512",
            "16",
            "600",
        ] {
            assert!(b.contains(part), "{part:?} missing in {b:?}");
        }
        assert!(t.contains("c (pid 3)") && t.contains("c (pid 4)") && t.contains("none"));
    }
}
