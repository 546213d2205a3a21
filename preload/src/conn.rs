//! Descriptor life cycle: `socket`, `socketpair`, `connect`, `accept`/`accept4`, `shutdown`,
//! `close` and `dup`/`dup2`/`dup3`. Connect and accept are recorded with the peer and
//! describe the socket's endpoints (what merge matches messages by); a unix socketpair's two
//! ends are described at once, each named after its inode (`p5_runtime::unnamed`); close and
//! shutdown are recorded on sockets; the rest only keep [`crate::fds`] and the runtime's
//! "described" bitmap right.

use crate::call_real;
use crate::fds;
use crate::guard::{self, Describe};
use crate::real::Real;
use libc::{c_int, sockaddr, socklen_t};
use p5_runtime::CommOp;
use p5_runtime::interpose::{self, RawEndpoint, sensor_id};

static SOCKET: Real = Real::new(c"socket");
static SOCKETPAIR: Real = Real::new(c"socketpair");
static CONNECT: Real = Real::new(c"connect");
static ACCEPT: Real = Real::new(c"accept");
static ACCEPT4: Real = Real::new(c"accept4");
static SHUTDOWN: Real = Real::new(c"shutdown");
static CLOSE: Real = Real::new(c"close");
static DUP: Real = Real::new(c"dup");
static DUP2: Real = Real::new(c"dup2");
static DUP3: Real = Real::new(c"dup3");

/// A new descriptor `fd` is a socket nobody described yet.
fn new_socket(fd: c_int) {
    if fd >= 0 && !interpose::on_runtime_thread() {
        fds::set_socket(fd);
        interpose::forget(fd);
    }
}

/// `socket(2)`.
///
/// # Safety
/// As for `socket(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, proto: c_int) -> c_int {
    type F = unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;
    let fd = call_real!(SOCKET, F, -1, (domain, ty, proto));
    new_socket(fd);
    fd
}

/// `socketpair(2)`.
///
/// # Safety
/// As for `socketpair(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn socketpair(
    domain: c_int,
    ty: c_int,
    proto: c_int,
    sv: *mut c_int,
) -> c_int {
    type F = unsafe extern "C" fn(c_int, c_int, c_int, *mut c_int) -> c_int;
    let r = call_real!(SOCKETPAIR, F, -1, (domain, ty, proto, sv));
    if r == 0 && !sv.is_null() {
        // SAFETY: socketpair filled both entries.
        let (a, b) = unsafe { (*sv, *sv.add(1)) };
        new_socket(a);
        new_socket(b);
        // Both ends are unnamed: each is described now, named after its inode and its
        // peer's, so merge tells the ends apart (a message is then matched to the other
        // end's thread, not to its sender's). Only if the process records already: a
        // socketpair alone does not start the runtime (the first use describes the ends,
        // asking the kernel for the peer).
        if domain == libc::AF_UNIX
            && !guard::busy()
            && !guard::passive()
            && !interpose::on_runtime_thread()
        {
            guard::held(|| {
                let e = guard::errno();
                let _ = std::panic::catch_unwind(|| interpose::describe_pair(a, b, ty));
                guard::set_errno(e);
            });
        }
    }
    r
}

/// `connect(2)`, recorded with the address as peer; the socket is described on success (or
/// `EINPROGRESS`).
///
/// # Safety
/// As for `connect(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    type F = unsafe extern "C" fn(c_int, *const sockaddr, socklen_t) -> c_int;
    let call = guard::begin();
    let r = call_real!(CONNECT, F, -1, (fd, addr, len));
    // The runtime's own connection is in its own descriptor table (`p5_runtime::fdtable`).
    if (r == 0 || guard::errno() == libc::EINPROGRESS) && !interpose::on_runtime_thread() {
        fds::set_socket(fd);
    }
    if let Some(c) = call {
        // SAFETY: `addr` was valid for `len` bytes, as connect required.
        let peer = || unsafe { RawEndpoint::from_sockaddr(addr, len) };
        c.finish(
            sensor_id("connect"),
            CommOp::Connect,
            fd,
            r as isize,
            Describe::Connected,
            peer,
        );
    }
    r
}

/// Shared by `accept` and `accept4`.
///
/// # Safety
/// As for `accept4(2)`.
unsafe fn accepted(
    name: &'static str,
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    call: Option<guard::Call>,
    r: c_int,
) -> c_int {
    new_socket(r);
    if let Some(c) = call {
        let peer = || {
            if r < 0 || addr.is_null() || len.is_null() {
                return RawEndpoint::NONE;
            }
            // SAFETY: accept filled `*len` bytes of `addr`.
            unsafe { RawEndpoint::from_sockaddr(addr, *len) }
        };
        c.finish(
            sensor_id(name),
            CommOp::Accept,
            fd,
            r as isize,
            Describe::No,
            peer,
        );
    }
    r
}

/// `accept(2)`, recorded with the peer; the new socket is described.
///
/// # Safety
/// As for `accept(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    type F = unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t) -> c_int;
    let call = guard::begin();
    let r = call_real!(ACCEPT, F, -1, (fd, addr, len));
    // SAFETY: as accept left them.
    unsafe { accepted("accept", fd, addr, len, call, r) }
}

/// `accept4(2)`, recorded like `accept`.
///
/// # Safety
/// As for `accept4(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn accept4(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    type F = unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t, c_int) -> c_int;
    let call = guard::begin();
    let r = call_real!(ACCEPT4, F, -1, (fd, addr, len, flags));
    // SAFETY: as accept4 left them.
    unsafe { accepted("accept4", fd, addr, len, call, r) }
}

/// `shutdown(2)`, recorded.
///
/// # Safety
/// As for `shutdown(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shutdown(fd: c_int, how: c_int) -> c_int {
    type F = unsafe extern "C" fn(c_int, c_int) -> c_int;
    let call = guard::begin();
    let r = call_real!(SHUTDOWN, F, -1, (fd, how));
    if let Some(c) = call {
        c.finish(
            sensor_id("shutdown"),
            CommOp::Shutdown,
            fd,
            r as isize,
            Describe::No,
            || RawEndpoint::NONE,
        );
    }
    r
}

/// `close(2)`: recorded on sockets; the descriptor is forgotten either way.
///
/// # Safety
/// As for `close(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    type F = unsafe extern "C" fn(c_int) -> c_int;
    if interpose::on_runtime_thread() {
        // A descriptor of the runtime's own table (`p5_runtime::fdtable`).
        return call_real!(CLOSE, F, -1, (fd));
    }
    let socket = fds::is_known_socket(fd);
    fds::clear(fd);
    if !socket {
        return call_real!(CLOSE, F, -1, (fd));
    }
    interpose::forget(fd);
    let call = guard::begin();
    let r = call_real!(CLOSE, F, -1, (fd));
    if let Some(c) = call {
        c.finish(
            sensor_id("close"),
            CommOp::Close,
            fd,
            r as isize,
            Describe::No,
            || RawEndpoint::NONE,
        );
    }
    r
}

/// `new` now names what `old` names (or nothing, on failure).
fn duplicated(old: c_int, new: c_int) {
    if new >= 0 && !interpose::on_runtime_thread() {
        interpose::forget(new);
        fds::copy(old, new);
    }
}

/// `dup(2)`.
///
/// # Safety
/// As for `dup(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup(old: c_int) -> c_int {
    type F = unsafe extern "C" fn(c_int) -> c_int;
    let r = call_real!(DUP, F, -1, (old));
    duplicated(old, r);
    r
}

/// `dup2(2)`.
///
/// # Safety
/// As for `dup2(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    type F = unsafe extern "C" fn(c_int, c_int) -> c_int;
    let r = call_real!(DUP2, F, -1, (old, new));
    duplicated(old, r);
    r
}

/// `dup3(2)`.
///
/// # Safety
/// As for `dup3(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    type F = unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;
    let r = call_real!(DUP3, F, -1, (old, new, flags));
    duplicated(old, r);
    r
}
