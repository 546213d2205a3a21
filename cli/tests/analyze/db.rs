//! The trace database as an input and an output of `p5 analyze`: a maketrace text trace and
//! a forged capture imported (`p5 analyze import`) into SQLite and PostgreSQL and read back
//! with `--db URL --session NAME` (the same messages, times exact, calls paired with their
//! returns; connections, directions and ordinals), ground truth stored as an analysis run
//! and read back (`show --db`), `--node` variants, and bad input. PostgreSQL:
//! `P5_TEST_PG_URL`, else `postgres://postgres@127.0.0.1:5432/test`, a fresh schema per test.

use p5_analyze::testing::forge;

use crate::{fixture, p5, rt, s};
use p5_analyze::db::Database;
use p5_analyze::maketrace::GroundTruth;
use p5_analyze::node::NodeKey;
use p5_analyze::pattern::{AnalysisResult, Stats};
use p5_analyze::store::MessageIds;
use p5_analyze::text::{self, ReadOptions};
use p5_analyze::trace::{CallId, NO_CALL_ID};
use p5_analyze::{Kind, Trace};
use p5_tracedb::domain::Direction;
use p5_tracedb::testing::PgSchema;
use p5_tracedb::{DbUrl, Reader, read};
use sqlx::Connection;
use std::collections::HashMap;
use std::path::Path;

fn read_db(url: &str, session: &str, node: Option<NodeKey>) -> Trace {
    let mut db = Database::open(url).expect("a database URL");
    db.load_trace(session, node.unwrap_or_default(), &mut |_| {})
        .expect("the session reads")
        .trace
}

fn read_err(url: &str, session: &str) -> String {
    Database::open(url)
        .and_then(|mut db| db.load_trace(session, NodeKey::default(), &mut |_| {}))
        .unwrap_err()
        .to_string()
}

fn load_result(url: &str, session: &str) -> AnalysisResult {
    Database::open(url)
        .and_then(|mut db| db.load_result(session, None))
        .expect("the run reads")
}

/// For each message, the index of the message it pairs with (the k-th call and the k-th
/// return of one `(caller, callee, call id)`), if any.
fn partners(t: &Trace) -> Vec<Option<usize>> {
    let mut open: HashMap<(u32, u32, CallId), [Vec<usize>; 2]> = HashMap::new();
    for (i, m) in t.messages.iter().enumerate() {
        let (caller, callee, side) = match m.kind {
            Kind::Call => (m.src, m.dst, 0),
            Kind::Ret => (m.dst, m.src, 1),
            Kind::Msg => continue,
        };
        if m.call_id == NO_CALL_ID {
            continue;
        }
        open.entry((caller, callee, m.call_id)).or_default()[side].push(i);
    }
    let mut out = vec![None; t.messages.len()];
    for [calls, rets] in open.values() {
        for (&c, &r) in calls.iter().zip(rets) {
            out[c] = Some(r);
            out[r] = Some(c);
        }
    }
    out
}

/// (send, receive, sender, receiver, kind, bytes) of every message, in order.
fn rows(t: &Trace) -> Vec<(i64, i64, String, String, Kind, u32)> {
    t.messages
        .iter()
        .map(|m| {
            let (a, b) = (t.nodes.name(m.src), t.nodes.name(m.dst));
            (
                m.t_send,
                m.t_recv,
                a.to_owned(),
                b.to_owned(),
                m.kind,
                m.bytes,
            )
        })
        .collect()
}

/// What a result keeps through the analysis tables (store.rs's module docs).
fn stored_form(r: &AnalysisResult, ids: &MessageIds) -> AnalysisResult {
    let mean_only = |s: &Option<Stats>, n: u64| {
        s.as_ref().map(|s| {
            let m = s.mean_ns.round() as i64;
            Stats {
                n,
                mean_ns: m as f64,
                p50_ns: m,
                p90_ns: m,
                min_ns: m,
                max_ns: m,
            }
        })
    };
    let mut out = r.clone();
    for p in &mut out.patterns {
        if let Some(l) = &mut p.latency {
            l.mean_ns = l.mean_ns.round();
            (l.n, l.min_ns, l.max_ns) = (p.count, l.p50_ns, l.p90_ns);
        }
        for n in &mut p.nodes {
            let samples = [&n.latency, &n.call_delay, &n.net_delay]
                .iter()
                .filter_map(|s| s.as_ref().map(|s| s.n))
                .max()
                .unwrap_or(0);
            if let Some(l) = &mut n.latency {
                l.mean_ns = l.mean_ns.round();
                l.n = samples;
            }
            n.call_delay = mean_only(&n.call_delay, samples);
            n.net_delay = mean_only(&n.net_delay, samples);
        }
    }
    for i in &mut out.instances {
        let mut m: Vec<u64> = i
            .messages
            .iter()
            .filter_map(|r| ids.ids.get(r).map(|&id| id as u64))
            .collect();
        m.sort_unstable();
        i.messages = m;
    }
    out
}

/// maketrace → import (with ground truth) → `--db` read: the same messages, pairs and
/// truth, on `url`.
fn text_round_trip(url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (trace, truth) = (dir.path().join("t.p5t"), dir.path().join("gt.json"));
    let cfg = fixture("fig10-multi-tier.toml");
    let args = ["maketrace", &cfg, "--seed", "7", "-o", s(&trace)];
    p5(&[&args[..], &["--truth", s(&truth), "--duration", "3s"]].concat()).unwrap();
    let import = [
        "import",
        "--trace",
        s(&trace),
        "--db",
        url,
        "--session",
        "fig10",
    ];
    p5(&[&import[..], &["--truth", s(&truth)]].concat()).unwrap();
    // Importing again replaces the session (one session, one truth run).
    p5(&[&import[..], &["--truth", s(&truth)]].concat()).unwrap();

    let original = text::read_file(&trace, ReadOptions::default())
        .unwrap()
        .trace;
    for key in [None, Some(NodeKey::Program), Some(NodeKey::Host)] {
        let back = read_db(url, "fig10", key);
        assert_eq!(rows(&back), rows(&original), "{key:?}");
        assert_eq!(partners(&back), partners(&original), "{key:?}");
        assert!(partners(&back).iter().filter(|p| p.is_some()).count() > 100);
    }

    let gt: GroundTruth = serde_json::from_slice(&std::fs::read(&truth).unwrap()).unwrap();
    let url_p = DbUrl::parse(url).unwrap();
    let stored = load_result(url, "fig10");
    let ids = MessageIds::of_import(&original);
    let want = stored_form(&gt.result, &ids);
    assert_eq!(stored.patterns.len(), want.patterns.len());
    for (a, b) in stored.patterns.iter().zip(&want.patterns) {
        assert_eq!(a.nodes, b.nodes, "{}", b.signature);
        assert_eq!(a, b);
    }
    for (a, b) in stored.instances.iter().zip(&want.instances) {
        assert_eq!(a, b);
    }
    assert_eq!(stored, want);
    rt().block_on(async {
        let db = Reader::open(&url_p).await.unwrap();
        let sessions = read::sessions(&db).await.unwrap();
        assert_eq!(sessions.len(), 1);
        let runs = read::analysis_runs(&db, sessions[0].id).await.unwrap();
        assert_eq!(runs.len(), 1, "{runs:?}");
        assert_eq!(runs[0].algorithm, "truth");
        // Every truth message names the pattern node it enters.
        let msgs = read::path_instance_messages(&db, sessions[0].id, runs[0].id)
            .await
            .unwrap();
        let total: usize = gt.result.instances.iter().map(|i| i.messages.len()).sum();
        assert_eq!(msgs.len(), total);
        let distinct: std::collections::BTreeSet<i64> = msgs.iter().map(|m| m.node_id).collect();
        assert!(distinct.len() > gt.result.patterns.len(), "{distinct:?}");
        db.close().await;
    });
    // `show --db` prints it; a run that does not exist is an error naming the runs.
    p5(&["show", "--db", url, "--session", "fig10", "--top", "2"]).unwrap();
    let e = p5(&["show", "--db", url, "--session", "fig10", "--run", "9"]).unwrap_err();
    assert!(e.to_string().contains("runs: 1"), "{e}");
    // `nesting --db` reads the session and stores its run beside the truth: what it stored
    // is what nesting finds on the session's messages, and its messages are the session's.
    let nest = [
        "nesting",
        "--db",
        url,
        "--session",
        "fig10",
        "--format",
        "json",
    ];
    p5(&nest).unwrap();
    let stored = load_result(url, "fig10");
    assert_eq!(stored.algorithm, "nesting");
    let session = read_db(url, "fig10", None);
    let (want, counts) = p5_analyze::nesting::nesting(&session, &Default::default());
    // The counts rebalanced (a request left without its application call, another with
    // two), stored with the run's parameters.
    assert!(counts.rebalanced > 0);
    assert_eq!(stored.params["rebalanced"], counts.rebalanced);
    let sig = |r: &AnalysisResult| {
        let mut v: Vec<(String, u64)> = r
            .patterns
            .iter()
            .map(|p| (p.signature.clone(), p.count))
            .collect();
        v.sort();
        v
    };
    assert_eq!(sig(&stored), sig(&want));
    assert!(!stored.patterns.is_empty());
    let ids: std::collections::HashSet<u64> = session.messages.iter().map(|m| m.msg_ref).collect();
    assert!(
        stored
            .instances
            .iter()
            .flat_map(|i| &i.messages)
            .all(|m| ids.contains(m))
    );
    rt().block_on(async {
        let db = Reader::open(&url_p).await.unwrap();
        let sid = read::sessions(&db).await.unwrap()[0].id;
        let runs = read::analysis_runs(&db, sid).await.unwrap();
        let algos: Vec<&str> = runs.iter().map(|r| r.algorithm.as_str()).collect();
        assert_eq!(algos, ["truth", "nesting"]);
        enter_their_receivers(&db, sid, runs[1].id, &session).await;
        db.close().await;
    });
    // From the text trace itself, stored into the session imported from it: the same run.
    let save = [
        "--save-db",
        url,
        "--save-session",
        "fig10",
        "--format",
        "json",
    ];
    p5(&[&["nesting", "--trace", s(&trace)][..], &save[..]].concat()).unwrap();
    let again = load_result(url, "fig10");
    assert_eq!(sig(&again), sig(&stored));
    assert_eq!(again.instances, stored.instances);
    assert_eq!(again.params["gap_passes"], 3);
    // The paper's scoring from the command line: one pass on call delays alone, and pairs
    // that lost a half dropped (with the option to leave unlikely children roots).
    p5(&[
        &[
            "nesting",
            "--trace",
            s(&trace),
            "--no-returns",
            "--gap-passes",
            "0",
            "--no-repair",
            "--root-below",
            "0.005",
        ][..],
        &save[..],
    ]
    .concat())
    .unwrap();
    let paper = load_result(url, "fig10");
    let p = p5_analyze::nesting::Params {
        returns: false,
        gap_passes: 0,
        repair: false,
        root_below: 0.005,
        ..Default::default()
    };
    let (want, _) = p5_analyze::nesting::nesting(&session, &p);
    assert_eq!(sig(&paper), sig(&want));
    assert_ne!(sig(&paper), sig(&stored));
    assert_eq!(paper.params["gap_passes"], 0);
    assert_eq!(paper.params["repair"], false);
    assert_eq!(paper.params["root_below"], 0.005);
    assert_eq!(again.params["root_below"], 0.0);
    assert_eq!(again.params["repair"], true);
    // `linking --db`: its run is stored with expectations and maximum probabilities.
    p5(&[
        "linking",
        "--db",
        url,
        "--session",
        "fig10",
        "--window",
        "500ms",
        "--format",
        "json",
    ])
    .unwrap();
    let linked = load_result(url, "fig10");
    assert_eq!(linked.algorithm, "linking");
    let p = p5_analyze::linking::Params {
        window: 500_000_000,
        ..Default::default()
    };
    let (want, _) = p5_analyze::linking::linking(&session, &p, &mut |_| {});
    assert_eq!(sig(&linked), sig(&want));
    let by_sig = |r: &AnalysisResult| {
        let mut v: Vec<(String, f64, f64)> = r
            .patterns
            .iter()
            .map(|p| (p.signature.clone(), p.expectation, p.max_prob))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    for (a, b) in by_sig(&linked).iter().zip(by_sig(&want)) {
        assert!(
            (a.1 - b.1).abs() < 1e-9 && (a.2 - b.2).abs() < 1e-9,
            "{a:?} {b:?}"
        );
    }
    assert!(
        linked
            .patterns
            .iter()
            .any(|p| p.expectation < p.count as f64)
    );
    rt().block_on(async {
        let db = Reader::open(&url_p).await.unwrap();
        let sid = read::sessions(&db).await.unwrap()[0].id;
        let run = read::analysis_runs(&db, sid)
            .await
            .unwrap()
            .last()
            .unwrap()
            .id;
        enter_their_receivers(&db, sid, run, &session).await;
        db.close().await;
    });
    // `linking --trace … --save-db`: the trace is given up to the analysis (no copy), and the
    // run still stores its messages under the ids the import gave them: the same run as from
    // the session.
    p5(&[
        &["linking", "--trace", s(&trace), "--window", "500ms"][..],
        &save[..],
    ]
    .concat())
    .unwrap();
    let from_text = load_result(url, "fig10");
    assert_eq!(from_text.algorithm, "linking");
    assert_eq!(sig(&from_text), sig(&linked));
    assert_eq!(from_text.instances, linked.instances);
}

/// Every message of a stored run names the pattern node it enters: a call its callee's, a
/// return its caller's — either way its receiver's node, in its instance's pattern.
async fn enter_their_receivers(db: &Reader, sid: i64, run: i64, session: &Trace) {
    let mut node = std::collections::HashMap::new();
    for p in read::path_patterns(db, sid, run).await.unwrap() {
        for n in read::path_nodes(db, sid, run, p.id).await.unwrap() {
            node.insert(n.id, (p.id, n.node));
        }
    }
    let inst: std::collections::HashMap<i64, i64> = read::path_instances(db, sid, run)
        .await
        .unwrap()
        .iter()
        .map(|i| (i.id, i.pattern_id))
        .collect();
    let receiver: std::collections::HashMap<i64, &str> = session
        .messages
        .iter()
        .map(|m| (m.msg_ref as i64, session.nodes.name(m.dst)))
        .collect();
    let msgs = read::path_instance_messages(db, sid, run).await.unwrap();
    assert!(msgs.len() >= 10, "{} messages in run {run}", msgs.len());
    for m in &msgs {
        let (pattern, name) = &node[&m.node_id];
        assert_eq!(*pattern, inst[&m.instance_id], "{m:?}");
        assert_eq!(name, receiver[&m.message_id], "run {run}: {m:?}");
    }
}

#[test]
fn a_text_trace_round_trips_through_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("t.sqlite").display());
    text_round_trip(&url);
}

#[test]
fn a_text_trace_round_trips_through_postgres() {
    let pg = rt().block_on(PgSchema::new("p5analyze"));
    text_round_trip(&pg.url());
}

/// A capture of two keep-alive connections (3 and 2 RPCs) from two clients to one server.
fn capture(dir: &Path) -> std::path::PathBuf {
    let mut a = forge::Conv::new("10.0.0.1:40000", "10.0.0.9:80", [100, 900], 1_000_000);
    a.handshake();
    a.rpcs(3, 200, 3000);
    a.close();
    let mut b = forge::Conv::new("10.0.0.2:40001", "10.0.0.9:80", [5, 7], 1_005_000);
    b.handshake();
    b.rpcs(2, 100, 50);
    b.close();
    let mut pkts: Vec<(i64, Vec<u8>)> = a.pkts.into_iter().chain(b.pkts).collect();
    pkts.sort_by_key(|p| p.0);
    let mut w = forge::Writer::pcap(1, true);
    for (t, p) in &pkts {
        w.packet(*t, &forge::frame(1, p, false));
    }
    let path = dir.join("two.pcap");
    std::fs::write(&path, &w.buf).unwrap();
    path
}

#[test]
fn a_capture_imports_with_connections_directions_and_ordinals_into_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("c.sqlite").display());
    capture_import(dir.path(), &url);
}

#[test]
fn a_capture_imports_with_connections_directions_and_ordinals_into_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let pg = rt().block_on(PgSchema::new("p5analyze"));
    capture_import(dir.path(), &pg.url());
}

/// A forged two-connection capture imported into `url`: its connections, directions and
/// ordinals as stored, and the trace read back equal to the capture read directly.
fn capture_import(dir: &Path, url: &str) {
    let cap = capture(dir);
    p5(&["import", "--pcap", s(&cap), "--db", url]).unwrap();
    let u = DbUrl::parse(url).unwrap();
    rt().block_on(async {
        let db = Reader::open(&u).await.unwrap();
        let ss = read::sessions(&db).await.unwrap();
        assert_eq!(ss[0].name, "two");
        let sid = ss[0].id;
        let conns = read::connections(&db, sid).await.unwrap();
        let mut got: Vec<(String, String, i64, i64)> = conns
            .iter()
            .map(|c| {
                let e = (c.initiator_endpoint.clone(), c.acceptor_endpoint.clone());
                (e.0, e.1, c.call_messages, c.return_messages)
            })
            .collect();
        got.sort();
        let want = [
            ("10.0.0.1:40000", "10.0.0.9:80", 3, 3),
            ("10.0.0.2:40001", "10.0.0.9:80", 2, 2),
        ];
        let want: Vec<_> = want
            .iter()
            .map(|w| (w.0.to_owned(), w.1.to_owned(), w.2, w.3))
            .collect();
        assert_eq!(got, want);
        let roles = read::message_roles(&db, sid).await.unwrap();
        for c in &conns {
            for d in [Direction::Call, Direction::Return] {
                let ords: Vec<i64> = roles
                    .iter()
                    .filter(|r| r.connection == c.id && r.direction == d)
                    .map(|r| r.ordinal)
                    .collect();
                let n = if d == Direction::Call {
                    c.call_messages
                } else {
                    c.return_messages
                };
                assert_eq!(ords, (0..n).collect::<Vec<_>>());
            }
        }
        // The viewer's arrows: every message has both threads and times.
        assert_eq!(read::messages(&db, sid).await.unwrap().len(), 10);
        db.close().await;
    });
    // Read back: the capture's messages, calls paired with their replies.
    let direct = p5_analyze::pcap::read(
        &[p5_analyze::pcap::CaptureFile {
            path: cap.clone(),
            offset_ns: 0,
        }],
        &p5_analyze::pcap::PcapOptions::default(),
    )
    .unwrap()
    .0;
    let back = read_db(url, "two", Some(NodeKey::Host));
    assert_eq!(rows(&back), rows(&direct));
    assert_eq!(partners(&back), partners(&direct));
    assert_eq!(partners(&back).iter().flatten().count(), 10);
    // --node endpoint names the ends by the connection's endpoints.
    let eps = read_db(url, "two", Some(NodeKey::Endpoint));
    let mut names: Vec<&str> = eps.nodes.names().collect();
    names.sort_unstable();
    assert_eq!(names, ["10.0.0.1:40000", "10.0.0.2:40001", "10.0.0.9:80"]);
    assert_eq!(eps.conns.len(), 2);
}

#[test]
fn bad_sessions_and_foreign_databases_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let cap = capture(dir.path());
    let url = format!("sqlite:{}", dir.path().join("c.sqlite").display());
    p5(&["import", "--pcap", s(&cap), "--db", &url, "--session", "a"]).unwrap();
    p5(&["import", "--pcap", s(&cap), "--db", &url, "--session", "b"]).unwrap();
    let e = read_err(&url, "nope");
    assert!(
        e.contains("no session \"nope\"") && e.contains("sessions: a, b"),
        "{e}"
    );

    let foreign = dir.path().join("other.sqlite");
    rt().block_on(async {
        let u = format!("sqlite:{}?mode=rwc", foreign.display());
        let mut c = sqlx::SqliteConnection::connect(&u).await.unwrap();
        sqlx::raw_sql("CREATE TABLE t (x INTEGER)")
            .execute(&mut c)
            .await
            .unwrap();
        c.close().await.unwrap();
    });
    let furl = format!("sqlite:{}", foreign.display());
    let e = read_err(&furl, "a");
    assert!(e.contains("not a p5 database"), "{e}");
    let e = p5(&["import", "--pcap", s(&cap), "--db", &furl]).unwrap_err();
    assert!(e.to_string().contains("not a p5 database"), "{e}");
    let garbage = dir.path().join("garbage.sqlite");
    std::fs::write(&garbage, vec![0x5a; 8192]).unwrap();
    let e = read_err(&format!("sqlite:{}", garbage.display()), "a");
    assert!(e.contains("not a p5 database"), "{e}");
    // A text trace's ground truth needs a text trace.
    assert!(crate::refused(&[
        "import",
        "--pcap",
        s(&cap),
        "--db",
        &url,
        "--truth",
        "g",
    ]));
}

/// A convolution run stores its graph: every edge (`conv_edge`, parents and delays as the
/// run found them) and every spike its correlations showed (`conv_spike`), the kept ones
/// pointing at the edge they became and the rejected ones saying why — on SQLite and
/// PostgreSQL alike.
fn convolution_graph_is_stored(url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.p5t");
    let cfg = fixture("fig10-multi-tier.toml");
    p5(&[
        "maketrace",
        &cfg,
        "--seed",
        "5",
        "-o",
        s(&trace),
        "--duration",
        "60s",
    ])
    .unwrap();
    let import = [
        "import",
        "--trace",
        s(&trace),
        "--db",
        url,
        "--session",
        "conv",
    ];
    p5(&import).unwrap();
    let args = [
        "convolution",
        "--db",
        url,
        "--session",
        "conv",
        "--quantum",
        "10ms",
    ];
    p5(&args).unwrap();
    let t = text::read_file(&trace, ReadOptions::default())
        .unwrap()
        .trace;
    let roots = p5_analyze::convolution::roots(&t, &[]).unwrap();
    let g = p5_analyze::convolution::convolution(
        &t,
        &roots,
        &p5_analyze::convolution::Params::at(10_000_000),
    )
    .unwrap();
    assert!(g.edges.len() > 3, "{} edges", g.edges.len());
    assert!(
        g.spikes.iter().any(|s| s.verdict != "edge"),
        "some spike is rejected"
    );
    rt().block_on(async {
        let db = p5_tracedb::read::Reader::open(&DbUrl::parse(url).unwrap())
            .await
            .unwrap();
        let sid = p5_tracedb::read::sessions(&db).await.unwrap()[0].id;
        let run = p5_tracedb::read::analysis_runs(&db, sid).await.unwrap();
        let run = run
            .iter()
            .find(|r| r.algorithm == "convolution")
            .unwrap()
            .id;
        let edges = p5_tracedb::read::conv_edges(&db, sid, run).await.unwrap();
        let spikes = p5_tracedb::read::conv_spikes(&db, sid, run).await.unwrap();
        assert_eq!(edges.len(), g.edges.len());
        for (row, e) in edges.iter().zip(&g.edges) {
            assert_eq!((&row.from_node, &row.to_node), (&e.from, &e.to));
            assert_eq!(row.parent_id, e.parent.map(|p| i64::from(p) + 1));
            assert_eq!(row.delay_ns, e.delay_ns);
            assert_eq!(row.messages as u64, e.messages);
        }
        assert_eq!(spikes.len(), g.spikes.len());
        let kept = spikes.iter().filter(|s| s.verdict == "edge").count();
        assert_eq!(kept, edges.iter().filter(|e| e.parent_id.is_some()).count());
        for s in &spikes {
            match s.verdict.as_str() {
                "edge" => {
                    let child = s.child_edge_id.expect("a kept spike names its edge");
                    let e = &edges[child as usize - 1];
                    assert_eq!((e.parent_id, e.delay_ns), (Some(s.edge_id), Some(s.lag_ns)));
                }
                "cycle" | "few-messages" => assert_eq!(s.child_edge_id, None),
                v => panic!("verdict {v}"),
            }
        }
        db.close().await;
    });
}

#[test]
fn a_convolution_graph_is_stored_in_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    convolution_graph_is_stored(&format!("sqlite:{}", dir.path().join("c.sqlite").display()));
}

#[test]
fn a_convolution_graph_is_stored_in_postgres() {
    let pg = rt().block_on(PgSchema::new("p5analyzeconv"));
    convolution_graph_is_stored(&pg.url());
}
