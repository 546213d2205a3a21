//! The hot path: recording an event from an application thread.
//!
//! ```text
//! enter(id):  load ACTIVE (relaxed) ─ off ─▶ return                       (disabled: ~1 ns)
//!             load TLS ring pointer ─ none ─▶ slow path: init, register
//!             read TSC; store 2 words into the ring; store head (Release)
//! ```
//!
//! The thread's ring pointer lives in a `const`-initialised `thread_local!` without a
//! destructor, which compiles to a plain TLS access. A *separate* thread-local guard with a
//! destructor, registered on the slow path, marks the ring closed at thread exit and swaps
//! the pointer for a sentinel so any later event (from another thread-local's destructor)
//! is ignored instead of touching a ring the flusher is about to free.
//!
//! `ACTIVE` is exported to C as `p5_active` so the header's inline helpers can skip the call
//! when recording is off.

use crate::process;
use crate::record::{Kind, Record};
use crate::ring::Ring;
use p5_wire::RuntimeKind;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

/// Global on/off switch, read with one relaxed load per event.
#[unsafe(export_name = "p5_active")]
pub static ACTIVE: AtomicBool = AtomicBool::new(true);

/// Sentinel ring pointer: this thread records nothing (exiting, or the flusher itself).
const CLOSED: *const Ring = std::ptr::without_provenance(1);

thread_local! {
    static CURRENT: Cell<*const Ring> = const { Cell::new(std::ptr::null()) };
    static EXIT_GUARD: ExitGuard = const { ExitGuard };
}

/// Closes the thread's ring when the thread exits.
struct ExitGuard;

impl Drop for ExitGuard {
    fn drop(&mut self) {
        let r = CURRENT.replace(CLOSED);
        set_c_ring(CLOSED);
        if is_ring(r) {
            // SAFETY: a registered ring stays alive until it has been closed and drained.
            unsafe { (*r).close() };
        }
    }
}

#[inline(always)]
fn is_ring(r: *const Ring) -> bool {
    r.addr() > CLOSED.addr()
}

/// Records a one-slot event (enter, exit, mark).
#[inline(always)]
pub fn emit(kind: Kind, sensor: u64, origin: RuntimeKind) {
    if !ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    let r = CURRENT.get();
    if !is_ring(r) {
        return emit_slow(kind, sensor, origin);
    }
    // SAFETY: the pointer is this thread's live ring and we are its producer.
    unsafe { (*r).push_simple(kind, sensor) }
}

/// [`emit`] for the C ABI: the fast path cannot panic (atomic loads, a `const` thread-local
/// without destructor, two stores; its out-of-line helpers only read clocks and write an
/// eventfd), and the slow path — initialisation and registration, which allocate and read
/// files — runs under `catch_unwind`, so no panic reaches C. Keeping `catch_unwind` off the
/// fast path keeps it a frameless straight line.
#[inline(always)]
pub fn emit_guarded(kind: Kind, sensor: u64, origin: RuntimeKind) {
    if !ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    let r = CURRENT.get();
    if !is_ring(r) {
        return emit_slow_guarded(kind, sensor, origin);
    }
    // SAFETY: the pointer is this thread's live ring and we are its producer.
    unsafe { (*r).push_simple(kind, sensor) }
}

#[cold]
#[inline(never)]
fn emit_slow_guarded(kind: Kind, sensor: u64, origin: RuntimeKind) {
    let _ = std::panic::catch_unwind(|| emit_slow(kind, sensor, origin));
}

#[cold]
#[inline(never)]
fn emit_slow(kind: Kind, sensor: u64, origin: RuntimeKind) {
    if let Some(r) = register(origin) {
        // SAFETY: as in `emit`.
        unsafe { (*r).push_simple(kind, sensor) }
    }
}

/// Records a one-slot event stamped with raw ticks `t` (the C guards' recorded calls, the
/// ring slow path and long throttled calls). The slow path (registration) runs under
/// `catch_unwind`.
#[inline(always)]
pub fn emit_raw(kind: Kind, t: u64, sensor: u64) {
    if !ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    let r = CURRENT.get();
    if !is_ring(r) {
        return emit_raw_slow(kind, t, sensor);
    }
    // SAFETY: the pointer is this thread's live ring and we are its producer.
    unsafe { (*r).push_raw(kind, t, sensor) }
}

#[cold]
#[inline(never)]
fn emit_raw_slow(kind: Kind, t: u64, sensor: u64) {
    if let Ok(Some(r)) = std::panic::catch_unwind(|| register(RuntimeKind::C)) {
        // SAFETY: as in `emit`.
        unsafe { (*r).push_raw(kind, t, sensor) }
    }
}

unsafe extern "C" {
    /// Sets the C thread-local `p5_tls_ring` (`csrc/tls.c`).
    fn p5_tls_ring_set(ring: *const std::ffi::c_void);
}

/// Points this thread's C-visible ring pointer at `r` (null: none), for `p5.h`'s inline
/// guards. Only TSC rings are shown to C: the guards stamp with `rdtsc` themselves.
fn set_c_ring(r: *const Ring) {
    let hot = if is_ring(r) {
        // SAFETY: a live ring.
        let ring = unsafe { &*r };
        if ring.uses_tsc() && cfg!(target_arch = "x86_64") {
            ring.hot_ptr()
        } else {
            std::ptr::null()
        }
    } else {
        std::ptr::null()
    };
    // SAFETY: plain store into this thread's own thread-local.
    unsafe { p5_tls_ring_set(hot) };
}

/// Records a multi-slot record built from the ring (for its clock and origin).
#[inline]
pub fn emit_record(origin: RuntimeKind, build: impl FnOnce(&Ring) -> Record) {
    if !ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    let mut r = CURRENT.get();
    if !is_ring(r) {
        match register(origin) {
            Some(p) => r = p,
            None => return,
        }
    }
    // SAFETY: as in `emit`.
    let ring = unsafe { &*r };
    let rec = build(ring);
    ring.push(rec.as_slots());
}

/// Gives the calling thread a ring: initialises the runtime if needed, registers the exit
/// guard, allocates and registers the ring.
///
/// `errno` is preserved: this may run between a failing call and the caller's look at
/// `errno` (an instrumented scope opening in an error branch).
#[cold]
fn register(origin: RuntimeKind) -> Option<*const Ring> {
    if CURRENT.get() == CLOSED {
        return None;
    }
    let saved = crate::comm::errno();
    let r = register_inner(origin);
    crate::comm::set_errno(saved);
    r
}

fn register_inner(origin: RuntimeKind) -> Option<*const Ring> {
    let p = process::get_or_init(origin, None)?;
    if !ACTIVE.load(Ordering::Relaxed) {
        return None;
    }
    if EXIT_GUARD.try_with(|_| ()).is_err() {
        CURRENT.set(CLOSED);
        return None;
    }
    let ring = p.registry.register(p)?.as_ptr() as *const Ring;
    CURRENT.set(ring);
    set_c_ring(ring);
    Some(ring)
}

/// Marks the calling thread as never recording (the flusher).
pub fn mark_flusher_thread() {
    CURRENT.set(CLOSED);
    ON_FLUSHER.set(true);
}

thread_local! {
    static ON_FLUSHER: Cell<bool> = const { Cell::new(false) };
}

/// True on the flusher thread.
pub fn on_flusher_thread() -> bool {
    ON_FLUSHER.get()
}

/// Forgets the calling thread's ring without touching it (atfork child: the ring is the
/// parent's). The thread registers a new one with the child's incarnation on its next event.
pub fn forget_thread_ring() {
    if is_ring(CURRENT.get()) {
        CURRENT.set(std::ptr::null());
        set_c_ring(std::ptr::null());
    }
}
