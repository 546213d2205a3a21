//! `p5 analyze --db URL --session NAME` on a real merged p5 session: the cracker case study
//! recorded and merged by `p5 demo` (real processes, a real log server, TCP through the
//! runtime). Under every `--node` key the messages are all read, calls go initiator →
//! acceptor and returns back, and the k-th call and the k-th return of a connection share
//! one call id that no other connection uses; the same store merged into PostgreSQL reads
//! as the same trace.

use p5_analyze::db::Database;
use p5_analyze::node::NodeKey;
use p5_analyze::{Kind, Trace};
use p5_tracedb::{DbUrl, Reader, read};
use std::collections::{HashMap, HashSet};
use std::process::Command;

fn demo(out: &std::path::Path) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_p5"))
        .args([
            "demo",
            "--no-serve",
            "--quick",
            "--only",
            "cracker-salt",
            "--no-agent",
        ])
        .arg("--out")
        .arg(out)
        .output()
        .expect("run p5 demo");
    assert!(
        output.status.success(),
        "p5 demo failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    format!("sqlite:{}", out.join("store").join("p5.sqlite").display())
}

fn check_pairs(t: &Trace, key: NodeKey) {
    let mut by_id: HashMap<u64, (u32, [u32; 2])> = HashMap::new();
    for m in &t.messages {
        let side = match m.kind {
            Kind::Call => 0,
            Kind::Ret => 1,
            Kind::Msg => continue,
        };
        let e = by_id.entry(m.call_id).or_insert((m.conn, [0, 0]));
        assert_eq!(e.0, m.conn, "call id {} on two connections", m.call_id);
        e.1[side] += 1;
        let c = &t.conns[m.conn as usize];
        if key != NodeKey::Thread {
            let (from, to) = if side == 0 {
                (c.initiator, c.acceptor)
            } else {
                (c.acceptor, c.initiator)
            };
            assert_eq!((m.src, m.dst), (from, to), "{key}: {m:?} on {c:?}");
        }
    }
    let mut pairs = 0;
    for (id, (_, n)) in &by_id {
        assert!(n[0] <= 1 && n[1] <= 1, "call id {id}: {n:?}");
        pairs += usize::from(n[0] == 1 && n[1] == 1);
    }
    // Per connection, min(calls, returns) pairs, not counting the returns a server sent
    // before any call arrived (numbered below zero: the cracker's master sends a worker its
    // first job as soon as it connects).
    let mut per_conn: HashMap<u32, [usize; 2]> = HashMap::new();
    for m in &t.messages {
        let greeting = m.kind == Kind::Ret && (m.call_id as u32 as i32) < 0;
        if greeting {
            continue;
        }
        let side = usize::from(m.kind == Kind::Ret);
        per_conn.entry(m.conn).or_default()[side] += 1;
    }
    let want: usize = per_conn.values().map(|n| n[0].min(n[1])).sum();
    assert_eq!(pairs, want, "{key}");
    assert!(pairs > 0, "{key}");
}

#[test]
fn a_merged_session_reads_with_every_node_key() {
    let dir = tempfile::tempdir().unwrap();
    let url = demo(&dir.path().join("demo"));
    let u = DbUrl::parse(&url).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let session = rt.block_on(async {
        let db = Reader::open(&u).await.unwrap();
        let s = read::sessions(&db).await.unwrap().remove(0);
        db.close().await;
        s
    });
    assert!(session.messages > 0);
    let mut seen = HashSet::new();
    for key in [
        NodeKey::Host,
        NodeKey::Program,
        NodeKey::ProgramAtHost,
        NodeKey::Process,
        NodeKey::Thread,
        NodeKey::Endpoint,
    ] {
        let l = Database::open(u.as_str())
            .and_then(|mut db| db.load_trace(&session.name, key, &mut |_| {}))
            .unwrap();
        let t = l.trace;
        assert_eq!(t.messages.len() as i64, session.messages, "{key}");
        assert_eq!(l.unknown_ends, 0, "{key}");
        assert!(t.messages.windows(2).all(|w| w[0].time() <= w[1].time()));
        for m in &t.messages {
            if let (Some(s), Some(r)) = (m.send(), m.recv()) {
                assert!(r >= s || session.violations > 0, "{m:?}");
            }
        }
        check_pairs(&t, key);
        let names: Vec<&str> = t.nodes.names().collect();
        let ok = |n: &&str| match key {
            NodeKey::Host | NodeKey::Program => !n.contains('@') && !n.contains(':'),
            NodeKey::ProgramAtHost => n.contains('@') && !n.contains(':'),
            NodeKey::Process => n.contains(':') && n.contains('@') && !n.contains('/'),
            NodeKey::Thread => n.contains('/'),
            NodeKey::Endpoint => n.parse::<std::net::SocketAddr>().is_ok(),
        };
        assert!(names.iter().all(ok), "{key}: {names:?}");
        seen.insert(names.len());
    }
    // Program names two roles (cow, cpw); processes and threads are more.
    assert!(seen.len() > 1, "{seen:?}");
    // The command line reads it too (convert writes it as a text trace).
    let out = Command::new(env!("CARGO_BIN_EXE_p5"))
        .args([
            "analyze",
            "convert",
            "--db",
            &url,
            "--session",
            &session.name,
        ])
        .args(["--node", "program", "-o", "-"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().count() as i64 >= session.messages);
    // The same store merged into PostgreSQL reads as the same trace.
    let pg = rt.block_on(p5_tracedb::testing::PgSchema::new("p5clianalyze"));
    let store = dir.path().join("demo").join("store");
    let out = Command::new(env!("CARGO_BIN_EXE_p5"))
        .args(["merge", "-q", "--db", &pg.url()])
        .arg(&store)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pu = DbUrl::parse(&pg.url()).unwrap();
    for key in [NodeKey::ProgramAtHost, NodeKey::Endpoint] {
        let a = Database::open(u.as_str())
            .and_then(|mut db| db.load_trace(&session.name, key, &mut |_| {}))
            .unwrap();
        let b = Database::open(pu.as_str())
            .and_then(|mut db| db.load_trace(&session.name, key, &mut |_| {}))
            .unwrap();
        assert_eq!(a.trace.messages, b.trace.messages, "{key}");
        let names = |t: &Trace| t.nodes.names().map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(names(&a.trace), names(&b.trace), "{key}");
    }
    assert!(text.contains("CALL_SENT") && text.contains("RET_SENT"));
}

/// Runs `p5 analyze ARGS` and parses its JSON output.
fn analyze_json(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_p5"))
        .arg("analyze")
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "p5 analyze {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON output")
}

/// `p5 analyze flows` on the cascade case study recorded by `p5 demo` at its full size
/// (client → shop → db, 2,000 requests): each client request is one flow, through the
/// three processes, with its four messages.
#[test]
fn the_cascade_demos_2000_requests_are_2000_flows() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo");
    let o = Command::new(env!("CARGO_BIN_EXE_p5"))
        .args([
            "demo",
            "--no-serve",
            "--only",
            "cascade",
            "--no-agent",
            "--out",
        ])
        .arg(&out)
        .output()
        .expect("run p5 demo");
    assert!(
        o.status.success(),
        "p5 demo failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let url = format!("sqlite:{}", out.join("store").join("p5.sqlite").display());
    let v = analyze_json(&[
        "flows",
        "--db",
        &url,
        "--session",
        "cascade",
        "--start",
        "messages-from:client",
    ]);
    let flows = v["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2000);
    let u = DbUrl::parse(&url).unwrap();
    let (s, ev) = Database::open(u.as_str())
        .and_then(|mut db| db.flow_events(&["cascade"]))
        .unwrap()
        .remove(0);
    let sent = ev.messages.iter().filter(|m| m.send.is_some()).count() as u64;
    let in_flows: u64 = flows.iter().map(|f| f["messages"].as_u64().unwrap()).sum();
    assert_eq!(in_flows, sent, "every message is in a flow");
    assert_eq!(s.matched, s.messages);
    for f in flows {
        let threads: HashSet<i64> = f["segments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["thread"].as_i64().unwrap())
            .collect();
        assert_eq!(threads.len(), 3, "client, shop and db: {f}");
        assert!(f["messages"].as_u64().unwrap() >= 4, "{f}");
    }
    // The default start (every uncaused send) gives the same flows.
    let v = analyze_json(&["flows", "--db", &url, "--session", "cascade", "--no-save"]);
    assert_eq!(v["flows"].as_array().unwrap().len(), 2000);
}

/// A C program of our own, instrumented by p5-instrument and recorded with `p5 record`
/// twice: without its injected fault, and with it (requests 17 and 37 take `slow_path`).
/// Against the normal run as reference the slow requests are the top suspects, and the
/// root-cause list of the top suspect ranks the injected path in its top 3 — against the
/// normal run's same request and against the nearest flow of its own run.
#[test]
fn a_recorded_c_programs_injected_slow_path_is_a_top_root_cause() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/flows");
    std::fs::copy(here.join("jobsrv.c"), src.join("jobsrv.c")).unwrap();
    let instr = dir.path().join("out");
    let report = p5_instrument::run(&p5_instrument::Options {
        paths: vec![src],
        out: Some(instr.clone()),
        ..p5_instrument::Options::default()
    })
    .unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let exe = dir.path().join("jobsrv");
    let lib = p5_instrument::runtime::static_lib().expect("libp5_runtime.a");
    p5_instrument::runtime::compile_c(
        &[&instr.join("jobsrv.c")],
        &instr.join(p5_instrument::runtime::INCLUDE_DIR),
        &exe,
        &lib,
    )
    .expect("build jobsrv");
    let store = dir.path().join("store");
    for (session, fault) in [("normal", "0"), ("faulty", "20")] {
        let o = Command::new(env!("CARGO_BIN_EXE_p5"))
            .args(["record", "--no-agent", "--session", session, "--store"])
            .arg(&store)
            .arg("--manifest")
            .arg(&instr)
            .arg("--")
            .arg(&exe)
            .args(["40", fault])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let url = format!("sqlite:{}", store.join("p5.sqlite").display());
    let start = ["--start", "sensor:request_page"];
    let mut args = vec!["flows", "--db", &url, "--session", "faulty"];
    args.extend(start);
    args.extend(["--reference-session", "normal"]);
    let v = analyze_json(&args);
    let flows = v["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 40);
    let by_rank = |r: u64| {
        flows
            .iter()
            .find(|f| f["suspect_rank"] == r)
            .map(|f| f["id"].as_u64().unwrap())
            .unwrap()
    };
    let top = by_rank(1);
    assert!(
        [18, 38].contains(&top) && [18, 38].contains(&by_rank(2)),
        "{v}"
    );
    let slow_rank = |v: &serde_json::Value| {
        v["differences"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["side"] == "anomalous" && d["path"].as_str().unwrap().contains("slow_path"))
            .map(|d| {
                (
                    d["rank_time"].as_u64().unwrap(),
                    d["rank_len"].as_u64().unwrap(),
                )
            })
    };
    let (a, b) = (format!("faulty:{top}"), format!("normal:{top}"));
    let mut args = vec!["diff", "--db", &url];
    args.extend(start);
    args.extend([a.as_str(), b.as_str()]);
    let d = analyze_json(&args);
    let (t, l) = slow_rank(&d).unwrap_or_else(|| panic!("no slow_path difference: {d}"));
    assert!(t <= 3 && l <= 3, "{d}");
    // Against the previous request of the same run (a normal variation may differ too).
    let (a, b) = (top.to_string(), (top - 1).to_string());
    let mut args = vec!["diff", "--db", &url, "--session", "faulty"];
    args.extend(start);
    args.extend([a.as_str(), b.as_str()]);
    let d = analyze_json(&args);
    let (t, l) = slow_rank(&d).unwrap_or_else(|| panic!("no slow_path difference: {d}"));
    assert!(t <= 3 && l <= 3, "{d}");
}
