//! Frames of the agent's own streams from creation until the upstream acknowledged them.
//!
//! A two-tier FIFO: the oldest unacknowledged frames in memory (at most [`MEM_CAP`] bytes),
//! newer ones in the [`Spool`] on disk. Rules:
//!
//! - While the link is up and no spool exists, new frames go to memory; `Ack{count}` pops
//!   them in order (the count is cumulative per connection).
//! - When the link has been down for [`SPILL_AFTER`] (or memory is full), new frames are
//!   appended to the spool; while a spool exists *every* new frame goes there, so order is kept:
//!   memory first, then the spool.
//! - After a reconnect every unacknowledged frame in memory is sent again from the front (the
//!   log server drops duplicates by `(process_uid, stream, seq)`), and the spool is read back
//!   into memory in chunks as acknowledgements make room; once read back completely it is
//!   deleted.
//! - A frame that fits neither is refused ([`Outbox::push`] returns false) and counted as
//!   dropped by the caller, which then gives it no sequence number.

use crate::spool::Spool;
use p5_wire::data::EventsFrame;
use p5_wire::frame::{self, FrameType};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Bytes of unacknowledged frames kept in memory.
pub const MEM_CAP: usize = 1 << 20;
/// How long the link may be down before new frames go to disk.
pub const SPILL_AFTER: Duration = Duration::from_secs(2);

/// The outbox of one agent.
#[derive(Debug)]
pub struct Outbox {
    hello: Vec<u8>,
    spool_path: PathBuf,
    spool_max: u64,
    mem: VecDeque<Vec<u8>>,
    mem_bytes: usize,
    /// Frames at the front of `mem` written on the current connection.
    sent: usize,
    /// Acknowledged count of the current connection.
    acked_on_conn: u64,
    spool: Option<Spool>,
    down_since: Option<Instant>,
    /// Frames acknowledged so far.
    pub frames_acked: u64,
    /// Frames refused so far.
    pub frames_refused: u64,
    /// Spool I/O errors so far.
    pub spool_errors: u64,
}

impl Outbox {
    /// An outbox whose spool (if ever needed) lives at `spool_path`, bounded by `spool_max`.
    pub fn new(hello: Vec<u8>, spool_path: PathBuf, spool_max: u64) -> Self {
        Self {
            hello,
            spool_path,
            spool_max,
            mem: VecDeque::new(),
            mem_bytes: 0,
            sent: 0,
            acked_on_conn: 0,
            spool: None,
            down_since: Some(Instant::now()),
            frames_acked: 0,
            frames_refused: 0,
            spool_errors: 0,
        }
    }

    fn to_spool(&self, len: usize) -> bool {
        self.spool.is_some()
            || self.mem_bytes + len > MEM_CAP
            || self.down_since.is_some_and(|t| t.elapsed() >= SPILL_AFTER)
    }

    /// Whether a frame of `len` bytes would be accepted now.
    pub fn has_room(&self, len: usize) -> bool {
        if !self.to_spool(len) {
            return true;
        }
        let used = self.spool.as_ref().map_or(0, |s| s.data_bytes());
        used + len as u64 <= self.spool_max
    }

    /// Queues a frame; false if it was refused (spool full or unwritable).
    pub fn push(&mut self, f: Vec<u8>) -> bool {
        if !self.has_room(f.len()) {
            self.frames_refused += 1;
            return false;
        }
        if !self.to_spool(f.len()) {
            self.mem_bytes += f.len();
            self.mem.push_back(f);
            return true;
        }
        if self.spool.is_none() {
            match Spool::create(&self.spool_path, &self.hello) {
                Ok(s) => self.spool = Some(s),
                Err(e) => {
                    tracing::error!(path = %self.spool_path.display(), "cannot create spool: {e}");
                    self.spool_errors += 1;
                    self.frames_refused += 1;
                    return false;
                }
            }
        }
        let ok = self.spool.as_mut().is_some_and(|s| s.append(&f).is_ok());
        if !ok {
            self.spool_errors += 1;
            self.frames_refused += 1;
        }
        ok
    }

    /// A connection was established: everything unacknowledged is sent again.
    pub fn on_connect(&mut self) {
        self.sent = 0;
        self.acked_on_conn = 0;
        self.down_since = None;
    }

    /// The connection went away.
    pub fn on_disconnect(&mut self) {
        self.sent = 0;
        self.acked_on_conn = 0;
        if self.down_since.is_none() {
            self.down_since = Some(Instant::now());
        }
    }

    /// Pretends the link has been down long enough to spill (tests).
    #[cfg(test)]
    pub(crate) fn force_spill(&mut self) {
        self.down_since = Some(Instant::now() - SPILL_AFTER);
    }

    /// True while connected.
    pub fn connected(&self) -> bool {
        self.down_since.is_none()
    }

    fn refill(&mut self) {
        while self.mem_bytes < MEM_CAP / 2 {
            let Some(s) = self.spool.as_mut() else {
                return;
            };
            if s.drained() {
                if let Some(s) = self.spool.take() {
                    s.remove();
                }
                return;
            }
            match s.read_back() {
                Ok(frames) => {
                    for f in frames {
                        self.mem_bytes += f.len();
                        self.mem.push_back(f);
                    }
                }
                Err(e) => {
                    tracing::error!("cannot read the spool back, its rest is lost: {e}");
                    self.spool_errors += 1;
                    if let Some(s) = self.spool.take() {
                        s.remove();
                    }
                    return;
                }
            }
        }
    }

    /// Frames not yet written on this connection (up to about `max_bytes`), in order.
    pub fn take_unsent(&mut self, max_bytes: usize) -> Vec<Vec<u8>> {
        if self.connected() {
            self.refill();
        }
        let mut out = Vec::new();
        let mut bytes = 0;
        while let Some(f) = self.mem.get(self.sent) {
            if bytes > 0 && bytes + f.len() > max_bytes {
                break;
            }
            bytes += f.len();
            out.push(f.clone());
            self.sent += 1;
        }
        out
    }

    /// The upstream acknowledged `count` data frames of this connection.
    pub fn ack(&mut self, count: u64) {
        let n = count
            .saturating_sub(self.acked_on_conn)
            .min(self.sent as u64);
        self.acked_on_conn = self.acked_on_conn.max(count);
        for _ in 0..n {
            if let Some(f) = self.mem.pop_front() {
                self.mem_bytes -= f.len();
                self.sent -= 1;
                self.frames_acked += 1;
            }
        }
    }

    /// Frames in memory not yet acknowledged.
    pub fn unacked_frames(&self) -> usize {
        self.mem.len()
    }

    /// Bytes in the spool not yet read back.
    pub fn spool_bytes(&self) -> u64 {
        self.spool.as_ref().map_or(0, |s| s.pending_bytes())
    }

    /// True if nothing is waiting (memory and spool empty).
    pub fn is_empty(&self) -> bool {
        self.mem.is_empty() && self.spool.is_none()
    }

    /// At exit: leaves every unacknowledged frame (memory first, then the spool's unread
    /// rest, in order) in the spool file, which starts with the Hello like a runtime spool, so
    /// `p5-logserver import` can load it. Returns its path, or `None` if nothing was pending.
    pub fn persist_remaining(&mut self) -> std::io::Result<Option<PathBuf>> {
        if self.is_empty() {
            return Ok(None);
        }
        let tmp = self.spool_path.with_extension("p5spool.tmp");
        let mut out = Spool::create(&tmp, &self.hello)?;
        for f in &self.mem {
            out.append(f)?;
        }
        if let Some(mut s) = self.spool.take() {
            while !s.drained() {
                for f in s.read_back()? {
                    out.append(&f)?;
                }
            }
            s.remove();
        }
        out.sync()?;
        std::fs::rename(&tmp, &self.spool_path)?;
        self.mem.clear();
        self.mem_bytes = 0;
        self.sent = 0;
        Ok(Some(self.spool_path.clone()))
    }

    /// Base time of the oldest unacknowledged `Events` frame (agent-relative ns).
    pub fn oldest_pending_time(&self) -> Option<u64> {
        self.mem.iter().find_map(|f| {
            let (raw, _) = frame::decode(f).ok()?;
            if raw.ty != FrameType::Events as u8 {
                return None;
            }
            let e = EventsFrame::parse(raw.body).ok()?;
            Some(u64::from_le_bytes(*e.batch.first_chunk::<8>()?))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(i: u32) -> Vec<u8> {
        let mut out = Vec::new();
        frame::encode(&mut out, 0x11, &i.to_le_bytes().repeat(100));
        out
    }

    #[test]
    fn acks_pop_in_order_and_reconnect_resends() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = Outbox::new(f(999), dir.path().join("s"), 1 << 30);
        o.on_connect();
        for i in 0..5 {
            assert!(o.push(f(i)));
        }
        assert_eq!(o.take_unsent(1 << 20).len(), 5);
        o.ack(2);
        assert_eq!(o.unacked_frames(), 3);
        o.on_disconnect();
        o.on_connect();
        let again = o.take_unsent(1 << 20);
        assert_eq!(again, vec![f(2), f(3), f(4)]);
        o.ack(3);
        assert!(o.is_empty());
        assert_eq!(o.frames_acked, 5);
    }

    #[test]
    fn outage_spools_and_replays_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.p5spool");
        let mut o = Outbox::new(f(999), path.clone(), 1 << 30);
        o.force_spill();
        for i in 0..3000 {
            assert!(o.push(f(i)));
        }
        assert!(path.exists());
        assert!(o.spool_bytes() > 0);
        o.on_connect();
        let mut got = Vec::new();
        loop {
            let batch = o.take_unsent(64 << 10);
            if batch.is_empty() {
                break;
            }
            let n = batch.len() as u64;
            got.extend(batch);
            let c = o.acked_on_conn + n;
            o.ack(c);
        }
        assert_eq!(got.len(), 3000);
        assert!(got.iter().enumerate().all(|(i, x)| *x == f(i as u32)));
        assert!(o.is_empty());
        assert!(!path.exists());
    }

    #[test]
    fn undelivered_frames_are_left_in_order_for_import() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.p5spool");
        let mut o = Outbox::new(f(999), path.clone(), 1 << 30);
        o.on_connect();
        for i in 0..3 {
            assert!(o.push(f(i)));
        }
        o.on_disconnect();
        o.force_spill();
        for i in 3..6 {
            assert!(o.push(f(i)));
        }
        assert_eq!(o.persist_remaining().unwrap(), Some(path.clone()));
        let bytes = std::fs::read(&path).unwrap();
        let frames: Vec<Vec<u8>> = p5_wire::frame::Frames::new(&bytes)
            .map(|r| {
                let r = r.unwrap();
                let mut v = Vec::new();
                frame::encode(&mut v, r.ty, r.body);
                v
            })
            .collect();
        let want: Vec<Vec<u8>> = std::iter::once(f(999)).chain((0..6).map(f)).collect();
        assert_eq!(frames, want);
        assert!(o.is_empty());
        assert_eq!(o.persist_remaining().unwrap(), None);
    }

    #[test]
    fn bounded_spool_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = Outbox::new(f(999), dir.path().join("s"), 1000);
        o.force_spill();
        assert!(o.push(f(1)));
        assert!(o.push(f(2)));
        assert!(!o.has_room(f(3).len()));
        assert!(!o.push(f(3)));
        assert_eq!(o.frames_refused, 1);
    }
}
