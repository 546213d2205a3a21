//! Counters describing what the runtime did, for tests, tools and curious users.
//!
//! Nothing here is touched on the hot path: events are counted by the flusher when it drains
//! them, and drops are summed from the rings' own counters.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of the runtime's counters (all cumulative since this process's start).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Events drained from the thread rings (in discard mode: slots).
    pub events: u64,
    /// Events lost because a thread's ring was full.
    pub dropped: u64,
    /// Times a thread found its ring full and waited for the flusher (`P5_FULL=grace|wait`).
    pub waits: u64,
    /// The time those waits took in all, ns.
    pub held_ns: u64,
    /// Streams (threads) opened.
    pub streams: u64,
    /// Data frames built (StreamOpen, Events, StreamClose).
    pub frames: u64,
    /// Data frame transmissions, resends included.
    pub frames_sent: u64,
    /// Data frames the log server acknowledged as durable.
    pub frames_acked: u64,
    /// Data frames written to the spool file.
    pub frames_spooled: u64,
    /// Data frames lost (the spool could not be written).
    pub frames_lost: u64,
    /// Bytes written to log-server connections.
    pub bytes_sent: u64,
    /// Successful log-server handshakes.
    pub connects: u64,
    /// Connections lost or refused after the handshake.
    pub disconnects: u64,
    /// True (1) while a spool file holds unacknowledged data.
    pub spool_active: u64,
}

/// The live counters behind [`Stats`].
#[derive(Debug, Default)]
pub struct Counters {
    pub(crate) events: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) waits: AtomicU64,
    pub(crate) held_ns: AtomicU64,
    pub(crate) streams: AtomicU64,
    pub(crate) frames: AtomicU64,
    pub(crate) frames_sent: AtomicU64,
    pub(crate) frames_acked: AtomicU64,
    pub(crate) frames_spooled: AtomicU64,
    pub(crate) frames_lost: AtomicU64,
    pub(crate) bytes_sent: AtomicU64,
    pub(crate) connects: AtomicU64,
    pub(crate) disconnects: AtomicU64,
    pub(crate) spool_active: AtomicU64,
}

/// Adds `n` to a counter.
#[inline]
pub fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

impl Counters {
    /// Reads every counter.
    pub fn snapshot(&self) -> Stats {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Stats {
            events: r(&self.events),
            dropped: r(&self.dropped),
            waits: r(&self.waits),
            held_ns: r(&self.held_ns),
            streams: r(&self.streams),
            frames: r(&self.frames),
            frames_sent: r(&self.frames_sent),
            frames_acked: r(&self.frames_acked),
            frames_spooled: r(&self.frames_spooled),
            frames_lost: r(&self.frames_lost),
            bytes_sent: r(&self.bytes_sent),
            connects: r(&self.connects),
            disconnects: r(&self.disconnects),
            spool_active: r(&self.spool_active),
        }
    }
}
