//! A framed TCP link: reads whole frames (envelope checked: length limit, crc32c) from a
//! blocking socket with timeouts, and writes encoded frames. Used for the upstream
//! connection, relayed child connections and `ctl`.
//!
//! Memory is bounded whatever peers send: each reader may hold one read chunk (16 KiB) of its
//! own, and everything it buffers beyond that counts against one process-wide budget
//! ([`MAX_BUFFERED`]); a reader that cannot reserve room does not read (the peer's bytes wait
//! in the kernel, though a close is still noticed) until others drain. Worst case:
//! connections × 16 KiB + `MAX_BUFFERED`. A reader accepts frames of at
//! most [`HELLO_CAP`] until [`FrameReader::lift_cap`] (called once a Hello is accepted), and
//! a frame must complete within [`FRAME_TIMEOUT`] of its first byte, so a peer that starts a
//! large frame and stalls gives its share back.

use p5_wire::frame::{self, HEADER_LEN};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Largest frame accepted from a peer.
pub const MAX_FRAME: u32 = frame::MAX_FRAME_LEN;
/// Largest frame accepted before [`FrameReader::lift_cap`]: room for any Hello or `Control`.
pub const HELLO_CAP: u32 = 1 << 20;
/// Bytes of unfinished input all readers of this process may hold together.
pub const MAX_BUFFERED: usize = 24 << 20;
/// Longest time from a frame's first byte to its last.
pub const FRAME_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 16 * 1024;

/// Bytes currently held by all readers.
static BUFFERED: AtomicUsize = AtomicUsize::new(0);

/// Bytes of input buffered by all frame readers of this process (for status and tests).
pub fn buffered_bytes() -> usize {
    BUFFERED.load(Ordering::Relaxed)
}

fn reserve(n: usize) -> bool {
    BUFFERED
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| {
            (b + n <= MAX_BUFFERED).then_some(b + n)
        })
        .is_ok()
}

fn release(n: usize) {
    BUFFERED.fetch_sub(n, Ordering::AcqRel);
}

/// Link errors.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The socket failed or closed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The peer sent bytes that are not a frame.
    #[error("bad frame from peer: {0}")]
    Garbage(#[from] p5_wire::DecodeError),
    /// The peer closed the connection.
    #[error("connection closed by peer")]
    Closed,
    /// A frame did not complete within [`FRAME_TIMEOUT`] of its first byte.
    #[error("frame not completed within {0:?} (slow sender)")]
    Slow(Duration),
}

/// One received frame.
#[derive(Debug, Clone)]
pub struct Frame {
    /// Type byte.
    pub ty: u8,
    /// Body.
    pub body: Vec<u8>,
    /// The encoded frame (envelope included), for forwarding unchanged.
    pub raw: Vec<u8>,
    /// How long before the read that completed it returned the kernel received the newest
    /// packet of that read, ns — when the reader asked for kernel receive stamps
    /// ([`FrameReader::stamped`]) and the frame was completed by a fresh read. Its receipt
    /// time is then the clock read after [`FrameReader::poll`] returned, less this: no later
    /// than the truth by more than the read's own newer packets (a two-way clock sample can
    /// only be looser for it, never wrong).
    pub rx_age_ns: Option<u64>,
}

/// Reads frames from a socket, keeping partial input between calls.
#[derive(Debug)]
pub struct FrameReader {
    stream: TcpStream,
    buf: Vec<u8>,
    cap: u32,
    started: Option<Instant>,
    budgeted: bool,
    /// Bytes reserved from the process-wide budget (what `buf` holds beyond one chunk).
    held: usize,
    /// Reads take the kernel's receive stamp (`SO_TIMESTAMPNS`, see [`Self::stamped`]).
    stamps: bool,
}

impl Drop for FrameReader {
    fn drop(&mut self) {
        release(self.held);
    }
}

impl FrameReader {
    /// Wraps a socket (its read timeout decides how long [`Self::poll`] blocks).
    pub fn new(stream: TcpStream) -> Self {
        Self {
            stream,
            buf: Vec::new(),
            cap: HELLO_CAP,
            started: None,
            budgeted: true,
            held: 0,
            stamps: false,
        }
    }

    /// A reader for a peer this agent chose (its upstream, an agent it asked over `ctl`):
    /// full frame limit, outside the budget children share, so children that exhaust the
    /// budget cannot stall acknowledgements or replies.
    pub fn trusted(stream: TcpStream) -> Self {
        Self {
            stream,
            buf: Vec::new(),
            cap: MAX_FRAME,
            started: None,
            budgeted: false,
            held: 0,
            stamps: false,
        }
    }

    /// Asks the kernel to stamp the packets this reader receives, so frames completed by a
    /// fresh read carry [`Frame::rx_age_ns`]: a process woken by a packet reads its clock
    /// tens of microseconds after the packet arrived, and a clock sample taken then is that
    /// much off (see `p5_rxstamp`). Without kernel support frames carry no age.
    pub fn stamped(mut self) -> Self {
        self.stamps = p5_rxstamp::enable(self.stream.as_raw_fd());
        self
    }

    /// Accepts frames up to [`MAX_FRAME`] from now on (once the peer's Hello is accepted,
    /// and for trusted links such as the upstream one).
    pub fn lift_cap(&mut self) {
        self.cap = MAX_FRAME;
    }

    /// The socket.
    pub fn get_ref(&self) -> &TcpStream {
        &self.stream
    }

    fn take_frame(&mut self, rx_age_ns: Option<u64>) -> Result<Option<Frame>, LinkError> {
        let Some(h) = self.buf.first_chunk::<HEADER_LEN>() else {
            return Ok(None);
        };
        let (len, crc) = frame::parse_header(h, self.cap)?;
        let total = HEADER_LEN + len as usize;
        if self.buf.len() < total {
            return Ok(None);
        }
        let raw: Vec<u8> = self.buf.drain(..total).collect();
        self.sync_held();
        self.started = (!self.buf.is_empty()).then(Instant::now);
        if self.buf.capacity() > 4 * READ_CHUNK && self.buf.len() < READ_CHUNK {
            self.buf.shrink_to(READ_CHUNK);
        }
        let f = frame::check(crc, &raw[HEADER_LEN..])?;
        Ok(Some(Frame {
            ty: f.ty,
            body: f.body.to_vec(),
            raw,
            rx_age_ns,
        }))
    }

    /// Gives back budget beyond what `buf` now holds past its own chunk.
    fn sync_held(&mut self) {
        let target = if self.budgeted {
            self.buf.len().saturating_sub(READ_CHUNK)
        } else {
            0
        };
        if target < self.held {
            release(self.held - target);
            self.held = target;
        }
    }

    /// True if the peer has closed its side (checked without consuming or blocking).
    fn peer_closed(&self) -> bool {
        let mut b = [0u8; 1];
        // SAFETY: a valid one-byte buffer; MSG_PEEK | MSG_DONTWAIT neither consumes nor blocks.
        let n = unsafe {
            libc::recv(
                std::os::fd::AsRawFd::as_raw_fd(&self.stream),
                b.as_mut_ptr().cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        n == 0
    }

    /// Returns the next complete frame, or `None` if none arrived within the socket's read
    /// timeout (or the process-wide budget is spent for now).
    pub fn poll(&mut self) -> Result<Option<Frame>, LinkError> {
        if let Some(f) = self.take_frame(None)? {
            return Ok(Some(f));
        }
        if self.started.is_some_and(|t| t.elapsed() > FRAME_TIMEOUT) {
            return Err(LinkError::Slow(FRAME_TIMEOUT));
        }
        let need = if self.budgeted {
            READ_CHUNK - READ_CHUNK.saturating_sub(self.buf.len())
        } else {
            0
        };
        if need > 0 && !reserve(need) {
            // Back-pressure: leave the peer's bytes in the kernel until others drain, but
            // notice a peer that went away.
            if self.peer_closed() {
                return Err(LinkError::Closed);
            }
            std::thread::sleep(Duration::from_millis(10));
            return Ok(None);
        }
        self.held += need;
        let mut chunk = [0u8; READ_CHUNK];
        let mut age = None;
        let r = if self.stamps {
            p5_rxstamp::recv(self.stream.as_raw_fd(), &mut chunk).map(|(n, a)| {
                age = a;
                n
            })
        } else {
            self.stream.read(&mut chunk)
        };
        if let Ok(n) = r {
            if self.buf.is_empty() && n > 0 {
                self.started = Some(Instant::now());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
        self.sync_held();
        match r {
            Ok(0) => Err(LinkError::Closed),
            Ok(_) => self.take_frame(age),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Ok(None)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Waits up to `timeout` for a frame.
    pub fn next_within(&mut self, timeout: Duration) -> Result<Option<Frame>, LinkError> {
        let end = Instant::now() + timeout;
        loop {
            if let Some(f) = self.poll()? {
                return Ok(Some(f));
            }
            if Instant::now() >= end {
                return Ok(None);
            }
        }
    }
}

/// Resolves and connects with a timeout (the first address that answers).
pub fn connect(addr: &str, timeout: Duration) -> io::Result<TcpStream> {
    let addrs: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
    let mut last = io::Error::new(io::ErrorKind::InvalidInput, "address resolved to nothing");
    for a in addrs {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => {
                s.set_nodelay(true)?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Encodes one frame.
pub fn encode(ty: p5_wire::FrameType, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + 1 + body.len());
    frame::encode(&mut out, ty as u8, body);
    out
}

/// Encodes a `Control` frame carrying `json`.
pub fn control_frame(json: &str) -> Vec<u8> {
    let mut body = Vec::with_capacity(json.len() + 4);
    p5_wire::codec::put_str(&mut body, json);
    encode(p5_wire::FrameType::Control, &body)
}

/// The JSON text of a `Control` (or message of an `Error`) frame body.
pub fn body_str(body: &[u8]) -> Result<String, p5_wire::DecodeError> {
    p5_wire::codec::Reader::new(body).str("control")
}

/// Writes all bytes with a bounded wait (the socket's write timeout must be set).
pub fn write_all(mut s: &TcpStream, bytes: &[u8]) -> io::Result<()> {
    s.write_all(bytes)?;
    s.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn frames_split_across_reads_and_garbage() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let t = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let f = control_frame("{\"op\":\"status\"}");
            write_all(&s, &f[..5]).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            write_all(&s, &f[5..]).unwrap();
            write_all(&s, b"\xff\xff\xff\xffgarbage!").unwrap();
        });
        let s = connect(&addr, Duration::from_secs(2)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
        let mut r = FrameReader::new(s);
        let f = r.next_within(Duration::from_secs(2)).unwrap().unwrap();
        assert_eq!(f.ty, p5_wire::FrameType::Control as u8);
        assert_eq!(body_str(&f.body).unwrap(), "{\"op\":\"status\"}");
        let e = loop {
            match r.poll() {
                Ok(Some(_)) => panic!("garbage decoded"),
                Ok(None) => continue,
                Err(e) => break e,
            }
        };
        assert!(matches!(e, LinkError::Garbage(_)), "{e}");
        t.join().unwrap();
    }
}
