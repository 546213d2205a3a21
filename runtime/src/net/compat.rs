//! Drop-in replacements for `std::net`'s sockets that record what they do: the path
//! `p5_runtime::net::compat` offers everything `std::net` does (it re-exports it), with
//! [`TcpStream`], [`TcpListener`] and [`UdpSocket`] replaced by recording types with std's
//! API — the same constructors (`connect(addr)`, `bind(addr)`), `Read`/`Write` for `T` and
//! `&T`, `try_clone`, `shutdown`, `accept`, `incoming`, and every other `&self` method of the
//! std type through `Deref` (`peer_addr`, `set_nodelay`, `set_read_timeout`, …).
//!
//! `p5-instrument --comm` rewrites a Rust crate's `std::net` imports and paths to this module
//! and each constructor call to its `p5_` twin taking the call site's sensor id first
//! (`TcpStream::connect(a)` → `TcpStream::p5_connect(0x…, a)`); every socket records its
//! connect/accept, reads, writes, shutdown and close — bytes and endpoints — under the sensor
//! of the call that created it (a listener's accepted streams: the listener's). Sockets made
//! by the std-signature constructors record under sensor 0.
//!
//! Interoperating with code that wants std's types: `into_inner()` (or `.into()`) gives the
//! std socket (no close is recorded for it), `get_ref()` and deref coercion (`&*s`) borrow it,
//! `From<std::net::…>` wraps one.

pub use std::net::*;

use super::{RUST, close, finish, recv, send, shutdown as shut};
use crate::comm;
use crate::record::RawEndpoint;
use p5_wire::{CommOp, SensorId};
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Implements the ownership plumbing shared by the three socket types: `Deref` to the std
/// type, `get_ref`, `into_inner`, descriptor traits, `From` both ways and a recorded close on
/// drop.
macro_rules! socket {
    ($name:ident) => {
        impl $name {
            /// Wraps a std socket; its calls record under `sensor`.
            pub fn from_std(sensor: SensorId, s: std::net::$name) -> Self {
                $name {
                    inner: ManuallyDrop::new(s),
                    sensor,
                }
            }

            /// The std socket.
            pub fn get_ref(&self) -> &std::net::$name {
                &self.inner
            }

            /// Unwraps the std socket (no close is recorded).
            pub fn into_inner(self) -> std::net::$name {
                let mut me = ManuallyDrop::new(self);
                // SAFETY: `me` is never dropped, so the socket is taken exactly once.
                unsafe { ManuallyDrop::take(&mut me.inner) }
            }

            /// Another handle to the same socket, recording under the same sensor.
            pub fn try_clone(&self) -> io::Result<Self> {
                Ok(Self::from_std(self.sensor, self.inner.try_clone()?))
            }
        }

        impl Deref for $name {
            type Target = std::net::$name;

            fn deref(&self) -> &std::net::$name {
                &self.inner
            }
        }

        impl From<std::net::$name> for $name {
            fn from(s: std::net::$name) -> Self {
                Self::from_std(0, s)
            }
        }

        impl From<$name> for std::net::$name {
            fn from(s: $name) -> Self {
                s.into_inner()
            }
        }

        impl AsRawFd for $name {
            fn as_raw_fd(&self) -> RawFd {
                self.inner.as_raw_fd()
            }
        }

        impl AsFd for $name {
            fn as_fd(&self) -> BorrowedFd<'_> {
                self.inner.as_fd()
            }
        }

        impl IntoRawFd for $name {
            fn into_raw_fd(self) -> RawFd {
                self.into_inner().into_raw_fd()
            }
        }

        impl FromRawFd for $name {
            unsafe fn from_raw_fd(fd: RawFd) -> Self {
                // SAFETY: the caller's promise (an open descriptor of this kind) is passed on.
                Self::from_std(0, unsafe { std::net::$name::from_raw_fd(fd) })
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                // SAFETY: taken once, here; `inner` is not used afterwards.
                let s = unsafe { ManuallyDrop::take(&mut self.inner) };
                let _ = close(self.sensor, OwnedFd::from(s));
            }
        }
    };
}

/// `std::net::TcpStream` with its connect, reads, writes, shutdown and close recorded.
#[derive(Debug)]
pub struct TcpStream {
    inner: ManuallyDrop<std::net::TcpStream>,
    sensor: SensorId,
}

socket!(TcpStream);

impl TcpStream {
    /// `std::net::TcpStream::connect`, recorded under sensor 0.
    pub fn connect<A: ToSocketAddrs>(addr: A) -> io::Result<TcpStream> {
        Self::p5_connect(0, addr)
    }

    /// `connect` recorded under `sensor` (each address tried is a `Connect` event).
    pub fn p5_connect<A: ToSocketAddrs>(sensor: SensorId, addr: A) -> io::Result<TcpStream> {
        let mut last = io::Error::new(io::ErrorKind::InvalidInput, "no addresses to connect to");
        for a in addr.to_socket_addrs()? {
            let t = comm::start(RUST);
            let r = std::net::TcpStream::connect(a);
            let fd = r.as_ref().map_or(-1, |s| s.as_raw_fd());
            finish(t, sensor, CommOp::Connect, fd, &r, |_| 0, Some(&a));
            match r {
                Ok(s) => {
                    comm::note_socket(RUST, sensor, fd, true, &RawEndpoint::from_addr(&a));
                    return Ok(Self::from_std(sensor, s));
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// `std::net::TcpStream::connect_timeout`, recorded under sensor 0.
    pub fn connect_timeout(addr: &SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        Self::p5_connect_timeout(0, addr, timeout)
    }

    /// `connect_timeout` recorded under `sensor`.
    pub fn p5_connect_timeout(
        sensor: SensorId,
        addr: &SocketAddr,
        timeout: Duration,
    ) -> io::Result<TcpStream> {
        let t = comm::start(RUST);
        let r = std::net::TcpStream::connect_timeout(addr, timeout);
        let fd = r.as_ref().map_or(-1, |s| s.as_raw_fd());
        finish(t, sensor, CommOp::Connect, fd, &r, |_| 0, Some(addr));
        let s = r?;
        comm::note_socket(RUST, sensor, fd, true, &RawEndpoint::from_addr(addr));
        Ok(Self::from_std(sensor, s))
    }

    /// Shuts down, recorded.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        shut(self.sensor, self.as_fd(), how)
    }
}

impl Read for &TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        recv(self.sensor, self.as_fd(), buf, 0)
    }

    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        let t = comm::start(RUST);
        let r = (&*self.inner).read_vectored(bufs);
        finish(
            t,
            self.sensor,
            CommOp::RecvMsg,
            self.as_raw_fd(),
            &r,
            |&n| n as i64,
            None,
        );
        r
    }
}

impl Write for &TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        send(self.sensor, self.as_fd(), buf, libc::MSG_NOSIGNAL)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let t = comm::start(RUST);
        let r = (&*self.inner).write_vectored(bufs);
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

impl Read for TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }

    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        (&*self).read_vectored(bufs)
    }
}

impl Write for TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        (&*self).write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `std::net::TcpListener` with its accepts and close recorded; accepted streams record under
/// the listener's sensor.
#[derive(Debug)]
pub struct TcpListener {
    inner: ManuallyDrop<std::net::TcpListener>,
    sensor: SensorId,
}

socket!(TcpListener);

impl TcpListener {
    /// `std::net::TcpListener::bind`, recorded under sensor 0.
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<TcpListener> {
        Self::p5_bind(0, addr)
    }

    /// `bind` recorded under `sensor` (the listening socket is described once bound).
    pub fn p5_bind<A: ToSocketAddrs>(sensor: SensorId, addr: A) -> io::Result<TcpListener> {
        let l = std::net::TcpListener::bind(addr)?;
        comm::note_socket(RUST, sensor, l.as_raw_fd(), true, &RawEndpoint::NONE);
        Ok(Self::from_std(sensor, l))
    }

    /// Accepts a connection, recording the accept (with the peer) and the new socket.
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let t = comm::start(RUST);
        let r = self.inner.accept();
        let peer = r.as_ref().ok().map(|(_, a)| *a);
        finish(
            t,
            self.sensor,
            CommOp::Accept,
            self.as_raw_fd(),
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

    /// The accepted connections, like `std::net::TcpListener::incoming`.
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming { listener: self }
    }
}

/// The iterator of [`TcpListener::incoming`]: never ends.
#[derive(Debug)]
pub struct Incoming<'a> {
    listener: &'a TcpListener,
}

impl Iterator for Incoming<'_> {
    type Item = io::Result<TcpStream>;

    fn next(&mut self) -> Option<io::Result<TcpStream>> {
        Some(self.listener.accept().map(|p| p.0))
    }
}

/// `std::net::UdpSocket` with its datagrams, connect and close recorded.
#[derive(Debug)]
pub struct UdpSocket {
    inner: ManuallyDrop<std::net::UdpSocket>,
    sensor: SensorId,
}

socket!(UdpSocket);

fn first_addr<A: ToSocketAddrs>(addr: A) -> io::Result<SocketAddr> {
    addr.to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no addresses to send data to"))
}

impl UdpSocket {
    /// `std::net::UdpSocket::bind`, recorded under sensor 0.
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<UdpSocket> {
        Self::p5_bind(0, addr)
    }

    /// `bind` recorded under `sensor` (the socket is described once bound).
    pub fn p5_bind<A: ToSocketAddrs>(sensor: SensorId, addr: A) -> io::Result<UdpSocket> {
        let s = std::net::UdpSocket::bind(addr)?;
        comm::note_socket(RUST, sensor, s.as_raw_fd(), true, &RawEndpoint::NONE);
        Ok(Self::from_std(sensor, s))
    }

    /// Sends a datagram to the first address of `addr`, recorded with it as peer.
    pub fn send_to<A: ToSocketAddrs>(&self, buf: &[u8], addr: A) -> io::Result<usize> {
        let addr = first_addr(addr)?;
        let t = comm::start(RUST);
        let r = self.inner.send_to(buf, addr);
        finish(
            t,
            self.sensor,
            CommOp::SendTo,
            self.as_raw_fd(),
            &r,
            |&n| n as i64,
            Some(&addr),
        );
        r
    }

    /// Receives a datagram, recorded with its source as peer.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let t = comm::start(RUST);
        let r = self.inner.recv_from(buf);
        let peer = r.as_ref().ok().map(|(_, a)| *a);
        finish(
            t,
            self.sensor,
            CommOp::RecvFrom,
            self.as_raw_fd(),
            &r,
            |(n, _)| *n as i64,
            peer.as_ref(),
        );
        r
    }

    /// Sets the default peer, trying each address of `addr`; each try is a `Connect` event.
    pub fn connect<A: ToSocketAddrs>(&self, addr: A) -> io::Result<()> {
        let mut last = io::Error::new(io::ErrorKind::InvalidInput, "no addresses to connect to");
        for a in addr.to_socket_addrs()? {
            let t = comm::start(RUST);
            let r = self.inner.connect(a);
            finish(
                t,
                self.sensor,
                CommOp::Connect,
                self.as_raw_fd(),
                &r,
                |_| 0,
                Some(&a),
            );
            match r {
                Ok(()) => {
                    let fd = self.as_raw_fd();
                    comm::note_socket(RUST, self.sensor, fd, true, &RawEndpoint::from_addr(&a));
                    return Ok(());
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Sends on a connected socket, recorded.
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        send(self.sensor, self.as_fd(), buf, 0)
    }

    /// Receives on a connected socket, recorded.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        recv(self.sensor, self.as_fd(), buf, 0)
    }
}
