//! The p5 runtime: the library linked into instrumented programs — directly from Rust, or
//! from C and C++ through the C ABI in `include/p5.h` (`libp5_runtime.a` / `.so`).
//!
//! A sensor event costs about one timestamp read: the thread's ring pointer comes from a
//! fast thread-local, the raw TSC (or CLOCK_MONOTONIC) is stored with the sensor id into a
//! 16-byte slot of the thread's single-producer ring, and the head is published. Everything
//! else happens on one background *flusher* thread: draining the rings, converting ticks to
//! nanoseconds since the process start, encoding `p5_wire` frames, and shipping them to
//! `p5-logserver` — or, while it is away, to a spool file that is replayed later.
//!
//! Invariants: the application never blocks on the runtime (a full ring drops and counts,
//! an absent server spools); no panic crosses the C ABI; no allocation per event (only the
//! first event of a thread allocates its ring).
//!
//! ```no_run
//! p5_runtime::init();
//! {
//!     let _s = p5_runtime::scope(0x1234); // enter now, exit when dropped
//!     p5_runtime::counter(0x99, 42);
//! }
//! p5_runtime::flush();
//! ```
//!
//! Module map: [`clock`] (ticks and their conversion), [`record`] and [`ring`] (slots and
//! the per-thread queue), `sensor` (the hot path), [`site`] (C/C++ scope call sites and
//! their adaptive throttling), `registry` (thread registration),
//! `process` (life cycle: init, exit, fork), `flusher` (draining and framing), `outbox` and [`pings`] (when to ping),
//! `conn` and `spool` (delivery and durability), [`fdtable`] (the runtime threads' own
//! descriptor table), `comm` and [`net`] (communication events), [`unnamed`] (names for unnamed unix sockets),
//! [`mod@describe`] (the instrumented files' sensor tables), [`ffi`] (the C ABI), [`interpose`] (for `libp5_preload.so`), [`config`], [`identity`], [`mod@stats`].
//! Environment variables are listed in [`config`].

pub mod clock;
mod comm;
pub mod config;
mod conn;
pub mod datagram_pings;
pub mod describe;
pub mod fdtable;
pub mod ffi;
mod flusher;
pub mod identity;
pub mod interpose;
pub mod net;
mod outbox;
pub mod pings;
mod process;
pub mod record;
mod registry;
pub mod ring;
mod sensor;
pub mod site;
pub mod spool;
pub mod stats;
pub mod unnamed;
mod waker;

pub use config::{Config, Mode};
pub use describe::describe;
pub use p5_wire::{CommOp, SensorId};
pub use stats::Stats;

use p5_wire::RuntimeKind;
use record::{Kind, RawEndpoint, Record};
use std::net::SocketAddr;

/// Initialises the runtime from the environment (optional: the first event does it too).
/// Returns whether sensors record. Idempotent.
pub fn init() -> bool {
    process::get_or_init(RuntimeKind::Rust, None).is_some()
}

/// Initialises the runtime with an explicit configuration instead of the environment. The
/// first initialisation wins: if the runtime was already configured, `config` is ignored.
pub fn init_with(config: Config) -> bool {
    process::get_or_init(RuntimeKind::Rust, Some(config)).is_some()
}

/// Records entering the scope of sensor `id`.
#[inline(always)]
pub fn enter(id: SensorId) {
    sensor::emit(Kind::Enter, id, RuntimeKind::Rust);
}

/// Records leaving the scope of sensor `id`.
#[inline(always)]
pub fn exit(id: SensorId) {
    sensor::emit(Kind::Exit, id, RuntimeKind::Rust);
}

/// Records an instant.
#[inline(always)]
pub fn mark(id: SensorId) {
    sensor::emit(Kind::Mark, id, RuntimeKind::Rust);
}

/// Records a counter value.
#[inline]
pub fn counter(id: SensorId, value: i64) {
    counter_as(id, value, RuntimeKind::Rust);
}

pub(crate) fn counter_as(id: SensorId, value: i64, origin: RuntimeKind) {
    sensor::emit_record(origin, |ring| Record::counter(ring.now_rel(), id, value));
}

/// A scope guard: [`scope`] records the enter, dropping the guard (also while unwinding)
/// records the exit.
#[derive(Debug)]
#[must_use = "the scope ends when this guard is dropped"]
pub struct Scope {
    id: SensorId,
}

impl Drop for Scope {
    #[inline(always)]
    fn drop(&mut self) {
        exit(self.id);
    }
}

/// Enters sensor `id`'s scope until the returned guard is dropped.
#[inline(always)]
pub fn scope(id: SensorId) -> Scope {
    enter(id);
    Scope { id }
}

/// Drains all rings now and waits until everything recorded before the call is acknowledged
/// by the log server or written to the spool (at most `P5_EXIT_TIMEOUT_MS` plus a margin).
/// Returns whether that completed. Does nothing (and returns true) if the runtime never ran.
pub fn flush() -> bool {
    process::flush()
}

/// Flushes, waits for acknowledgements (bounded), spools the rest, says Goodbye and stops
/// recording for good. The same sequence runs automatically at process exit.
pub fn shutdown() {
    process::finish();
}

/// True if sensors record (or will, once the runtime initialises itself).
#[inline]
pub fn is_enabled() -> bool {
    sensor::ACTIVE.load(std::sync::atomic::Ordering::Relaxed) && process::would_record()
}

/// Pauses (`false`) or resumes (`true`) recording. A paused sensor costs one load and a
/// branch. Cannot re-enable a runtime disabled by `P5_DISABLE` or shut down.
pub fn set_enabled(on: bool) {
    process::set_active(on);
}

/// The runtime's counters (zero before initialisation).
pub fn stats() -> Stats {
    process::latest().map_or_else(Stats::default, |p| p.counters.snapshot())
}

/// Raw ticks of the runtime's clock: take them before a communication call and pass them
/// to [`record_comm`] as its start.
#[inline]
pub fn ticks() -> u64 {
    if !process::ready() {
        init();
    }
    clock::ticks()
}

/// Records a communication call that started at `start_ticks` (from [`ticks`]) and ends
/// now: `result` is the byte count (or descriptor, for accept) or −errno; `peer` is the
/// remote address for datagram and connect/accept calls.
pub fn record_comm(
    sensor: SensorId,
    op: CommOp,
    fd: i64,
    start_ticks: u64,
    result: i64,
    peer: Option<&SocketAddr>,
) {
    comm::record(
        RuntimeKind::Rust,
        sensor,
        op,
        fd,
        start_ticks,
        result,
        &RawEndpoint::from_opt(peer),
    );
}

/// Records the endpoints of socket `fd` (a `Socket` event) unless already recorded since it
/// was opened (`force` records again, e.g. after a connect).
pub fn record_socket(sensor: SensorId, fd: i32, force: bool) {
    comm::note_socket(RuntimeKind::Rust, sensor, fd, force, &RawEndpoint::NONE);
}
