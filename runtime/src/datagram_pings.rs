//! Clock pings over UDP beside the log-server connection (`p5_wire::datagram`), when the
//! server accepted them. A ping on the TCP connection that overtakes an earlier one behind a
//! path whose delays vary waits for it, and shares its receive stamp with whatever it was read
//! with; a datagram is stamped on its own arrival. So on a slow path — the fastest of the last
//! [`RECENT`] round trips took [`SLOW_ANSWER`] or more (each pong carries its ping's send
//! time; a busy host answers some pings late, but not the fastest) — datagrams go one every
//! [`DENSE_INTERVAL`] (not to a log server on loopback: that one shares this host's clock),
//! without waiting for answers, and give the merge several clean two-way
//! samples per round trip (issue 22), in the connection's dense windows
//! ([`crate::pings::in_dense_window`]: its first 10 s, then 1 s in every 10). Elsewhere one
//! goes every [`PROBE_INTERVAL`], after a first [`RECENT`] every [`FIRST_INTERVAL`] that
//! judge the path.
//!
//! Each ping echoes the best pong since the previous ping (the one that arrived soonest after
//! the server sent it, the tightest backward sample). A server that never answers (a relaying
//! host agent, a firewall) gets [`PROBES`] pings and no more on this connection.

use crate::pings::SLOW_ANSWER;
use p5_wire::data::Ping;
use p5_wire::datagram::{DatagramPing, DatagramPong};
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// Interval between pings on a slow path: up to 2,000 a second.
pub const DENSE_INTERVAL: Duration = Duration::from_micros(500);
/// Interval between pings elsewhere.
pub const PROBE_INTERVAL: Duration = Duration::from_millis(100);
/// Interval between a connection's first [`RECENT`] pings.
pub const FIRST_INTERVAL: Duration = Duration::from_millis(5);
/// Round trips the path is judged by.
pub const RECENT: usize = 16;
/// Pings sent without any answer before giving up on this connection.
pub const PROBES: u64 = 20;
/// Most pongs read at once.
const MAX_READ: usize = 256;

/// The UDP side of one log-server connection.
#[derive(Debug)]
pub struct DatagramPinger {
    sock: UdpSocket,
    process_uid: u64,
    /// The best pong since the last ping: (server time at send, receipt on our clock).
    echo: Option<(u64, u64)>,
    /// Whether any pong came.
    answered: bool,
    /// The last [`RECENT`] round trips, ns (a ring), and how many there were in all.
    recent: [u64; RECENT],
    pongs: u64,
    sent: u64,
    next: Instant,
    /// When the socket was opened (dense windows count from there).
    opened: Instant,
    /// Whether a slow path may make pings dense: not to a log server on loopback, which shares
    /// this host's clock (merge maps it exactly) and answers slowly only when the host is busy,
    /// which dense pings would make busier.
    dense_allowed: bool,
}

impl DatagramPinger {
    /// A socket connected to `server` (the log-server connection's peer) for `process_uid`.
    pub fn open(server: SocketAddr, process_uid: u64, now: Instant) -> io::Result<Self> {
        let local: SocketAddr = match server {
            SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let sock = UdpSocket::bind(local)?;
        sock.connect(server)?;
        sock.set_nonblocking(true)?;
        p5_rxstamp::enable(sock.as_raw_fd());
        Ok(DatagramPinger {
            sock,
            process_uid,
            echo: None,
            answered: false,
            recent: [0; RECENT],
            pongs: 0,
            sent: 0,
            next: now,
            opened: now,
            dense_allowed: !server.ip().is_loopback(),
        })
    }

    /// The socket descriptor (for a forked child to close its copy).
    pub fn raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// Whether the server answers: pings go dense on a slow path (and the connection's own
    /// need not).
    pub fn answered(&self) -> bool {
        self.answered
    }

    /// Whether the path is slow: the fastest of the last [`RECENT`] round trips (at least
    /// half of them seen) took [`SLOW_ANSWER`] or more.
    pub fn slow_path(&self) -> bool {
        let seen = (self.pongs as usize).min(RECENT);
        seen >= RECENT / 2
            && self.recent[..seen].iter().min().copied().unwrap_or(0)
                >= SLOW_ANSWER.as_nanos() as u64
    }

    /// Whether pinging has stopped: [`PROBES`] pings and no answer.
    pub fn gave_up(&self) -> bool {
        !self.answered && self.sent >= PROBES
    }

    /// When the next ping is due, unless pinging stopped.
    pub fn next_due(&self) -> Option<Instant> {
        (!self.gave_up()).then_some(self.next)
    }

    /// Reads the pongs that arrived; `now_ns` is the process clock (each pong's receipt is
    /// the kernel's stamp of it, taken off that clock).
    pub fn read_pongs(&mut self, mut now_ns: impl FnMut() -> u64) {
        let mut buf = [0u8; 64];
        for _ in 0..MAX_READ {
            let (n, age) = match p5_rxstamp::recv(self.sock.as_raw_fd(), &mut buf) {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // Would block, or an error a past datagram left (port unreachable).
                Err(_) => return,
            };
            let at = now_ns().saturating_sub(age.unwrap_or(0));
            let Ok(pong) = DatagramPong::decode(&buf[..n]) else {
                continue;
            };
            if pong.process_uid != self.process_uid {
                continue;
            }
            self.answered = true;
            self.recent[(self.pongs % RECENT as u64) as usize] = at.saturating_sub(pong.t_p);
            self.pongs += 1;
            let gap = |(t_s, at): (u64, u64)| t_s as i128 - at as i128;
            if self.echo.is_none_or(|e| gap((pong.t_s, at)) > gap(e)) {
                self.echo = Some((pong.t_s, at));
            }
        }
    }

    /// Sends a ping if one is due: every [`DENSE_INTERVAL`] on a slow path in a dense window,
    /// every [`FIRST_INTERVAL`] for the first [`RECENT`], else every [`PROBE_INTERVAL`]. `t_p`
    /// reads the process clock just before the send.
    pub fn poll(&mut self, now: Instant, t_p: impl FnOnce() -> u64) {
        if self.gave_up() || now < self.next {
            return;
        }
        let (echo_t_s, echo_t_p) = self.echo.unwrap_or((0, 0));
        let ping = DatagramPing {
            process_uid: self.process_uid,
            ping: Ping {
                t_p: t_p(),
                echo_t_s,
                echo_t_p,
            },
        };
        // A full socket buffer or an unreachable port loses one ping; the next goes anyway.
        if self.sock.send(&ping.encode()).is_ok() {
            self.echo = None;
        }
        self.sent += 1;
        let window = crate::pings::in_dense_window(now.duration_since(self.opened));
        self.next = now
            + if self.dense_allowed && self.slow_path() && window {
                DENSE_INTERVAL
            } else if self.sent < RECENT as u64 {
                FIRST_INTERVAL
            } else {
                PROBE_INTERVAL
            };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a UDP peer answering like the log server: the first pings go every 5 ms; once
    /// half of the recent round trips all took over a millisecond the path is slow and pings
    /// go every 500 µs — unless the server is on loopback — ; one fast round trip among them
    /// ends that. Each ping echoes the best pong since the one before; a stranger's pong
    /// counts for nothing.
    #[test]
    fn pings_judge_the_path_and_echo_the_best_pong() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let t0 = Instant::now();
        let mut p = DatagramPinger::open(server.local_addr().unwrap(), 42, t0).unwrap();
        let mut buf = [0u8; 64];
        p.poll(t0, || 1_000);
        let (n, from) = server.recv_from(&mut buf).unwrap();
        let ping = DatagramPing::decode(&buf[..n]).unwrap();
        assert_eq!(
            (ping.process_uid, ping.ping.t_p, ping.ping.echo_t_s),
            (42, 1_000, 0)
        );
        assert_eq!(p.next_due(), Some(t0 + FIRST_INTERVAL));
        // The process clock reads NOW; each pong's ping left 10 ms before that (less the
        // kernel stamp's age: a round trip of several ms).
        const NOW: u64 = 1_000_000_000_000;
        let send = |uid: u64, t_p: u64, t_s: u64| {
            let pong = DatagramPong {
                process_uid: uid,
                t_p,
                t_s,
            };
            server.send_to(&pong.encode(), from).unwrap();
        };
        let settle = || std::thread::sleep(Duration::from_millis(2));
        for k in 0..RECENT / 2 {
            let t_s = if k == 3 { 10_000_000 } else { 10_000 };
            send(42, NOW - 10_000_000, t_s);
        }
        send(7, NOW, 1);
        settle();
        p.read_pongs(|| NOW);
        assert!(p.answered() && p.slow_path());
        let t1 = t0 + FIRST_INTERVAL;
        p.poll(t1, || 2_000);
        let (n, _) = server.recv_from(&mut buf).unwrap();
        let ping = DatagramPing::decode(&buf[..n]).unwrap().ping;
        assert_eq!(
            ping.echo_t_s, 10_000_000,
            "the pong received soonest after its send"
        );
        assert!(ping.echo_t_p <= NOW);
        // The server is on loopback: this host's clock, busy rather than far. No dense pings.
        assert_eq!(p.next_due(), Some(t1 + FIRST_INTERVAL));
        // On another host's, they go dense.
        p.dense_allowed = true;
        let t2 = t1 + FIRST_INTERVAL;
        p.poll(t2, || 3_000);
        server.recv_from(&mut buf).unwrap();
        assert_eq!(p.next_due(), Some(t2 + DENSE_INTERVAL));
        // A fast round trip: not a slow path any more.
        send(42, NOW, 5);
        settle();
        p.read_pongs(|| NOW);
        assert!(!p.slow_path());
        let t3 = t2 + DENSE_INTERVAL;
        p.poll(t3, || 4_000);
        assert_eq!(p.next_due(), Some(t3 + FIRST_INTERVAL));
    }

    /// A server that never answers gets a few probes, then nothing.
    #[test]
    fn an_unanswering_server_gets_a_few_probes() {
        let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let t0 = Instant::now();
        let mut p = DatagramPinger::open(silent.local_addr().unwrap(), 1, t0).unwrap();
        let mut t = t0;
        for _ in 0..PROBES * 2 {
            p.poll(t, || 0);
            p.read_pongs(|| 0);
            t += PROBE_INTERVAL;
        }
        assert_eq!((p.sent, p.answered), (PROBES, false));
        assert!(p.gave_up());
        assert_eq!(p.next_due(), None);
    }
}
