//! Memory for the input of accepted connections and the connection cap of the listener, and
//! who gives them back when they run out. The same rules as the log server's
//! (`p5_logserver::budget`), for the agent's thread-per-connection design:
//!
//! - Each accepted connection may buffer [`ALLOWANCE`] bytes of unfinished input of its own:
//!   a Hello, a `ctl` request and any ordinary frame (the runtimes send about 64 KiB) are
//!   always read, whatever the other connections hold.
//! - Beyond that a connection draws on one process-wide pool of [`MAX_BUFFERED`] bytes. A
//!   reader that cannot reserve room does not read (its peer's bytes wait in the kernel) and
//!   evicts *stalled* holders: connections holding pool bytes that are not themselves waiting
//!   for room and have received nothing for [`STALL`] — the peer holding the most first, then
//!   the connection holding the most, then the one idle longest.
//! - At the connection cap a newcomer evicts the idlest connection that has not sent its
//!   first frame, else the idlest one silent for [`EVICT_IDLE`], preferring the peer with the
//!   most connections ([`evict_for_slot`]).
//!
//! Evicting a connection shuts its socket down (under the registry's lock, so the descriptor
//! is still the connection's), which wakes its thread at once; the thread reports the reason
//! ([`crate::link::LinkError::Evicted`]) and ends. A frame must also arrive at a minimum rate
//! ([`crate::link::MIN_FRAME_RATE`]), so a trickling sender holds pool bytes for seconds.
//! Worst case: connections × 2 × [`ALLOWANCE`] + 2 × [`MAX_BUFFERED`] (buffers may have
//! twice the capacity they fill).

use std::collections::HashMap;
use std::net::IpAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Bytes of unfinished input all accepted connections may hold together beyond their own
/// allowances.
pub const MAX_BUFFERED: usize = 24 << 20;
/// Bytes of unfinished input each accepted connection may hold of its own.
pub const ALLOWANCE: usize = 128 * 1024;
/// A holder of pool bytes that received nothing for this long is stalled.
pub const STALL: Duration = Duration::from_secs(1);
/// A connection past its first frame may be evicted for a newcomer once silent this long.
pub const EVICT_IDLE: Duration = Duration::from_secs(5);

/// Pool bytes currently held.
static BUFFERED: AtomicUsize = AtomicUsize::new(0);
/// Accepted connections by id.
static REGISTRY: LazyLock<Mutex<HashMap<u64, Arc<Entry>>>> = LazyLock::new(Mutex::default);
/// Next connection id.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
/// Connections evicted so far.
static EVICTIONS: AtomicU64 = AtomicU64::new(0);
/// The time base of `last_input_ns`.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

fn now_ns() -> u64 {
    EPOCH.elapsed().as_nanos() as u64
}

fn registry() -> MutexGuard<'static, HashMap<u64, Arc<Entry>>> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Pool bytes held by all readers (for status and tests).
pub fn buffered_bytes() -> usize {
    BUFFERED.load(Ordering::Relaxed)
}

/// Connections evicted so far (for memory or for a slot).
pub fn evictions() -> u64 {
    EVICTIONS.load(Ordering::Relaxed)
}

/// Reserves `n` pool bytes if they are free.
pub fn reserve(n: usize) -> bool {
    BUFFERED
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| {
            (b + n <= MAX_BUFFERED).then_some(b + n)
        })
        .is_ok()
}

/// Gives `n` pool bytes back.
pub fn release(n: usize) {
    BUFFERED.fetch_sub(n, Ordering::AcqRel);
}

/// What the registry knows of one accepted connection.
#[derive(Debug)]
struct Entry {
    fd: RawFd,
    peer: Option<IpAddr>,
    held: AtomicUsize,
    last_input_ns: AtomicU64,
    waiting: AtomicBool,
    greeted: AtomicBool,
    reason: Mutex<Option<String>>,
}

impl Entry {
    fn idle_ns(&self, now: u64) -> u64 {
        now.saturating_sub(self.last_input_ns.load(Ordering::Acquire))
    }

    fn evicted(&self) -> bool {
        self.reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }
}

/// A connection's place in the registry; leaves it when dropped (before the socket closes).
#[derive(Debug)]
pub struct Registration {
    id: u64,
    entry: Arc<Entry>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        registry().remove(&self.id);
    }
}

impl Registration {
    /// Registers the accepted connection on descriptor `fd` from `peer`.
    pub fn join(fd: RawFd, peer: Option<IpAddr>) -> Self {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let entry = Arc::new(Entry {
            fd,
            peer,
            held: AtomicUsize::new(0),
            last_input_ns: AtomicU64::new(now_ns()),
            waiting: AtomicBool::new(false),
            greeted: AtomicBool::new(false),
            reason: Mutex::new(None),
        });
        registry().insert(id, entry.clone());
        Self { id, entry }
    }

    /// Notes that bytes arrived now.
    pub fn touch(&self) {
        self.entry.last_input_ns.store(now_ns(), Ordering::Release);
    }

    /// Notes the pool bytes this connection holds for unfinished input.
    pub fn set_held(&self, bytes: usize) {
        self.entry.held.store(bytes, Ordering::Release);
    }

    /// Notes whether this connection is waiting for pool room (and is then not stalled).
    pub fn set_waiting(&self, waiting: bool) {
        self.entry.waiting.store(waiting, Ordering::Release);
    }

    /// Notes that the connection's first frame (Hello or request) was accepted.
    pub fn greet(&self) {
        self.entry.greeted.store(true, Ordering::Release);
    }

    /// Why this connection was evicted, if it was.
    pub fn evicted(&self) -> Option<String> {
        self.entry
            .reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Evicts stalled holders of pool bytes until about `need` bytes are on their way back
    /// (see the module docs).
    pub fn evict_stalled(&self, need: usize) {
        let now = now_ns();
        let stall = STALL.as_nanos() as u64;
        let reg = registry();
        let mut per_peer: HashMap<Option<IpAddr>, usize> = HashMap::new();
        for e in reg.values() {
            *per_peer.entry(e.peer).or_default() += e.held.load(Ordering::Acquire);
        }
        let mut stalled: Vec<(usize, usize, u64, &Arc<Entry>)> = reg
            .iter()
            .filter(|(id, e)| **id != self.id && !e.evicted())
            .map(|(_, e)| e)
            .filter(|e| e.held.load(Ordering::Acquire) > 0 && !e.waiting.load(Ordering::Acquire))
            .filter(|e| e.idle_ns(now) >= stall)
            .map(|e| {
                (
                    per_peer[&e.peer],
                    e.held.load(Ordering::Acquire),
                    e.idle_ns(now),
                    e,
                )
            })
            .collect();
        stalled.sort_by_key(|s| std::cmp::Reverse((s.0, s.1, s.2)));
        let mut freed = 0;
        for (_, bytes, idle, e) in stalled {
            if freed >= need {
                break;
            }
            freed += bytes;
            evict(
                e,
                format!(
                    "evicted: held {bytes} bytes of an unfinished frame without progress for \
                     {:?} while others waited for memory",
                    Duration::from_nanos(idle)
                ),
            );
        }
    }
}

/// Evicts one accepted connection to make room for a newcomer at the connection cap (see the
/// module docs). False if none may be evicted.
pub fn evict_for_slot() -> bool {
    let now = now_ns();
    let idle_min = EVICT_IDLE.as_nanos() as u64;
    let reg = registry();
    let live: Vec<&Arc<Entry>> = reg.values().filter(|e| !e.evicted()).collect();
    let mut per_peer: HashMap<Option<IpAddr>, usize> = HashMap::new();
    for e in &live {
        *per_peer.entry(e.peer).or_default() += 1;
    }
    let greeted = |e: &Entry| e.greeted.load(Ordering::Acquire);
    let victim = live
        .iter()
        .filter(|e| !greeted(e) || e.idle_ns(now) >= idle_min)
        .max_by_key(|e| (!greeted(e), per_peer[&e.peer], e.idle_ns(now)));
    let Some(v) = victim else {
        return false;
    };
    let why = if greeted(v) {
        "evicted: the connection cap was reached and this connection was the idlest"
    } else {
        "evicted: the connection cap was reached and this connection had sent no first frame"
    };
    evict(v, why.to_owned());
    true
}

/// Marks `e` evicted and shuts its socket down. Called with the registry locked, so the
/// descriptor still belongs to the connection (it leaves the registry before it closes).
fn evict(e: &Entry, reason: String) {
    *e.reason.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason);
    // SAFETY: shutdown on a descriptor that is open (see above); it only changes the state
    // of that socket.
    unsafe { libc::shutdown(e.fd, libc::SHUT_RDWR) };
    EVICTIONS.fetch_add(1, Ordering::Relaxed);
}
