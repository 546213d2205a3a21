//! Clock pings over UDP beside the log-server connection (`p5_wire::datagram`), when the
//! server accepted them. A ping on the TCP connection that overtakes an earlier one behind a
//! path whose delays vary waits for it, and shares its receive stamp with whatever it was read
//! with; a datagram is stamped on its own arrival. So where the connection's pings find a slow
//! or jittery path ([`crate::pings::PingSchedule::slow_path`]) datagrams go one every
//! [`DENSE_INTERVAL`], without waiting for answers, and give the merge several clean two-way
//! samples per round trip (issue 22) — in the connection's dense windows
//! ([`crate::pings::in_dense_window`]: its first 10 s, then 1 s in every 10); elsewhere and
//! otherwise one goes every [`PROBE_INTERVAL`].
//!
//! Each ping echoes the best pong since the previous ping (the one that arrived soonest after
//! the server sent it, the tightest backward sample). A server that never answers (a relaying
//! host agent, a firewall) gets [`PROBES`] pings and no more on this connection.

use p5_wire::data::Ping;
use p5_wire::datagram::{DatagramPing, DatagramPong};
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// Interval between pings on a slow or jittery path: up to 1,000 a second.
pub const DENSE_INTERVAL: Duration = Duration::from_millis(1);
/// Interval between pings elsewhere.
pub const PROBE_INTERVAL: Duration = Duration::from_millis(100);
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
    sent: u64,
    next: Instant,
    /// When the socket was opened (dense windows count from there).
    opened: Instant,
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
            sent: 0,
            next: now,
            opened: now,
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

    /// Whether pinging has stopped: [`PROBES`] pings and no answer.
    pub fn gave_up(&self) -> bool {
        !self.answered && self.sent >= PROBES
    }

    /// Pings sent and whether any was answered.
    pub fn stats(&self) -> (u64, bool) {
        (self.sent, self.answered)
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
            let gap = |(t_s, at): (u64, u64)| t_s as i128 - at as i128;
            if self.echo.is_none_or(|e| gap((pong.t_s, at)) > gap(e)) {
                self.echo = Some((pong.t_s, at));
            }
        }
    }

    /// Sends a ping if one is due: every [`DENSE_INTERVAL`] when `dense` (a slow path), the
    /// server has answered and the connection is in a dense window, else every
    /// [`PROBE_INTERVAL`]. `t_p` reads the process clock just before
    /// the send.
    pub fn poll(&mut self, now: Instant, dense: bool, t_p: impl FnOnce() -> u64) {
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
            + if dense && self.answered && window {
                DENSE_INTERVAL
            } else {
                PROBE_INTERVAL
            };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a UDP peer answering like the log server: probes until the first pong, then
    /// dense pings on a slow path, each echoing the best pong since the one before.
    #[test]
    fn pings_probe_then_go_dense_and_echo_the_best_pong() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let t0 = Instant::now();
        let mut p = DatagramPinger::open(server.local_addr().unwrap(), 42, t0).unwrap();
        let mut buf = [0u8; 64];
        p.poll(t0, true, || 1_000);
        let (n, from) = server.recv_from(&mut buf).unwrap();
        let ping = DatagramPing::decode(&buf[..n]).unwrap();
        assert_eq!(
            (ping.process_uid, ping.ping.t_p, ping.ping.echo_t_s),
            (42, 1_000, 0)
        );
        // Unanswered so far: the next goes a probe interval later, dense or not.
        assert_eq!(p.next_due(), Some(t0 + PROBE_INTERVAL));
        // Two pongs, the second sent later but received as soon after its send: the one
        // whose receipt came sooner after its send is echoed. A stranger's pong is ignored.
        for (uid, t_s) in [(42u64, 10_000u64), (42, 10_000_000), (7, 1)] {
            let pong = DatagramPong {
                process_uid: uid,
                t_s,
            };
            server.send_to(&pong.encode(), from).unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
        let mut clock = [1_000_000_000_000u64, 1_000_000_050_000, 1_000_000_060_000].into_iter();
        p.read_pongs(|| clock.next().unwrap_or(1_000_000_060_000));
        assert!(p.stats().1, "answered");
        let t1 = t0 + PROBE_INTERVAL;
        p.poll(t1, true, || 2_000);
        let (n, _) = server.recv_from(&mut buf).unwrap();
        let ping = DatagramPing::decode(&buf[..n]).unwrap().ping;
        assert_eq!(ping.echo_t_s, 10_000_000, "the pong with the smaller gap");
        assert!(ping.echo_t_p <= 1_000_000_050_000);
        assert_eq!(p.next_due(), Some(t1 + DENSE_INTERVAL));
        // Not dense: a probe interval.
        p.poll(t1 + DENSE_INTERVAL, false, || 3_000);
        assert_eq!(p.next_due(), Some(t1 + DENSE_INTERVAL + PROBE_INTERVAL));
    }

    /// A server that never answers gets a few probes, then nothing.
    #[test]
    fn an_unanswering_server_gets_a_few_probes() {
        let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let t0 = Instant::now();
        let mut p = DatagramPinger::open(silent.local_addr().unwrap(), 1, t0).unwrap();
        let mut t = t0;
        for _ in 0..PROBES * 2 {
            p.poll(t, true, || 0);
            p.read_pongs(|| 0);
            t += PROBE_INTERVAL;
        }
        assert_eq!(p.stats(), (PROBES, false));
        assert!(p.gave_up());
        assert_eq!(p.next_due(), None);
    }
}
