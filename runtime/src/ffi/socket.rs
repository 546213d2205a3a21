//! The socket wrappers of the C ABI: each calls the real libc function (outside any
//! `catch_unwind`, so its result is never lost), then records the call — duration, bytes or
//! −errno, the peer for datagram and connect/accept calls, and the socket's endpoints on first
//! use — and restores `errno` to what libc left.

use super::{C, guard};
use crate::comm::{self, errno, result_of, set_errno};
use crate::record::RawEndpoint;
use p5_wire::CommOp;

/// Start ticks of a wrapped call (`None`: not recording), never unwinding.
#[inline]
fn start() -> Option<u64> {
    guard(None, || comm::start(C))
}

/// Shared tail of the wrappers: describe the socket on first use, record the call, restore
/// `errno`.
#[inline]
fn after(
    start: Option<u64>,
    sensor: u64,
    op: CommOp,
    fd: i32,
    ret: isize,
    peer: impl FnOnce() -> RawEndpoint,
) {
    let Some(start) = start else {
        return;
    };
    let e = errno();
    guard((), || {
        let peer = peer();
        match op {
            CommOp::Connect => {
                if ret == 0 || e == libc::EINPROGRESS {
                    comm::note_socket(C, sensor, fd, true, &peer);
                }
            }
            CommOp::Close => {}
            _ => comm::note_socket(C, sensor, fd, false, &RawEndpoint::NONE),
        }
        comm::record(C, sensor, op, fd as i64, start, result_of(ret, e), &peer);
        if op == CommOp::Accept && ret >= 0 {
            comm::note_socket(C, sensor, ret as i32, true, &peer);
        }
    });
    set_errno(e);
}

/// `send(2)`, recorded.
///
/// # Safety
/// As for `send(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_send(
    sensor: u64,
    fd: i32,
    buf: *const libc::c_void,
    len: libc::size_t,
    flags: i32,
) -> libc::ssize_t {
    let t = start();
    // SAFETY: forwarded as is.
    let r = unsafe { libc::send(fd, buf, len, flags) };
    after(t, sensor, CommOp::Send, fd, r, || RawEndpoint::NONE);
    r
}

/// `recv(2)`, recorded.
///
/// # Safety
/// As for `recv(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_recv(
    sensor: u64,
    fd: i32,
    buf: *mut libc::c_void,
    len: libc::size_t,
    flags: i32,
) -> libc::ssize_t {
    let t = start();
    // SAFETY: forwarded as is.
    let r = unsafe { libc::recv(fd, buf, len, flags) };
    after(t, sensor, CommOp::Recv, fd, r, || RawEndpoint::NONE);
    r
}

/// `sendto(2)`, recorded with the destination as peer.
///
/// # Safety
/// As for `sendto(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_sendto(
    sensor: u64,
    fd: i32,
    buf: *const libc::c_void,
    len: libc::size_t,
    flags: i32,
    dest: *const libc::sockaddr,
    dest_len: libc::socklen_t,
) -> libc::ssize_t {
    let t = start();
    // SAFETY: forwarded as is.
    let r = unsafe { libc::sendto(fd, buf, len, flags, dest, dest_len) };
    // SAFETY: `dest` is null or valid for `dest_len` bytes, as sendto itself required.
    after(t, sensor, CommOp::SendTo, fd, r, || unsafe {
        RawEndpoint::from_sockaddr(dest, dest_len)
    });
    r
}

/// `recvfrom(2)`, recorded with the source as peer.
///
/// # Safety
/// As for `recvfrom(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_recvfrom(
    sensor: u64,
    fd: i32,
    buf: *mut libc::c_void,
    len: libc::size_t,
    flags: i32,
    src: *mut libc::sockaddr,
    src_len: *mut libc::socklen_t,
) -> libc::ssize_t {
    let t = start();
    // SAFETY: forwarded as is.
    let r = unsafe { libc::recvfrom(fd, buf, len, flags, src, src_len) };
    after(t, sensor, CommOp::RecvFrom, fd, r, || {
        if r < 0 || src.is_null() || src_len.is_null() {
            return RawEndpoint::NONE;
        }
        // SAFETY: recvfrom filled `*src_len` bytes (possibly truncated to the buffer).
        unsafe { RawEndpoint::from_sockaddr(src, *src_len) }
    });
    r
}

/// `sendmsg(2)`, recorded with `msg_name` as peer.
///
/// # Safety
/// As for `sendmsg(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_sendmsg(
    sensor: u64,
    fd: i32,
    msg: *const libc::msghdr,
    flags: i32,
) -> libc::ssize_t {
    let t = start();
    // SAFETY: forwarded as is.
    let r = unsafe { libc::sendmsg(fd, msg, flags) };
    // SAFETY: `msg` was valid for sendmsg.
    after(t, sensor, CommOp::SendMsg, fd, r, || unsafe {
        msg_peer(msg)
    });
    r
}

/// `recvmsg(2)`, recorded with `msg_name` as peer.
///
/// # Safety
/// As for `recvmsg(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_recvmsg(
    sensor: u64,
    fd: i32,
    msg: *mut libc::msghdr,
    flags: i32,
) -> libc::ssize_t {
    let t = start();
    // SAFETY: forwarded as is.
    let r = unsafe { libc::recvmsg(fd, msg, flags) };
    after(t, sensor, CommOp::RecvMsg, fd, r, || {
        if r < 0 {
            return RawEndpoint::NONE;
        }
        // SAFETY: `msg` was valid for recvmsg, which set msg_namelen.
        unsafe { msg_peer(msg) }
    });
    r
}

/// The peer named in a msghdr.
///
/// # Safety
/// `msg` must be null or a valid msghdr whose name is valid for `msg_namelen` bytes.
unsafe fn msg_peer(msg: *const libc::msghdr) -> RawEndpoint {
    // SAFETY: per the contract.
    match unsafe { msg.as_ref() } {
        Some(m) => unsafe {
            RawEndpoint::from_sockaddr(m.msg_name as *const libc::sockaddr, m.msg_namelen)
        },
        None => RawEndpoint::NONE,
    }
}

/// `read(2)`, recorded (a `Socket` event is emitted only if `fd` is a socket).
///
/// # Safety
/// As for `read(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_read(
    sensor: u64,
    fd: i32,
    buf: *mut libc::c_void,
    len: libc::size_t,
) -> libc::ssize_t {
    let t = start();
    // SAFETY: forwarded as is.
    let r = unsafe { libc::read(fd, buf, len) };
    after(t, sensor, CommOp::Read, fd, r, || RawEndpoint::NONE);
    r
}

/// `write(2)`, recorded.
///
/// # Safety
/// As for `write(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_write(
    sensor: u64,
    fd: i32,
    buf: *const libc::c_void,
    len: libc::size_t,
) -> libc::ssize_t {
    let t = start();
    // SAFETY: forwarded as is.
    let r = unsafe { libc::write(fd, buf, len) };
    after(t, sensor, CommOp::Write, fd, r, || RawEndpoint::NONE);
    r
}

/// `connect(2)`, recorded with the address as peer; on success (or `EINPROGRESS`) the
/// socket's endpoints are recorded too.
///
/// # Safety
/// As for `connect(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_connect(
    sensor: u64,
    fd: i32,
    addr: *const libc::sockaddr,
    len: libc::socklen_t,
) -> i32 {
    let t = start();
    // SAFETY: forwarded as is.
    let r = unsafe { libc::connect(fd, addr, len) };
    // SAFETY: `addr` was valid for connect.
    after(t, sensor, CommOp::Connect, fd, r as isize, || unsafe {
        RawEndpoint::from_sockaddr(addr, len)
    });
    r
}

/// `accept(2)`, recorded with the peer; the new socket's endpoints are recorded too.
///
/// # Safety
/// As for `accept(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_accept(
    sensor: u64,
    fd: i32,
    addr: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
) -> i32 {
    // SAFETY: forwarded as is.
    unsafe { p5_accept4(sensor, fd, addr, len, 0) }
}

/// `accept4(2)`, recorded like `p5_accept`.
///
/// # Safety
/// As for `accept4(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_accept4(
    sensor: u64,
    fd: i32,
    addr: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
    flags: i32,
) -> i32 {
    let t = start();
    // SAFETY: forwarded as is.
    let r = unsafe { libc::accept4(fd, addr, len, flags) };
    after(t, sensor, CommOp::Accept, fd, r as isize, || {
        if r < 0 || addr.is_null() || len.is_null() {
            return RawEndpoint::NONE;
        }
        // SAFETY: accept filled `*len` bytes of `addr`.
        unsafe { RawEndpoint::from_sockaddr(addr, *len) }
    });
    r
}

/// `close(2)`, recorded; forgets the descriptor's endpoints.
#[unsafe(no_mangle)]
pub extern "C" fn p5_close(sensor: u64, fd: i32) -> i32 {
    comm::forget(fd);
    let t = start();
    // SAFETY: closing a descriptor the caller names, exactly as close(2) would.
    let r = unsafe { libc::close(fd) };
    after(t, sensor, CommOp::Close, fd, r as isize, || {
        RawEndpoint::NONE
    });
    r
}

/// `shutdown(2)` on a socket, recorded (named so it cannot be confused with
/// [`super::p5_shutdown`], which stops the runtime).
#[unsafe(no_mangle)]
pub extern "C" fn p5_shutdown_socket(sensor: u64, fd: i32, how: i32) -> i32 {
    let t = start();
    // SAFETY: plain system call on a caller-named descriptor.
    let r = unsafe { libc::shutdown(fd, how) };
    after(t, sensor, CommOp::Shutdown, fd, r as isize, || {
        RawEndpoint::NONE
    });
    r
}
