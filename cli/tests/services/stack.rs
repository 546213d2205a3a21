//! Recording the services stack (`stack.py` under `p5 record --preload`) and scoring an
//! analysis of it per request against the tiers' logs; shared by the services test and the
//! benchmark of a large recording (`cargo bench -p p5-cli --bench services`), each of which
//! uses part of it.
#![allow(dead_code)]

use crate::truth;
use p5_tracedb::read;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What one recorded run gave.
pub struct Outcome {
    pub truth: truth::Truth,
    /// Per algorithm: its score and what it printed.
    pub scores: Vec<(&'static str, truth::Score, String)>,
    /// Half messages on connections whose both sides were recorded.
    pub unmatched_between_recorded: usize,
    /// What `p5 record` printed.
    pub recorded: String,
}

/// What is recorded how.
#[derive(Clone, Copy)]
pub struct Setup {
    pub clients: usize,
    pub requests: usize,
    /// nginx keeps its upstream connections alive.
    pub keepalive: bool,
    /// The C client and the second backend instrumented (else every tier preloaded).
    pub instrumented: bool,
}

/// MariaDB's address (`P5_TEST_MARIADB`, default the local server), checked to answer.
fn maria_addr() -> String {
    let a = std::env::var("P5_TEST_MARIADB").unwrap_or_else(|_| "127.0.0.1:3306".to_owned());
    let up = a.parse::<std::net::SocketAddr>().is_ok_and(|s| {
        std::net::TcpStream::connect_timeout(&s, std::time::Duration::from_secs(2)).is_ok()
    });
    assert!(
        up,
        "MariaDB is needed at {a} (user root, no password): start the local server, or set \
         P5_TEST_MARIADB=HOST:PORT"
    );
    a
}

/// Instruments `client.c` and `backend.py` into `dir`; builds the client. Returns the
/// client's path and the instrumented backend's directory.
fn instrument_tiers(dir: &Path) -> (PathBuf, PathBuf) {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/services");
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    for f in ["client.c", "backend.py"] {
        std::fs::copy(here.join(f), src.join(f)).unwrap();
    }
    let out = dir.join("instrumented");
    let report = p5_instrument::run(&p5_instrument::Options {
        paths: vec![src],
        out: Some(out.clone()),
        ..p5_instrument::Options::default()
    })
    .unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    std::fs::write(out.join("p5.h"), p5_instrument::runtime::HEADER).unwrap();
    let lib = p5_instrument::runtime::static_lib().expect("libp5_runtime.a");
    let client = dir.join("client");
    p5_instrument::runtime::compile_c(&[out.join("client.c").as_path()], &out, &client, &lib)
        .expect("build the instrumented C client");
    (client, out)
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
    p5_env(dir, &[], args)
}

fn p5_env(dir: &Path, env: &[(&str, std::ffi::OsString)], args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_p5"))
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
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

/// A recorded session of the stack, in its own directory.
pub struct Recorded {
    _keep: Option<tempfile::TempDir>,
    pub dir: PathBuf,
    /// The trace database's URL.
    pub url: String,
    /// What `p5 record` printed.
    pub printed: String,
}

/// Records the stack with `clients` closed-loop threads and `requests` requests.
pub fn record(setup: Setup) -> Recorded {
    let Setup {
        clients,
        requests,
        keepalive,
        instrumented,
    } = setup;
    need("nginx", "scripts/install-deps.sh installs nginx-light");
    need(
        "redis-server",
        "scripts/install-deps.sh installs redis-server",
    );
    let (keep, dir) = workdir();
    let stack = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/services/stack.py");
    let store = dir.join("store");
    let (c, n, k, b) = (
        clients.to_string(),
        requests.to_string(),
        if keepalive { "1" } else { "0" },
        base_port().to_string(),
    );
    let dsn = pg_dsn();
    let maria = maria_addr();
    let d = dir.to_str().unwrap();
    let mut env = Vec::new();
    if instrumented {
        let (client, backend) = instrument_tiers(&dir);
        let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../clients/python");
        env.push(("SVC_C_CLIENT", client.into_os_string()));
        env.push(("SVC_BACKEND2", backend.into_os_string()));
        env.push(("SVC_P5_PYTHON", python.into_os_string()));
    }
    let recorded = p5_env(
        &dir,
        &env,
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
            &maria,
        ],
    );
    let url = format!("sqlite:{}", store.join("p5.sqlite").display());
    Recorded {
        _keep: keep,
        dir,
        url,
        printed: recorded,
    }
}

/// `p5 analyze ALGORITHM` on the session as a user runs it on a recorded session (one node
/// per thread, causality from the recorded threads by default); what it printed.
pub fn analyze(rec: &Recorded, algorithm: &str) -> String {
    p5(
        &rec.dir,
        &[
            "analyze",
            algorithm,
            "--db",
            &rec.url,
            "--session",
            "svc",
            "--node",
            "thread",
        ],
    )
}

/// Records and runs nesting and linking on the session, scoring every request.
pub fn run(setup: Setup) -> Outcome {
    let rec = record(setup);
    let printed: Vec<_> = ["nesting", "linking"]
        .into_iter()
        .map(|a| (a, analyze(&rec, a)))
        .collect();
    score(&rec, printed)
}

/// Scores the last run of each algorithm in `printed` against the tiers' logs.
pub fn score(rec: &Recorded, printed: Vec<(&'static str, String)>) -> Outcome {
    let log = truth::read_log(&rec.dir.join("requests.jsonl"));
    let url = &rec.url;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let db = read::Reader::open(&p5_tracedb::DbUrl::parse(url).unwrap())
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
        let mut out = Vec::new();
        for (algorithm, printed) in printed {
            let run = runs
                .iter()
                .filter(|r| r.algorithm == algorithm)
                .max_by_key(|r| r.id)
                .unwrap_or_else(|| panic!("no {algorithm} run stored"));
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
            recorded: rec.printed.clone(),
        }
    })
}

/// Every tier preloaded.
pub fn preloaded(clients: usize, requests: usize, keepalive: bool) -> Setup {
    Setup {
        clients,
        requests,
        keepalive,
        instrumented: false,
    }
}
