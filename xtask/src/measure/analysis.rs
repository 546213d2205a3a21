//! The trace readers and the analyses of `p5 analyze`, each on a generated input (generation
//! is not timed):
//!
//! - text and pcap reading: `cargo bench -p p5-analyze --bench text` (its own summary; the
//!   criterion part filtered away) and `--bench pcap` (criterion's throughput of the reader);
//! - nesting: `--bench nesting`, the multi-tier system of \[P5\] Fig. 10 (`P5_BENCH_SECONDS`
//!   reduced by `--quick`) and the 45-client case;
//! - convolution: `--bench convolution`, 500 s at μ = 10 ms;
//! - linking: `--bench linking -- ours`, the CDN-shaped trace (`P5_BENCH_SECONDS`);
//! - flows: `--bench flows`, flow construction and the root-cause diff.
//!
//! Budgets stated for a size (2 M messages in 1 s) are checked as rates (2.03 M messages/s)
//! and bytes per message, so a quick run at a smaller size still says pass or not met.

use super::{after, all_na, before, cargo, env_of, line, size};
use crate::Ctx;
use crate::report::{Better, Row};

pub fn text(ctx: &Ctx) -> Vec<Row> {
    let row = Row::new("text trace reading", 2.0, "M lines/s", Better::Higher);
    let args = [
        "bench",
        "-p",
        "p5-analyze",
        "--bench",
        "text",
        "--",
        "p5-xtask-summary-only",
    ];
    match cargo(ctx, "text", &args, &[]) {
        Ok(out) => {
            let l = line(&out, "numeric ids");
            vec![
                row.measured(l.clone().and_then(|l| before(l, "M lines/s")))
                    .note(l.clone().map_or(String::new(), |l| {
                        l.trim_start_matches("text read, ").trim().to_owned()
                    })),
            ]
        }
        Err(e) => vec![row.measured(Err(e))],
    }
}

pub fn pcap(ctx: &Ctx) -> Vec<Row> {
    let row = Row::new("pcap reading", 1.0, "M packets/s", Better::Higher);
    let args = [
        "bench",
        "-p",
        "p5-analyze",
        "--bench",
        "pcap",
        "--",
        "read_one",
    ];
    let out = match cargo(ctx, "pcap", &args, &[]) {
        Ok(o) => o,
        Err(e) => return vec![row.measured(Err(e))],
    };
    let thrpt = out
        .lines()
        .skip_while(|l| !l.contains("read_one"))
        .find(|l| l.contains("thrpt:"))
        .ok_or_else(|| "no criterion throughput after `read_one`".to_owned())
        .and_then(|l| criterion_middle(l).ok_or_else(|| format!("cannot read {:?}", l.trim())));
    vec![
        row.measured(thrpt).note(
            line(&out, "capture:")
                .map(|l| format!("{}; criterion's median", l.trim()))
                .unwrap_or_default(),
        ),
    ]
}

/// The middle value of criterion's `thrpt: [a U b U c U]`, in millions per second.
fn criterion_middle(l: &str) -> Option<f64> {
    let inner = l.split('[').nth(1)?.split(']').next()?;
    let w: Vec<&str> = inner.split_whitespace().collect();
    let (v, unit) = (w.get(2)?.parse::<f64>().ok()?, *w.get(3)?);
    let scale = match unit.chars().next()? {
        'G' => 1e3,
        'M' => 1.0,
        'K' => 1e-3,
        _ => 1e-6,
    };
    Some(v * scale)
}

pub fn nesting(ctx: &Ctx) -> Vec<Row> {
    let rows = vec![
        Row::new(
            "nesting, multi-tier (budget 2 M messages in 1 s)",
            2.03,
            "M msg/s",
            Better::Higher,
        ),
        Row::new(
            "nesting memory with the trace (140 MB at 2 M)",
            69.0,
            "B/message",
            Better::Lower,
        ),
        Row::new(
            "nesting, parallelism 45 (775 k messages)",
            10.0,
            "s",
            Better::Lower,
        ),
    ];
    let secs = size(ctx, 1000, 4700);
    let args = ["bench", "-p", "p5-analyze", "--bench", "nesting"];
    let out = match cargo(ctx, "nesting", &args, &env_of("P5_BENCH_SECONDS", &secs)) {
        Ok(o) => o,
        Err(e) => return all_na(rows, &e),
    };
    let multi = line(&out, "nesting multi-tier");
    let n = multi.clone().and_then(|l| after(l, ": "));
    let per_message = n.clone().and_then(|n| {
        multi
            .clone()
            .and_then(|l| before(l, "MB with the trace"))
            .map(|mb| mb * 1e6 / n)
    });
    let par = line(&out, "nesting parallelism");
    let [speed, memory, parallel] = rows.try_into().expect("three rows");
    let what = |l: Result<&str, String>| {
        l.clone()
            .ok()
            .and_then(|l| l.split(" = ").next())
            .map(|h| h.trim_start_matches("nesting ").to_owned())
            .unwrap_or_default()
    };
    vec![
        speed
            .measured(multi.clone().and_then(|l| before(l, "M messages/s")))
            .note(what(multi.clone())),
        memory.measured(per_message).note(
            multi
                .ok()
                .and_then(|l| l.split(", peak ").nth(1))
                .map(|t| format!("peak {}", t.trim()))
                .unwrap_or_default(),
        ),
        parallel
            .measured(par.clone().and_then(|l| after(l, "messages in ")))
            .note(what(par)),
    ]
}

pub fn convolution(ctx: &Ctx) -> Vec<Row> {
    let row = Row::new(
        "convolution, 500 s trace at μ = 10 ms",
        1.0,
        "s",
        Better::Lower,
    );
    let args = ["bench", "-p", "p5-analyze", "--bench", "convolution"];
    match cargo(ctx, "convolution", &args, &[]) {
        Ok(out) => {
            let l = line(&out, "μ = 10 ms");
            vec![
                row.measured(l.clone().and_then(|l| after(l, "quanta): ")))
                    .note(l.clone().map_or(String::new(), |l| {
                        l.trim_start_matches("convolution: ").trim().to_owned()
                    })),
            ]
        }
        Err(e) => vec![row.measured(Err(e))],
    }
}

pub fn linking(ctx: &Ctx) -> Vec<Row> {
    let rows = vec![
        Row::new(
            "linking, ours (budget 4.7 M messages in 10 s)",
            0.47,
            "M msg/s",
            Better::Higher,
        ),
        Row::new(
            "linking memory with the trace (1 GiB at 4.7 M)",
            228.0,
            "B/message",
            Better::Lower,
        ),
    ];
    let secs = size(ctx, 600, 3600);
    let args = [
        "bench",
        "-p",
        "p5-analyze",
        "--bench",
        "linking",
        "--",
        "ours",
    ];
    let out = match cargo(ctx, "linking", &args, &env_of("P5_BENCH_SECONDS", &secs)) {
        Ok(o) => o,
        Err(e) => return all_na(rows, &e),
    };
    let l = line(&out, "linking ours");
    let n = l.clone().and_then(|l| after(l, ": "));
    let per_message = n.clone().and_then(|n| {
        l.clone()
            .and_then(|l| before(l, "MB with it"))
            .map(|mb| mb * 1e6 / n)
    });
    let head = l
        .clone()
        .ok()
        .and_then(|l| l.split(" = ").next())
        .map(|h| h.trim_start_matches("linking ").to_owned())
        .unwrap_or_default();
    let [speed, memory] = rows.try_into().expect("two rows");
    vec![
        speed
            .measured(l.clone().and_then(|l| before(l, "M messages/s")))
            .note(format!("CDN-shaped trace, {head}")),
        memory.measured(per_message).note(
            l.clone()
                .ok()
                .and_then(|l| l.split("peak ").nth(1))
                .map(|t| format!("peak {}", t.trim()))
                .unwrap_or_default(),
        ),
    ]
}

pub fn flows(ctx: &Ctx) -> Vec<Row> {
    let rows = vec![
        Row::new("flows construction", 1.0, "M ev/s", Better::Higher),
        Row::new(
            "root-cause diff, two 80,000-path profiles",
            1.0,
            "s",
            Better::Lower,
        ),
    ];
    let requests = size(ctx, 5_000, 20_000);
    let args = ["bench", "-p", "p5-analyze", "--bench", "flows"];
    let out = match cargo(ctx, "flows", &args, &env_of("P5_BENCH_REQUESTS", &requests)) {
        Ok(o) => o,
        Err(e) => return all_na(rows, &e),
    };
    let f = line(&out, "flows:");
    let [build, diff] = rows.try_into().expect("two rows");
    vec![
        build
            .measured(f.clone().and_then(|l| before(l, "M events/s")))
            .note(
                f.clone()
                    .ok()
                    .and_then(|l| l.split(": build").next())
                    .map(|h| h.trim_start_matches("flows: ").to_owned())
                    .unwrap_or_default(),
            ),
        diff.measured(line(&out, "diff:").and_then(|l| after(l, "merging: ")))
            .note("median of 3"),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn criterion_throughput_is_read_in_millions() {
        let l = "                        thrpt:  [4.1006 Melem/s 4.2448 Melem/s 4.2792 Melem/s]";
        assert_eq!(super::criterion_middle(l), Some(4.2448));
        let k = "thrpt:  [900.0 Kelem/s 950.0 Kelem/s 990.0 Kelem/s]";
        assert!((super::criterion_middle(k).unwrap() - 0.95).abs() < 1e-12);
        assert_eq!(super::criterion_middle("time: [1 ms]"), None);
    }
}
