//! Merge throughput. Synthetic sessions are written with the wire encoders and merged into
//! SQLite and PostgreSQL; every line prints events/s, rows/s, the peak resident memory of the
//! merge (VmHWM, reset before each merge) and the ratio to the baseline: the same store read
//! and decoded without writing (`scan only`, printed first for each store). Each store is
//! benched in a fresh process of this binary.
//!
//! Lines: the ordinary session (nested calls of depth 3, a socket call every 10th group) at
//! each size of `P5_BENCH_SIZES` (comma-separated events; default `1000000,3000000,10000000`;
//! `P5_BENCH_EVENTS=N` is the single size N), a communication-heavy session (a third of the
//! events are socket calls; `P5_BENCH_COMM` events, default 3 M, 0 to skip) and, with
//! `P5_BENCH_RECORDED=STORE`, every session of a store recorded with the runtime (see
//! ARCHITECTURE.md for the recording command). `P5_BENCH_BACKENDS=sqlite` skips PostgreSQL, `=postgres` SQLite;
//! `RUST_LOG=p5_merge=debug` prints the merge's phases with their times.
//! PostgreSQL: `P5_TEST_PG_URL` or `postgres://postgres@127.0.0.1:5432/test`; skipped with a
//! note when unreachable. Run: `cargo bench -p p5-merge --bench merge`.

#[path = "../tests/fixture/mod.rs"]
mod fixture;

use fixture::{StoreBuilder, events, identity, stream_open};
use p5_wire::data::Ping;
use p5_wire::frame::FrameType;
use p5_wire::{CommOp, Endpoint, Event, SocketProto};
use sqlx::Connection;
use std::path::Path;
use std::time::Instant;

const PROCESSES: u64 = 4;
const THREADS: u32 = 2;
const PER_FRAME: usize = 4096;

/// What a synthetic session's threads do.
#[derive(Debug, Clone, Copy)]
struct Shape {
    /// Nested calls per group.
    depth: u32,
    /// Every how many groups start with a socket call.
    comm_every: u64,
}

/// The ordinary session: depth 3, a socket call every 10th group.
const ORDINARY: Shape = Shape {
    depth: 3,
    comm_every: 10,
};

/// A third of the events are socket calls: one call and one socket call per group.
const COMM_HEAVY: Shape = Shape {
    depth: 1,
    comm_every: 1,
};

/// Writes the session: each thread repeats groups of nested calls; every `comm_every`th group
/// starts with a send (even processes) or receive (odd) of 256 bytes on the pair's TCP
/// connection.
fn build(root: &Path, total: u64, shape: Shape) -> u64 {
    let mut b = StoreBuilder::new(root, "bench", 1, 1_000_000_000);
    let streams = PROCESSES * THREADS as u64;
    let per_stream = total / streams;
    let mut t_s = 1_000u64;
    for p in 0..PROCESSES {
        let id = identity(
            0x100 + p,
            10 + p as u32,
            &format!("boot-{p}"),
            "h",
            "bench",
            1 + p,
            2,
        );
        b.process(t_s, &id);
        for s in 0..THREADS {
            b.data(
                t_s,
                0x100 + p,
                FrameType::StreamOpen,
                &stream_open(s + 1, 0, 1, 100 + s as u64, "w"),
            );
        }
    }
    let mut written = 0u64;
    let mut seq = vec![1u64; streams as usize];
    let mut t = vec![0u64; streams as usize];
    let mut frame: Vec<Event> = Vec::with_capacity(PER_FRAME);
    let mut emitted = vec![0u64; streams as usize];
    let mut iteration = vec![0u64; streams as usize];
    loop {
        let mut progress = false;
        for st in 0..streams as usize {
            if emitted[st] >= per_stream {
                continue;
            }
            progress = true;
            let p = st as u64 / THREADS as u64;
            let tid = st as u32 % THREADS;
            frame.clear();
            if seq[st] == 1 {
                let (l, r) = if p.is_multiple_of(2) {
                    (
                        format!("10.0.0.1:{}", 4000 + tid),
                        format!("10.0.0.2:{}", 5000 + tid),
                    )
                } else {
                    (
                        format!("10.0.0.2:{}", 5000 + tid),
                        format!("10.0.0.1:{}", 4000 + tid),
                    )
                };
                frame.push(Event::Socket {
                    t: t[st],
                    sensor: 9,
                    fd: 3,
                    proto: SocketProto::Tcp,
                    local: Endpoint::Inet(l.parse().unwrap()),
                    peer: Endpoint::Inet(r.parse().unwrap()),
                });
            }
            let group = 2 * shape.depth as usize + 1;
            while frame.len() + group <= PER_FRAME
                && emitted[st] + (frame.len() as u64) < per_stream
            {
                let base = t[st];
                iteration[st] += 1;
                if iteration[st].is_multiple_of(shape.comm_every) {
                    let op = if p.is_multiple_of(2) {
                        CommOp::Send
                    } else {
                        CommOp::Recv
                    };
                    frame.push(Event::Comm {
                        t: base,
                        sensor: 7,
                        op,
                        fd: 3,
                        duration: 2_000,
                        result: 256,
                        peer: Endpoint::None,
                    });
                }
                for d in 0..shape.depth {
                    frame.push(Event::Enter {
                        t: base + 2_100 + 100 * u64::from(d),
                        sensor: 1 + u64::from(d),
                    });
                }
                for d in (0..shape.depth).rev() {
                    frame.push(Event::Exit {
                        t: base + 3_000 - 250 * u64::from(d),
                        sensor: 1 + u64::from(d),
                    });
                }
                t[st] = base + 3_100;
            }
            let p_uid = 0x100 + p;
            let t_p = t[st] + 500;
            t_s = t_s.max(t_p + 1_000_000 + 20_000 * p) + 1;
            b.data(
                t_s,
                p_uid,
                FrameType::Events,
                &events(st as u32 % THREADS + 1, seq[st], t_p, 0, &frame),
            );
            if seq[st].is_multiple_of(16) {
                b.ping(
                    t_s + 10,
                    p_uid,
                    Ping {
                        t_p: t_p + 5,
                        echo_t_s: t_s - 500,
                        echo_t_p: t_p - 100,
                    },
                );
            }
            seq[st] += 1;
            emitted[st] += frame.len() as u64;
            written += frame.len() as u64;
        }
        if !progress {
            break;
        }
    }
    b.finish();
    written
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

/// One merge of every session of `store` into `url`; prints a line against `scan` (events/s).
fn merge(store: &Path, url: &str, label: &str, scan: f64) {
    let mut args = p5_merge::MergeOptions::new(store);
    args.db = Some(url.to_owned());
    // As `p5 merge` runs it (cli/src/merge.rs): two workers, so the database task runs
    // beside the merge's own thread.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    reset_peak();
    let t0 = Instant::now();
    let s = rt.block_on(p5_merge::merge_store(&args)).unwrap();
    let dt = t0.elapsed().as_secs_f64();
    let events: u64 = s.iter().map(|s| s.events).sum();
    let rows: u64 = s.iter().flat_map(|s| s.rows.values()).sum();
    let matched: u64 = s.iter().map(|s| s.matched).sum();
    let rate = events as f64 / dt;
    println!(
        "{label:<22} {events:>10} events in {dt:>6.2} s = {:>5.2} M events/s, {rows} rows = {:.2} M rows/s, peak RSS {:.0} MiB, {:.3} of scan only, {matched} messages matched",
        rate / 1e6,
        rows as f64 / dt / 1e6,
        peak_mib(),
        rate / scan,
    );
}

/// Reads and decodes every session of `store` without writing; prints and returns events/s.
fn scan_only(store: &Path, label: &str) -> f64 {
    reset_peak();
    let t0 = Instant::now();
    let mut events = 0;
    for dir in p5_logserver::reader::StoreDir::open(store)
        .unwrap()
        .sessions()
        .unwrap()
    {
        events += p5_merge::load::scan(&dir, |_| {}).unwrap().events;
    }
    let dt = t0.elapsed().as_secs_f64();
    let rate = events as f64 / dt;
    println!(
        "{label:<22} {events:>10} events in {dt:>6.2} s = {:>5.2} M events/s, peak RSS {:.0} MiB",
        rate / 1e6,
        peak_mib()
    );
    rate
}

/// Writes a synthetic session of `total` events; prints its size.
fn synthetic(root: &Path, total: u64, shape: Shape) {
    let t0 = Instant::now();
    let events = build(root, total, shape);
    let bytes: u64 = std::fs::read_dir(root.join("bench"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    println!(
        "store: {events} events ({shape:?}), {:.1} MB ({:.2} B/event), written in {:.2} s",
        bytes as f64 / 1e6,
        bytes as f64 / events as f64,
        t0.elapsed().as_secs_f64()
    );
}

/// The databases a store is merged into.
struct Targets {
    dir: tempfile::TempDir,
    /// PostgreSQL base URL, if reachable and wanted.
    pg: Option<String>,
    /// SQLite wanted.
    sqlite: bool,
    n: u32,
}

impl Targets {
    fn new() -> Self {
        let backends = std::env::var("P5_BENCH_BACKENDS").unwrap_or_default();
        let base = std::env::var("P5_TEST_PG_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
        let want_pg = backends.is_empty() || backends.contains("postgres");
        let pg = want_pg.then(|| pg_exec(&base, "SELECT 1").then_some(base.clone()));
        match &pg {
            Some(None) => println!("postgres skipped: {base} not reachable"),
            None => println!("postgres skipped: P5_BENCH_BACKENDS={backends}"),
            Some(Some(_)) => {}
        }
        Targets {
            dir: tempfile::tempdir().unwrap(),
            pg: pg.flatten(),
            sqlite: backends.is_empty() || backends.contains("sqlite"),
            n: 0,
        }
    }

    /// Merges `store` into a fresh SQLite file and a fresh PostgreSQL schema.
    fn run(&mut self, store: &Path, what: &str, scan: f64) {
        self.n += 1;
        if self.sqlite {
            let file = self.dir.path().join(format!("bench{}.sqlite", self.n));
            merge(
                store,
                &format!("sqlite:{}", file.display()),
                &format!("sqlite {what}"),
                scan,
            );
            let _ = std::fs::remove_file(&file);
        }
        let Some(base) = self.pg.clone() else {
            return;
        };
        let schema = format!("p5bench_{}_{}", std::process::id(), self.n);
        if !pg_exec(&base, &format!("CREATE SCHEMA {schema}")) {
            println!("postgres: cannot create schema {schema}");
            return;
        }
        let sep = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{sep}options=-csearch_path%3D{schema}");
        merge(store, &url, &format!("postgres {what}"), scan);
        pg_exec(&base, &format!("DROP SCHEMA {schema} CASCADE"));
    }
}

/// Runs one statement on a fresh connection; false if anything fails.
fn pg_exec(url: &str, sql: &str) -> bool {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let Ok(mut c) = sqlx::PgConnection::connect(url).await else {
            return false;
        };
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut c)
            .await
            .is_ok()
    })
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// Runs the bench once per store, each in a fresh process (`P5_BENCH_ONE`), so that one
/// store's peak RSS does not carry the allocations left from the one before.
fn per_store(stores: &[String]) {
    let exe = std::env::current_exe().unwrap();
    for one in stores {
        let status = std::process::Command::new(&exe)
            .args(std::env::args().skip(1))
            .env("P5_BENCH_ONE", one)
            .status()
            .unwrap();
        assert!(status.success(), "bench child for {one} failed");
    }
}

/// One store: `ordinary:N`, `comm:N` or `recorded:PATH`.
fn one(spec: &str) {
    let mut targets = Targets::new();
    let (kind, arg) = spec.split_once(':').unwrap();
    if kind == "recorded" {
        let store = Path::new(arg);
        let scan = scan_only(store, "scan only recorded");
        targets.run(store, "recorded", scan);
        return;
    }
    let n: u64 = arg.parse().unwrap();
    let (shape, label) = if kind == "comm" {
        (COMM_HEAVY, " comm-heavy")
    } else {
        (ORDINARY, "")
    };
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    synthetic(&store, n, shape);
    let what = format!("{}M{label}", n as f64 / 1e6);
    let scan = scan_only(&store, &format!("scan only {what}"));
    targets.run(&store, &what, scan);
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("merge: bench");
        return;
    }
    if std::env::var_os("RUST_LOG").is_some() {
        // Phase timings: `RUST_LOG=p5_merge=debug`.
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .init();
    }
    if let Ok(spec) = std::env::var("P5_BENCH_ONE") {
        one(&spec);
        return;
    }
    let sizes: Vec<u64> = match (std::env::var("P5_BENCH_SIZES"), env_u64("P5_BENCH_EVENTS")) {
        (Ok(list), _) => list
            .split(',')
            .filter_map(|v| v.trim().parse().ok())
            .collect(),
        (Err(_), Some(n)) => vec![n],
        _ => vec![1_000_000, 3_000_000, 10_000_000],
    };
    let comm = env_u64("P5_BENCH_COMM").unwrap_or(3_000_000);
    let mut stores: Vec<String> = sizes.iter().map(|n| format!("ordinary:{n}")).collect();
    if comm > 0 {
        stores.push(format!("comm:{comm}"));
    }
    if let Ok(recorded) = std::env::var("P5_BENCH_RECORDED") {
        stores.push(format!("recorded:{recorded}"));
    }
    per_store(&stores);
}
