//! Nesting throughput and memory (issue 17's budgets): the multi-tier system of \[P5\]
//! Fig. 10 generated at the length of the paper's longest multi-tier trace (about 2,026,658
//! messages; 23.97 CPU-s and 136.8 MB in 2003; budget ≤ 1 s and ≤ 140 MB) and a
//! high-parallelism variant (45 clients; 775 k messages, 233.6 CPU-s in 2003; budget ≤ 10 s).
//! Reading the input is not timed (the trace is generated in memory); each case runs three
//! times and prints the median, the heap the run added at its peak (a counting allocator),
//! the heap the trace holds and the two together (the whole run's peak: the budget counts
//! the trace), the process's peak resident set in each run (`VmHWM`, reset after the trace
//! is generated and the allocator has handed back what the generator freed: the figure a
//! `p5 analyze nesting` would reach with the trace in memory), and the load average, since
//! other builds share this machine. Nesting consumes its trace, so each run generates its
//! own.
//! `P5_BENCH_SECONDS=N` sets the multi-tier length (default 4700 s).

use p5_analyze::maketrace::{self, Config, Options};
use p5_analyze::nesting::{Params, nesting_owned};
use p5_analyze::trace::Trace;
use std::path::Path;
use std::time::Instant;

#[path = "common/counting.rs"]
mod counting;

/// The trace of `cfg` over `seconds`.
fn generate(cfg: &Config, seconds: i64) -> Trace {
    maketrace::generate(
        cfg,
        &Options {
            seed: 1,
            duration: Some(seconds * 1_000_000_000),
            queue: 64,
            ..Options::default()
        },
    )
    .trace
}

fn case(name: &str, cfg_text: &str, seconds: i64) {
    let cfg = Config::parse(cfg_text, Path::new("fig10-multi-tier.toml")).expect("config");
    let mut runs = Vec::new();
    let (mut n, mut held, mut peak, mut patterns) = (0, 0, 0, 0);
    let mut rss = Vec::new();
    for _ in 0..3 {
        // Nesting consumes its trace: each run gets a new one (not timed).
        let trace = generate(&cfg, seconds);
        n = trace.messages.len();
        // The heap now is the trace's (the generator's other output is gone).
        held = counting::LIVE.load(std::sync::atomic::Ordering::Relaxed);
        // Hands what the generator freed back to the system, so that the peak resident set
        // below is the trace's and nesting's, then resets VmHWM to the current resident set
        // (Linux ≥ 4.0).
        // SAFETY: malloc_trim only releases free memory of the allocator; no pointer is
        // involved.
        unsafe { libc::malloc_trim(0) };
        let _ = std::fs::write("/proc/self/clear_refs", "5");
        let before = counting::reset_peak();
        let t0 = Instant::now();
        let (r, _) = nesting_owned(trace, &Params::default());
        runs.push(t0.elapsed().as_secs_f64());
        peak = peak.max(counting::peak_since(before));
        patterns = r.patterns.len();
        drop(r);
        rss.push(peak_rss());
    }
    runs.sort_by(f64::total_cmp);
    println!(
        "nesting {name}: {n} messages in {:.3} s median (runs {:.3} / {:.3} / {:.3}) = {:.2} M messages/s, \
         peak {:.1} MB added, trace {:.1} MB held, {:.1} MB with the trace; peak RSS per run {}; {patterns} patterns",
        runs[1],
        runs[0],
        runs[1],
        runs[2],
        n as f64 / runs[1] / 1e6,
        peak as f64 / 1e6,
        held as f64 / 1e6,
        (held + peak) as f64 / 1e6,
        rss.join(" / "),
    );
}

/// `VmHWM` of this process, as `/proc/self/status` gives it.
fn peak_rss() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .map_or_else(|| "unknown".to_owned(), |v| v.trim().to_owned())
}

fn main() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fig10-multi-tier.toml");
    let text = std::fs::read_to_string(fixture).expect("fixture");
    let seconds = std::env::var("P5_BENCH_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4700);
    case("multi-tier (36 clients)", &text, seconds);
    case(
        "parallelism (45 clients)",
        &text.replace("parallel = 36", "parallel = 45"),
        1400,
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "nesting: load average {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
}
