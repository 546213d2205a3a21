//! Communication events: what a send/recv/connect/... call did (or how long a wait in
//! poll/select/epoll lasted), and what a socket is.
//!
//! A `Comm` event records one call: its start (raw ticks taken by the wrapper before the
//! call), its end (taken here), the bytes moved or −errno, and the peer for datagram and
//! connect/accept calls. A `Socket` event records a descriptor's protocol and both endpoints,
//! once per descriptor: on connect/accept, or on the first wrapped call that uses it. Which
//! descriptors were already described is a process-wide bitmap (descriptors below 65536),
//! cleared by the close wrappers and after fork; larger descriptors are described on
//! connect/accept only.
//!
//! Unix sockets whose both ends are unnamed (socketpairs) are named after their inodes
//! ([`crate::unnamed`]) so that merge can tell the ends apart.
//!
//! The helpers here make system calls (`getsockname`, ...) that may change `errno`; the C
//! wrappers save and restore it around them.

use crate::clock;
use crate::record::{RawEndpoint, Record};
use crate::sensor::{self, ACTIVE};
use crate::unnamed;
use p5_wire::{CommOp, RuntimeKind, SocketProto};
use std::sync::atomic::{AtomicU64, Ordering};

/// Descriptors tracked by the "already described" bitmap.
pub const TRACKED_FDS: usize = 1 << 16;

static SEEN: [AtomicU64; TRACKED_FDS / 64] = [const { AtomicU64::new(0) }; TRACKED_FDS / 64];

fn bit(fd: i32) -> Option<(&'static AtomicU64, u64)> {
    let fd = usize::try_from(fd).ok().filter(|&f| f < TRACKED_FDS)?;
    Some((&SEEN[fd / 64], 1u64 << (fd % 64)))
}

/// Forgets that `fd` was described (it is being closed).
pub fn forget(fd: i32) {
    if let Some((w, b)) = bit(fd) {
        w.fetch_and(!b, Ordering::Relaxed);
    }
}

/// Clears the whole bitmap (a forked child describes its sockets anew in its own streams).
pub fn reset_after_fork() {
    for w in &SEEN {
        w.store(0, Ordering::Relaxed);
    }
}

/// Records a finished call that started at raw ticks `start`.
pub fn record(
    origin: RuntimeKind,
    sensor_id: u64,
    op: CommOp,
    fd: i64,
    start: u64,
    result: i64,
    peer: &RawEndpoint,
) {
    sensor::emit_record(origin, |ring| {
        Record::comm(
            ring.rel(start),
            ring.now_rel(),
            sensor_id,
            op,
            fd,
            result,
            peer,
        )
    });
}

/// Raw ticks for the start of a call if recording (`None`: wrappers skip all work). The
/// runtime is initialised first if needed so the ticks are in the process's clock.
#[inline]
pub fn start(origin: RuntimeKind) -> Option<u64> {
    if !ACTIVE.load(Ordering::Relaxed) {
        return None;
    }
    if !crate::process::ready() {
        let saved = errno();
        let p = crate::process::get_or_init(origin, None);
        set_errno(saved);
        p?;
    }
    Some(clock::ticks())
}

fn sockaddr_of(
    fd: i32,
    f: unsafe extern "C" fn(i32, *mut libc::sockaddr, *mut libc::socklen_t) -> i32,
) -> Option<(RawEndpoint, i32)> {
    // SAFETY: sockaddr_storage is plain data; all-zero is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `ss` has room for `len` bytes; the kernel writes at most that.
    let rc = unsafe { f(fd, &mut ss as *mut _ as *mut libc::sockaddr, &mut len) };
    if rc != 0 {
        return None;
    }
    let len = len.min(std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t);
    // SAFETY: `len` bytes of `ss` are initialised.
    let e = unsafe { RawEndpoint::from_sockaddr(&ss as *const _ as *const libc::sockaddr, len) };
    Some((e, ss.ss_family as i32))
}

/// Describes `fd` with a `Socket` event unless that was done already (`force`: describe
/// again, after connect/accept). `peer_hint` stands in when the kernel knows no peer yet
/// (a non-blocking connect in progress). Does nothing for non-sockets.
pub fn note_socket(
    origin: RuntimeKind,
    sensor_id: u64,
    fd: i32,
    force: bool,
    peer_hint: &RawEndpoint,
) {
    if !ACTIVE.load(Ordering::Relaxed) || fd < 0 {
        return;
    }
    match bit(fd) {
        Some((w, b)) => {
            let was = w.fetch_or(b, Ordering::Relaxed) & b != 0;
            if was && !force {
                return;
            }
        }
        None if !force => return,
        None => {}
    }
    let mut ty: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: `ty` is a valid out-buffer of `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            &mut ty as *mut i32 as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return; // not a socket (a pipe or file read through the wrappers)
    }
    let (mut local, family) = sockaddr_of(fd, libc::getsockname).unwrap_or((RawEndpoint::NONE, 0));
    let mut peer = sockaddr_of(fd, libc::getpeername).map_or(*peer_hint, |p| p.0);
    if family == libc::AF_UNIX
        && unnamed::is_unnamed(&local)
        && unnamed::is_unnamed(&peer)
        && let Some(p) = crate::process::current()
        && let Some((l, r)) = unnamed::identify(fd, &p.identity.boot_id)
    {
        (local, peer) = (l, r);
    }
    let proto = match (family, ty) {
        (libc::AF_INET | libc::AF_INET6, libc::SOCK_STREAM) => SocketProto::Tcp,
        (libc::AF_INET | libc::AF_INET6, libc::SOCK_DGRAM) => SocketProto::Udp,
        (libc::AF_UNIX, libc::SOCK_STREAM) => SocketProto::UnixStream,
        (libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_SEQPACKET) => SocketProto::UnixDgram,
        _ => SocketProto::Unknown,
    };
    sensor::emit_record(origin, |ring| {
        Record::socket(ring.now_rel(), sensor_id, fd as i64, proto, &local, &peer)
    });
}

/// Describes both ends of a new unix socketpair `(a, b)` (`Socket` events naming each end
/// after its inode, [`unnamed`]), so they pair without asking the kernel for the peer.
pub fn note_pair(origin: RuntimeKind, sensor_id: u64, a: i32, b: i32, ty: i32) {
    if !ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    let Some(p) = crate::process::current() else {
        return;
    };
    let Some((ea, eb)) = unnamed::pair(a, b, &p.identity.boot_id) else {
        return;
    };
    let proto = match ty & 0xf {
        libc::SOCK_STREAM => SocketProto::UnixStream,
        _ => SocketProto::UnixDgram,
    };
    for (fd, local, peer) in [(a, &ea, &eb), (b, &eb, &ea)] {
        if let Some((w, bit)) = bit(fd) {
            w.fetch_or(bit, Ordering::Relaxed);
        }
        sensor::emit_record(origin, |ring| {
            Record::socket(ring.now_rel(), sensor_id, fd as i64, proto, local, peer)
        });
    }
}

/// `result` of a call returning a count/descriptor or −1 with `errno`.
pub fn result_of(ret: isize, errno: i32) -> i64 {
    if ret < 0 { -(errno as i64) } else { ret as i64 }
}

/// The calling thread's `errno`.
pub fn errno() -> i32 {
    // SAFETY: __errno_location always returns this thread's errno slot.
    unsafe { *libc::__errno_location() }
}

/// Sets the calling thread's `errno`.
pub fn set_errno(e: i32) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = e };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmap_tracks_and_forgets() {
        assert!(bit(-1).is_none());
        assert!(bit(TRACKED_FDS as i32).is_none());
        let (w, b) = bit(70).unwrap();
        w.fetch_or(b, Ordering::Relaxed);
        assert_ne!(w.load(Ordering::Relaxed) & b, 0);
        forget(70);
        assert_eq!(w.load(Ordering::Relaxed) & b, 0);
    }

    #[test]
    fn results() {
        assert_eq!(result_of(12, 0), 12);
        assert_eq!(result_of(-1, libc::EAGAIN), -(libc::EAGAIN as i64));
    }
}
