//! Parsing of the text `trace_pipe`'s lines (the fallback where a binary layout cannot be
//! read) into [`TraceLine`]s.

use super::{TraceLine, comm_array};

/// The value after `key` up to the next space.
fn field<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    let i = s.find(key)? + key.len();
    let rest = s.get(i..)?;
    Some(rest.split(' ').next().unwrap_or(""))
}

/// The number after `key`.
fn num(s: &str, key: &str) -> Option<u32> {
    field(s, key)?.parse().ok()
}

/// Parses `SECONDS.FRACTION` into ns.
fn parse_ts(t: &str) -> Option<u64> {
    let (s, f) = t.split_once('.')?;
    if f.is_empty() || f.len() > 9 || !f.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac: u64 = f.parse().ok()?;
    let scale = 10u64.pow(9 - f.len() as u32);
    s.parse::<u64>()
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(frac * scale)
}

/// Parses one `trace_pipe` line (None for lines of other events or in another shape).
pub fn parse_line(line: &str) -> Option<TraceLine> {
    // The CPU is the first `[digits]` token; the task name before it may contain anything.
    let bytes = line.as_bytes();
    let mut i = 0;
    let (cpu, after, task) = loop {
        let open = i + line.get(i..)?.find('[')?;
        let close = open + line.get(open..)?.find(']')?;
        let inner = line.get(open + 1..close)?;
        if !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_digit()) {
            break (
                inner.parse::<u32>().ok()?,
                close + 1,
                line.get(..open)?.trim(),
            );
        }
        i = open + 1;
        if i >= bytes.len() {
            return None;
        }
    };
    let rest = line.get(after..)?;
    // Next: optional flags, then `TIMESTAMP:`, then `EVENT:`, then the fields.
    let mut words = rest.split_ascii_whitespace();
    let mut mono = None;
    for w in words.by_ref().take(3) {
        if let Some(t) = w.strip_suffix(':').and_then(parse_ts) {
            mono = Some(t);
            break;
        }
    }
    let mono = mono?;
    let event = words.next()?.strip_suffix(':')?;
    let fields = line.get(line.find(event)? + event.len()..)?;
    Some(match event {
        "sched_switch" => TraceLine::Switch {
            mono,
            cpu,
            prev_tid: num(fields, " prev_pid=")?,
            prev_state: field(fields, " prev_state=")?
                .bytes()
                .next()
                .unwrap_or(b'?'),
            next_tid: num(fields, " next_pid=")?,
        },
        "sched_wakeup" | "sched_wakeup_new" => TraceLine::Wakeup {
            mono,
            cpu: num(fields, " target_cpu=").unwrap_or(cpu),
            tid: num(fields, " pid=")?,
        },
        "irq_handler_entry" => TraceLine::IrqEntry {
            mono,
            cpu,
            irq: num(fields, " irq=")?,
        },
        "irq_handler_exit" => TraceLine::IrqExit {
            mono,
            cpu,
            irq: num(fields, " irq=")?,
            handled: field(fields, " ret=") == Some("handled"),
        },
        "softirq_entry" => TraceLine::SoftirqEntry {
            mono,
            cpu,
            vec: num(fields, " vec=")?,
        },
        "softirq_exit" => TraceLine::SoftirqExit {
            mono,
            cpu,
            vec: num(fields, " vec=")?,
        },
        "task_newtask" => TraceLine::NewTask {
            mono,
            parent: task.rsplit_once('-')?.1.parse().ok()?,
            tid: num(fields, " pid=")?,
            comm: comm_array(field(fields, " comm=")?),
            flags: u64::from_str_radix(field(fields, " clone_flags=")?, 16).ok()?,
        },
        "task_rename" => TraceLine::Rename {
            mono,
            tid: num(fields, " pid=")?,
            comm: comm_array(field(fields, " newcomm=")?),
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_trace_pipe_lines() {
        let l = "     busy loop-1234    [001] d..2.  5123.456789: sched_switch: prev_comm=busy loop prev_pid=1234 prev_prio=120 prev_state=R+ ==> next_comm=swapper/1 next_pid=0 next_prio=120";
        assert_eq!(
            parse_line(l),
            Some(TraceLine::Switch {
                mono: 5_123_456_789_000,
                cpu: 1,
                prev_tid: 1234,
                prev_state: b'R',
                next_tid: 0
            })
        );
        let w = "          <idle>-0       [000] dNh3.    10.000001: sched_wakeup: comm=x pid=77 prio=120 target_cpu=001";
        assert_eq!(
            parse_line(w),
            Some(TraceLine::Wakeup {
                mono: 10_000_001_000,
                cpu: 1,
                tid: 77
            })
        );
        let n = "  sh-489 [000] d..2. 10.000002: sched_wakeup_new: comm=sh pid=493 prio=120 target_cpu=001";
        assert_eq!(
            parse_line(n),
            Some(TraceLine::Wakeup {
                mono: 10_000_002_000,
                cpu: 1,
                tid: 493
            })
        );
        let e = "  <idle>-0 [003] d.h1. 1.5: irq_handler_entry: irq=24 name=virtio0-input.0";
        assert_eq!(
            parse_line(e),
            Some(TraceLine::IrqEntry {
                mono: 1_500_000_000,
                cpu: 3,
                irq: 24
            })
        );
        for bad in [
            "",
            "CPU:1 [LOST 5 EVENTS]",
            "x [12] 1.0: sched_switch: nothing",
            "[a] [1",
        ] {
            assert_eq!(parse_line(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn parses_softirq_lines() {
        let e = "         python3-5619    [001] ..s1.  2976.556567: softirq_entry: vec=3 [action=NET_RX]";
        assert_eq!(
            parse_line(e),
            Some(TraceLine::SoftirqEntry {
                mono: 2_976_556_567_000,
                cpu: 1,
                vec: 3
            })
        );
        let x = "          <idle>-0       [000] ..s2.    10.000001: softirq_exit: vec=2 [action=NET_TX]";
        assert_eq!(
            parse_line(x),
            Some(TraceLine::SoftirqExit {
                mono: 10_000_001_000,
                cpu: 0,
                vec: 2
            })
        );
        assert_eq!(
            parse_line("  x-1 [000] ..s1. 1.0: softirq_entry: [action=NET_RX]"),
            None
        );
    }
}
