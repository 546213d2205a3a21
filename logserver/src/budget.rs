//! Who may hold memory for received bytes and connection slots, and who gives them back when
//! they run out.
//!
//! Received bytes are held from the moment they are read until their record is durable. Two
//! pools pay for them, so that no peer can take what a well-behaved client needs:
//!
//! - Every connection has its own **allowance** ([`crate::ConnLimits::allowance`], 256 KiB by
//!   default): room for its Hello and a few ordinary frames (the runtimes send frames of
//!   about 64 KiB). A connection's bytes come from its allowance first, and no other
//!   connection can touch it, so a client that sends ordinary frames is read, stored and
//!   acknowledged whatever the others do: its Hello is read at once, and its frames wait
//!   only for the disk.
//! - Beyond its allowance a connection draws on the **shared pool**
//!   ([`crate::ServerConfig::inflight_bytes`]), for large frames and deep pipelines. Bytes are
//!   reserved as they arrive, never for what a header merely claims.
//!
//! The shared pool is held by a frame being received only while that frame makes progress.
//! A connection that needs the pool and finds it spent waits (its peer's bytes stay in the
//! kernel: back-pressure) and, every [`EVICT_POLL`], evicts *stalled* holders: connections
//! that hold pool bytes of an unfinished frame, are not themselves waiting for memory, and
//! have received nothing for [`STALL`]. The peer holding the most unfinished bytes goes
//! first, then within it the connection holding the most, then the one idle longest. A
//! sender that keeps trickling is not stalled, but its frame must still complete at a
//! minimum rate ([`crate::ConnLimits::min_frame_rate`], see [`crate::receiver`]), so it holds
//! the pool for seconds, not for the whole frame timeout.
//!
//! The connection cap works the same way: when it is reached, the accept loop evicts one
//! connection for the newcomer — the idlest connection that has not sent its Hello yet, else
//! the idlest one that has been silent for at least [`EVICT_IDLE`], preferring the peer with
//! the most connections — and only if there is none is the newcomer refused.
//!
//! An evicted connection is told why in an `Error` frame and closed at once, without the
//! usual lingering close. A runtime whose connection is evicted reconnects and resends what
//! was not acknowledged, so eviction never costs an acknowledged event.

use crate::clock::RunClock;
use crate::receiver::stopped;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};

/// A holder of shared-pool bytes that received nothing for this long is stalled.
pub const STALL: Duration = Duration::from_secs(1);
/// A connection past its Hello may be evicted for a newcomer once silent this long.
pub const EVICT_IDLE: Duration = Duration::from_secs(5);
/// How often a connection waiting for the shared pool looks for stalled holders.
pub const EVICT_POLL: Duration = Duration::from_millis(20);

/// The server-wide memory budget and the registry of connections (see the module docs).
#[derive(Debug)]
pub struct Budget {
    shared: Arc<Semaphore>,
    allowance: usize,
    clock: Arc<RunClock>,
    members: Mutex<HashMap<u64, Arc<Holder>>>,
    evictions: AtomicU64,
}

/// What one connection holds and does, as the budget sees it.
#[derive(Debug)]
pub struct Holder {
    id: u64,
    peer: IpAddr,
    own: Arc<Semaphore>,
    greeted: AtomicBool,
    last_input_ns: AtomicU64,
    unfinished_shared: AtomicUsize,
    waiting: AtomicBool,
    evicted: AtomicBool,
    reason: Mutex<String>,
    notify: Notify,
}

/// Why reserving memory did not complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interrupted {
    /// The server is shutting down.
    Shutdown,
    /// This connection was evicted (the reason).
    Evicted(String),
}

/// Bytes reserved for one received frame, from the connection's allowance and the shared
/// pool; released when dropped (once the record is durable).
#[derive(Debug, Default)]
pub struct Reservation {
    own: Option<OwnedSemaphorePermit>,
    shared: Option<OwnedSemaphorePermit>,
}

fn add(slot: &mut Option<OwnedSemaphorePermit>, p: OwnedSemaphorePermit) {
    match slot {
        Some(held) => held.merge(p),
        None => *slot = Some(p),
    }
}

impl Reservation {
    /// Bytes reserved in all.
    pub fn bytes(&self) -> usize {
        self.own.as_ref().map_or(0, |p| p.num_permits())
            + self.shared.as_ref().map_or(0, |p| p.num_permits())
    }
}

/// A connection's membership; leaving the registry when dropped.
#[derive(Debug)]
pub struct Member {
    budget: Arc<Budget>,
    holder: Arc<Holder>,
}

impl Drop for Member {
    fn drop(&mut self) {
        lock(&self.budget.members).remove(&self.holder.id);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Budget {
    /// A budget of `shared` pool bytes plus `allowance` bytes per connection.
    pub fn new(shared: usize, allowance: usize, clock: Arc<RunClock>) -> Arc<Self> {
        Arc::new(Self {
            shared: Arc::new(Semaphore::new(shared)),
            allowance,
            clock,
            members: Mutex::new(HashMap::new()),
            evictions: AtomicU64::new(0),
        })
    }

    /// Registers a new connection.
    pub fn join(self: &Arc<Self>, id: u64, peer: IpAddr) -> Member {
        let holder = Arc::new(Holder {
            id,
            peer,
            own: Arc::new(Semaphore::new(self.allowance)),
            greeted: AtomicBool::new(false),
            last_input_ns: AtomicU64::new(self.clock.now_ns()),
            unfinished_shared: AtomicUsize::new(0),
            waiting: AtomicBool::new(false),
            evicted: AtomicBool::new(false),
            reason: Mutex::new(String::new()),
            notify: Notify::new(),
        });
        lock(&self.members).insert(id, holder.clone());
        Member {
            budget: self.clone(),
            holder,
        }
    }

    /// Connections evicted so far (for memory or for a slot).
    pub fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }

    /// Shared-pool bytes free now.
    pub fn shared_available(&self) -> usize {
        self.shared.available_permits()
    }

    /// Evicts stalled holders of shared-pool bytes until about `need` bytes are on their way
    /// back (see the module docs); `requester` is never chosen.
    fn evict_stalled(&self, need: usize, requester: u64) {
        let now = self.clock.now_ns();
        let stall = STALL.as_nanos() as u64;
        let members = lock(&self.members);
        let mut per_peer: HashMap<IpAddr, usize> = HashMap::new();
        for h in members.values() {
            *per_peer.entry(h.peer).or_default() += h.unfinished();
        }
        let mut stalled: Vec<(usize, usize, u64, &Arc<Holder>)> = members
            .values()
            .filter(|h| h.id != requester && !h.is_evicted() && h.unfinished() > 0)
            .filter(|h| !h.waiting.load(Ordering::Acquire) && h.idle_ns(now) >= stall)
            .map(|h| (per_peer[&h.peer], h.unfinished(), h.idle_ns(now), h))
            .collect();
        stalled.sort_by_key(|s| std::cmp::Reverse((s.0, s.1, s.2)));
        let mut freed = 0;
        for (_, bytes, idle, h) in stalled {
            if freed >= need {
                break;
            }
            freed += bytes;
            self.evict(
                h,
                format!(
                    "evicted: held {bytes} bytes of an unfinished frame without progress for {:?} \
                     while others waited for memory",
                    Duration::from_nanos(idle)
                ),
            );
        }
    }

    /// Evicts one connection to make room for a newcomer at the connection cap (see the
    /// module docs). False if no connection may be evicted.
    pub fn evict_for_slot(&self) -> bool {
        let now = self.clock.now_ns();
        let idle_min = EVICT_IDLE.as_nanos() as u64;
        let members = lock(&self.members);
        let mut per_peer: HashMap<IpAddr, usize> = HashMap::new();
        for h in members.values().filter(|h| !h.is_evicted()) {
            *per_peer.entry(h.peer).or_default() += 1;
        }
        let victim = members
            .values()
            .filter(|h| !h.is_evicted())
            .filter(|h| !h.greeted() || h.idle_ns(now) >= idle_min)
            .max_by_key(|h| (!h.greeted(), per_peer[&h.peer], h.idle_ns(now)));
        let Some(v) = victim else {
            return false;
        };
        let why = if v.greeted() {
            "evicted: the connection cap was reached and this connection was the idlest"
        } else {
            "evicted: the connection cap was reached and this connection had sent no hello"
        };
        self.evict(v, why.to_owned());
        true
    }

    fn evict(&self, h: &Holder, reason: String) {
        *lock(&h.reason) = reason;
        h.evicted.store(true, Ordering::Release);
        h.notify.notify_waiters();
        self.evictions.fetch_add(1, Ordering::Relaxed);
    }
}

impl Holder {
    fn unfinished(&self) -> usize {
        self.unfinished_shared.load(Ordering::Acquire)
    }

    fn idle_ns(&self, now: u64) -> u64 {
        now.saturating_sub(self.last_input_ns.load(Ordering::Acquire))
    }

    fn greeted(&self) -> bool {
        self.greeted.load(Ordering::Acquire)
    }

    fn is_evicted(&self) -> bool {
        self.evicted.load(Ordering::Acquire)
    }
}

impl Member {
    /// Notes that bytes arrived now (`now_ns` on the run clock).
    pub fn touch(&self, now_ns: u64) {
        self.holder.last_input_ns.store(now_ns, Ordering::Release);
    }

    /// Notes that the connection's Hello was accepted.
    pub fn greet(&self) {
        self.holder.greeted.store(true, Ordering::Release);
    }

    /// The frame being received is complete (or given up): its shared bytes are no longer
    /// those of an unfinished frame.
    pub fn frame_done(&self) {
        self.holder.unfinished_shared.store(0, Ordering::Release);
    }

    /// The eviction reason, if this connection was evicted.
    pub fn evicted(&self) -> Option<String> {
        self.holder
            .is_evicted()
            .then(|| lock(&self.holder.reason).clone())
    }

    /// Resolves once this connection is evicted, with the reason.
    pub async fn until_evicted(&self) -> String {
        loop {
            let notified = self.holder.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(r) = self.evicted() {
                return r;
            }
            notified.await;
        }
    }

    /// Adds `n` bytes to `r`: from this connection's allowance first, then from the shared
    /// pool, waiting (and evicting stalled holders) when neither has room. Returns how long
    /// it waited.
    pub async fn reserve(
        &self,
        r: &mut Reservation,
        n: usize,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<Duration, Interrupted> {
        let h = &self.holder;
        let mut from_own = h.own.available_permits().min(n);
        match h.own.clone().try_acquire_many_owned(from_own as u32) {
            Ok(p) if from_own > 0 => add(&mut r.own, p),
            _ => from_own = 0,
        }
        let rest = n - from_own;
        if rest == 0 {
            return Ok(Duration::ZERO);
        }
        if let Ok(p) = self
            .budget
            .shared
            .clone()
            .try_acquire_many_owned(rest as u32)
        {
            add(&mut r.shared, p);
            h.unfinished_shared.fetch_add(rest, Ordering::AcqRel);
            return Ok(Duration::ZERO);
        }
        let started = tokio::time::Instant::now();
        h.waiting.store(true, Ordering::Release);
        let outcome = self.wait_for(r, rest, shutdown).await;
        h.waiting.store(false, Ordering::Release);
        outcome.map(|()| started.elapsed())
    }

    async fn wait_for(
        &self,
        r: &mut Reservation,
        n: usize,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<(), Interrupted> {
        let h = &self.holder;
        let fits_own = n <= self.budget.allowance;
        let own = h.own.clone().acquire_many_owned(n as u32);
        let shared = self.budget.shared.clone().acquire_many_owned(n as u32);
        tokio::pin!(own, shared);
        let mut poll = tokio::time::interval(EVICT_POLL);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                reason = self.until_evicted() => return Err(Interrupted::Evicted(reason)),
                () = stopped(shutdown) => return Err(Interrupted::Shutdown),
                p = &mut own, if fits_own => {
                    let p = p.map_err(|_| Interrupted::Shutdown)?;
                    add(&mut r.own, p);
                    return Ok(());
                }
                p = &mut shared => {
                    let p = p.map_err(|_| Interrupted::Shutdown)?;
                    add(&mut r.shared, p);
                    h.unfinished_shared.fetch_add(n, Ordering::AcqRel);
                    return Ok(());
                }
                _ = poll.tick() => self.budget.evict_stalled(n, h.id),
            }
        }
    }
}
