//! Loading a session from the trace database (`--db URL --session NAME`); the budget is
//! 2 M messages in ≤ 1.5 s and ≤ 64 bytes of memory per message (issue 15).
//!
//! Builds a session of `P5_BENCH_MESSAGES` (default 2,000,000) messages — a three-tier
//! system, keep-alive connections, every call answered, both ends known — and writes it
//! into a fresh SQLite file through `p5 analyze import`'s path (tracedb's bulk writer). Then
//! loads it three times and prints messages/s, seconds, and bytes per message: the peak of
//! live heap during the load over the heap before it (a counting allocator sees every
//! allocation, the SQLite driver's included) and what the loaded trace keeps. Prints the
//! load average, since other builds share this machine.

use p5_analyze::db;
use p5_analyze::node::NodeKey;
use p5_analyze::session::ImportSource;
use p5_analyze::trace::{Conn, Kind, Message};
use p5_analyze::{Proto, Trace};
use std::time::Instant;

#[path = "common/counting.rs"]
mod counting;

/// `n` messages: clients → 8 web servers → 4 databases, on keep-alive connections.
fn synthetic(n: usize) -> Trace {
    let mut t = Trace::default();
    let clients: Vec<u32> = (0..64)
        .map(|i| t.nodes.intern(&format!("client{i}")))
        .collect();
    let web: Vec<u32> = (0..8).map(|i| t.nodes.intern(&format!("web{i}"))).collect();
    let dbs: Vec<u32> = (0..4).map(|i| t.nodes.intern(&format!("db{i}"))).collect();
    let mut conn_of = std::collections::HashMap::new();
    let mut ordinal: Vec<u64> = Vec::new();
    let mut time = 1_000_000i64;
    let mut i = 0u64;
    while t.messages.len() + 4 <= n {
        let c = clients[(i % 64) as usize];
        let w = web[(i % 8) as usize];
        let d = dbs[(i % 4) as usize];
        for (a, b, depth) in [(c, w, 0i64), (w, d, 1)] {
            let conn = *conn_of.entry((a, b)).or_insert_with(|| {
                t.conns.push(Conn {
                    proto: Proto::Tcp,
                    initiator: a,
                    acceptor: b,
                    initiator_ep: None,
                    acceptor_ep: None,
                    conn_ref: 0,
                });
                ordinal.push(0);
                (t.conns.len() - 1) as u32
            });
            let k = ordinal[conn as usize];
            ordinal[conn as usize] += 1;
            let id = (u64::from(conn) << 32) | k;
            let start = time + depth * 1_000;
            let end = time + 10_000 - depth * 1_000;
            for (kind, src, dst, ts) in [(Kind::Call, a, b, start), (Kind::Ret, b, a, end)] {
                let mut m = Message::new(src, dst);
                m.kind = kind;
                m.call_id = id;
                m.conn = conn;
                m.t_send = ts;
                m.t_recv = ts + 150;
                m.bytes = 100 + (i % 900) as u32;
                m.msg_ref = t.messages.len() as u64 + 1;
                t.messages.push(m);
            }
        }
        time += 3_000;
        i += 1;
    }
    t.sort();
    t
}

fn main() {
    let n: usize = std::env::var("P5_BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    let dir = tempfile::tempdir().expect("temp dir");
    // `P5_BENCH_DB=PATH` keeps the database (and reuses it when it exists).
    let path = std::env::var_os("P5_BENCH_DB")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| dir.path().join("b.sqlite"));
    let url = format!("sqlite:{}", path.display());
    let trace = synthetic(n);
    let n = trace.messages.len();
    if !path.exists() {
        let started = Instant::now();
        let source = ImportSource {
            store: "bench".into(),
            now_wall_ns: 0,
        };
        db::Database::open(&url)
            .and_then(|mut d| d.import("bench", &trace, &source, &mut |_| {}))
            .expect("import");
        println!(
            "db_load: imported {n} messages in {:.2} s",
            started.elapsed().as_secs_f64()
        );
    }
    drop(trace);
    let mut best = f64::MAX;
    let (mut peak, mut kept) = (0usize, 0usize);
    for _ in 0..3 {
        let before = counting::reset_peak();
        let t0 = Instant::now();
        // A new handle each time: the load, not a warm connection, is measured.
        let l = db::Database::open(&url)
            .and_then(|mut d| d.load_trace("bench", NodeKey::ProgramAtHost, &mut |_| {}))
            .expect("load");
        let s = t0.elapsed().as_secs_f64();
        assert_eq!(l.trace.messages.len(), n);
        best = best.min(s);
        peak = counting::peak_since(before);
        kept = counting::LIVE
            .load(std::sync::atomic::Ordering::Relaxed)
            .saturating_sub(before);
        drop(l);
    }
    // The query alone (rows streamed and dropped), for where the time goes.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let raw = rt.block_on(async {
        let db = p5_tracedb::Reader::open(&p5_tracedb::DbUrl::parse(&url).expect("url"))
            .await
            .expect("open");
        let t0 = Instant::now();
        let mut k = 0u64;
        p5_tracedb::read::for_each_message_end(&db, 1, |m| k += m.id as u64 & 1)
            .await
            .expect("query");
        std::hint::black_box(k);
        t0.elapsed().as_secs_f64()
    });
    println!("db_load: of which the query alone (rows decoded, not kept): {raw:.3} s");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "db_load: {n} messages in {best:.3} s = {:.2} M messages/s (budget: 2 M in ≤ 1.5 s)",
        n as f64 / best / 1e6
    );
    println!(
        "db_load: peak {:.1} bytes/message during the load, {:.1} kept by the trace \
         (budget ≤ 64)",
        peak as f64 / n as f64,
        kept as f64 / n as f64
    );
    println!(
        "db_load: load average {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
}
