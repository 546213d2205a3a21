//! Recorded communication for Rust programs: wrappers around raw descriptors and around
//! `std::net` sockets that record each call as a `Comm` event (start, duration, bytes or
//! −errno, peer) and each socket's endpoints once as a `Socket` event.
//!
//! ```no_run
//! use std::io::{Read, Write};
//! const SEND: u64 = 0x51;
//! let mut s = p5_runtime::net::TcpStream::p5_connect(SEND, "127.0.0.1:7000")?;
//! s.write_all(b"ping")?;                       // Send events
//! let mut buf = [0u8; 4];
//! s.read_exact(&mut buf)?;                     // Recv events
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! The socket types are [`compat`]'s, re-exported here: drop-in replacements for `std::net`'s
//! with std's signatures (what `p5-instrument --comm` uses) plus `p5_` constructors that take
//! a sensor id first. They own the std socket, so dropping one records a `Close` and forgets
//! the descriptor's endpoints before the descriptor is closed.

pub mod compat;

pub use compat::{Incoming, TcpListener, TcpStream, UdpSocket};

use crate::comm;
use crate::record::RawEndpoint;
use p5_wire::{CommOp, RuntimeKind, SensorId};
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsRawFd, BorrowedFd, IntoRawFd, OwnedFd, RawFd};

const RUST: RuntimeKind = RuntimeKind::Rust;

fn finish<T>(
    start: Option<u64>,
    sensor: SensorId,
    op: CommOp,
    fd: RawFd,
    r: &io::Result<T>,
    count: impl Fn(&T) -> i64,
    peer: Option<&SocketAddr>,
) {
    let Some(start) = start else {
        return;
    };
    let result = match r {
        Ok(v) => count(v),
        Err(e) => -(e.raw_os_error().unwrap_or(libc::EIO) as i64),
    };
    let peer = RawEndpoint::from_opt(peer);
    if !matches!(
        op,
        CommOp::Connect | CommOp::Accept | CommOp::Close | CommOp::Wait
    ) {
        comm::note_socket(RUST, sensor, fd, false, &RawEndpoint::NONE);
    }
    comm::record(RUST, sensor, op, fd as i64, start, result, &peer);
}

fn io_result(ret: isize) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// `send(2)` on any socket descriptor, recorded.
pub fn send(sensor: SensorId, fd: BorrowedFd<'_>, buf: &[u8], flags: i32) -> io::Result<usize> {
    let t = comm::start(RUST);
    // SAFETY: `buf` is valid for its length; `fd` is borrowed and open.
    let r = io_result(unsafe { libc::send(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len(), flags) });
    finish(
        t,
        sensor,
        CommOp::Send,
        fd.as_raw_fd(),
        &r,
        |&n| n as i64,
        None,
    );
    r
}

/// `recv(2)` on any socket descriptor, recorded.
pub fn recv(sensor: SensorId, fd: BorrowedFd<'_>, buf: &mut [u8], flags: i32) -> io::Result<usize> {
    let t = comm::start(RUST);
    // SAFETY: `buf` is valid for writes of its length.
    let r =
        io_result(unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), flags) });
    finish(
        t,
        sensor,
        CommOp::Recv,
        fd.as_raw_fd(),
        &r,
        |&n| n as i64,
        None,
    );
    r
}

/// `read(2)`, recorded.
pub fn read(sensor: SensorId, fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    let t = comm::start(RUST);
    // SAFETY: `buf` is valid for writes of its length.
    let r = io_result(unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) });
    finish(
        t,
        sensor,
        CommOp::Read,
        fd.as_raw_fd(),
        &r,
        |&n| n as i64,
        None,
    );
    r
}

/// `write(2)`, recorded.
pub fn write(sensor: SensorId, fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    let t = comm::start(RUST);
    // SAFETY: `buf` is valid for its length.
    let r = io_result(unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) });
    finish(
        t,
        sensor,
        CommOp::Write,
        fd.as_raw_fd(),
        &r,
        |&n| n as i64,
        None,
    );
    r
}

/// `poll(2)`, recorded as a wait (`fd` −1, the result the number of ready descriptors), so
/// the time counts as waiting, not calculating. `timeout_ms` as for poll: −1 waits forever.
pub fn poll(sensor: SensorId, fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
    let t = comm::start(RUST);
    // SAFETY: `fds` is valid for reads and writes of its length.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    let r = io_result(r as isize);
    finish(t, sensor, CommOp::Wait, -1, &r, |&n| n as i64, None);
    r
}

/// `epoll_wait(2)` on `epfd`, recorded as a wait (see [`poll`]).
pub fn epoll_wait(
    sensor: SensorId,
    epfd: BorrowedFd<'_>,
    events: &mut [libc::epoll_event],
    timeout_ms: i32,
) -> io::Result<usize> {
    let t = comm::start(RUST);
    let max = i32::try_from(events.len()).unwrap_or(i32::MAX);
    // SAFETY: `events` is valid for writes of `max` entries; `epfd` is borrowed and open.
    let r = unsafe { libc::epoll_wait(epfd.as_raw_fd(), events.as_mut_ptr(), max, timeout_ms) };
    let r = io_result(r as isize);
    let fd = epfd.as_raw_fd();
    finish(t, sensor, CommOp::Wait, fd, &r, |&n| n as i64, None);
    r
}

/// `shutdown(2)`, recorded.
pub fn shutdown(sensor: SensorId, fd: BorrowedFd<'_>, how: Shutdown) -> io::Result<()> {
    let how = match how {
        Shutdown::Read => libc::SHUT_RD,
        Shutdown::Write => libc::SHUT_WR,
        Shutdown::Both => libc::SHUT_RDWR,
    };
    let t = comm::start(RUST);
    // SAFETY: plain system call on a borrowed descriptor.
    let r = io_result(unsafe { libc::shutdown(fd.as_raw_fd(), how) } as isize).map(|_| ());
    finish(t, sensor, CommOp::Shutdown, fd.as_raw_fd(), &r, |_| 0, None);
    r
}

/// Closes `fd`, recorded; forgets its endpoints first.
pub fn close(sensor: SensorId, fd: OwnedFd) -> io::Result<()> {
    let raw = fd.into_raw_fd();
    comm::forget(raw);
    let t = comm::start(RUST);
    // SAFETY: we own `raw` (taken from an OwnedFd) and close it exactly once.
    let r = io_result(unsafe { libc::close(raw) } as isize).map(|_| ());
    finish(t, sensor, CommOp::Close, raw, &r, |_| 0, None);
    r
}
