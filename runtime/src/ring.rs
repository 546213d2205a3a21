//! The per-thread event ring: a single-producer / single-consumer queue of 16-byte slots.
//!
//! The owning application thread is the only producer; the flusher is the only consumer.
//! Producer and consumer state live on separate cache lines. The producer publishes a record
//! by storing `head` with `Release` after writing its slots; the consumer frees slots by
//! storing `tail` with `Release` after reading them.
//!
//! The hot path compares `head + n` with a producer-private `limit` and nothing else: `limit`
//! is where the producer must next look at `tail`, which is either "half full" (so it can wake
//! the flusher early through its doorbell) or "full". Only that slow path loads the consumer's line. When
//! the ring is full the producer rings the doorbell and yields the CPU to the flusher while it
//! frees room ([`Full::Grace`], the default: on a machine whose cores are all busy the flusher
//! can be starved); when the flusher frees nothing for 50 ms it drops the record and counts it
//! in `dropped`, which the flusher ships in-band in every `Events` frame. With [`Full::Drop`]
//! (`P5_FULL=drop`) the application never waits; with [`Full::Wait`] (`P5_FULL=wait`) it
//! yields until the flusher has freed room (or is gone, when it drops after all).
//!
//! No false sharing: the consumer keeps its own copies of the slot pointer and mask on its
//! line, so reading slots never touches the producer's line; it reads the producer's `head`
//! once per drain (batched publication on the consumer side) and writes `tail` once per frame.
//! The drop counter has a single writer (the producer) and is bumped with a plain
//! load and store rather than a locked read-modify-write.
//!
//! The ring memory is a mapping of its own (`ring::pages`), so pages are faulted in only as the
//! ring fills and go back to the kernel when the ring is freed: an idle or short-lived thread
//! costs a page or two even with the default 1 Mi slots (16 MiB).

use crate::record::{Kind, Slot, head_word};
use crate::waker::Waker;
use std::cell::UnsafeCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod pages;

/// How long a [`Full::Grace`] ring waits for a flusher that frees nothing before it drops,
/// by default. A starved flusher on a busy 2-core machine can go 10–20 ms without a turn.
pub const GRACE: Duration = Duration::from_millis(50);
/// How long a ring whose grace ran out drops at once.
pub const GRACE_PAUSE: Duration = Duration::from_secs(1);

/// Everything the hot path touches, on one cache line: the producer's cursor and limit, and
/// the immutable slot pointer, mask, tick base and clock choice.
#[repr(C, align(64))]
struct Producer {
    head: AtomicU64,
    limit: UnsafeCell<u64>,
    slots: NonNull<Slot>,
    mask: u64,
    /// Raw ticks at the process origin (slots store ticks relative to it).
    base: u64,
    /// Whether ticks come from the TSC.
    tsc: bool,
    /// What a full ring does.
    full: Full,
    dropped: AtomicU64,
    /// Times the producer waited for the flusher on a full ring.
    waits: AtomicU64,
    /// The time it waited in all, ns.
    held_ns: AtomicU64,
    /// [`Full::Grace`]: no grace before this instant (set when a grace wait ran out).
    grace_off_until: UnsafeCell<Option<Instant>>,
}

/// Consumer-owned fields (another cache line), with the consumer's copies of the immutable
/// slot pointer and mask.
#[repr(C, align(64))]
struct Consumer {
    tail: AtomicU64,
    closed: AtomicBool,
    close_ticks: AtomicU64,
    slots: NonNull<Slot>,
    mask: u64,
}

/// What the producer does when its ring is full (`P5_FULL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// Drop the record and count it: the application never waits.
    Drop,
    /// The default ([`GRACE`]): wake the flusher and yield the CPU to it while it frees
    /// room, giving up (drop and count) once it has freed nothing for this long. On a
    /// machine whose cores are all busy the flusher can be starved while the producer runs;
    /// yielding lets it catch up instead of losing a stretch of trace, and the time waited is
    /// counted and reported. A grace given up (the flusher is blocked, not starved) is not
    /// tried again for [`GRACE_PAUSE`], so a stuck consumer costs the application at most one
    /// stall per pause.
    Grace(Duration),
    /// Wake the flusher and wait for room: a complete trace at the price of stalls. Drops
    /// only once the flusher is gone (process exit).
    Wait,
}

impl Default for Full {
    fn default() -> Self {
        Full::Grace(GRACE)
    }
}

/// What a stream is about, captured on the producing thread at registration.
#[derive(Debug, Clone, Default)]
pub struct StreamMeta {
    /// Stream id within the process.
    pub stream: u32,
    /// OS thread id.
    pub tid: u64,
    /// Thread name.
    pub name: String,
}

/// One thread's ring.
#[repr(C)]
pub struct Ring {
    p: Producer,
    c: Consumer,
    cap: u64,
    waker: &'static Waker,
    /// Stream description.
    pub meta: StreamMeta,
}

// SAFETY: the UnsafeCell `limit` is touched only by the single producer thread, the slots
// only under the head/tail protocol described in the module docs; everything else is atomic
// or immutable after construction.
unsafe impl Send for Ring {}
// SAFETY: as above.
unsafe impl Sync for Ring {}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("meta", &self.meta)
            .field("cap", &self.cap)
            .field("head", &self.p.head.load(Ordering::Relaxed))
            .field("tail", &self.c.tail.load(Ordering::Relaxed))
            .field("dropped", &self.dropped())
            .finish()
    }
}

impl Ring {
    /// A ring of `slots` slots (rounded to a power of two, at least 64). Returns `None` if
    /// the allocation fails.
    pub fn new(
        slots: usize,
        base: u64,
        tsc: bool,
        waker: &'static Waker,
        meta: StreamMeta,
    ) -> Option<Self> {
        Self::with_full(slots, base, tsc, Full::default(), waker, meta)
    }

    /// [`Ring::new`] with a choice of what a full ring does.
    pub fn with_full(
        slots: usize,
        base: u64,
        tsc: bool,
        full: Full,
        waker: &'static Waker,
        meta: StreamMeta,
    ) -> Option<Self> {
        let cap = slots.clamp(64, 1 << 28).next_power_of_two();
        let ptr = pages::map(cap)?;
        Some(Ring {
            p: Producer {
                head: AtomicU64::new(0),
                limit: UnsafeCell::new(cap as u64 / 2),
                slots: ptr,
                mask: cap as u64 - 1,
                base,
                tsc,
                full,
                dropped: AtomicU64::new(0),
                waits: AtomicU64::new(0),
                held_ns: AtomicU64::new(0),
                grace_off_until: UnsafeCell::new(None),
            },
            c: Consumer {
                tail: AtomicU64::new(0),
                closed: AtomicBool::new(false),
                close_ticks: AtomicU64::new(0),
                slots: ptr,
                mask: cap as u64 - 1,
            },
            cap: cap as u64,
            waker,
            meta,
        })
    }

    /// Capacity in slots.
    pub fn capacity(&self) -> u64 {
        self.cap
    }

    /// Ticks since the origin, now.
    #[inline(always)]
    pub fn now_rel(&self) -> u64 {
        crate::clock::now(self.p.tsc).wrapping_sub(self.p.base)
    }

    /// Converts raw ticks into ticks since the origin.
    #[inline]
    pub fn rel(&self, raw: u64) -> u64 {
        raw.wrapping_sub(self.p.base)
    }

    // ----- producer side (the owning thread only) -----

    /// Records a one-slot event stamped now. Producer only.
    ///
    /// Every call on this path is in tail position, so the TSC fast path compiles to a
    /// straight line without a stack frame.
    #[inline(always)]
    pub fn push_simple(&self, kind: Kind, sensor: u64) {
        if !self.p.tsc {
            return self.push_simple_mono(kind, sensor);
        }
        let t = crate::clock::rdtsc().wrapping_sub(self.p.base);
        self.push_at(kind, t, sensor);
    }

    /// Records a one-slot event stamped with raw clock ticks `t`. Producer only.
    #[inline]
    pub fn push_raw(&self, kind: Kind, t: u64, sensor: u64) {
        self.push_at(kind, t.wrapping_sub(self.p.base), sensor);
    }

    /// True if this ring stamps with the TSC (then `p5.h`'s inline guards may write it).
    pub fn uses_tsc(&self) -> bool {
        self.p.tsc
    }

    /// The producer half, as `p5.h`'s `struct p5_ring_hot` sees it.
    pub fn hot_ptr(&self) -> *const std::ffi::c_void {
        &self.p as *const Producer as *const std::ffi::c_void
    }

    #[inline(never)]
    fn push_simple_mono(&self, kind: Kind, sensor: u64) {
        self.push_at(kind, self.now_rel(), sensor);
    }

    #[inline(always)]
    fn push_at(&self, kind: Kind, t: u64, sensor: u64) {
        let head = self.p.head.load(Ordering::Relaxed);
        // SAFETY: `limit` is producer-private and we are the producer.
        if head >= unsafe { *self.p.limit.get() } {
            return self.push_at_slow(kind, t, sensor);
        }
        // SAFETY: `limit` guarantees slot `head` is free (head < tail + cap).
        unsafe { self.write(head, Slot([head_word(kind, t), sensor])) };
        self.p.head.store(head + 1, Ordering::Release);
    }

    #[cold]
    #[inline(never)]
    fn push_at_slow(&self, kind: Kind, t: u64, sensor: u64) {
        let head = self.p.head.load(Ordering::Relaxed);
        if self.reserve_slow(head, 1) {
            // SAFETY: `reserve_slow` said slot `head` is free.
            unsafe { self.write(head, Slot([head_word(kind, t), sensor])) };
            self.p.head.store(head + 1, Ordering::Release);
        }
    }

    /// Writes slot `idx`.
    ///
    /// # Safety
    /// Producer only, and the slot must be free (`idx < tail + cap`).
    #[inline(always)]
    unsafe fn write(&self, idx: u64, s: Slot) {
        // SAFETY: per the contract the consumer is not reading this slot.
        unsafe {
            self.p
                .slots
                .as_ptr()
                .add((idx & self.p.mask) as usize)
                .write(s)
        }
    }

    /// Records a multi-slot record. Producer only.
    pub fn push(&self, slots: &[Slot]) {
        let n = slots.len() as u64;
        if n == 0 {
            return;
        }
        let head = self.p.head.load(Ordering::Relaxed);
        // SAFETY: producer-private field.
        if head + n > unsafe { *self.p.limit.get() } && !self.reserve_slow(head, n) {
            return;
        }
        for (i, s) in slots.iter().enumerate() {
            // SAFETY: slots head..head+n are free, as above.
            unsafe { self.write(head + i as u64, *s) };
        }
        self.p.head.store(head + n, Ordering::Release);
    }

    /// Looks at the consumer's tail: wakes the flusher past half full, drops when full, and
    /// sets the next `limit`. Returns whether `n` slots at `head` may be written.
    #[cold]
    #[inline(never)]
    fn reserve_slow(&self, head: u64, n: u64) -> bool {
        let mut tail = self.c.tail.load(Ordering::Acquire);
        let half = self.cap / 2;
        if head.wrapping_sub(tail) + n > half {
            self.waker.wake();
        }
        if head.wrapping_sub(tail) + n > self.cap {
            match self.p.full {
                Full::Wait => tail = self.held(head, n, None),
                Full::Grace(d) => tail = self.grace(head, n, tail, d),
                Full::Drop => {}
            }
        }
        let used = head.wrapping_sub(tail);
        let limit = if used + n > self.cap {
            // Single writer: a plain load and store, no locked instruction.
            let d = self.p.dropped.load(Ordering::Relaxed);
            self.p.dropped.store(d + 1, Ordering::Relaxed);
            head
        } else if used + n <= half {
            tail + half
        } else {
            // Above half: look again every eighth of the ring so the flusher is re-woken if
            // it falls behind.
            (tail + self.cap).min(head + n + self.cap / 8)
        };
        // SAFETY: producer-private field.
        unsafe { *self.p.limit.get() = limit };
        used + n <= self.cap
    }

    /// [`Full::Grace`]: waits for room while the flusher makes progress (gives up after
    /// `stall` without any), unless a grace gave up less than [`GRACE_PAUSE`] ago; returns
    /// the last tail seen.
    fn grace(&self, head: u64, n: u64, tail: u64, stall: Duration) -> u64 {
        // SAFETY: producer-private field.
        let off = unsafe { &mut *self.p.grace_off_until.get() };
        if off.is_some_and(|until| Instant::now() < until) {
            return tail;
        }
        let tail = self.held(head, n, Some(stall));
        *off = (head.wrapping_sub(tail) + n > self.cap).then(|| Instant::now() + GRACE_PAUSE);
        tail
    }

    /// [`Ring::wait_for_room`], counted in `waits` and `held_ns`.
    fn held(&self, head: u64, n: u64, stall: Option<Duration>) -> u64 {
        let start = Instant::now();
        let tail = self.wait_for_room(head, n, stall);
        let ns = start.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        // Single writer: plain loads and stores.
        let w = self.p.waits.load(Ordering::Relaxed);
        self.p.waits.store(w + 1, Ordering::Relaxed);
        let h = self.p.held_ns.load(Ordering::Relaxed);
        self.p
            .held_ns
            .store(h.saturating_add(ns), Ordering::Relaxed);
        tail
    }

    /// Rings the doorbell and yields until the flusher freed room for `n` slots, is gone, or
    /// has freed nothing for `stall` (`P5_FULL=wait`: no limit); returns the last tail seen.
    #[cold]
    #[inline(never)]
    fn wait_for_room(&self, head: u64, n: u64, stall: Option<Duration>) -> u64 {
        let mut spins = 0u32;
        let mut seen = self.c.tail.load(Ordering::Acquire);
        let mut progress = Instant::now();
        loop {
            let tail = self.c.tail.load(Ordering::Acquire);
            if head.wrapping_sub(tail) + n <= self.cap || self.waker.consumer_gone() {
                return tail;
            }
            if let Some(stall) = stall.filter(|_| spins >= 64) {
                let now = Instant::now();
                if tail != seen {
                    (seen, progress) = (tail, now);
                } else if now.duration_since(progress) >= stall {
                    return tail;
                }
            }
            self.waker.wake();
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else if spins < 1024 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
    }

    /// Times the producer found the ring full and waited for the flusher ([`Full::Grace`],
    /// [`Full::Wait`]), and the time it waited in all, ns.
    pub fn waits(&self) -> (u64, u64) {
        (
            self.p.waits.load(Ordering::Relaxed),
            self.p.held_ns.load(Ordering::Relaxed),
        )
    }

    /// Marks the stream ended (the thread is exiting). Producer only, after its last event.
    pub fn close(&self) {
        let t = self.now_rel();
        self.c.close_ticks.store(t, Ordering::Relaxed);
        self.c.closed.store(true, Ordering::Release);
        self.waker.wake();
    }

    // ----- consumer side (the flusher only) -----

    /// True once the producer closed the ring; read this *before* [`Ring::published`] so
    /// that the head read afterwards is final.
    pub fn is_closed(&self) -> bool {
        self.c.closed.load(Ordering::Acquire)
    }

    /// Ticks since the origin at which the ring was closed.
    pub fn close_ticks(&self) -> u64 {
        self.c.close_ticks.load(Ordering::Relaxed)
    }

    /// Slots published so far.
    pub fn published(&self) -> u64 {
        self.p.head.load(Ordering::Acquire)
    }

    /// Slots consumed so far.
    pub fn consumed(&self) -> u64 {
        self.c.tail.load(Ordering::Relaxed)
    }

    /// Events lost to a full ring so far (cumulative).
    pub fn dropped(&self) -> u64 {
        self.p.dropped.load(Ordering::Relaxed)
    }

    /// Reads slot `idx`.
    ///
    /// # Safety
    /// Consumer only, with `consumed() <= idx < published()`.
    pub unsafe fn slot(&self, idx: u64) -> Slot {
        // SAFETY: per the contract the producer finished writing this slot (Acquire on head)
        // and will not touch it before we release it.
        unsafe {
            self.c
                .slots
                .as_ptr()
                .add((idx & self.c.mask) as usize)
                .read()
        }
    }

    /// Hints that slot `idx` will be read soon (consumer; a no-op off x86-64). Reading past
    /// the published head is harmless: a prefetch never faults and changes nothing.
    #[inline(always)]
    pub fn prefetch(&self, idx: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            let p = self
                .c
                .slots
                .as_ptr()
                .wrapping_add((idx & self.c.mask) as usize);
            // SAFETY: a prefetch hint has no memory effects; the address lies inside the ring.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    p as *const i8,
                )
            };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = idx;
    }

    /// Frees all slots before `idx`. Consumer only.
    pub fn release(&self, idx: u64) {
        self.c.tail.store(idx, Ordering::Release);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: mapped in `with_full` with this capacity; the ring is being dropped.
        unsafe { pages::unmap(self.p.slots, self.cap as usize) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Decoded, Record, decode};

    fn waker() -> &'static Waker {
        Box::leak(Box::new(Waker::new()))
    }

    fn drain(r: &Ring) -> Vec<Decoded> {
        let end = r.published();
        let mut i = r.consumed();
        let mut out = Vec::new();
        while i < end {
            let first = unsafe { r.slot(i) };
            i += 1;
            let mut next = || {
                (i < end).then(|| {
                    i += 1;
                    unsafe { r.slot(i - 1) }
                })
            };
            out.push(decode(first, &mut next).unwrap());
        }
        r.release(end);
        out
    }

    #[test]
    fn full_ring_drops_and_counts() {
        let r = Ring::with_full(64, 0, false, Full::Drop, waker(), StreamMeta::default()).unwrap();
        for i in 0..100 {
            r.push_simple(Kind::Enter, i);
        }
        assert_eq!(r.published(), 64);
        assert_eq!(r.dropped(), 36);
        let got = drain(&r);
        assert_eq!(got.len(), 64);
        assert!(matches!(got[63], Decoded::Simple { sensor: 63, .. }));
        // Space is back after the consumer released it.
        r.push_simple(Kind::Exit, 1000);
        assert_eq!(r.dropped(), 36);
        assert!(matches!(
            drain(&r)[..],
            [Decoded::Simple {
                kind: Kind::Exit,
                sensor: 1000,
                ..
            }]
        ));
    }

    #[test]
    fn multi_slot_records_wrap_and_interleave() {
        let r = Ring::new(64, 0, false, waker(), StreamMeta::default()).unwrap();
        let mut expect = Vec::new();
        for round in 0..50u64 {
            r.push_simple(Kind::Mark, round);
            r.push(Record::counter(5, round, -(round as i64)).as_slots());
            let got = drain(&r);
            assert_eq!(got.len(), 2);
            expect.push(got);
        }
        assert_eq!(r.dropped(), 0);
        assert_eq!(r.published(), 150);
        assert!(matches!(
            expect[49][1],
            Decoded::Counter {
                t: 5,
                sensor: 49,
                value: -49
            }
        ));
    }

    #[test]
    fn half_full_wakes_flusher_once_per_crossing() {
        let w = waker();
        let r = Ring::new(64, 0, false, w, StreamMeta::default()).unwrap();
        for i in 0..32 {
            r.push_simple(Kind::Enter, i);
        }
        assert!(!w.take(), "woken before half full");
        r.push_simple(Kind::Enter, 32);
        assert!(w.take(), "not woken past half full");
    }

    #[test]
    fn concurrent_producer_consumer_loses_nothing_it_does_not_count() {
        let r: &'static Ring = Box::leak(Box::new(
            Ring::new(256, 0, false, waker(), StreamMeta::default()).unwrap(),
        ));
        const N: u64 = 200_000;
        let prod = std::thread::spawn(move || {
            for i in 0..N {
                if i % 3 == 0 {
                    r.push(Record::counter(i, i, i as i64).as_slots());
                } else {
                    r.push_simple(Kind::Mark, i);
                }
            }
            r.close();
        });
        let mut seen = 0u64;
        let mut last = None;
        loop {
            let closed = r.is_closed();
            for d in drain(r) {
                let s = match d {
                    Decoded::Simple { sensor, .. } => sensor,
                    Decoded::Counter { sensor, value, .. } => {
                        assert_eq!(value as u64, sensor);
                        sensor
                    }
                    other => panic!("unexpected {other:?}"),
                };
                assert!(last.is_none_or(|l| s > l), "out of order");
                last = Some(s);
                seen += 1;
            }
            if closed {
                break;
            }
            std::thread::yield_now();
        }
        prod.join().unwrap();
        assert_eq!(seen + r.dropped(), N);
    }

    /// The default: a full ring yields to a consumer that catches up and loses nothing.
    #[test]
    fn grace_waits_for_a_consumer_that_catches_up() {
        let grace = Full::Grace(Duration::from_secs(60));
        let r: &'static Ring = Box::leak(Box::new(
            Ring::with_full(64, 0, false, grace, waker(), StreamMeta::default()).unwrap(),
        ));
        const N: u64 = 5_000;
        let prod = std::thread::spawn(move || {
            for i in 0..N {
                r.push_simple(Kind::Mark, i);
            }
            r.close();
        });
        let mut seen = 0;
        loop {
            let closed = r.is_closed();
            seen += drain(r).len() as u64;
            if closed {
                break;
            }
            // A slow consumer: the ring fills while it sleeps.
            std::thread::sleep(Duration::from_micros(200));
        }
        prod.join().unwrap();
        assert_eq!((seen, r.dropped()), (N, 0));
        assert!(r.waits().0 > 0, "the ring never filled");
    }

    /// A grace given up (the consumer is alive but frees nothing) drops, and the next full
    /// pushes drop at once instead of waiting again.
    #[test]
    fn a_grace_that_runs_out_is_not_tried_again_at_once() {
        let grace = Full::Grace(Duration::from_millis(1));
        let r = Ring::with_full(64, 0, false, grace, waker(), StreamMeta::default()).unwrap();
        for i in 0..200 {
            r.push_simple(Kind::Enter, i);
        }
        assert_eq!((r.published(), r.dropped(), r.waits().0), (64, 136, 1));
        assert!(r.waits().1 >= 1_000_000, "held {} ns", r.waits().1);
        // The consumer is gone: no grace at all.
        let w = waker();
        w.set_consumer_gone(true);
        let r = Ring::with_full(64, 0, false, Full::default(), w, StreamMeta::default()).unwrap();
        for i in 0..100 {
            r.push_simple(Kind::Enter, i);
        }
        assert_eq!((r.published(), r.dropped()), (64, 36));
    }
}
