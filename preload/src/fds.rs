//! What each descriptor is, cached: a socket, something else, or not known yet. One relaxed
//! byte load decides whether a `read`/`write` is recorded, so files and pipes pay a few
//! nanoseconds; an unknown descriptor costs one `fstat` the first time.
//!
//! The interposed `socket`, `socketpair`, `accept*` and `dup*` set entries and `close`
//! clears them. Descriptors opened or closed behind the interposer's back (inside glibc, or by
//! raw system calls) can leave an entry stale; a stale "socket" costs a recorded call that
//! merge cannot match (it has no socket description), a stale "other" misses a socket.
//! Descriptors from 65536 up are not cached (one `fstat` per call). The runtime's own threads
//! (flusher, connector) have their own descriptor table, so what they open and close leaves
//! the cache alone (`conn` and `classify` check).

use std::sync::atomic::{AtomicU8, Ordering};

const CACHED: usize = 1 << 16;
const UNKNOWN: u8 = 0;
const SOCKET: u8 = 1;
const OTHER: u8 = 2;

static KIND: [AtomicU8; CACHED] = [const { AtomicU8::new(UNKNOWN) }; CACHED];

fn slot(fd: i32) -> Option<&'static AtomicU8> {
    KIND.get(usize::try_from(fd).ok()?)
}

/// True if `fd` is a socket (asking the kernel once per descriptor).
#[inline(always)]
pub fn is_socket(fd: i32) -> bool {
    match slot(fd).map(|s| s.load(Ordering::Relaxed)) {
        Some(SOCKET) => true,
        Some(OTHER) => false,
        _ => classify(fd),
    }
}

#[cold]
fn classify(fd: i32) -> bool {
    let Some(socket) = kernel_says_socket(fd) else {
        return false;
    };
    // The runtime's threads have a descriptor table of their own (`p5_runtime::fdtable`):
    // their numbers say nothing about the program's.
    if p5_runtime::interpose::on_runtime_thread() {
        return socket;
    }
    if let Some(s) = slot(fd) {
        s.store(if socket { SOCKET } else { OTHER }, Ordering::Relaxed);
    }
    socket
}

/// `fstat`'s answer, `None` if `fd` is not open. Keeps `errno`.
fn kernel_says_socket(fd: i32) -> Option<bool> {
    let e = crate::guard::errno();
    // SAFETY: `st` is a valid out-buffer; all-zero is a valid `stat`.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let rc = unsafe { libc::fstat(fd, &mut st) };
    // SAFETY: this thread's errno slot.
    unsafe { *libc::__errno_location() = e };
    (rc == 0).then_some(st.st_mode & libc::S_IFMT == libc::S_IFSOCK)
}

/// `fd` is now a socket (returned by `socket`, `accept`, ...).
pub fn set_socket(fd: i32) {
    if let Some(s) = slot(fd) {
        s.store(SOCKET, Ordering::Relaxed);
    }
}

/// `fd` was closed (or replaced): forget what it was.
pub fn clear(fd: i32) {
    if let Some(s) = slot(fd) {
        s.store(UNKNOWN, Ordering::Relaxed);
    }
}

/// `new` is a duplicate of `old`.
pub fn copy(old: i32, new: i32) {
    if let (Some(o), Some(n)) = (slot(old), slot(new)) {
        n.store(o.load(Ordering::Relaxed), Ordering::Relaxed);
    }
}

/// True only if `fd` is cached as a socket (no system call: for `close`).
#[inline(always)]
pub fn is_known_socket(fd: i32) -> bool {
    slot(fd).is_some_and(|s| s.load(Ordering::Relaxed) == SOCKET)
}
