//! What one connection is doing, as the accept loop and the reaper see it: counters and flags
//! that the socket wrapper and the service wrapper ([`super::track`]) update without a lock.
//!
//! A connection is *new* until it is first read from; then it is in one of five classes
//! (see [`Class`]): *idle* when it waits for a request
//! that has not begun, *fresh* when that wait began less than [`FRESH`] ago (just accepted, or
//! just answered: a real client is about to send), *slow* when it waits on its peer in the
//! middle of an exchange (part of a request header, a request body, or an answer the peer does
//! not read), *busy* while the application computes its answer, and *pipelining* when it is
//! busy with a request its peer sent before reading the previous answer. A request header
//! that began less than [`FRESH`] ago is *reading*, ranked with busy ones: a real client's
//! whole request arrives at once and is about to reach the application, and closing it then
//! (to free a descriptor when the process has none) would leave that request unanswered.
//! Slow connections are held to a minimum data rate the way Apache's `mod_reqtimeout` does: a
//! body must arrive, and an answer be read, within a grace period plus one second per
//! `min_rate` bytes moved so far.

use super::Limits;
use std::net::IpAddr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// How long an idle connection counts as fresh after it was accepted or answered.
pub const FRESH: Duration = Duration::from_secs(1);

/// Milliseconds since the first call (a monotonic clock the atomics can hold).
pub fn now_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let e = EPOCH.get_or_init(Instant::now);
    // Starting an hour in, so that a time some seconds before the first call is still a
    // time (the values are only compared and subtracted).
    u64::try_from(e.elapsed().as_millis())
        .unwrap_or(u64::MAX)
        .saturating_add(3_600_000)
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Who a connection comes from, for the per-peer limits: every loopback address is one peer
/// (a local program can bind any of 127.0.0.0/8, so telling them apart would let it pose as
/// many), an IPv4 address is one, and an IPv6 peer is its /64 (one host's or one site's
/// addresses); an IPv4-mapped IPv6 address is the IPv4 one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Peer {
    /// Any loopback address: this host.
    Local,
    /// An IPv4 address.
    V4([u8; 4]),
    /// An IPv6 /64 prefix.
    V6([u8; 8]),
}

impl Peer {
    /// The peer of a remote address.
    pub fn of(ip: IpAddr) -> Peer {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        if ip.is_loopback() {
            return Peer::Local;
        }
        match ip {
            IpAddr::V4(v4) => Peer::V4(v4.octets()),
            IpAddr::V6(v6) => {
                let o = v6.octets();
                Peer::V6([o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7]])
            }
        }
    }
}

/// What a connection is doing (see [`Class::rank`] for the order of eviction).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// Waiting for a request that has not begun, for [`FRESH`] or longer.
    Idle,
    /// Waiting on its peer in the middle of an exchange.
    Slow,
    /// The application is working on an answer for a peer that sent this request before
    /// reading the previous answer (browsers never pipeline).
    Pipelining,
    /// Waiting for a request, accepted or answered less than [`FRESH`] ago.
    Fresh,
    /// The application is working on its answer.
    Busy,
    /// Accepted, and not yet read from even once: the server has not given it a chance yet
    /// (under load the queue of runnable connections can take a while).
    New,
    /// A request header began less than [`FRESH`] ago: about to reach the application.
    Reading,
}

impl Class {
    /// The order of eviction: idle, slow, pipelining, fresh, then busy and new ones alike
    /// (the oldest connection first).
    pub fn rank(self) -> u8 {
        match self {
            Class::Idle => 0,
            Class::Slow => 1,
            Class::Pipelining => 2,
            Class::Fresh => 3,
            Class::Busy | Class::New | Class::Reading => 4,
        }
    }
}

/// The shared state of one connection.
#[derive(Debug)]
pub struct Conn {
    /// Accept order.
    pub id: u64,
    /// Who it comes from.
    pub peer: Peer,
    /// Tells the connection's task to drop it.
    pub kill: Notify,
    /// It was told to (by eviction or a deadline) and left the table.
    pub killed: AtomicBool,
    /// It has been read from at least once.
    polled: AtomicBool,
    accepted_ms: u64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    write_waiting: AtomicBool,
    in_handler: AtomicBool,
    body_waiting: AtomicBool,
    /// When the current request reached the application, and `bytes_in` then.
    req_ms: AtomicU64,
    req_in: AtomicU64,
    /// When the current answer was handed to the connection, and `bytes_out` then.
    resp_ms: AtomicU64,
    resp_out: AtomicU64,
    /// When the connection last began to wait for a request, and `bytes_in` then.
    idle_ms: AtomicU64,
    idle_in: AtomicU64,
    /// When the current request header's first bytes arrived.
    head_ms: AtomicU64,
    /// Requests answered since the peer was last found to have sent nothing more.
    pipelined: AtomicU32,
}

impl Conn {
    /// A connection accepted now.
    pub fn new(id: u64, peer: Peer) -> Conn {
        let now = now_ms();
        Conn {
            id,
            peer,
            kill: Notify::new(),
            killed: AtomicBool::new(false),
            polled: AtomicBool::new(false),
            accepted_ms: now,
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            write_waiting: AtomicBool::new(false),
            in_handler: AtomicBool::new(false),
            body_waiting: AtomicBool::new(false),
            req_ms: AtomicU64::new(now),
            req_in: AtomicU64::new(0),
            resp_ms: AtomicU64::new(now),
            resp_out: AtomicU64::new(0),
            idle_ms: AtomicU64::new(now),
            idle_in: AtomicU64::new(0),
            head_ms: AtomicU64::new(now),
            pipelined: AtomicU32::new(0),
        }
    }

    /// `n` bytes arrived.
    pub fn read(&self, n: usize) {
        self.polled.store(true, Relaxed);
        let before = self.bytes_in.fetch_add(n as u64, Relaxed);
        if n > 0 && before == self.idle_in.load(Relaxed) {
            self.head_ms.store(now_ms(), Relaxed);
        }
    }

    /// Makes the current request header look `by` ms older (tests of eviction).
    #[cfg(test)]
    pub fn backdate_header(&self, by: u64) {
        self.head_ms
            .store(self.head_ms.load(Relaxed).saturating_sub(by), Relaxed);
    }

    /// A read found nothing to read: the peer is not ahead of the answers.
    pub fn read_pending(&self) {
        self.polled.store(true, Relaxed);
        self.pipelined.store(0, Relaxed);
    }

    /// A write or flush moved `n` bytes (`None`: it must wait for the peer to read).
    pub fn wrote(&self, n: Option<usize>) {
        match n {
            Some(n) => {
                self.bytes_out.fetch_add(n as u64, Relaxed);
                self.write_waiting.store(false, Relaxed);
            }
            None => self.write_waiting.store(true, Relaxed),
        }
    }

    /// A request reached the application; returns how many were answered in a row without
    /// the peer ever waiting for one (this one included).
    pub fn request_started(&self) -> u32 {
        self.req_ms.store(now_ms(), Relaxed);
        self.req_in.store(self.bytes_in.load(Relaxed), Relaxed);
        self.body_waiting.store(false, Relaxed);
        self.in_handler.store(true, Relaxed);
        self.pipelined.fetch_add(1, Relaxed).saturating_add(1)
    }

    /// The application waits for more of the request body (`true`) or got some (`false`).
    pub fn body_waiting(&self, waiting: bool) {
        self.body_waiting.store(waiting, Relaxed);
    }

    /// The application handed over its answer.
    pub fn answered(&self) {
        let now = now_ms();
        self.resp_ms.store(now, Relaxed);
        self.resp_out.store(self.bytes_out.load(Relaxed), Relaxed);
        self.idle_ms.store(now, Relaxed);
        self.idle_in.store(self.bytes_in.load(Relaxed), Relaxed);
        self.body_waiting.store(false, Relaxed);
        self.in_handler.store(false, Relaxed);
    }

    /// The class at `now` (ms) and the time that orders connections of its rank: since when
    /// an idle, slow or fresh connection has been waiting, when a pipelining one's request
    /// began, and when a busy or new one was accepted (its current request began later, which
    /// would make a newcomer waiting for its first read older than a connection busy with its
    /// tenth request).
    pub fn class(&self, now: u64) -> (Class, u64) {
        if !self.polled.load(Relaxed) {
            return (Class::New, self.accepted_ms);
        }
        if self.write_waiting.load(Relaxed) {
            return (Class::Slow, self.resp_ms.load(Relaxed));
        }
        if self.in_handler.load(Relaxed) {
            let since = self.req_ms.load(Relaxed);
            if self.body_waiting.load(Relaxed) {
                return (Class::Slow, since);
            }
            if self.pipelined.load(Relaxed) > 1 {
                return (Class::Pipelining, since);
            }
            return (Class::Busy, self.accepted_ms);
        }
        let since = self.idle_ms.load(Relaxed);
        if self.bytes_in.load(Relaxed) != self.idle_in.load(Relaxed) {
            // A request about to reach the application, or part of a header the peer is
            // slow to finish.
            let began = self.head_ms.load(Relaxed);
            if now.saturating_sub(began) < ms(FRESH) {
                return (Class::Reading, self.accepted_ms);
            }
            return (Class::Slow, began);
        }
        if now.saturating_sub(since) < ms(FRESH) {
            return (Class::Fresh, since);
        }
        (Class::Idle, since)
    }

    /// Why the connection is past its deadline at `now` (ms), if it is: a request body or an
    /// answer moving slower than `limits` allow.
    pub fn overdue(&self, now: u64, limits: &Limits) -> Option<&'static str> {
        let rate = limits.min_rate.max(1);
        let allowance = |grace: Duration, bytes: u64| ms(grace).saturating_add(bytes * 1000 / rate);
        if self.in_handler.load(Relaxed) && self.body_waiting.load(Relaxed) {
            let got = self.bytes_in.load(Relaxed) - self.req_in.load(Relaxed);
            let start = self.req_ms.load(Relaxed);
            if now > start.saturating_add(allowance(limits.body_timeout, got)) {
                return Some("request body too slow");
            }
        }
        if self.write_waiting.load(Relaxed) {
            let sent = self.bytes_out.load(Relaxed) - self.resp_out.load(Relaxed);
            let start = self.resp_ms.load(Relaxed);
            if now > start.saturating_add(allowance(limits.write_timeout, sent)) {
                return Some("answer not read");
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_group_loopback_and_ipv6_prefixes() {
        let p = |s: &str| Peer::of(s.parse().unwrap());
        assert_eq!(p("127.0.0.1"), Peer::Local);
        assert_eq!(p("127.8.9.10"), Peer::Local);
        assert_eq!(p("::1"), Peer::Local);
        assert_eq!(p("::ffff:127.0.0.1"), Peer::Local);
        assert_eq!(p("::ffff:10.0.0.1"), p("10.0.0.1"));
        assert_ne!(p("10.0.0.1"), p("10.0.0.2"));
        assert_eq!(p("2001:db8:1:2::1"), p("2001:db8:1:2:ffff::9"));
        assert_ne!(p("2001:db8:1:2::1"), p("2001:db8:1:3::1"));
    }

    #[test]
    fn classes_follow_the_exchange() {
        let c = Conn::new(1, Peer::Local);
        assert_eq!(c.class(now_ms()).0, Class::New);
        c.read_pending();
        assert_eq!(c.class(now_ms()).0, Class::Fresh);
        assert_eq!(c.class(now_ms() + ms(FRESH)).0, Class::Idle);
        c.read(10);
        assert_eq!(c.class(now_ms()).0, Class::Reading, "a header just arrived");
        assert_eq!(
            c.class(now_ms() + ms(FRESH)).0,
            Class::Slow,
            "part of a header, for a second"
        );
        assert_eq!(c.request_started(), 1);
        assert_eq!(c.class(now_ms()).0, Class::Busy);
        c.body_waiting(true);
        assert_eq!(c.class(now_ms()).0, Class::Slow, "waiting for the body");
        c.answered();
        assert_eq!(c.class(now_ms()).0, Class::Fresh);
        c.wrote(None);
        assert_eq!(c.class(now_ms()).0, Class::Slow, "answer not read");
        c.wrote(Some(5));
        assert_eq!(c.class(now_ms()).0, Class::Fresh);
        assert_eq!(c.request_started(), 2, "pipelined");
        assert_eq!(c.class(now_ms()).0, Class::Pipelining);
        c.answered();
        c.read_pending();
        assert_eq!(c.request_started(), 1);
    }

    #[test]
    fn slow_bodies_and_unread_answers_are_overdue() {
        let limits = Limits {
            body_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
            min_rate: 1000,
            ..Limits::default()
        };
        let c = Conn::new(1, Peer::Local);
        let t = now_ms();
        c.request_started();
        c.body_waiting(true);
        assert_eq!(c.overdue(t + 9_000, &limits), None);
        assert!(c.overdue(t + 11_000, &limits).is_some());
        c.read(5_000); // 5 s more of allowance
        assert_eq!(c.overdue(t + 14_000, &limits), None);
        assert_eq!(
            c.overdue(t + 16_000, &limits),
            Some("request body too slow")
        );
        c.answered();
        c.wrote(None);
        let t = now_ms();
        assert_eq!(c.overdue(t + 9_000, &limits), None);
        assert_eq!(c.overdue(t + 11_000, &limits), Some("answer not read"));
    }
}
