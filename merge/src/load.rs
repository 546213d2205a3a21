//! Reading a session from the store, streaming (one record in memory at a time).
//!
//! The merge reads a session twice. The first pass ([`scan`]) keeps what is small and needed
//! before any row can be written: the processes and streams, every clock sample, the
//! communication calls and socket descriptions (for matching), metric names, the sensors and
//! counters seen. The second pass ([`Replay`]) walks the events again and hands them, one
//! frame at a time, to the row builder. Memory is bounded by processes, streams, samples and
//! communication calls, never by the number of events.
//!
//! Time base: a record's `t_s` counts from the start of the server run that wrote its segment;
//! `server_start_mono_ns + t_s − base_mono` puts every run on the first run's clock (the
//! session's time base). Records with `t_s = 0` (imported spool files) give no samples.
//!
//! Both passes skip a data frame stored twice (a copied segment) by the log server's own
//! (process, stream, sequence) rule, and count it (`duplicate-frame` diagnostic). Each batch
//! that reports new losses to a full ring gives a drop range, from the last event shipped
//! before it to the batch's last event: the viewer bands those stretches, the summary warns.

use crate::error::Error;
use crate::matching::{Call, Role, SocketDesc};
use p5_logserver::dedup::Dedup;
use p5_logserver::reader::{Fault, SessionDir, SessionRecords};
use p5_wire::data::{ClockSamples, EventsFrame, Name, Names, Sensors, StreamClose, StreamOpen};
use p5_wire::frame::FrameType;
use p5_wire::hello::Identity;
use p5_wire::store::{SampleSource, SegmentHeader, StoreRecord};
use p5_wire::{CommOp, Event, StreamKind};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A process (one `Hello`), or a placeholder for data whose handshake was lost.
#[derive(Debug, Clone, Default)]
pub struct ProcessInfo {
    /// Its identity (default for a placeholder).
    pub identity: Identity,
    /// True if its `StoreProcess` record was read.
    pub hello_seen: bool,
    /// Forward samples `(t_p, t_s − t_p)` on the session base.
    pub forward: Vec<(i64, i64)>,
    /// Backward samples `(echo_t_p, echo_t_s − echo_t_p)`.
    pub backward: Vec<(i64, i64)>,
    /// Data frames received without a receipt time (imported).
    pub untimed_frames: u64,
}

/// A stream (thread, metric source or OS monitor) of a process.
#[derive(Debug, Clone, Default)]
pub struct StreamInfo {
    /// Index into [`Scan::processes`].
    pub process: usize,
    /// Stream id within the process.
    pub stream: u32,
    /// `StreamKind` byte, 0 if its `StreamOpen` was not seen.
    pub kind: u8,
    /// OS thread id.
    pub tid: u64,
    /// Name.
    pub name: String,
    /// Events decoded.
    pub events: u64,
    /// Events lost to full buffers (cumulative, last seen).
    pub dropped: u64,
    /// Where they were lost: `(from, to, events)` on the process clock, one per batch that
    /// reported new losses (at most [`MAX_DROP_RANGES`]; beyond, the last range grows).
    pub drops: Vec<(i64, i64, u64)>,
    /// First and last event time, process clock.
    pub t_first: Option<i64>,
    /// Last event time.
    pub t_last: Option<i64>,
    /// End time from `StreamClose`.
    pub t_end: Option<i64>,
}

/// Drop ranges kept per stream: a pathological run reports losses in every batch, and one
/// range per batch would then grow with the events.
pub const MAX_DROP_RANGES: usize = 4096;

impl StreamInfo {
    /// Notes the cumulative loss count `dropped` reported by a batch whose events end at
    /// `to` (or, for an empty batch or a stream close, at the stream's last event).
    fn note_dropped(&mut self, dropped: u64, to: Option<i64>) {
        if dropped <= self.dropped {
            return;
        }
        let lost = dropped - self.dropped;
        self.dropped = dropped;
        let from = self.t_last.or(to).unwrap_or(0);
        let to = to.unwrap_or(from).max(from);
        let full = self.drops.len() >= MAX_DROP_RANGES;
        match self.drops.last_mut() {
            Some(last) if full => {
                last.1 = last.1.max(to);
                last.2 += lost;
            }
            _ => self.drops.push((from, to, lost)),
        }
    }

    /// Where the stream's life ends on its process clock.
    pub fn end(&self) -> Option<i64> {
        match (self.t_end, self.t_last) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// The kind's name.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            k if k == StreamKind::Thread as u8 => "thread",
            k if k == StreamKind::HostMetrics as u8 => "host-metrics",
            k if k == StreamKind::OsMonitor as u8 => "os-monitor",
            0 => "unknown",
            _ => "other",
        }
    }
}

/// A thread an OS monitor followed (`Task` events).
#[derive(Debug, Clone)]
pub struct TaskInfo {
    /// Its process.
    pub pid: u32,
    /// Its latest name (after `exec`, a rename).
    pub comm: String,
    /// When the monitor first saw it (the monitor's relative time).
    pub t_first: u64,
}

/// `ClockSamples` from an agent about a peer.
#[derive(Debug, Clone)]
pub struct TreeSamples {
    /// The agent (index into processes).
    pub agent: usize,
    /// The peer's uid.
    pub peer_uid: u64,
    /// `(t_recv on agent, t_send on peer)`.
    pub samples: Vec<(u64, u64)>,
}

/// Everything the first pass keeps.
#[derive(Debug, Default)]
pub struct Scan {
    /// Header of the first segment: the session's time base.
    pub base: Option<SegmentHeader>,
    /// Processes in order of appearance.
    pub processes: Vec<ProcessInfo>,
    /// uid → index.
    pub process_index: HashMap<u64, usize>,
    /// Streams in order of appearance.
    pub streams: Vec<StreamInfo>,
    /// (process, stream id) → index.
    pub stream_index: HashMap<(usize, u32), usize>,
    /// Socket descriptions.
    pub sockets: Vec<SocketDesc>,
    /// Data-moving calls (matching input); `thread` is a stream index.
    pub calls: Vec<Call>,
    /// Metric names per process.
    pub names: Vec<(usize, Name)>,
    /// The sensor tables the processes sent (`Sensors` frames), each distinct text once.
    pub tables: Vec<p5_wire::sensors::Table>,
    /// Hashes of the table texts kept in `tables`.
    pub table_texts: std::collections::HashSet<u64>,
    /// Agent-tree samples.
    pub tree: Vec<TreeSamples>,
    /// Sensor ids seen in events.
    pub sensors: BTreeSet<u64>,
    /// (process, key, host metric?) of counter events.
    pub counters: BTreeSet<(usize, u64, bool)>,
    /// Threads an OS monitor followed: (monitoring process, tid) → what it said of them.
    pub tasks: BTreeMap<(usize, u32), TaskInfo>,
    /// (process, sensor) → the latest `Calls` report of a throttled or count-only sensor.
    pub throttled: BTreeMap<(usize, u64), CallsInfo>,
    /// Events decoded.
    pub events: u64,
    /// Event batches that failed to decode part-way (events before the error are kept).
    pub bad_batches: u64,
    /// Data frames whose body did not decode.
    pub bad_frames: u64,
    /// Data frames of types this version does not handle.
    pub unknown_frames: u64,
    /// Data frames stored twice (a copied segment, a resend the server did not catch),
    /// skipped as the log server skips them: by (process, stream, sequence).
    pub duplicate_frames: u64,
    /// Store damage.
    pub faults: Vec<Fault>,
    /// Bytes of all segments (for progress).
    pub bytes: u64,
    /// (process, fd) → the last description of that descriptor (index into `sockets`).
    last_desc: HashMap<(usize, i64), usize>,
    /// (process, fd) → a `connect`/`accept` whose description has not come yet.
    pending_role: HashMap<(usize, i64), Role>,
    /// Highest data-frame sequence seen per (process, stream).
    dedup: Dedup,
}

/// A throttled (or count-only) sensor's call counts, as its runtime last reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallsInfo {
    /// When it was throttled, process clock.
    pub t: i64,
    /// Calls begun (cumulative).
    pub calls: u64,
    /// Calls timed.
    pub timed: u64,
    /// Their summed duration, ns.
    pub timed_ns: u64,
    /// Long calls recorded while throttled.
    pub recorded: u64,
    /// Pinned count-only by the selection file.
    pub pinned: bool,
}

/// Whether a stored data frame repeats one already read: its sequence number is not above
/// the highest seen for its (process, stream), the log server's own rule
/// (`p5_logserver::dedup`). Both passes apply it to the same records in the same order, so
/// they skip the same frames. Frames without a readable data header are left to the decoder.
fn is_duplicate(dedup: &mut Dedup, process_uid: u64, body: &[u8]) -> bool {
    match p5_wire::data::DataHeader::peek(body) {
        Ok(h) => !dedup.admit(process_uid, h.stream, h.seq),
        Err(_) => false,
    }
}

/// Converts a record's `t_s` to the session base.
pub fn base_time(base: &SegmentHeader, seg: &SegmentHeader, t_s: u64) -> i64 {
    (seg.server_start_mono_ns as i64)
        .wrapping_sub(base.server_start_mono_ns as i64)
        .wrapping_add(t_s as i64)
}

impl Scan {
    /// Index of the process with `uid`, creating a placeholder.
    pub fn process(&mut self, uid: u64) -> usize {
        if let Some(&i) = self.process_index.get(&uid) {
            return i;
        }
        let i = self.processes.len();
        self.processes.push(ProcessInfo {
            identity: Identity {
                process_uid: uid,
                ..Identity::default()
            },
            ..ProcessInfo::default()
        });
        self.process_index.insert(uid, i);
        i
    }

    /// Index of a stream, creating it.
    pub fn stream(&mut self, process: usize, stream: u32) -> usize {
        if let Some(&i) = self.stream_index.get(&(process, stream)) {
            return i;
        }
        let i = self.streams.len();
        self.streams.push(StreamInfo {
            process,
            stream,
            ..StreamInfo::default()
        });
        self.stream_index.insert((process, stream), i);
        i
    }

    fn record(&mut self, seg: &SegmentHeader, rec: StoreRecord<'_>) {
        let base = *self.base.get_or_insert(*seg);
        match rec {
            StoreRecord::Process { hello, .. } => {
                let p = self.process(hello.identity.process_uid);
                let info = &mut self.processes[p];
                info.identity = hello.identity;
                info.hello_seen = true;
            }
            StoreRecord::Sample {
                t_s,
                process_uid,
                t_p,
                echo_t_s,
                echo_t_p,
                source,
            } => {
                let p = self.process(process_uid);
                if t_s == 0 {
                    return;
                }
                let tb = base_time(&base, seg, t_s);
                let info = &mut self.processes[p];
                info.forward.push((t_p as i64, tb.wrapping_sub(t_p as i64)));
                if source == SampleSource::Ping as u8
                    && echo_t_s != 0
                    && echo_t_s <= t_s
                    && echo_t_p <= t_p
                {
                    let eb = base_time(&base, seg, echo_t_s);
                    info.backward
                        .push((echo_t_p as i64, eb.wrapping_sub(echo_t_p as i64)));
                }
            }
            StoreRecord::Data {
                t_s,
                process_uid,
                ty,
                body,
            } => {
                let p = self.process(process_uid);
                if FrameType::from_u8(ty).is_some_and(FrameType::is_data)
                    && is_duplicate(&mut self.dedup, process_uid, body)
                {
                    self.duplicate_frames += 1;
                    return;
                }
                self.data(&base, seg, p, t_s, ty, body);
            }
            StoreRecord::Disconnect { process_uid, .. } => {
                self.process(process_uid);
            }
            StoreRecord::Unknown { .. } => {}
        }
    }

    fn data(
        &mut self,
        base: &SegmentHeader,
        seg: &SegmentHeader,
        p: usize,
        t_s: u64,
        ty: u8,
        body: &[u8],
    ) {
        if let Ok(h) = p5_wire::data::DataHeader::peek(body) {
            if t_s != 0 {
                let tb = base_time(base, seg, t_s);
                self.processes[p]
                    .forward
                    .push((h.t_p as i64, tb.wrapping_sub(h.t_p as i64)));
            } else {
                self.processes[p].untimed_frames += 1;
            }
        }
        match FrameType::from_u8(ty) {
            Some(FrameType::StreamOpen) => match StreamOpen::decode_body(body) {
                Ok(o) => {
                    let s = self.stream(p, o.header.stream);
                    let st = &mut self.streams[s];
                    st.kind = o.kind_raw;
                    st.tid = o.tid;
                    st.name = o.name;
                }
                Err(_) => self.bad_frames += 1,
            },
            Some(FrameType::StreamClose) => match StreamClose::decode_body(body) {
                Ok(c) => {
                    let s = self.stream(p, c.header.stream);
                    let st = &mut self.streams[s];
                    st.t_end = Some(c.t_end as i64);
                    st.note_dropped(c.dropped, Some(c.t_end as i64));
                }
                Err(_) => self.bad_frames += 1,
            },
            Some(FrameType::Names) => match Names::decode_body(body) {
                Ok(n) => self.names.extend(n.names.into_iter().map(|n| (p, n))),
                Err(_) => self.bad_frames += 1,
            },
            Some(FrameType::Sensors) => self.sensor_table(body),
            Some(FrameType::ClockSamples) => match ClockSamples::decode_body(body) {
                Ok(c) => self.tree.push(TreeSamples {
                    agent: p,
                    peer_uid: c.peer_process_uid,
                    samples: c.samples,
                }),
                Err(_) => self.bad_frames += 1,
            },
            Some(FrameType::Events) => self.events(p, body),
            _ => self.unknown_frames += 1,
        }
    }

    /// A `Sensors` frame: its table, unless the same text came before (every process of a
    /// program sends the same tables).
    fn sensor_table(&mut self, body: &[u8]) {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let h = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
            .hash_one(
                body.get(p5_wire::data::DATA_HEADER_LEN..)
                    .unwrap_or_default(),
            );
        if self.table_texts.contains(&h) {
            return;
        }
        match Sensors::parse(body) {
            Ok((_, t)) => {
                self.table_texts.insert(h);
                self.tables.push(t);
            }
            Err(_) => self.bad_frames += 1,
        }
    }

    /// A socket description; it takes the role of a `connect`/`accept` recorded before it.
    fn describe(&mut self, mut d: SocketDesc) {
        d.role = self.pending_role.remove(&(d.process, d.fd));
        self.last_desc.insert((d.process, d.fd), self.sockets.len());
        self.sockets.push(d);
    }

    /// A `connect` (on `fd`) or `accept` (whose result is the new descriptor) started at `t`:
    /// the role of that descriptor's description. Runtimes describe the socket just before
    /// (C ABI `connect`) or just after (`accept`, the Rust wrappers) recording the call, in
    /// the same stream: the role goes to a description made since the call started, else
    /// to the next one.
    fn role(&mut self, p: usize, op: CommOp, fd: i64, t: i64, result: i64) {
        const EINPROGRESS: i64 = 115;
        let (role, fd) = match op {
            CommOp::Connect if result == 0 || result == -EINPROGRESS => (Role::Connect, fd),
            CommOp::Accept if result >= 0 => (Role::Accept, result),
            _ => return,
        };
        if let Some(&d) = self.last_desc.get(&(p, fd))
            && self.sockets[d].t >= t
            && self.sockets[d].role.is_none()
        {
            self.sockets[d].role = Some(role);
            return;
        }
        self.pending_role.insert((p, fd), role);
    }

    fn events(&mut self, p: usize, body: &[u8]) {
        let Ok(frame) = EventsFrame::parse(body) else {
            self.bad_frames += 1;
            return;
        };
        let s = self.stream(p, frame.header.stream);
        let host = self.streams[s].kind == StreamKind::HostMetrics as u8;
        let Ok(decoder) = frame.events() else {
            self.streams[s].note_dropped(frame.dropped, None);
            self.bad_batches += 1;
            return;
        };
        let (mut first, mut last, mut n) = (None, None, 0u64);
        for e in decoder {
            let Ok(e) = e else {
                self.bad_batches += 1;
                break;
            };
            if let Event::Calls {
                t,
                sensor,
                calls,
                timed,
                timed_ns,
                recorded,
                pinned,
            } = e
            {
                // Not an event of the thread's timeline: a report; the latest one counts.
                self.sensors.insert(sensor);
                let c = self.throttled.entry((p, sensor)).or_default();
                if calls >= c.calls {
                    *c = CallsInfo {
                        t: t as i64,
                        calls,
                        timed,
                        timed_ns,
                        recorded,
                        pinned: pinned != 0,
                    };
                }
                continue;
            }
            n += 1;
            let t = e.time() as i64;
            first.get_or_insert(t);
            last = Some(t);
            match e {
                Event::Enter { sensor, .. }
                | Event::Exit { sensor, .. }
                | Event::Mark { sensor, .. } => {
                    self.sensors.insert(sensor);
                }
                Event::Counter { sensor, .. } => {
                    if !host {
                        self.sensors.insert(sensor);
                    }
                    self.counters.insert((p, sensor, host));
                }
                Event::Comm {
                    sensor,
                    op,
                    fd,
                    duration,
                    result,
                    peer,
                    ..
                } => {
                    self.sensors.insert(sensor);
                    if matches!(op, CommOp::Connect | CommOp::Accept) {
                        self.role(p, op, fd, t, result);
                    } else if op.is_send() || op.is_recv() {
                        self.calls.push(Call {
                            process: p,
                            thread: s,
                            t,
                            duration: duration.min(i64::MAX as u64) as i64,
                            op,
                            fd,
                            bytes: result,
                            peer,
                            sensor,
                        });
                    }
                }
                Event::Task {
                    t: tt,
                    tid,
                    pid,
                    comm,
                } => {
                    let e = self.tasks.entry((p, tid)).or_insert(TaskInfo {
                        pid,
                        comm: String::new(),
                        t_first: tt,
                    });
                    e.pid = pid;
                    e.comm = comm;
                    e.t_first = e.t_first.min(tt);
                }
                Event::Socket {
                    sensor,
                    fd,
                    proto,
                    local,
                    peer,
                    ..
                } => {
                    self.sensors.insert(sensor);
                    self.describe(SocketDesc {
                        process: p,
                        t,
                        fd,
                        proto,
                        local,
                        peer,
                        thread: s,
                        role: None,
                    });
                }
                _ => {}
            }
        }
        let st = &mut self.streams[s];
        // Before `t_last` moves on: the loss lies between the previous batch and this one's end.
        st.note_dropped(frame.dropped, last);
        st.events += n;
        self.events += n;
        if let Some(f) = first {
            st.t_first = Some(st.t_first.map_or(f, |x| x.min(f)));
        }
        if let Some(l) = last {
            st.t_last = Some(st.t_last.map_or(l, |x| x.max(l)));
        }
    }
}

/// Progress of a pass: bytes of segments done.
#[derive(Debug, Default)]
struct Progress {
    done_segments: u64,
    current: Option<(u64, u64)>,
}

impl Progress {
    fn at(&mut self, records: &SessionRecords, lens: &HashMap<u64, u64>) -> u64 {
        let Some(seg) = records.segment() else {
            return self.done_segments;
        };
        let idx = seg.header().segment_index;
        match self.current {
            Some((i, _)) if i == idx => {}
            Some((i, _)) => {
                self.done_segments += lens.get(&i).copied().unwrap_or(0);
                self.current = Some((idx, 0));
            }
            None => self.current = Some((idx, 0)),
        }
        self.done_segments + seg.end_offset()
    }
}

fn segment_lengths(session: &SessionDir) -> Result<HashMap<u64, u64>, Error> {
    Ok(session
        .segments()?
        .into_iter()
        .map(|s| (s.index, s.len))
        .collect())
}

/// The first pass. `progress(bytes_done)` is called now and then.
pub fn scan(session: &SessionDir, mut progress: impl FnMut(u64)) -> Result<Scan, Error> {
    let lens = segment_lengths(session)?;
    let mut scan = Scan {
        bytes: lens.values().sum(),
        ..Scan::default()
    };
    let mut records = session.records()?;
    let mut prog = Progress::default();
    let mut n = 0u64;
    while records.advance()? {
        n += 1;
        if n.is_multiple_of(4096) {
            progress(prog.at(&records, &lens));
        }
        let Some(r) = records.record() else { continue };
        let seg = *r.segment;
        scan.record(&seg, r.record);
    }
    scan.faults = records.faults().to_vec();
    progress(scan.bytes);
    Ok(scan)
}

/// One event batch of the second pass.
#[derive(Debug)]
pub struct Batch<'a> {
    /// Process index.
    pub process: usize,
    /// Stream index.
    pub stream: usize,
    /// The frame.
    pub frame: EventsFrame<'a>,
}

/// The second pass: a lending cursor over event batches.
#[derive(Debug)]
pub struct Replay<'s> {
    scan: &'s Scan,
    records: SessionRecords,
    lens: HashMap<u64, u64>,
    prog: Progress,
    dedup: Dedup,
}

impl<'s> Replay<'s> {
    /// Starts the second pass over `session` with the first pass's indexes.
    pub fn new(session: &SessionDir, scan: &'s Scan) -> Result<Self, Error> {
        Ok(Replay {
            scan,
            records: session.records()?,
            lens: segment_lengths(session)?,
            prog: Progress::default(),
            dedup: Dedup::new(),
        })
    }

    /// Bytes read so far.
    pub fn position(&mut self) -> u64 {
        self.prog.at(&self.records, &self.lens)
    }

    /// The next event batch, or `None` at the end.
    pub fn next_batch(&mut self) -> Result<Option<Batch<'_>>, Error> {
        let (process, stream) = loop {
            if !self.records.advance()? {
                return Ok(None);
            }
            if let Some(found) = self.locate() {
                break found;
            }
        };
        let frame = match self.records.record().map(|r| r.record) {
            Some(StoreRecord::Data { body, .. }) => match EventsFrame::parse(body) {
                Ok(f) => f,
                Err(_) => return Ok(None),
            },
            _ => return Ok(None),
        };
        Ok(Some(Batch {
            process,
            stream,
            frame,
        }))
    }

    /// The process and stream of the current record if it is a known event batch that is
    /// not a duplicate.
    fn locate(&mut self) -> Option<(usize, usize)> {
        let r = self.records.record()?;
        let StoreRecord::Data {
            process_uid,
            ty,
            body,
            ..
        } = r.record
        else {
            return None;
        };
        if !FrameType::from_u8(ty).is_some_and(FrameType::is_data)
            || is_duplicate(&mut self.dedup, process_uid, body)
            || ty != FrameType::Events as u8
        {
            return None;
        }
        let frame = EventsFrame::parse(body).ok()?;
        let process = *self.scan.process_index.get(&process_uid)?;
        let stream = *self
            .scan
            .stream_index
            .get(&(process, frame.header.stream))?;
        Some((process, stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p5_wire::{Endpoint, SocketProto};

    fn describe(scan: &mut Scan, p: usize, fd: i64, t: i64) {
        scan.describe(SocketDesc {
            process: p,
            t,
            fd,
            proto: SocketProto::Tcp,
            local: Endpoint::None,
            peer: Endpoint::None,
            thread: 0,
            role: None,
        });
    }

    #[test]
    fn connect_and_accept_give_the_description_its_role_in_either_order() {
        let mut scan = Scan::default();
        // C ABI connect: the description (after the call) is recorded before the call.
        describe(&mut scan, 0, 3, 20);
        scan.role(0, CommOp::Connect, 3, 10, -115);
        // Rust accept: the call (returning descriptor 7) first, then the description.
        scan.role(1, CommOp::Accept, 4, 30, 7);
        describe(&mut scan, 1, 7, 40);
        // A failed connect gives no role; an older description is not taken.
        scan.role(0, CommOp::Connect, 5, 50, -111);
        describe(&mut scan, 0, 5, 60);
        scan.role(0, CommOp::Connect, 3, 70, 0);
        describe(&mut scan, 0, 3, 80);
        let roles: Vec<_> = scan.sockets.iter().map(|d| d.role).collect();
        assert_eq!(
            roles,
            vec![
                Some(Role::Connect),
                Some(Role::Accept),
                None,
                Some(Role::Connect)
            ]
        );
    }
}
