//! `p5 analyze flows` and `p5 analyze diff` on merged sessions (seed 002 §3–§5): systems
//! simulated thread by thread, written as a real store and merged by `p5 merge`
//! (`flows/sim.rs`), then read back through the trace database.
//!
//! * Fig. 2: a server interleaving two browsers' requests gives exactly two flows.
//! * Fig. 3: a queue-based server is wrong without the join directive and exact with it.
//! * Fig. 4: the root-cause differences reduce to main→\[A,D\].
//! * §5.1–5.2: five jobs where the first and the last differ harmlessly and the third is
//!   faulty: without references a harmless one is the top suspect, with references (a
//!   known-normal session, or `--normal`) the third is; its diff against the normal run's
//!   third job ranks the fault first.

#[path = "flows/sim.rs"]
mod sim;

use crate::{p5, rt};
use p5_analyze::db::Database;
use p5_analyze::flows::model::{Events, Join, Rules, Start};
use p5_analyze::flows::paths::PathTable;
use p5_analyze::flows::report::{FlowFormat, write_flows};
use p5_analyze::flows::rules::{self, Flows};
use p5_analyze::flows::{anomaly, profiles};
use p5_tracedb::{DbUrl, Reader, read};
use sim::{MS, Sim, Th, US};
use std::collections::BTreeSet;

fn sqlite(dir: &std::path::Path) -> String {
    format!("sqlite:{}", dir.join("p5.sqlite").display())
}

fn events(url: &str, session: &str) -> Events {
    Database::open(url)
        .and_then(|mut db| db.flow_events(&[session]))
        .unwrap()
        .remove(0)
        .1
}

fn build(ev: &Events, starts: &[&str], joins: &[&str]) -> (Flows, PathTable) {
    let rules = Rules {
        starts: starts.iter().map(|s| Start::parse(s).unwrap()).collect(),
        joins: joins.iter().map(|s| Join::parse(s).unwrap()).collect(),
    };
    let mut paths = PathTable::default();
    let f = rules::build(ev, &rules, &mut paths).unwrap();
    (f, paths)
}

/// The rows of the newest run of `session`.
fn stored(
    url: &str,
    session: &str,
) -> (
    p5_tracedb::schema::AnalysisRun,
    Vec<p5_tracedb::schema::Flow>,
) {
    rt().block_on(async {
        let db = Reader::open(&DbUrl::parse(url).unwrap()).await.unwrap();
        let s = read::sessions(&db)
            .await
            .unwrap()
            .into_iter()
            .find(|s| s.name == session)
            .unwrap();
        let run = read::analysis_runs(&db, s.id).await.unwrap().pop().unwrap();
        let flows = read::flows(&db, s.id, run.id).await.unwrap();
        db.close().await;
        (run, flows)
    })
}

fn threads_of(f: &Flows, k: usize) -> BTreeSet<i64> {
    f.segments
        .iter()
        .filter(|s| s.flow as usize == k)
        .map(|s| s.thread)
        .collect()
}

fn paths_of(f: &Flows, p: &PathTable, k: usize) -> BTreeSet<String> {
    f.paths_of(k as u32)
        .iter()
        .map(|s| p.render(s.path))
        .collect()
}

/// Fig. 2: two browsers, one server that accepts both, then serves one request and the
/// other; the browsers' clicks are the start events.
fn fig2() -> Sim {
    let mut s = Sim::default();
    let srv = s.process("httpd");
    let b1 = s.process("browser");
    let b2 = s.process("browser");
    s.call(srv, 500 * US, 30 * MS, "main");
    s.call(srv, MS, 2500 * US, "wait");
    s.call(srv, 2600 * US, 3500 * US, "wait");
    s.call(srv, 3600 * US, 5050 * US, "wait");
    s.call(srv, 5100 * US, 7000 * US, "handle");
    s.call(srv, 5200 * US, 6500 * US, "render");
    s.call(srv, 7100 * US, 7550 * US, "wait");
    s.call(srv, 7600 * US, 9500 * US, "handle");
    s.call(srv, 7700 * US, 9000 * US, "render");
    let (c1, s1) = s.connect(b1, srv, 2 * MS);
    let (c2, s2) = s.connect(b2, srv, 3 * MS);
    for (b, click, fetch, send, recv, show) in [
        (b1, 1500, (3900, 7600), 4000, 7500, (7700, 8500)),
        (b2, 2500, (4400, 10100), 4500, 10000, (10200, 11000)),
    ] {
        s.call(b, MS, 12 * MS, "main");
        s.mark(b, click * US, "click");
        s.call(b, fetch.0 * US, fetch.1 * US, "fetch");
        s.call(b, show.0 * US, show.1 * US, "show_page");
        let _ = (send, recv);
    }
    s.message(b1, c1, srv, s1, 4 * MS, 5 * MS, 100);
    s.message(srv, s1, b1, c1, 6800 * US, 7500 * US, 2000);
    s.message(b2, c2, srv, s2, 4500 * US, 7500 * US, 101);
    s.message(srv, s2, b2, c2, 9200 * US, 10 * MS, 2001);
    s
}

#[test]
fn fig2_a_server_interleaving_two_clients_gives_exactly_two_flows() {
    let tmp = tempfile::tempdir().unwrap();
    let url = sqlite(tmp.path());
    fig2().merge(tmp.path(), "fig2", &url);
    let ev = events(&url, "fig2");
    assert_eq!(ev.messages.len(), 4);
    assert!(
        ev.messages
            .iter()
            .all(|m| m.send.is_some() && m.recv.is_some())
    );
    for starts in [&["mark:click"][..], &["messages-from:browser"], &[]] {
        let (f, p) = build(&ev, starts, &[]);
        assert_eq!(f.flows.len(), 2, "{starts:?}: {:?}", f.flows);
        let bytes: Vec<u64> = f.flows.iter().map(|x| x.bytes).collect();
        assert_eq!(bytes, [2100, 2102], "{starts:?}");
        assert!(f.flows.iter().all(|x| x.messages == 2));
        // Each flow: its browser and the server, and the server's handling of its request.
        let (t0, t1) = (threads_of(&f, 0), threads_of(&f, 1));
        assert_eq!(t0.len(), 2);
        assert_eq!(t1.len(), 2);
        assert_eq!(t0.intersection(&t1).count(), 1, "the server is in both");
        for k in 0..2 {
            let paths = paths_of(&f, &p, k);
            for want in ["httpd: main→handle→render", "browser: main→show_page"] {
                assert!(paths.contains(want), "{starts:?} flow {k}: {paths:?}");
            }
        }
        assert!(f.outside > 0, "the server's first waits are in no flow");
    }
    // The command stores the run and prints JSON {"flows": [...]}.
    p5(&[
        "flows",
        "--db",
        &url,
        "--session",
        "fig2",
        "--start",
        "mark:click",
    ])
    .unwrap();
    let (run, rows) = stored(&url, "fig2");
    assert_eq!(run.algorithm, "flows");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].start_ref, "mark:click");
    let (f, p) = build(&ev, &["mark:click"], &[]);
    let ps = profiles::profiles(&f, profiles::ProfileKind::Coverage);
    let sc = anomaly::suspects(&ps, anomaly::Reference::Nearest(1));
    let mut out = Vec::new();
    write_flows(&f, &sc, &p, FlowFormat::Json, None, &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["flows"].as_array().unwrap().len(), 2);
    assert_eq!(v["flows"][0]["messages"], 2);
    // Merging the session again clears its flow rows with everything else.
    rt().block_on(async {
        let db = Reader::open(&DbUrl::parse(&url).unwrap()).await.unwrap();
        let s = read::sessions(&db).await.unwrap();
        let sid = s.iter().find(|s| s.name == "fig2").unwrap().id;
        assert_eq!(read::flows(&db, sid, run.id).await.unwrap().len(), 2);
        db.close().await;
    });
    fig2().merge(tmp.path(), "fig2", &url);
    rt().block_on(async {
        let db = Reader::open(&DbUrl::parse(&url).unwrap()).await.unwrap();
        let s = read::sessions(&db).await.unwrap();
        let sid = s.iter().find(|s| s.name == "fig2").unwrap().id;
        assert!(read::flows(&db, sid, run.id).await.unwrap().is_empty());
        assert!(read::analysis_runs(&db, sid).await.unwrap().is_empty());
        db.close().await;
    });
    assert!(
        p5(&[
            "flows",
            "--db",
            &url,
            "--session",
            "fig2",
            "--start",
            "mark:nope"
        ])
        .is_err()
    );
    assert!(
        p5(&[
            "flows",
            "--db",
            &url,
            "--session",
            "fig2",
            "--start",
            "messages-from:x"
        ])
        .is_err()
    );
}

/// Fig. 3: a single-threaded server enqueues each request and serves the oldest only when
/// the next has arrived (and the last at the end); counters `enq` and `deq` carry the
/// request's address.
fn fig3() -> Sim {
    let mut s = Sim::default();
    let srv = s.process("qserver");
    let c1 = s.process("client");
    let c2 = s.process("client");
    let (a1, s1) = s.connect(c1, srv, 500 * US);
    let (a2, s2) = s.connect(c2, srv, 600 * US);
    s.call(srv, 100 * US, 10 * MS, "main");
    s.message(c1, a1, srv, s1, MS, 1100 * US, 101);
    s.counter(srv, 1200 * US, "enq", 0xA1);
    s.message(c2, a2, srv, s2, 2 * MS, 2100 * US, 102);
    s.counter(srv, 2200 * US, "enq", 0xA2);
    s.counter(srv, 2300 * US, "deq", 0xA1);
    s.call(srv, 2400 * US, 3000 * US, "handle");
    s.message(srv, s1, c1, a1, 2900 * US, 3100 * US, 1001);
    s.counter(srv, 3200 * US, "deq", 0xA2);
    s.call(srv, 3300 * US, 4000 * US, "handle");
    s.message(srv, s2, c2, a2, 3900 * US, 4100 * US, 1002);
    for c in [c1, c2] {
        s.call(c, 200 * US, 5 * MS, "main");
    }
    s
}

#[test]
fn fig3_a_queue_server_needs_the_join_directive() {
    let tmp = tempfile::tempdir().unwrap();
    fig3_on(tmp.path(), &sqlite(tmp.path()));
}

/// The same on PostgreSQL (`P5_TEST_PG_URL`, a fresh schema).
#[test]
fn fig3_on_postgres() {
    let tmp = tempfile::tempdir().unwrap();
    let pg = rt().block_on(p5_tracedb::testing::PgSchema::new("p5flows"));
    fig3_on(tmp.path(), &pg.url());
}

fn fig3_on(dir: &std::path::Path, url: &str) {
    let url = url.to_owned();
    fig3().merge(dir, "fig3", &url);
    let ev = events(&url, "fig3");
    assert_eq!(ev.counters.len(), 4);
    // Without the directive: the reply to client 1 goes with request 2.
    let (f, _) = build(&ev, &["messages-from:client"], &[]);
    let got: Vec<(u64, u64)> = f.flows.iter().map(|x| (x.messages, x.bytes)).collect();
    assert_eq!(got, [(1, 101), (3, 102 + 1001 + 1002)]);
    // With it: exact.
    let (f, _) = build(&ev, &["messages-from:client"], &["enq=deq"]);
    let got: Vec<(u64, u64)> = f.flows.iter().map(|x| (x.messages, x.bytes)).collect();
    assert_eq!(got, [(2, 101 + 1001), (2, 102 + 1002)]);
    assert_eq!(f.unjoined, 0);
    let t: Vec<BTreeSet<i64>> = (0..2).map(|k| threads_of(&f, k)).collect();
    assert!(t[0].iter().all(|x| !t[1].contains(x) || t[1].len() == 2));
    p5(&[
        "flows",
        "--db",
        &url,
        "--session",
        "fig3",
        "--start",
        "messages-from:client",
        "--join",
        "enq=deq",
    ])
    .unwrap();
    let (_, rows) = stored(&url, "fig3");
    let bytes: Vec<i64> = rows.iter().map(|r| r.bytes).collect();
    assert_eq!(bytes, [1102, 1104]);
}

fn job(s: &mut Sim, th: Th, t0: i64, calls: &[(&str, i64, i64)]) {
    for (name, a, b) in calls {
        s.call(th, t0 + a * US, t0 + b * US, name);
    }
}

/// Fig. 4: main called A (which called B and C) and D only in the anomalous run.
#[test]
fn fig4_differences_reduce_to_main_a_d() {
    let tmp = tempfile::tempdir().unwrap();
    let url = sqlite(tmp.path());
    let normal: &[(&str, i64, i64)] = &[("main", 0, 100), ("E", 80, 90)];
    let anomalous: &[(&str, i64, i64)] = &[
        ("main", 0, 100),
        ("A", 10, 50),
        ("B", 20, 30),
        ("C", 35, 45),
        ("D", 60, 70),
        ("E", 80, 90),
    ];
    for (name, calls) in [("good", normal), ("bad", anomalous)] {
        let mut s = Sim::default();
        let th = s.process("job");
        job(&mut s, th, MS, calls);
        s.merge(tmp.path(), name, &url);
    }
    p5(&["diff", "--db", &url, "bad", "good"]).unwrap();
    let diffs = rt().block_on(async {
        let db = Reader::open(&DbUrl::parse(&url).unwrap()).await.unwrap();
        let s = read::sessions(&db).await.unwrap();
        let bad = s.iter().find(|s| s.name == "bad").unwrap();
        let run = read::analysis_runs(&db, bad.id)
            .await
            .unwrap()
            .pop()
            .unwrap();
        assert_eq!(run.algorithm, "diff");
        read::flow_diffs(&db, bad.id, run.id).await.unwrap()
    });
    assert_eq!(diffs.len(), 1, "{diffs:?}");
    assert_eq!(diffs[0].side, "anomalous");
    assert_eq!(diffs[0].path, "job: main");
    assert_eq!(diffs[0].merged_leaves.as_deref(), Some("A,D"));
    assert_eq!(
        (diffs[0].len, diffs[0].rank_time, diffs[0].rank_len),
        (2, 1, 1)
    );
    // The same between two flows of one session.
    let mut s = Sim::default();
    let a = s.process("job");
    let b = s.process("job");
    job(&mut s, a, MS, normal);
    job(&mut s, b, 2 * MS, anomalous);
    s.merge(tmp.path(), "both", &url);
    p5(&[
        "diff",
        "--db",
        &url,
        "--session",
        "both",
        "--start",
        "sensor:main",
        "2",
        "1",
    ])
    .unwrap();
    assert!(
        p5(&[
            "diff",
            "--db",
            &url,
            "--session",
            "both",
            "--start",
            "sensor:main",
            "3",
            "1"
        ])
        .is_err()
    );
}

/// Five jobs submitted by `schedd` to five `starter`s: the first also initialises the
/// cluster, the last cleans up, and (when `faulty`) the third retries inside compute.
fn jobs(faulty: bool) -> Sim {
    let mut s = Sim::default();
    let schedd = s.process("schedd");
    s.call(schedd, 100 * US, 250 * MS, "main");
    s.call(schedd, MS, 2 * MS, "submit");
    s.call(schedd, 3 * MS, 240 * MS, "collect");
    for i in 1..=5i64 {
        let st = s.process("starter");
        let (c, d) = s.connect(schedd, st, 500 * US + i * 10 * US);
        let r = 5 * MS + i * 30 * MS;
        s.message(schedd, c, st, d, MS + i * 100 * US, r, 64);
        s.call(st, 800 * US, r + 25 * MS, "main");
        let mut calls: Vec<(&str, i64, i64)> = vec![
            ("setup", 2100, 3000),
            ("run_job", 3100, 15000),
            ("compute", 3200, 12000),
            ("report", 18500, 19000),
        ];
        if i == 1 {
            calls.extend([
                ("init_cluster", 100, 2000),
                ("load_config", 200, 500),
                ("create_dirs", 600, 900),
                ("read_keys", 1000, 1300),
                ("open_log", 1400, 1700),
            ]);
        }
        if i == 3 && faulty {
            calls.push(("retry", 8000, 8300));
        }
        if i == 5 {
            calls.extend([
                ("cleanup_cluster", 15100, 18000),
                ("remove_dirs", 15200, 15700),
                ("send_summary", 15800, 16300),
                ("close_log", 16400, 16900),
                ("notify", 17000, 17500),
            ]);
        }
        job(&mut s, st, r, &calls);
        s.message(st, d, schedd, c, r + 18800 * US, r + 19500 * US, 16);
    }
    s
}

#[test]
fn five_jobs_references_find_the_faulty_one_and_its_cause() {
    let tmp = tempfile::tempdir().unwrap();
    let url = sqlite(tmp.path());
    jobs(true).merge(tmp.path(), "jobs", &url);
    jobs(false).merge(tmp.path(), "jobs-ref", &url);
    let start = ["messages-from:schedd"];
    let ev = events(&url, "jobs");
    let (f, _) = build(&ev, &start, &[]);
    assert_eq!(f.flows.len(), 5);
    assert!(
        f.flows.iter().all(|x| x.messages == 2 && x.bytes == 80),
        "{:?}",
        f.flows
    );
    let rank = |rows: &[p5_tracedb::schema::Flow]| -> Vec<i64> {
        let mut r: Vec<(i64, i64)> = rows
            .iter()
            .map(|x| (x.suspect_rank.unwrap(), x.id))
            .collect();
        r.sort_unstable();
        r.into_iter().map(|x| x.1).collect()
    };
    for profile in ["coverage", "composite"] {
        let base = [
            "flows",
            "--db",
            &url,
            "--session",
            "jobs",
            "--start",
            start[0],
            "--profile",
            profile,
        ];
        // Without references: a harmless difference (the first or the last job) ranks first.
        p5(&base).unwrap();
        let (_, rows) = stored(&url, "jobs");
        let order = rank(&rows);
        assert!(
            [1, 5].contains(&order[0]) && [1, 5].contains(&order[1]),
            "{profile}: {order:?}"
        );
        // With a known-normal session, and with known-normal flows: job 3.
        let mut with_ref = base.to_vec();
        with_ref.extend(["--reference-session", "jobs-ref"]);
        p5(&with_ref).unwrap();
        let (_, rows) = stored(&url, "jobs");
        assert_eq!(rank(&rows)[0], 3, "{profile}: {rows:?}");
        assert!(rows[2].suspect_score.unwrap() > 0.0);
        let mut with_normal = base.to_vec();
        with_normal.extend(["--normal", "1", "2", "4", "5"]);
        p5(&with_normal).unwrap();
        let (_, rows) = stored(&url, "jobs");
        assert_eq!(rank(&rows)[0], 3, "{profile}");
        assert_eq!(rows[0].label.as_deref(), Some("normal"));
    }
    let mut bad = vec!["flows", "--db", &url, "--session", "jobs", "--normal", "9"];
    bad.extend(["--start", start[0]]);
    assert!(p5(&bad).is_err(), "no flow 9");
    // Root cause: flow 3 against the normal run's flow 3.
    p5(&[
        "diff",
        "--db",
        &url,
        "--start",
        start[0],
        "jobs:3",
        "jobs-ref:3",
        "--no-save",
    ])
    .unwrap();
    let mut loaded = Database::open(&url)
        .and_then(|mut db| db.flow_events(&["jobs", "jobs-ref"]))
        .unwrap();
    let mut paths = PathTable::default();
    let rules = Rules {
        starts: vec![Start::parse(start[0]).unwrap()],
        joins: vec![],
    };
    let good = rules::build(&loaded.pop().unwrap().1, &rules, &mut paths).unwrap();
    let bad = rules::build(&loaded.pop().unwrap().1, &rules, &mut paths).unwrap();
    let d = p5_analyze::flows::rootcause::diff(
        &rules::flow_coverage(&bad, 2),
        &rules::flow_coverage(&good, 2),
        &paths,
    );
    let shown: Vec<String> = d.differences.iter().map(|x| x.render(&paths)).collect();
    assert_eq!(shown, ["starter: main→run_job→compute→retry"]);
    // Against job 2 of the same run: the fault, nothing else.
    let d = p5_analyze::flows::rootcause::diff(
        &rules::flow_coverage(&bad, 2),
        &rules::flow_coverage(&bad, 1),
        &paths,
    );
    assert_eq!(d.differences.len(), 1);
    // Job 1 against job 2: its initialisation, one merged difference.
    let d = p5_analyze::flows::rootcause::diff(
        &rules::flow_coverage(&bad, 0),
        &rules::flow_coverage(&bad, 1),
        &paths,
    );
    let shown: Vec<String> = d.differences.iter().map(|x| x.render(&paths)).collect();
    assert_eq!(
        shown,
        ["starter: main→init_cluster"],
        "prefix pruning keeps the parent"
    );
}
