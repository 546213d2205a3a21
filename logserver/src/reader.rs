//! The reading side of the session store, for `inspect`, recovery and `p5 merge`.
//!
//! Everything streams: a [`SegmentReader`] holds one record at a time in a reused buffer
//! (records are at most [`MAX_RECORD_LEN`] bytes), so a store of any size is read in bounded
//! memory. The API is a *lending* cursor, `advance()` then `record()`, because a record
//! borrows the reader's buffer:
//!
//! ```no_run
//! use p5_logserver::reader::StoreDir;
//! use p5_wire::store::StoreRecord;
//!
//! # fn main() -> Result<(), p5_logserver::Error> {
//! let store = StoreDir::open("p5-store")?;
//! for session in store.sessions()? {
//!     let mut records = session.records()?;
//!     while records.advance()? {
//!         let Some(r) = records.record() else { continue };
//!         if let StoreRecord::Data { t_s, process_uid, ty, body } = r.record {
//!             // r.segment: the segment header (server run, CLOCK_MONOTONIC start of t_s)
//!             let _ = (t_s, process_uid, ty, body, r.segment.server_start_mono_ns);
//!         }
//!     }
//!     for fault in records.faults() {
//!         eprintln!("{}: {fault}", session.name);
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! Damage is reported, not fatal. A record with a bad length or checksum is *corrupt* if an
//! intact record follows it: the reader resynchronises on the next valid record header (a
//! length in range, a store record type, a matching crc32c), skips the bytes between and
//! reports them as a [`FaultKind::Corrupt`] fault ([`SegmentReader::corrupt_ranges`] says
//! where). Only damage with no intact record after it is a *torn tail* (an incomplete final
//! record, or garbage at the end); it ends the segment and is reported. A record whose
//! checksum is right but whose body does not decode is skipped and reported; a segment with a
//! bad header is skipped and reported. Only I/O errors are returned as errors. Records of
//! types this version does not know decode as `StoreRecord::Unknown` and can be skipped.
//!
//! Time base: a record's `t_s` counts from the start of the server run that wrote its segment;
//! `segment.server_start_mono_ns + t_s` is CLOCK_MONOTONIC of the server's host. `t_s = 0` in a
//! `StoreData` record means "no receipt time" (imported from a spool file; its process record
//! has `conn_id == `[`crate::import::IMPORTED_CONN_ID`]).

use crate::error::{Error, io_at};
use crate::layout;
use crate::recover::{self, Repair};
use p5_wire::data::DataHeader;
use p5_wire::frame::{self, FrameType};
use p5_wire::store::{SEGMENT_HEADER_LEN, SegmentHeader, StoreRecord};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Largest record a segment may hold: a `StoreData` record wraps a whole received frame
/// (`len` up to `MAX_FRAME_LEN`) and adds its record type, `t_s` and `process_uid` (17 bytes).
pub const MAX_RECORD_LEN: u32 = frame::MAX_FRAME_LEN + 17;
/// Largest segment header accepted (the format allows longer headers than version 1 writes).
const MAX_HEADER_LEN: u32 = 64 * 1024;
/// Bytes of a record's payload needed to find a data frame's key:
/// record type, `t_s`, `process_uid`, frame type, [`DataHeader`].
const SKIM_LEN: usize = 1 + 8 + 8 + 1 + p5_wire::data::DATA_HEADER_LEN;
/// Read buffer of a segment reader.
const READ_BUFFER: usize = 256 * 1024;
/// Bytes examined at a time while resynchronising after a corrupt record.
const SCAN_WINDOW: usize = 64 * 1024;

/// A store directory.
#[derive(Debug, Clone)]
pub struct StoreDir {
    root: PathBuf,
}

impl StoreDir {
    /// Opens a store directory for reading (no lock is taken; a running server may append).
    pub fn open(root: impl AsRef<Path>) -> Result<Self, Error> {
        let root = root.as_ref().to_path_buf();
        let meta = std::fs::metadata(&root).map_err(io_at("cannot open store", &root))?;
        if !meta.is_dir() {
            return Err(Error::io(
                format!("cannot open store {}", root.display()),
                io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
            ));
        }
        Ok(Self { root })
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Sessions in name order (directories with valid session names).
    pub fn sessions(&self) -> Result<Vec<SessionDir>, Error> {
        let mut out = Vec::new();
        let entries = std::fs::read_dir(&self.root).map_err(io_at("cannot list", &self.root))?;
        for entry in entries {
            let entry = entry.map_err(io_at("cannot list", &self.root))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if !crate::session::is_valid(&name) || !entry.path().is_dir() {
                continue;
            }
            out.push(SessionDir {
                name,
                path: entry.path(),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Whether this looks like a session store: it has the lock file a server or import
    /// creates, or a session directory with at least one segment.
    pub fn is_store(&self) -> Result<bool, Error> {
        if self.root.join(layout::LOCK_FILE).exists() {
            return Ok(true);
        }
        for s in self.sessions()? {
            if !s.segments()?.is_empty() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// One session by name.
    pub fn session(&self, name: &str) -> Result<SessionDir, Error> {
        let name = crate::session::resolve(name)?;
        Ok(SessionDir {
            name: name.to_owned(),
            path: self.root.join(name),
        })
    }
}

/// A session directory.
#[derive(Debug, Clone)]
pub struct SessionDir {
    /// The session name.
    pub name: String,
    /// Its directory.
    pub path: PathBuf,
}

impl SessionDir {
    /// Segment files in index order.
    pub fn segments(&self) -> Result<Vec<SegmentFile>, Error> {
        list_segments(&self.path)
    }

    /// A cursor over all records of all segments, in order.
    pub fn records(&self) -> Result<SessionRecords, Error> {
        Ok(SessionRecords {
            segments: self.segments()?.into_iter(),
            current: None,
            faults: Vec::new(),
        })
    }

    /// Torn tails repaired by start-up recovery, oldest first.
    pub fn repairs(&self) -> Result<Vec<Repair>, Error> {
        recover::read_repairs(&self.path)
    }

    /// The repair log with what could not be read of it.
    pub fn repair_log(&self) -> Result<recover::RepairLog, Error> {
        recover::read_repair_log(&self.path)
    }
}

/// A segment file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentFile {
    /// Index from the file name.
    pub index: u64,
    /// Path.
    pub path: PathBuf,
    /// Size in bytes when listed.
    pub len: u64,
}

impl SegmentFile {
    /// Opens the segment for reading.
    pub fn open(&self) -> Result<SegmentReader, Error> {
        SegmentReader::open(&self.path)
    }

    /// The file name.
    pub fn file_name(&self) -> String {
        layout::segment_file_name(self.index)
    }
}

/// Segment files of a session directory, in index order.
pub fn list_segments(dir: &Path) -> Result<Vec<SegmentFile>, Error> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(Error::io(format!("cannot list {}", dir.display()), e)),
    };
    for entry in entries {
        let entry = entry.map_err(io_at("cannot list", dir))?;
        let Some(index) = entry
            .file_name()
            .to_str()
            .and_then(layout::parse_segment_file_name)
        else {
            continue;
        };
        let meta = entry
            .metadata()
            .map_err(io_at("cannot stat", &entry.path()))?;
        if meta.is_file() {
            out.push(SegmentFile {
                index,
                path: entry.path(),
                len: meta.len(),
            });
        }
    }
    out.sort_by_key(|s| s.index);
    Ok(out)
}

/// What kind of damage a [`Fault`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// The segment ends in an incomplete or corrupt record; nothing after it is readable.
    TornTail,
    /// A record with a valid checksum whose body does not decode; skipped.
    Malformed,
    /// The segment header is missing or invalid; the segment is skipped.
    BadHeader,
    /// A record with a bad length or checksum followed by intact records; its bytes are
    /// skipped (reading resumes at the next valid record).
    Corrupt,
}

/// Damage found while reading.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    /// Segment file name.
    pub segment: String,
    /// Byte offset of the damaged record (or 0 for a bad header).
    pub offset: u64,
    /// What kind of damage.
    pub kind: FaultKind,
    /// The decoder's message.
    pub error: String,
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.kind {
            FaultKind::TornTail => "torn tail",
            FaultKind::Malformed => "malformed record skipped",
            FaultKind::BadHeader => "bad segment header, segment skipped",
            FaultKind::Corrupt => "corrupt record skipped",
        };
        write!(
            f,
            "{} at offset {}: {what}: {}",
            self.segment, self.offset, self.error
        )
    }
}

/// The key of a stored data frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DataKey {
    /// Sending process.
    pub process_uid: u64,
    /// Frame type (`StreamOpen`, `Events` or `StreamClose`).
    pub ty: u8,
    /// Stream.
    pub stream: u32,
    /// Sequence number.
    pub seq: u64,
}

/// A decoded record and where it came from.
#[derive(Debug, Clone)]
pub struct RecordRef<'a> {
    /// Header of the segment holding the record (server run, time base).
    pub segment: &'a SegmentHeader,
    /// Byte offset of the record in its segment file.
    pub offset: u64,
    /// The record.
    pub record: StoreRecord<'a>,
}

/// A streaming reader of one segment file.
#[derive(Debug)]
pub struct SegmentReader {
    name: String,
    file: BufReader<File>,
    header: SegmentHeader,
    header_len: u64,
    file_len: u64,
    offset: u64,
    cur_offset: u64,
    buf: Vec<u8>,
    full: bool,
    has_current: bool,
    done: bool,
    records: u64,
    tail: Option<Fault>,
    skipped: Vec<Fault>,
    corrupt: Vec<(u64, u64)>,
}

fn read_err(segment: &str, e: io::Error) -> Error {
    Error::io(format!("cannot read segment {segment}"), e)
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
pub(crate) fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl SegmentReader {
    /// Opens a segment and reads its header. A missing or invalid header is
    /// [`Error::BadSegment`].
    pub fn open(path: &Path) -> Result<Self, Error> {
        let file = File::open(path).map_err(io_at("cannot open segment", path))?;
        let file_len = file
            .metadata()
            .map_err(io_at("cannot stat segment", path))?
            .len();
        let mut file = BufReader::with_capacity(READ_BUFFER, file);
        let bad = |source| Error::BadSegment {
            path: path.to_path_buf(),
            source,
        };
        let mut head = vec![0u8; 16];
        let n = read_up_to(&mut file, &mut head).map_err(io_at("cannot read segment", path))?;
        if n < head.len() {
            return Err(bad(p5_wire::DecodeError::Truncated {
                need: SEGMENT_HEADER_LEN - n,
            }));
        }
        let header_len = u32::from_le_bytes([head[12], head[13], head[14], head[15]]);
        if header_len > MAX_HEADER_LEN {
            return Err(bad(p5_wire::DecodeError::Invalid {
                field: "segment header length",
                value: header_len as u64,
            }));
        }
        let want = (header_len as usize).max(SEGMENT_HEADER_LEN);
        head.resize(want, 0);
        let n =
            read_up_to(&mut file, &mut head[16..]).map_err(io_at("cannot read segment", path))?;
        head.truncate(16 + n);
        let (header, start) = SegmentHeader::decode(&head).map_err(bad)?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(Self {
            name,
            file,
            header,
            header_len: start as u64,
            file_len,
            offset: start as u64,
            cur_offset: start as u64,
            buf: Vec::new(),
            full: false,
            has_current: false,
            done: false,
            records: 0,
            tail: None,
            skipped: Vec::new(),
            corrupt: Vec::new(),
        })
    }

    /// The segment header.
    pub fn header(&self) -> &SegmentHeader {
        &self.header
    }

    /// Length of the header, i.e. the offset of the first record.
    pub fn header_len(&self) -> u64 {
        self.header_len
    }

    /// Size of the file when it was opened.
    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// Moves to the next record, reading and checking all of it. `false` at the end of the
    /// segment or at a torn tail (see [`SegmentReader::tail`]).
    pub fn advance(&mut self) -> Result<bool, Error> {
        self.step(true)
    }

    /// Moves to the next record reading only its envelope and first bytes (enough for
    /// [`SegmentReader::data_key`]); checks lengths against the file size but not checksums.
    /// [`SegmentReader::record`] is `None` after a skim of a large record.
    pub fn skim(&mut self) -> Result<bool, Error> {
        self.step(false)
    }

    fn torn(&mut self, offset: u64, error: String) -> Result<bool, Error> {
        self.done = true;
        self.tail = Some(Fault {
            segment: self.name.clone(),
            offset,
            kind: FaultKind::TornTail,
            error,
        });
        Ok(false)
    }

    /// Damage at `start`: resynchronise on the next intact record if there is one (the bytes
    /// between are a corrupt region), else it is the torn tail. `Ok(true)`: read on.
    fn damaged(&mut self, start: u64, error: String) -> Result<bool, Error> {
        let Some(next) = self.find_record(start + 1)? else {
            self.torn(start, error)?;
            return Ok(false);
        };
        self.skipped.push(Fault {
            segment: self.name.clone(),
            offset: start,
            kind: FaultKind::Corrupt,
            error: format!("{error}; {} bytes skipped", next - start),
        });
        self.corrupt.push((start, next));
        self.file
            .seek(SeekFrom::Start(next))
            .map_err(|e| read_err(&self.name, e))?;
        self.offset = next;
        Ok(true)
    }

    /// The offset of the first intact record at or after `from`, if any: a plausible header
    /// whose payload is there, starts with a store record type and passes its crc32c.
    fn find_record(&self, from: u64) -> Result<Option<u64>, Error> {
        let f = self.file.get_ref();
        let mut win = vec![0u8; SCAN_WINDOW];
        let mut payload = Vec::new();
        let mut pos = from;
        while pos + frame::HEADER_LEN as u64 <= self.file_len {
            let n = read_at_up_to(f, &mut win, pos).map_err(|e| read_err(&self.name, e))?;
            if n < frame::HEADER_LEN {
                break;
            }
            for i in 0..=n - frame::HEADER_LEN {
                let p = pos + i as u64;
                let len = u32::from_le_bytes([win[i], win[i + 1], win[i + 2], win[i + 3]]);
                let end = p + frame::HEADER_LEN as u64 + len as u64;
                if len == 0 || len > MAX_RECORD_LEN || end > self.file_len {
                    continue;
                }
                if let Some(&ty) = win.get(i + frame::HEADER_LEN).filter(|_| i + 8 < n)
                    && !(0x80..=0xBF).contains(&ty)
                {
                    continue;
                }
                let crc = u32::from_le_bytes([win[i + 4], win[i + 5], win[i + 6], win[i + 7]]);
                payload.resize(len as usize, 0);
                let got = read_at_up_to(f, &mut payload, p + frame::HEADER_LEN as u64)
                    .map_err(|e| read_err(&self.name, e))?;
                if got == payload.len() && frame::check(crc, &payload).is_ok() {
                    return Ok(Some(p));
                }
            }
            pos += (n - frame::HEADER_LEN + 1) as u64;
        }
        Ok(None)
    }

    fn step(&mut self, full: bool) -> Result<bool, Error> {
        self.has_current = false;
        loop {
            if self.done {
                return Ok(false);
            }
            let start = self.offset;
            let mut h = [0u8; frame::HEADER_LEN];
            let n = read_up_to(&mut self.file, &mut h).map_err(|e| read_err(&self.name, e))?;
            if n == 0 {
                self.done = true;
                return Ok(false);
            }
            if n < h.len() {
                return self.torn(
                    start,
                    format!("file ends inside a record header ({n} of 8 bytes)"),
                );
            }
            let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
            let crc = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
            if len == 0 || len > MAX_RECORD_LEN {
                if self.damaged(start, format!("record length {len} out of range"))? {
                    continue;
                }
                return Ok(false);
            }
            let total = frame::HEADER_LEN as u64 + len as u64;
            if full || len as usize <= SKIM_LEN {
                self.buf.resize(len as usize, 0);
                let n = read_up_to(&mut self.file, &mut self.buf)
                    .map_err(|e| read_err(&self.name, e))?;
                let bad = if n < len as usize {
                    Some(format!("file ends inside a record ({n} of {len} bytes)"))
                } else {
                    frame::check(crc, &self.buf).err().map(|e| e.to_string())
                };
                if let Some(error) = bad {
                    if self.damaged(start, error)? {
                        continue;
                    }
                    return Ok(false);
                }
                self.offset = start + total;
                if let Err(e) = StoreRecord::decode(self.buf[0], &self.buf[1..]) {
                    self.skipped.push(Fault {
                        segment: self.name.clone(),
                        offset: start,
                        kind: FaultKind::Malformed,
                        error: e.to_string(),
                    });
                    continue;
                }
                self.full = true;
            } else {
                if start + total > self.file_len {
                    let error = format!("record of {len} bytes runs past the end of the file");
                    if self.damaged(start, error)? {
                        continue;
                    }
                    return Ok(false);
                }
                self.buf.resize(SKIM_LEN, 0);
                let n = read_up_to(&mut self.file, &mut self.buf)
                    .map_err(|e| read_err(&self.name, e))?;
                if n < SKIM_LEN {
                    return self.torn(start, "file ends inside a record".into());
                }
                self.file
                    .seek_relative(len as i64 - SKIM_LEN as i64)
                    .map_err(|e| read_err(&self.name, e))?;
                self.offset = start + total;
                self.full = false;
            }
            self.cur_offset = start;
            self.has_current = true;
            self.records += 1;
            return Ok(true);
        }
    }

    /// The current record (after a successful [`SegmentReader::advance`]).
    pub fn record(&self) -> Option<RecordRef<'_>> {
        if !self.has_current || !self.full {
            return None;
        }
        let (&ty, body) = self.buf.split_first()?;
        let record = StoreRecord::decode(ty, body).ok()?;
        Some(RecordRef {
            segment: &self.header,
            offset: self.cur_offset,
            record,
        })
    }

    /// The raw bytes of the current record (type byte and body), if fully read.
    pub fn raw(&self) -> Option<&[u8]> {
        (self.has_current && self.full).then_some(&self.buf[..])
    }

    /// If the current record is a stored data frame, its key.
    pub fn data_key(&self) -> Option<DataKey> {
        if !self.has_current {
            return None;
        }
        let b = self.buf.get(..SKIM_LEN)?;
        if b[0] != FrameType::StoreData as u8 {
            return None;
        }
        let ty = b[17];
        if !FrameType::from_u8(ty).is_some_and(FrameType::is_data) {
            return None;
        }
        let process_uid = u64::from_le_bytes(b[9..17].try_into().ok()?);
        let h = DataHeader::peek(&b[18..]).ok()?;
        Some(DataKey {
            process_uid,
            ty,
            stream: h.stream,
            seq: h.seq,
        })
    }

    /// Offset of the current record.
    pub fn record_offset(&self) -> u64 {
        self.cur_offset
    }

    /// Offset just after the last record read: at the end, the length of the intact part.
    pub fn end_offset(&self) -> u64 {
        self.offset
    }

    /// Records read so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The torn tail that ended the segment, if any.
    pub fn tail(&self) -> Option<&Fault> {
        self.tail.as_ref()
    }

    /// Malformed and corrupt records skipped so far.
    pub fn skipped(&self) -> &[Fault] {
        &self.skipped
    }

    /// Byte ranges `[start, end)` of corrupt regions skipped so far.
    pub fn corrupt_ranges(&self) -> &[(u64, u64)] {
        &self.corrupt
    }
}

/// Positional read until `buf` is full or the file ends; returns the bytes read.
pub(crate) fn read_at_up_to(f: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], at + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// A cursor over every record of a session, segment after segment.
#[derive(Debug)]
pub struct SessionRecords {
    segments: std::vec::IntoIter<SegmentFile>,
    current: Option<SegmentReader>,
    faults: Vec<Fault>,
}

impl SessionRecords {
    /// Moves to the next record; `false` when all segments are done.
    pub fn advance(&mut self) -> Result<bool, Error> {
        loop {
            if let Some(r) = self.current.as_mut() {
                if r.advance()? {
                    return Ok(true);
                }
                self.faults.extend(r.skipped().iter().cloned());
                self.faults.extend(r.tail().cloned());
                self.current = None;
            }
            let Some(seg) = self.segments.next() else {
                return Ok(false);
            };
            match SegmentReader::open(&seg.path) {
                Ok(r) => self.current = Some(r),
                Err(Error::BadSegment { source, .. }) => self.faults.push(Fault {
                    segment: seg.file_name(),
                    offset: 0,
                    kind: FaultKind::BadHeader,
                    error: source.to_string(),
                }),
                Err(e) => return Err(e),
            }
        }
    }

    /// The current record.
    pub fn record(&self) -> Option<RecordRef<'_>> {
        self.current.as_ref()?.record()
    }

    /// The segment reader positioned at the current record.
    pub fn segment(&self) -> Option<&SegmentReader> {
        self.current.as_ref()
    }

    /// Damage found in segments finished so far (all of it once `advance` returned `false`).
    pub fn faults(&self) -> &[Fault] {
        &self.faults
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p5_wire::store;
    use std::io::Write;

    fn segment(dir: &Path, records: &[Vec<u8>]) -> PathBuf {
        let path = dir.join(layout::segment_file_name(0));
        let mut f = File::create(&path).unwrap();
        let h = SegmentHeader {
            version: 1,
            server_run_id: 9,
            server_start_mono_ns: 100,
            server_start_wall_ns: 200,
            segment_index: 0,
            server_boot_id: [0; 16],
        };
        f.write_all(&h.encode()).unwrap();
        for r in records {
            f.write_all(r).unwrap();
        }
        path
    }

    fn data(seq: u64, body_extra: usize) -> Vec<u8> {
        let mut body = Vec::new();
        DataHeader {
            stream: 3,
            seq,
            t_p: 5,
        }
        .encode(&mut body);
        body.resize(body.len() + body_extra, 0xaa);
        let mut out = Vec::new();
        store::encode_data(&mut out, 10, 77, FrameType::Events as u8, &body);
        out
    }

    #[test]
    fn reads_skims_and_reports_torn_tail() {
        let d = tempfile::tempdir().unwrap();
        let mut disc = Vec::new();
        store::encode_disconnect(&mut disc, 1, 77, "bye");
        let recs = vec![data(1, 0), data(2, 5000), disc];
        let path = segment(d.path(), &recs);
        let mut r = SegmentReader::open(&path).unwrap();
        assert_eq!(r.header().server_run_id, 9);
        let mut keys = Vec::new();
        while r.advance().unwrap() {
            assert!(r.record().is_some());
            keys.push(r.data_key().map(|k| k.seq));
        }
        assert_eq!(keys, vec![Some(1), Some(2), None]);
        assert!(r.tail().is_none());
        let clean_len = r.end_offset();

        let mut r = SegmentReader::open(&path).unwrap();
        let mut n = 0;
        while r.skim().unwrap() {
            n += 1;
        }
        assert_eq!((n, r.end_offset()), (3, clean_len));

        // Garbage after the last record: a torn tail at the old end.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(&[0xab; 13])
            .unwrap();
        let mut r = SegmentReader::open(&path).unwrap();
        while r.advance().unwrap() {}
        assert_eq!(r.records(), 3);
        assert_eq!(r.tail().unwrap().offset, clean_len);

        // A flipped byte inside the second record: that record is skipped as corrupt, the
        // reader resynchronises on the third, and the garbage at the end is still the tail.
        let mut bytes = std::fs::read(&path).unwrap();
        let second = SEGMENT_HEADER_LEN + recs[0].len();
        bytes[second + 40] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let mut r = SegmentReader::open(&path).unwrap();
        while r.advance().unwrap() {}
        assert_eq!(r.records(), 2);
        assert_eq!(r.skipped().len(), 1);
        assert_eq!(r.skipped()[0].kind, FaultKind::Corrupt);
        let third = (second + recs[1].len()) as u64;
        assert_eq!(r.corrupt_ranges(), [(second as u64, third)]);
        assert_eq!(r.tail().unwrap().offset, clean_len);
    }

    #[test]
    fn bad_header_is_a_fault_not_an_error() {
        let d = tempfile::tempdir().unwrap();
        let sdir = d.path().join("s");
        std::fs::create_dir(&sdir).unwrap();
        std::fs::write(sdir.join("00000000.p5seg"), b"short").unwrap();
        segment(&sdir, &[]);
        std::fs::rename(sdir.join("00000000.p5seg"), sdir.join("00000001.p5seg")).unwrap();
        std::fs::write(sdir.join("00000000.p5seg"), b"short").unwrap();
        let store = StoreDir::open(d.path()).unwrap();
        let sessions = store.sessions().unwrap();
        assert_eq!(sessions.len(), 1);
        let mut recs = sessions[0].records().unwrap();
        while recs.advance().unwrap() {}
        assert_eq!(recs.faults().len(), 1);
        assert_eq!(recs.faults()[0].kind, FaultKind::BadHeader);
    }
}
