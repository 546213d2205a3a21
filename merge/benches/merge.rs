//! Merge throughput: a synthetic session (default 10 M events; `P5_BENCH_EVENTS` to change)
//! is written with the wire encoders, then merged into SQLite and PostgreSQL; prints events/s,
//! rows/s and the peak resident memory of the merge (VmHWM, reset before each merge).
//! Baseline: the same store read and decoded without writing (`scan only`).
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

/// Writes the session: each thread repeats groups of nested calls (depth 3); every 10th group
/// starts with a send (even processes) or receive (odd) of 256 bytes on the pair's TCP
/// connection.
fn build(root: &Path, total: u64) -> u64 {
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
            while frame.len() + 8 <= PER_FRAME && emitted[st] + (frame.len() as u64) < per_stream {
                let base = t[st];
                iteration[st] += 1;
                if iteration[st].is_multiple_of(10) {
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
                frame.push(Event::Enter {
                    t: base + 2_100,
                    sensor: 1,
                });
                frame.push(Event::Enter {
                    t: base + 2_200,
                    sensor: 2,
                });
                frame.push(Event::Enter {
                    t: base + 2_300,
                    sensor: 3,
                });
                frame.push(Event::Exit {
                    t: base + 2_500,
                    sensor: 3,
                });
                frame.push(Event::Exit {
                    t: base + 2_700,
                    sensor: 2,
                });
                frame.push(Event::Exit {
                    t: base + 3_000,
                    sensor: 1,
                });
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

fn merge(store: &Path, url: &str, label: &str, events: u64) {
    let mut args = p5_merge::MergeArgs::new(store);
    args.db = Some(url.to_owned());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    reset_peak();
    let t0 = Instant::now();
    let s = rt.block_on(p5_merge::merge_store(&args)).unwrap();
    let dt = t0.elapsed().as_secs_f64();
    let rows: u64 = s[0].rows.values().sum();
    println!(
        "{label:<12} {events:>10} events in {dt:>6.2} s = {:>6.2} M events/s, {rows} rows = {:.2} M rows/s, peak RSS {:.0} MiB, {} messages matched",
        events as f64 / dt / 1e6,
        rows as f64 / dt / 1e6,
        peak_mib(),
        s[0].matched
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("merge: bench");
        return;
    }
    let total: u64 = std::env::var("P5_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let t0 = Instant::now();
    let events = build(&store, total);
    let bytes: u64 = std::fs::read_dir(store.join("bench"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    println!(
        "store: {events} events, {:.1} MB ({:.2} B/event), written in {:.2} s",
        bytes as f64 / 1e6,
        bytes as f64 / events as f64,
        t0.elapsed().as_secs_f64()
    );

    // Baseline: read and decode everything once, no database.
    reset_peak();
    let t0 = Instant::now();
    let dir = p5_logserver::reader::StoreDir::open(&store)
        .unwrap()
        .session("bench")
        .unwrap();
    let scan = p5_merge::load::scan(&dir, |_| {}).unwrap();
    let dt = t0.elapsed().as_secs_f64();
    println!(
        "{:<12} {:>10} events in {dt:>6.2} s = {:>6.2} M events/s, peak RSS {:.0} MiB",
        "scan only",
        scan.events,
        scan.events as f64 / dt / 1e6,
        peak_mib()
    );
    drop(scan);

    let sqlite = tmp.path().join("bench.sqlite");
    merge(
        &store,
        &format!("sqlite:{}", sqlite.display()),
        "sqlite",
        events,
    );

    let base = std::env::var("P5_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let schema = format!("p5bench_{}", std::process::id());
    let ok = rt.block_on(async {
        let Ok(mut c) = sqlx::PgConnection::connect(&base).await else {
            return false;
        };
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&mut c)
            .await
            .is_ok()
    });
    if !ok {
        println!("postgres     skipped: {base} not reachable");
        return;
    }
    let sep = if base.contains('?') { '&' } else { '?' };
    merge(
        &store,
        &format!("{base}{sep}options=-csearch_path%3D{schema}"),
        "postgres",
        events,
    );
    rt.block_on(async {
        if let Ok(mut c) = sqlx::PgConnection::connect(&base).await {
            let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
                .execute(&mut c)
                .await;
        }
    });
}
