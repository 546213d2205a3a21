//! A real capture for convolution: the three-tier HTTP system of `loopback.rs` (client
//! 127.0.0.1 → front 127.0.0.2 → app 127.0.0.3 → db 127.0.0.4, twice per request), here with
//! work before each downstream call — the front waits 3 ms before calling the app, the app
//! 4 ms before its first db call and 8 ms more before its second — and a client that thinks an
//! exponentially distributed time between requests (so the requests are not periodic, which
//! would echo every delay at multiples of the period). Every tier logs, with its own clock,
//! when each request arrived and when it sent each downstream call; the client logs how many
//! requests it made.
//!
//! `convolution` on the capture as is (`--node host`, μ = 1 ms, v = 3 ms, the 100-message
//! filter) must give exactly the graph the logs describe: client → front with every request,
//! front → app at the front's logged delay, app → db twice, at the app's two logged delays
//! (each within μ of the logged median). Each edge's count must equal the messages whose delay
//! lies in its window, the delays taken per request from the capture (the i-th call on each
//! hop is request i's: the logs have one entry per request, and the capture's delays are
//! the logged ones plus the tier's wake-up, ~70 µs median) — a loaded machine's late sleep
//! moves a request out of a window, and the count must follow. The returns
//! lead back into the path (cycles) and make no edge. Skipped (with the reason printed) only
//! when not root or tcpdump is missing.

use super::loopback::{
    connect_from, has_tcpdump, is_root, read_http, reply, request, start_tcpdump, stop_tcpdump,
};
use p5_analyze::Trace;
use p5_analyze::convolution::{Params, convolution, roots};
use p5_analyze::pcap::{self, CaptureFile, NodeNaming, PcapOptions};
use std::io::BufReader;
use std::net::{SocketAddr, TcpListener};
use std::thread;
use std::time::{Duration, Instant};

const REQUESTS: usize = 250;
const MS: i64 = 1_000_000;

/// Per request, the delays (ns) from its arrival to each downstream call, by the tier's clock.
type Log = Vec<Vec<i64>>;

/// An edge: (parent, from, to, messages, delay).
type EdgeRow<'a> = (Option<u32>, &'a str, &'a str, u64, Option<i64>);

/// A tier on `ip`: accepts one connection; per request waits `work[k]` before its k-th call
/// to `downstream`, then replies. Returns its address and thread (which returns its log).
fn tier(
    ip: &str,
    downstream: Option<SocketAddr>,
    work: &'static [u64],
) -> (SocketAddr, thread::JoinHandle<Log>) {
    let l = TcpListener::bind(format!("{ip}:0")).unwrap();
    let addr = l.local_addr().unwrap();
    let ip = ip.to_owned();
    let h = thread::spawn(move || {
        let (conn, _) = l.accept().unwrap();
        conn.set_nodelay(true).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut down = downstream.map(|d| {
            let s = connect_from(&ip, d);
            (s.try_clone().unwrap(), BufReader::new(s))
        });
        let mut w = conn.try_clone().unwrap();
        let mut r = BufReader::new(conn);
        let mut log = Log::new();
        while let Some(body) = read_http(&mut r) {
            let arrived = Instant::now();
            let mut sent = Vec::new();
            if let Some((dw, dr)) = down.as_mut() {
                for &ms in work {
                    thread::sleep(Duration::from_millis(ms));
                    sent.push(arrived.elapsed().as_nanos() as i64);
                    request(dw, "/down", &body).unwrap();
                    read_http(dr).unwrap();
                }
            }
            reply(&mut w, format!("{ip} answers {}", body.len()).as_bytes()).unwrap();
            log.push(sent);
        }
        log
    });
    (addr, h)
}

struct System {
    front: SocketAddr,
    ports: [u16; 3],
    tiers: Vec<thread::JoinHandle<Log>>,
}

fn start_system() -> System {
    let (db, hdb) = tier("127.0.0.4", None, &[]);
    let (app, happ) = tier("127.0.0.3", Some(db), &[4, 8]);
    let (front, hfront) = tier("127.0.0.2", Some(app), &[3]);
    System {
        front,
        ports: [front.port(), app.port(), db.port()],
        tiers: vec![hfront, happ, hdb],
    }
}

/// Runs the client; returns (requests made, the front's log, the app's log).
fn run_client(sys: System) -> (usize, Log, Log) {
    let c = connect_from("127.0.0.1", sys.front);
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut w = c.try_clone().unwrap();
    let mut r = BufReader::new(c);
    let mut made = 0;
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..REQUESTS {
        request(&mut w, "/", format!("request {i}").as_bytes()).unwrap();
        read_http(&mut r).expect("a reply");
        made += 1;
        // Exponential think time, mean 15 ms (xorshift; fixed seed).
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let u = (x >> 11) as f64 / (1u64 << 53) as f64;
        thread::sleep(Duration::from_micros((-15_000.0 * (1.0 - u).ln()) as u64));
    }
    drop(w);
    drop(r);
    let mut logs = sys.tiers.into_iter().map(|h| h.join().unwrap());
    (made, logs.next().unwrap(), logs.next().unwrap())
}

fn median(mut v: Vec<i64>) -> i64 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// Runs the system under tcpdump (again if the kernel dropped packets) and reads the
/// capture: (trace, requests made, the front's log, the app's log).
fn capture() -> (Trace, usize, Log, Log) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lo.pcap");
    let mut run = None;
    for attempt in 1..=3 {
        let sys = start_system();
        let [f, a, d] = sys.ports;
        let filter = format!(
            "tcp and ((host 127.0.0.2 and port {f}) or (host 127.0.0.3 and port {a}) \
             or (host 127.0.0.4 and port {d}))"
        );
        let dump = start_tcpdump(&file, &filter);
        let logs = run_client(sys);
        let (_, dropped) = stop_tcpdump(dump);
        run = Some(logs);
        if dropped == 0 {
            break;
        }
        println!("attempt {attempt}: the kernel dropped {dropped} packets; again");
    }
    let (made, front_log, app_log) = run.unwrap();
    assert_eq!(
        (made, front_log.len(), app_log.len()),
        (REQUESTS, REQUESTS, REQUESTS)
    );
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
    assert_eq!(report.count("capture gaps"), 0, "{report}");
    (trace, made, front_log, app_log)
}

/// Per request, the delays of its three hops (front → app, app's first and second db
/// call) in the capture, checked against the tiers' logs.
fn per_request(trace: &Trace, front_log: &Log, app_log: &Log) -> Vec<[i64; 3]> {
    let made = front_log.len();
    // Per request, from the capture: the system is sequential on one connection per hop, so
    // the i-th call on each hop belongs to request i (the logs say so: one entry per request).
    let calls = |a: &str, b: &str| -> Vec<i64> {
        let (a, b) = (trace.nodes.get(a).unwrap(), trace.nodes.get(b).unwrap());
        let mut t: Vec<i64> = trace
            .messages
            .iter()
            .filter(|m| m.kind == p5_analyze::Kind::Call && (m.src, m.dst) == (a, b))
            .map(|m| m.time())
            .collect();
        t.sort_unstable();
        t
    };
    let (c1, c2, c3) = (
        calls("127.0.0.1", "127.0.0.2"),
        calls("127.0.0.2", "127.0.0.3"),
        calls("127.0.0.3", "127.0.0.4"),
    );
    assert_eq!((c1.len(), c2.len(), c3.len()), (made, made, 2 * made));
    // Per request and hop: the delay the capture shows and the one the tier logged. The
    // capture's is the logged one plus the time the tier took to wake up for the request (its
    // clock starts when its read returns): never less, and mostly little more.
    let mut cap = Vec::new();
    let mut late = Vec::new();
    for i in 0..made {
        let c = [c2[i] - c1[i], c3[2 * i] - c2[i], c3[2 * i + 1] - c2[i]];
        let log = [front_log[i][0], app_log[i][0], app_log[i][1]];
        for k in 0..3 {
            // Capture times are whole microseconds.
            assert!(c[k] - log[k] > -1_000, "request {i} hop {k}: {c:?} {log:?}");
            late.push(c[k] - log[k]);
        }
        cap.push(c);
    }
    let late = median(late);
    println!("capture − log: median {late} ns");
    assert!(late < MS, "the capture's delays are the logged ones");
    cap
}

#[test]
fn convolution_finds_what_a_captured_three_tier_system_logged() {
    for (ok, why) in [
        (is_root(), "not root"),
        (has_tcpdump(), "tcpdump is missing"),
    ] {
        if !ok {
            println!("SKIPPED convolution_finds_what_a_captured_three_tier_system_logged: {why}");
            return;
        }
    }
    let (trace, made, front_log, app_log) = capture();
    let cap = per_request(&trace, &front_log, &app_log);
    let p = Params {
        tolerance: 3 * MS,
        ..Params::at(MS)
    };
    let r = roots(&trace, &[]).unwrap();
    assert_eq!(r, [trace.nodes.get("127.0.0.1").unwrap()]);
    let g = convolution(&trace, &r, &p).unwrap();
    let edges: Vec<EdgeRow> = g
        .edges
        .iter()
        .map(|e| (e.parent, &*e.from, &*e.to, e.messages, e.delay_ns))
        .collect();
    println!("{edges:?}");
    // What the logs say: the front's one delay, the app's two, each request once.
    let front_d = median(front_log.iter().map(|s| s[0]).collect());
    let app_d = [0, 1].map(|k| median(app_log.iter().map(|s| s[k]).collect()));
    println!("logged medians: front {front_d} ns, app {app_d:?} ns");
    assert_eq!(edges.len(), 4, "{edges:?}");
    assert_eq!(
        edges[0],
        (None, "127.0.0.1", "127.0.0.2", made as u64, None)
    );
    let (parent, from, to, n, d) = edges[1];
    assert_eq!((parent, from, to), (Some(0), "127.0.0.2", "127.0.0.3"));
    let d = d.unwrap();
    assert!(
        (d - front_d).abs() <= MS,
        "front → app at {d}, logged {front_d}"
    );
    // Its messages: exactly those whose delay its window holds.
    let window = |d: i64| (d - p.tolerance, d + p.tolerance);
    let front_w = window(d);
    let mut db: Vec<_> = edges[2..].to_vec();
    db.sort_by_key(|e| e.4);
    let db_w: Vec<(i64, i64)> = db.iter().map(|e| window(e.4.unwrap())).collect();
    // (A db call late by more than the gap between the two lands in the other's window:
    // convolution counts messages, not which call of the program sent them.)
    let held = |k: Option<usize>| {
        let inside = |x: i64, (lo, hi): (i64, i64)| lo <= x && x <= hi;
        let front = cap.iter().filter(|c| inside(c[0], front_w));
        match k {
            None => front.count() as u64,
            Some(k) => front
                .flat_map(|c| [c[1], c[2]])
                .filter(|&x| inside(x, db_w[k]))
                .count() as u64,
        }
    };
    println!("front → app: {n} messages, {} in its window", held(None));
    assert_eq!(n, held(None), "front → app");
    // The app's two calls: two edges under front → app, at the delays the app logged.
    for (k, (parent, from, to, n, d)) in db.into_iter().enumerate() {
        assert_eq!((parent, from, to), (Some(1), "127.0.0.3", "127.0.0.4"));
        let d = d.unwrap();
        assert!(
            (d - app_d[k]).abs() <= MS,
            "db call {k} at {d}, logged {}",
            app_d[k]
        );
        println!(
            "db call {k}: {n} messages, {} in its windows",
            held(Some(k))
        );
        assert_eq!(n, held(Some(k)), "db call {k}");
    }
    // The linear paths: one signature, once per db call's delay.
    let found: Vec<&str> = g
        .result
        .patterns
        .iter()
        .map(|p| p.signature.as_str())
        .collect();
    assert_eq!(found, ["127.0.0.1>127.0.0.2(127.0.0.3(127.0.0.4))"; 2]);
}
