//! The C ABI (`include/p5.h`): the same sensors as the Rust API plus wrappers for socket
//! calls (`socket`) and for waits in poll/select/epoll (`wait`), for C and C++ programs
//! linking `libp5_runtime.a` or `.so`.
//!
//! Rules every function here follows:
//! - the name starts with `p5_`;
//! - no panic crosses the boundary: bodies run inside `guard` (`catch_unwind`), and the
//!   real libc call of a wrapper happens outside it so its result is never lost; the
//!   enter/exit/mark sensors keep `catch_unwind` on their slow path only (see
//!   `sensor::emit_guarded`) so the fast path stays a frameless straight line;
//! - wrappers return exactly what the libc function returned and leave `errno` as it set it
//!   (recording may make system calls, so `errno` is saved and restored);
//! - the first argument of every wrapper is the call-site sensor id;
//! - initialising through this ABI marks the process as a C runtime in the handshake.

use crate::comm::{self, errno, set_errno};
use crate::record::{Kind, RawEndpoint};
use crate::sensor;
use p5_wire::{CommOp, RuntimeKind};
use std::panic::{AssertUnwindSafe, catch_unwind};

mod socket;
mod wait;
pub use socket::*;
pub use wait::*;

const C: RuntimeKind = RuntimeKind::C;

/// Runs `f`, turning a panic into `default`.
#[inline(always)]
fn guard<R>(default: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(default)
}

/// Counters as seen from C (`struct p5_stats` in the header; same field order as [`crate::Stats`]).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct P5Stats {
    /// See [`crate::Stats`].
    pub events: u64,
    /// See [`crate::Stats`].
    pub dropped: u64,
    /// See [`crate::Stats`].
    pub streams: u64,
    /// See [`crate::Stats`].
    pub frames: u64,
    /// See [`crate::Stats`].
    pub frames_sent: u64,
    /// See [`crate::Stats`].
    pub frames_acked: u64,
    /// See [`crate::Stats`].
    pub frames_spooled: u64,
    /// See [`crate::Stats`].
    pub frames_lost: u64,
}

/// Initialises the runtime (optional: the first event does it too). Returns 1 if recording.
#[unsafe(no_mangle)]
pub extern "C" fn p5_init() -> i32 {
    let e = errno();
    let r = guard(0, || crate::process::get_or_init(C, None).is_some() as i32);
    set_errno(e);
    r
}

/// Registers an instrumented file's sensor table (`p5-instrument` emits the call in a
/// constructor). `table` must be a NUL-terminated string that lives as long as the program
/// (a string literal); a null or non-UTF-8 table is ignored. Safe before `main`: it only
/// stores the pointer.
///
/// # Safety
/// `table` is null or points to a NUL-terminated string that is never freed or changed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_describe(table: *const std::ffi::c_char) {
    if table.is_null() {
        return;
    }
    // SAFETY: the caller passes a static NUL-terminated string (a literal).
    let c: &'static std::ffi::CStr = unsafe { std::ffi::CStr::from_ptr(table) };
    if let Ok(s) = c.to_str() {
        crate::describe::describe(s);
    }
}

/// Records entering `sensor`'s scope.
#[unsafe(no_mangle)]
pub extern "C" fn p5_enter(sensor: u64) {
    sensor::emit_guarded(Kind::Enter, sensor, C)
}

/// Records leaving `sensor`'s scope.
#[unsafe(no_mangle)]
pub extern "C" fn p5_exit(sensor: u64) {
    sensor::emit_guarded(Kind::Exit, sensor, C)
}

/// Records an instant.
#[unsafe(no_mangle)]
pub extern "C" fn p5_mark(sensor: u64) {
    sensor::emit_guarded(Kind::Mark, sensor, C)
}

/// Records a counter value.
#[unsafe(no_mangle)]
pub extern "C" fn p5_counter(sensor: u64, value: i64) {
    guard((), || crate::counter_as(sensor, value, C))
}

/// Drains and waits until everything recorded so far is acknowledged or spooled (bounded by
/// `P5_EXIT_TIMEOUT_MS`). Returns 1 if that completed.
#[unsafe(no_mangle)]
pub extern "C" fn p5_flush() -> i32 {
    let e = errno();
    let r = guard(0, || crate::flush() as i32);
    set_errno(e);
    r
}

/// Flushes, says goodbye to the log server and stops recording for good.
#[unsafe(no_mangle)]
pub extern "C" fn p5_shutdown() {
    let e = errno();
    guard((), crate::shutdown);
    set_errno(e);
}

/// 1 if sensors record.
#[unsafe(no_mangle)]
pub extern "C" fn p5_enabled() -> i32 {
    guard(0, || crate::is_enabled() as i32)
}

/// Turns recording on (1) or off (0).
#[unsafe(no_mangle)]
pub extern "C" fn p5_set_enabled(on: i32) {
    guard((), || crate::set_enabled(on != 0))
}

/// Raw ticks of the runtime's clock, for `p5_comm`'s `start_ticks`.
#[unsafe(no_mangle)]
pub extern "C" fn p5_ticks() -> u64 {
    guard(0, crate::ticks)
}

/// Fills `out` with the runtime's counters.
///
/// # Safety
/// `out` must be null or point to a writable `struct p5_stats`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_stats(out: *mut P5Stats) {
    let s = guard(crate::Stats::default(), crate::stats);
    if !out.is_null() {
        let v = P5Stats {
            events: s.events,
            dropped: s.dropped,
            streams: s.streams,
            frames: s.frames,
            frames_sent: s.frames_sent,
            frames_acked: s.frames_acked,
            frames_spooled: s.frames_spooled,
            frames_lost: s.frames_lost,
        };
        // SAFETY: the caller passes a valid pointer.
        unsafe { out.write_unaligned(v) };
    }
}

/// Records a communication call made without the wrappers: `op` is a `CommOp` value
/// (`P5_OP_*`), `start_ticks` from `p5_ticks()` before the call, `result` bytes or −errno,
/// `peer` optional (null).
///
/// # Safety
/// `peer` must be null or point to `peer_len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_comm(
    sensor: u64,
    op: i32,
    fd: i64,
    start_ticks: u64,
    result: i64,
    peer: *const libc::sockaddr,
    peer_len: libc::socklen_t,
) {
    let e = errno();
    guard((), || {
        let Some(op) = u8::try_from(op).ok().and_then(CommOp::from_u8) else {
            return;
        };
        // SAFETY: per the contract.
        let peer = unsafe { RawEndpoint::from_sockaddr(peer, peer_len) };
        comm::record(C, sensor, op, fd, start_ticks, result, &peer);
    });
    set_errno(e);
}

/// Records `fd`'s endpoints now (a `Socket` event), even if it was described before.
#[unsafe(no_mangle)]
pub extern "C" fn p5_socket(sensor: u64, fd: i32) {
    let e = errno();
    guard((), || {
        comm::note_socket(C, sensor, fd, true, &RawEndpoint::NONE)
    });
    set_errno(e);
}
