//! Python programs that do their socket I/O inside the standard library — `socketserver`'s
//! `rfile`/`wfile` (`socket.makefile`), `http.server`, `http.client`, `urllib.request`,
//! `requests`/`urllib3`, asyncio's streams — instrumented by p5-instrument and recorded with
//! `p5 record`. The instrumenter routes only the socket calls written in the programs
//! themselves; the Python client wraps the socket layer, so every request and every reply is a
//! message with both ends recorded, on the thread that sent or received it, and a call an
//! instrumented site recorded is not recorded again. Servers started as `python -m module` are
//! named after the module, clients after their script.

use p5_tracedb::domain::Direction;
use p5_tracedb::read;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Client threads (or asyncio tasks), and requests each makes on its one connection.
const CLIENTS: usize = 4;
const REQUESTS: usize = 25;

/// Copies the test programs into `dir/src` and instruments them into `dir/out`.
fn instrumented(dir: &Path) -> PathBuf {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python_sockets");
    for e in std::fs::read_dir(&here).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "py") {
            std::fs::copy(&p, src.join(p.file_name().unwrap())).unwrap();
        }
    }
    let out = dir.join("out");
    let report = p5_instrument::run(&p5_instrument::Options {
        paths: vec![src],
        out: Some(out.clone()),
        ..p5_instrument::Options::default()
    })
    .unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    out
}

/// Records `script` (run by `sh` in the instrumented directory) as session `session`;
/// returns what `p5 record` printed.
fn record(dir: &Path, session: &str, script: &str) -> String {
    assert!(
        Command::new("python3").arg("--version").output().is_ok(),
        "python3 is needed (scripts/install-deps.sh installs it)"
    );
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("../clients/python");
    let o = Command::new(env!("CARGO_BIN_EXE_p5"))
        .args(["record", "--no-agent", "--session", session, "--store"])
        .arg(dir.join("store"))
        .args(["--", "sh", "-c", script])
        .current_dir(dir.join("out"))
        .env("PYTHONPATH", &client)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    stdout
}

/// One side of a connection as the merged trace shows it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct End {
    program: String,
    thread: String,
}

/// A connection's messages, each as (direction, sending end, receiving end, send sensor).
#[derive(Default)]
struct Conn {
    messages: Vec<(Direction, End, End, String)>,
}

impl Conn {
    fn count(&self, d: Direction) -> usize {
        self.messages.iter().filter(|m| m.0 == d).count()
    }
}

/// Each kind of message once, with its count: (direction, from, to, sensor) × n.
impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        for (d, from, to, sensor) in &self.messages {
            let k = format!(
                "{d:?} {}/{} -> {}/{} ({sensor})",
                from.program, from.thread, to.program, to.thread
            );
            *kinds.entry(k).or_default() += 1;
        }
        f.debug_map().entries(kinds).finish()
    }
}

/// The merged session: its processes' programs and its connections (matched messages only).
struct Trace {
    programs: Vec<String>,
    conns: BTreeMap<i64, Conn>,
    matched: usize,
    all: usize,
}

fn trace(dir: &Path) -> Trace {
    let url = format!("sqlite:{}", dir.join("store/p5.sqlite").display());
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
        let sensors = read::sensors(&db, s.id).await.unwrap();
        let end = |thread: i64| {
            let t = threads.iter().find(|t| t.id == thread).unwrap();
            let p = processes.iter().find(|p| p.id == t.process_id).unwrap();
            End {
                program: p.program.clone(),
                thread: t.name.clone(),
            }
        };
        let sensor = |i: Option<i64>| {
            i.and_then(|i| sensors.iter().find(|s| s.id == i))
                .map(|s| match &s.file {
                    Some(f) => format!("{f}:{}", s.name),
                    None => s.name.clone(),
                })
                .unwrap_or_default()
        };
        let messages = read::messages(&db, s.id).await.unwrap();
        let roles = read::message_roles(&db, s.id).await.unwrap();
        let mut conns: BTreeMap<i64, Conn> = BTreeMap::new();
        for m in &messages {
            let Some(r) = roles.iter().find(|r| r.id == m.id) else {
                continue;
            };
            conns.entry(r.connection).or_default().messages.push((
                r.direction,
                end(m.send_thread),
                end(m.recv_thread),
                sensor(m.send_sensor),
            ));
        }
        Trace {
            programs: processes.iter().map(|p| p.program.clone()).collect(),
            conns,
            matched: messages.len(),
            all: roles.len(),
        }
    })
}

/// What one client's connection must look like.
struct Expect<'a> {
    client: &'a str,
    server: &'a str,
    /// Messages of the requests of one connection (http.client sends a POST's headers
    /// and body apart) and of the replies (http.server writes headers and body apart).
    calls: std::ops::RangeInclusive<usize>,
    replies: std::ops::RangeInclusive<usize>,
    /// Client threads are named `client-K`; else every end is the process's main thread.
    threaded: bool,
}

/// Every request and every reply is one matched message; each connection's requests go
/// from one client thread to one server thread and its replies back between the same two;
/// each client thread (or task) has one connection and, on a threading server, each
/// connection its own handler thread. Returns the connections checked.
fn assert_exchanges(t: &Trace, stdout: &str, e: &Expect<'_>) -> Vec<(End, End)> {
    assert!(
        stdout.contains(" 0 sends and 0 receives unmatched\n"),
        "every recorded send and receive is one end of a message: {stdout}"
    );
    assert_eq!(t.matched, t.all, "{stdout}");
    let mut ends = Vec::new();
    for c in t.conns.values() {
        let first = &c.messages[0];
        let (client, server) = match first.0 {
            Direction::Call => (first.1.clone(), first.2.clone()),
            Direction::Return => (first.2.clone(), first.1.clone()),
        };
        // The client's main thread's connection of a threaded client asks /quit.
        let quit = e.threaded && client.thread == "MainThread";
        if client.program != e.client || server.program != e.server || quit {
            continue;
        }
        let (calls, replies) = (c.count(Direction::Call), c.count(Direction::Return));
        assert!(e.calls.contains(&calls), "{calls} calls: {c:?}");
        assert!(e.replies.contains(&replies), "{replies} replies: {c:?}");
        for (d, from, to, _) in &c.messages {
            let (want_from, want_to) = match d {
                Direction::Call => (&client, &server),
                Direction::Return => (&server, &client),
            };
            assert_eq!((from, to), (want_from, want_to), "{c:?}");
        }
        ends.push((client, server));
    }
    assert_eq!(ends.len(), CLIENTS, "{:?}\n{stdout}", t.programs);
    let clients: BTreeSet<&str> = ends.iter().map(|(c, _)| c.thread.as_str()).collect();
    let servers: BTreeSet<&str> = ends.iter().map(|(_, s)| s.thread.as_str()).collect();
    if e.threaded {
        let want: BTreeSet<String> = (0..CLIENTS).map(|k| format!("client-{k}")).collect();
        let want: BTreeSet<&str> = want.iter().map(String::as_str).collect();
        assert_eq!(clients, want, "{ends:?}");
        assert_eq!(servers.len(), CLIENTS, "a handler thread each: {ends:?}");
        assert!(!servers.contains("MainThread"), "{ends:?}");
    } else {
        assert_eq!(clients, BTreeSet::from(["MainThread"]), "{ends:?}");
        assert_eq!(servers, BTreeSet::from(["MainThread"]), "{ends:?}");
    }
    ends
}

/// The send sensors of the messages from `program`.
fn send_sensors(t: &Trace, program: &str) -> BTreeSet<String> {
    t.conns
        .values()
        .flat_map(|c| &c.messages)
        .filter(|m| m.1.program == program)
        .map(|m| m.3.clone())
        .collect()
}

#[test]
fn a_socketserver_stream_handler_is_recorded_through_its_makefile_reader_and_writer() {
    let dir = tempfile::tempdir().unwrap();
    instrumented(dir.path());
    let script = format!(
        "python3 -m stream_server port {CLIENTS} & \
         python3 stream_client.py port {CLIENTS} {REQUESTS}; wait"
    );
    let stdout = record(dir.path(), "stream", &script);
    let n = CLIENTS * REQUESTS;
    assert!(
        stdout.contains(&format!("stream_client: {n} requests, {n} answered")),
        "the client's own account: {stdout}"
    );
    let t = trace(dir.path());
    // `python -m stream_server` is named after its module, `python stream_client.py` after
    // its script.
    assert!(
        t.programs.iter().any(|p| p == "stream_server"),
        "{:?}",
        t.programs
    );
    assert!(
        t.programs.iter().any(|p| p == "stream_client.py"),
        "{:?}",
        t.programs
    );
    assert_exchanges(
        &t,
        &stdout,
        &Expect {
            client: "stream_client.py",
            server: "stream_server",
            calls: REQUESTS..=REQUESTS,
            replies: REQUESTS..=REQUESTS,
            threaded: true,
        },
    );
    assert_eq!(t.matched, 2 * n, "{stdout}");
    // The client's requests: its own `sock.sendall` call site (instrumented), recorded once,
    // under the site's sensor; the server's replies: the wrapped socket under wfile.write.
    assert_eq!(
        send_sensors(&t, "stream_client.py"),
        BTreeSet::from(["stream_client.py:sendall".to_owned()])
    );
    assert_eq!(
        send_sensors(&t, "stream_server"),
        BTreeSet::from(["p5:python:socket.sendall".to_owned()])
    );
}

/// http_app under `python -m http_app`, asked by `client` (a script of this directory).
fn http_app(client: &str, session: &str) {
    let dir = tempfile::tempdir().unwrap();
    instrumented(dir.path());
    let script =
        format!("python3 -m http_app port & python3 {client}.py port {CLIENTS} {REQUESTS}; wait");
    let stdout = record(dir.path(), session, &script);
    let n = CLIENTS * REQUESTS;
    assert!(
        stdout.contains(&format!("{client}: {n} requests, {n} answered, quit ok")),
        "the client's own account: {stdout}"
    );
    let t = trace(dir.path());
    let program = format!("{client}.py");
    assert_exchanges(
        &t,
        &stdout,
        &Expect {
            client: &program,
            server: "http_app",
            calls: REQUESTS..=REQUESTS + REQUESTS / 2,
            replies: REQUESTS..=2 * REQUESTS,
            threaded: true,
        },
    );
    // The client's threads' connections and the one that asked /quit: nothing else.
    assert_eq!(t.conns.len(), CLIENTS + 1, "{:?}", t.conns);
    assert!(
        stdout.contains(&format!("connections: {}\n", CLIENTS + 1)),
        "{stdout}"
    );
}

#[test]
fn an_http_server_app_with_keep_alive_http_client_threads_is_matched_request_by_reply() {
    http_app("http_client", "http");
}

#[test]
fn requests_sessions_against_an_http_server_app_are_matched_request_by_reply() {
    let have = Command::new("python3")
        .args(["-c", "import requests"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        have,
        "requests is needed (scripts/install-py.sh installs it)"
    );
    http_app("requests_client", "requests");
}

#[test]
fn an_asyncio_stream_server_and_client_are_matched_request_by_reply() {
    let dir = tempfile::tempdir().unwrap();
    instrumented(dir.path());
    let script = format!(
        "python3 -m asyncio_server port {CLIENTS} & \
         python3 asyncio_client.py port {CLIENTS} {REQUESTS}; wait"
    );
    let stdout = record(dir.path(), "asyncio", &script);
    let n = CLIENTS * REQUESTS;
    assert!(
        stdout.contains(&format!("asyncio_client: {n} requests, {n} answered")),
        "the client's own account: {stdout}"
    );
    let t = trace(dir.path());
    assert_exchanges(
        &t,
        &stdout,
        &Expect {
            client: "asyncio_client.py",
            server: "asyncio_server",
            calls: REQUESTS..=REQUESTS,
            replies: REQUESTS..=REQUESTS,
            threaded: false,
        },
    );
    assert_eq!(t.matched, 2 * n, "{stdout}");
    assert_eq!(t.conns.len(), CLIENTS, "{:?}", t.conns);
}
