//! Recorded communication for Rust programs: wrappers around raw descriptors and around
//! `std::net` sockets that record each call as a `Comm` event (start, duration, bytes or
//! −errno, peer) and each socket's endpoints once as a `Socket` event.
//!
//! ```no_run
//! use std::io::{Read, Write};
//! const SEND: u64 = 0x51;
//! let mut s = p5_runtime::net::TcpStream::connect(SEND, "127.0.0.1:7000")?;
//! s.write_all(b"ping")?;                       // Send events
//! let mut buf = [0u8; 4];
//! s.read_exact(&mut buf)?;                     // Recv events
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! The wrappers own the std socket, so dropping one records a `Close` and forgets the
//! descriptor's endpoints before the descriptor is closed. [`compat`] has drop-in
//! replacements for `std::net` with std's signatures (what `p5-instrument --comm` uses).

pub mod compat;

use crate::comm;
use crate::record::RawEndpoint;
use p5_wire::{CommOp, RuntimeKind, SensorId};
use std::io::{self, IoSlice, Read, Write};
use std::mem::ManuallyDrop;
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd, OwnedFd, RawFd};

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
    if !matches!(op, CommOp::Connect | CommOp::Accept | CommOp::Close) {
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

/// A `std::net::TcpStream` whose reads and writes are recorded.
#[derive(Debug)]
pub struct TcpStream {
    inner: ManuallyDrop<std::net::TcpStream>,
    sensor: SensorId,
}

impl TcpStream {
    /// Connects like `std::net::TcpStream::connect`, recording the connect and the socket.
    pub fn connect(sensor: SensorId, addr: impl ToSocketAddrs) -> io::Result<Self> {
        let mut last = io::Error::new(io::ErrorKind::InvalidInput, "no addresses to connect to");
        for a in addr.to_socket_addrs()? {
            let t = comm::start(RUST);
            let r = std::net::TcpStream::connect(a);
            let fd = r.as_ref().map_or(-1, |s| s.as_raw_fd());
            finish(t, sensor, CommOp::Connect, fd, &r, |_| 0, Some(&a));
            match r {
                Ok(s) => {
                    comm::note_socket(RUST, sensor, fd, true, &RawEndpoint::from_addr(&a));
                    return Ok(TcpStream::from_std(sensor, s));
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Wraps a connected stream (its endpoints are recorded on first use).
    pub fn from_std(sensor: SensorId, s: std::net::TcpStream) -> Self {
        TcpStream {
            inner: ManuallyDrop::new(s),
            sensor,
        }
    }

    /// The std stream.
    pub fn get_ref(&self) -> &std::net::TcpStream {
        &self.inner
    }

    /// Unwraps the std stream (no close is recorded).
    pub fn into_inner(self) -> std::net::TcpStream {
        let mut me = ManuallyDrop::new(self);
        // SAFETY: `me` is never dropped, so the stream is taken exactly once.
        unsafe { ManuallyDrop::take(&mut me.inner) }
    }

    /// Shuts down, recorded.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        shutdown(self.sensor, self.get_ref().as_fd(), how)
    }
}

impl Read for TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        recv(self.sensor, self.get_ref().as_fd(), buf, 0)
    }
}

impl Write for TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        send(self.sensor, self.get_ref().as_fd(), buf, libc::MSG_NOSIGNAL)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let t = comm::start(RUST);
        let r = (&mut self.get_ref()).write_vectored(bufs);
        finish(
            t,
            self.sensor,
            CommOp::SendMsg,
            self.as_raw_fd(),
            &r,
            |&n| n as i64,
            None,
        );
        r
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl AsRawFd for TcpStream {
    fn as_raw_fd(&self) -> RawFd {
        self.get_ref().as_raw_fd()
    }
}

impl AsFd for TcpStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.get_ref().as_fd()
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        // SAFETY: taken once, here; `inner` is not used afterwards.
        let s = unsafe { ManuallyDrop::take(&mut self.inner) };
        let _ = close(self.sensor, OwnedFd::from(s));
    }
}

/// A `std::net::TcpListener` whose accepts are recorded.
#[derive(Debug)]
pub struct TcpListener {
    inner: std::net::TcpListener,
    sensor: SensorId,
}

impl TcpListener {
    /// Binds like `std::net::TcpListener::bind`.
    pub fn bind(sensor: SensorId, addr: impl ToSocketAddrs) -> io::Result<Self> {
        Ok(TcpListener {
            inner: std::net::TcpListener::bind(addr)?,
            sensor,
        })
    }

    /// Wraps a std listener.
    pub fn from_std(sensor: SensorId, l: std::net::TcpListener) -> Self {
        TcpListener { inner: l, sensor }
    }

    /// The std listener.
    pub fn get_ref(&self) -> &std::net::TcpListener {
        &self.inner
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// Accepts a connection, recording the accept (with the peer) and the new socket.
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let t = comm::start(RUST);
        let r = self.inner.accept();
        let peer = r.as_ref().ok().map(|(_, a)| *a);
        let fd = self.inner.as_raw_fd();
        finish(
            t,
            self.sensor,
            CommOp::Accept,
            fd,
            &r,
            |(s, _)| s.as_raw_fd() as i64,
            peer.as_ref(),
        );
        let (s, a) = r?;
        comm::note_socket(
            RUST,
            self.sensor,
            s.as_raw_fd(),
            true,
            &RawEndpoint::from_addr(&a),
        );
        Ok((TcpStream::from_std(self.sensor, s), a))
    }
}

/// A `std::net::UdpSocket` whose datagrams are recorded.
#[derive(Debug)]
pub struct UdpSocket {
    inner: ManuallyDrop<std::net::UdpSocket>,
    sensor: SensorId,
}

impl UdpSocket {
    /// Binds like `std::net::UdpSocket::bind`.
    pub fn bind(sensor: SensorId, addr: impl ToSocketAddrs) -> io::Result<Self> {
        Ok(Self::from_std(sensor, std::net::UdpSocket::bind(addr)?))
    }

    /// Wraps a std socket.
    pub fn from_std(sensor: SensorId, s: std::net::UdpSocket) -> Self {
        UdpSocket {
            inner: ManuallyDrop::new(s),
            sensor,
        }
    }

    /// The std socket.
    pub fn get_ref(&self) -> &std::net::UdpSocket {
        &self.inner
    }

    /// Sends a datagram to `addr`, recorded with `addr` as peer.
    pub fn send_to(&self, buf: &[u8], addr: SocketAddr) -> io::Result<usize> {
        let t = comm::start(RUST);
        let r = self.get_ref().send_to(buf, addr);
        finish(
            t,
            self.sensor,
            CommOp::SendTo,
            self.raw(),
            &r,
            |&n| n as i64,
            Some(&addr),
        );
        r
    }

    /// Receives a datagram, recorded with its source as peer.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let t = comm::start(RUST);
        let r = self.get_ref().recv_from(buf);
        let peer = r.as_ref().ok().map(|(_, a)| *a);
        finish(
            t,
            self.sensor,
            CommOp::RecvFrom,
            self.raw(),
            &r,
            |(n, _)| *n as i64,
            peer.as_ref(),
        );
        r
    }

    /// Connects (sets the default peer), recorded; the socket's endpoints are recorded anew.
    pub fn connect(&self, addr: SocketAddr) -> io::Result<()> {
        let t = comm::start(RUST);
        let r = self.get_ref().connect(addr);
        finish(
            t,
            self.sensor,
            CommOp::Connect,
            self.raw(),
            &r,
            |_| 0,
            Some(&addr),
        );
        if r.is_ok() {
            comm::note_socket(
                RUST,
                self.sensor,
                self.raw(),
                true,
                &RawEndpoint::from_addr(&addr),
            );
        }
        r
    }

    /// Sends on a connected socket, recorded.
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        send(self.sensor, self.get_ref().as_fd(), buf, 0)
    }

    /// Receives on a connected socket, recorded.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        recv(self.sensor, self.get_ref().as_fd(), buf, 0)
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.get_ref().local_addr()
    }

    fn raw(&self) -> RawFd {
        self.get_ref().as_raw_fd()
    }
}

impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.raw()
    }
}

impl Drop for UdpSocket {
    fn drop(&mut self) {
        // SAFETY: taken once, here; `inner` is not used afterwards.
        let s = unsafe { ManuallyDrop::take(&mut self.inner) };
        let _ = close(self.sensor, OwnedFd::from(s));
    }
}
