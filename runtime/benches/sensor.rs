//! Sensor cost against its baselines, and wire size of a realistic trace.
//!
//! - `baseline/rdtsc`, `baseline/clock_gettime`: one bare timestamp read;
//! - `rust/enter_exit`, `rust/scope`: an enter+exit pair through the Rust API;
//! - `c_abi/enter_exit`: the same through the `extern "C"` functions, called via
//!   `black_box`ed function pointers so nothing is inlined;
//! - `disabled/*`: a paused sensor;
//! - a printed summary: ns per operation from plain timing loops, the ratio of one event to
//!   one timestamp read (budget ≤ 1.3×), and bytes per event of an encoded realistic trace
//!   (budget ≤ 8 B).
//!
//! The runtime runs in discard mode (`P5_DISCARD`): the flusher drains the rings without
//! keeping anything, so the numbers are the application thread's cost.

use criterion::{Criterion, criterion_group, criterion_main};
use p5_runtime::ffi::{p5_enter, p5_exit};
use p5_runtime::{Config, Mode};
use p5_wire::data::{self, DataHeader};
use p5_wire::{CommOp, Endpoint, Event, EventEncoder};
use std::hint::black_box;
use std::time::Instant;

fn setup() {
    let config = Config {
        mode: Mode::Discard,
        ..Config::from_env()
    };
    assert!(p5_runtime::init_with(config), "runtime disabled");
}

fn sensors(c: &mut Criterion) {
    setup();
    let mut g = c.benchmark_group("baseline");
    g.bench_function("rdtsc", |b| {
        b.iter(|| black_box(p5_runtime::clock::rdtsc()))
    });
    g.bench_function("clock_gettime", |b| {
        b.iter(|| black_box(p5_runtime::clock::mono_ns()))
    });
    g.finish();

    let mut g = c.benchmark_group("rust");
    g.bench_function("enter_exit", |b| {
        b.iter(|| {
            p5_runtime::enter(black_box(0x11));
            p5_runtime::exit(black_box(0x11));
        })
    });
    g.bench_function("scope", |b| {
        b.iter(|| {
            let _s = p5_runtime::scope(black_box(0x12));
        })
    });
    g.finish();

    let enter: extern "C" fn(u64) = black_box(p5_enter);
    let exit: extern "C" fn(u64) = black_box(p5_exit);
    let mut g = c.benchmark_group("c_abi");
    g.bench_function("enter_exit", |b| {
        b.iter(|| {
            enter(black_box(0x13));
            exit(black_box(0x13));
        })
    });
    g.finish();

    p5_runtime::set_enabled(false);
    let mut g = c.benchmark_group("disabled");
    g.bench_function("rust_enter", |b| {
        b.iter(|| p5_runtime::enter(black_box(0x14)))
    });
    g.bench_function("c_enter", |b| b.iter(|| enter(black_box(0x14))));
    g.finish();
    p5_runtime::set_enabled(true);
}

/// ns per call of `f`, best of a few plain timing loops.
fn per_call(mut f: impl FnMut()) -> f64 {
    const N: u32 = 5_000_000;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..N {
            f();
        }
        best = best.min(t.elapsed().as_nanos() as f64 / N as f64);
    }
    best
}

fn summary() {
    setup();
    let enter: extern "C" fn(u64) = black_box(p5_enter);
    let exit: extern "C" fn(u64) = black_box(p5_exit);
    let rdtsc = per_call(|| {
        black_box(p5_runtime::clock::rdtsc());
    });
    let mono = per_call(|| {
        black_box(p5_runtime::clock::mono_ns());
    });
    let rust = per_call(|| {
        p5_runtime::enter(black_box(0x21));
        p5_runtime::exit(black_box(0x21));
    });
    let cabi = per_call(|| {
        enter(black_box(0x22));
        exit(black_box(0x22));
    });
    p5_runtime::set_enabled(false);
    let off = per_call(|| p5_runtime::enter(black_box(0x23)));
    let off_c = per_call(|| enter(black_box(0x23)));
    p5_runtime::set_enabled(true);
    println!("\nsummary (best of 5 × 5M calls):");
    println!("  rdtsc                     {rdtsc:6.2} ns");
    println!("  clock_gettime             {mono:6.2} ns");
    println!(
        "  rust enter+exit pair      {rust:6.2} ns  = {:.2} × rdtsc per event (budget 1.3)",
        rust / 2.0 / rdtsc
    );
    println!(
        "  C ABI enter+exit pair     {cabi:6.2} ns  = {:.2} × rdtsc per event (budget 1.3)",
        cabi / 2.0 / rdtsc
    );
    println!("  disabled rust sensor      {off:6.2} ns  (budget 1.0)");
    println!("  disabled C ABI sensor     {off_c:6.2} ns");
    let s = p5_runtime::stats();
    println!(
        "  runtime: {} events drained, {} dropped",
        s.events, s.dropped
    );
    let t = Instant::now();
    let (events, bytes) = realistic_trace();
    let encode_ns = t.elapsed().as_nanos() as f64 / events as f64;
    println!(
        "  realistic trace: {events} events in {bytes} bytes = {:.2} B/event (budget 8)",
        bytes as f64 / events as f64
    );
    println!("  encoding it (trace generation included): {encode_ns:.1} ns/event");
}

/// Encodes a synthetic but realistic trace the way the flusher does — one `Events` frame
/// per 20 ms drain (split at 64 KiB), each with its envelope, header and sensor table — and
/// returns (events, bytes). The program: a call tree over 60 functions, nesting up to 6
/// deep, 0.3–5 µs between events, a send or receive (with duration and byte count) every
/// ~100 events and an occasional counter.
fn realistic_trace() -> (u64, usize) {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut enc = EventEncoder::new();
    let mut out = Vec::new();
    let mut stack: Vec<u64> = Vec::new();
    let (mut t, mut events, mut seq) = (1_000_000u64, 0u64, 1u64);
    let mut drain_end = t + 20_000_000;
    let flush = |enc: &mut EventEncoder, out: &mut Vec<u8>, seq: &mut u64| {
        if !enc.is_empty() {
            let h = DataHeader {
                stream: 1,
                seq: *seq,
                t_p: 0,
            };
            data::encode_events(out, h, 0, enc);
            *seq += 1;
            enc.clear();
        }
    };
    while events < 2_000_000 {
        t += 300 + rnd(4700);
        let sensor_base = 0x5a17_0000_0000_0000u64;
        let r = rnd(100);
        if r == 0 {
            let op = if rnd(2) == 0 {
                CommOp::Send
            } else {
                CommOp::Recv
            };
            let duration = 2_000 + rnd(30_000);
            enc.push(&Event::Comm {
                t,
                sensor: sensor_base | 0x1000 | op as u64,
                op,
                fd: 7,
                duration,
                result: 64 + rnd(4000) as i64,
                peer: Endpoint::None,
            });
            t += duration;
        } else if r == 1 {
            enc.push(&Event::Counter {
                t,
                sensor: sensor_base | 0x2000,
                value: rnd(10_000) as i64,
            });
        } else if !stack.is_empty() && (stack.len() >= 6 || rnd(2) == 0) {
            let s = stack.pop().unwrap_or_default();
            enc.exit(t, s);
        } else {
            let s = sensor_base | rnd(60);
            stack.push(s);
            enc.enter(t, s);
        }
        events += 1;
        if enc.encoded_len() >= 64 * 1024 || t >= drain_end {
            flush(&mut enc, &mut out, &mut seq);
            drain_end = t + 20_000_000;
        }
    }
    flush(&mut enc, &mut out, &mut seq);
    (events, out.len())
}

fn summary_bench(_c: &mut Criterion) {
    summary();
}

criterion_group!(benches, sensors, summary_bench);
criterion_main!(benches);
