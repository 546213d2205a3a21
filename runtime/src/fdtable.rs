//! The runtime's threads keep their own descriptor table.
//!
//! While two threads share a descriptor table the kernel counts references on every file a
//! system call uses (`fdget` takes its fast path only for a table with one user), about 50 ns
//! per `read`/`write` on this machine — a cost a single-threaded program paid only because the
//! runtime started its flusher. So the flusher, first thing, takes a private copy of the table
//! (`unshare(CLONE_FILES)`), closes every descriptor it copied except the doorbell it polls,
//! and puts `/dev/null` on 0, 1 and 2 (so nothing of its own lands there and a panic message
//! cannot reach the log-server socket). From then on the program's table has one user again,
//! the program's closes take effect at once (the flusher holds none of its files), and the
//! program cannot close or overwrite the runtime's socket or spool by accident. The connector
//! thread, started by the flusher, shares the flusher's table.
//!
//! Consequences: the runtime's descriptor numbers mean nothing in the program's table (a forked
//! child must not close them: [`private`]); messages for the user go to the program's current
//! standard error through `/proc/self/fd/2` ([`warn`]); an interposer must not let the
//! runtime threads' opens and closes touch what it knows of the program's descriptors. If
//! `unshare` fails, or `P5_SHARED_FDS` is set, nothing changes.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};

static PRIVATE: AtomicBool = AtomicBool::new(false);

/// True once the runtime's threads have a table of their own.
pub fn private() -> bool {
    PRIVATE.load(Ordering::Relaxed)
}

/// Gives the calling (flusher) thread its own descriptor table holding only `keep` and
/// `/dev/null` on 0–2. Returns whether it did.
pub fn separate(keep: &[RawFd]) -> bool {
    if std::env::var_os("P5_SHARED_FDS").is_some() {
        return false;
    }
    // SAFETY: plain system call; affects only the calling thread's table.
    if unsafe { libc::unshare(libc::CLONE_FILES) } != 0 {
        return false;
    }
    let mut keep: Vec<u32> = keep.iter().filter_map(|&f| u32::try_from(f).ok()).collect();
    keep.sort_unstable();
    let mut from = 0u32;
    for k in keep.iter().copied().chain([u32::MAX]) {
        if k > from {
            close_range(from, k - 1);
        }
        from = k.saturating_add(1);
    }
    // SAFETY: opening /dev/null.
    let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if null >= 0 {
        for fd in 0..3 {
            if fd != null && !keep.contains(&(fd as u32)) {
                // SAFETY: dup2 onto a descriptor of our own table.
                unsafe { libc::dup2(null, fd) };
            }
        }
        if null > 2 {
            // SAFETY: our own descriptor.
            unsafe { libc::close(null) };
        }
    }
    PRIVATE.store(true, Ordering::Relaxed);
    true
}

/// Closes `first..=last` of this thread's table.
fn close_range(first: u32, last: u32) {
    // SAFETY: close_range(2) on this thread's private table.
    let r = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0u32) };
    if r == 0 {
        return;
    }
    // Before Linux 5.9: close what /proc says is open.
    let Ok(dir) = std::fs::read_dir("/proc/thread-self/fd") else {
        return;
    };
    let open: Vec<u32> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|&f| f >= first && f <= last)
        .collect();
    for f in open {
        // SAFETY: a descriptor of this thread's private table.
        unsafe { libc::close(f as i32) };
    }
}

/// Writes `msg` and a line feed to the program's standard error, from any thread.
pub fn warn(msg: &str) {
    use std::io::Write as _;
    let line = format!("{msg}\n");
    if !private() || !crate::sensor::on_flusher_thread() {
        let _ = std::io::stderr().write_all(line.as_bytes());
        return;
    }
    // The program's fd 2, opened anew (appending, as a terminal or a log file expects).
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .append(true)
        .open("/proc/self/fd/2")
    {
        let _ = f.write_all(line.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_separated_thread_holds_no_file_of_the_program() {
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let keep = std::fs::File::open("/dev/zero").unwrap();
        let (kfd, bfd) = (keep.as_raw_fd(), b.as_raw_fd());
        let (kept, other) = std::thread::spawn(move || {
            assert!(separate(&[kfd]));
            // SAFETY: fcntl on descriptor numbers.
            let valid = |fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0;
            (valid(kfd), valid(bfd))
        })
        .join()
        .unwrap();
        assert!(kept, "the doorbell stays");
        assert!(!other, "the program's socket is not in the flusher's table");
        // The program closing its end is seen at once: the flusher holds no copy.
        drop(b);
        use std::io::Read as _;
        let mut buf = [0u8; 1];
        assert_eq!(a.read(&mut buf).unwrap(), 0, "EOF");
    }
}
