//! When a call is recorded: the re-entrancy guard and the start/finish of a recorded call.
//!
//! [`begin`] returns `None` — pass the call through unrecorded — while this thread is already
//! recording (the runtime's own system calls, a signal handler interrupting the recording
//! path), on the runtime's own threads, while recording is off, and in a process started with
//! `P5_PRELOAD=0` ([`passive`]: a program instrumented with p5's own runtime records itself,
//! and the interposer must not record its calls a second time). Otherwise it takes the
//! start ticks (initialising the runtime on the process's first recorded call) and marks the
//! thread busy until [`Call::finish`].

use p5_runtime::CommOp;
use p5_runtime::interpose::{self, RawEndpoint};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set at load when the process's environment says `P5_PRELOAD=0` (or `false`, `no`, `off`).
static PASSIVE: AtomicBool = AtomicBool::new(false);

/// Whether `P5_PRELOAD`'s value turns the interposer off.
pub fn off_by(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "0" | "false" | "no" | "off"
    )
}

/// Makes the interposer pass every call through for the rest of the process's life.
pub fn set_passive() {
    PASSIVE.store(true, Ordering::Relaxed);
}

/// True if this process was started with `P5_PRELOAD=0`: nothing is recorded here.
#[inline]
pub fn passive() -> bool {
    PASSIVE.load(Ordering::Relaxed)
}

thread_local! {
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// True while this thread is inside the recording path.
#[inline]
pub fn busy() -> bool {
    BUSY.get()
}

/// Runs `f` with the guard held (calls it makes are passed through), restoring the previous
/// state afterwards. For `fork`, whose handlers run the runtime's code.
pub fn held<R>(f: impl FnOnce() -> R) -> R {
    let was = BUSY.replace(true);
    let r = f();
    BUSY.set(was);
    r
}

/// A call being recorded.
#[derive(Debug)]
pub struct Call {
    start: u64,
}

/// The calling thread's `errno`.
#[inline]
pub fn errno() -> i32 {
    // SAFETY: this thread's errno slot.
    unsafe { *libc::__errno_location() }
}

/// Sets the calling thread's `errno`.
pub fn set_errno(e: i32) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = e };
}

/// Starts recording a call, or `None` to pass it through.
#[inline]
pub fn begin() -> Option<Call> {
    if BUSY.get() || passive() || interpose::on_runtime_thread() {
        return None;
    }
    BUSY.set(true);
    let e = errno();
    let start = catch_unwind(interpose::start).ok().flatten();
    set_errno(e);
    BUSY.set(false);
    start.map(|start| Call { start })
}

/// How the socket of a finished call is described.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Describe {
    /// On first use (data calls).
    FirstUse,
    /// Again, with the peer as hint (a successful or in-progress connect).
    Connected,
    /// Not at all (close, shutdown, waits).
    No,
}

impl Call {
    /// Records the finished call: `ret` as libc returned it (−1 with `errno` on failure),
    /// `peer` built only if recorded. `errno` is left as libc set it.
    #[inline]
    pub fn finish(
        self,
        sensor: u64,
        op: CommOp,
        fd: i32,
        ret: isize,
        describe: Describe,
        peer: impl FnOnce() -> RawEndpoint,
    ) {
        let e = errno();
        BUSY.set(true);
        let _ = catch_unwind(AssertUnwindSafe(|| {
            let result = if ret < 0 { -(e as i64) } else { ret as i64 };
            let peer = peer();
            match describe {
                Describe::FirstUse => interpose::describe(sensor, fd, false, &RawEndpoint::NONE),
                Describe::Connected if ret == 0 || e == libc::EINPROGRESS => {
                    interpose::describe(sensor, fd, true, &peer)
                }
                _ => {}
            }
            interpose::record(sensor, op, fd, self.start, result, &peer);
            if op == CommOp::Accept && ret >= 0 {
                interpose::describe(sensor, ret as i32, true, &peer);
            }
        }));
        BUSY.set(false);
        set_errno(e);
    }

    /// Records one of several results of a call that moved several messages at once
    /// (`sendmmsg`, `recvmmsg`): each gets the call's start and end.
    pub fn finish_each(
        self,
        sensor: u64,
        op: CommOp,
        fd: i32,
        results: impl Iterator<Item = (i64, RawEndpoint)>,
    ) {
        let e = errno();
        BUSY.set(true);
        let _ = catch_unwind(AssertUnwindSafe(|| {
            interpose::describe(sensor, fd, false, &RawEndpoint::NONE);
            for (bytes, peer) in results {
                interpose::record(sensor, op, fd, self.start, bytes, &peer);
            }
        }));
        BUSY.set(false);
        set_errno(e);
    }
}
