//! SIGINT/SIGTERM: a flag the sampling loop polls, so the agent flushes, closes its streams
//! and waits (bounded) for the last acknowledgements before exiting.

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    REQUESTED.store(true, Ordering::Release);
}

/// Installs the handlers.
pub fn install() {
    let h = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, h);
        libc::signal(libc::SIGTERM, h);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// True once a stop signal arrived.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Acquire)
}
