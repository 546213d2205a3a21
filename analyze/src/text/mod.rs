//! The Project 5 text trace format (\[P5\] §6.5; analysis.md §4(d)).
//!
//! One event per line, five tab-separated fields:
//!
//! ```text
//! timestamp           operation  sender  rcvr   ID
//! 1047680084.482205   CALL_SENT  nodeA   nodeB  id37
//! 1047680084.483575   RET_SENT   nodeB   nodeA  id37
//! ```
//!
//! * `timestamp` is decimal seconds with 0–9 fraction digits (an optional `-`); it is parsed
//!   as integers straight to nanoseconds, never through a float, so every time is exact.
//! * `operation` is `CALL_SENT`, `RET_SENT`, `MSG_SENT` or `CALL_RCVD`, `RET_RCVD`, `MSG_RCVD`.
//! * `ID` is optional (a four-field line has no call id). When every id of a file is a
//!   canonical decimal number, the numbers are the call ids and no names are kept; else
//!   ids are names, kept in [`Trace::call_id_names`].
//! * Lines are in non-decreasing time order. A first line whose first field is `timestamp`
//!   is a header and is kept.
//!
//! **Pairing rule (ours).** A `*_SENT` line and a `*_RCVD` line with the same kind, sender,
//! receiver and id are one [`Message`] with both times. Pairing is first-in-first-out per
//! (kind, sender, receiver, id): a `*_RCVD` line pairs with the oldest unpaired `*_SENT` line
//! of its key that came before it. When the line has an id, a `*_SENT` line also pairs with
//! the oldest earlier unpaired `*_RCVD` line of its key (a receiver whose clock runs behind
//! the sender's); without an id that backwards pairing is not done, because a receive whose
//! send happened before the trace began would then pair every later message wrongly. A line
//! that never pairs is a half message (the other time is [`crate::trace::NO_TIME`]).
//! A message's `msg_ref` is the line number (1-based) of its first line.
//!
//! **Bad input.** A line that does not parse, or whose time is earlier than the previous
//! accepted line's, is skipped and counted in the [`ReadReport`] with its line number.
//!
//! **Round trip.** [`read`] returns a [`Layout`] — header, per-file fraction digits, line
//! endings and (optionally) the original order of the lines — with which [`write()`]
//! reproduces any valid file byte for byte. A *valid* file here is one that [`read`] reports
//! no problem for, with canonical timestamps (no leading zeros or `+`, no `-0`) and the same
//! number of fraction digits on every line (else the most digits seen are written everywhere).
//!
//! **Reading.** A file is read in 1 MiB pieces (a line may span pieces; one over 64 KiB is
//! reported as too long, not kept), twice: a first pass (`Scan`) counts the lines and notes
//! whether the file has `_SENT` and `_RCVD` words at all, and a line waits for its other half
//! only when that side is in the file — with one time per message, every line would otherwise
//! wait in a map for an answer that cannot come. A pipe is read whole.

mod write;

pub use write::{format_time, write, write_file};

use crate::hash::{FxHashMap, FxHasher};
use crate::report::ReadReport;
use crate::trace::{CallId, Kind, Message, NO_CALL_ID, NodeId, Time, Trace};
use crate::{Error, Result};
use std::hash::Hasher;
use std::path::Path;

/// How a text file was laid out, so that [`write()`] can reproduce it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    /// The header line (without its line ending), if the file had one.
    pub header: Option<String>,
    /// Fraction digits of the timestamps (the most seen, 0–9).
    pub precision: u8,
    /// True when lines had different numbers of fraction digits (the file will not round-trip).
    pub mixed_precision: bool,
    /// Lines end with `\r\n`.
    pub crlf: bool,
    /// The last line ends with a line ending.
    pub final_newline: bool,
    /// The lines in file order: `message index << 1 | is_receive`. Empty unless asked for
    /// with [`ReadOptions::keep_order`]; [`write()`] uses it only when it fits the trace.
    pub order: Vec<u64>,
}

impl Layout {
    /// The layout of a new file: no header, `\n` after every line, at least `precision`
    /// fraction digits (more where a time needs them).
    pub fn fresh(precision: u8) -> Self {
        Layout {
            precision: precision.min(9),
            final_newline: true,
            ..Layout::default()
        }
    }
}

/// Options of [`read`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadOptions {
    /// Keep the order of the lines in [`Layout::order`] (8 bytes per line) so that lines with
    /// equal timestamps are written back in their original order.
    pub keep_order: bool,
}

/// A text trace read into memory.
#[derive(Debug, Clone, Default)]
pub struct TextTrace {
    /// The messages.
    pub trace: Trace,
    /// How the file was laid out.
    pub layout: Layout,
    /// What was skipped.
    pub report: ReadReport,
}

/// The operation field of a line.
pub(crate) fn op_name(kind: Kind, recv: bool) -> &'static str {
    match (kind, recv) {
        (Kind::Call, false) => "CALL_SENT",
        (Kind::Ret, false) => "RET_SENT",
        (Kind::Msg, false) => "MSG_SENT",
        (Kind::Call, true) => "CALL_RCVD",
        (Kind::Ret, true) => "RET_RCVD",
        (Kind::Msg, true) => "MSG_RCVD",
    }
}

fn parse_op(f: &[u8]) -> Option<(Kind, bool)> {
    Some(match f {
        b"CALL_SENT" => (Kind::Call, false),
        b"RET_SENT" => (Kind::Ret, false),
        b"MSG_SENT" => (Kind::Msg, false),
        b"CALL_RCVD" => (Kind::Call, true),
        b"RET_RCVD" => (Kind::Ret, true),
        b"MSG_RCVD" => (Kind::Msg, true),
        _ => return None,
    })
}

/// Parses decimal seconds exactly into nanoseconds; returns the time and its fraction digits.
pub fn parse_time(f: &[u8]) -> Result<(Time, u8), &'static str> {
    let (neg, body) = match f.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, f),
    };
    let (int, frac) = match body.iter().position(|&b| b == b'.') {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    if int.is_empty() {
        return Err("bad timestamp");
    }
    let mut secs: i64 = 0;
    for &b in int {
        if !b.is_ascii_digit() {
            return Err("bad timestamp");
        }
        secs = secs
            .checked_mul(10)
            .and_then(|s| s.checked_add(i64::from(b - b'0')))
            .ok_or("timestamp out of range")?;
    }
    let mut nanos: i64 = 0;
    let mut digits = 0u8;
    if let Some(frac) = frac {
        if frac.is_empty() || frac.len() > 9 {
            return Err("bad timestamp fraction");
        }
        for &b in frac {
            if !b.is_ascii_digit() {
                return Err("bad timestamp");
            }
            nanos = nanos * 10 + i64::from(b - b'0');
        }
        digits = frac.len() as u8;
        nanos *= 10i64.pow(9 - u32::from(digits));
    }
    let t = secs
        .checked_mul(1_000_000_000)
        .and_then(|s| s.checked_add(nanos))
        .ok_or("timestamp out of range")?;
    if neg {
        if t == 0 {
            return Err("negative zero timestamp");
        }
        Ok((-t, digits))
    } else {
        Ok((t, digits))
    }
}

/// Reads a text trace file (see [`read`]); `file` in problems is the path as given. A
/// regular file is read twice in pieces (first for what `Reader::new` needs to know of
/// the whole), so that it is never in memory whole; anything else (a pipe) is read whole.
pub fn read_file(path: &Path, opts: ReadOptions) -> Result<TextTrace> {
    let file = path.display().to_string();
    let regular = std::fs::metadata(path)
        .map_err(|e| Error::io(path, e))?
        .is_file();
    if !regular {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        return Ok(read(&bytes, &file, opts));
    }
    let mut scan = Scan::default();
    each_piece(path, |p| scan.piece(p))?;
    let mut r = Reader::new(&scan, &file, opts);
    let mut lines = Lines::default();
    each_piece(path, |p| lines.piece(p, &mut r))?;
    lines.end(&mut r);
    Ok(r.finish())
}

/// Calls `f` with each piece of the file at `path`, in order.
fn each_piece(path: &Path, mut f: impl FnMut(&[u8])) -> Result<()> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => f(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(path, e)),
        }
    }
}

/// The longest line read (longer ones are reported, not parsed: memory stays bounded
/// whatever a file holds).
const MAX_LINE: usize = 1 << 16;

/// What [`Reader::new`] needs to know of the whole trace: whether it has `_SENT` and
/// `_RCVD` words at all, and its line count.
#[derive(Debug, Default)]
struct Scan {
    sent: bool,
    rcvd: bool,
    lines: usize,
    /// The last bytes seen (a word may span two pieces).
    tail: Vec<u8>,
}

impl Scan {
    /// The scan of a trace in memory.
    fn of(bytes: &[u8]) -> Scan {
        let mut s = Scan::default();
        s.piece(bytes);
        s
    }

    /// Takes in the next piece of the trace.
    fn piece(&mut self, piece: &[u8]) {
        self.lines += memchr::memchr_iter(b'\n', piece).count();
        let mut edge = std::mem::take(&mut self.tail);
        edge.extend_from_slice(&piece[..piece.len().min(4)]);
        for hay in [&edge[..], piece] {
            self.sent |= memchr::memmem::find(hay, b"_SENT").is_some();
            self.rcvd |= memchr::memmem::find(hay, b"_RCVD").is_some();
        }
        self.tail = if piece.len() >= 4 {
            piece[piece.len() - 4..].to_vec()
        } else {
            edge.extend_from_slice(&piece[piece.len().min(4)..]);
            edge[edge.len().saturating_sub(4)..].to_vec()
        };
    }
}

/// Splits the pieces of a trace into numbered lines (a line may span pieces) for a
/// [`Reader`]: every line that ends with `\n`, and at the end what follows the last one.
#[derive(Debug, Default)]
struct Lines {
    /// The start of a line whose end is in a later piece (at most [`MAX_LINE`] + 1 bytes).
    carry: Vec<u8>,
    /// Lines so far.
    line_no: u64,
    /// The last byte of the trace so far.
    last: Option<u8>,
}

impl Lines {
    /// Reads the lines `piece` ends.
    fn piece(&mut self, piece: &[u8], r: &mut Reader<'_>) {
        if let Some(&b) = piece.last() {
            self.last = Some(b);
        }
        let mut start = 0;
        for nl in memchr::memchr_iter(b'\n', piece) {
            if self.carry.is_empty() {
                Self::line(&mut self.line_no, &piece[start..nl], r);
            } else {
                self.keep(&piece[start..nl]);
                Self::line(&mut self.line_no, &self.carry, r);
                self.carry.clear();
            }
            start = nl + 1;
        }
        self.keep(&piece[start..]);
    }

    /// Keeps the start of a line (up to one byte more than [`MAX_LINE`]).
    fn keep(&mut self, bytes: &[u8]) {
        let room = (MAX_LINE + 1).saturating_sub(self.carry.len());
        self.carry
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// Reads what follows the last line ending, if anything; notes the final newline.
    fn end(self, r: &mut Reader<'_>) {
        let mut line_no = self.line_no;
        if !self.carry.is_empty() {
            Self::line(&mut line_no, &self.carry, r);
        }
        r.out.layout.final_newline = self.last == Some(b'\n');
    }

    /// Line `line_no + 1`, without its `\r` (the first line's says the file's endings).
    fn line(line_no: &mut u64, line: &[u8], r: &mut Reader<'_>) {
        *line_no += 1;
        let line = match line.split_last() {
            Some((b'\r', rest)) => {
                if *line_no == 1 {
                    r.out.layout.crlf = true;
                }
                rest
            }
            _ => line,
        };
        if line.len() > MAX_LINE {
            r.out.report.records += 1;
            let detail = String::from_utf8_lossy(&line[..80]).into_owned();
            r.out
                .report
                .problem(r.file, *line_no, "line too long", detail);
            return;
        }
        r.line(*line_no, line);
    }
}

/// Open lines waiting for their other half: the first and last message index of a FIFO
/// chained through `Reader::next`.
#[derive(Clone, Copy)]
struct Queue {
    head: u32,
    tail: u32,
}

type PendingKey = (u8, NodeId, NodeId, CallId);

/// The reader's state while it walks the lines.
struct Reader<'a> {
    file: &'a str,
    out: TextTrace,
    names: FxHashMap<Box<[u8]>, NodeId>,
    /// Call ids by the hash of their name (checked against the name: no allocation per id).
    ids: FxHashMap<u64, CallId>,
    /// Call ids whose name's hash was taken by another name.
    ids_collided: FxHashMap<Box<[u8]>, CallId>,
    /// True while every id has been a canonical number: ids are then the numbers themselves
    /// and no names are kept (no memory per id).
    numeric_ids: bool,
    pending: FxHashMap<PendingKey, Queue>,
    next: Vec<u32>,
    last_time: Option<Time>,
    keep_order: bool,
    precision: Option<u8>,
    /// Whether the trace has `_SENT` lines and `_RCVD` lines at all: a line waits for its
    /// other half only if lines of that side exist (else a trace with one time per message
    /// would keep every message waiting: 140 MB for the 2 M-message multi-tier trace).
    sides: (bool, bool),
}

const NONE: u32 = u32::MAX;

fn hash_bytes(b: &[u8]) -> u64 {
    let mut h = FxHasher::default();
    h.write(b);
    h.finish()
}

/// The value of a call id written as a canonical decimal number (no sign, no leading zero),
/// other than [`NO_CALL_ID`].
fn canonical_number(b: &[u8]) -> Option<CallId> {
    if b.is_empty() || b.len() > 20 || (b[0] == b'0' && b.len() > 1) {
        return None;
    }
    let mut n: u64 = 0;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    (n != NO_CALL_ID).then_some(n)
}

/// Reads a text trace from memory. Never fails: bad lines are skipped and counted in the
/// returned report under `file`.
pub fn read(bytes: &[u8], file: &str, opts: ReadOptions) -> TextTrace {
    let mut r = Reader::new(&Scan::of(bytes), file, opts);
    let mut lines = Lines::default();
    lines.piece(bytes, &mut r);
    lines.end(&mut r);
    r.finish()
}

impl<'a> Reader<'a> {
    /// A reader for the trace `scan` describes, its messages reserved.
    fn new(scan: &Scan, file: &'a str, opts: ReadOptions) -> Self {
        let mut r = Reader {
            file,
            out: TextTrace::default(),
            names: FxHashMap::default(),
            ids: FxHashMap::default(),
            ids_collided: FxHashMap::default(),
            numeric_ids: true,
            pending: FxHashMap::default(),
            next: Vec::new(),
            last_time: None,
            keep_order: opts.keep_order,
            precision: None,
            sides: (scan.sent, scan.rcvd),
        };
        // A trace with both sides pairs about half its lines, one with one side none:
        // reserve for that, and grow if not.
        let messages = if scan.sent && scan.rcvd {
            scan.lines / 2 + 1
        } else {
            scan.lines + 1
        };
        r.out.trace.messages.reserve(messages);
        r.next.reserve(messages);
        r
    }
}

impl Reader<'_> {
    fn line(&mut self, line_no: u64, line: &[u8]) {
        self.out.report.records += 1;
        let mut fields = [&[][..]; 5];
        let mut n = 0;
        for f in line.split(|&b| b == b'\t') {
            if n == 5 {
                n = 6;
                break;
            }
            fields[n] = f;
            n += 1;
        }
        if line_no == 1 && fields[0].eq_ignore_ascii_case(b"timestamp") {
            self.out.layout.header = Some(String::from_utf8_lossy(line).into_owned());
            self.out.report.records -= 1;
            return;
        }
        if let Err(kind) = self.event(line_no, &fields, n) {
            let detail = String::from_utf8_lossy(&line[..line.len().min(80)]).into_owned();
            self.out.report.problem(self.file, line_no, kind, detail);
        }
    }

    fn event(&mut self, line_no: u64, f: &[&[u8]; 5], n: usize) -> Result<(), &'static str> {
        if n == 1 && f[0].is_empty() {
            return Err("empty line");
        }
        if !(4..=5).contains(&n) {
            return Err("wrong number of fields");
        }
        let (t, digits) = parse_time(f[0])?;
        let (kind, recv) = parse_op(f[1]).ok_or("unknown operation")?;
        if f[2].is_empty() || f[3].is_empty() || (n == 5 && f[4].is_empty()) {
            return Err("empty field");
        }
        if self.last_time.is_some_and(|last| t < last) {
            return Err("timestamp out of order");
        }
        let src = self.node(f[2])?;
        let dst = self.node(f[3])?;
        let id = if n == 5 {
            self.call_id(f[4])?
        } else {
            NO_CALL_ID
        };
        self.last_time = Some(t);
        match self.precision {
            None => self.precision = Some(digits),
            Some(p) if p != digits => {
                self.out.layout.mixed_precision = true;
                self.precision = Some(p.max(digits));
            }
            Some(_) => {}
        }
        let side = (kind as u8) << 1;
        // Pair with the other half if it is waiting.
        let other = (side | u8::from(!recv), src, dst, id);
        let may_pair = recv || id != NO_CALL_ID;
        let idx = match may_pair.then(|| self.pop(other)).flatten() {
            Some(idx) => {
                let m = &mut self.out.trace.messages[idx as usize];
                if recv {
                    m.t_recv = t;
                } else {
                    m.t_send = t;
                }
                idx
            }
            None => {
                let idx = u32::try_from(self.out.trace.messages.len())
                    .map_err(|_| "too many messages")?;
                let mut m = Message::new(src, dst);
                m.kind = kind;
                m.call_id = id;
                m.msg_ref = line_no;
                if recv {
                    m.t_recv = t;
                } else {
                    m.t_send = t;
                }
                self.out.trace.messages.push(m);
                self.next.push(NONE);
                if (recv && self.sides.0) || (!recv && self.sides.1) {
                    self.push((side | u8::from(recv), src, dst, id), idx);
                }
                idx
            }
        };
        if self.keep_order {
            self.out
                .layout
                .order
                .push(u64::from(idx) << 1 | u64::from(recv));
        }
        Ok(())
    }

    fn node(&mut self, name: &[u8]) -> Result<NodeId, &'static str> {
        if let Some(&id) = self.names.get(name) {
            return Ok(id);
        }
        let s = std::str::from_utf8(name).map_err(|_| "node name is not utf-8")?;
        let id = self.out.trace.nodes.intern(s);
        self.names.insert(name.into(), id);
        Ok(id)
    }

    fn call_id(&mut self, name: &[u8]) -> Result<CallId, &'static str> {
        if self.numeric_ids {
            if let Some(n) = canonical_number(name) {
                return Ok(n);
            }
            self.name_the_ids();
        }
        let key = hash_bytes(name);
        let names = &self.out.trace.call_id_names;
        match self.ids.get(&key) {
            Some(&id) if names[id as usize].as_bytes() == name => return Ok(id),
            Some(_) => {
                if let Some(&id) = self.ids_collided.get(name) {
                    return Ok(id);
                }
            }
            None => {}
        }
        let s = std::str::from_utf8(name).map_err(|_| "id is not utf-8")?;
        Ok(self.new_id_name(s.to_owned(), key))
    }

    /// Adds a call id name whose hash is `key`.
    fn new_id_name(&mut self, name: String, key: u64) -> CallId {
        let id = self.out.trace.call_id_names.len() as CallId;
        match self.ids.entry(key) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(id);
            }
            std::collections::hash_map::Entry::Occupied(_) => {
                self.ids_collided.insert(name.as_bytes().into(), id);
            }
        }
        self.out.trace.call_id_names.push(name);
        id
    }

    /// The first id that is not a canonical number: the numbers used so far become names.
    fn name_the_ids(&mut self) {
        self.numeric_ids = false;
        let mut map: FxHashMap<CallId, CallId> = FxHashMap::default();
        for i in 0..self.out.trace.messages.len() {
            let n = self.out.trace.messages[i].call_id;
            if n == NO_CALL_ID {
                continue;
            }
            let id = match map.get(&n) {
                Some(&id) => id,
                None => {
                    let name = n.to_string();
                    let id = self.new_id_name(name.clone(), hash_bytes(name.as_bytes()));
                    map.insert(n, id);
                    id
                }
            };
            self.out.trace.messages[i].call_id = id;
        }
        self.pending = std::mem::take(&mut self.pending)
            .into_iter()
            .map(|((side, s, d, n), q)| ((side, s, d, map.get(&n).copied().unwrap_or(n)), q))
            .collect();
    }

    fn push(&mut self, key: PendingKey, idx: u32) {
        match self.pending.get_mut(&key) {
            Some(q) => {
                self.next[q.tail as usize] = idx;
                q.tail = idx;
            }
            None => {
                self.pending.insert(
                    key,
                    Queue {
                        head: idx,
                        tail: idx,
                    },
                );
            }
        }
    }

    fn pop(&mut self, key: PendingKey) -> Option<u32> {
        let q = self.pending.get_mut(&key)?;
        let idx = q.head;
        if idx == q.tail {
            self.pending.remove(&key);
        } else {
            q.head = self.next[idx as usize];
        }
        Some(idx)
    }

    fn finish(mut self) -> TextTrace {
        self.out.layout.precision = self.precision.unwrap_or(0);
        let msgs = &self.out.trace.messages;
        // Messages are in order of their first line; one whose receive came first is ordered
        // by its (later) send time, so sort, and renumber the kept line order.
        if msgs.windows(2).any(|w| w[1].time() < w[0].time()) {
            let mut perm: Vec<u32> = (0..msgs.len() as u32).collect();
            perm.sort_by_key(|&i| msgs[i as usize].time());
            let mut new_index = vec![0u32; perm.len()];
            for (new, &old) in perm.iter().enumerate() {
                new_index[old as usize] = new as u32;
            }
            self.out.trace.messages = perm.iter().map(|&i| msgs[i as usize]).collect();
            for o in &mut self.out.layout.order {
                *o = u64::from(new_index[(*o >> 1) as usize]) << 1 | (*o & 1);
            }
        }
        self.out
    }
}

#[cfg(test)]
mod tests;
