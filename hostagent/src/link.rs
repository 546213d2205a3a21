//! A framed TCP link: reads whole frames (envelope checked: length limit, crc32c) from a
//! blocking socket with timeouts, and writes encoded frames. Used for the upstream
//! connection, relayed child connections and `ctl`.
//!
//! Memory is bounded whatever peers send ([`crate::budget`]): a reader of an accepted
//! connection ([`FrameReader::new`]) may buffer [`crate::budget::ALLOWANCE`] bytes of its
//! own; everything beyond counts against one process-wide pool, and a reader that cannot
//! reserve room does not read (the peer's bytes wait in the kernel, though a close is still
//! noticed) and evicts stalled holders. A reader accepts frames of at most [`HELLO_CAP`]
//! until [`FrameReader::lift_cap`] (called once a Hello is accepted), and a frame of `len`
//! bytes must complete within `min(FRAME_TIMEOUT, FRAME_GRACE + len / MIN_FRAME_RATE)` of its
//! first byte (time spent waiting for room not counted), so a peer that starts a large frame
//! and stalls or trickles gives its share back within seconds. Readers of peers this agent
//! chose ([`FrameReader::trusted`]: its upstream, an agent it asks over `ctl`) are outside
//! the budget.

use crate::budget::{self, ALLOWANCE, Registration};
use p5_wire::frame::{self, HEADER_LEN};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd as _;
use std::time::{Duration, Instant};

/// Largest frame accepted from a peer.
pub const MAX_FRAME: u32 = frame::MAX_FRAME_LEN;
/// Largest frame accepted before [`FrameReader::lift_cap`]: room for any Hello or `Control`.
pub const HELLO_CAP: u32 = 1 << 20;
/// Longest time from a frame's first byte to its last.
pub const FRAME_TIMEOUT: Duration = Duration::from_secs(30);
/// Slowest rate at which a frame may arrive, bytes per second (beyond [`FRAME_GRACE`]).
pub const MIN_FRAME_RATE: u64 = 1 << 20;
/// Time any frame may take beyond what [`MIN_FRAME_RATE`] allows for its length.
pub const FRAME_GRACE: Duration = Duration::from_secs(5);
/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 16 * 1024;
/// How long a reader that found no room sleeps before it looks again.
const ROOM_WAIT: Duration = Duration::from_millis(10);

/// Bytes of input buffered by all frame readers of this process beyond their allowances
/// (for status and tests).
pub fn buffered_bytes() -> usize {
    budget::buffered_bytes()
}

/// How long a frame of `len` bytes may take from its first byte to its last.
pub fn frame_allowance(len: usize) -> Duration {
    let at_rate = Duration::from_secs_f64(len as f64 / MIN_FRAME_RATE as f64);
    FRAME_TIMEOUT.min(FRAME_GRACE + at_rate)
}

/// Link errors.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The socket failed or closed.
    #[error("{0}")]
    Io(io::Error),
    /// The peer sent bytes that are not a frame.
    #[error("bad frame from peer: {0}")]
    Garbage(p5_wire::DecodeError),
    /// The peer closed the connection.
    #[error("connection closed by peer")]
    Closed,
    /// A frame did not complete in time.
    #[error("frame of {len} bytes not completed within {allowed:?} (slow sender)")]
    Slow {
        /// The frame's length (0 if its header did not arrive in time).
        len: usize,
        /// The time it was allowed.
        allowed: Duration,
    },
    /// The agent evicted the connection to make room for others ([`crate::budget`]).
    #[error("{0}")]
    Evicted(String),
}

impl From<io::Error> for LinkError {
    fn from(e: io::Error) -> Self {
        LinkError::Io(e)
    }
}

impl From<p5_wire::DecodeError> for LinkError {
    fn from(e: p5_wire::DecodeError) -> Self {
        LinkError::Garbage(e)
    }
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
    /// Declared first so it is dropped (leaving the registry) before the socket closes.
    registration: Option<Registration>,
    stream: TcpStream,
    buf: Vec<u8>,
    cap: u32,
    /// When the first byte of the frame being read arrived.
    started: Option<Instant>,
    /// Time the frame being read spent waiting for room (not counted against it).
    waited: Duration,
    /// Pool bytes reserved (what `buf` holds beyond the allowance).
    held: usize,
    /// Reads take the kernel's receive stamp (`SO_TIMESTAMPNS`, see [`Self::stamped`]).
    stamps: bool,
}

impl Drop for FrameReader {
    fn drop(&mut self) {
        budget::release(self.held);
    }
}

impl FrameReader {
    /// A reader for an accepted connection: registered with the budget ([`crate::budget`]),
    /// Hello-sized frames only until [`Self::lift_cap`]. Its socket's read timeout decides
    /// how long [`Self::poll`] blocks.
    pub fn new(stream: TcpStream) -> Self {
        let peer = stream.peer_addr().ok().map(|a| a.ip());
        Self {
            registration: Some(Registration::join(stream.as_raw_fd(), peer)),
            stream,
            buf: Vec::new(),
            cap: HELLO_CAP,
            started: None,
            waited: Duration::ZERO,
            held: 0,
            stamps: false,
        }
    }

    /// A reader for a peer this agent chose (its upstream, an agent it asked over `ctl`):
    /// full frame limit, outside the budget children share, so children that exhaust the
    /// budget cannot stall acknowledgements or replies.
    pub fn trusted(stream: TcpStream) -> Self {
        Self {
            registration: None,
            stream,
            buf: Vec::new(),
            cap: MAX_FRAME,
            started: None,
            waited: Duration::ZERO,
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

    /// Accepts frames up to [`MAX_FRAME`] from now on (once the peer's Hello is accepted).
    pub fn lift_cap(&mut self) {
        self.cap = MAX_FRAME;
        self.greet();
    }

    /// Notes that the connection's first frame was accepted (it is then evicted for a
    /// newcomer at the connection cap only once idle for a while).
    pub fn greet(&self) {
        if let Some(r) = &self.registration {
            r.greet();
        }
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
        self.waited = Duration::ZERO;
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

    /// Gives back pool bytes beyond what `buf` now holds past the allowance.
    fn sync_held(&mut self) {
        let Some(reg) = &self.registration else {
            return;
        };
        let target = self.buf.len().saturating_sub(ALLOWANCE);
        if target < self.held {
            budget::release(self.held - target);
            self.held = target;
        }
        reg.set_held(self.held);
    }

    /// True if the peer has closed its side (checked without consuming or blocking).
    fn peer_closed(&self) -> bool {
        let mut b = [0u8; 1];
        // SAFETY: a valid one-byte buffer; MSG_PEEK | MSG_DONTWAIT neither consumes nor blocks.
        let n = unsafe {
            libc::recv(
                self.stream.as_raw_fd(),
                b.as_mut_ptr().cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        n == 0
    }

    /// The error for a read that failed or saw the socket closed: an eviction if the budget
    /// shut the socket down.
    fn closed(&self, e: LinkError) -> LinkError {
        match self.registration.as_ref().and_then(Registration::evicted) {
            Some(reason) => LinkError::Evicted(reason),
            None => e,
        }
    }

    /// Fails the frame being read if it is late (see the module docs).
    fn check_deadline(&self) -> Result<(), LinkError> {
        let Some(t) = self.started else {
            return Ok(());
        };
        let len = self
            .buf
            .first_chunk::<4>()
            .map_or(0, |l| u32::from_le_bytes(*l) as usize);
        let allowed = frame_allowance(len);
        if t.elapsed() > allowed + self.waited {
            return Err(LinkError::Slow { len, allowed });
        }
        Ok(())
    }

    /// Reserves pool room for the next read; false (after a short wait) if there is none.
    fn make_room(&mut self) -> Result<bool, LinkError> {
        let Some(reg) = &self.registration else {
            return Ok(true);
        };
        let want = (self.buf.len() + READ_CHUNK).saturating_sub(ALLOWANCE);
        let need = want.saturating_sub(self.held);
        if need == 0 || budget::reserve(need) {
            self.held += need;
            reg.set_held(self.held);
            reg.set_waiting(false);
            return Ok(true);
        }
        // Back-pressure: leave the peer's bytes in the kernel until others drain, make the
        // stalled give theirs back, but notice a peer that went away.
        reg.set_waiting(true);
        reg.evict_stalled(need);
        if self.peer_closed() {
            return Err(self.closed(LinkError::Closed));
        }
        std::thread::sleep(ROOM_WAIT);
        if self.started.is_some() {
            self.waited += ROOM_WAIT;
        }
        Ok(false)
    }

    /// Returns the next complete frame, or `None` if none arrived within the socket's read
    /// timeout (or there is no room for more input for now).
    pub fn poll(&mut self) -> Result<Option<Frame>, LinkError> {
        if let Some(f) = self.take_frame(None)? {
            return Ok(Some(f));
        }
        if let Some(reason) = self.registration.as_ref().and_then(Registration::evicted) {
            return Err(LinkError::Evicted(reason));
        }
        self.check_deadline()?;
        if !self.make_room()? {
            return Ok(None);
        }
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
                self.waited = Duration::ZERO;
            }
            self.buf.extend_from_slice(&chunk[..n]);
            if n > 0
                && let Some(reg) = &self.registration
            {
                reg.touch();
            }
        }
        self.sync_held();
        match r {
            Ok(0) => Err(self.closed(LinkError::Closed)),
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
            Err(e) => Err(self.closed(e.into())),
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
