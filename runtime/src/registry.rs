//! Thread registration: the slow path that gives a thread its ring.
//!
//! A thread's first event allocates its [`Ring`] (capturing the OS thread id and name for the
//! stream's `StreamOpen`), assigns the next stream id, and hands the ring to the flusher
//! through a short mutex-protected list. Only registration and the flusher's pick-up take the
//! lock; events never do. From then on the flusher owns the ring's consumer side and frees it
//! after the thread closed it and the last slots were drained.

use crate::identity::{gettid, thread_name};
use crate::process::Process;
use crate::ring::{Ring, StreamMeta};
use std::ptr::NonNull;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

/// A ring handed from its thread to the flusher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingPtr(pub NonNull<Ring>);

// SAFETY: a Ring is Sync (see ring.rs); the pointer is only a handle to it.
unsafe impl Send for RingPtr {}

/// Rings registered since the flusher last looked.
#[derive(Debug, Default)]
pub struct Registry {
    fresh: Mutex<Vec<RingPtr>>,
    next_stream: AtomicU32,
}

impl Registry {
    /// Creates and registers the calling thread's ring (`None` if memory ran out).
    pub fn register(&self, p: &'static Process) -> Option<NonNull<Ring>> {
        let tid = gettid();
        let meta = StreamMeta {
            stream: self.next_stream.fetch_add(1, Ordering::Relaxed) + 1,
            tid,
            name: thread_name(),
        };
        let ring = Ring::with_full(
            p.config.ring_slots,
            p.origin.ticks0,
            p.origin.tsc,
            p.config.full,
            &p.waker,
            meta,
        )?;
        let ptr = NonNull::from(Box::leak(Box::new(ring)));
        self.fresh
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(RingPtr(ptr));
        Some(ptr)
    }

    /// Takes the rings registered since the last call (in registration order).
    pub fn take(&self) -> Vec<RingPtr> {
        std::mem::take(&mut *self.fresh.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
