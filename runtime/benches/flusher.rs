//! Flusher throughput against one producer thread at full speed (issue 21 item 3): the
//! microbenchmark in `sensor.rs` never runs the flusher against a hot producer.
//!
//! One thread records `P5_BENCH_EVENTS` enter/exit events (default 20 M, 16 sensors) as fast
//! as it can while the flusher drains, converts, encodes and writes them to a local spool
//! file. Each mode runs in a child process of its own (the runtime initialises once per
//! process):
//!
//! - `wait` (`P5_FULL=wait`): nothing may be dropped, so the wall time is the flusher's pace;
//! - `grace` (the default): the producer waits while the flusher frees room, drops only after
//!   50 ms without progress; prints what was lost and how long the producer was held;
//! - `drop`: the producer never waits; prints what was lost.
//!
//! Printed per mode: producer ns per event, events drained per wall second and per
//! flusher CPU second (from `/proc/self/task/*/schedstat`), dropped events and percent.
//! `P5_RING` sets the ring size as for programs (default 1 Mi slots).
//!
//! `cargo bench -p p5-runtime --bench flusher`

use p5_runtime::{Config, Mode};
use std::time::Instant;

fn main() {
    if let Ok(mode) = std::env::var("P5_BENCH_CHILD") {
        child(&mode);
        return;
    }
    let exe = std::env::current_exe().expect("own executable");
    for mode in ["wait", "grace", "drop"] {
        let out = std::process::Command::new(&exe)
            .env("P5_BENCH_CHILD", mode)
            .env("P5_FULL", mode)
            .env("P5_THROTTLE", "off")
            .output()
            .expect("run bench child");
        print!("{}", String::from_utf8_lossy(&out.stdout));
        if !out.status.success() {
            eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        }
    }
    println!(
        "(2-core machine shared with other builds: numbers move by 25 % and more between runs)"
    );
}

/// CPU time of this process's flusher thread, ns.
fn flusher_cpu_ns() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    for e in dir.flatten() {
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.trim() == "p5-flusher" {
            let st = std::fs::read_to_string(e.path().join("schedstat")).unwrap_or_default();
            return st
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
        }
    }
    0
}

fn child(mode: &str) {
    let n: u64 = std::env::var("P5_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let config = Config {
        mode: Mode::Local,
        dir: dir.path().to_path_buf(),
        ..Config::from_env()
    };
    let slots = config.ring_slots;
    assert!(p5_runtime::init_with(config), "runtime disabled");
    p5_runtime::enter(1);
    p5_runtime::exit(1);
    p5_runtime::flush();
    let cpu0 = flusher_cpu_ns();
    let t0 = Instant::now();
    for i in 0..n / 2 {
        let s = 0x100 + (i & 15);
        p5_runtime::enter(s);
        p5_runtime::exit(s);
    }
    let produced = t0.elapsed();
    p5_runtime::flush();
    let wall = t0.elapsed();
    let cpu = flusher_cpu_ns().saturating_sub(cpu0);
    let st = p5_runtime::stats();
    let drained = st.events.saturating_sub(2);
    println!(
        "flusher P5_FULL={mode:<5} ring {slots} slots: {n} events, producer {:.1} ns/event, \
         drained {:.1} M events/s wall ({:.2} s), {:.1} M events per flusher CPU-s, \
         dropped {} ({:.2} %), held {} times for {:.1} ms",
        produced.as_nanos() as f64 / n as f64,
        drained as f64 / wall.as_secs_f64() / 1e6,
        wall.as_secs_f64(),
        if cpu > 0 {
            drained as f64 / (cpu as f64 / 1e9) / 1e6
        } else {
            f64::NAN
        },
        st.dropped,
        st.dropped as f64 * 100.0 / n as f64,
        st.waits,
        st.held_ns as f64 / 1e6
    );
}
