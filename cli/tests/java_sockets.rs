//! A Java program whose socket calls the JDK makes — `HttpURLConnection`'s pooled keep-alive
//! connections (`java.net.Socket` inside `sun.net`) — against a Java server on
//! `ServerSocket` whose calls are its own (routed by the instrumenter), both instrumented and
//! recorded with `p5 record`. The Java client records `java.net.Socket`s and `ServerSocket`s
//! through socket implementation factories, whoever uses them, and a call an instrumented
//! site routes is recorded once: every request and every reply is a message with both ends
//! recorded, on the threads that sent and received it.

mod two_way;

use p5_tracedb::domain::Direction;
use p5_tracedb::read;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

const CLIENTS: usize = 4;
const REQUESTS: usize = 25;

/// A message: direction, sending and receiving (program, thread), the send's sensor.
type Msg = (Direction, (String, String), (String, String), String);
/// Per connection, its messages.
type Conns = BTreeMap<i64, Vec<Msg>>;

fn connections(db: &Path) -> Conns {
    let url = format!("sqlite:{}", db.display());
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
        let end = |thread: i64| {
            let t = threads.iter().find(|t| t.id == thread).unwrap();
            let p = processes.iter().find(|p| p.id == t.process_id).unwrap();
            (p.program.clone(), t.name.clone())
        };
        let sensors = read::sensors(&db, s.id).await.unwrap();
        let sensor = |id: Option<i64>| {
            let s = sensors.iter().find(|s| Some(s.id) == id);
            s.map(|s| match &s.file {
                Some(f) => format!("{f}:{}", s.name),
                None => s.name.clone(),
            })
            .unwrap_or_default()
        };
        let roles = read::message_roles(&db, s.id).await.unwrap();
        let mut conns = Conns::new();
        for m in read::messages(&db, s.id).await.unwrap() {
            let r = roles.iter().find(|r| r.id == m.id).unwrap();
            conns.entry(r.connection).or_default().push((
                r.direction,
                end(m.send_thread),
                end(m.recv_thread),
                sensor(m.send_sensor),
            ));
        }
        conns
    })
}

#[test]
fn http_url_connection_requests_to_a_server_socket_server_are_matched_request_by_reply() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java_sockets");
    for f in ["TinyHttp.java", "UrlClient.java"] {
        std::fs::copy(here.join(f), src.join(f)).unwrap();
    }
    let out = dir.path().join("out");
    let report = p5_instrument::run(&p5_instrument::Options {
        paths: vec![src],
        out: Some(out.clone()),
        ..p5_instrument::Options::default()
    })
    .unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let classes = two_way::compile_java(
        dir.path(),
        &[&out.join("TinyHttp.java"), &out.join("UrlClient.java")],
    );
    let port = dir.path().join("port");
    let script = format!(
        "java -cp {c} TinyHttp {p} & java -cp {c} UrlClient {p} {CLIENTS} {REQUESTS}; wait",
        c = classes.display(),
        p = port.display()
    );
    let store = dir.path().join("store");
    let o = Command::new(env!("CARGO_BIN_EXE_p5"))
        .args(["record", "--no-agent", "--session", "java", "--store"])
        .arg(&store)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    let n = CLIENTS * REQUESTS;
    assert!(
        stdout.contains(&format!("UrlClient: {n} requests, {n} answered, quit ok")),
        "the client's own account: {stdout}\n{stderr}"
    );
    assert!(
        stdout.contains(" 0 sends and 0 receives unmatched\n"),
        "every recorded send and receive is one end of a message: {stdout}"
    );
    let conns = connections(&store.join("p5.sqlite"));
    let (mut calls, mut returns) = (0, 0);
    let mut handlers = BTreeSet::new();
    for (id, msgs) in &conns {
        // Each connection: served by one handler thread, asked from the client's threads
        // (the JDK hands a pooled connection to whichever thread asks next).
        let mut server_threads = BTreeSet::new();
        for (d, from, to, sensor) in msgs {
            let (client, server) = match d {
                Direction::Call => (from, to),
                Direction::Return => (to, from),
            };
            assert_eq!(
                (client.0.as_str(), server.0.as_str()),
                ("UrlClient", "TinyHttp"),
                "{msgs:?}"
            );
            assert!(
                client.1.starts_with("client-") || client.1 == "main",
                "{client:?}"
            );
            assert!(server.1.starts_with("handler-"), "{server:?}");
            // The server's writes: its own stream's site (routed, recorded once, under the
            // site's sensor); the client's: the JDK's, under the socket layer's.
            let want = match d {
                Direction::Call => "p5:java:socket.write",
                Direction::Return => "TinyHttp.java:getOutputStream",
            };
            assert_eq!(sensor, want, "{msgs:?}");
            server_threads.insert(server.1.clone());
        }
        assert_eq!(server_threads.len(), 1, "connection {id}: {msgs:?}");
        handlers.extend(server_threads);
        let c = msgs.iter().filter(|m| m.0 == Direction::Call).count();
        assert_eq!(c, msgs.len() - c, "a reply for each request: {msgs:?}");
        calls += c;
        returns += msgs.len() - c;
    }
    // Every request (and /quit) once, every reply once: nothing recorded twice.
    assert_eq!((calls, returns), (n + 1, n + 1), "{stdout}");
    assert_eq!(handlers.len(), conns.len());
}

/// Runs `p5.SocketsCheck` (the client's socket layer checked from inside) with `env`;
/// returns its "ok …" lines.
fn sockets_check(env: &[(&str, &str)], args: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java_sockets");
    let classes = two_way::compile_java(dir.path(), &[&here.join("SocketsCheck.java")]);
    let mut c = Command::new("java");
    c.arg("-cp")
        .arg(&classes)
        .arg("p5.SocketsCheck")
        .args(args)
        .env("P5_DIR", dir.path())
        .env("P5_FLUSH_MS", "600000")
        .env_remove("P5_LOGSERVER")
        .env_remove("P5_SOCKETS")
        .env_remove("LD_PRELOAD");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout.lines().map(str::to_owned).collect()
}

#[test]
fn the_java_socket_layer_records_each_call_once_and_behaves_as_the_jdk_does() {
    let ok = sockets_check(&[], &[]);
    for what in [
        "factories installed",
        "connect and accept recorded",
        "each socket described once",
        "a site's write recorded once under its sensor",
        "a read no site routed recorded by the socket layer",
        "no socket described again by the site",
        "a read timeout is -EAGAIN",
        "options and addresses",
        "end of stream is a 0-byte read",
        "shutdown recorded",
        "each connected socket's close recorded once",
        "a refused connect is -ECONNREFUSED",
    ] {
        assert!(ok.contains(&format!("ok {what}")), "{what}: {ok:?}");
    }
}

#[test]
fn p5_sockets_0_and_the_preload_leave_the_jdk_sockets_alone() {
    for env in [
        ("P5_SOCKETS", "0"),
        ("LD_PRELOAD", "/nonexistent/libp5_preload.so"),
    ] {
        let ok = sockets_check(&[env], &["off"]);
        assert_eq!(ok, ["ok factories left alone"], "{env:?}");
    }
}
