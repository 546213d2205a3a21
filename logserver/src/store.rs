//! The writing side of the session store: one writer thread per session, group commit.
//!
//! Connections never touch files. They turn each frame into a finished record (see
//! [`crate::receiver::ReceivedFrame`]) and queue it, as an [`Item`], on their session's bounded
//! queue; a full queue makes them wait, and they stop reading their socket meanwhile, so a slow
//! disk slows the senders down instead of growing memory. The session's writer is a plain
//! thread (file I/O and `fdatasync` block; they must not stall the async workers) that loops:
//!
//! 1. wait for one item, then take whatever else is queued, up to `commit_max_bytes`;
//! 2. for data frames, consult the deduplication map ([`crate::dedup`]): new frames are
//!    appended, duplicates become a `StoreSample` (source `Duplicate`);
//! 3. `write` the whole group to the current segment and `fdatasync` it once — if the group
//!    has something to acknowledge: a group of clock samples alone (pings, datagram pings at
//!    up to 2,000 a second a process) is written and left to the next sync, which covers the
//!    whole file (a crash of the server loses nothing the kernel has; only a crash of the
//!    machine can lose samples written since the last sync, and they were never acknowledged);
//! 4. only then add each connection's share of the group to its durable count, which its ack
//!    task sends as `Ack{count}`.
//!
//! That is group commit: one sync covers every record that queued up while the previous sync
//! ran, so the sync rate adapts to the disk and the per-record cost of durability vanishes under
//! load, while a lone record is still acknowledged after a single sync. An acknowledged frame is
//! therefore always on disk, and because the dedup decision and the writes happen in one thread
//! in queue order, a duplicate is acknowledged only after (or together with) the sync that made
//! its original durable.
//!
//! Each server run writes its own segments (the first record of a run opens a new one), and a
//! segment is closed once it would grow past `segment_max_bytes`. A new segment's header is
//! written and the session directory synced before anything in it is acknowledged.
//!
//! If a write or sync fails, the session's writer stops for good (after a failed `fsync` the
//! page cache can no longer be trusted; restarting the server and letting recovery read what
//! reached the disk is the safe way back): every waiting connection gets an `Error` frame and
//! keeps its unacknowledged frames, and new connections to the session are refused.

use crate::budget::Reservation;
use crate::clock::RunClock;
use crate::config::StoreConfig;
use crate::dedup::Dedup;
use crate::error::{Error, io_at};
use crate::layout::{self, StoreLock};
use crate::receiver::ReceivedFrame;
use crate::recover::{self, PendingTail, RecoveredState, RecoveryReport};
use p5_wire::data::Ping;
use p5_wire::store::{SEGMENT_HEADER_LEN, SEGMENT_VERSION, SampleSource, SegmentHeader};
use serde::Serialize;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use tokio::sync::mpsc::{self, error::TryRecvError};
use tokio::sync::watch;

/// What a connection learns from the writer: how many of its data frames are durable, or
/// that the writer failed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Durable {
    /// Data frames of the connection that are durable (stored or recognised as duplicates).
    pub count: u64,
    /// Set once if the session's writer failed; nothing more will become durable.
    pub failure: Option<Arc<str>>,
}

/// The writer's handle on a connection's durable count.
pub type AckSender = Arc<watch::Sender<Durable>>;

/// Identity and timing of a data frame, for deduplication and duplicate samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataKey {
    /// Sending process.
    pub process_uid: u64,
    /// Stream within the process.
    pub stream: u32,
    /// Sequence number within the stream.
    pub seq: u64,
    /// Server receipt time.
    pub t_s: u64,
    /// Sender's send time.
    pub t_p: u64,
    /// False for frames without a meaningful (`t_s`, `t_p`) pair (imports): a duplicate of
    /// such a frame leaves no sample.
    pub timed: bool,
}

/// One unit of work for a session writer: a finished record, plus for data frames the
/// deduplication key and whom to acknowledge.
#[derive(Debug)]
pub struct Item {
    record: Vec<u8>,
    data: Option<DataKey>,
    ack: Option<AckSender>,
    reservation: Reservation,
}

impl Item {
    /// A record that is always appended (process, sample, disconnect).
    pub fn record(record: Vec<u8>) -> Self {
        Self {
            record,
            data: None,
            ack: None,
            reservation: Reservation::default(),
        }
    }

    /// A data frame: stored as a `StoreData` record unless it is a duplicate.
    pub fn data(frame: ReceivedFrame, key: DataKey, ack: Option<AckSender>) -> Self {
        let (record, reservation) = frame.into_store_data(key.process_uid);
        Self {
            record,
            data: Some(key),
            ack,
            reservation,
        }
    }
}

/// Counters of one session writer (for logs and the import report).
#[derive(Debug, Default)]
struct SessionStats {
    frames: AtomicU64,
    duplicates: AtomicU64,
    records: AtomicU64,
    bytes: AtomicU64,
    commits: AtomicU64,
    segments: AtomicU64,
}

/// A snapshot of a session writer's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct WriterStats {
    /// Data frames stored.
    pub frames: u64,
    /// Data frames recognised as duplicates.
    pub duplicates: u64,
    /// Records appended (all types).
    pub records: u64,
    /// Bytes appended (records and segment headers).
    pub bytes: u64,
    /// Group commits that synced (a group of unacknowledged records alone is written and
    /// synced with the next).
    pub commits: u64,
    /// Segments opened.
    pub segments: u64,
}

impl SessionStats {
    fn snapshot(&self) -> WriterStats {
        WriterStats {
            frames: self.frames.load(Relaxed),
            duplicates: self.duplicates.load(Relaxed),
            records: self.records.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            commits: self.commits.load(Relaxed),
            segments: self.segments.load(Relaxed),
        }
    }
}

#[derive(Debug, Default)]
struct SessionShared {
    failure: Mutex<Option<String>>,
    stats: SessionStats,
}

impl SessionShared {
    fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// A connection's way to queue items for its session.
#[derive(Debug, Clone)]
pub struct SessionSender {
    name: Arc<str>,
    tx: mpsc::Sender<Item>,
    shared: Arc<SessionShared>,
}

impl SessionSender {
    /// The session's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn closed(&self) -> Error {
        match self.shared.failure() {
            Some(reason) => Error::WriterFailed {
                session: self.name.to_string(),
                reason,
            },
            None => Error::Closed,
        }
    }

    /// Queues an item, waiting while the queue is full.
    pub async fn send(&self, item: Item) -> Result<(), Error> {
        self.tx.send(item).await.map_err(|_| self.closed())
    }

    /// Queues an item if the queue has room now; false if it had none or the writer is gone.
    pub fn try_send(&self, item: Item) -> bool {
        self.tx.try_send(item).is_ok()
    }

    /// Queues an item from a thread outside any async runtime.
    pub fn blocking_send(&self, item: Item) -> Result<(), Error> {
        self.tx.blocking_send(item).map_err(|_| self.closed())
    }
}

#[derive(Debug)]
struct SessionHandle {
    sender: SessionSender,
    thread: JoinHandle<()>,
}

/// An open store: the lock, the recovered state, and one writer per active session.
#[derive(Debug)]
pub struct Store {
    root: PathBuf,
    clock: Arc<RunClock>,
    config: StoreConfig,
    sessions: Mutex<HashMap<String, SessionHandle>>,
    recovered: Mutex<HashMap<String, RecoveredState>>,
    recovery: RecoveryReport,
    _lock: StoreLock,
}

impl Store {
    /// Opens (creating if needed) and locks a store directory, then runs start-up recovery
    /// ([`crate::recover`]) on every session. Blocking.
    pub fn open(root: &Path, clock: Arc<RunClock>, config: StoreConfig) -> Result<Self, Error> {
        std::fs::create_dir_all(root).map_err(io_at("cannot create store directory", root))?;
        let lock = StoreLock::acquire(root)?;
        let (recovery, recovered) = recover::recover_store(root, &clock)?;
        Ok(Self {
            root: root.to_path_buf(),
            clock,
            config,
            sessions: Mutex::new(HashMap::new()),
            recovered: Mutex::new(recovered),
            recovery,
            _lock: lock,
        })
    }

    /// The store directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The clock of this run.
    pub fn clock(&self) -> &Arc<RunClock> {
        &self.clock
    }

    /// What start-up recovery found and repaired.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// The queue of session `name` (a validated name), starting its writer on first use.
    pub fn session(&self, name: &str) -> Result<SessionSender, Error> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = sessions.get(name) {
            if let Some(reason) = h.sender.shared.failure() {
                return Err(Error::WriterFailed {
                    session: name.to_owned(),
                    reason,
                });
            }
            return Ok(h.sender.clone());
        }
        let state = self
            .recovered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name)
            .unwrap_or_default();
        let (tx, rx) = mpsc::channel(self.config.queue_depth.max(1));
        let shared = Arc::new(SessionShared::default());
        let writer = Writer {
            session: name.to_owned(),
            root: self.root.clone(),
            dir: self.root.join(name),
            clock: self.clock.clone(),
            config: self.config.clone(),
            dedup: state.dedup,
            next_index: state.next_index,
            pending: state.pending,
            refusing: false,
            segment: None,
            batch: Vec::new(),
            unsynced: false,
            acks: Vec::new(),
            permits: Vec::new(),
            shared: shared.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("p5ls-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| Error::io(format!("cannot start the writer of session {name}"), e))?;
        let sender = SessionSender {
            name: name.into(),
            tx,
            shared,
        };
        sessions.insert(
            name.to_owned(),
            SessionHandle {
                sender: sender.clone(),
                thread,
            },
        );
        Ok(sender)
    }

    /// Stops every writer after it has written and synced everything queued, and returns
    /// the writers' counters. Callers must have dropped their [`SessionSender`]s (a writer
    /// runs until its queue has no sender left). Blocking.
    pub fn close(&self) -> Vec<(String, WriterStats)> {
        let handles: Vec<_> = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .collect();
        let mut out = Vec::new();
        for (name, h) in handles {
            let shared = h.sender.shared.clone();
            drop(h.sender);
            if h.thread.join().is_err() {
                tracing::error!(session = %name, "session writer panicked");
            }
            out.push((name, shared.stats.snapshot()));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.close();
    }
}

#[derive(Debug)]
struct OpenSegment {
    file: File,
    path: PathBuf,
    len: u64,
    dir_synced: bool,
}

struct Writer {
    session: String,
    root: PathBuf,
    dir: PathBuf,
    clock: Arc<RunClock>,
    config: StoreConfig,
    dedup: Dedup,
    next_index: u64,
    /// Torn tails recovery had to keep in place: repaired before anything is written.
    pending: Vec<PendingTail>,
    /// Whether the last attempt to open a segment failed (items are refused meanwhile).
    refusing: bool,
    segment: Option<OpenSegment>,
    batch: Vec<u8>,
    /// Whether the current segment holds bytes written since its last sync.
    unsynced: bool,
    acks: Vec<(AckSender, u64)>,
    /// Memory of the records in the group, given back once they are durable.
    permits: Vec<Reservation>,
    shared: Arc<SessionShared>,
}

impl Writer {
    fn run(mut self, mut rx: mpsc::Receiver<Item>) {
        tracing::debug!(session = %self.session, "session writer started");
        while let Some(item) = rx.blocking_recv() {
            self.take(item);
            let mut delayed = self.config.commit_delay.is_zero();
            loop {
                if self.batch.len() >= self.config.commit_max_bytes {
                    break;
                }
                match rx.try_recv() {
                    Ok(item) => self.take(item),
                    Err(TryRecvError::Empty) if !delayed => {
                        std::thread::sleep(self.config.commit_delay);
                        delayed = true;
                    }
                    Err(_) => break,
                }
            }
            self.commit();
        }
        self.commit_synced(true);
        let s = self.shared.stats.snapshot();
        tracing::debug!(
            session = %self.session,
            frames = s.frames,
            duplicates = s.duplicates,
            bytes = s.bytes,
            commits = s.commits,
            "session writer stopped"
        );
    }

    fn failed(&self) -> bool {
        self.shared
            .failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    fn take(&mut self, item: Item) {
        let Item {
            record,
            data,
            ack,
            reservation,
        } = item;
        if self.failed() {
            if let Some(ack) = ack {
                let reason = self.shared.failure().unwrap_or_default();
                ack.send_modify(|d| d.failure = Some(reason.into()));
            }
            return;
        }
        if self.segment.is_none()
            && self.batch.is_empty()
            && let Err(reason) = self.prepare_segment()
        {
            // Nothing was admitted or written: refuse this item (its sender keeps it and
            // comes back) and try again with the next.
            if let Some(ack) = ack {
                ack.send_modify(|d| d.failure = Some(reason.into()));
            }
            return;
        }
        match data {
            None => self.push(&record),
            Some(k) => {
                if self.dedup.admit(k.process_uid, k.stream, k.seq) {
                    self.shared.stats.frames.fetch_add(1, Relaxed);
                    self.push(&record);
                } else {
                    self.shared.stats.duplicates.fetch_add(1, Relaxed);
                    if k.timed {
                        let mut sample = Vec::with_capacity(64);
                        let ping = Ping {
                            t_p: k.t_p,
                            echo_t_s: 0,
                            echo_t_p: 0,
                        };
                        p5_wire::store::encode_sample(
                            &mut sample,
                            k.t_s,
                            k.process_uid,
                            ping,
                            SampleSource::Duplicate,
                        );
                        self.push(&sample);
                    }
                }
                if let Some(ack) = ack {
                    match self.acks.last_mut() {
                        Some((last, n)) if Arc::ptr_eq(last, &ack) => *n += 1,
                        _ => self.acks.push((ack, 1)),
                    }
                }
            }
        }
        if reservation.bytes() > 0 {
            self.permits.push(reservation);
        }
    }

    /// Appends a record to the group, first committing and closing the current segment if
    /// the record would make it outgrow the limit.
    fn push(&mut self, record: &[u8]) {
        let seg_len = self
            .segment
            .as_ref()
            .map_or(SEGMENT_HEADER_LEN as u64, |s| s.len);
        let pending = seg_len + self.batch.len() as u64;
        if pending > SEGMENT_HEADER_LEN as u64
            && pending + record.len() as u64 > self.config.segment_max_bytes
        {
            self.commit_synced(true);
            self.segment = None;
            if self.failed() {
                return;
            }
        }
        self.batch.extend_from_slice(record);
        self.shared.stats.records.fetch_add(1, Relaxed);
    }

    /// Writes the group, syncs it if it has something to acknowledge, then acknowledges it.
    fn commit(&mut self) {
        self.commit_synced(!self.acks.is_empty());
    }

    /// Writes the group and, if `sync` (or some of it is to be acknowledged), syncs the
    /// segment; then acknowledges.
    fn commit_synced(&mut self, sync: bool) {
        if self.failed() {
            self.fail_pending();
            return;
        }
        let sync = sync || !self.acks.is_empty();
        if !self.batch.is_empty() || (sync && self.unsynced) {
            if let Err(e) = self.write_batch(sync) {
                self.fail(e);
                return;
            }
            if sync {
                self.shared.stats.commits.fetch_add(1, Relaxed);
            }
            self.shared
                .stats
                .bytes
                .fetch_add(self.batch.len() as u64, Relaxed);
            self.batch.clear();
            if self.batch.capacity() > 2 * self.config.commit_max_bytes.max(1 << 20) {
                self.batch.shrink_to(self.config.commit_max_bytes);
            }
        }
        for (ack, n) in self.acks.drain(..) {
            ack.send_modify(|d| d.count += n);
        }
        self.permits.clear();
    }

    /// Appends the group to the current segment (opening one if needed) and, if `sync`,
    /// syncs it (and its directory, the first time).
    fn write_batch(&mut self, sync: bool) -> Result<(), Error> {
        if self.segment.is_none() {
            self.segment = Some(self.open_segment()?);
        }
        let Some(seg) = self.segment.as_mut() else {
            return Err(Error::Closed);
        };
        seg.file
            .write_all(&self.batch)
            .map_err(io_at("cannot append to", &seg.path))?;
        seg.len += self.batch.len() as u64;
        self.unsynced = true;
        if !sync {
            return Ok(());
        }
        seg.file
            .sync_data()
            .map_err(io_at("cannot sync", &seg.path))?;
        self.unsynced = false;
        if !seg.dir_synced {
            layout::sync_dir(&self.dir)?;
            seg.dir_synced = true;
        }
        Ok(())
    }

    /// Before the first record of a segment: repairs the torn tails recovery deferred, then
    /// opens the segment. A failure here is not the writer's failure: nothing was written, so
    /// the item is refused and the next one tries again (a full disk that gets space back).
    fn prepare_segment(&mut self) -> Result<(), String> {
        let opened =
            recover::retry_pending(&self.dir, &self.session, &mut self.pending, &self.clock)
                .and_then(|()| self.open_segment());
        match opened {
            Ok(seg) => {
                if self.refusing {
                    tracing::info!(session = %self.session, "session takes data again");
                    self.refusing = false;
                }
                self.segment = Some(seg);
                Ok(())
            }
            Err(e) => {
                let reason = crate::error::chain(&e);
                if !self.refusing {
                    tracing::warn!(session = %self.session, "session refuses data for now: {reason}");
                    self.refusing = true;
                }
                Err(reason)
            }
        }
    }

    fn open_segment(&mut self) -> Result<OpenSegment, Error> {
        if !self.dir.is_dir() {
            std::fs::create_dir_all(&self.dir)
                .map_err(io_at("cannot create session directory", &self.dir))?;
            layout::sync_dir(&self.root)?;
        }
        let index = self.next_index;
        let path = self.dir.join(layout::segment_file_name(index));
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io_at("cannot create segment", &path))?;
        let header = SegmentHeader {
            version: SEGMENT_VERSION,
            server_run_id: self.clock.server_run_id,
            server_start_mono_ns: self.clock.start_mono_ns,
            server_start_wall_ns: self.clock.start_wall_ns,
            segment_index: index,
            server_boot_id: self.clock.boot_id,
        };
        if let Err(e) = file.write_all(&header.encode()) {
            // Nothing in it was acknowledged: remove it, or the next try finds it in the way.
            drop(file);
            let _ = std::fs::remove_file(&path);
            return Err(Error::io(
                format!("cannot write segment header to {}", path.display()),
                e,
            ));
        }
        self.next_index = index + 1;
        self.shared.stats.segments.fetch_add(1, Relaxed);
        self.shared
            .stats
            .bytes
            .fetch_add(SEGMENT_HEADER_LEN as u64, Relaxed);
        tracing::debug!(session = %self.session, segment = %path.display(), "segment opened");
        Ok(OpenSegment {
            file,
            path,
            len: SEGMENT_HEADER_LEN as u64,
            dir_synced: false,
        })
    }

    /// Enters the failed state: nothing is written or acknowledged any more.
    fn fail(&mut self, e: Error) {
        let reason = crate::error::chain(&e);
        tracing::error!(
            session = %self.session,
            "store write failed, session stops accepting data: {reason}"
        );
        *self
            .shared
            .failure
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(reason);
        self.segment = None;
        self.fail_pending();
    }

    /// Tells every connection waiting on the current group that it will not become durable.
    fn fail_pending(&mut self) {
        let reason: Arc<str> = self.shared.failure().unwrap_or_default().into();
        for (ack, _) in self.acks.drain(..) {
            ack.send_modify(|d| d.failure = Some(reason.clone()));
        }
        self.batch.clear();
        self.permits.clear();
    }
}
