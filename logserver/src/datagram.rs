//! Clock pings over UDP ([`p5_wire::datagram`]): a socket bound to the listener's address,
//! answering each ping of a process that has a connection open (and asked for it, capability
//! [`p5_wire::Caps::DATAGRAM_PINGS`]) with a pong, and recording the ping in that
//! connection's session as a `Ping` frame is recorded. The receipt time is the kernel's stamp
//! of the datagram (see [`crate::rxstamp`]).
//!
//! Anything else — a datagram that does not decode, a ping from a process with no connection
//! or from another address than its connection's,
//! more than [`MAX_PER_SECOND`] pings a second from one process or [`MAX_TOTAL_PER_SECOND`]
//! from all — is dropped unanswered and counted; nothing a peer sends makes the server keep
//! more than one entry per connection. An answered ping costs about 40 µs of CPU, client and
//! server together, on the development VM (`cargo run --release -p p5-logserver --example
//! datagram_cost`), so the total cap keeps datagram pings under about a third of a core.

use crate::clock::RunClock;
use crate::store::{Item, SessionSender};
use p5_wire::datagram::{DatagramPing, DatagramPong, PING_LEN};
use p5_wire::store::{self as wstore, SampleSource};
use std::collections::HashMap;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::io::Interest;
use tokio::net::UdpSocket;
use tokio::sync::watch;

/// Most pings recorded per process and second (a runtime sends at most about 2,000).
pub const MAX_PER_SECOND: u32 = 4_000;
/// Most pings recorded per second from all processes together.
pub const MAX_TOTAL_PER_SECOND: u32 = 8_000;

/// The connections whose processes may ping over UDP, by process uid.
#[derive(Debug, Default)]
pub(crate) struct Pingers {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_uid: HashMap<u64, Entry>,
    /// The pings of all processes recorded this second.
    window: Window,
}

/// Pings recorded in one second of server time.
#[derive(Debug, Default)]
struct Window {
    second: u64,
    count: u32,
}

impl Window {
    /// Whether `cap` pings were recorded in `second` already (a new second starts afresh).
    fn full(&mut self, second: u64, cap: u32) -> bool {
        if self.second != second {
            *self = Window { second, count: 0 };
        }
        self.count >= cap
    }
}

#[derive(Debug)]
struct Entry {
    conn_id: u64,
    /// The connection's peer address.
    peer: IpAddr,
    sender: SessionSender,
    /// The process's pings recorded this second.
    window: Window,
}

impl Pingers {
    /// Lets process `uid`, connected as `conn_id` from `peer` (its pings must come from that
    /// address), ping; its pings go to `sender`. A later connection of the
    /// same process takes over.
    pub(crate) fn register(
        self: &Arc<Self>,
        uid: u64,
        conn_id: u64,
        peer: IpAddr,
        sender: SessionSender,
    ) -> Registration {
        let entry = Entry {
            conn_id,
            peer,
            sender,
            window: Window::default(),
        };
        self.lock().by_uid.insert(uid, entry);
        Registration {
            pingers: self.clone(),
            uid,
            conn_id,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records `ping` received from `from` at `t_s` if its process may ping from there and
    /// is within its rate; returns whether to answer.
    fn record(&self, ping: &DatagramPing, from: IpAddr, t_s: u64) -> bool {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let second = t_s / 1_000_000_000;
        if inner.window.full(second, MAX_TOTAL_PER_SECOND) {
            return false;
        }
        let Some(e) = inner
            .by_uid
            .get_mut(&ping.process_uid)
            .filter(|e| e.peer == from)
        else {
            return false;
        };
        if e.window.full(second, MAX_PER_SECOND) {
            return false;
        }
        e.window.count += 1;
        inner.window.count += 1;
        let mut rec = Vec::with_capacity(64);
        wstore::encode_sample(
            &mut rec,
            t_s,
            ping.process_uid,
            ping.ping,
            SampleSource::Ping,
        );
        // A full store queue drops the sample rather than stall every other pinger.
        e.sender.try_send(Item::record(rec))
    }
}

/// Takes a process off [`Pingers`] when its connection ends (unless a newer one took over).
#[derive(Debug)]
pub(crate) struct Registration {
    pingers: Arc<Pingers>,
    uid: u64,
    conn_id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut inner = self.pingers.lock();
        if inner
            .by_uid
            .get(&self.uid)
            .is_some_and(|e| e.conn_id == self.conn_id)
        {
            inner.by_uid.remove(&self.uid);
        }
    }
}

/// What the datagram task saw, logged when it stops.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    answered: u64,
    dropped: u64,
}

/// Answers pings on `socket` until `shutdown` turns true.
pub(crate) async fn serve(
    socket: UdpSocket,
    pingers: Arc<Pingers>,
    clock: Arc<RunClock>,
    mut shutdown: watch::Receiver<bool>,
) {
    p5_rxstamp::enable(socket.as_raw_fd());
    let mut counts = Counts::default();
    let mut buf = [0u8; 2 * PING_LEN];
    loop {
        tokio::select! {
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    break;
                }
            }
            ready = socket.readable() => {
                if let Err(e) = ready {
                    tracing::warn!("clock pings over UDP stop: {e}");
                    break;
                }
                while let Some(answered) = one(&socket, &pingers, &clock, &mut buf) {
                    if answered { counts.answered += 1 } else { counts.dropped += 1 }
                }
            }
        }
    }
    tracing::info!(
        answered = counts.answered,
        dropped = counts.dropped,
        "clock pings over UDP stopped"
    );
}

/// Reads one datagram and answers it if it is a ping to answer: `Some(answered)`, or `None`
/// when there is nothing more to read now.
fn one(socket: &UdpSocket, pingers: &Pingers, clock: &RunClock, buf: &mut [u8]) -> Option<bool> {
    let fd = socket.as_raw_fd();
    let (n, age, from) = match socket.try_io(Interest::READABLE, || p5_rxstamp::recv_from(fd, buf))
    {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return None,
        // Errors of one datagram (ICMP-reported, truncated) do not stop the others.
        Err(_) => return Some(false),
    };
    let t_s = clock.now_ns().saturating_sub(age.unwrap_or(0));
    let (Ok(ping), Some(from)) = (DatagramPing::decode(&buf[..n]), from) else {
        return Some(false);
    };
    if !pingers.record(&ping, from.ip(), t_s) {
        return Some(false);
    }
    let pong = DatagramPong {
        process_uid: ping.process_uid,
        t_p: ping.ping.t_p,
        t_s: clock.now_ns(),
    };
    Some(socket.try_send_to(&pong.encode(), from).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use p5_wire::data::Ping;
    use std::net::Ipv4Addr;

    const HOME: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    /// One process gets at most [`MAX_PER_SECOND`] pings recorded a second, all of them
    /// together [`MAX_TOTAL_PER_SECOND`]; a new second starts afresh; pings from another
    /// address than the connection's, or of a process whose connection ended, are not
    /// recorded; a newer connection of the same process keeps its right.
    #[test]
    fn pings_are_recorded_within_their_rates_and_connections() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(
            dir.path(),
            Arc::new(RunClock::start()),
            crate::StoreConfig {
                // Room for every record at once: the rates, not the queue, are under test.
                queue_depth: 20_000,
                ..crate::StoreConfig::default()
            },
        )
        .unwrap();
        let sender = store.session("rates").unwrap();
        let pingers = Arc::new(Pingers::default());
        let regs: Vec<Registration> = (1..=3)
            .map(|uid| pingers.register(uid, uid, HOME, sender.clone()))
            .collect();
        let ping = |uid| DatagramPing {
            process_uid: uid,
            ping: Ping::default(),
        };
        let from = |uid, ip, n, t_s| {
            (0..n)
                .filter(|_| pingers.record(&ping(uid), ip, t_s))
                .count()
        };
        let recorded = |uid, n, t_s| from(uid, HOME, n, t_s);
        let second = 7_000_000_000;
        assert_eq!(recorded(1, 5_000, second) as u32, MAX_PER_SECOND);
        assert_eq!(recorded(2, 5_000, second + 1) as u32, MAX_PER_SECOND);
        assert_eq!(
            recorded(3, 5_000, second + 2),
            0,
            "all together at their cap"
        );
        assert_eq!(recorded(3, 10, second + 1_000_000_000), 10, "a new second");
        assert_eq!(
            recorded(9, 10, second + 1_000_000_000),
            0,
            "never connected"
        );
        let elsewhere = IpAddr::V4(Ipv4Addr::new(10, 9, 8, 7));
        assert_eq!(
            from(3, elsewhere, 10, second + 1_000_000_000),
            0,
            "another address"
        );
        // A newer connection of process 1 takes over; the old one's end leaves it be.
        let newer = pingers.register(1, 99, HOME, sender.clone());
        drop(regs);
        assert_eq!(recorded(1, 5, second + 2_000_000_000), 5);
        assert_eq!(
            recorded(2, 5, second + 2_000_000_000),
            0,
            "its connection ended"
        );
        drop(newer);
        assert_eq!(recorded(1, 5, second + 3_000_000_000), 0);
    }
}
