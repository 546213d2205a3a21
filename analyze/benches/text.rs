//! Text trace reading speed; the budget is ≥ 2 M lines/s (issue 15). Reads a generated
//! multi-tier trace (both ends recorded, so half the lines pair) and prints lines/s, then
//! lets criterion measure the same with a throughput in elements (lines).

use criterion::{Criterion, Throughput};
use p5_analyze::maketrace::{self, Config, Record};
use p5_analyze::text::{self, ReadOptions};
use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

fn trace_bytes() -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fig10-multi-tier.toml");
    let cfg = Config::parse(&std::fs::read_to_string(&path).expect("fixture"), &path)
        .expect("fixture parses");
    let g = maketrace::generate(
        &cfg,
        &maketrace::Options {
            seed: 1,
            duration: Some(1_000_000_000_000),
            record: Some(Record::Both),
            queue: 64,
            ..maketrace::Options::default()
        },
    );
    g.text()
}

/// The same trace with named ids (`id37`, as in [P5] §6.5) instead of numbers.
fn named_ids(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + bytes.len() / 10);
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        match line.iter().rposition(|&b| b == b'\t') {
            Some(i) => {
                out.extend_from_slice(&line[..=i]);
                out.extend_from_slice(b"id");
                out.extend_from_slice(&line[i + 1..]);
            }
            None => out.extend_from_slice(line),
        }
    }
    out
}

/// Prints the best of five reads in the unit of the budget.
fn measure(what: &str, bytes: &[u8]) {
    let lines = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t0 = Instant::now();
        let t = text::read(black_box(bytes), "bench", ReadOptions::default());
        let dt = t0.elapsed().as_secs_f64();
        black_box(t.trace.messages.len());
        best = best.min(dt);
    }
    println!(
        "text read, {what}: {lines} lines, {:.1} MB in {:.3} s: {:.2} M lines/s (budget ≥ 2 M lines/s)",
        bytes.len() as f64 / 1e6,
        best,
        lines as f64 / best / 1e6
    );
}

fn main() {
    let bytes = trace_bytes();
    let named = named_ids(&bytes);
    let lines = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
    measure("numeric ids", &bytes);
    measure("named ids", &named);
    let mut c = Criterion::default().configure_from_args().sample_size(10);
    let mut g = c.benchmark_group("text");
    g.throughput(Throughput::Elements(lines));
    g.bench_function("read", |b| {
        b.iter(|| text::read(black_box(&bytes), "bench", ReadOptions::default()))
    });
    g.bench_function("read_named_ids", |b| {
        b.iter(|| text::read(black_box(&named), "bench", ReadOptions::default()))
    });
    g.bench_function("read_keep_order", |b| {
        b.iter(|| text::read(black_box(&bytes), "bench", ReadOptions { keep_order: true }))
    });
    g.finish();
    c.final_summary();
}
