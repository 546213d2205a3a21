//! Linking throughput and memory (issue 18's budget: WAP5's CoDeeN trace, 4,702,865 messages
//! in an hour — 730 s and 1,354 MB in the paper — in ≤ 10 s and ≤ 1 GiB here).
//!
//! The trace is ours, shaped like a content-distribution network: 20 proxies, each with 20
//! clients opening a connection per request (an ephemeral port each, aggregated into
//! `CLIENT`); a request is a hit (the proxy answers), a miss (the proxy asks the next proxy,
//! which fetches from one of 5 origins) or a miss with a DNS lookup; wide-area network delays
//! of 20 ± 5 ms. An hour of it is about 4.7 M messages. Generation is not timed. Each case
//! prints the median of three runs and the heap the run added at its peak (a counting
//! allocator) beside the trace's own size, and the load average.
//!
//! Each run gets its own copy of the trace and consumes it, as `p5 analyze linking` does
//! (`linking_owned`: the fat messages are merged in place).
//!
//! Cases: WAP5's weights with the try-both cap at 10 (the default), 5 and 0 (the effect of
//! the cap on time), and ours (`--kernel empirical --exclusive true --refits 5`).
//! `P5_BENCH_SECONDS=N` sets the length (default 3600 s); `-- WORD` runs only the cases
//! whose name holds WORD.

use p5_analyze::linking::{Params, linking_owned};
use p5_analyze::maketrace::{self, Config, Options};
use std::fmt::Write;
use std::path::Path;
use std::time::Instant;

#[path = "common/counting.rs"]
mod counting;

/// The CDN configuration.
fn cdn() -> String {
    let mut s = String::from("net = [\"20ms\", \"5ms\"]\n");
    for i in 0..20 {
        let next = (i + 1) % 20;
        let origin = i % 5;
        let _ = write!(
            s,
            "\n[[tracelet]]\nname = \"proxy{i}\"\nparallel = 20\nthink = [\"0ms\", \"2s\"]\n\
             call_delay = [\"2ms\", \"0.5ms\"]\nret_delay = [\"1ms\", \"0.3ms\"]\n\
             nodes.ORIGIN{origin} = {{ ret_delay = [\"30ms\", \"10ms\"] }}\n\
             [[tracelet.variant]]\nweight = 6\ntree = \"CLIENT>P{i}\"\n\
             [[tracelet.variant]]\nweight = 3\ntree = \"CLIENT>P{i}(P{next}(ORIGIN{origin}))\"\n\
             [[tracelet.variant]]\nweight = 1\ntree = \"CLIENT>P{i}(DNS,ORIGIN{origin})\"\n"
        );
    }
    s
}

fn case(name: &str, trace: &p5_analyze::Trace, p: &Params) {
    // `cargo bench --bench linking -- WORD` runs only the cases whose name holds WORD.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
        return;
    }
    let n = trace.messages.len();
    // The trace as held: its messages and its node names (one per client endpoint).
    let input = n * std::mem::size_of::<p5_analyze::Message>()
        + trace.nodes.names().map(|s| s.len() + 24).sum::<usize>();
    let mut runs = Vec::new();
    let (mut peak, mut patterns, mut instances) = (0, 0, 0);
    for _ in 0..3 {
        // The trace given up, as `p5 analyze linking` gives it (merged in place, no copy).
        let given = trace.clone();
        let before = counting::reset_peak();
        let t0 = Instant::now();
        let (r, c) = linking_owned(given, p, &mut |_| {});
        runs.push(t0.elapsed().as_secs_f64());
        peak = counting::peak_since(before);
        patterns = r.patterns.len();
        instances = c.trees.instances;
        drop(r);
    }
    runs.sort_by(f64::total_cmp);
    println!(
        "linking {name}: {n} messages in {:.2} s median (runs {:.2} / {:.2} / {:.2}) = {:.2} M \
         messages/s, peak {:.0} MB added (input {:.0} MB; {:.0} MB with it, budget 1,074 MB), \
         {instances} instances, {patterns} patterns",
        runs[1],
        runs[0],
        runs[1],
        runs[2],
        n as f64 / runs[1] / 1e6,
        peak as f64 / 1e6,
        input as f64 / 1e6,
        (peak + input) as f64 / 1e6,
    );
}

fn main() {
    let seconds: i64 = std::env::var("P5_BENCH_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3600);
    let cfg = Config::parse(&cdn(), Path::new("cdn.toml")).expect("config");
    let g = maketrace::generate(
        &cfg,
        &Options {
            seed: 1,
            duration: Some(seconds * 1_000_000_000),
            queue: 64,
            client_endpoints: true,
            ..Options::default()
        },
    );
    let trace = g.trace;
    drop(g.truth);
    for cap in [10, 5, 0] {
        let p = Params {
            max_try_both: cap,
            ..Params::paper()
        };
        case(&format!("WAP5 weights, try-both cap {cap}"), &trace, &p);
    }
    case(
        "ours, the default (empirical, exclusive, 5 refits)",
        &trace,
        &Params::ours(),
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "linking: load average {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
}
