//! Perfetto export throughput (budget: 10 M events in ≤ 5 s at ≤ 4 bytes per event, memory
//! bounded; design.md).
//!
//! `cargo bench -p p5-export --bench export` writes (once, cached in the temp directory) the
//! synthetic session of `tests/fixture` with `P5_BENCH_EVENTS` enter/exit events (default
//! 10 M: 16 threads on 4 hosts, 5 M calls, 4 M states, 1 M messages, 1 M on-CPU stretches,
//! IRQs, marks and metrics) into SQLite, then measures, each `P5_BENCH_RUNS` times (default
//! 3; the median is printed):
//! - the baseline: the same rows read through the same streaming queries and copied as
//!   plain integers into a buffer (what any export must pay for reading);
//! - the export to a file, deflate level 1 (the default), and with `P5_BENCH_ALL=1` also
//!   level 6 and uncompressed: seconds, session events/s, bytes per session event and per
//!   track event, the ratio to the baseline, and the peak resident memory (VmHWM, reset
//!   before each run).
//!
//! The load (`/proc/loadavg`) is printed before and after: other builds on the machine slow
//! every figure.

#[path = "../tests/fixture/mod.rs"]
mod fixture;

use p5_tracedb::stream::{Cursor, Stream};
use p5_tracedb::{DbUrl, Reader, read};
use std::time::{Duration, Instant};

fn main() {
    let events: i64 = env("P5_BENCH_EVENTS").unwrap_or(10_000_000);
    let runs = env("P5_BENCH_RUNS").unwrap_or(3).max(1) as usize;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let path = std::env::temp_dir().join(format!("p5-export-bench-v1-{events}.sqlite"));
    if !path.exists() {
        let tmp = path.with_extension("tmp");
        let _ = std::fs::remove_file(&tmp);
        let t = Instant::now();
        let iters = events / 10 / fixture::THREADS;
        rt.block_on(fixture::write(
            &format!("sqlite:{}", tmp.display()),
            "bench",
            iters,
        ));
        std::fs::rename(&tmp, &path).expect("rename");
        println!("generated {} in {:.1?}", path.display(), t.elapsed());
    }
    let url = DbUrl::parse(&format!("sqlite:{}", path.display())).expect("url");
    let db = rt.block_on(Reader::open(&url)).expect("open");
    let session = rt.block_on(read::sessions(&db)).expect("sessions");
    let events = session[0].events as f64;
    println!("load before: {}", load());
    println!(
        "session: {} events, database {} MiB",
        events,
        mib(std::fs::metadata(&path).map_or(0, |m| m.len()))
    );

    let (base, rows) = median(runs, || baseline(&db, rt.handle()));
    println!(
        "baseline (stream and copy the rows): {:.2} s ({:.2} s CPU), {} rows, {:.0} rows/s",
        base.as_secs_f64(),
        last_cpu(),
        rows,
        rows as f64 / base.as_secs_f64()
    );
    let mut levels = vec![Some(1)];
    if env("P5_BENCH_ALL").is_some() {
        levels.extend([Some(6), None]);
    }
    let out = std::env::temp_dir().join("p5-export-bench.pftrace");
    for level in levels {
        let mut peak = 0.0f64;
        let mut last = p5_export::Summary::default();
        let (t, _) = median(runs, || {
            reset_peak();
            let mut opts = p5_export::Options::new("bench");
            opts.compression = level;
            let file = std::fs::File::create(&out).expect("create");
            let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
            let s =
                p5_export::perfetto(&db, rt.handle(), &opts, &mut w, &mut |_| {}).expect("export");
            drop(w);
            peak = peak.max(peak_mib());
            last = s;
            0
        });
        let secs = t.as_secs_f64();
        let label = level.map_or("uncompressed".to_owned(), |l| format!("deflate {l}"));
        let verdict = if secs <= 5.0 * events / 1e7 && last.bytes as f64 <= 4.0 * events {
            "within budget"
        } else {
            "OVER BUDGET"
        };
        println!(
            "export, {label}: {secs:.2} s ({:.2} s CPU; {:.0} session events/s, {:.2}x baseline), {} MiB: \
             {:.2} bytes/session event, {:.2} bytes/track event ({} track events, {} packets, \
             {} MiB before compression), peak RSS {peak:.0} MiB — {verdict}",
            last_cpu(),
            events / secs,
            secs / base.as_secs_f64(),
            mib(last.bytes),
            last.bytes as f64 / events,
            last.bytes as f64 / last.events as f64,
            last.events,
            last.packets,
            mib(last.raw_bytes),
        );
    }
    let _ = std::fs::remove_file(&out);
    println!("load after: {}", load());
}

/// Reads every row the export reads, through the same queries, and copies its integers.
fn baseline(db: &Reader, rt: &tokio::runtime::Handle) -> u64 {
    let stream = Stream::open(db, rt).expect("stream");
    let threads = rt.block_on(read::threads(db, 1)).expect("threads");
    let hosts = rt.block_on(read::hosts(db, 1)).expect("hosts");
    let mut sink = Vec::with_capacity(1 << 20);
    let mut rows = 0u64;
    let mut drain = |mut c: Cursor, ints: &[usize]| {
        while let Some(r) = c.next().expect("row") {
            for &i in ints {
                sink.extend_from_slice(&r.i64(i).expect("int").to_le_bytes());
            }
            rows += 1;
            if sink.len() > 1 << 20 {
                std::hint::black_box(&sink);
                sink.clear();
            }
        }
    };
    for t in &threads {
        drain(stream.intervals(1, t.id).expect("q"), &[0, 1, 2, 3]);
        drain(stream.states(1, t.id).expect("q"), &[0, 1, 4, 5]);
        drain(stream.sends(1, t.id).expect("q"), &[0, 1]);
        drain(stream.receives(1, t.id).expect("q"), &[0, 1]);
        drain(stream.sched_of_thread(1, t.id).expect("q"), &[0, 1, 2]);
        drain(stream.marks(1, t.id).expect("q"), &[0, 1]);
    }
    for h in &hosts {
        drain(
            stream.sched_unattributed(1, h.id).expect("q"),
            &[0, 1, 2, 3],
        );
        drain(stream.irqs(1, h.id).expect("q"), &[0, 1, 2, 3, 4]);
    }
    let metrics = rt.block_on(read::host_metrics(db, 1)).expect("metrics");
    for m in metrics {
        drain(stream.metric_samples(1, m.id).expect("q"), &[0, 1]);
    }
    rows
}

/// The median wall time of `runs` calls (and the CPU seconds of that run, all threads).
fn median<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..runs {
        let (t, c) = (Instant::now(), cpu_secs());
        last = Some(f());
        times.push((t.elapsed(), cpu_secs() - c));
    }
    times.sort_by_key(|t| t.0);
    let (wall, cpu) = times[times.len() / 2];
    CPU.with(|c| c.set(cpu));
    (wall, last.expect("one run"))
}

thread_local! {
    /// CPU seconds of the median run of the last `median`.
    static CPU: std::cell::Cell<f64> = const { std::cell::Cell::new(0.0) };
}

fn last_cpu() -> f64 {
    CPU.with(|c| c.get())
}

/// User + system CPU seconds of this process so far (`/proc/self/stat`, 100 ticks a second).
fn cpu_secs() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0
}

fn env(name: &str) -> Option<i64> {
    std::env::var(name).ok()?.parse().ok()
}

fn mib(b: u64) -> String {
    format!("{:.1}", b as f64 / (1 << 20) as f64)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_owned()
}

fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn peak_mib() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}
