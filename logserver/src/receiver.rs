//! Reading frames off a connection, with every limit a hostile or broken peer needs.
//!
//! A frame is read in three steps: wait for its first byte (at most the idle timeout; a
//! shutdown request or an eviction also ends the wait, so shutdown happens at a frame
//! boundary), read the 8-byte envelope header and check the length (before a Hello is
//! accepted the limit is [`HELLO_FRAME_CAP`], see [`FrameReceiver::lift_hello_cap`]), then
//! read the rest and check the crc32c. Bytes are reserved *as they arrive*, never for bytes a
//! header merely claims, from the connection's own allowance first and then from the shared
//! pool ([`crate::budget`]); when both are spent the peer's bytes stay in the kernel until
//! the store catches up (back-pressure), so a peer that lies about a length or sends slowly
//! holds only what it actually sent and cannot starve the others. Nothing is allocated before
//! the length is known to be in range.
//!
//! A frame must complete within `min(frame_timeout, FRAME_GRACE + len / min_frame_rate)` of
//! its first byte, time spent waiting for memory not counted: a large frame may take its
//! time on a slow link, but a peer trickling one byte at a time cannot hold its bytes (and
//! the shared pool) for the whole frame timeout. That defeats slow-loris senders.
//!
//! The receipt time `t_s` is taken as soon as the envelope header has been read: the earliest
//! moment the server knows a frame is arriving, which keeps the measured delay `d` in
//! `t_s − t_p = O + d` small while still being after the send.
//!
//! A frame is read straight into a buffer laid out as a `StoreData` record
//! ([`ReceivedFrame`]): the writer stores it without copying or re-encoding the body.

use crate::budget::{Interrupted, Member, Reservation};
use crate::clock::RunClock;
use p5_wire::DecodeError;
use p5_wire::frame::{self, FrameType};
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};
use tokio::sync::watch;
use tokio::time::Instant;

/// Largest frame accepted before a Hello is: a Hello carries at most
/// `p5_wire::hello::MAX_ARGV_BYTES` of arguments plus short strings, far below this.
pub const HELLO_FRAME_CAP: u32 = 1 << 20;
/// Most bytes read into a frame (and reserved from the budget) in one step.
const READ_STEP: usize = 64 * 1024;
/// Time any frame may take beyond what the minimum rate allows for its length.
pub const FRAME_GRACE: Duration = Duration::from_secs(5);

/// Bytes in front of a received frame's type byte in its buffer: the record envelope (8),
/// the record type (1), `t_s` (8) and `process_uid` (8) of a `StoreData` record.
pub const STORE_PREFIX: usize = frame::HEADER_LEN + 1 + 8 + 8;

/// A received frame in a buffer shaped as a `StoreData` record:
/// `[len crc | 0x82 | t_s | process_uid | type | body]`, of which only `type | body` is
/// filled in while receiving. See [`ReceivedFrame::into_store_data`].
#[derive(Debug)]
pub struct ReceivedFrame {
    buf: Vec<u8>,
    /// Server time when the frame's header was read (0 for frames read from files).
    pub t_s: u64,
    reservation: Reservation,
}

impl ReceivedFrame {
    /// A zeroed frame buffer for a payload (type + body) of `len` bytes.
    pub(crate) fn with_payload_len(len: usize, t_s: u64) -> Self {
        Self {
            buf: vec![0; STORE_PREFIX + len],
            t_s,
            reservation: Reservation::default(),
        }
    }

    /// An empty frame buffer (only the record prefix) that grows as bytes arrive.
    fn growing(t_s: u64) -> Self {
        Self {
            buf: vec![0; STORE_PREFIX],
            t_s,
            reservation: Reservation::default(),
        }
    }

    /// Builds a frame from its type and body (tests, tools).
    pub fn from_parts(ty: u8, body: &[u8], t_s: u64) -> Self {
        let mut f = Self::with_payload_len(1 + body.len(), t_s);
        f.buf[STORE_PREFIX] = ty;
        f.buf[STORE_PREFIX + 1..].copy_from_slice(body);
        f
    }

    /// Type byte and body, as covered by the frame's crc.
    pub fn payload(&self) -> &[u8] {
        self.buf.get(STORE_PREFIX..).unwrap_or_default()
    }

    pub(crate) fn payload_mut(&mut self) -> &mut [u8] {
        self.buf.get_mut(STORE_PREFIX..).unwrap_or_default()
    }

    /// The frame type byte.
    pub fn ty(&self) -> u8 {
        self.payload().first().copied().unwrap_or(0)
    }

    /// The known frame type, if any.
    pub fn frame_type(&self) -> Option<FrameType> {
        FrameType::from_u8(self.ty())
    }

    /// The body after the type byte.
    pub fn body(&self) -> &[u8] {
        self.payload().get(1..).unwrap_or_default()
    }

    /// Turns the buffer into a complete `StoreData` record (byte-identical to
    /// `p5_wire::store::encode_data(t_s, process_uid, ty, body)`), returning it and the
    /// memory-budget reservation that must live until the record is durable.
    pub fn into_store_data(mut self, process_uid: u64) -> (Vec<u8>, Reservation) {
        let len = (self.buf.len() - frame::HEADER_LEN) as u32;
        let h = frame::HEADER_LEN;
        self.buf[h] = FrameType::StoreData as u8;
        self.buf[h + 1..h + 9].copy_from_slice(&self.t_s.to_le_bytes());
        self.buf[h + 9..h + 17].copy_from_slice(&process_uid.to_le_bytes());
        let crc = crc32c::crc32c(&self.buf[h..]);
        self.buf[..4].copy_from_slice(&len.to_le_bytes());
        self.buf[4..8].copy_from_slice(&crc.to_le_bytes());
        (self.buf, self.reservation)
    }

    /// Releases the memory-budget reservation early (for frames that are not stored).
    pub fn release(&mut self) {
        self.reservation = Reservation::default();
    }
}

/// Why reading a frame failed. After any of these the connection is unusable.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// No frame started within the idle timeout.
    #[error("idle for {0:?} without a frame")]
    Idle(Duration),
    /// A frame started but did not complete in time.
    #[error(
        "frame of {len} bytes not completed within {allowed:?} of its first byte (slow sender)"
    )]
    Slow {
        /// The frame's length (0 if its header did not arrive in time).
        len: usize,
        /// The time it was allowed.
        allowed: Duration,
    },
    /// The server evicted the connection to make room for others ([`crate::budget`]).
    #[error("{0}")]
    Evicted(String),
    /// The peer closed the connection in the middle of a frame.
    #[error("connection closed in the middle of a frame")]
    HalfFrame,
    /// The envelope's length is zero or above the limit.
    #[error("{0}")]
    Length(DecodeError),
    /// The crc32c does not match.
    #[error("bad frame: {0}")]
    Checksum(DecodeError),
    /// The socket failed.
    #[error("read failed: {0}")]
    Io(io::Error),
}

impl FrameError {
    /// True if the peer may still be listening, so an `Error` frame is worth sending.
    pub fn peer_listening(&self) -> bool {
        !matches!(self, FrameError::HalfFrame | FrameError::Io(_))
    }
}

/// Outcome of [`FrameReceiver::next`] other than an error.
#[derive(Debug)]
pub enum Received {
    /// A complete frame with a valid checksum (its body is not validated yet).
    Frame(ReceivedFrame),
    /// The peer closed the connection cleanly between frames.
    Eof,
    /// The server is shutting down; no frame was started.
    Shutdown,
}

/// Limits applied while reading frames.
#[derive(Debug, Clone)]
pub struct FrameLimits {
    /// Longest wait for the first byte of a frame.
    pub idle_timeout: Duration,
    /// Longest time from a frame's first byte to its last.
    pub frame_timeout: Duration,
    /// Slowest rate at which a frame's bytes may arrive, bytes per second (see the module
    /// docs; 0: no minimum).
    pub min_frame_rate: u64,
    /// Largest accepted `len`.
    pub max_frame_len: u32,
}

impl FrameLimits {
    /// How long a frame of `len` bytes may take from its first byte to its last.
    pub fn frame_allowance(&self, len: usize) -> Duration {
        if self.min_frame_rate == 0 {
            return self.frame_timeout;
        }
        let at_rate = Duration::from_secs_f64(len as f64 / self.min_frame_rate as f64);
        self.frame_timeout.min(FRAME_GRACE + at_rate)
    }
}

/// Reads frames from one connection.
#[derive(Debug)]
pub struct FrameReceiver<R> {
    inner: BufReader<R>,
    limits: FrameLimits,
    member: Option<Member>,
    clock: Arc<RunClock>,
    shutdown: watch::Receiver<bool>,
    /// The length limit now: [`HELLO_FRAME_CAP`] until a Hello was accepted.
    cap: u32,
    /// When the newest bytes read arrived, on the run clock (see [`crate::rxstamp`]).
    receipt: Option<Arc<AtomicU64>>,
}

/// Resolves once `rx` says `true` or its sender is gone.
pub(crate) async fn stopped(rx: &mut watch::Receiver<bool>) {
    loop {
        if *rx.borrow_and_update() {
            return;
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}

impl<R: AsyncRead + Unpin> FrameReceiver<R> {
    /// Wraps a read half. `member` (if any) is the connection's place in the server's memory
    /// budget; without one nothing is reserved.
    pub fn new(
        read: R,
        read_buffer: usize,
        limits: FrameLimits,
        member: Option<Member>,
        clock: Arc<RunClock>,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        Self {
            inner: BufReader::with_capacity(read_buffer, read),
            cap: limits.max_frame_len.min(HELLO_FRAME_CAP),
            limits,
            member,
            clock,
            shutdown,
            receipt: None,
        }
    }

    /// Takes frames' receipt times from `receipt` (set by a [`crate::rxstamp::StampedRead`]
    /// under this receiver) instead of the clock after the read.
    pub fn with_receipts(mut self, receipt: Arc<AtomicU64>) -> Self {
        self.receipt = Some(receipt);
        self
    }

    /// The limits in force.
    pub fn limits(&self) -> &FrameLimits {
        &self.limits
    }

    /// Reads the next frame, waiting at most `first_byte_timeout` for it to start.
    pub async fn next(&mut self, first_byte_timeout: Duration) -> Result<Received, FrameError> {
        let out = self.read_frame(first_byte_timeout).await;
        if let Some(m) = &self.member {
            m.frame_done();
        }
        out
    }

    async fn read_frame(&mut self, first_byte_timeout: Duration) -> Result<Received, FrameError> {
        if *self.shutdown.borrow() {
            return Ok(Received::Shutdown);
        }
        if let Some(reason) = self.member.as_ref().and_then(Member::evicted) {
            return Err(FrameError::Evicted(reason));
        }
        let member = self.member.as_ref();
        let waited = tokio::select! {
            biased;
            () = stopped(&mut self.shutdown) => return Ok(Received::Shutdown),
            reason = evicted(member) => return Err(FrameError::Evicted(reason)),
            r = tokio::time::timeout(first_byte_timeout, self.inner.fill_buf()) => {
                r.map(|r| r.map(|b| b.is_empty()))
            }
        };
        match waited {
            Err(_) => return Err(FrameError::Idle(first_byte_timeout)),
            Ok(Err(e)) => return Err(FrameError::Io(e)),
            Ok(Ok(true)) => return Ok(Received::Eof),
            Ok(Ok(false)) => {}
        }
        // The frame's first bytes are in the buffer: they came with the last read.
        let now = self.clock.now_ns();
        if let Some(m) = member {
            m.touch(now);
        }
        let t_s = match self.receipt.as_ref().map(|r| r.load(Ordering::Acquire)) {
            Some(r) if r > 0 => r.min(now),
            _ => now,
        };
        let started = Instant::now();
        let header_allowed = self.limits.frame_allowance(0);
        let mut h = [0u8; frame::HEADER_LEN];
        read_by(
            &mut self.inner,
            &mut h,
            started + header_allowed,
            header_allowed,
        )
        .await?;
        let (len, crc) = frame::parse_header(&h, self.cap).map_err(FrameError::Length)?;
        let len = len as usize;
        let allowed = self.limits.frame_allowance(len);
        let mut deadline = started + allowed;
        let mut f = ReceivedFrame::growing(t_s);
        if !self.reserve(&mut f, STORE_PREFIX, &mut deadline).await? {
            return Ok(Received::Shutdown);
        }
        let slow = FrameError::Slow { len, allowed };
        while f.payload().len() < len {
            let member = self.member.as_ref();
            let avail = tokio::select! {
                biased;
                reason = evicted(member) => return Err(FrameError::Evicted(reason)),
                r = tokio::time::timeout_at(deadline, self.inner.fill_buf()) => match r {
                    Err(_) => return Err(slow),
                    Ok(Err(e)) => return Err(FrameError::Io(e)),
                    Ok(Ok([])) => return Err(FrameError::HalfFrame),
                    Ok(Ok(b)) => b.len(),
                },
            };
            if let Some(m) = member {
                m.touch(self.clock.now_ns());
            }
            let n = avail.min(len - f.payload().len()).min(READ_STEP);
            if !self.reserve(&mut f, n, &mut deadline).await? {
                return Ok(Received::Shutdown);
            }
            let chunk = self.inner.buffer();
            f.buf.extend_from_slice(&chunk[..n]);
            self.inner.consume(n);
        }
        frame::check(crc, f.payload()).map_err(FrameError::Checksum)?;
        Ok(Received::Frame(f))
    }

    /// Lifts the pre-Hello length limit to the configured one (call once a Hello is
    /// accepted).
    pub fn lift_hello_cap(&mut self) {
        self.cap = self.limits.max_frame_len;
        if let Some(m) = &self.member {
            m.greet();
        }
    }

    /// Adds `n` bytes to `f`'s reservation, waiting for memory if there is none (time spent
    /// waiting extends `deadline`). `Ok(false)` if the server shuts down meanwhile.
    async fn reserve(
        &mut self,
        f: &mut ReceivedFrame,
        n: usize,
        deadline: &mut Instant,
    ) -> Result<bool, FrameError> {
        let Some(member) = &self.member else {
            return Ok(true);
        };
        match member
            .reserve(&mut f.reservation, n, &mut self.shutdown)
            .await
        {
            Ok(waited) => {
                *deadline += waited;
                Ok(true)
            }
            Err(Interrupted::Shutdown) => Ok(false),
            Err(Interrupted::Evicted(reason)) => Err(FrameError::Evicted(reason)),
        }
    }
}

/// Resolves with the reason once `member` is evicted; never without a member.
async fn evicted(member: Option<&Member>) -> String {
    match member {
        Some(m) => m.until_evicted().await,
        None => std::future::pending().await,
    }
}

impl<R: AsyncRead + Unpin> FrameReceiver<R> {
    /// Reads and discards input for at most `time` or `limit` bytes, or until EOF. Used after
    /// the server sent an `Error` frame: closing a socket with unread input makes the kernel
    /// answer with a reset, which can destroy the `Error` frame before the peer reads it.
    pub async fn linger(&mut self, time: Duration, limit: usize) {
        let drain = async {
            let mut seen = 0;
            while seen < limit {
                match self.inner.fill_buf().await {
                    Ok([]) | Err(_) => break,
                    Ok(b) => {
                        let n = b.len();
                        self.inner.consume(n);
                        seen += n;
                    }
                }
            }
        };
        let _ = tokio::time::timeout(time, drain).await;
    }
}

async fn read_by<R: AsyncRead + Unpin>(
    r: &mut BufReader<R>,
    buf: &mut [u8],
    deadline: Instant,
    allowed: Duration,
) -> Result<(), FrameError> {
    match tokio::time::timeout_at(deadline, r.read_exact(buf)).await {
        Err(_) => Err(FrameError::Slow { len: 0, allowed }),
        Ok(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => Err(FrameError::HalfFrame),
        Ok(Err(e)) => Err(FrameError::Io(e)),
        Ok(Ok(_)) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn receiver(bytes: &[u8]) -> (FrameReceiver<&[u8]>, watch::Sender<bool>) {
        let (tx, rx) = watch::channel(false);
        let limits = FrameLimits {
            idle_timeout: Duration::from_secs(5),
            frame_timeout: Duration::from_secs(5),
            min_frame_rate: 1 << 20,
            max_frame_len: 1 << 16,
        };
        let clock = Arc::new(RunClock::start());
        let budget = crate::budget::Budget::new(1 << 20, 4096, clock.clone());
        let member = Some(budget.join(1, std::net::Ipv4Addr::LOCALHOST.into()));
        (
            FrameReceiver::new(bytes, 4096, limits, member, clock, rx),
            tx,
        )
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn store_record_layout_matches_wire_encoder() {
        let body = b"some body bytes";
        let f = ReceivedFrame::from_parts(0x11, body, 1234);
        let (rec, _) = f.into_store_data(0xfeed);
        let mut want = Vec::new();
        p5_wire::store::encode_data(&mut want, 1234, 0xfeed, 0x11, body);
        assert_eq!(rec, want);
    }

    #[test]
    fn reads_frames_then_eof_and_classifies_errors() {
        let mut bytes = Vec::new();
        frame::encode(&mut bytes, 0x20, &[0u8; 24]);
        frame::encode(&mut bytes, 0x21, &[1u8; 8]);
        rt().block_on(async {
            let (mut r, _tx) = receiver(&bytes);
            let Received::Frame(f) = r.next(Duration::from_secs(1)).await.unwrap() else {
                panic!("expected a frame")
            };
            assert_eq!((f.ty(), f.body().len()), (0x20, 24));
            assert!(matches!(
                r.next(Duration::from_secs(1)).await,
                Ok(Received::Frame(_))
            ));
            assert!(matches!(
                r.next(Duration::from_secs(1)).await,
                Ok(Received::Eof)
            ));

            let half = &bytes[..bytes.len() - 3];
            let (mut r, _tx) = receiver(half);
            r.next(Duration::from_secs(1)).await.unwrap();
            assert!(matches!(
                r.next(Duration::from_secs(1)).await,
                Err(FrameError::HalfFrame)
            ));

            let mut bad = bytes.clone();
            bad[12] ^= 0xff;
            let (mut r, _tx) = receiver(&bad);
            assert!(matches!(
                r.next(Duration::from_secs(1)).await,
                Err(FrameError::Checksum(_))
            ));

            let mut huge = bytes.clone();
            huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
            let (mut r, _tx) = receiver(&huge);
            assert!(matches!(
                r.next(Duration::from_secs(1)).await,
                Err(FrameError::Length(_))
            ));
        });
    }

    #[test]
    fn shutdown_stops_between_frames() {
        rt().block_on(async {
            let (mut r, tx) = receiver(b"");
            tx.send(true).unwrap();
            assert!(matches!(
                r.next(Duration::from_secs(1)).await,
                Ok(Received::Shutdown)
            ));
        });
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// Random bytes, alone or after a valid frame, never panic the frame reader or the
        /// body validator; the reader always ends with EOF or an error.
        #[test]
        fn random_bytes_never_panic(noise in proptest::collection::vec(any::<u8>(), 0..2048),
                                    prefix_frame in any::<bool>()) {
            let mut bytes = Vec::new();
            if prefix_frame {
                frame::encode(&mut bytes, 0x21, &7u64.to_le_bytes());
            }
            bytes.extend_from_slice(&noise);
            rt().block_on(async {
                let (mut r, _tx) = receiver(&bytes);
                for _ in 0..bytes.len() + 1 {
                    match r.next(Duration::from_secs(1)).await {
                        Ok(Received::Frame(f)) => {
                            let _ = p5_wire::data::validate_client_frame(f.ty(), f.body());
                        }
                        Ok(_) | Err(_) => break,
                    }
                }
            });
        }

        /// Frames with random type and body survive the round trip through the receiver.
        #[test]
        fn random_frames_round_trip(ty in any::<u8>(), body in proptest::collection::vec(any::<u8>(), 0..3000)) {
            let mut bytes = Vec::new();
            frame::encode(&mut bytes, ty, &body);
            rt().block_on(async {
                let (mut r, _tx) = receiver(&bytes);
                match r.next(Duration::from_secs(1)).await {
                    Ok(Received::Frame(f)) => {
                        prop_assert_eq!(f.ty(), ty);
                        prop_assert_eq!(f.body(), &body[..]);
                    }
                    other => prop_assert!(false, "unexpected {:?}", other),
                }
                Ok(())
            })?;
        }
    }
}
