//! Hostile TCP peers for the attack tests of the log server and of the host agent (whose
//! tests include this file too). Each attacker is a thread with one connection at a time:
//! it does its thing, then holds the connection; when the server closes it, it reconnects
//! and starts over, until the [`Attack`] is dropped.

use p5_wire::frame::{self, FrameType};
use p5_wire::hello::{Caps, Hello, Identity};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// What an attacker sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A frame header claiming the largest frame, then nothing (after a Hello, or instead).
    LyingHeader { hello: bool },
    /// A Hello, then all but the last byte of the largest frame, then nothing.
    PartialFrame,
    /// A Hello, then all but 4 KiB of the largest frame, then one byte every 400 ms.
    Trickle,
    /// Nothing at all (after a Hello, or not even that).
    Idle { hello: bool },
    /// 64 KiB of random bytes.
    Garbage,
}

/// Running attackers; dropping it stops and joins them.
#[derive(Debug)]
pub struct Attack {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// Connections opened so far (all attackers).
    pub connections: Arc<AtomicU64>,
}

impl Drop for Attack {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Process uids of attackers' Hellos (distinct, recognisable).
static NEXT_UID: AtomicU64 = AtomicU64::new(0xA77A_C000_0000_0000);

/// A Hello of an attacker in session `session`.
pub fn hello_frame(session: &str) -> Vec<u8> {
    let uid = NEXT_UID.fetch_add(1, Ordering::Relaxed);
    let h = Hello {
        version: p5_wire::PROTOCOL_VERSION,
        caps: Caps::ALL,
        identity: Identity {
            process_uid: uid,
            pid: 4242,
            program: "attacker".into(),
            session: session.into(),
            ..Identity::default()
        },
    };
    let mut out = Vec::new();
    frame::encode(&mut out, FrameType::Hello as u8, &h.encode_body());
    out
}

/// Starts `n` attackers of `kind` against `addr`, their Hellos naming `session`.
pub fn start(addr: &str, kind: Kind, n: usize, session: &str) -> Attack {
    let stop = Arc::new(AtomicBool::new(false));
    let connections = Arc::new(AtomicU64::new(0));
    let threads = (0..n)
        .map(|i| {
            let (addr, session) = (addr.to_owned(), session.to_owned());
            let (stop, conns) = (stop.clone(), connections.clone());
            std::thread::Builder::new()
                .name(format!("attacker-{i}"))
                .stack_size(256 * 1024)
                .spawn(move || attacker(&addr, kind, &session, i as u64, &stop, &conns))
                .expect("start an attacker")
        })
        .collect();
    Attack {
        stop,
        threads,
        connections,
    }
}

/// Waits until the attackers opened `n` connections in all, then half a second more for the
/// server to read what they sent.
pub fn settle(attacks: &[&Attack], n: u64) {
    let end = std::time::Instant::now() + Duration::from_secs(30);
    while attacks
        .iter()
        .map(|a| a.connections.load(Ordering::Relaxed))
        .sum::<u64>()
        < n
    {
        assert!(
            std::time::Instant::now() < end,
            "attackers could not connect"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
}

/// Connections established to local port `port` on this host, counted on the server's
/// side (`/proc/net/tcp` and `tcp6`): connections a client counts as open may still be
/// waiting for the server's accept queue.
pub fn established_to(port: u16) -> usize {
    let want = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .flat_map(|t| t.lines().skip(1).map(str::to_owned).collect::<Vec<_>>())
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[1].ends_with(&want) && f[3] == "01"
        })
        .count()
}

/// Waits until at least `n` connections to `port` are established on the server's side,
/// then a second more for the server to accept them.
pub fn settle_at(port: u16, n: usize) {
    let end = std::time::Instant::now() + Duration::from_secs(60);
    while established_to(port) < n {
        assert!(
            std::time::Instant::now() < end,
            "only {} of {n} attackers are connected",
            established_to(port)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(1));
}

/// Starts attackers of several kinds at once.
pub fn mix(addr: &str, kinds: &[(Kind, usize)], session: &str) -> Vec<Attack> {
    kinds
        .iter()
        .map(|&(k, n)| start(addr, k, n, session))
        .collect()
}

fn attacker(addr: &str, kind: Kind, session: &str, seed: u64, stop: &AtomicBool, n: &AtomicU64) {
    // Staggered first connections: a thousand connects at once overflow the server's listen
    // queue, and the kernel then leaves clients that think they are connected without a
    // server-side socket, so the server would never see them.
    std::thread::sleep(Duration::from_millis(seed));
    while !stop.load(Ordering::Acquire) {
        let Ok(mut s) = TcpStream::connect(addr) else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        n.fetch_add(1, Ordering::Relaxed);
        let _ = s.set_write_timeout(Some(Duration::from_millis(100)));
        let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
        if send_payload(&mut s, kind, session, seed, stop).is_ok() {
            hold(&mut s, kind, stop);
        }
        // The server closed it (or refused it): come back.
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Largest frame length the servers accept.
const MAX: u32 = frame::MAX_FRAME_LEN;

fn send_payload(
    s: &mut TcpStream,
    kind: Kind,
    session: &str,
    seed: u64,
    stop: &AtomicBool,
) -> io::Result<()> {
    let mut header = Vec::with_capacity(8);
    header.extend_from_slice(&MAX.to_le_bytes());
    header.extend_from_slice(&0u32.to_le_bytes());
    match kind {
        Kind::LyingHeader { hello } => {
            if hello {
                write_all(s, &hello_frame(session), stop)?;
            }
            write_all(s, &header, stop)
        }
        Kind::PartialFrame | Kind::Trickle => {
            write_all(s, &hello_frame(session), stop)?;
            write_all(s, &header, stop)?;
            let keep = if kind == Kind::Trickle { 4096 } else { 1 };
            let mut body = vec![0x42u8; MAX as usize - keep];
            body[0] = FrameType::Events as u8;
            write_all(s, &body, stop)
        }
        Kind::Idle { hello } => {
            if hello {
                write_all(s, &hello_frame(session), stop)?;
            }
            Ok(())
        }
        Kind::Garbage => {
            let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let bytes: Vec<u8> = (0..64 * 1024)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            write_all(s, &bytes, stop)
        }
    }
}

/// Writes everything unless the attack stops first; a timeout is not an error.
fn write_all(s: &mut TcpStream, mut bytes: &[u8], stop: &AtomicBool) -> io::Result<()> {
    while !bytes.is_empty() {
        if stop.load(Ordering::Acquire) {
            return Err(io::ErrorKind::Interrupted.into());
        }
        match s.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Keeps the connection until the server closes it or the attack stops (a trickler sends a
/// byte every 400 ms meanwhile; whatever the server sends is read and ignored).
fn hold(s: &mut TcpStream, kind: Kind, stop: &AtomicBool) {
    let mut buf = [0u8; 4096];
    let mut ticks = 0u32;
    while !stop.load(Ordering::Acquire) {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
        ticks += 1;
        if kind == Kind::Trickle && ticks.is_multiple_of(4) && s.write(&[0x42]).is_err() {
            return;
        }
    }
}
