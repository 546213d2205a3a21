//! The waiting wrappers of the C ABI: `poll`, `ppoll`, `select`, `pselect`, `epoll_wait` and
//! `epoll_pwait`, each recorded as a `Wait` communication call (start, duration, the number of
//! ready descriptors or −errno), so merge draws the time as *waiting*, not *calculating*. The
//! descriptor recorded is the epoll descriptor, or −1 for poll and select (they wait on a
//! set). Like the socket wrappers, the real call runs outside any `catch_unwind` and `errno`
//! is left as libc set it.

use super::{C, guard};
use crate::comm::{self, errno, result_of, set_errno};
use crate::record::RawEndpoint;
use p5_wire::CommOp;

/// Records a finished wait that started at `start` (raw ticks; `None`: not recording).
#[inline]
fn waited(start: Option<u64>, sensor: u64, fd: i32, ret: i32) {
    let Some(start) = start else {
        return;
    };
    let e = errno();
    guard((), || {
        let result = result_of(ret as isize, e);
        comm::record(
            C,
            sensor,
            CommOp::Wait,
            fd as i64,
            start,
            result,
            &RawEndpoint::NONE,
        );
    });
    set_errno(e);
}

/// Start ticks of a wrapped call, never unwinding.
#[inline]
fn start() -> Option<u64> {
    guard(None, || comm::start(C))
}

/// `poll(2)`, recorded as a wait.
///
/// # Safety
/// As for `poll(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_poll(
    sensor: u64,
    fds: *mut libc::pollfd,
    nfds: libc::nfds_t,
    timeout: i32,
) -> i32 {
    let t = start();
    // SAFETY: forwarded as is.
    let r = unsafe { libc::poll(fds, nfds, timeout) };
    waited(t, sensor, -1, r);
    r
}

/// `ppoll(2)`, recorded as a wait.
///
/// # Safety
/// As for `ppoll(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_ppoll(
    sensor: u64,
    fds: *mut libc::pollfd,
    nfds: libc::nfds_t,
    timeout: *const libc::timespec,
    sigmask: *const libc::sigset_t,
) -> i32 {
    let t = start();
    // SAFETY: forwarded as is.
    let r = unsafe { libc::ppoll(fds, nfds, timeout, sigmask) };
    waited(t, sensor, -1, r);
    r
}

/// `select(2)`, recorded as a wait.
///
/// # Safety
/// As for `select(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_select(
    sensor: u64,
    nfds: i32,
    readfds: *mut libc::fd_set,
    writefds: *mut libc::fd_set,
    exceptfds: *mut libc::fd_set,
    timeout: *mut libc::timeval,
) -> i32 {
    let t = start();
    // SAFETY: forwarded as is.
    let r = unsafe { libc::select(nfds, readfds, writefds, exceptfds, timeout) };
    waited(t, sensor, -1, r);
    r
}

/// `pselect(2)`, recorded as a wait.
///
/// # Safety
/// As for `pselect(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_pselect(
    sensor: u64,
    nfds: i32,
    readfds: *mut libc::fd_set,
    writefds: *mut libc::fd_set,
    exceptfds: *mut libc::fd_set,
    timeout: *const libc::timespec,
    sigmask: *const libc::sigset_t,
) -> i32 {
    let t = start();
    // SAFETY: forwarded as is.
    let r = unsafe { libc::pselect(nfds, readfds, writefds, exceptfds, timeout, sigmask) };
    waited(t, sensor, -1, r);
    r
}

/// `epoll_wait(2)`, recorded as a wait on `epfd`.
///
/// # Safety
/// As for `epoll_wait(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_epoll_wait(
    sensor: u64,
    epfd: i32,
    events: *mut libc::epoll_event,
    maxevents: i32,
    timeout: i32,
) -> i32 {
    let t = start();
    // SAFETY: forwarded as is.
    let r = unsafe { libc::epoll_wait(epfd, events, maxevents, timeout) };
    waited(t, sensor, epfd, r);
    r
}

/// `epoll_pwait(2)`, recorded as a wait on `epfd`.
///
/// # Safety
/// As for `epoll_pwait(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_epoll_pwait(
    sensor: u64,
    epfd: i32,
    events: *mut libc::epoll_event,
    maxevents: i32,
    timeout: i32,
    sigmask: *const libc::sigset_t,
) -> i32 {
    let t = start();
    // SAFETY: forwarded as is.
    let r = unsafe { libc::epoll_pwait(epfd, events, maxevents, timeout, sigmask) };
    waited(t, sensor, epfd, r);
    r
}
