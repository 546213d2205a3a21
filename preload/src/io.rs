//! Data calls: the `send` and `recv` families, `read`/`write`/`readv`/`writev` on sockets,
//! `sendfile` and `splice`, and the fortified `__read_chk`/`__recv_chk`/`__recvfrom_chk`
//! that `_FORTIFY_SOURCE` builds call instead. Each is recorded as a communication call
//! named after itself (`p5_runtime::interpose::CALLS`); `sendmmsg`/`recvmmsg` as one call
//! per message moved.

use crate::call_real;
use crate::fds;
use crate::guard::{self, Describe};
use crate::real::Real;
use libc::{c_int, c_uint, c_void, iovec, mmsghdr, msghdr, size_t, sockaddr, socklen_t, ssize_t};
use p5_runtime::CommOp;
use p5_runtime::interpose::{RawEndpoint, sensor_id};

type Rw = unsafe extern "C" fn(c_int, *mut c_void, size_t) -> ssize_t;
type Wr = unsafe extern "C" fn(c_int, *const c_void, size_t) -> ssize_t;
type Vec = unsafe extern "C" fn(c_int, *const iovec, c_int) -> ssize_t;
type Msg = unsafe extern "C" fn(c_int, *const msghdr, c_int) -> ssize_t;
type MsgMut = unsafe extern "C" fn(c_int, *mut msghdr, c_int) -> ssize_t;
type MMsg = unsafe extern "C" fn(c_int, *mut mmsghdr, c_uint, c_int) -> c_int;
type RecvMMsg =
    unsafe extern "C" fn(c_int, *mut mmsghdr, c_uint, c_int, *mut libc::timespec) -> c_int;

static READ: Real = Real::new(c"read");
static WRITE: Real = Real::new(c"write");
static READV: Real = Real::new(c"readv");
static WRITEV: Real = Real::new(c"writev");
static SEND: Real = Real::new(c"send");
static RECV: Real = Real::new(c"recv");
static SENDTO: Real = Real::new(c"sendto");
static RECVFROM: Real = Real::new(c"recvfrom");
static SENDMSG: Real = Real::new(c"sendmsg");
static RECVMSG: Real = Real::new(c"recvmsg");
static SENDMMSG: Real = Real::new(c"sendmmsg");
static RECVMMSG: Real = Real::new(c"recvmmsg");
static SENDFILE: Real = Real::new(c"sendfile");
static SENDFILE64: Real = Real::new(c"sendfile64");
static SPLICE: Real = Real::new(c"splice");
static READ_CHK: Real = Real::new(c"__read_chk");
static RECV_CHK: Real = Real::new(c"__recv_chk");
static RECVFROM_CHK: Real = Real::new(c"__recvfrom_chk");

/// Records a data call on `fd` if it is a socket and `$record` holds: `$call` runs the real
/// function, `$peer` (given the result) builds the peer endpoint.
macro_rules! data_call {
    ($name:literal, $op:expr, $fd:expr, $record:expr, $call:expr) => {
        data_call!($name, $op, $fd, $record, $call, |_r| RawEndpoint::NONE)
    };
    ($name:literal, $op:expr, $fd:expr, $record:expr, $call:expr, $peer:expr) => {{
        let call = if $record && fds::is_socket($fd) {
            guard::begin()
        } else {
            None
        };
        let r = $call;
        if let Some(c) = call {
            let peer = $peer;
            c.finish(
                sensor_id($name),
                $op,
                $fd,
                r as isize,
                Describe::FirstUse,
                || peer(r),
            );
        }
        r
    }};
}

/// Receives that only peek leave the bytes for the next receive: recording them would count
/// the bytes twice, so they are not recorded.
fn consumes(flags: c_int) -> bool {
    flags & libc::MSG_PEEK == 0
}

/// `read(2)`.
///
/// # Safety
/// As for `read(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    data_call!(
        "read",
        CommOp::Read,
        fd,
        true,
        call_real!(READ, Rw, -1, (fd, buf, n))
    )
}

/// `write(2)`.
///
/// # Safety
/// As for `write(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    data_call!(
        "write",
        CommOp::Write,
        fd,
        true,
        call_real!(WRITE, Wr, -1, (fd, buf, n))
    )
}

/// `readv(2)`.
///
/// # Safety
/// As for `readv(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    data_call!(
        "readv",
        CommOp::Read,
        fd,
        true,
        call_real!(READV, Vec, -1, (fd, iov, n))
    )
}

/// `writev(2)`.
///
/// # Safety
/// As for `writev(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    data_call!(
        "writev",
        CommOp::Write,
        fd,
        true,
        call_real!(WRITEV, Vec, -1, (fd, iov, n))
    )
}

/// `send(2)`.
///
/// # Safety
/// As for `send(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t {
    type F = unsafe extern "C" fn(c_int, *const c_void, size_t, c_int) -> ssize_t;
    data_call!(
        "send",
        CommOp::Send,
        fd,
        true,
        call_real!(SEND, F, -1, (fd, buf, n, flags))
    )
}

/// `recv(2)`.
///
/// # Safety
/// As for `recv(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t {
    type F = unsafe extern "C" fn(c_int, *mut c_void, size_t, c_int) -> ssize_t;
    data_call!(
        "recv",
        CommOp::Recv,
        fd,
        consumes(flags),
        call_real!(RECV, F, -1, (fd, buf, n, flags))
    )
}

/// `sendto(2)`, recorded with the destination as peer.
///
/// # Safety
/// As for `sendto(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
    to: *const sockaddr,
    to_len: socklen_t,
) -> ssize_t {
    type F = unsafe extern "C" fn(
        c_int,
        *const c_void,
        size_t,
        c_int,
        *const sockaddr,
        socklen_t,
    ) -> ssize_t;
    data_call!(
        "sendto",
        CommOp::SendTo,
        fd,
        true,
        call_real!(SENDTO, F, -1, (fd, buf, n, flags, to, to_len)),
        // SAFETY: `to` is null or valid for `to_len` bytes, as sendto required.
        |_r| unsafe { RawEndpoint::from_sockaddr(to, to_len) }
    )
}

/// The address a receive call filled in, if it succeeded.
///
/// # Safety
/// `from`/`len` as a `recvfrom` left them.
unsafe fn filled(r: ssize_t, from: *const sockaddr, len: *const socklen_t) -> RawEndpoint {
    if r < 0 || from.is_null() || len.is_null() {
        return RawEndpoint::NONE;
    }
    // SAFETY: the call wrote `*len` bytes (truncated to the buffer, which from_sockaddr bounds).
    unsafe { RawEndpoint::from_sockaddr(from, *len) }
}

/// `recvfrom(2)`, recorded with the source as peer.
///
/// # Safety
/// As for `recvfrom(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    flags: c_int,
    from: *mut sockaddr,
    from_len: *mut socklen_t,
) -> ssize_t {
    type F = unsafe extern "C" fn(
        c_int,
        *mut c_void,
        size_t,
        c_int,
        *mut sockaddr,
        *mut socklen_t,
    ) -> ssize_t;
    data_call!(
        "recvfrom",
        CommOp::RecvFrom,
        fd,
        consumes(flags),
        call_real!(RECVFROM, F, -1, (fd, buf, n, flags, from, from_len)),
        // SAFETY: the pointers are the caller's, as recvfrom left them.
        |r| unsafe { filled(r, from, from_len) }
    )
}

/// The peer named in a msghdr.
///
/// # Safety
/// `msg` must be null or a valid msghdr whose name is valid for `msg_namelen` bytes.
unsafe fn msg_peer(msg: *const msghdr) -> RawEndpoint {
    // SAFETY: per the contract.
    match unsafe { msg.as_ref() } {
        // SAFETY: per the contract.
        Some(m) => unsafe { RawEndpoint::from_sockaddr(m.msg_name.cast(), m.msg_namelen) },
        None => RawEndpoint::NONE,
    }
}

/// `sendmsg(2)`, recorded with `msg_name` as peer.
///
/// # Safety
/// As for `sendmsg(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
    data_call!(
        "sendmsg",
        CommOp::SendMsg,
        fd,
        true,
        call_real!(SENDMSG, Msg, -1, (fd, msg, flags)),
        // SAFETY: `msg` was valid for sendmsg.
        |_r| unsafe { msg_peer(msg) }
    )
}

/// `recvmsg(2)`, recorded with `msg_name` as peer.
///
/// # Safety
/// As for `recvmsg(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    data_call!(
        "recvmsg",
        CommOp::RecvMsg,
        fd,
        consumes(flags),
        call_real!(RECVMSG, MsgMut, -1, (fd, msg, flags)),
        // SAFETY: `msg` was valid for recvmsg, which set msg_namelen.
        |r: ssize_t| if r < 0 {
            RawEndpoint::NONE
        } else {
            unsafe { msg_peer(msg) }
        }
    )
}

/// The messages `sendmmsg`/`recvmmsg` moved: bytes and peer of each of the first `n`.
///
/// # Safety
/// `v` must be valid for `n` entries as the call left them.
unsafe fn each(v: *const mmsghdr, n: c_int) -> impl Iterator<Item = (i64, RawEndpoint)> {
    let n = usize::try_from(n).unwrap_or(0);
    (0..n).map(move |i| {
        // SAFETY: per the contract, `i < n` entries are valid.
        let m = unsafe { &*v.add(i) };
        // SAFETY: the entry's header is valid as the call left it.
        (m.msg_len as i64, unsafe { msg_peer(&m.msg_hdr) })
    })
}

/// `sendmmsg(2)`: one recorded send per message sent.
///
/// # Safety
/// As for `sendmmsg(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendmmsg(fd: c_int, v: *mut mmsghdr, n: c_uint, flags: c_int) -> c_int {
    let call = guard::begin();
    let r = call_real!(SENDMMSG, MMsg, -1, (fd, v, n, flags));
    if let Some(c) = call {
        // SAFETY: the first `r` entries were filled in by the call.
        c.finish_each(sensor_id("sendmmsg"), CommOp::SendMsg, fd, unsafe {
            each(v, r)
        });
    }
    r
}

/// `recvmmsg(2)`: one recorded receive per message received.
///
/// # Safety
/// As for `recvmmsg(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn recvmmsg(
    fd: c_int,
    v: *mut mmsghdr,
    n: c_uint,
    flags: c_int,
    timeout: *mut libc::timespec,
) -> c_int {
    let call = if consumes(flags) {
        guard::begin()
    } else {
        None
    };
    let r = call_real!(RECVMMSG, RecvMMsg, -1, (fd, v, n, flags, timeout));
    if let Some(c) = call {
        // SAFETY: the first `r` entries were filled in by the call.
        c.finish_each(sensor_id("recvmmsg"), CommOp::RecvMsg, fd, unsafe {
            each(v, r)
        });
    }
    r
}

type SendFile = unsafe extern "C" fn(c_int, c_int, *mut libc::off_t, size_t) -> ssize_t;

/// `sendfile(2)`: a write on `out` when `out` is a socket.
///
/// # Safety
/// As for `sendfile(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendfile(
    out: c_int,
    inp: c_int,
    off: *mut libc::off_t,
    n: size_t,
) -> ssize_t {
    data_call!(
        "sendfile",
        CommOp::Write,
        out,
        true,
        call_real!(SENDFILE, SendFile, -1, (out, inp, off, n))
    )
}

/// `sendfile64` (what `_FILE_OFFSET_BITS=64` builds call; the same function on 64-bit).
///
/// # Safety
/// As for `sendfile(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sendfile64(
    out: c_int,
    inp: c_int,
    off: *mut libc::off_t,
    n: size_t,
) -> ssize_t {
    data_call!(
        "sendfile",
        CommOp::Write,
        out,
        true,
        call_real!(SENDFILE64, SendFile, -1, (out, inp, off, n))
    )
}

/// `splice(2)`: a write on the output when it is a socket, else a read on the input when
/// that is one.
///
/// # Safety
/// As for `splice(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn splice(
    fd_in: c_int,
    off_in: *mut libc::loff_t,
    fd_out: c_int,
    off_out: *mut libc::loff_t,
    n: size_t,
    flags: c_uint,
) -> ssize_t {
    type F = unsafe extern "C" fn(
        c_int,
        *mut libc::loff_t,
        c_int,
        *mut libc::loff_t,
        size_t,
        c_uint,
    ) -> ssize_t;
    let (fd, op) = if fds::is_socket(fd_out) {
        (fd_out, CommOp::Write)
    } else {
        (fd_in, CommOp::Read)
    };
    data_call!(
        "splice",
        op,
        fd,
        true,
        call_real!(SPLICE, F, -1, (fd_in, off_in, fd_out, off_out, n, flags))
    )
}

/// `__read_chk`: `read` with a buffer-size check (a too-long read goes to the real one, which
/// aborts).
///
/// # Safety
/// As for `read(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __read_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    cap: size_t,
) -> ssize_t {
    if n > cap {
        type F = unsafe extern "C" fn(c_int, *mut c_void, size_t, size_t) -> ssize_t;
        return call_real!(READ_CHK, F, -1, (fd, buf, n, cap));
    }
    // SAFETY: the buffer holds `n` bytes.
    unsafe { read(fd, buf, n) }
}

/// `__recv_chk`: `recv` with a buffer-size check.
///
/// # Safety
/// As for `recv(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __recv_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    cap: size_t,
    flags: c_int,
) -> ssize_t {
    if n > cap {
        type F = unsafe extern "C" fn(c_int, *mut c_void, size_t, size_t, c_int) -> ssize_t;
        return call_real!(RECV_CHK, F, -1, (fd, buf, n, cap, flags));
    }
    // SAFETY: the buffer holds `n` bytes.
    unsafe { recv(fd, buf, n, flags) }
}

/// `__recvfrom_chk`: `recvfrom` with a buffer-size check.
///
/// # Safety
/// As for `recvfrom(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __recvfrom_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    cap: size_t,
    flags: c_int,
    from: *mut sockaddr,
    from_len: *mut socklen_t,
) -> ssize_t {
    if n > cap {
        type F = unsafe extern "C" fn(
            c_int,
            *mut c_void,
            size_t,
            size_t,
            c_int,
            *mut sockaddr,
            *mut socklen_t,
        ) -> ssize_t;
        return call_real!(
            RECVFROM_CHK,
            F,
            -1,
            (fd, buf, n, cap, flags, from, from_len)
        );
    }
    // SAFETY: the buffer holds `n` bytes.
    unsafe { recvfrom(fd, buf, n, flags, from, from_len) }
}
