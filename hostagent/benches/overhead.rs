//! Overhead of the host agent (`cargo bench -p p5-hostagent --bench overhead`):
//!
//! 1. A real `hostagent` process at 10 samples/s (automatic mode: every metric) delivering
//!    to an in-process log server: its CPU use in % of one core and its RSS, against the
//!    budget (≤ 0.5 %, ≤ 20 MB). Baseline printed beside it: the cost of one sample taken
//!    in-process (sysinfo + /proc), i.e. the floor of the agent's work.
//! 2. The OS monitor (root + tracefs only): the cost per traced scheduler event, measured as
//!    the extra wall time of a thread ping-pong (two switches per hop) with tracing on vs
//!    off, plus the agent-side parsing cost per event.
//! 3. The network softirqs (root + tracefs only): the same for NET_RX/NET_TX softirq events,
//!    with a TCP ping-pong over loopback (`TCP_NODELAY`, one segment each way per hop), the
//!    session tracing softirqs vs not.

use p5_hostagent::clock::AgentClock;
use p5_hostagent::osmon::TraceSession;
use p5_hostagent::sample::{ProcessFilter, Sampler};
use p5_hostagent::settings::Selection;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn task_ns(pid: u32) -> u64 {
    // Sum of every live thread's on-CPU time (ns precision, schedstat field 1).
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    std::fs::read_to_string(e.path().join("schedstat"))
                        .ok()?
                        .split_whitespace()
                        .next()?
                        .parse::<u64>()
                        .ok()
                })
                .sum()
        })
        .unwrap_or(0)
}

fn status_kb(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix(key)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

fn agent_overhead() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let cfg = p5_logserver::ServerConfig {
        listen: "127.0.0.1:0".into(),
        store: dir.path().join("store"),
        ..Default::default()
    };
    let server = rt
        .block_on(p5_logserver::Server::bind(cfg))
        .expect("log server");
    let ls = server.local_addr().to_string();
    let serving = rt.spawn(server.run(async move {
        let _ = stop_rx.await;
    }));
    let me = std::process::id().to_string();
    let mut agent = Command::new(env!("CARGO_BIN_EXE_hostagent"))
        .args([
            "--session",
            "bench",
            "--logserver",
            &ls,
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--interval", "100ms", "--pid", &me])
        .arg("--spool-dir")
        .arg(dir.path())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn hostagent");
    let mut line = String::new();
    let _ = BufReader::new(agent.stdout.take().expect("stdout")).read_line(&mut line);
    let pid = agent.id();
    std::thread::sleep(Duration::from_secs(3));
    let secs = 20.0;
    let (c0, t0) = (task_ns(pid), Instant::now());
    std::thread::sleep(Duration::from_secs_f64(secs));
    let (c1, wall) = (task_ns(pid), t0.elapsed().as_secs_f64());
    let rss = status_kb(pid, "VmRSS:");
    let hwm = status_kb(pid, "VmHWM:");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let _ = agent.wait();
    let _ = stop_tx.send(());
    let _ = rt.block_on(serving);
    let cpu = (c1 - c0) as f64 / 1e9 / wall * 100.0;
    println!(
        "agent at 10 samples/s (every metric, 1 monitored process), {secs:.0} s: CPU {cpu:.3} % of one core (budget 0.5 %), RSS {:.1} MB (peak {:.1} MB; budget 20 MB)",
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0
    );

    // Baseline: one in-process sample.
    let mut s = Sampler::new(ProcessFilter {
        pids: vec![std::process::id()],
        names: vec![],
        instrumented: false,
    })
    .expect("sampler");
    let sel = Selection::all();
    let mut out = Vec::new();
    let n = 300;
    let t = Instant::now();
    for _ in 0..n {
        out.clear();
        s.sample(&sel, &mut out);
    }
    let per = t.elapsed().as_secs_f64() / n as f64;
    println!(
        "baseline: one sample in-process = {:.1} us for {} metrics ({:.3} % of a core at 10/s)",
        per * 1e6,
        out.len(),
        per * 10.0 * 100.0
    );
}

fn ping_pong(hops: u32) -> (Duration, Vec<u32>) {
    let (mut a, mut b) = UnixStream::pair().expect("pair");
    let (tx, rx) = std::sync::mpsc::channel();
    let echo = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        tx.send(unsafe { libc::gettid() } as u32).ok();
        let mut buf = [0u8; 1];
        while b.read_exact(&mut buf).is_ok() && buf[0] != 0 {
            if b.write_all(&buf).is_err() {
                break;
            }
        }
    });
    // SAFETY: as above.
    let me = unsafe { libc::gettid() } as u32;
    let other = rx.recv().expect("tid");
    let t = Instant::now();
    let mut buf = [1u8; 1];
    for _ in 0..hops {
        a.write_all(&[1]).expect("write");
        a.read_exact(&mut buf).expect("read");
    }
    let d = t.elapsed();
    a.write_all(&[0]).ok();
    echo.join().ok();
    (d, vec![me, other])
}

fn sched_cost() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("sched tracing: skipped (needs root for tracefs)");
        return;
    }
    let clock = AgentClock::start();
    let mut session = match TraceSession::start(clock, &[], false) {
        Ok(s) => s,
        Err(e) => {
            println!("sched tracing: skipped ({e})");
            return;
        }
    };
    let hops = 50_000;
    let rounds = 3;
    // Untraced baseline (best of `rounds`).
    let off = (0..rounds)
        .map(|_| ping_pong(hops).0)
        .min()
        .unwrap_or_default();
    // Traced: this thread (one side of the ping-pong) switches out and in at every hop.
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() } as u32;
    session.set_tids(&[me]).expect("filters");
    let mut events = Vec::new();
    let mut parse = Duration::ZERO;
    let mut on = Duration::MAX;
    let mut per_round = 0usize;
    for _ in 0..rounds {
        session.drain(&mut events).ok();
        events.clear();
        let (d, _) = ping_pong(hops);
        std::thread::sleep(Duration::from_millis(100));
        let t = Instant::now();
        session.drain(&mut events).ok();
        parse += t.elapsed();
        per_round = per_round.max(events.len());
        on = on.min(d);
    }
    session.set_tids(&[]).ok();
    let extra = on.as_secs_f64() - off.as_secs_f64();
    println!(
        "sched tracing: ping-pong of {hops} hops: untraced {:.1} ms, traced {:.1} ms (best of {rounds}), \
         {per_round} events recorded per run; kernel-side cost {:.0} ns per recorded event; \
         agent-side parsing {:.0} ns per event",
        off.as_secs_f64() * 1e3,
        on.as_secs_f64() * 1e3,
        extra * 1e9 / per_round.max(1) as f64,
        parse.as_secs_f64() * 1e9 / (per_round.max(1) * rounds) as f64,
    );
}

/// A ping-pong of one byte over a loopback TCP connection with `TCP_NODELAY`.
fn tcp_ping_pong(hops: u32) -> Duration {
    use std::net::{TcpListener, TcpStream};
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let mut a = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
    let (mut b, _) = l.accept().expect("accept");
    a.set_nodelay(true).ok();
    b.set_nodelay(true).ok();
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 1];
        while b.read_exact(&mut buf).is_ok() && buf[0] != 0 {
            if b.write_all(&buf).is_err() {
                break;
            }
        }
    });
    let t = Instant::now();
    let mut buf = [1u8; 1];
    for _ in 0..hops {
        a.write_all(&[1]).expect("write");
        a.read_exact(&mut buf).expect("read");
    }
    let d = t.elapsed();
    a.write_all(&[0]).ok();
    echo.join().ok();
    d
}

fn softirq_cost() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("softirq tracing: skipped (needs root for tracefs)");
        return;
    }
    let clock = AgentClock::start();
    let hops = 20_000;
    let rounds = 3;
    let mut best = [Duration::MAX; 2];
    let mut per_round = 0usize;
    let mut parse = Duration::ZERO;
    for _ in 0..rounds {
        for (k, on) in [false, true].into_iter().enumerate() {
            let mut session = match TraceSession::start(clock, &[], on) {
                Ok(s) => s,
                Err(e) => {
                    println!("softirq tracing: skipped ({e})");
                    return;
                }
            };
            if on && !session.traces_softirqs() {
                println!("softirq tracing: skipped (no softirq events in this kernel)");
                return;
            }
            let mut events = Vec::new();
            session.drain(&mut events).ok();
            events.clear();
            best[k] = best[k].min(tcp_ping_pong(hops));
            std::thread::sleep(Duration::from_millis(100));
            let t = Instant::now();
            session.drain(&mut events).ok();
            if on {
                parse += t.elapsed();
                per_round = per_round.max(events.len());
            }
        }
    }
    let extra = best[1].as_secs_f64() - best[0].as_secs_f64();
    println!(
        "softirq tracing: TCP ping-pong of {hops} hops over loopback: untraced {:.1} ms, traced {:.1} ms \
         (best of {rounds}), {per_round} softirq events per run ({:.2} per hop); kernel-side cost \
         {:.0} ns per recorded event; agent-side decoding {:.0} ns per event",
        best[0].as_secs_f64() * 1e3,
        best[1].as_secs_f64() * 1e3,
        per_round as f64 / f64::from(hops),
        extra * 1e9 / per_round.max(1) as f64,
        parse.as_secs_f64() * 1e9 / (per_round.max(1) * rounds) as f64,
    );
}

fn main() {
    // `cargo test --benches` runs bench binaries with `--bench` absent: keep that quick.
    if !std::env::args().any(|a| a == "--bench") {
        println!("overhead: run with `cargo bench -p p5-hostagent --bench overhead`");
        return;
    }
    agent_overhead();
    sched_cost();
    softirq_cost();
}
