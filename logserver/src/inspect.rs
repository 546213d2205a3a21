//! `p5-logserver inspect`: a summary of a store, for people (text) and tools (`--json`).
//!
//! Per session: segments (count, bytes, records, server runs), torn tails repaired by recovery
//! (from `recovery.jsonl`) and damage still present, and per process: identity (uid, pid, ppid,
//! host, program, argv, runtime), connections and why they ended, streams (id, kind, tid, name,
//! frames, events, dropped events, closed?), events per sensor, and the clock-offset samples
//! `t_s − t_p` (count, minimum, median; signed ns).
//!
//! Offsets mix server runs correctly: each run's `t_s` counts from that run's start, so a
//! sample's `t_s` is first moved onto the time base of the session's first segment using the
//! runs' CLOCK_MONOTONIC starts from the segment headers (valid while the server host did not
//! reboot between runs). Imported frames (`t_s = 0`) carry no sample.
//!
//! Reading streams through the store once ([`crate::reader`]); memory grows with the number of
//! processes, streams and sensors, plus one `i64` per offset sample for the median.

use crate::error::Error;
use crate::import::IMPORTED_CONN_ID;
use crate::reader::{Fault, FaultKind, SegmentReader, StoreDir};
use crate::recover::Repair;
use p5_wire::data::{EventsFrame, StreamClose, StreamOpen};
use p5_wire::frame::FrameType;
use p5_wire::hello::RuntimeKind;
use p5_wire::store::{SampleSource, StoreRecord};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, Write};
use std::path::Path;

/// A whole store.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StoreSummary {
    /// The directory.
    pub root: String,
    /// Sessions in name order.
    pub sessions: Vec<SessionSummary>,
}

/// One session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// Session name.
    pub name: String,
    /// Number of segment files.
    pub segment_count: usize,
    /// Total bytes of segment files.
    pub bytes: u64,
    /// Records read.
    pub records: u64,
    /// Segment files.
    pub segments: Vec<SegmentSummary>,
    /// Server runs that wrote the session, oldest first.
    pub runs: Vec<RunSummary>,
    /// Processes in order of first appearance.
    pub processes: Vec<ProcessSummary>,
    /// Torn tails repaired (or kept in place) by start-up recovery.
    pub repairs: Vec<Repair>,
    /// Lines of `recovery.jsonl` that were not UTF-8 (read with their bad bytes replaced).
    #[serde(default)]
    pub repair_log_lossy_lines: u64,
    /// Lines of `recovery.jsonl` that are not a repair (skipped).
    #[serde(default)]
    pub repair_log_unreadable_lines: u64,
    /// Damage present now (e.g. a torn tail of a server that was killed and not restarted).
    pub faults: Vec<Fault>,
}

/// One segment file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SegmentSummary {
    /// File name.
    pub file: String,
    /// Bytes.
    pub bytes: u64,
    /// Records.
    pub records: u64,
    /// Server run that wrote it (hex), empty if its header is bad.
    pub server_run_id: String,
}

/// One server run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Run id (hex).
    pub server_run_id: String,
    /// Wall clock at the run's start, ns since the epoch.
    pub start_wall_ns: i64,
    /// CLOCK_MONOTONIC at the run's start, ns.
    pub start_mono_ns: u64,
    /// Segments written by the run.
    pub segments: usize,
}

/// One process (one `process_uid`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessSummary {
    /// Process uid (hex).
    pub process_uid: String,
    /// OS process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Host name.
    pub hostname: String,
    /// Machine id.
    pub host_id: String,
    /// Boot id.
    pub boot_id: String,
    /// Program name.
    pub program: String,
    /// Command line.
    pub argv: Vec<String>,
    /// Runtime kind (rust, c, python, java, host_agent, os_monitor, unknown).
    pub runtime: String,
    /// Connections (process records) seen.
    pub connections: u64,
    /// True if (some of) its data was imported from a spool file (no clock samples for that).
    pub imported: bool,
    /// Why its connections ended, with counts.
    pub disconnects: BTreeMap<String, u64>,
    /// Data frames stored.
    pub data_frames: u64,
    /// Events stored.
    pub events: u64,
    /// Streams by id.
    pub streams: Vec<StreamSummary>,
    /// Events per sensor, most frequent first.
    pub sensors: Vec<SensorSummary>,
    /// Clock-offset samples.
    pub offsets: OffsetSummary,
}

/// One stream of a process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamSummary {
    /// Stream id.
    pub id: u32,
    /// Kind (thread, host_metrics, os_monitor, or the raw number); "unknown" without a
    /// stream-open frame.
    pub kind: String,
    /// OS thread id.
    pub tid: u64,
    /// Name.
    pub name: String,
    /// Data frames (open, events, close).
    pub frames: u64,
    /// Events.
    pub events: u64,
    /// Events the runtime dropped (largest cumulative count seen).
    pub dropped: u64,
    /// True once a stream-close frame was stored.
    pub closed: bool,
    /// Highest sequence number stored.
    pub last_seq: u64,
}

/// Events of one sensor in one process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SensorSummary {
    /// Sensor id (hex).
    pub sensor: String,
    /// Events.
    pub events: u64,
}

/// Clock-offset samples `t_s − t_p` of one process, in ns on the session's first run's time
/// base.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OffsetSummary {
    /// Samples (data frames + pings + duplicates).
    pub count: u64,
    /// From stored data frames.
    pub data: u64,
    /// From pings.
    pub pings: u64,
    /// From duplicate data frames.
    pub duplicates: u64,
    /// Smallest `t_s − t_p` (the best single estimate of the offset).
    pub min_ns: Option<i64>,
    /// Median `t_s − t_p`.
    pub median_ns: Option<i64>,
    /// Server runs the samples come from.
    pub runs: usize,
}

#[derive(Default)]
struct ProcAcc {
    summary: ProcessSummary,
    streams: BTreeMap<u32, StreamSummary>,
    sensors: HashMap<u64, u64>,
    samples: Vec<i64>,
    runs: BTreeSet<u64>,
}

/// Summarizes the store at `root`.
pub fn inspect(root: &Path) -> Result<StoreSummary, Error> {
    let store = StoreDir::open(root)?;
    if !store.is_store()? {
        return Err(Error::NotAStore(root.to_path_buf()));
    }
    let mut out = StoreSummary {
        root: root.display().to_string(),
        sessions: Vec::new(),
    };
    for session in store.sessions()? {
        let log = session.repair_log()?;
        let mut s = SessionSummary {
            name: session.name.clone(),
            repairs: log.repairs,
            repair_log_lossy_lines: log.lossy_lines,
            repair_log_unreadable_lines: log.unreadable_lines,
            ..SessionSummary::default()
        };
        let mut procs: HashMap<u64, ProcAcc> = HashMap::new();
        let mut order: Vec<u64> = Vec::new();
        let mut runs: Vec<RunSummary> = Vec::new();
        let mut base_mono: Option<u64> = None;
        for seg in session.segments()? {
            s.segment_count += 1;
            s.bytes += seg.len;
            let mut summary = SegmentSummary {
                file: seg.file_name(),
                bytes: seg.len,
                ..SegmentSummary::default()
            };
            let mut r = match SegmentReader::open(&seg.path) {
                Ok(r) => r,
                Err(Error::BadSegment { source, .. }) => {
                    s.faults.push(Fault {
                        segment: seg.file_name(),
                        offset: 0,
                        kind: FaultKind::BadHeader,
                        error: source.to_string(),
                    });
                    s.segments.push(summary);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let h = *r.header();
            summary.server_run_id = format!("{:016x}", h.server_run_id);
            match runs
                .iter_mut()
                .find(|x| x.server_run_id == summary.server_run_id)
            {
                Some(run) => run.segments += 1,
                None => runs.push(RunSummary {
                    server_run_id: summary.server_run_id.clone(),
                    start_wall_ns: h.server_start_wall_ns,
                    start_mono_ns: h.server_start_mono_ns,
                    segments: 1,
                }),
            }
            let base = *base_mono.get_or_insert(h.server_start_mono_ns);
            let shift = h.server_start_mono_ns as i128 - base as i128;
            while r.advance()? {
                let Some(rec) = r.record() else { continue };
                summary.records += 1;
                account(&mut procs, &mut order, rec.record, shift, h.server_run_id);
            }
            s.faults.extend(r.skipped().iter().cloned());
            s.faults.extend(r.tail().cloned());
            s.records += summary.records;
            s.segments.push(summary);
        }
        s.runs = runs;
        for uid in order {
            if let Some(p) = procs.remove(&uid) {
                s.processes.push(finish(p));
            }
        }
        out.sessions.push(s);
    }
    Ok(out)
}

fn account(
    procs: &mut HashMap<u64, ProcAcc>,
    order: &mut Vec<u64>,
    record: StoreRecord<'_>,
    shift: i128,
    run: u64,
) {
    let uid = match &record {
        StoreRecord::Process { hello, .. } => hello.identity.process_uid,
        StoreRecord::Data { process_uid, .. }
        | StoreRecord::Sample { process_uid, .. }
        | StoreRecord::Disconnect { process_uid, .. } => *process_uid,
        StoreRecord::Unknown { .. } => return,
    };
    let p = procs.entry(uid).or_insert_with(|| {
        order.push(uid);
        ProcAcc {
            summary: ProcessSummary {
                process_uid: format!("{uid:016x}"),
                ..ProcessSummary::default()
            },
            ..ProcAcc::default()
        }
    });
    let sample = |p: &mut ProcAcc, t_s: u64, t_p: u64| {
        let v = (t_s as i128 + shift - t_p as i128).clamp(i64::MIN as i128, i64::MAX as i128);
        p.samples.push(v as i64);
        p.runs.insert(run);
    };
    match record {
        StoreRecord::Process { conn_id, hello, .. } => {
            let id = hello.identity;
            let s = &mut p.summary;
            s.connections += 1;
            s.imported |= conn_id == IMPORTED_CONN_ID;
            s.pid = id.pid;
            s.ppid = id.ppid;
            s.hostname = id.hostname;
            s.host_id = id.host_id;
            s.boot_id = id.boot_id;
            s.program = id.program;
            s.argv = id.argv;
            s.runtime = runtime_name(id.runtime).into();
        }
        StoreRecord::Data { t_s, ty, body, .. } => {
            p.summary.data_frames += 1;
            let Some(t) = FrameType::from_u8(ty) else {
                return;
            };
            let Ok(h) = p5_wire::data::DataHeader::peek(body) else {
                return;
            };
            if t_s != 0 {
                sample(p, t_s, h.t_p);
                p.summary.offsets.data += 1;
            }
            let st = p.streams.entry(h.stream).or_insert_with(|| StreamSummary {
                id: h.stream,
                kind: "unknown".into(),
                ..StreamSummary::default()
            });
            st.frames += 1;
            st.last_seq = st.last_seq.max(h.seq);
            match t {
                FrameType::StreamOpen => {
                    if let Ok(o) = StreamOpen::decode_body(body) {
                        st.kind = stream_kind_name(o.kind_raw);
                        st.tid = o.tid;
                        st.name = o.name;
                    }
                }
                FrameType::Events => {
                    if let Ok(ev) = EventsFrame::parse(body) {
                        st.dropped = st.dropped.max(ev.dropped);
                        if let Ok(events) = ev.events() {
                            for e in events.flatten() {
                                st.events += 1;
                                p.summary.events += 1;
                                *p.sensors.entry(e.sensor()).or_default() += 1;
                            }
                        }
                    }
                }
                FrameType::StreamClose => {
                    st.closed = true;
                    if let Ok(c) = StreamClose::decode_body(body) {
                        st.dropped = st.dropped.max(c.dropped);
                    }
                }
                _ => {}
            }
        }
        StoreRecord::Sample {
            t_s, t_p, source, ..
        } => {
            sample(p, t_s, t_p);
            if source == SampleSource::Ping as u8 {
                p.summary.offsets.pings += 1;
            } else if source == SampleSource::Duplicate as u8 {
                p.summary.offsets.duplicates += 1;
            }
        }
        StoreRecord::Disconnect { reason, .. } => {
            *p.summary.disconnects.entry(reason).or_default() += 1;
        }
        StoreRecord::Unknown { .. } => {}
    }
}

fn finish(mut p: ProcAcc) -> ProcessSummary {
    let mut s = p.summary;
    s.streams = p.streams.into_values().collect();
    let mut sensors: Vec<_> = p.sensors.into_iter().collect();
    sensors.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    s.sensors = sensors
        .into_iter()
        .map(|(sensor, events)| SensorSummary {
            sensor: format!("{sensor:016x}"),
            events,
        })
        .collect();
    s.offsets.count = p.samples.len() as u64;
    s.offsets.runs = p.runs.len();
    s.offsets.min_ns = p.samples.iter().copied().min();
    if !p.samples.is_empty() {
        let mid = p.samples.len() / 2;
        let (_, m, _) = p.samples.select_nth_unstable(mid);
        s.offsets.median_ns = Some(*m);
    }
    s
}

fn runtime_name(b: u8) -> &'static str {
    match RuntimeKind::from_u8(b) {
        RuntimeKind::Unknown => "unknown",
        RuntimeKind::Rust => "rust",
        RuntimeKind::C => "c",
        RuntimeKind::Python => "python",
        RuntimeKind::Java => "java",
        RuntimeKind::HostAgent => "host_agent",
        RuntimeKind::OsMonitor => "os_monitor",
    }
}

fn stream_kind_name(b: u8) -> String {
    match b {
        1 => "thread".into(),
        2 => "host_metrics".into(),
        3 => "os_monitor".into(),
        k => format!("kind {k}"),
    }
}

fn size(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

fn ns(v: i64) -> String {
    let a = v.unsigned_abs();
    let sign = if v < 0 { "-" } else { "" };
    match a {
        0..=9_999 => format!("{v} ns"),
        10_000..=9_999_999 => format!("{sign}{:.3} µs", a as f64 / 1e3),
        10_000_000..=9_999_999_999 => format!("{sign}{:.3} ms", a as f64 / 1e6),
        _ => format!("{sign}{:.3} s", a as f64 / 1e9),
    }
}

/// How many sensors the text output lists per process.
const TOP_SENSORS: usize = 10;

/// Writes the human-readable summary.
pub fn render_text(s: &StoreSummary, w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "store {}: {} session(s)", s.root, s.sessions.len())?;
    for ses in &s.sessions {
        writeln!(w)?;
        let started = ses
            .runs
            .iter()
            .map(|r| r.start_wall_ns)
            .filter(|&t| t > 0)
            .min()
            .map(|t| format!(", first started {}", local_time(t)))
            .unwrap_or_default();
        writeln!(
            w,
            "session {}: {} segment(s), {}, {} records, {} server run(s){started}",
            ses.name,
            ses.segment_count,
            size(ses.bytes),
            ses.records,
            ses.runs.len()
        )?;
        for seg in &ses.segments {
            writeln!(
                w,
                "  segment {}  run {}  {:>10}  {} records",
                seg.file,
                if seg.server_run_id.is_empty() {
                    "?"
                } else {
                    &seg.server_run_id
                },
                size(seg.bytes),
                seg.records
            )?;
        }
        for r in &ses.repairs {
            match &r.deferred {
                None => writeln!(
                    w,
                    "  repaired torn tail: {} cut at offset {} ({} bytes removed): {}",
                    r.segment, r.offset, r.removed_bytes, r.reason
                )?,
                Some(why) => writeln!(
                    w,
                    "  torn tail kept in place: {} at offset {} ({} bytes), could not be \
                     quarantined: {why}; it is cut once the log server can copy it (free some \
                     space): {}",
                    r.segment, r.offset, r.removed_bytes, r.reason
                )?,
            }
        }
        if ses.repair_log_lossy_lines + ses.repair_log_unreadable_lines > 0 {
            writeln!(
                w,
                "  recovery.jsonl: {} line(s) not UTF-8 (read with the bad bytes replaced), {} \
                 line(s) not a repair (skipped)",
                ses.repair_log_lossy_lines, ses.repair_log_unreadable_lines
            )?;
        }
        for f in &ses.faults {
            writeln!(w, "  damage: {f}")?;
        }
        for p in &ses.processes {
            render_process(p, w)?;
        }
    }
    Ok(())
}

/// A wall-clock time (ns since 1970) as local date and time, to the second.
pub fn local_time(wall_ns: i64) -> String {
    use chrono::TimeZone as _;
    match chrono::Local.timestamp_opt(wall_ns.div_euclid(1_000_000_000), 0) {
        chrono::LocalResult::Single(t) | chrono::LocalResult::Ambiguous(t, _) => {
            t.format("%Y-%m-%d %H:%M:%S").to_string()
        }
        chrono::LocalResult::None => format!("{wall_ns} ns since 1970"),
    }
}

fn render_process(p: &ProcessSummary, w: &mut dyn Write) -> io::Result<()> {
    writeln!(w)?;
    writeln!(
        w,
        "  process {}  pid {}  ppid {}  host {}{}  program {}  runtime {}  connections {}",
        p.process_uid,
        p.pid,
        p.ppid,
        if p.hostname.is_empty() {
            "?"
        } else {
            &p.hostname
        },
        if p.host_id.is_empty() {
            String::new()
        } else {
            format!(" (machine {})", p.host_id)
        },
        if p.program.is_empty() {
            "?"
        } else {
            &p.program
        },
        p.runtime,
        p.connections
    )?;
    if !p.argv.is_empty() {
        writeln!(w, "    argv: {}", p.argv.join(" "))?;
    }
    if p.imported {
        writeln!(
            w,
            "    imported from a spool file (imported frames carry no clock samples)"
        )?;
    }
    if !p.disconnects.is_empty() {
        let d: Vec<_> = p
            .disconnects
            .iter()
            .map(|(r, n)| format!("{r} ×{n}"))
            .collect();
        writeln!(w, "    disconnects: {}", d.join(", "))?;
    }
    let o = &p.offsets;
    match (o.min_ns, o.median_ns) {
        (Some(min), Some(median)) => writeln!(
            w,
            "    clock offset t_s − t_p: {} samples ({} data, {} ping, {} duplicate) from {} run(s): min {}, median {}",
            o.count,
            o.data,
            o.pings,
            o.duplicates,
            o.runs,
            ns(min),
            ns(median)
        )?,
        _ => writeln!(w, "    clock offset t_s − t_p: no samples")?,
    }
    writeln!(
        w,
        "    {} data frames, {} events in {} stream(s)",
        p.data_frames,
        p.events,
        p.streams.len()
    )?;
    if !p.streams.is_empty() {
        writeln!(
            w,
            "    {:>6}  {:<12}  {:>8}  {:<16}  {:>8}  {:>10}  {:>8}  closed",
            "stream", "kind", "tid", "name", "frames", "events", "dropped"
        )?;
        for st in &p.streams {
            writeln!(
                w,
                "    {:>6}  {:<12}  {:>8}  {:<16}  {:>8}  {:>10}  {:>8}  {}",
                st.id,
                st.kind,
                st.tid,
                st.name,
                st.frames,
                st.events,
                st.dropped,
                if st.closed { "yes" } else { "no" }
            )?;
        }
    }
    if !p.sensors.is_empty() {
        let shown = p.sensors.len().min(TOP_SENSORS);
        writeln!(
            w,
            "    events per sensor ({shown} of {} sensors):",
            p.sensors.len()
        )?;
        for s in &p.sensors[..shown] {
            writeln!(w, "      {}  {:>10}", s.sensor, s.events)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(size(10), "10 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(ns(-5), "-5 ns");
        assert_eq!(ns(12_345), "12.345 µs");
        assert_eq!(ns(-12_345_678), "-12.346 ms");
        assert_eq!(ns(i64::MIN), "-9223372036.855 s");
    }
}
