//! A real multi-tier service, nobody's code here, recorded by `p5 record --preload` as it is
//! and analysed per request: nginx (Debian's) as reverse proxy on 127.0.0.2 in front of two
//! Python `ThreadingHTTPServer` backends (127.0.0.3/4) that answer in two sends and call
//! redis-server (127.0.0.5) through redis-py's pooled keep-alive connections and through a
//! new connection per call, and PostgreSQL (127.0.0.1:5432, not recorded) through psycopg;
//! closed-loop `http.client` threads on keep-alive connections drive it.
//!
//! Ground truth comes from the tiers' own logs (`services/truth.rs`): the request id travels
//! in `X-Request-Id`, and each tier logs the thread and the interval it spent on each
//! request. Every request's path is scored: the share whose messages are exactly one
//! instance's, for nesting and linking as `p5 analyze` runs them by default on a recorded
//! session (causality from the recorded threads). Traffic only on 127.0.0.0/8; the stack
//! stops itself after its requests. `P5_KEEP=1` keeps the directory.

#[path = "services/truth.rs"]
mod truth;

use p5_tracedb::read;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What one recorded run gave.
struct Outcome {
    truth: truth::Truth,
    /// Per algorithm: its score and what it printed.
    scores: Vec<(&'static str, truth::Score, String)>,
    /// Half messages on connections whose both sides were recorded.
    unmatched_between_recorded: usize,
    /// What `p5 record` printed.
    recorded: String,
}

fn pg_dsn() -> String {
    std::env::var("P5_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
        .replacen("postgres://", "postgresql://", 1)
}

fn need(cmd: &str, what: &str) {
    let ok = Command::new("sh")
        .args([
            "-c",
            &format!("command -v {cmd} >/dev/null || test -x /usr/sbin/{cmd}"),
        ])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "{cmd} is needed ({what})");
}

/// A port free on 127.0.0.2 (the stack uses it and the next three on 127.0.0.2–5).
fn base_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.2:0").expect("127.0.0.2 is a loopback address");
    let p = l.local_addr().unwrap().port();
    if p > 65000 { 40000 + p % 1000 * 4 } else { p }
}

fn workdir() -> (Option<tempfile::TempDir>, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    if std::env::var_os("P5_KEEP").is_some() {
        let p = t.keep();
        eprintln!("kept {}", p.display());
        (None, p)
    } else {
        let p = t.path().to_owned();
        (Some(t), p)
    }
}

fn p5(dir: &Path, args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_p5"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "p5 {args:?}:\n{text}");
    text
}

/// Records the stack with `clients` closed-loop threads and `requests` requests, then runs
/// nesting and linking on the session and scores every request.
fn run(clients: usize, requests: usize, keepalive: bool) -> Outcome {
    need("nginx", "scripts/install-deps.sh installs nginx-light");
    need(
        "redis-server",
        "scripts/install-deps.sh installs redis-server",
    );
    let (_keep, dir) = workdir();
    let stack = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/services/stack.py");
    let store = dir.join("store");
    let (c, n, k, b) = (
        clients.to_string(),
        requests.to_string(),
        if keepalive { "1" } else { "0" },
        base_port().to_string(),
    );
    let dsn = pg_dsn();
    let d = dir.to_str().unwrap();
    let recorded = p5(
        &dir,
        &[
            "record",
            "--preload",
            "--no-agent",
            "--session",
            "svc",
            "--store",
            store.to_str().unwrap(),
            "--",
            "python3",
            stack.to_str().unwrap(),
            d,
            &c,
            &n,
            k,
            &b,
            &dsn,
        ],
    );
    let url = format!("sqlite:{}", store.join("p5.sqlite").display());
    let mut scores = Vec::new();
    for algorithm in ["nesting", "linking"] {
        let printed = p5(
            &dir,
            &[
                "analyze",
                algorithm,
                "--db",
                &url,
                "--session",
                "svc",
                "--node",
                "thread",
            ],
        );
        scores.push((algorithm, printed));
    }
    let log = truth::read_log(&dir.join("requests.jsonl"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let db = read::Reader::open(&p5_tracedb::DbUrl::parse(&url).unwrap())
            .await
            .unwrap();
        let s = read::sessions(&db).await.unwrap().remove(0);
        let processes = read::processes(&db, s.id).await.unwrap();
        let threads = read::threads(&db, s.id).await.unwrap();
        let mut messages = Vec::new();
        read::for_each_message_end(&db, s.id, |m| messages.push(m))
            .await
            .unwrap();
        let conns = read::connections(&db, s.id).await.unwrap();
        let both: HashMap<i64, bool> = conns
            .iter()
            .map(|c| {
                (
                    c.id,
                    c.initiator_process.is_some() && c.acceptor_process.is_some(),
                )
            })
            .collect();
        let unmatched_between_recorded = messages
            .iter()
            .filter(|m| m.send_thread.is_none() || m.recv_end.is_none())
            .filter(|m| m.connection.and_then(|c| both.get(&c).copied()) == Some(true))
            .count();
        let truth = truth::attribute(&log, s.base_mono_ns, &processes, &threads, &messages);
        let runs = read::analysis_runs(&db, s.id).await.unwrap();
        assert_eq!(runs.len(), 2, "one run per algorithm");
        let mut out = Vec::new();
        for ((algorithm, printed), run) in scores.into_iter().zip(&runs) {
            assert_eq!(run.algorithm, algorithm);
            let instances = read::path_instances(&db, s.id, run.id).await.unwrap();
            let pattern_of: HashMap<i64, i64> =
                instances.iter().map(|i| (i.id, i.pattern_id)).collect();
            let members: Vec<(i64, i64)> = read::path_instance_messages(&db, s.id, run.id)
                .await
                .unwrap()
                .iter()
                .map(|m| (m.instance_id, m.message_id))
                .collect();
            out.push((
                algorithm,
                truth::score(&truth, &members, &pattern_of),
                printed,
            ));
        }
        Outcome {
            truth,
            scores: out,
            unmatched_between_recorded,
            recorded,
        }
    })
}

/// The number before `label` in `text` (`… 3 ambiguous, …`).
fn number_before(text: &str, label: &str) -> Option<u64> {
    let at = text.find(label)?;
    let head = text[..at].trim_end();
    let start = head
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    head[start..].parse().ok()
}

/// Checks one outcome against the targets: every request logged by both tiers and claimed,
/// every message between recorded processes matched, the requests really in flight, nothing
/// ambiguous, ≥ 99 % exact by both algorithms, none without an instance, pattern counts per
/// request kind within 2 % of the client's log.
fn check(o: &Outcome, clients: usize) {
    let t = &o.truth;
    let report = || {
        let mut s = format!(
            "requests {}, in flight {:.2}, messages attributed {}, outside {} ({} to peers not \
             recorded), unclaimed {}, unmatched between recorded {}\n{}\n",
            t.requests.len(),
            t.in_flight,
            t.of.len(),
            t.outside,
            t.outside_to_unrecorded,
            t.unclaimed,
            o.unmatched_between_recorded,
            o.recorded
        );
        for (a, sc, printed) in &o.scores {
            s += &format!(
                "{a}: exact {}/{} ({:.2} %), Jaccard {:.3}, without instance {}, kinds {:?}, \
                 wrong {:?}\n{printed}\n",
                sc.exact,
                sc.requests,
                100.0 * sc.exact_share(),
                sc.mean_jaccard,
                sc.without_instance,
                sc.kinds,
                sc.wrong
            );
        }
        s
    };
    eprintln!("{}", report());
    assert_eq!(t.without_backend, 0, "{}", report());
    assert_eq!(t.outside - t.outside_to_unrecorded, 0, "{}", report());
    assert_eq!(t.unclaimed, 0, "{}", report());
    assert_eq!(o.unmatched_between_recorded, 0, "{}", report());
    if clients > 1 {
        assert!(t.in_flight > 0.6 * clients as f64, "{}", report());
    }
    for (a, sc, printed) in &o.scores {
        assert_eq!(
            number_before(printed, " ambiguous"),
            Some(0),
            "{a}\n{}",
            report()
        );
        assert!(sc.exact_share() >= 0.99, "{a}\n{}", report());
        assert_eq!(sc.without_instance, 0, "{a}\n{}", report());
        for (kind, &(requests, instances)) in &sc.kinds {
            let off = requests.abs_diff(instances) as f64 / requests.max(1) as f64;
            assert!(
                off <= 0.02,
                "{a} {kind}: {instances} for {requests}\n{}",
                report()
            );
        }
    }
}

#[test]
fn one_client_keep_alive_upstreams() {
    check(&run(1, 60, true), 1);
}

#[test]
fn four_clients_fresh_upstream_connections() {
    check(&run(4, 120, false), 4);
}

#[test]
fn eight_clients_in_flight_keep_alive_upstreams() {
    check(&run(8, 240, true), 8);
}

#[test]
fn eight_clients_in_flight_fresh_upstream_connections() {
    check(&run(8, 240, false), 8);
}

/// 16 in flight, the targets of 8 (`cargo test -p p5-cli --test services -- --ignored
/// --nocapture` prints the figures). Not met yet: measured 98.75 % exact by nesting and by
/// linking at 15.5 in flight (same-shape swaps among the first requests, none without an
/// instance).
#[test]
#[ignore = "a measurement at 16 in flight; run with --ignored"]
fn sixteen_clients_in_flight_keep_alive_upstreams() {
    check(&run(16, 480, true), 16);
}
