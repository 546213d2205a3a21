//! Waits: `poll`, `ppoll`, `select`, `pselect`, `epoll_wait` and `epoll_pwait`, each recorded
//! as a `Wait` call (the *waiting* state): the epoll descriptor, or −1 for the set-based
//! calls, and the number of ready descriptors or −errno.

use crate::call_real;
use crate::guard::{self, Describe};
use crate::real::Real;
use libc::{c_int, epoll_event, fd_set, nfds_t, pollfd, sigset_t, timespec, timeval};
use p5_runtime::CommOp;
use p5_runtime::interpose::{RawEndpoint, sensor_id};

static POLL: Real = Real::new(c"poll");
static PPOLL: Real = Real::new(c"ppoll");
static SELECT: Real = Real::new(c"select");
static PSELECT: Real = Real::new(c"pselect");
static EPOLL_WAIT: Real = Real::new(c"epoll_wait");
static EPOLL_PWAIT: Real = Real::new(c"epoll_pwait");

/// Records a wait around `$call` (which runs the real function).
macro_rules! wait_call {
    ($name:literal, $fd:expr, $call:expr) => {{
        let call = guard::begin();
        let r = $call;
        if let Some(c) = call {
            c.finish(
                sensor_id($name),
                CommOp::Wait,
                $fd,
                r as isize,
                Describe::No,
                || RawEndpoint::NONE,
            );
        }
        r
    }};
}

/// `poll(2)`.
///
/// # Safety
/// As for `poll(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int {
    type F = unsafe extern "C" fn(*mut pollfd, nfds_t, c_int) -> c_int;
    wait_call!("poll", -1, call_real!(POLL, F, -1, (fds, n, timeout)))
}

/// `ppoll(2)`.
///
/// # Safety
/// As for `ppoll(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ppoll(
    fds: *mut pollfd,
    n: nfds_t,
    timeout: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    type F = unsafe extern "C" fn(*mut pollfd, nfds_t, *const timespec, *const sigset_t) -> c_int;
    wait_call!(
        "ppoll",
        -1,
        call_real!(PPOLL, F, -1, (fds, n, timeout, mask))
    )
}

/// `select(2)`.
///
/// # Safety
/// As for `select(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn select(
    n: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    timeout: *mut timeval,
) -> c_int {
    type F =
        unsafe extern "C" fn(c_int, *mut fd_set, *mut fd_set, *mut fd_set, *mut timeval) -> c_int;
    wait_call!(
        "select",
        -1,
        call_real!(SELECT, F, -1, (n, r, w, e, timeout))
    )
}

/// `pselect(2)`.
///
/// # Safety
/// As for `pselect(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pselect(
    n: c_int,
    r: *mut fd_set,
    w: *mut fd_set,
    e: *mut fd_set,
    timeout: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    type F = unsafe extern "C" fn(
        c_int,
        *mut fd_set,
        *mut fd_set,
        *mut fd_set,
        *const timespec,
        *const sigset_t,
    ) -> c_int;
    wait_call!(
        "pselect",
        -1,
        call_real!(PSELECT, F, -1, (n, r, w, e, timeout, mask))
    )
}

/// `epoll_wait(2)`.
///
/// # Safety
/// As for `epoll_wait(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn epoll_wait(
    epfd: c_int,
    events: *mut epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    type F = unsafe extern "C" fn(c_int, *mut epoll_event, c_int, c_int) -> c_int;
    wait_call!(
        "epoll_wait",
        epfd,
        call_real!(EPOLL_WAIT, F, -1, (epfd, events, max, timeout))
    )
}

/// `epoll_pwait(2)`.
///
/// # Safety
/// As for `epoll_pwait(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn epoll_pwait(
    epfd: c_int,
    events: *mut epoll_event,
    max: c_int,
    timeout: c_int,
    mask: *const sigset_t,
) -> c_int {
    type F = unsafe extern "C" fn(c_int, *mut epoll_event, c_int, c_int, *const sigset_t) -> c_int;
    wait_call!(
        "epoll_pwait",
        epfd,
        call_real!(EPOLL_PWAIT, F, -1, (epfd, events, max, timeout, mask))
    )
}
