//! The analysis of a large recording of a real service: the services test's stack (nginx →
//! two Python backends → redis, PostgreSQL and MariaDB; `tests/services/stack.py`) recorded
//! by `p5 record --preload` with `P5_BENCH_REQUESTS` requests (default 10,000) from
//! `P5_BENCH_CLIENTS` closed-loop clients (default 8, also measured at 16 unless
//! `P5_BENCH_CLIENTS` is set), then `p5 analyze nesting` and `p5 analyze linking` as a user
//! runs them on it, `P5_BENCH_RUNS` times each (default 3). Recording is not timed.
//!
//! Prints, per client count, the requests and the mean in flight, the median wall time of
//! each analysis (the whole command: reading the database, the algorithm, saving the run),
//! and each request's path scored against the tiers' logs. Budget: ≤ 2 s for 10,000
//! requests. `cargo bench -p p5-cli --bench services`.

#[path = "../tests/services/stack.rs"]
mod stack;
#[path = "../tests/services/truth.rs"]
mod truth;

use std::time::Instant;

fn env_or(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let requests = env_or("P5_BENCH_REQUESTS", 10_000);
    let runs = env_or("P5_BENCH_RUNS", 3).max(1);
    let clients: Vec<usize> = match std::env::var("P5_BENCH_CLIENTS") {
        Ok(v) => v.split(',').filter_map(|c| c.trim().parse().ok()).collect(),
        Err(_) => vec![8, 16],
    };
    for c in clients {
        let t = Instant::now();
        let rec = stack::record(stack::preloaded(c, requests, true));
        eprintln!(
            "recorded {requests} requests from {c} clients in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        let mut printed = Vec::new();
        let mut line = Vec::new();
        for algorithm in ["nesting", "linking"] {
            let mut times = Vec::new();
            let mut last = String::new();
            for _ in 0..runs {
                let t = Instant::now();
                last = stack::analyze(&rec, algorithm);
                times.push(t.elapsed().as_secs_f64());
            }
            line.push(format!("{algorithm} median {:.2} s", median(times)));
            printed.push((algorithm, last));
        }
        let o = stack::score(&rec, printed);
        let exact: Vec<String> = o
            .scores
            .iter()
            .map(|(a, s, _)| {
                format!(
                    "{a} {:.2} % exact ({} without instance)",
                    100.0 * s.exact_share(),
                    s.without_instance
                )
            })
            .collect();
        println!(
            "services analysis: {} requests, {c} clients, {:.2} in flight, {} messages: {}; {} \
             (budget 2 s per 10,000 requests)",
            o.truth.requests.len(),
            o.truth.in_flight,
            o.truth.of.len(),
            line.join(", "),
            exact.join(", ")
        );
    }
}
