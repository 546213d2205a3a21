//! A real capture of forwarding: tcpdump on loopback while a client sends requests to a relay
//! (127.0.0.5), which forwards each to a worker (127.0.0.6), which answers the client over a
//! connection of its own — not back along the path the request took. Every hop acknowledges
//! what it got with a short line, so each message is its own TCP run. The programs log each
//! request's path; `linking` must give exactly that path, once per request, and nothing else
//! above the noise. Skipped (with the reason printed) only when not root or tcpdump is missing.

use super::loopback::{connect_from, has_tcpdump, is_root, start_tcpdump, stop_tcpdump};
use p5_analyze::linking::{Params, linking};
use p5_analyze::pcap::{self, CaptureFile, NodeNaming, PcapOptions};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

const REQUESTS: usize = 20;

type Log = Arc<Mutex<Vec<String>>>;

fn line(r: &mut BufReader<TcpStream>) -> Option<String> {
    let mut s = String::new();
    (r.read_line(&mut s).ok()? > 0).then(|| s.trim_end().to_owned())
}

fn send(w: &mut TcpStream, s: &str) {
    w.write_all(format!("{s}\n").as_bytes()).unwrap();
}

fn streams(s: TcpStream) -> (TcpStream, BufReader<TcpStream>) {
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    (s.try_clone().unwrap(), BufReader::new(s))
}

/// The worker: takes forwarded requests from the relay, acknowledges them, and answers the
/// client on its own connection to the client's answer port.
fn worker(l: TcpListener, client: SocketAddr, log: Log) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let (from_relay, _) = l.accept().unwrap();
        let (mut rw, mut rr) = streams(from_relay);
        let (mut cw, mut cr) = streams(connect_from("127.0.0.6", client));
        while let Some(req) = line(&mut rr) {
            send(&mut rw, "queued");
            thread::sleep(Duration::from_millis(3));
            send(&mut cw, &format!("answer to {req}"));
            line(&mut cr).expect("the client's thanks");
            log.lock().unwrap().push(format!("worker answered {req}"));
        }
    })
}

/// The relay: acknowledges each request and forwards it to the worker.
fn relay(l: TcpListener, worker: SocketAddr, log: Log) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let (from_client, _) = l.accept().unwrap();
        let (mut cw, mut cr) = streams(from_client);
        let (mut ww, mut wr) = streams(connect_from("127.0.0.5", worker));
        while let Some(req) = line(&mut cr) {
            send(&mut cw, "accepted");
            thread::sleep(Duration::from_millis(1));
            send(&mut ww, &req);
            line(&mut wr).expect("the worker's ack");
            log.lock().unwrap().push(format!("relay forwarded {req}"));
        }
    })
}

#[test]
fn linking_follows_a_relay_whose_worker_answers_by_another_path() {
    for (ok, why) in [
        (is_root(), "not root"),
        (has_tcpdump(), "tcpdump is missing"),
    ] {
        if !ok {
            println!("SKIPPED linking_follows_a_relay…: {why}");
            return;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fwd.pcap");
    let log: Log = Arc::default();
    let answers = TcpListener::bind("127.0.0.1:0").unwrap();
    let wl = TcpListener::bind("127.0.0.6:0").unwrap();
    let rl = TcpListener::bind("127.0.0.5:0").unwrap();
    let (a, w, r) = (
        answers.local_addr().unwrap(),
        wl.local_addr().unwrap(),
        rl.local_addr().unwrap(),
    );
    let filter = format!(
        "tcp and ((host 127.0.0.1 and port {}) or (host 127.0.0.6 and port {}) or \
         (host 127.0.0.5 and port {}))",
        a.port(),
        w.port(),
        r.port()
    );
    let dump = start_tcpdump(&file, &filter);
    let hw = worker(wl, a, log.clone());
    let hr = relay(rl, w, log.clone());
    let (mut rw, mut rr) = streams(connect_from("127.0.0.1", r));
    let (from_worker, _) = answers.accept().unwrap();
    let (mut aw, mut ar) = streams(from_worker);
    for i in 0..REQUESTS {
        send(&mut rw, &format!("request {i}"));
        assert_eq!(line(&mut rr).as_deref(), Some("accepted"));
        let answer = line(&mut ar).expect("an answer");
        send(&mut aw, "thanks");
        log.lock().unwrap().push(format!("client got {answer}"));
        // Longer than the window: a client's next request is not caused by the answer.
        thread::sleep(Duration::from_millis(150));
    }
    drop((rw, rr));
    hr.join().unwrap();
    hw.join().unwrap();
    drop((aw, ar));
    let (_, dropped) = stop_tcpdump(dump);
    assert_eq!(dropped, 0, "the kernel dropped packets");
    // The programs' own account: every request went client → relay → worker → client.
    let log = log.lock().unwrap().clone();
    for i in 0..REQUESTS {
        for want in [
            format!("relay forwarded request {i}"),
            format!("worker answered request {i}"),
            format!("client got answer to request {i}"),
        ] {
            assert!(log.contains(&want), "{want} not in {log:?}");
        }
    }
    let files = [CaptureFile {
        path: file,
        offset_ns: 0,
    }];
    let opts = PcapOptions {
        node: NodeNaming::Host,
        ..PcapOptions::default()
    };
    let (trace, report) = pcap::read(&files, &opts).unwrap();
    println!("{report}");
    assert_eq!(trace.messages.len(), 6 * REQUESTS, "{report}");
    // The paper's weights and ours (the default): with 20 requests every kernel key of ours
    // is thin, so ours weighs the paper's way too.
    for p in [Params::paper(), Params::ours()] {
        let p = Params {
            window: 100_000_000,
            ..p
        };
        check(&trace, &p);
    }
}

/// The relay's path, once per request, and nothing else above the noise.
fn check(trace: &p5_analyze::Trace, p: &Params) {
    let (res, _) = linking(trace, p, &mut |_| {});
    for pat in &res.patterns {
        println!("{} {} {:.2}", pat.signature, pat.count, pat.expectation);
    }
    let top = &res.patterns[0];
    assert_eq!(top.signature, "127.0.0.1>127.0.0.5(127.0.0.6(127.0.0.1))");
    // One most probable instance per request (a root's try-both branches that differ only
    // in a closing return count twice towards `count` under a loaded machine's jitter).
    // A loaded machine's scheduling can stretch one request's gaps past the next request's
    // (19 of 20 seen at load average 7 while other tests ran): one may go elsewhere.
    let listed = res.instances.iter().filter(|i| i.pattern == 0).count();
    assert!(
        (REQUESTS - 1..=REQUESTS).contains(&listed),
        "{listed} instances, count {}",
        top.count
    );
    // Five links, each about one mean delay long: e^−1 / (e^−1 + e^−4) ≈ 0.95 each.
    assert!(
        top.expectation > 0.7 * REQUESTS as f64,
        "{}",
        top.expectation
    );
    for other in &res.patterns[1..] {
        assert!(
            other.expectation < 0.1 * REQUESTS as f64,
            "{}",
            other.signature
        );
    }
}
