//! Waking the flusher from application threads without blocking them.
//!
//! An `eventfd` the flusher polls together with its socket. Producers set a `pending` flag
//! first and write the eventfd only on the false → true transition, so a ring that stays past
//! half full costs one relaxed load per slow-path visit, not a system call per event. Writing
//! an eventfd never blocks (the counter cannot overflow with one writer per wake-up).

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// The flusher's doorbell.
#[derive(Debug)]
pub struct Waker {
    fd: AtomicI32,
    pending: AtomicBool,
    /// The flusher stopped draining for good (`P5_FULL=wait` producers then drop).
    gone: AtomicBool,
}

impl Default for Waker {
    fn default() -> Self {
        Self::new()
    }
}

impl Waker {
    /// A new doorbell (falls back to timer-only flushing if no eventfd can be created).
    pub fn new() -> Self {
        // SAFETY: plain system call.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        Waker {
            fd: AtomicI32::new(fd),
            pending: AtomicBool::new(false),
            gone: AtomicBool::new(false),
        }
    }

    /// Says that nobody drains any more (or again, with `false`: a forked child's flusher).
    pub fn set_consumer_gone(&self, gone: bool) {
        self.gone.store(gone, Ordering::Release);
    }

    /// True once the flusher stopped draining for good.
    pub fn consumer_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    /// The descriptor to poll, if any.
    pub fn fd(&self) -> Option<RawFd> {
        let fd = self.fd.load(Ordering::Relaxed);
        (fd >= 0).then_some(fd)
    }

    /// Rings the bell (cheap when already rung).
    #[inline]
    pub fn wake(&self) {
        if self.pending.load(Ordering::Relaxed) || self.pending.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(fd) = self.fd() {
            let one: u64 = 1;
            // SAFETY: writing 8 bytes from a valid u64 to our own non-blocking eventfd.
            unsafe { libc::write(fd, &one as *const u64 as *const libc::c_void, 8) };
        }
    }

    /// Consumes a pending wake-up; returns whether there was one.
    pub fn take(&self) -> bool {
        if let Some(fd) = self.fd() {
            let mut v: u64 = 0;
            // SAFETY: reading 8 bytes into a valid u64 from our own non-blocking eventfd.
            unsafe { libc::read(fd, &mut v as *mut u64 as *mut libc::c_void, 8) };
        }
        self.pending.swap(false, Ordering::AcqRel)
    }

    /// Closes the descriptor without other side effects (a forked child drops its copy of the
    /// parent's doorbell this way).
    pub fn close_inherited(&self) {
        let fd = self.fd.swap(-1, Ordering::Relaxed);
        if fd >= 0 {
            // SAFETY: closing our own descriptor once (the swap makes it single-shot).
            unsafe { libc::close(fd) };
        }
    }
}

impl Drop for Waker {
    fn drop(&mut self) {
        self.close_inherited();
    }
}
