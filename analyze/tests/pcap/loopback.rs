//! A real capture: tcpdump on loopback while a small multi-tier HTTP system runs.
//!
//! client 127.0.0.1 → front 127.0.0.2 → app 127.0.0.3 → db 127.0.0.4 (twice per request),
//! each hop one keep-alive connection, every tier a std thread. Each tier accepts exactly one
//! connection and ends when its caller closes it, so the system stops by itself. The tiers
//! listen before tcpdump starts, so its filter names exactly their endpoints (other tests'
//! loopback traffic stays out), and the test waits for tcpdump's "listening on" before the
//! client connects. A capture from which the kernel dropped packets is retried (twice).
//!
//! The reader gives every request's messages, nested; `nesting` gives one path with one
//! instance per request. Skipped (with the reason printed) only when not root or tcpdump is
//! missing.

use p5_analyze::pcap::{self, CaptureFile, NodeNaming, PcapOptions};
use p5_analyze::{Kind, Message, Trace};
use socket2::{Domain, SockAddr, Socket, Type};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

const REQUESTS: usize = 20;
const DB_CALLS: usize = 2;

/// Reads one HTTP message (headers and a Content-Length body); `None` at EOF.
pub(crate) fn read_http(r: &mut BufReader<TcpStream>) -> Option<Vec<u8>> {
    let mut len = 0usize;
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some(body)
}

pub(crate) fn request(w: &mut TcpStream, path: &str, body: &[u8]) -> std::io::Result<()> {
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    w.write_all(&[head.as_bytes(), body].concat())
}

pub(crate) fn reply(w: &mut TcpStream, body: &[u8]) -> std::io::Result<()> {
    let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
    w.write_all(&[head.as_bytes(), body].concat())
}

/// A connection from `local` (port chosen by the kernel) to `remote`.
pub(crate) fn connect_from(local: &str, remote: SocketAddr) -> TcpStream {
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    let from: SocketAddr = format!("{local}:0").parse().unwrap();
    s.bind(&SockAddr::from(from)).unwrap();
    s.connect(&SockAddr::from(remote)).unwrap();
    let s = TcpStream::from(s);
    s.set_nodelay(true).unwrap();
    s
}

/// A tier on `ip`: accepts one connection; for each request calls `downstream` (if any)
/// `calls` times, then replies. Returns its address and thread.
fn tier(
    ip: &str,
    downstream: Option<SocketAddr>,
    calls: usize,
) -> (SocketAddr, thread::JoinHandle<()>) {
    let l = TcpListener::bind(format!("{ip}:0")).unwrap();
    let addr = l.local_addr().unwrap();
    let ip = ip.to_owned();
    let h = thread::spawn(move || {
        let (conn, _) = l.accept().unwrap();
        conn.set_nodelay(true).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut down = downstream.map(|d| {
            let s = connect_from(&ip, d);
            (s.try_clone().unwrap(), BufReader::new(s))
        });
        let mut w = conn.try_clone().unwrap();
        let mut r = BufReader::new(conn);
        while let Some(body) = read_http(&mut r) {
            if let Some((dw, dr)) = down.as_mut() {
                for _ in 0..calls {
                    request(dw, "/down", &body).unwrap();
                    read_http(dr).unwrap();
                }
            }
            reply(&mut w, format!("{ip} answers {}", body.len()).as_bytes()).unwrap();
        }
        // The caller closed: close downstream too (dropping `down`).
    });
    (addr, h)
}

pub(crate) fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .is_some_and(|l| l.split_whitespace().nth(2) == Some("0"))
    })
}

pub(crate) fn has_tcpdump() -> bool {
    Command::new("tcpdump")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A running tcpdump and the lines it printed.
pub(crate) struct Dump {
    child: Child,
    lines: mpsc::Receiver<String>,
}

/// Starts tcpdump writing `file` with `filter` and waits until it is listening.
pub(crate) fn start_tcpdump(file: &std::path::Path, filter: &str) -> Dump {
    let mut child = Command::new("tcpdump")
        .args([
            "-i",
            "lo",
            "-n",
            "-U",
            "--immediate-mode",
            "-B",
            "16384",
            "-s",
            "0",
            "-w",
        ])
        .arg(file)
        .arg(filter)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tcpdump starts");
    let err = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            println!("tcpdump: {line}");
            let _ = tx.send(line);
        }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains("listening on") => break,
            Ok(_) => {}
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("tcpdump did not start listening");
            }
        }
    }
    Dump { child, lines: rx }
}

/// Stops tcpdump (SIGINT, so it flushes) and returns (packets captured, dropped by kernel).
pub(crate) fn stop_tcpdump(mut d: Dump) -> (u64, u64) {
    thread::sleep(Duration::from_millis(300));
    let _ = Command::new("kill")
        .args(["-INT", &d.child.id().to_string()])
        .status();
    let status = d.child.wait().unwrap();
    assert!(
        status.success() || status.code().is_none(),
        "tcpdump: {status}"
    );
    let (mut captured, mut dropped) = (None, None);
    while let Ok(line) = d.lines.recv_timeout(Duration::from_secs(5)) {
        let n = line
            .split_whitespace()
            .next()
            .and_then(|w| w.parse::<u64>().ok());
        if line.ends_with("packets captured") {
            captured = n;
        } else if line.ends_with("packets dropped by kernel") {
            dropped = n;
        }
        if captured.is_some() && dropped.is_some() {
            break;
        }
    }
    (captured.expect("tcpdump's count"), dropped.unwrap_or(0))
}

/// The tiers, listening (so their ports are known before the capture starts).
struct System {
    front: SocketAddr,
    ports: [u16; 3],
    threads: Vec<thread::JoinHandle<()>>,
}

fn start_system() -> System {
    let (db, hdb) = tier("127.0.0.4", None, 0);
    let (app, happ) = tier("127.0.0.3", Some(db), DB_CALLS);
    let (front, hfront) = tier("127.0.0.2", Some(app), 1);
    System {
        front,
        ports: [front.port(), app.port(), db.port()],
        threads: vec![hfront, happ, hdb],
    }
}

/// The capture filter: exactly the three tiers' listening endpoints.
fn filter(sys: &System) -> String {
    let [f, a, d] = sys.ports;
    format!(
        "tcp and ((host 127.0.0.2 and port {f}) or (host 127.0.0.3 and port {a}) \
         or (host 127.0.0.4 and port {d}))"
    )
}

/// Runs the client's `REQUESTS` requests; the tiers stop when it closes.
fn run_client(sys: System) {
    let c = connect_from("127.0.0.1", sys.front);
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut w = c.try_clone().unwrap();
    let mut r = BufReader::new(c);
    for i in 0..REQUESTS {
        request(&mut w, "/", format!("request {i}").as_bytes()).unwrap();
        read_http(&mut r).expect("a reply");
        // A think time, so the sniffer keeps up (it drops packets of a tight loop).
        thread::sleep(Duration::from_millis(2));
    }
    drop(w);
    drop(r);
    for h in sys.threads {
        h.join().unwrap();
    }
}

/// Call pairs (call, return) between `from` and `to`, in time order.
fn pairs<'t>(t: &'t Trace, from: &str, to: &str) -> Vec<(&'t Message, &'t Message)> {
    let (f, d) = (t.nodes.get(from).unwrap(), t.nodes.get(to).unwrap());
    let calls: Vec<_> = t
        .messages
        .iter()
        .filter(|m| m.kind == Kind::Call && (m.src, m.dst) == (f, d))
        .collect();
    let rets: Vec<_> = t
        .messages
        .iter()
        .filter(|m| m.kind == Kind::Ret && (m.src, m.dst) == (d, f))
        .collect();
    assert_eq!(calls.len(), rets.len(), "{from}>{to}");
    calls
        .into_iter()
        .map(|c| {
            let r = rets
                .iter()
                .find(|r| r.call_id == c.call_id)
                .expect("the return of a call");
            assert!(c.t_recv <= r.t_send, "a return after its call");
            (c, *r)
        })
        .collect()
}

fn within(inner: &(&Message, &Message), outer: &(&Message, &Message)) -> bool {
    outer.0.t_recv <= inner.0.t_send && inner.1.t_recv <= outer.1.t_send
}

#[test]
fn tcpdump_capture_of_a_three_tier_http_system() {
    if !is_root() {
        println!("SKIPPED tcpdump_capture_of_a_three_tier_http_system: not root");
        return;
    }
    if !has_tcpdump() {
        println!("SKIPPED tcpdump_capture_of_a_three_tier_http_system: tcpdump is missing");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lo.pcap");
    // A capture the kernel dropped packets from says nothing about the reader: try again.
    let mut captured = 0;
    for attempt in 1..=3 {
        let sys = start_system();
        let dump = start_tcpdump(&file, &filter(&sys));
        run_client(sys);
        let (n, dropped) = stop_tcpdump(dump);
        captured = n;
        if dropped == 0 {
            break;
        }
        println!("attempt {attempt}: the kernel dropped {dropped} packets; again");
    }
    if let Some(keep) = std::env::var_os("P5_KEEP_PCAP") {
        std::fs::copy(&file, keep).unwrap();
    }
    let opts = PcapOptions {
        node: NodeNaming::Host,
        ..PcapOptions::default()
    };
    let files = [CaptureFile {
        path: file,
        offset_ns: 0,
    }];
    let (trace, report) = pcap::read(&files, &opts).unwrap();
    println!("{report}");
    assert!(report.first.is_empty(), "{report}");
    assert_eq!(
        report.records, captured,
        "every packet tcpdump wrote is read"
    );
    assert_eq!(report.count("capture gaps"), 0, "{report}");
    let mut names: Vec<_> = trace.nodes.names().collect();
    names.sort();
    assert_eq!(names, ["127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"]);
    assert_eq!(trace.conns.len(), 3);

    let front = pairs(&trace, "127.0.0.1", "127.0.0.2");
    let app = pairs(&trace, "127.0.0.2", "127.0.0.3");
    let db = pairs(&trace, "127.0.0.3", "127.0.0.4");
    assert_eq!(
        (front.len(), app.len(), db.len()),
        (REQUESTS, REQUESTS, REQUESTS * DB_CALLS)
    );
    assert_eq!(trace.messages.len(), 2 * REQUESTS * (2 + DB_CALLS));
    for (i, f) in front.iter().enumerate() {
        assert!(
            within(&app[i], f),
            "request {i}: the app call nests in the front call"
        );
        for k in 0..DB_CALLS {
            let d = &db[i * DB_CALLS + k];
            assert!(
                within(d, &app[i]),
                "request {i}: db call {k} nests in the app call"
            );
        }
        assert!(
            db[i * DB_CALLS].1.t_recv <= db[i * DB_CALLS + 1].0.t_send,
            "db calls in order"
        );
        let want = format!("request {i}").len() as u32;
        assert!(f.0.bytes > want, "the front call carries the request");
    }
    // Nesting on the capture as is (`--node host`): what every request did, as the system
    // was built to do it — one path, as many instances as the client made requests.
    let (r, counts) = p5_analyze::nesting::nesting(&trace, &Default::default());
    assert_eq!(counts.unmatched_calls + counts.unmatched_rets, 0);
    let db_calls = ["127.0.0.4"; DB_CALLS].join(",");
    let want = format!("127.0.0.1>127.0.0.2(127.0.0.3({db_calls}))");
    let found: Vec<(&str, u64)> = r
        .patterns
        .iter()
        .map(|p| (p.signature.as_str(), p.count))
        .collect();
    assert_eq!(found, [(want.as_str(), REQUESTS as u64)]);
}
