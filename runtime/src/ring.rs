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
//! the ring is full the record is dropped and counted in `dropped`, which the flusher ships
//! in-band in every `Events` frame; the application never waits — unless the ring was made
//! with [`Full::Wait`] (`P5_FULL=wait`), where the producer rings the doorbell and yields until
//! the flusher has freed room (or is gone, when it drops after all).
//!
//! No false sharing: the consumer keeps its own copies of the slot pointer and mask on its
//! line, so reading slots never touches the producer's line; it reads the producer's `head`
//! once per drain (batched publication on the consumer side) and writes `tail` once per frame.
//! The drop counter has a single writer (the producer) and is bumped with a plain
//! load and store rather than a locked read-modify-write.
//!
//! The ring memory comes from a zeroed allocation, so pages are faulted in only as the ring
//! fills: an idle thread costs little even with the default 64 Ki slots (1 MiB).

use crate::record::{Kind, Slot, head_word};
use crate::waker::Waker;
use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::cell::UnsafeCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Full {
    /// Drop the record and count it: the application never waits (the default).
    #[default]
    Drop,
    /// Wake the flusher and wait for room: a complete trace at the price of stalls. Drops
    /// only once the flusher is gone (process exit).
    Wait,
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
        Self::with_full(slots, base, tsc, Full::Drop, waker, meta)
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
        let layout = Layout::array::<Slot>(cap).ok()?;
        // SAFETY: the layout has non-zero size.
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) } as *mut Slot)?;
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
        if head.wrapping_sub(tail) + n > self.cap && self.p.full == Full::Wait {
            tail = self.wait_for_room(head, n);
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

    /// `P5_FULL=wait`: rings the doorbell and yields until the flusher freed room for `n`
    /// slots or is gone; returns the last tail seen.
    #[cold]
    #[inline(never)]
    fn wait_for_room(&self, head: u64, n: u64) -> u64 {
        let mut spins = 0u32;
        loop {
            let tail = self.c.tail.load(Ordering::Acquire);
            if head.wrapping_sub(tail) + n <= self.cap || self.waker.consumer_gone() {
                return tail;
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
        if let Ok(layout) = Layout::array::<Slot>(self.cap as usize) {
            // SAFETY: allocated in `new` with this layout.
            unsafe { dealloc(self.p.slots.as_ptr() as *mut u8, layout) };
        }
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
        let r = Ring::new(64, 0, false, waker(), StreamMeta::default()).unwrap();
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
}
