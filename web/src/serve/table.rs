//! The table of open connections, and who is evicted when there are too many.
//!
//! A new connection is always accepted and entered; if that puts its peer over the per-peer
//! limit (peers other than this host), or the table over the connection cap, one connection is
//! evicted: from the peer that holds the most connections (its own peer for the per-peer
//! limit), the first by [`Class::rank`]: the idle one that has waited longest, else the slow
//! one that has stalled longest, else the one answering a pipelined request, else the fresh
//! one that has waited longest, and only then, of those busy and those not yet read
//! from (the server has not given them their chance; under a flood that can take a while),
//! the oldest connection; never the connection being admitted. So a flood of idle, slow or
//! pipelining sockets, from any number of addresses, cannot keep a real client's new
//! connection from being served: it waits its turn, then is busy with the newest request; and
//! a flood of connections with requests in progress sheds the oldest rather than every
//! newcomer. One choice stops after the oldest [`WINDOW`] connections of a peer once an idle
//! or slow one is among them, which keeps an accept O(1) under a flood of those; otherwise it
//! compares them all (at most the cap, 1024).

use super::Limits;
use super::conn::{Class, Conn, Peer, now_ms};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, MutexGuard};

/// How many connections of a peer one eviction compares (oldest first) when an idle or slow
/// one is among them.
pub const WINDOW: usize = 64;

/// The open connections.
#[derive(Debug)]
pub struct Table {
    inner: Mutex<Inner>,
    cap: usize,
    per_peer: usize,
}

#[derive(Debug, Default)]
struct Inner {
    next: u64,
    len: usize,
    peers: HashMap<Peer, BTreeMap<u64, Arc<Conn>>>,
    /// (connections, peer), to find the peer holding the most.
    by_count: BTreeSet<(usize, Peer)>,
    /// Connections told to close whose tasks have not yet dropped them (they still hold
    /// their descriptors).
    closing: usize,
}

impl Table {
    /// A table of at most `cap` connections, `per_peer` from one peer other than this host.
    pub fn new(cap: usize, per_peer: usize) -> Table {
        Table {
            inner: Mutex::default(),
            cap: cap.max(1),
            per_peer: per_peer.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Enters a connection from `peer`, evicting another if the limits say so; `None` when
    /// that would take a connection whose request is being worked on or that has not been
    /// read from yet (the server is overloaded: wait, or `force`).
    pub fn admit(&self, peer: Peer, force: bool) -> Option<Arc<Conn>> {
        let upto = if force { Class::New } else { Class::Fresh };
        let mut t = self.lock();
        let conn = t.insert(peer);
        let over_peer = peer != Peer::Local && t.count(peer) > self.per_peer;
        if over_peer && !t.evict_from(peer, conn.id, upto) {
            t.remove(peer, conn.id);
            return None;
        }
        while t.len > self.cap {
            if !t.evict_any(conn.id, upto) {
                t.remove(peer, conn.id);
                return None;
            }
        }
        Some(conn)
    }

    /// Removes a connection whose task ended and dropped it.
    pub fn remove(&self, conn: &Conn) {
        let mut t = self.lock();
        if conn.killed.load(Relaxed) {
            t.closing = t.closing.saturating_sub(1);
        } else {
            t.remove(conn.peer, conn.id);
        }
    }

    /// Connections told to close that still hold their descriptors.
    pub fn closing(&self) -> usize {
        self.lock().closing
    }

    /// Evicts up to `n` connections waiting on their peers (idle, slow, pipelining or fresh:
    /// not those being answered or not yet read from), to free descriptors when the process
    /// has none left; how many went.
    pub fn evict_idle(&self, n: usize) -> usize {
        let mut t = self.lock();
        (0..n)
            .take_while(|_| t.evict_any(u64::MAX, Class::Fresh))
            .count()
    }

    /// Drops the connections past their deadlines (see [`Conn::overdue`]); how many.
    pub fn reap(&self, limits: &Limits) -> usize {
        let now = now_ms();
        let mut t = self.lock();
        let due: Vec<(Peer, u64, &'static str)> = t
            .peers
            .values()
            .flat_map(|m| m.values())
            .filter_map(|c| c.overdue(now, limits).map(|why| (c.peer, c.id, why)))
            .collect();
        for (peer, id, why) in &due {
            tracing::debug!("closing connection {id}: {why}");
            t.kill(*peer, *id);
        }
        due.len()
    }

    /// Open connections.
    pub fn len(&self) -> usize {
        self.lock().len
    }

    /// True when no connection is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Inner {
    fn count(&self, peer: Peer) -> usize {
        self.peers.get(&peer).map_or(0, BTreeMap::len)
    }

    fn recount(&mut self, peer: Peer, before: usize) {
        let after = self.count(peer);
        self.by_count.remove(&(before, peer));
        if after > 0 {
            self.by_count.insert((after, peer));
        } else {
            self.peers.remove(&peer);
        }
    }

    fn insert(&mut self, peer: Peer) -> Arc<Conn> {
        self.next += 1;
        let conn = Arc::new(Conn::new(self.next, peer));
        let before = self.count(peer);
        self.peers
            .entry(peer)
            .or_default()
            .insert(conn.id, conn.clone());
        self.len += 1;
        self.recount(peer, before);
        conn
    }

    fn remove(&mut self, peer: Peer, id: u64) -> Option<Arc<Conn>> {
        let before = self.count(peer);
        let c = self.peers.get_mut(&peer)?.remove(&id)?;
        self.len -= 1;
        self.recount(peer, before);
        Some(c)
    }

    /// The connection of `peer` to evict (not `spare`; of ranks up to `upto`'s), if any.
    fn pick(&self, peer: Peer, spare: u64, upto: Class) -> Option<u64> {
        let now = now_ms();
        let mut best: Option<(u8, u64, u64)> = None;
        let mut seen = 0;
        for c in self.peers.get(&peer)?.values() {
            if c.id == spare {
                continue;
            }
            let (class, since) = c.class(now);
            if class.rank() > upto.rank() {
                continue;
            }
            let key = (class.rank(), since, c.id);
            best = Some(best.map_or(key, |b| b.min(key)));
            seen += 1;
            // An idle or slow one among the oldest will do; anything else is compared with
            // every connection of the peer.
            if seen >= WINDOW && best.is_some_and(|b| b.0 <= Class::Slow.rank()) {
                break;
            }
        }
        best.map(|(_, _, id)| id)
    }

    /// Removes a connection and tells its task to drop it.
    fn kill(&mut self, peer: Peer, id: u64) -> Option<Arc<Conn>> {
        let c = self.remove(peer, id)?;
        c.killed.store(true, Relaxed);
        self.closing += 1;
        c.kill.notify_one();
        Some(c)
    }

    fn evict(&mut self, peer: Peer, id: u64) {
        if let Some(c) = self.kill(peer, id) {
            let (class, _) = c.class(now_ms());
            tracing::debug!("evicting connection {id} of {peer:?} ({class:?})");
        }
    }

    /// Evicts a connection of `peer` (not `spare`; of ranks up to `upto`'s); false if none
    /// may go.
    fn evict_from(&mut self, peer: Peer, spare: u64, upto: Class) -> bool {
        let Some(id) = self.pick(peer, spare, upto) else {
            return false;
        };
        self.evict(peer, id);
        true
    }

    /// Evicts a connection of the peer holding the most that has one to give (not `spare`;
    /// of ranks up to `upto`'s).
    fn evict_any(&mut self, spare: u64, upto: Class) -> bool {
        let found = self
            .by_count
            .iter()
            .rev()
            .find_map(|&(_, peer)| self.pick(peer, spare, upto).map(|id| (peer, id)));
        let Some((peer, id)) = found else {
            return false;
        };
        self.evict(peer, id);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(n: u8) -> Peer {
        Peer::V4([10, 0, 0, n])
    }

    #[test]
    fn the_peer_holding_the_most_gives_way() {
        let t = Table::new(4, 10);
        let a: Vec<_> = (0..3).map(|_| t.admit(v4(1), true).unwrap()).collect();
        let b = t.admit(v4(2), true).unwrap();
        let c = t.admit(v4(3), true).unwrap();
        assert_eq!(t.len(), 4);
        // The oldest of peer 1 went, not peer 2's.
        let lock = t.lock();
        assert_eq!(lock.count(v4(1)), 2);
        assert!(!lock.peers[&v4(1)].contains_key(&a[0].id));
        assert!(lock.peers[&v4(2)].contains_key(&b.id));
        assert!(lock.peers[&v4(3)].contains_key(&c.id));
    }

    #[test]
    fn slow_ones_go_first_then_the_oldest_work() {
        let t = Table::new(3, 10);
        let busy = t.admit(Peer::Local, true).unwrap();
        busy.read(40);
        busy.request_started();
        let slow = t.admit(Peer::Local, true).unwrap();
        slow.read(3); // part of a header, begun more than a second ago
        slow.backdate_header(crate::serve::conn::FRESH.as_millis() as u64 + 1);
        let fresh = t.admit(Peer::Local, true).unwrap();
        fresh.read_pending();
        let new = t.admit(Peer::Local, true).unwrap();
        {
            let lock = t.lock();
            let held = &lock.peers[&Peer::Local];
            assert!(held.contains_key(&busy.id) && held.contains_key(&fresh.id));
            assert!(held.contains_key(&new.id) && !held.contains_key(&slow.id));
        }
        // For descriptors, only connections waiting on their peers: the fresh one.
        assert_eq!(t.evict_idle(5), 1);
        assert_eq!(t.len(), 2, "the busy and the unread one stay");
        t.remove(&new);
        assert_eq!(
            t.closing(),
            2,
            "the slow and the fresh one have not closed yet"
        );
        t.remove(&slow);
        t.remove(&fresh);
        assert_eq!((t.closing(), t.len()), (0, 1));
        // Over the cap, the busy one goes before connections not yet read from.
        let a = t.admit(Peer::Local, true).unwrap();
        let b = t.admit(Peer::Local, true).unwrap();
        let c = t.admit(Peer::Local, true).unwrap();
        let lock = t.lock();
        let held = &lock.peers[&Peer::Local];
        assert!(!held.contains_key(&busy.id) && held.len() == 3);
        assert!([a.id, b.id, c.id].iter().all(|id| held.contains_key(id)));
    }

    #[test]
    fn pipelining_connections_go_before_fresh_and_busy_ones() {
        let t = Table::new(3, 10);
        let busy = t.admit(Peer::Local, true).unwrap();
        busy.read(40);
        busy.request_started();
        let pipelining = t.admit(Peer::Local, true).unwrap();
        pipelining.read(80);
        pipelining.request_started();
        pipelining.request_started();
        let fresh = t.admit(Peer::Local, true).unwrap();
        fresh.read_pending();
        let _new = t.admit(Peer::Local, true).unwrap();
        let lock = t.lock();
        let held = &lock.peers[&Peer::Local];
        assert!(held.contains_key(&busy.id) && held.contains_key(&fresh.id));
        assert!(!held.contains_key(&pipelining.id));
    }

    #[test]
    fn busy_and_unread_connections_go_only_when_forced() {
        let t = Table::new(2, 10);
        let unread = t.admit(Peer::Local, true).unwrap();
        let busy = t.admit(Peer::Local, true).unwrap();
        busy.read(40);
        busy.request_started();
        assert!(t.admit(Peer::Local, false).is_none(), "overloaded: wait");
        assert_eq!(t.len(), 2);
        let third = t.admit(Peer::Local, true).unwrap();
        let lock = t.lock();
        let held = &lock.peers[&Peer::Local];
        assert!(held.contains_key(&busy.id) && held.contains_key(&third.id));
        assert!(!held.contains_key(&unread.id), "the oldest goes");
    }

    #[test]
    fn only_the_new_connection_is_never_evicted() {
        let t = Table::new(1, 10);
        let first = t.admit(Peer::Local, true).unwrap();
        first.read(40);
        first.request_started();
        let second = t.admit(Peer::Local, true).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t.lock().peers[&Peer::Local].keys().next(), Some(&second.id));
        second.read(5);
        assert_eq!(
            t.evict_idle(1),
            0,
            "a header that just began is about to be served"
        );
        second.backdate_header(crate::serve::conn::FRESH.as_millis() as u64 + 1);
        assert_eq!(t.evict_idle(1), 1, "part of a header for a second: slow");
        assert!(t.is_empty());
    }

    #[test]
    fn the_per_peer_limit_spares_this_host() {
        let t = Table::new(100, 2);
        for _ in 0..5 {
            t.admit(v4(1), true).unwrap();
            t.admit(Peer::Local, true).unwrap();
        }
        let lock = t.lock();
        assert_eq!(lock.count(v4(1)), 2);
        assert_eq!(lock.count(Peer::Local), 5);
        assert_eq!(lock.len, 7);
    }
}
