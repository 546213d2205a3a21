//! Where finished data frames go, and how they become durable.
//!
//! Every data frame is either *in flight* (queued or written on the current connection and
//! not yet covered by an `Ack{count}`), *in the spool*, or acknowledged. Rules:
//!
//! - Connected, no spool: frames are kept in memory (`inflight`) until acknowledged; `Ack`
//!   pops them in order. Past [`MEM_LIMIT`] bytes the outbox spills to the spool.
//! - The connection goes away (or never came): unacknowledged in-memory frames are written
//!   to the spool, and while a spool exists *every* new frame is appended to it, so each
//!   stream's frames stay in order.
//! - Reconnected with a spool: the spool is replayed from its `acked` offset in bounded
//!   chunks, newly appended frames included; once all of it is acknowledged it is deleted
//!   and frames go straight to memory again. The server deduplicates by
//!   `(process_uid, stream, seq)`, so resending something it already stored is harmless.
//! - Before each transmission the frame's `t_p` is stamped (and its CRC resealed).
//!
//! - Connecting never stalls draining: [`Conn::open`] (a connect with a short timeout, then a
//!   handshake with a bounded wait) runs on a short-lived connector thread, and the flusher
//!   only polls for its result. Until the handshake completes the server counts as absent and
//!   frames spool, so a server that accepts TCP but never answers (`kill -STOP`) costs
//!   nothing but a spool file.
//!
//! Local-file mode is the degenerate case: the spool is the output and is never replayed.

use crate::clock::Origin;
use crate::config::Mode;
use crate::conn::{Conn, Reply};
use crate::pings::PingSchedule;
use crate::spool::Spool;
use crate::stats::{Counters, add};
use p5_wire::Caps;
use p5_wire::data::{Ping, stamp_send_time};
use p5_wire::frame::{self, FrameType};
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Bytes of unacknowledged frames kept in memory before spilling to the spool.
pub const MEM_LIMIT: usize = 16 << 20;
/// Bytes read ahead from the spool onto the connection.
const WRITE_AHEAD: usize = 1 << 20;
/// First reconnect delay; doubles up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(500);
/// Longest reconnect delay.
const MAX_BACKOFF: Duration = Duration::from_millis(1000);
/// How often the flusher looks for the connector thread's result.
const CONNECT_POLL: Duration = Duration::from_millis(5);

/// Descriptors a forked child must close (it must not touch its parent's connection).
#[derive(Debug)]
pub struct Fds {
    /// Connection socket, or −1.
    pub conn: AtomicI32,
    /// Spool file, or −1.
    pub spool: AtomicI32,
    /// The announcement socket (see `process::announce`), or −1.
    pub announce: AtomicI32,
    /// The connection's clock-ping datagram socket, or −1.
    pub udp: AtomicI32,
}

impl Default for Fds {
    fn default() -> Self {
        Fds {
            conn: AtomicI32::new(-1),
            spool: AtomicI32::new(-1),
            announce: AtomicI32::new(-1),
            udp: AtomicI32::new(-1),
        }
    }
}

#[derive(Debug)]
struct Inflight {
    /// The encoded frame (emptied once written if it can be re-read from the spool).
    frame: Vec<u8>,
    /// Offset just after this frame in the spool, if it is there.
    spool_end: Option<u64>,
}

/// The frame sink of one process incarnation (owned by the flusher thread).
#[derive(Debug)]
pub struct Outbox {
    mode: Mode,
    hello: Vec<u8>,
    spool_path: PathBuf,
    origin: Origin,
    counters: &'static Counters,
    fds: &'static Fds,
    conn: Option<Conn>,
    spool: Option<Spool>,
    spool_broken: bool,
    closing: bool,
    inflight: VecDeque<Inflight>,
    written: usize,
    partial: usize,
    ctrl: Vec<u8>,
    conn_acked: u64,
    mem_bytes: usize,
    produced: u64,
    last_ack: Option<(u64, u64)>,
    next_connect: Instant,
    connecting: Option<mpsc::Receiver<std::io::Result<Conn>>>,
    backoff: Duration,
    /// When to ping (bursts paced by the answers).
    pings: PingSchedule,
}

impl Outbox {
    /// A sink for `mode`; in local-file mode the output file is created right away.
    pub fn new(
        mode: Mode,
        hello: Vec<u8>,
        spool_path: PathBuf,
        origin: Origin,
        counters: &'static Counters,
        fds: &'static Fds,
    ) -> Self {
        let now = Instant::now();
        let mut o = Outbox {
            mode,
            hello,
            spool_path,
            origin,
            counters,
            fds,
            conn: None,
            spool: None,
            spool_broken: false,
            closing: false,
            inflight: VecDeque::new(),
            written: 0,
            partial: 0,
            ctrl: Vec::new(),
            conn_acked: 0,
            mem_bytes: 0,
            produced: 0,
            last_ack: None,
            next_connect: now,
            connecting: None,
            backoff: MIN_BACKOFF,
            pings: PingSchedule::new(now),
        };
        if o.mode == Mode::Local {
            o.ensure_spool();
        }
        o
    }

    /// Capabilities to encode for: the server's accepted set while connected, else all.
    pub fn caps(&self) -> Caps {
        self.conn.as_ref().map_or(Caps::ALL, |c| c.caps)
    }

    /// Data frames pushed so far.
    pub fn produced(&self) -> u64 {
        self.produced
    }

    /// Data frames pushed so far that are acknowledged, spooled or lost (a prefix of them).
    pub fn settled(&self) -> u64 {
        match (&self.mode, &self.spool) {
            (Mode::Server(_), None) => self.produced - self.inflight.len() as u64,
            _ => self.produced,
        }
    }

    /// True while frames wait in the spool for a log server (server mode).
    pub fn spooling(&self) -> bool {
        matches!(self.mode, Mode::Server(_)) && self.spool.is_some()
    }

    /// True when nothing is waiting for the server (no in-flight frames, no spool).
    pub fn all_acked(&self) -> bool {
        !matches!(self.mode, Mode::Server(_)) || (self.inflight.is_empty() && self.spool.is_none())
    }

    /// True while connected.
    pub fn connected(&self) -> bool {
        self.conn.is_some()
    }

    /// True while a connection attempt runs on the connector thread.
    pub fn connecting(&self) -> bool {
        self.connecting.is_some()
    }

    /// When the outbox next needs the flusher for connecting: the next attempt, or the next
    /// look at a running attempt's result (if disconnected in server mode).
    pub fn next_connect(&self) -> Option<Instant> {
        if !matches!(self.mode, Mode::Server(_)) || self.conn.is_some() {
            return None;
        }
        if self.connecting.is_some() {
            return Some(Instant::now() + CONNECT_POLL);
        }
        Some(self.next_connect)
    }

    /// When the next ping is due (if connected): on the connection or over UDP.
    pub fn next_ping(&self) -> Option<Instant> {
        let c = self.conn.as_ref()?;
        let tcp = self.pings.next_due();
        Some(
            c.udp
                .as_ref()
                .and_then(|u| u.next_due())
                .map_or(tcp, |u| u.min(tcp)),
        )
    }

    /// The socket and poll events the flusher should wait for.
    pub fn poll_interest(&self) -> Option<(RawFd, i16)> {
        let c = self.conn.as_ref()?;
        let mut ev = libc::POLLIN;
        if !self.ctrl.is_empty() || self.written < self.inflight.len() || self.can_refill() {
            ev |= libc::POLLOUT;
        }
        Some((c.raw_fd(), ev))
    }

    fn can_refill(&self) -> bool {
        self.spool.as_ref().is_some_and(|s| !s.fully_sent())
    }

    /// Accepts one finished data frame.
    pub fn push(&mut self, frame: Vec<u8>) {
        self.produced += 1;
        add(&self.counters.frames, 1);
        match self.mode {
            Mode::Discard | Mode::Disabled => {}
            Mode::Local => {
                self.store(&frame);
            }
            Mode::Server(_) => {
                if self.spool.is_none()
                    && self.conn.is_some()
                    && self.mem_bytes + frame.len() <= MEM_LIMIT
                {
                    self.mem_bytes += frame.len();
                    self.inflight.push_back(Inflight {
                        frame,
                        spool_end: None,
                    });
                } else {
                    self.spill();
                    self.store(&frame);
                }
            }
        }
    }

    fn ensure_spool(&mut self) -> bool {
        if self.spool.is_some() {
            return true;
        }
        if self.spool_broken {
            return false;
        }
        match Spool::create(&self.spool_path, &self.hello) {
            Ok(s) => {
                self.fds.spool.store(s.raw_fd(), Ordering::Relaxed);
                self.spool = Some(s);
                self.counters.spool_active.store(1, Ordering::Relaxed);
                true
            }
            Err(e) => {
                self.spool_broken = true;
                crate::fdtable::warn(&format!(
                    "p5: cannot create spool {}: {e}",
                    self.spool_path.display()
                ));
                false
            }
        }
    }

    /// Appends a data frame to the spool; returns its end offset (`None`: lost).
    fn store(&mut self, frame: &[u8]) -> Option<u64> {
        if !self.ensure_spool() {
            add(&self.counters.frames_lost, 1);
            return None;
        }
        let spool = self.spool.as_mut()?;
        match spool.append(frame) {
            Ok(end) => {
                add(&self.counters.frames_spooled, 1);
                Some(end)
            }
            Err(e) => {
                if !self.spool_broken {
                    crate::fdtable::warn(&format!(
                        "p5: cannot write spool {}: {e}",
                        spool.path().display()
                    ));
                }
                self.spool_broken = true;
                add(&self.counters.frames_lost, 1);
                None
            }
        }
    }

    /// Moves the in-memory in-flight frames into the spool (creating it), in order. Frames
    /// that were already fully written stay in flight but drop their bytes.
    fn spill(&mut self) {
        if self.spool.is_some() || !matches!(self.mode, Mode::Server(_)) {
            return;
        }
        let connected = self.conn.is_some();
        if !self.ensure_spool() {
            if !connected {
                add(&self.counters.frames_lost, self.inflight.len() as u64);
                self.inflight.clear();
                self.mem_bytes = 0;
            }
            // Connected: the frames stay in memory (past the bound) so acks still line up.
            return;
        }
        let entries: Vec<Inflight> = self.inflight.drain(..).collect();
        self.mem_bytes = 0;
        for (i, mut e) in entries.into_iter().enumerate() {
            match self.store(&e.frame) {
                Some(end) if connected => {
                    if i < self.written {
                        e.frame = Vec::new();
                    }
                    e.spool_end = Some(end);
                    self.inflight.push_back(e);
                }
                // The spool failed: keep the frame in memory so acks still line up.
                None if connected => {
                    self.mem_bytes += e.frame.len();
                    self.inflight.push_back(e);
                }
                _ => {}
            }
        }
        if let Some(s) = self.spool.as_mut() {
            if connected {
                s.sent = s.len;
            } else {
                s.sent = s.acked;
            }
        }
        self.written = self.written.min(self.inflight.len());
    }

    /// Starts a connection attempt if due, takes a finished attempt's result, reads acks,
    /// refills from the spool, pings, and writes what the socket takes. Never blocks.
    pub fn service(&mut self, now: Instant) {
        if self.conn.is_none() {
            if matches!(self.mode, Mode::Server(_)) && now >= self.next_connect {
                self.connect(now);
            }
            self.poll_connect(now);
            if self.conn.is_none() {
                return;
            }
        }
        if let Err(e) = self.io(now) {
            self.disconnect(now, &e.to_string());
        }
        self.maybe_drop_spool();
    }

    /// Starts one connection attempt on a connector thread, unless one is running or the
    /// outbox is connected. Returns at once; [`Outbox::service`] takes the result.
    pub fn connect(&mut self, now: Instant) {
        let Mode::Server(addr) = &self.mode else {
            return;
        };
        if self.conn.is_some() || self.connecting.is_some() {
            return;
        }
        let (tx, rx) = mpsc::sync_channel(1);
        let (addr, hello) = (addr.clone(), self.hello.clone());
        let spawned = std::thread::Builder::new()
            .name("p5-connect".into())
            .spawn(move || {
                crate::sensor::mark_flusher_thread();
                let _ = tx.send(Conn::open(&addr, &hello));
            });
        match spawned {
            Ok(_) => self.connecting = Some(rx),
            Err(_) => self.connect_failed(now),
        }
    }

    /// Takes the connector thread's result if it is there.
    fn poll_connect(&mut self, now: Instant) {
        let Some(rx) = &self.connecting else {
            return;
        };
        let result = match rx.try_recv() {
            Ok(r) => r,
            Err(mpsc::TryRecvError::Empty) => return,
            Err(mpsc::TryRecvError::Disconnected) => {
                Err(std::io::Error::other("connector thread died"))
            }
        };
        self.connecting = None;
        match result {
            Ok(c) => {
                add(&self.counters.connects, 1);
                self.fds.conn.store(c.raw_fd(), Ordering::Relaxed);
                let udp = c.udp.as_ref().map_or(-1, |u| u.raw_fd());
                self.fds.udp.store(udp, Ordering::Relaxed);
                self.conn = Some(c);
                self.conn_acked = 0;
                self.written = 0;
                self.partial = 0;
                self.ctrl.clear();
                self.backoff = MIN_BACKOFF;
                self.pings = PingSchedule::new(now);
                if let Some(s) = self.spool.as_mut() {
                    s.sent = s.acked;
                }
            }
            Err(_) => self.connect_failed(now),
        }
    }

    fn connect_failed(&mut self, now: Instant) {
        self.next_connect = now + self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }

    fn disconnect(&mut self, now: Instant, _why: &str) {
        if let Some(c) = self.conn.take() {
            self.fds.conn.store(-1, Ordering::Relaxed);
            self.fds.udp.store(-1, Ordering::Relaxed);
            add(&self.counters.disconnects, 1);
            drop(c);
        }
        self.ctrl.clear();
        self.written = 0;
        self.partial = 0;
        if self.spool.is_none() && !self.inflight.is_empty() {
            self.spill();
        }
        self.inflight.clear();
        self.mem_bytes = 0;
        if let Some(s) = self.spool.as_mut() {
            s.sent = s.acked;
        }
        self.next_connect = now + self.backoff;
    }

    fn io(&mut self, now: Instant) -> std::io::Result<()> {
        let Some(conn) = self.conn.as_mut() else {
            return Ok(());
        };
        let origin = self.origin;
        let (replies, read_at) = conn.read_replies(|| origin.elapsed_ns())?;
        if let Some(u) = conn.udp.as_mut() {
            u.read_pongs(|| origin.elapsed_ns());
        }
        let mut acked = false;
        for r in replies {
            match r {
                Reply::Ack(a) => {
                    // One that acknowledges nothing new can only be a ping's answer.
                    if a.count <= self.conn_acked {
                        self.pings.timed_answer(now);
                    }
                    self.on_ack(a.count, a.t_s, read_at);
                    acked = true;
                }
                Reply::Error(m) => {
                    return Err(std::io::Error::other(format!("server error: {m}")));
                }
            }
        }
        self.refill()?;
        self.ping(now, acked);
        self.write()
    }

    /// Starts a ping burst when one is due, and goes on with the one under way when an ack
    /// (the answer) came.
    fn ping(&mut self, now: Instant, acked: bool) {
        if self.pings.poll(now, acked, self.ctrl.is_empty()) {
            self.queue_ping();
        }
        let origin = self.origin;
        if let Some(u) = self.conn.as_mut().and_then(|c| c.udp.as_mut()) {
            u.poll(now, || origin.elapsed_ns());
            // Datagrams do the dense pinging a slow path needs, far better than bursts.
            self.pings.set_dense_when_slow(!u.answered());
        }
    }

    fn on_ack(&mut self, count: u64, t_s: u64, read_at: u64) {
        self.last_ack = Some((t_s, read_at));
        let n = count
            .saturating_sub(self.conn_acked)
            .min(self.written as u64);
        for _ in 0..n {
            if let Some(e) = self.inflight.pop_front() {
                match e.spool_end {
                    Some(end) => {
                        if let Some(s) = self.spool.as_mut() {
                            s.acked = s.acked.max(end);
                        }
                    }
                    None => self.mem_bytes = self.mem_bytes.saturating_sub(e.frame.len()),
                }
            }
        }
        self.written -= n as usize;
        self.conn_acked += n;
        add(&self.counters.frames_acked, n);
    }

    fn refill(&mut self) -> std::io::Result<()> {
        let Some(spool) = self.spool.as_mut() else {
            return Ok(());
        };
        if self.mode == Mode::Local {
            return Ok(());
        }
        let mut ahead: usize = self
            .inflight
            .iter()
            .skip(self.written)
            .map(|e| e.frame.len())
            .sum();
        while ahead < WRITE_AHEAD && !spool.fully_sent() {
            let frames = match spool.next_frames() {
                Ok(f) => f,
                Err(e) => {
                    crate::fdtable::warn(&format!("p5: {e}"));
                    break;
                }
            };
            for (f, end) in frames {
                let data = f
                    .get(frame::HEADER_LEN)
                    .and_then(|&t| FrameType::from_u8(t))
                    .is_some_and(FrameType::is_data);
                if data {
                    ahead += f.len();
                    self.inflight.push_back(Inflight {
                        frame: f,
                        spool_end: Some(end),
                    });
                }
            }
        }
        Ok(())
    }

    fn queue_ping(&mut self) {
        let echo = match (self.caps().contains(Caps::PING_ECHO), self.last_ack) {
            (true, Some(a)) => a,
            _ => (0, 0),
        };
        let ping = Ping {
            t_p: self.origin.elapsed_ns(),
            echo_t_s: echo.0,
            echo_t_p: echo.1,
        };
        frame::encode(&mut self.ctrl, FrameType::Ping as u8, &ping.encode_body());
    }

    fn write(&mut self) -> std::io::Result<()> {
        let Some(conn) = self.conn.as_mut() else {
            return Ok(());
        };
        loop {
            if self.partial == 0 {
                if !self.ctrl.is_empty() {
                    let n = conn.write_some(&self.ctrl)?;
                    if n == 0 {
                        return Ok(());
                    }
                    add(&self.counters.bytes_sent, n as u64);
                    self.ctrl.drain(..n);
                    continue;
                }
                if self.closing {
                    // After Goodbye nothing new starts; unsent frames go to the spool.
                    return Ok(());
                }
            }
            let Some(e) = self.inflight.get_mut(self.written) else {
                return Ok(());
            };
            if self.partial == 0 {
                stamp_send_time(&mut e.frame, self.origin.elapsed_ns());
                add(&self.counters.frames_sent, 1);
            }
            let n = conn.write_some(&e.frame[self.partial..])?;
            if n == 0 {
                return Ok(());
            }
            add(&self.counters.bytes_sent, n as u64);
            self.partial += n;
            if self.partial == e.frame.len() {
                if e.spool_end.is_some() {
                    e.frame = Vec::new();
                }
                self.written += 1;
                self.partial = 0;
            }
        }
    }

    fn maybe_drop_spool(&mut self) {
        if self.mode == Mode::Local || self.conn.is_none() || !self.inflight.is_empty() {
            return;
        }
        if self.spool.as_ref().is_some_and(Spool::fully_sent)
            && let Some(s) = self.spool.take()
        {
            self.fds.spool.store(-1, Ordering::Relaxed);
            self.counters.spool_active.store(0, Ordering::Relaxed);
            s.remove();
        }
    }

    /// Ends the connection and the spool for a clean exit: queues `Goodbye` on the
    /// connection (giving it until `deadline` to leave), spills what is unacknowledged,
    /// appends `Goodbye` to any spool that remains and syncs it.
    pub fn close(&mut self, deadline: Instant) {
        let mut goodbye = Vec::new();
        let t_p = self.origin.elapsed_ns().to_le_bytes();
        frame::encode(&mut goodbye, FrameType::Goodbye as u8, &t_p);
        self.closing = true;
        if self.conn.is_some() {
            self.ctrl.extend_from_slice(&goodbye);
            while self.conn.is_some() && !self.ctrl.is_empty() && Instant::now() < deadline {
                if let Err(e) = self.write() {
                    self.disconnect(Instant::now(), &e.to_string());
                    break;
                }
                if !self.ctrl.is_empty() {
                    self.wait_writable(deadline);
                }
            }
        }
        // Whatever is not acknowledged now goes to (or stays in) the spool.
        if !self.inflight.is_empty() && self.spool.is_none() {
            self.spill();
        }
        self.inflight.clear();
        if let Some(c) = self.conn.take() {
            self.fds.conn.store(-1, Ordering::Relaxed);
            drop(c);
        }
        if let Some(s) = self.spool.as_mut() {
            let _ = s.append(&goodbye);
            s.sync();
        }
    }

    fn wait_writable(&self, deadline: Instant) {
        if let Some(c) = &self.conn {
            let ms = deadline
                .saturating_duration_since(Instant::now())
                .as_millis()
                .min(50) as i32;
            let mut p = libc::pollfd {
                fd: c.raw_fd(),
                events: libc::POLLOUT,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut p, 1, ms) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p5_wire::data::{Ack, DataHeader, StreamOpen};
    use p5_wire::{Caps, Hello, HelloAck};
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    fn leak<T>(t: T) -> &'static T {
        Box::leak(Box::new(t))
    }

    /// Pings the outbox queued (and takes them off, as a write would).
    fn pings_sent(o: &mut Outbox) -> usize {
        let mut n = 0;
        let mut rest: &[u8] = &o.ctrl;
        while let Ok((f, len)) = frame::decode(rest) {
            assert_eq!(f.ty, FrameType::Ping as u8);
            n += 1;
            rest = &rest[len..];
        }
        o.ctrl.clear();
        n
    }

    /// The outbox queues a ping when its schedule says so, and the next of a burst for an
    /// answer (the schedule itself is tested in `pings`).
    #[test]
    fn the_outbox_pings_by_its_schedule() {
        let mut o = Outbox::new(
            Mode::Discard,
            Vec::new(),
            PathBuf::new(),
            Origin::capture(false),
            leak(Counters::default()),
            leak(Fds::default()),
        );
        let t0 = o.pings.next_due();
        o.ping(t0, false);
        assert_eq!(pings_sent(&mut o), 1);
        o.ping(t0 + Duration::from_millis(1), false);
        assert_eq!(pings_sent(&mut o), 0);
        o.ping(t0 + Duration::from_millis(2), true);
        assert_eq!(pings_sent(&mut o), 1);
    }

    fn data_frame(stream: u32) -> Vec<u8> {
        let open = StreamOpen {
            header: DataHeader {
                stream,
                seq: 0,
                t_p: 0,
            },
            kind_raw: 1,
            tid: 1,
            name: format!("s{stream}"),
        };
        let mut f = Vec::new();
        frame::encode(&mut f, FrameType::StreamOpen as u8, &open.encode_body());
        f
    }

    fn read_frame(s: &mut TcpStream) -> Option<(u8, Vec<u8>)> {
        let mut h = [0u8; frame::HEADER_LEN];
        s.read_exact(&mut h).ok()?;
        let (len, crc) = frame::parse_header(&h, frame::MAX_FRAME_LEN).ok()?;
        let mut p = vec![0u8; len as usize];
        s.read_exact(&mut p).ok()?;
        let f = frame::check(crc, &p).ok()?;
        Some((f.ty, f.body.to_vec()))
    }

    /// Acknowledges every data frame; returns the streams of the data frames, in order,
    /// once the client says Goodbye.
    fn ack_all(l: TcpListener) -> std::thread::JoinHandle<Vec<u32>> {
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let (ty, body) = read_frame(&mut s).unwrap();
            assert_eq!(ty, FrameType::Hello as u8);
            Hello::decode_body(&body).unwrap();
            let ack = HelloAck {
                version: 1,
                caps: Caps::ALL,
                server_run_id: 1,
                t_s: 5,
            };
            let mut out = Vec::new();
            frame::encode(&mut out, FrameType::HelloAck as u8, &ack.encode_body());
            s.write_all(&out).unwrap();
            let mut streams = Vec::new();
            while let Some((ty, body)) = read_frame(&mut s) {
                if ty == FrameType::Goodbye as u8 {
                    break;
                }
                if ty == FrameType::StreamOpen as u8 {
                    let h = DataHeader::peek(&body).unwrap();
                    assert!(h.t_p > 0, "send time stamped");
                    streams.push(h.stream);
                    let a = Ack {
                        count: streams.len() as u64,
                        t_s: 9,
                    };
                    let mut out = Vec::new();
                    frame::encode(&mut out, FrameType::Ack as u8, &a.encode_body());
                    s.write_all(&out).unwrap();
                }
            }
            streams
        })
    }

    fn service_until(o: &mut Outbox, done: impl Fn(&Outbox) -> bool) {
        for _ in 0..10_000 {
            if done(o) {
                return;
            }
            o.service(Instant::now());
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("outbox never got there: {o:?}");
    }

    #[test]
    fn spools_while_absent_then_replays_and_goes_direct() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let dir = std::env::temp_dir().join(format!("p5-outbox-test-{}", std::process::id()));
        let path = dir.join("x.p5spool");
        let hello = crate::identity::hello_frame(&p5_wire::Identity::default());
        let counters = leak(Counters::default());
        let mut o = Outbox::new(
            Mode::Server(addr.clone()),
            hello,
            path.clone(),
            Origin::capture(false),
            counters,
            leak(Fds::default()),
        );
        // Nobody listens: frames go to the spool and count as settled.
        o.service(Instant::now());
        assert!(!o.connected());
        for s in 1..=3 {
            o.push(data_frame(s));
        }
        assert_eq!(o.settled(), 3);
        assert!(path.exists());
        assert!(!o.all_acked());
        // The server appears: the spool is replayed, acknowledged and deleted.
        let server = ack_all(TcpListener::bind(&addr).unwrap());
        o.connect(Instant::now());
        service_until(&mut o, Outbox::connected);
        service_until(&mut o, Outbox::all_acked);
        assert!(!path.exists(), "acknowledged spool deleted");
        // Now frames travel from memory and are settled only once acknowledged.
        o.push(data_frame(4));
        assert_eq!(o.settled(), 3);
        service_until(&mut o, |o| o.settled() == 4);
        o.close(Instant::now() + Duration::from_secs(5));
        assert_eq!(server.join().unwrap(), [1, 2, 3, 4]);
        let s = counters.snapshot();
        assert_eq!((s.frames, s.frames_acked, s.frames_spooled), (4, 4, 3));
        let _ = std::fs::remove_dir_all(dir);
    }
}
