//! One client connection, from `Hello` to close.
//!
//! The protocol (see `p5_wire`): the client sends `Hello` within the hello timeout; the server
//! answers `HelloAck` (accepted caps = the client's ∩ [`Caps::ALL`], this run's id, `t_s`) or an
//! `Error` frame and closes. Then the client streams data frames (`StreamOpen` with seq 0,
//! `Events` and `StreamClose` with seq ≥ 1, each stamped with its send time `t_p`), `Ping`s and
//! finally `Goodbye`; the server answers with `Ack{count, t_s}`, `count` being the number of
//! this connection's data frames that are durable, duplicates included.
//!
//! The connection is split in two tasks so that reading never waits for a slow reader of acks:
//! this task reads, validates every frame fully ([`p5_wire::data::validate_client_frame`] walks
//! every event, so nothing undecodable is ever stored) and queues records for the session
//! writer; an ack task owns the write half and sends an `Ack` whenever the writer reports more
//! frames durable (a `watch` channel, so a backlog of acks coalesces into one).
//!
//! Any bad input (bad length, checksum, undecodable body, unexpected frame type, a sequence
//! number that does not fit the frame type, idle or slow-loris timeouts) closes this connection
//! only: the reason is logged, written to the store as the `StoreDisconnect` reason, and sent
//! to the client in an `Error` frame where the client may still be listening. At the end the
//! connection waits until everything it queued is durable, sends the final `Ack`, and closes:
//! it shuts its write side, then reads and discards input for up to a second (a lingering
//! close), because closing a socket that still has unread input makes the kernel send a reset,
//! which can destroy the final `Ack` or `Error` frame before the client reads it.

use crate::budget::Member;
use crate::clock::RunClock;
use crate::datagram::Pingers;
use crate::receiver::{FrameError, FrameLimits, FrameReceiver, Received, ReceivedFrame};
use crate::session;
use crate::store::{AckSender, DataKey, Durable, Item, SessionSender, Store};
use p5_wire::data::{Ack, DataHeader, Ping, validate_client_frame};
use p5_wire::frame::{self, FrameType};
use p5_wire::hello::{Caps, Hello, HelloAck};
use p5_wire::store::{self as wstore, SampleSource};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Notify, oneshot, watch};

/// How long the server tries to deliver a final `Error` frame or ack before giving up.
const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// The same for an evicted connection, whose slot or memory someone is waiting for.
const EVICT_GRACE: Duration = Duration::from_millis(200);

/// Everything a connection task needs from the server.
#[derive(Debug, Clone)]
pub(crate) struct ConnContext {
    pub store: Arc<Store>,
    pub clock: Arc<RunClock>,
    pub limits: FrameLimits,
    pub hello_timeout: Duration,
    pub read_buffer: usize,
    pub shutdown: watch::Receiver<bool>,
    /// Where processes that ping over UDP are registered (`None`: no UDP socket).
    pub pingers: Option<Arc<Pingers>>,
}

/// Why a connection ended.
struct End {
    /// For the log and the `StoreDisconnect` record.
    reason: String,
    /// Sent to the client in an `Error` frame, if set.
    tell_client: bool,
    /// Whether this is a protocol violation (logged as a warning).
    bad_input: bool,
    /// Evicted for others ([`crate::budget`]): closed at once, without a lingering close.
    evicted: bool,
}

impl End {
    fn normal(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            tell_client: false,
            bad_input: false,
            evicted: false,
        }
    }

    fn server(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            tell_client: true,
            bad_input: false,
            evicted: false,
        }
    }

    fn bad(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            tell_client: true,
            bad_input: true,
            evicted: false,
        }
    }

    fn from_frame_error(e: &FrameError) -> Self {
        Self {
            reason: e.to_string(),
            tell_client: e.peer_listening(),
            bad_input: !matches!(e, FrameError::Io(_) | FrameError::Evicted(_)),
            evicted: matches!(e, FrameError::Evicted(_)),
        }
    }

    /// How long to try delivering the final frames.
    fn grace(&self) -> Duration {
        if self.evicted {
            EVICT_GRACE
        } else {
            CLOSE_GRACE
        }
    }
}

/// Appends a complete frame to a fresh buffer.
fn encode_frame(ty: FrameType, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(frame::HEADER_LEN + 1 + body.len());
    frame::encode(&mut out, ty as u8, body);
    out
}

/// Encodes an `Error` frame.
pub fn error_frame(message: &str) -> Vec<u8> {
    let mut body = Vec::with_capacity(message.len() + 4);
    p5_wire::codec::put_str(&mut body, message);
    encode_frame(FrameType::Error, &body)
}

async fn write_bounded<W: AsyncWrite + Unpin>(w: &mut W, bytes: &[u8]) -> bool {
    write_within(w, bytes, CLOSE_GRACE).await
}

async fn write_within<W: AsyncWrite + Unpin>(w: &mut W, bytes: &[u8], grace: Duration) -> bool {
    let write = async {
        w.write_all(bytes).await?;
        w.flush().await
    };
    matches!(tokio::time::timeout(grace, write).await, Ok(Ok(())))
}

/// How long a closing connection keeps reading (and discarding) after its last frame was
/// sent, so unread input does not turn the close into a reset that destroys that frame.
const LINGER: Duration = Duration::from_secs(1);
/// Most bytes discarded while lingering.
const LINGER_BYTES: usize = 1 << 20;

/// Refuses a connection before the handshake completed: logs, sends `Error`, closes.
async fn refuse<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    rx: &mut FrameReceiver<R>,
    w: &mut W,
    peer: SocketAddr,
    conn_id: u64,
    end: End,
) {
    if end.bad_input || end.evicted {
        tracing::warn!(conn = conn_id, %peer, "connection refused: {}", end.reason);
    } else {
        tracing::info!(conn = conn_id, %peer, "connection closed: {}", end.reason);
    }
    if end.tell_client {
        write_within(w, &error_frame(&end.reason), end.grace()).await;
    }
    let _ = tokio::time::timeout(end.grace(), w.shutdown()).await;
    if end.tell_client && !end.evicted {
        rx.linger(LINGER, LINGER_BYTES).await;
    }
}

/// Answers a connection past the connection cap: `Error` frame, lingering close.
pub(crate) async fn refuse_busy(stream: tokio::net::TcpStream) {
    let (mut rd, mut wr) = stream.into_split();
    write_bounded(&mut wr, &error_frame("too many connections")).await;
    let _ = tokio::time::timeout(CLOSE_GRACE, wr.shutdown()).await;
    let drain = async {
        let mut buf = [0u8; 4096];
        let mut seen = 0;
        while seen < 64 * 1024 {
            match tokio::io::AsyncReadExt::read(&mut rd, &mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => seen += n,
            }
        }
    };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

/// Reads and checks the hello and opens the session it names: the hello, its body and
/// arrival time, the session's name and store sender; `None` if the peer closed first, `Err`
/// with the reason to refuse it.
async fn accept_hello<R: AsyncRead + Unpin>(
    rx: &mut FrameReceiver<R>,
    ctx: &ConnContext,
) -> Result<Option<(Hello, Vec<u8>, u64, String, SessionSender)>, End> {
    let first = tokio::time::timeout(ctx.hello_timeout, rx.next(ctx.hello_timeout)).await;
    let hello_frame = match first {
        Err(_) | Ok(Err(FrameError::Idle(_))) => {
            return Err(End::bad(format!("no hello within {:?}", ctx.hello_timeout)));
        }
        Ok(Ok(Received::Frame(f))) => f,
        Ok(Ok(Received::Eof)) => return Ok(None),
        Ok(Ok(Received::Shutdown)) => return Err(End::server("server shutting down")),
        Ok(Err(e)) => return Err(End::from_frame_error(&e)),
    };
    if hello_frame.frame_type() != Some(FrameType::Hello) {
        return Err(End::bad(format!(
            "expected a hello frame, got type {:#04x}",
            hello_frame.ty()
        )));
    }
    let hello = Hello::decode_body(hello_frame.body())
        .map_err(|e| End::bad(format!("invalid hello: {e}")))?;
    let session_name = session::resolve(&hello.identity.session)
        .map_err(|e| End::bad(e.to_string()))?
        .to_owned();
    let sender = ctx
        .store
        .session(&session_name)
        .map_err(|e| End::server(format!("store unavailable: {}", crate::error::chain(&e))))?;
    let body = hello_frame.body().to_vec();
    Ok(Some((hello, body, hello_frame.t_s, session_name, sender)))
}

/// Serves one connection to completion. Never panics on input; every exit path closes the
/// socket.
/// `receipt`, if any, is where `read` leaves the arrival time of the bytes it read (see
/// [`crate::rxstamp`]); `member` is the connection's place in the memory budget.
pub(crate) async fn serve<R, W>(
    read: R,
    mut write: W,
    peer: SocketAddr,
    conn_id: u64,
    ctx: ConnContext,
    receipt: Option<Arc<std::sync::atomic::AtomicU64>>,
    member: Member,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let rx = FrameReceiver::new(
        read,
        ctx.read_buffer,
        ctx.limits.clone(),
        Some(member),
        ctx.clock.clone(),
        ctx.shutdown.clone(),
    );
    let mut rx = match receipt {
        Some(r) => rx.with_receipts(r),
        None => rx,
    };

    // Handshake.
    let (hello, hello_body, hello_t_s, session_name, sender) =
        match accept_hello(&mut rx, &ctx).await {
            Ok(Some(h)) => h,
            Ok(None) => {
                tracing::debug!(conn = conn_id, %peer, "closed before hello");
                return;
            }
            Err(end) => return refuse(&mut rx, &mut write, peer, conn_id, end).await,
        };
    rx.lift_hello_cap();
    let uid = hello.identity.process_uid;
    let mut record = Vec::with_capacity(hello_body.len() + 40);
    wstore::encode_process(&mut record, hello_t_s, conn_id, &hello_body);
    drop(hello_body);
    if let Err(e) = sender.send(Item::record(record)).await {
        let end = End::server(format!("store unavailable: {e}"));
        return refuse(&mut rx, &mut write, peer, conn_id, end).await;
    }
    let mut caps = hello.caps.intersect(Caps::ALL);
    if ctx.pingers.is_none() {
        caps = Caps(caps.0 & !Caps::DATAGRAM_PINGS.0);
    }
    // Until this connection ends, the process's pings over UDP are answered and recorded.
    let _pinging = ctx
        .pingers
        .as_ref()
        .filter(|_| caps.contains(Caps::DATAGRAM_PINGS))
        .map(|p| p.register(uid, conn_id, peer.ip(), sender.clone()));
    let ack = HelloAck {
        version: p5_wire::PROTOCOL_VERSION,
        caps,
        server_run_id: ctx.clock.server_run_id,
        t_s: ctx.clock.now_ns(),
    };
    let handshake_ok = write_bounded(
        &mut write,
        &encode_frame(FrameType::HelloAck, &ack.encode_body()),
    )
    .await;
    let id = &hello.identity;
    tracing::info!(
        conn = conn_id,
        %peer,
        session = %session_name,
        process_uid = format_args!("{uid:016x}"),
        pid = id.pid,
        program = %id.program,
        "process connected"
    );

    // Streaming.
    let (durable_tx, durable_rx) = watch::channel(Durable::default());
    let durable_tx: AckSender = Arc::new(durable_tx);
    let (finish_tx, finish_rx) = oneshot::channel();
    let pong = Arc::new(Notify::new());
    let acker = tokio::spawn(ack_loop(
        write,
        durable_tx.subscribe(),
        finish_rx,
        pong.clone(),
        ctx.clock.clone(),
    ));
    let mut conn = Conn {
        uid,
        sender,
        ack: durable_tx,
        pong,
        submitted: 0,
        frames: 0,
        events: 0,
    };
    let end = if handshake_ok {
        conn.stream(&mut rx, &durable_rx).await
    } else {
        End::normal("could not send the hello ack")
    };

    // Close: record why, wait until everything queued is durable, final ack, close.
    let mut record = Vec::with_capacity(end.reason.len() + 32);
    wstore::encode_disconnect(&mut record, ctx.clock.now_ns(), uid, &end.reason);
    let queued = conn.sender.send(Item::record(record)).await.is_ok();
    let submitted = conn.submitted;
    let mut wait = durable_rx.clone();
    if queued {
        let _ = wait
            .wait_for(|d| d.count >= submitted || d.failure.is_some())
            .await;
    }
    let durable = durable_rx.borrow().count;
    let _ = finish_tx.send(Finish {
        message: end.tell_client.then(|| end.reason.clone()),
        grace: end.grace(),
    });
    let mut acker = acker;
    if tokio::time::timeout(end.grace(), &mut acker).await.is_err() {
        acker.abort();
    }
    if !end.evicted {
        rx.linger(LINGER, LINGER_BYTES).await;
    }
    drop(rx);
    if end.bad_input || end.evicted {
        tracing::warn!(
            conn = conn_id,
            %peer,
            frames = conn.frames,
            events = conn.events,
            durable,
            "connection closed on bad input: {}",
            end.reason
        );
    } else {
        tracing::info!(
            conn = conn_id,
            %peer,
            frames = conn.frames,
            events = conn.events,
            durable,
            "connection closed: {}",
            end.reason
        );
    }
}

struct Conn {
    uid: u64,
    sender: SessionSender,
    ack: AckSender,
    /// Asks the ack loop for an `Ack` now: the reply to a `Ping`, whose `t_s` is the backward
    /// half of a two-way clock sample.
    pong: Arc<Notify>,
    /// Data frames queued so far (the count a final ack must reach).
    submitted: u64,
    frames: u64,
    events: u64,
}

impl Conn {
    async fn stream<R: AsyncRead + Unpin>(
        &mut self,
        rx: &mut FrameReceiver<R>,
        durable: &watch::Receiver<Durable>,
    ) -> End {
        let idle = rx.limits().idle_timeout;
        loop {
            if let Some(f) = &durable.borrow().failure {
                return End::server(format!("store write failed: {f}"));
            }
            let f = match rx.next(idle).await {
                Ok(Received::Frame(f)) => f,
                Ok(Received::Eof) => return End::normal("peer closed the connection"),
                Ok(Received::Shutdown) => return End::server("server shutting down"),
                Err(e) => return End::from_frame_error(&e),
            };
            if let Some(end) = self.frame(f).await {
                return end;
            }
        }
    }

    /// Handles one frame; `Some` ends the connection.
    async fn frame(&mut self, f: ReceivedFrame) -> Option<End> {
        let ty = f.ty();
        let events = match validate_client_frame(ty, f.body()) {
            Ok(n) => n,
            Err(e) => return Some(End::bad(format!("invalid frame of type {ty:#04x}: {e}"))),
        };
        self.frames += 1;
        let item = match f.frame_type() {
            Some(t) if t.is_data() => {
                let h = match DataHeader::peek(f.body()) {
                    Ok(h) => h,
                    Err(e) => return Some(End::bad(format!("invalid data header: {e}"))),
                };
                self.events += events as u64;
                self.submitted += 1;
                let key = DataKey {
                    process_uid: self.uid,
                    stream: h.stream,
                    seq: h.seq,
                    t_s: f.t_s,
                    t_p: h.t_p,
                    timed: true,
                };
                Item::data(f, key, Some(self.ack.clone()))
            }
            Some(FrameType::Ping) => {
                let ping = match Ping::decode_body(f.body()) {
                    Ok(p) => p,
                    Err(e) => return Some(End::bad(format!("invalid ping: {e}"))),
                };
                // Answer at once (the client echoes this ack's `t_s` in its next ping): a
                // client pinging in bursts gets round trips whose both ends are awake.
                self.pong.notify_one();
                let mut rec = Vec::with_capacity(64);
                wstore::encode_sample(&mut rec, f.t_s, self.uid, ping, SampleSource::Ping);
                Item::record(rec)
            }
            Some(FrameType::Goodbye) => return Some(End::normal("goodbye")),
            Some(FrameType::Hello) => return Some(End::bad("unexpected second hello")),
            _ => return Some(End::bad(format!("unexpected frame type {ty:#04x}"))),
        };
        match self.sender.send(item).await {
            Ok(()) => None,
            Err(e) => Some(End::server(format!("store unavailable: {e}"))),
        }
    }
}

/// How a connection ends: the `Error` message for the client, if any, and how long to try
/// delivering the last frames.
struct Finish {
    message: Option<String>,
    grace: Duration,
}

/// Sends `Ack`s: whenever more frames are durable, and at once for every `Ping` (`pong`; the
/// count is then the durable count so far, which a client takes as nothing new — older clients
/// included).
async fn ack_loop<W: AsyncWrite + Unpin>(
    mut w: W,
    mut durable: watch::Receiver<Durable>,
    mut finish: oneshot::Receiver<Finish>,
    pong: Arc<Notify>,
    clock: Arc<RunClock>,
) {
    let mut sent = 0u64;
    let ack_frame = |count: u64| {
        let ack = Ack {
            count,
            t_s: clock.now_ns(),
        };
        encode_frame(FrameType::Ack, &ack.encode_body())
    };
    loop {
        tokio::select! {
            biased;
            fin = &mut finish => {
                let (message, grace) = match fin {
                    Ok(f) => (f.message, f.grace),
                    Err(_) => (None, CLOSE_GRACE),
                };
                let d = durable.borrow().clone();
                if d.count > sent && !write_within(&mut w, &ack_frame(d.count), grace).await {
                    return;
                }
                let message =
                    message.or_else(|| d.failure.map(|f| format!("store write failed: {f}")));
                if let Some(m) = message {
                    write_within(&mut w, &error_frame(&m), grace).await;
                }
                let _ = tokio::time::timeout(grace, w.shutdown()).await;
                return;
            }
            () = pong.notified() => {
                let count = durable.borrow().count.max(sent);
                let frame = ack_frame(count);
                if w.write_all(&frame).await.and(w.flush().await).is_err() {
                    return;
                }
                sent = count;
            }
            changed = durable.changed() => {
                if changed.is_err() {
                    return;
                }
                let d = durable.borrow_and_update().clone();
                if d.count > sent {
                    let frame = ack_frame(d.count);
                    if w.write_all(&frame).await.and(w.flush().await).is_err() {
                        return;
                    }
                    sent = d.count;
                }
                if let Some(f) = d.failure {
                    write_bounded(&mut w, &error_frame(&format!("store write failed: {f}"))).await;
                    let _ = tokio::time::timeout(CLOSE_GRACE, w.shutdown()).await;
                    return;
                }
            }
        }
    }
}
