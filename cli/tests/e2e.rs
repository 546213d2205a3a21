//! End-to-end tests: real instrumented processes (`p5-loadgen`, the C sample) against a real
//! log server process (`p5 logserver`), checked by reading the session store back.
//!
//! - N threads × M events arrive exactly once and in per-thread order;
//! - SIGKILL of the log server in the middle of a run, restart, and the count is still exact;
//! - a log server absent at the start and started later loses nothing;
//! - a forked child records as its own process;
//! - `p5 demo` instruments and builds a C case study with gcc against the static library, and
//!   the recorded events match what the program did.

use p5_logserver::reader::StoreDir;
use p5_wire::data::{EventsFrame, StreamOpen};
use p5_wire::frame::FrameType;
use p5_wire::store::StoreRecord;
use p5_wire::{Event, Hello};
use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const OUTER: u64 = 0x10ad_0000_0000_0001;
const INNER: u64 = 0x10ad_0000_0000_0002;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `p5 logserver` child process.
struct LogServer(Child);

impl LogServer {
    fn start(store: &Path, port: u16) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_p5"))
            .args([
                "logserver",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--store",
            ])
            .arg(store)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start p5 logserver");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("listening on"), "unexpected: {line:?}");
        LogServer(child)
    }

    fn terminate(mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let status = self.0.wait().unwrap();
        assert!(status.success(), "log server exit: {status}");
    }

    fn sigkill(mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for LogServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn loadgen(port: u16, session: &str, spool: &Path, args: &[&str]) -> Child {
    loadgen_cmd(port, session, spool, args)
        .spawn()
        .expect("start p5-loadgen")
}

fn loadgen_cmd(port: u16, session: &str, spool: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_p5-loadgen"));
    c.args(args)
        .env("P5_LOGSERVER", format!("127.0.0.1:{port}"))
        .env("P5_SESSION", session)
        .env("P5_DIR", spool)
        .env("P5_EXIT_TIMEOUT_MS", "20000")
        .stdout(Stdio::piped());
    c
}

fn wait_ok(c: Child) -> String {
    let out = c.wait_with_output().unwrap();
    assert!(out.status.success(), "p5-loadgen exit: {}", out.status);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A counter from p5-loadgen's `key=value` stats line.
fn stat(report: &str, key: &str) -> u64 {
    report
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {report:?}"))
}

/// One process as read back from the store.
#[derive(Debug, Default)]
struct Proc {
    pid: u32,
    ppid: u32,
    /// stream id → (name, events in order)
    streams: BTreeMap<u32, (String, Vec<Event>)>,
}

fn read_session(store: &Path, session: &str) -> BTreeMap<u64, Proc> {
    let dir = StoreDir::open(store).unwrap().session(session).unwrap();
    let mut procs: BTreeMap<u64, Proc> = BTreeMap::new();
    let mut records = dir.records().unwrap();
    while records.advance().unwrap() {
        let Some(r) = records.record() else { continue };
        match r.record {
            StoreRecord::Process { hello, .. } => {
                let Hello { identity, .. } = hello;
                let p = procs.entry(identity.process_uid).or_default();
                p.pid = identity.pid;
                p.ppid = identity.ppid;
            }
            StoreRecord::Data {
                process_uid,
                ty,
                body,
                ..
            } => {
                let p = procs.entry(process_uid).or_default();
                if ty == FrameType::StreamOpen as u8 {
                    let o = StreamOpen::decode_body(body).unwrap();
                    p.streams.entry(o.header.stream).or_default().0 = o.name;
                } else if ty == FrameType::Events as u8 {
                    let f = EventsFrame::parse(body).unwrap();
                    let s = p.streams.entry(f.header.stream).or_default();
                    for e in f.events().unwrap() {
                        s.1.push(e.unwrap());
                    }
                }
            }
            _ => {}
        }
    }
    assert!(
        records.faults().is_empty(),
        "faults: {:?}",
        records.faults()
    );
    procs
}

/// Checks that every `load-*` thread of `p` recorded exactly `events` events in the loadgen's
/// pattern (outer enter, inner enter, inner exit, outer exit) with non-decreasing times.
fn check_load(p: &Proc, threads: usize, events: usize) {
    let loads: Vec<_> = p
        .streams
        .values()
        .filter(|(name, _)| name.starts_with("load-"))
        .collect();
    assert_eq!(
        loads.len(),
        threads,
        "threads of pid {}: {:?}",
        p.pid,
        p.streams.keys()
    );
    for (name, evs) in loads {
        assert_eq!(evs.len(), events, "{name} of pid {}", p.pid);
        let mut last = 0;
        for (i, e) in evs.iter().enumerate() {
            let ok = match (i % 4, e) {
                (0, Event::Enter { sensor, .. }) => *sensor == OUTER,
                (1, Event::Enter { sensor, .. }) => *sensor == INNER,
                (2, Event::Exit { sensor, .. }) => *sensor == INNER,
                (3, Event::Exit { sensor, .. }) => *sensor == OUTER,
                _ => false,
            };
            assert!(ok, "{name}: event {i} out of order: {e:?}");
            assert!(e.time() >= last, "{name}: time went back at event {i}");
            last = e.time();
        }
    }
}

#[test]
fn threads_events_arrive_exactly_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let port = free_port();
    let server = LogServer::start(&store, port);
    wait_ok(loadgen(
        port,
        "once",
        dir.path(),
        &["--threads", "4", "--events", "50000"],
    ));
    server.terminate();
    let procs = read_session(&store, "once");
    assert_eq!(procs.len(), 1);
    check_load(procs.values().next().unwrap(), 4, 50_000);
}

#[test]
fn log_server_killed_mid_run_and_restarted_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let port = free_port();
    let server = LogServer::start(&store, port);
    // ~2.5 s of recording: 4 threads, 200 pauses of 10 ms each.
    let load = loadgen(
        port,
        "kill",
        dir.path(),
        &[
            "--threads",
            "4",
            "--events",
            "200000",
            "--pause-us",
            "10000",
        ],
    );
    std::thread::sleep(Duration::from_millis(800));
    server.sigkill();
    std::thread::sleep(Duration::from_millis(500));
    let server = LogServer::start(&store, port);
    let report = wait_ok(load);
    server.terminate();
    assert!(
        stat(&report, "connects") >= 2,
        "reconnected after the kill: {report}"
    );
    assert_eq!(stat(&report, "lost"), 0, "{report}");
    let procs = read_session(&store, "kill");
    assert_eq!(procs.len(), 1);
    check_load(procs.values().next().unwrap(), 4, 200_000);
}

#[test]
fn log_server_absent_at_start_then_started_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let port = free_port();
    let load = loadgen(
        port,
        "late",
        dir.path(),
        // ~2 s of recording: 400 pauses of 10 ms; the server comes up after 0.7 s.
        &[
            "--threads",
            "2",
            "--events",
            "400000",
            "--pause-us",
            "10000",
        ],
    );
    std::thread::sleep(Duration::from_millis(700));
    let server = LogServer::start(&store, port);
    let report = wait_ok(load);
    server.terminate();
    assert!(
        stat(&report, "spooled") > 0,
        "frames went to the spool first: {report}"
    );
    assert_eq!(stat(&report, "lost"), 0, "{report}");
    let procs = read_session(&store, "late");
    assert_eq!(procs.len(), 1);
    check_load(procs.values().next().unwrap(), 2, 400_000);
    // Everything was delivered, so no spool file is left behind.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".p5spool"))
        .collect();
    assert!(left.is_empty(), "spool files left: {left:?}");
}

#[test]
fn process_that_never_reached_a_server_leaves_a_spool_that_imports_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let spool_dir = dir.path().join("spool");
    let store = dir.path().join("store");
    std::fs::create_dir_all(&spool_dir).unwrap();
    // Nothing listens on the port: the process runs and exits without a log server.
    let mut load = loadgen_cmd(
        free_port(),
        "away",
        &spool_dir,
        &["--threads", "3", "--events", "30000"],
    );
    load.env_remove("P5_EXIT_TIMEOUT_MS");
    let report = wait_ok(load.spawn().unwrap());
    assert_eq!(stat(&report, "connects"), 0, "{report}");
    let spools: Vec<_> = std::fs::read_dir(&spool_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "p5spool"))
        .collect();
    assert_eq!(spools.len(), 1, "one spool file: {spools:?}");
    let status = Command::new(env!("CARGO_BIN_EXE_p5"))
        .args(["logserver", "import", "--store"])
        .arg(&store)
        .arg(&spools[0])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let procs = read_session(&store, "away");
    assert_eq!(procs.len(), 1);
    check_load(procs.values().next().unwrap(), 3, 30_000);
}

#[test]
fn forked_child_records_as_its_own_process() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let port = free_port();
    let server = LogServer::start(&store, port);
    wait_ok(loadgen(
        port,
        "fork",
        dir.path(),
        &["--threads", "2", "--events", "20000", "--fork"],
    ));
    server.terminate();
    let procs = read_session(&store, "fork");
    assert_eq!(procs.len(), 2, "parent and child");
    let pids: Vec<u32> = procs.values().map(|p| p.pid).collect();
    let child = procs
        .values()
        .find(|p| pids.contains(&p.ppid))
        .expect("a process whose parent is the other one");
    assert_ne!(child.pid, child.ppid);
    for p in procs.values() {
        check_load(p, 2, 20_000);
    }
}

#[test]
fn demo_records_the_c_sample() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo");
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_p5"))
        .args([
            "demo",
            "--no-serve",
            "--quick",
            "--no-agent",
            "--only",
            "cascade",
            "--out",
        ])
        .arg(&out)
        .output()
        .expect("run p5 demo");
    assert!(
        output.status.success(),
        "p5 demo failed after {:?}: {}",
        started.elapsed(),
        String::from_utf8_lossy(&output.stderr)
    );
    // Sensor ids of the instrumented functions, from the instrumenter's manifest.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("instr/p5-manifest.json")).unwrap())
            .unwrap();
    let id_of = |function: &str, kind: &str| -> u64 {
        let s = manifest["sensors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| {
                s["file"] == "cascade/cascade.c" && s["function"] == function && s["kind"] == kind
            })
            .unwrap_or_else(|| panic!("sensor {kind} {function}"));
        u64::from_str_radix(s["id"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
    };
    let inspect = Command::new(env!("CARGO_BIN_EXE_p5"))
        .arg("inspect")
        .arg(out.join("store"))
        .arg("--json")
        .output()
        .unwrap();
    assert!(inspect.status.success());
    let v: serde_json::Value = serde_json::from_slice(&inspect.stdout).expect("json summary");
    let session = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "cascade")
        .expect("cascade session");
    let procs = session["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 3, "client, shop, db");
    let sensor = |p: &serde_json::Value, id: u64| -> u64 {
        p["sensors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| {
                u64::from_str_radix(s["sensor"].as_str().unwrap().trim_start_matches("0x"), 16)
                    .unwrap()
                    == id
            })
            .map_or(0, |s| s["events"].as_u64().unwrap())
    };
    let role = |r: &str| procs.iter().find(|p| p["argv"][1] == r).unwrap();
    let (client, shop, db) = (role("client"), role("shop"), role("db"));
    assert_eq!(client["runtime"], "c");
    // 150 requests, an enter and an exit each.
    assert_eq!(sensor(client, id_of("request_page", "function")), 300);
    assert_eq!(sensor(shop, id_of("render_page", "function")), 300);
    assert_eq!(sensor(db, id_of("lookup_prices", "function")), 300);
    // Every request is sent at least once (a send may be split, never merged).
    assert!(sensor(client, id_of("write_full", "comm")) >= 150);
    for p in procs {
        assert!(
            p["offsets"]["count"].as_u64().unwrap() > 0,
            "offset samples"
        );
    }
}

#[test]
fn record_runs_a_program_with_the_host_agent_and_merges() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let out = Command::new(env!("CARGO_BIN_EXE_p5"))
        .args(["record", "--session", "rec", "--store"])
        .arg(&store)
        .args([
            "--",
            env!("CARGO_BIN_EXE_p5-loadgen"),
            "--threads",
            "2",
            "--events",
            "8000",
        ])
        .args(["--pause-us", "30000"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("session rec"),
        "merge summary printed: {stdout}"
    );
    assert!(store.join("p5.sqlite").is_file(), "merged into SQLite");
    let procs = read_session(&store, "rec");
    assert_eq!(procs.len(), 2, "the program and the host agent");
    let program = procs
        .values()
        .find(|p| p.streams.values().any(|(n, _)| n.starts_with("load-")))
        .expect("the program's process");
    check_load(program, 2, 8000);
    let agent = procs.values().find(|p| p.pid != program.pid).unwrap();
    let metric_events: usize = agent.streams.values().map(|(_, e)| e.len()).sum();
    assert!(metric_events > 0, "the host agent delivered samples");
}

#[test]
fn record_returns_the_program_status_and_waits_for_its_descendants() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("grandchild-done");
    // The shell exits with 3 at once; its background grandchild finishes 300 ms later.
    let script = format!("(sleep 0.3; touch {}) & exit 3", marker.display());
    let status = Command::new(env!("CARGO_BIN_EXE_p5"))
        .args([
            "record",
            "--no-agent",
            "--no-merge",
            "--session",
            "st",
            "--store",
        ])
        .arg(dir.path().join("store"))
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(3));
    assert!(
        marker.exists(),
        "p5 record returned before the grandchild finished"
    );
}
