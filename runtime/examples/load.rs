//! A small instrumented load for the runtime's integration tests (and for trying the runtime
//! by hand): `--threads N` threads each record `--events M` enter/exit pairs whose sensor id is
//! `thread << 32 | i`, so per-thread order is checkable after decoding.
//!
//! Options: `--rounds R --pause-ms P` (spread each thread's pairs over R rounds with pauses,
//! giving several drains), `--fork K` (afterwards fork; the child records K pairs with
//! sensors `0xC << 32 | i` and exits through `exit`, i.e. the atexit flush), `--net` (a UDP
//! exchange and a counter through the recorded wrappers), `--flush` (flush before reporting),
//! `--wait-stdin` (after phase one print `phase1 ...` and wait for a line on stdin, then record
//! `--events` pairs with sensors `0xB << 32 | i` on the main thread). Prints `stats ...` last.

use std::io::BufRead;
use std::time::Duration;

#[derive(Debug, Default)]
struct Args {
    threads: u64,
    events: u64,
    rounds: u64,
    pause_ms: u64,
    fork: Option<u64>,
    net: bool,
    flush: bool,
    wait_stdin: bool,
}

fn parse() -> Args {
    let mut a = Args {
        threads: 2,
        events: 1000,
        rounds: 1,
        ..Args::default()
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut num = || -> u64 {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| die(&format!("{k} needs a number")))
        };
        match k.as_str() {
            "--threads" => a.threads = num(),
            "--events" => a.events = num(),
            "--rounds" => a.rounds = num().max(1),
            "--pause-ms" => a.pause_ms = num(),
            "--fork" => a.fork = Some(num()),
            "--net" => a.net = true,
            "--flush" => a.flush = true,
            "--wait-stdin" => a.wait_stdin = true,
            _ => die(&format!("unknown argument {k}")),
        }
    }
    a
}

fn die(msg: &str) -> ! {
    eprintln!("load: {msg}");
    std::process::exit(2)
}

fn pairs(prefix: u64, from: u64, to: u64) {
    for i in from..to {
        let id = prefix << 32 | i;
        p5_runtime::enter(id);
        p5_runtime::exit(id);
    }
}

fn net() -> std::io::Result<()> {
    use p5_runtime::net::UdpSocket;
    let a = UdpSocket::p5_bind(0x5E, "127.0.0.1:0")?;
    let b = UdpSocket::p5_bind(0x5E, "127.0.0.1:0")?;
    // Nothing has been sent yet: a 20 ms poll on `b` waits out its timeout.
    use std::os::fd::AsRawFd;
    let mut pfd = [libc::pollfd {
        fd: b.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    if p5_runtime::net::poll(0x5F, &mut pfd, 20)? != 0 {
        die("idle socket ready");
    }
    a.send_to(b"hello", b.local_addr()?)?;
    if p5_runtime::net::poll(0x5F, &mut pfd, 1000)? != 1 {
        die("datagram not ready");
    }
    let mut buf = [0u8; 16];
    let (n, from) = b.recv_from(&mut buf)?;
    if n != 5 || from != a.local_addr()? {
        die("udp exchange mismatch");
    }
    drop((a, b));
    // TCP: connect, accept, a request and a reply.
    use p5_runtime::net::{TcpListener, TcpStream};
    use std::io::{Read, Write};
    let l = TcpListener::p5_bind(0x7C, "127.0.0.1:0")?;
    let mut c = TcpStream::p5_connect(0x7C, l.local_addr()?)?;
    let (mut s, _) = l.accept()?;
    c.write_all(b"ping")?;
    let mut req = [0u8; 4];
    s.read_exact(&mut req)?;
    s.write_all(b"pong")?;
    c.read_exact(&mut req)?;
    if &req != b"pong" {
        die("tcp exchange mismatch");
    }
    p5_runtime::counter(0xC0, -5);
    p5_runtime::mark(0x3A);
    Ok(())
}

fn report(tag: &str) {
    let s = p5_runtime::stats();
    println!(
        "{tag} pid={} events={} dropped={} frames={} sent={} acked={} spooled={} lost={} connects={}",
        std::process::id(),
        s.events,
        s.dropped,
        s.frames,
        s.frames_sent,
        s.frames_acked,
        s.frames_spooled,
        s.frames_lost,
        s.connects
    );
}

fn main() {
    let a = parse();
    if !p5_runtime::init() {
        println!("disabled");
    }
    let per_round = a.events.div_ceil(a.rounds);
    let handles: Vec<_> = (0..a.threads)
        .map(|t| {
            let (events, rounds, pause) = (a.events, a.rounds, a.pause_ms);
            std::thread::Builder::new()
                .name(format!("load-{t}"))
                .spawn(move || {
                    for r in 0..rounds {
                        pairs(
                            t,
                            (r * per_round).min(events),
                            ((r + 1) * per_round).min(events),
                        );
                        if pause > 0 {
                            std::thread::sleep(Duration::from_millis(pause));
                        }
                    }
                })
                .unwrap_or_else(|e| die(&format!("spawn: {e}")))
        })
        .collect();
    for h in handles {
        if h.join().is_err() {
            die("worker panicked");
        }
    }
    if a.net
        && let Err(e) = net()
    {
        die(&format!("net: {e}"));
    }
    if let Some(k) = a.fork {
        // SAFETY: fork; the child only records and exits.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            die("fork failed");
        }
        if pid == 0 {
            pairs(0xC, 0, k);
            report("child");
            std::process::exit(0);
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
            die("child failed");
        }
    }
    if a.flush {
        println!("flushed {}", p5_runtime::flush());
    }
    if a.wait_stdin {
        report("phase1");
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
        pairs(0xB, 0, a.events);
    }
    report("stats");
}
