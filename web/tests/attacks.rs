//! Attacks on a real `p5 web` with real sockets (issue 46 D6, D10): idle sockets over the
//! descriptor limit, request bodies trickling in, pipelined requests whose answers are never
//! read (with and without a token), a flood re-opening thousands of sockets, accept failing for
//! want of descriptors, and `Host` headers or request targets naming another host. Each test
//! runs the server as a child process (this test binary, re-run as [`child_server`]) under a
//! descriptor limit of its own, as `prlimit --nofile=N:N p5 web …` would, and asserts that a
//! real client is answered, status and body, while the attack goes on; how long each answer
//! took is printed (`--nocapture`), not asserted.

mod fixture;
mod peers;

use peers::{Attack, Kind, Server};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Not a test of its own: the server process of the tests below, when they run this binary
/// with `P5_WEB_CHILD=NOFILE;DB;TOKEN;LIMITS` (LIMITS: empty for `p5 web`'s own, or
/// `max_connections,header_timeout_s`). It serves until killed.
#[test]
fn child_server() {
    let Ok(spec) = std::env::var("P5_WEB_CHILD") else {
        return;
    };
    let parts: Vec<&str> = spec.split(';').collect();
    let [nofile, db, token, limits] = parts[..] else {
        panic!("bad P5_WEB_CHILD {spec:?}");
    };
    peers::limit_nofile(nofile.parse().expect("nofile"));
    if let Ok(filter) = std::env::var("P5_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .init();
    }
    let token = (!token.is_empty()).then(|| token.to_owned());
    if limits.is_empty() {
        let args = p5_web::WebOptions {
            db: format!("sqlite:{db}"),
            listen: "127.0.0.1:0".parse().unwrap(),
            token,
            select_dir: None,
            cache_dir: None,
            no_cache: true,
        };
        p5_web::run(&args, |url| eprintln!("p5 web: {url}")).expect("p5 web");
        return;
    }
    let (cap, header) = limits.split_once(',').expect("limits");
    let limits = p5_web::serve::Limits {
        max_connections: cap.parse().unwrap(),
        header_timeout: Duration::from_secs(header.parse().unwrap()),
        ..p5_web::serve::Limits::default()
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        // p5 web's accept queue (std's `bind` asks for 128).
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = socket.listen(4096).unwrap();
        let cfg = p5_web::server::Config {
            db: format!("sqlite:{db}"),
            select_dir: None,
            token,
            cache_dir: None,
        };
        let (app, _) = p5_web::server::app(&cfg).await.expect("app");
        eprintln!("p5 web: http://{}/", listener.local_addr().unwrap());
        p5_web::serve::serve(listener, app, limits, std::future::pending()).await;
    });
}

/// A fixture database in a fresh directory.
fn database() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("trace.db");
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let pool = fixture::create(&db).await;
        fixture::small(&pool).await;
        pool.close().await;
    });
    dir
}

/// `p5 web` on the fixture under `--nofile=nofile`, with `limits` (see [`child_server`]).
fn server(dir: &Path, nofile: u64, token: Option<&str>, limits: &str) -> Server {
    peers::raise_nofile();
    let db = dir.join("trace.db");
    let spec = format!("{nofile};{};{};{limits}", db.display(), token.unwrap_or(""));
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["child_server", "--exact", "--nocapture", "--test-threads=1"])
        .env("P5_WEB_CHILD", spec);
    Server::spawn(cmd)
}

/// Asks for the session list `times` times, each on a new connection, while `attack` runs:
/// each must be a 200 naming the fixture's session.
fn served_during(server: &Server, attack: &Attack, what: &str, token: Option<&str>, times: usize) {
    for i in 0..times {
        let a = peers::sessions(server.addr, token).unwrap_or_else(|e| {
            panic!(
                "{what}: request {i} not answered ({e}); attackers connected {} times\n{}",
                attack.connects(),
                server.log.lock().unwrap()
            )
        });
        assert_eq!(a.status, 200, "{what}: request {i}: {}", a.body);
        assert!(a.body.contains("\"cracker\""), "{what}: {}", a.body);
        eprintln!("{what}: request {i} answered in {:?}", a.took);
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// D6: 600 idle sockets, reconnecting whenever one is closed, against `p5 web` under a
/// 300-descriptor limit.
#[test]
fn idle_sockets_over_the_descriptor_limit_do_not_stop_the_service() {
    let dir = database();
    let server = server(dir.path(), 300, None, "");
    let attack = Attack::start(server.addr, Kind::Idle, 600);
    served_during(&server, &attack, "600 idle sockets", None, 5);
    assert!(attack.connects() >= 300, "the attack connected");
}

/// D10: 300 connections that announce a 1,000,000-byte POST body and send one byte a second,
/// under a 300-descriptor limit; once they are gone, one such connection alone (no eviction
/// needed) is ended by the server for its rate.
#[test]
fn trickling_request_bodies_do_not_stop_the_service() {
    let dir = database();
    let server = server(dir.path(), 300, None, "");
    let attack = Attack::start(server.addr, Kind::SlowBody, 300);
    served_during(&server, &attack, "300 trickling bodies", None, 5);
    assert!(attack.connects() >= 150, "the attack connected");
    drop(attack);
    let t = std::time::Instant::now();
    let alone = Attack::start(server.addr, Kind::SlowBody, 1);
    while alone.ended() == 0 && t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(alone.ended(), 1, "the server ends a trickling body");
    eprintln!("a trickling body was ended after {:?}", t.elapsed());
}

/// D10: 300 connections that pipeline GETs and never read the answers, under a
/// 300-descriptor limit; then the same against a server with `--token`, whose 401s fill the
/// sockets.
#[test]
fn unread_pipelined_answers_do_not_stop_the_service() {
    let dir = database();
    for token in [None, Some("s3cret")] {
        let server = server(dir.path(), 300, token, "");
        let attack = Attack::start(server.addr, Kind::Pipeline, 300);
        let what = format!("300 pipeliners (token: {})", token.is_some());
        served_during(&server, &attack, &what, token, 5);
        assert!(attack.connects() >= 150, "the attack connected");
    }
}

/// D10: a flood that keeps 3,000 sockets open, re-opening each as soon as the server closes
/// it, at the usual default descriptor limit of 1024.
#[test]
fn a_flood_of_reopened_sockets_does_not_stop_the_service() {
    let dir = database();
    let server = server(dir.path(), 1024, None, "");
    let attack = Attack::start(server.addr, Kind::Idle, 3000);
    served_during(&server, &attack, "3000 re-opened sockets", None, 10);
    assert!(attack.connects() >= 1000, "the attack connected");
}

/// Accept failing with EMFILE (a server whose cap is above its descriptor limit: 1000
/// connections under 64 descriptors): the loop frees a descriptor by closing the longest idle
/// connection instead of waiting for header timeouts (30 s here), and keeps serving.
#[test]
fn accept_out_of_descriptors_closes_an_idle_connection() {
    let dir = database();
    let server = server(dir.path(), 64, None, "1000,30");
    let attack = Attack::start(server.addr, Kind::Idle, 200);
    served_during(&server, &attack, "EMFILE", None, 5);
    assert!(attack.connects() >= 60, "the attack connected");
}

/// DNS rebinding: without a token only requests that name a loopback host are served; a
/// `Host` with user information and an absolute-form target naming another host are refused.
#[test]
fn requests_naming_another_host_are_refused() {
    let dir = database();
    let server = server(dir.path(), 1024, None, "");
    let a = server.addr;
    let cases = [
        (format!("GET /api/v1/sessions HTTP/1.1\r\nHost: {a}"), 200),
        (
            format!(
                "GET /api/v1/sessions HTTP/1.1\r\nHost: localhost:{}",
                a.port()
            ),
            200,
        ),
        (
            format!("GET http://{a}/api/v1/sessions HTTP/1.1\r\nHost: {a}"),
            200,
        ),
        (
            format!("GET /api/v1/sessions HTTP/1.1\r\nHost: {a}@evil.example"),
            401,
        ),
        (
            format!(
                "GET /api/v1/sessions HTTP/1.1\r\nHost: evil.example:{}",
                a.port()
            ),
            401,
        ),
        (
            format!("GET http://evil.example/api/v1/sessions HTTP/1.1\r\nHost: {a}"),
            401,
        ),
        (
            format!("GET http://{a}@evil.example/api/v1/sessions HTTP/1.1\r\nHost: {a}"),
            401,
        ),
        (
            format!("GET http://evil.example/ HTTP/1.1\r\nHost: {a}"),
            401,
        ),
    ];
    for (head, want) in cases {
        let got = peers::ask(a, &head).unwrap_or_else(|e| panic!("{head:?}: {e}"));
        assert_eq!(got.status, want, "{head:?}: {}", got.body);
        if want == 200 {
            assert!(got.body.contains("\"cracker\""), "{}", got.body);
        } else {
            assert!(!got.body.contains("cracker"), "{}", got.body);
        }
    }
}
