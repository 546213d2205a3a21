//! One connection to the log server: handshake, then non-blocking writes and ack reads.
//!
//! Connecting uses short timeouts (the flusher may block briefly, the application never);
//! after the handshake the socket is non-blocking and the flusher writes whatever the kernel
//! accepts, polling it together with its doorbell. A frame is never interleaved with another:
//! the caller ([`crate::outbox`]) keeps track of partially written frames.

use crate::datagram_pings::DatagramPinger;
use p5_wire::data::Ack;
use p5_wire::frame::{self, FrameType, HEADER_LEN};
use p5_wire::{Caps, Hello, HelloAck};
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// Timeout of one TCP connect attempt.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(250);
/// Timeout for the handshake reply and blocking handshake writes.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_millis(1000);
/// Largest server → client frame accepted.
const MAX_SERVER_FRAME: u32 = 64 * 1024;

/// Something the server said after the handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Durable-count acknowledgement.
    Ack(Ack),
    /// The server closes the connection, with a reason.
    Error(String),
}

/// A connected, handshaken log-server connection.
#[derive(Debug)]
pub struct Conn {
    sock: TcpStream,
    inbuf: Vec<u8>,
    /// Capabilities both sides accepted.
    pub caps: Caps,
    /// Clock pings over UDP, if the server accepted them and a socket could be opened.
    pub udp: Option<DatagramPinger>,
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

fn read_frame_blocking(sock: &mut TcpStream) -> io::Result<(u8, Vec<u8>)> {
    let mut h = [0u8; HEADER_LEN];
    sock.read_exact(&mut h)?;
    let (len, crc) = frame::parse_header(&h, MAX_SERVER_FRAME)
        .map_err(|e| bad(format!("handshake reply: {e}")))?;
    let mut payload = vec![0u8; len as usize];
    sock.read_exact(&mut payload)?;
    let f = frame::check(crc, &payload).map_err(|e| bad(format!("handshake reply: {e}")))?;
    Ok((f.ty, f.body.to_vec()))
}

/// The process uid a hello frame announces.
fn process_uid(hello_frame: &[u8]) -> Option<u64> {
    let (f, _) = frame::decode(hello_frame).ok()?;
    Some(Hello::decode_body(f.body).ok()?.identity.process_uid)
}

impl Conn {
    /// Connects to `addr` (`host:port`), sends `hello` (an encoded frame) and waits for the
    /// server's `HelloAck`.
    pub fn open(addr: &str, hello: &[u8]) -> io::Result<Conn> {
        let mut last = io::Error::new(io::ErrorKind::NotFound, format!("no address for {addr}"));
        for a in addr.to_socket_addrs()? {
            match TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
                Ok(sock) => return Self::handshake(sock, hello),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn handshake(mut sock: TcpStream, hello: &[u8]) -> io::Result<Conn> {
        sock.set_nodelay(true)?;
        sock.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
        sock.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
        sock.write_all(hello)?;
        let (ty, body) = read_frame_blocking(&mut sock)?;
        match FrameType::from_u8(ty) {
            Some(FrameType::HelloAck) => {
                let ack =
                    HelloAck::decode_body(&body).map_err(|e| bad(format!("bad hello ack: {e}")))?;
                sock.set_nonblocking(true)?;
                p5_rxstamp::enable(sock.as_raw_fd());
                let caps = ack.caps.intersect(Caps::ALL);
                let udp = match (caps.contains(Caps::DATAGRAM_PINGS), process_uid(hello)) {
                    (true, Some(uid)) => sock
                        .peer_addr()
                        .and_then(|a| DatagramPinger::open(a, uid, Instant::now()))
                        .ok(),
                    _ => None,
                };
                Ok(Conn {
                    sock,
                    inbuf: Vec::new(),
                    caps,
                    udp,
                })
            }
            Some(FrameType::Error) => {
                let msg = p5_wire::codec::Reader::new(&body)
                    .str("error")
                    .unwrap_or_else(|_| "unreadable error".into());
                Err(io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    format!("log server refused: {msg}"),
                ))
            }
            _ => Err(bad(format!("unexpected handshake reply type {ty:#04x}"))),
        }
    }

    /// The socket descriptor (for polling, and for a forked child to close its copy).
    pub fn raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// Writes as much of `buf` as the kernel takes now; `Ok(0)` means "would block".
    pub fn write_some(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.sock.write(buf) {
            Ok(0) if !buf.is_empty() => Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// Reads whatever arrived and returns the complete server frames, and when the newest of
    /// them arrived on `now()`'s clock: the kernel's receive stamp of the last packet read
    /// (see [`p5_rxstamp`]), else `now()` right after that read. It is the receipt time of
    /// the last ack, a clock sample. An orderly close by the server is an error
    /// (`UnexpectedEof`).
    pub fn read_replies(&mut self, now: impl Fn() -> u64) -> io::Result<(Vec<Reply>, u64)> {
        let mut buf = [0u8; 4096];
        let mut read_at = None;
        loop {
            match p5_rxstamp::recv(self.sock.as_raw_fd(), &mut buf) {
                Ok((0, _)) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok((n, age)) => {
                    read_at = Some(now().saturating_sub(age.unwrap_or(0)));
                    self.inbuf.extend_from_slice(&buf[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            if self.inbuf.len() > 1 << 20 {
                return Err(bad("server sent too much"));
            }
        }
        let mut out = Vec::new();
        let mut pos = 0;
        loop {
            let rest = &self.inbuf[pos..];
            if let Some(h) = rest.first_chunk::<HEADER_LEN>() {
                frame::parse_header(h, MAX_SERVER_FRAME)
                    .map_err(|e| bad(format!("server frame: {e}")))?;
            }
            match frame::decode(rest) {
                Ok((f, n)) => {
                    match FrameType::from_u8(f.ty) {
                        Some(FrameType::Ack) => out.push(Reply::Ack(
                            Ack::decode_body(f.body).map_err(|e| bad(format!("bad ack: {e}")))?,
                        )),
                        Some(FrameType::Error) => out.push(Reply::Error(
                            p5_wire::codec::Reader::new(f.body)
                                .str("error")
                                .unwrap_or_else(|_| "unreadable error".into()),
                        )),
                        // Anything else from the server is ignored (additive evolution).
                        _ => {}
                    }
                    pos += n;
                }
                Err(p5_wire::DecodeError::Truncated { .. }) => break,
                Err(e) => return Err(bad(format!("server frame: {e}"))),
            }
        }
        self.inbuf.drain(..pos);
        Ok((out, read_at.unwrap_or_else(now)))
    }
}
