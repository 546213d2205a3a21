//! Start-up recovery: make every session safe to append to, and remember what is stored.
//!
//! A server killed mid-write can leave the last segment of a session with a *torn tail*: a
//! record cut short, or garbage where the length or checksum does not match. Nothing in it was
//! acknowledged (acks follow `fdatasync`), so cutting it off loses nothing a client was told
//! is safe; and every record *before* it passed its checksum, so nothing before a torn tail is
//! ever lost. For each session recovery:
//!
//! 1. reads the last segment in full, verifying every record's length and crc32c. A bad
//!    record followed by intact ones is *corrupt*, not torn: the reader resynchronises on the
//!    next valid record, the damage is reported, and its bytes are copied to
//!    `<session>/quarantine/<segment>@<offset>` but left in place — recovery never deletes
//!    acknowledged data. Only damage with nothing intact after it (an incomplete final record)
//!    is a torn tail: its bytes are quarantined too, then the file is truncated there and
//!    synced; a last segment too short to hold its header is removed. Each repair is logged
//!    and appended as one JSON line to `<session>/recovery.jsonl`, where `inspect` shows it;
//! 2. skims the record headers of all other segments (they were completed and synced before
//!    the next one was begun, so their checksums are not re-verified) — damage found there is
//!    reported but left in place;
//! 3. rebuilds the deduplication map (process, stream) → highest stored seq from the keys of
//!    all `StoreData` records, and picks the next segment index (one past the highest).
//!
//! A torn tail is cut only once its copy is safely in quarantine (a bit flipped in the last
//! acknowledged record also looks like a torn tail). When the copy cannot be made — a full
//! disk (ENOSPC), a quota, a read-only file system — the tail is **kept in place** and the
//! repair is *deferred*: recovery logs it, reports it ([`SessionRecovery::deferred`]), notes it
//! in `recovery.jsonl` if it can, and the server starts anyway. Readers see the tail as a
//! fault and read everything before it. The session's writer retries the repair before it
//! writes anything for the session (`retry_pending`) and writes nothing to the session until
//! the repair succeeds (its clients are told, keep their frames and come back), so the torn
//! segment stays the session's last one and every later start finds it again. Copying
//! corrupt bytes that stay in place anyway is best effort: a failed copy is logged.
//!
//! Only the last segment of a session can be torn: each server run starts a new segment, and
//! recovery runs before any run writes.

use crate::clock::{RunClock, wall_ns};
use crate::dedup::Dedup;
use crate::error::{Error, chain, io_at};
use crate::layout::{self, RECOVERY_LOG};
use crate::reader::read_at_up_to;
use crate::reader::{Fault, FaultKind, SegmentFile, SegmentReader, StoreDir, list_segments};
use p5_wire::store::SEGMENT_HEADER_LEN;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::{BufRead as _, BufReader, Write};
use std::path::{Path, PathBuf};

/// One torn tail cut off by recovery (a line of `recovery.jsonl`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repair {
    /// Segment file name.
    pub segment: String,
    /// Where the file was cut (its new length; 0 if the file was removed).
    pub offset: u64,
    /// Bytes removed.
    pub removed_bytes: u64,
    /// What was wrong at `offset`.
    pub reason: String,
    /// The server run that repaired it.
    pub server_run_id: u64,
    /// When, ns since the epoch.
    pub repaired_at_wall_ns: i64,
    /// Set if the tail was *not* cut: why it could not be quarantined first (it is kept in
    /// place and the repair retried; see the module docs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deferred: Option<String>,
}

/// What recovery did to one session.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SessionRecovery {
    /// Session name.
    pub session: String,
    /// Segments found.
    pub segments: usize,
    /// Records found (verified in the last segment, skimmed in the others).
    pub records: u64,
    /// Streams in the deduplication map.
    pub streams: usize,
    /// Torn tails repaired now.
    pub repairs: Vec<Repair>,
    /// Torn tails kept in place because their bytes could not be quarantined first.
    pub deferred: Vec<Repair>,
    /// Damage found but not repairable (not in the last segment).
    pub faults: Vec<Fault>,
}

/// What recovery did to the store.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RecoveryReport {
    /// Per session, in name order.
    pub sessions: Vec<SessionRecovery>,
}

impl RecoveryReport {
    /// All repairs made, with their session.
    pub fn repairs(&self) -> impl Iterator<Item = (&str, &Repair)> {
        self.sessions
            .iter()
            .flat_map(|s| s.repairs.iter().map(move |r| (s.session.as_str(), r)))
    }
}

/// State a session writer starts from.
#[derive(Debug, Default)]
pub(crate) struct RecoveredState {
    pub dedup: Dedup,
    pub next_index: u64,
    /// Torn tails whose repair was deferred.
    pub pending: Vec<PendingTail>,
}

/// A torn tail kept in place, to be cut once it can be quarantined.
#[derive(Debug, Clone)]
pub(crate) struct PendingTail {
    seg: SegmentFile,
    keep: u64,
    reason: String,
}

/// Recovers every session of the store at `root`.
pub(crate) fn recover_store(
    root: &Path,
    clock: &RunClock,
) -> Result<(RecoveryReport, HashMap<String, RecoveredState>), Error> {
    let mut report = RecoveryReport::default();
    let mut states = HashMap::new();
    for session in StoreDir::open(root)?.sessions()? {
        let (rec, state) = recover_session(&session.path, &session.name, clock)?;
        tracing::info!(
            session = %rec.session,
            segments = rec.segments,
            records = rec.records,
            streams = rec.streams,
            repairs = rec.repairs.len(),
            "session recovered"
        );
        for f in &rec.faults {
            tracing::warn!(session = %rec.session, "store damage left in place: {f}");
        }
        for d in &rec.deferred {
            tracing::warn!(
                session = %rec.session,
                segment = %d.segment,
                offset = d.offset,
                bytes = d.removed_bytes,
                "torn tail kept in place: {}; the session takes no data until it can be \
                 quarantined (free some space)",
                d.deferred.as_deref().unwrap_or_default()
            );
        }
        states.insert(session.name.clone(), state);
        report.sessions.push(rec);
    }
    Ok((report, states))
}

/// Recovers one session directory (see the module documentation).
pub(crate) fn recover_session(
    dir: &Path,
    name: &str,
    clock: &RunClock,
) -> Result<(SessionRecovery, RecoveredState), Error> {
    let segments = list_segments(dir)?;
    let mut rec = SessionRecovery {
        session: name.to_owned(),
        segments: segments.len(),
        ..SessionRecovery::default()
    };
    let mut state = RecoveredState {
        dedup: Dedup::new(),
        next_index: segments.last().map_or(0, |s| s.index + 1),
        pending: Vec::new(),
    };
    for (i, seg) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        let mut r = match SegmentReader::open(&seg.path) {
            Ok(r) => r,
            Err(Error::BadSegment { source, .. }) => {
                if last && seg.len < SEGMENT_HEADER_LEN as u64 {
                    match remove_torn_header(dir, name, seg, &source, clock) {
                        Ok(repair) => {
                            rec.segments -= 1;
                            rec.repairs.push(repair);
                        }
                        Err(e) => rec.faults.push(Fault {
                            segment: seg.file_name(),
                            offset: 0,
                            kind: FaultKind::BadHeader,
                            error: format!("{source}; cannot remove it: {}", chain(&e)),
                        }),
                    }
                } else {
                    rec.faults.push(Fault {
                        segment: seg.file_name(),
                        offset: 0,
                        kind: FaultKind::BadHeader,
                        error: source.to_string(),
                    });
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        let step = if last {
            SegmentReader::advance
        } else {
            SegmentReader::skim
        };
        while step(&mut r)? {
            if let Some(k) = r.data_key() {
                state.dedup.observe(k.process_uid, k.stream, k.seq);
            }
        }
        rec.records += r.records();
        rec.faults.extend(r.skipped().iter().cloned());
        for &(from, to) in r.corrupt_ranges() {
            if let Err(e) = quarantine(dir, seg, from, to) {
                tracing::warn!(
                    segment = %seg.file_name(),
                    offset = from,
                    "corrupt bytes left in place without a quarantine copy: {}",
                    chain(&e)
                );
            }
        }
        match r.tail() {
            Some(tail) if last => {
                let pending = PendingTail {
                    seg: seg.clone(),
                    keep: r.end_offset(),
                    reason: tail.error.clone(),
                };
                match cut_tail(dir, name, &pending, clock) {
                    Ok(repair) => rec.repairs.push(repair),
                    Err(e) => {
                        let repair = pending.note(clock, Some(chain(&e)))?;
                        note_repair(dir, name, &repair);
                        rec.deferred.push(repair);
                        state.pending.push(pending);
                    }
                }
            }
            Some(tail) => rec.faults.push(tail.clone()),
            None => {}
        }
    }
    rec.streams = state.dedup.len();
    Ok((rec, state))
}

impl PendingTail {
    /// The repair record for this tail (`deferred`: why it is not cut yet).
    fn note(&self, clock: &RunClock, deferred: Option<String>) -> Result<Repair, Error> {
        let now_len = std::fs::metadata(&self.seg.path)
            .map_err(io_at("cannot stat", &self.seg.path))?
            .len();
        Ok(Repair {
            segment: self.seg.file_name(),
            offset: self.keep,
            removed_bytes: now_len.saturating_sub(self.keep),
            reason: self.reason.clone(),
            server_run_id: clock.server_run_id,
            repaired_at_wall_ns: wall_ns(),
            deferred,
        })
    }
}

/// Quarantines a torn tail, then cuts it off and syncs; notes the repair.
fn cut_tail(dir: &Path, name: &str, t: &PendingTail, clock: &RunClock) -> Result<Repair, Error> {
    let repair = t.note(clock, None)?;
    quarantine(dir, &t.seg, t.keep, t.keep + repair.removed_bytes)?;
    let file = OpenOptions::new()
        .write(true)
        .open(&t.seg.path)
        .map_err(io_at("cannot open for repair", &t.seg.path))?;
    file.set_len(t.keep)
        .and_then(|()| file.sync_all())
        .map_err(io_at("cannot truncate torn tail of", &t.seg.path))?;
    note_repair(dir, name, &repair);
    Ok(repair)
}

/// Retries the deferred repairs of session `name` (in `dir`); they leave `pending` as they
/// succeed. An error names the first that still cannot be made.
pub(crate) fn retry_pending(
    dir: &Path,
    name: &str,
    pending: &mut Vec<PendingTail>,
    clock: &RunClock,
) -> Result<(), Error> {
    while let Some(t) = pending.first() {
        cut_tail(dir, name, t, clock).map_err(|e| {
            Error::io(
                format!(
                    "the torn tail of {} at offset {} could not be quarantined yet (free some \
                     space)",
                    t.seg.path.display(),
                    t.keep
                ),
                std::io::Error::other(chain(&e)),
            )
        })?;
        pending.remove(0);
    }
    Ok(())
}

/// Removes a last segment too short to hold its header; notes the repair.
fn remove_torn_header(
    dir: &Path,
    name: &str,
    seg: &SegmentFile,
    source: &p5_wire::DecodeError,
    clock: &RunClock,
) -> Result<Repair, Error> {
    std::fs::remove_file(&seg.path).map_err(io_at("cannot remove torn segment", &seg.path))?;
    layout::sync_dir(dir)?;
    let repair = Repair {
        segment: seg.file_name(),
        offset: 0,
        removed_bytes: seg.len,
        reason: format!("torn segment header, file removed: {source}"),
        server_run_id: clock.server_run_id,
        repaired_at_wall_ns: wall_ns(),
        deferred: None,
    };
    note_repair(dir, name, &repair);
    Ok(repair)
}

/// Where damaged bytes of a session are kept (`<session>/quarantine`).
pub fn quarantine_dir(session_dir: &Path) -> PathBuf {
    session_dir.join("quarantine")
}

/// Copies bytes `[from, to)` of `seg` to `<session>/quarantine/<segment>@<from>` (once: an
/// existing copy is kept) and syncs it, so damage is never simply deleted.
fn quarantine(dir: &Path, seg: &SegmentFile, from: u64, to: u64) -> Result<(), Error> {
    if to <= from {
        return Ok(());
    }
    let qdir = quarantine_dir(dir);
    let path = qdir.join(format!("{}@{from}", seg.file_name()));
    if path.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(&qdir).map_err(io_at("cannot create", &qdir))?;
    let tmp = qdir.join(format!(".{}@{from}.tmp", seg.file_name()));
    let copied = copy_range(&seg.path, &tmp, from, to)
        .and_then(|()| std::fs::rename(&tmp, &path).map_err(io_at("cannot rename", &tmp)));
    if let Err(e) = copied {
        // A partial copy only takes the space the repair is waiting for.
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    layout::sync_dir(&qdir)?;
    layout::sync_dir(dir)?;
    tracing::warn!(
        segment = %seg.file_name(),
        offset = from,
        bytes = to - from,
        "damaged store bytes quarantined in {}",
        path.display()
    );
    Ok(())
}

/// Copies bytes `[from, to)` of `src` to a new file `dst` and syncs it.
fn copy_range(src: &Path, dst: &Path, from: u64, to: u64) -> Result<(), Error> {
    let input = std::fs::File::open(src).map_err(io_at("cannot open", src))?;
    let mut out = std::fs::File::create(dst).map_err(io_at("cannot create", dst))?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut at = from;
    while at < to {
        let want = ((to - at) as usize).min(buf.len());
        let n = read_at_up_to(&input, &mut buf[..want], at).map_err(io_at("cannot read", src))?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n])
            .map_err(io_at("cannot write", dst))?;
        at += n as u64;
    }
    out.sync_all().map_err(io_at("cannot sync", dst))
}

/// Logs a repair and appends it to the session's repair log; a failure to append (a full
/// disk) is logged, not fatal: the repair itself is done, or deferred and retried.
fn note_repair(dir: &Path, session: &str, repair: &Repair) {
    if repair.deferred.is_none() {
        tracing::warn!(
            session,
            segment = %repair.segment,
            offset = repair.offset,
            removed_bytes = repair.removed_bytes,
            "repaired torn tail: {}",
            repair.reason
        );
    }
    if let Err(e) = append_note(dir, repair) {
        tracing::warn!(
            session,
            "cannot note the repair in {RECOVERY_LOG}: {}",
            chain(&e)
        );
    }
}

fn append_note(dir: &Path, repair: &Repair) -> Result<(), Error> {
    let path = dir.join(RECOVERY_LOG);
    let existed = path.exists();
    let mut line = serde_json::to_string(repair)
        .map_err(|e| Error::io("cannot encode repair", std::io::Error::other(e)))?;
    line.push('\n');
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(io_at("cannot open", &path))?;
    f.write_all(line.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(io_at("cannot append to", &path))?;
    if !existed {
        layout::sync_dir(dir)?;
    }
    Ok(())
}

/// A session's repair log as read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairLog {
    /// The repairs, oldest first.
    pub repairs: Vec<Repair>,
    /// Lines that were not valid UTF-8, read with their bad bytes replaced.
    pub lossy_lines: u64,
    /// Lines that are not a repair at all (skipped).
    pub unreadable_lines: u64,
}

/// Reads a session's repair log (missing file: no repairs). The log is informational, so
/// damage never fails the read: bytes that are not UTF-8 are replaced, lines that are not a
/// repair are skipped, and both are counted.
pub fn read_repair_log(dir: &Path) -> Result<RepairLog, Error> {
    let path = dir.join(RECOVERY_LOG);
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(RepairLog::default()),
        Err(e) => return Err(Error::io(format!("cannot open {}", path.display()), e)),
    };
    let mut log = RepairLog::default();
    let mut reader = BufReader::new(file);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(io_at("cannot read", &path))?;
        if n == 0 {
            break;
        }
        let text = String::from_utf8_lossy(&line);
        if text.trim().is_empty() {
            continue;
        }
        if matches!(text, std::borrow::Cow::Owned(_)) {
            log.lossy_lines += 1;
        }
        match serde_json::from_str(text.trim_end()) {
            Ok(r) => log.repairs.push(r),
            Err(_) => log.unreadable_lines += 1,
        }
    }
    Ok(log)
}

/// The repairs of a session's repair log (see [`read_repair_log`]).
pub fn read_repairs(dir: &Path) -> Result<Vec<Repair>, Error> {
    read_repair_log(dir).map(|l| l.repairs)
}
