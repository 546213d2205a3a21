//! Merging one session: scan, synchronize clocks, match messages, then stream the rows.
//!
//! Order of work: [`crate::load::scan`] (first pass) → matching ([`crate::matching`]) →
//! clock domains, fits, refinement and tightening with the matched messages
//! ([`crate::domain`], [`crate::clock`]) →
//! the small tables → [`crate::load::Replay`] (second pass) turns events into intervals,
//! states, marks, metric samples, scheduling intervals and IRQs → diagnostics → the session
//! row. Everything goes into one transaction; the session's old rows are deleted first. When
//! the session is alone in the database its tables are emptied and the indexes dropped during
//! the load and built afterwards (a bulk load; much faster than maintaining them row by row).

use crate::clock::{Fit, Method};
use crate::db::{Db, Writer};
use crate::domain;
use crate::error::Error;
use crate::intervals::{Interval, Nesting};
use crate::load::{self, Replay};
use crate::manifest::Manifests;
use crate::matching::{self, Matches};
use crate::overview::{Category, LANE_IRQ, LANE_SCHED, LANE_STATES, Overview, Owner};
use crate::schema::{self, Value};
use crate::states::{StateSpan, Timeline};
use p5_logserver::reader::SessionDir;
use p5_wire::manifest::format_id;
use p5_wire::{Event, RuntimeKind, SocketProto, StreamKind};
use std::collections::{BTreeMap, HashMap};

/// Severity of a diagnostic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Worth knowing.
    Info,
    /// Something was lost or guessed.
    Warning,
}

/// Something the merge noticed about its input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// How bad.
    pub severity: Severity,
    /// Short kebab-case key, e.g. `store-damage`.
    pub kind: &'static str,
    /// Process index it concerns.
    pub process: Option<usize>,
    /// How many times.
    pub count: u64,
    /// What happened.
    pub message: String,
}

/// The clock estimate of one process, as written to `clock_estimate`.
#[derive(Debug, Clone)]
pub struct ProcessClock {
    /// Process uid.
    pub uid: u64,
    /// pid.
    pub pid: u32,
    /// Program.
    pub program: String,
    /// Host name.
    pub hostname: String,
    /// Clock domain (`host:<boot id>` or `process`).
    pub domain: String,
    /// The fit on the process's own clock (tightening included).
    pub fit: Fit,
    /// Shift applied by message tightening, ns.
    pub tighten_ns: i64,
}

/// What merging a session did.
#[derive(Debug, Clone, Default)]
pub struct SessionSummary {
    /// Session name.
    pub name: String,
    /// Its id in the database.
    pub id: i64,
    /// Per process clocks.
    pub clocks: Vec<ProcessClock>,
    /// Streams.
    pub streams: u64,
    /// Events.
    pub events: u64,
    /// Message rows (matched and half).
    pub messages: u64,
    /// Matched messages.
    pub matched: u64,
    /// Sends nobody received.
    pub unmatched_sends: u64,
    /// Receives no send accounts for.
    pub unmatched_recvs: u64,
    /// Messages received before they were sent under the sample-based fits.
    pub violations_before: u64,
    /// Remaining after tightening.
    pub violations: u64,
    /// Diagnostics.
    pub diagnostics: Vec<Diagnostic>,
    /// Rows written per table.
    pub rows: BTreeMap<String, u64>,
    /// First and last time on the session base.
    pub t_range: Option<(i64, i64)>,
}

fn host_key(id: &p5_wire::hello::Identity) -> String {
    if !id.boot_id.is_empty() {
        id.boot_id.clone()
    } else if !id.hostname.is_empty() {
        format!("host:{}", id.hostname)
    } else {
        "unknown".to_owned()
    }
}

fn runtime_name(b: u8) -> &'static str {
    match RuntimeKind::from_u8(b) {
        RuntimeKind::Rust => "rust",
        RuntimeKind::C => "c",
        RuntimeKind::Python => "python",
        RuntimeKind::Java => "java",
        RuntimeKind::HostAgent => "host-agent",
        RuntimeKind::OsMonitor => "os-monitor",
        _ => "unknown",
    }
}

fn clock_name(b: u8) -> &'static str {
    match b {
        1 => "tsc",
        2 => "monotonic",
        _ => "unknown",
    }
}

fn proto_name(p: SocketProto) -> &'static str {
    match p {
        SocketProto::Tcp => "tcp",
        SocketProto::Udp => "udp",
        SocketProto::UnixStream => "unix-stream",
        SocketProto::UnixDgram => "unix-dgram",
        SocketProto::Unknown => "unknown",
    }
}

/// Per-stream state of the second pass.
#[derive(Debug, Default)]
struct StreamState {
    nesting: Nesting,
    timeline: Timeline,
}

/// Rows of one merge, written through a [`Writer`].
struct Rows<'a> {
    w: &'a mut Writer,
    sid: i64,
    next_interval: i64,
    overview: Overview,
}

impl Rows<'_> {
    async fn interval(&mut self, thread: i64, i: Interval) -> Result<(), Error> {
        let v = [
            Value::Int(self.sid),
            Value::Int(i.id),
            Value::from(i.parent),
            Value::Int(thread),
            Value::from(i.sensor),
            Value::Int(i.start),
            Value::Int(i.end),
            Value::from(i.depth),
            Value::Int(i.self_ns),
            Value::Int(i.complete as i64),
        ];
        let lane = i64::from(i.depth) + 1;
        let cat = Category::Number(i.sensor as i64);
        (self.overview).add(Owner::Thread(thread), lane, i.start, i.end, cat);
        self.w.row(schema::INTERVAL, v).await
    }

    /// A scheduling interval: `tid` had `cpu` of `host` (0-based) during `span`.
    async fn sched(
        &mut self,
        host: usize,
        cpu: u32,
        tid: u32,
        thread: Option<i64>,
        span: (i64, i64),
        end_state: Value,
    ) -> Result<(), Error> {
        let v = [
            Value::Int(self.sid),
            Value::Int(host as i64 + 1),
            Value::from(cpu),
            Value::from(tid),
            Value::from(thread),
            Value::Int(span.0),
            Value::Int(span.1),
            end_state,
        ];
        if let Some(t) = thread {
            let cat = Category::Number(i64::from(cpu));
            (self.overview).add(Owner::Thread(t), LANE_SCHED, span.0, span.1, cat);
        }
        self.w.row(schema::SCHED, v).await
    }

    async fn state(&mut self, thread: i64, s: StateSpan) -> Result<(), Error> {
        let v = [
            Value::Int(self.sid),
            Value::Int(thread),
            Value::Int(s.start),
            Value::Int(s.end),
            Value::from(s.state.name()),
            Value::from(s.op.map(|o| o.name())),
            if s.op.is_some() {
                Value::Int(s.fd)
            } else {
                Value::Null
            },
            if s.op.is_some() {
                Value::Int(s.result)
            } else {
                Value::Null
            },
        ];
        let cat = Category::State(s.state.name());
        (self.overview).add(Owner::Thread(thread), LANE_STATES, s.start, s.end, cat);
        self.w.row(schema::STATE, v).await
    }
}

/// Merges one session into `db` (inside the caller's transaction).
pub async fn merge(
    db: Db,
    store: &str,
    dir: &SessionDir,
    manifests: &Manifests,
    progress: &indicatif::ProgressBar,
) -> Result<(Db, SessionSummary), Error> {
    let started = std::time::Instant::now();
    let phase = |what: &str| {
        tracing::debug!(session = %dir.name, elapsed_ms = started.elapsed().as_millis() as u64, "merge: {what}");
        progress.set_message(format!("{}: {what}", dir.name));
    };
    phase("scanning");
    progress.set_position(0);
    let total: u64 = dir.segments()?.iter().map(|s| s.len).sum();
    progress.set_length(total.max(1) * 2);
    let scan = load::scan(dir, |b| progress.set_position(b))?;
    progress.set_length(scan.bytes.max(1) * 2);
    let mut diags: Vec<Diagnostic> = Vec::new();
    let warn = |kind, process, count, message: String| Diagnostic {
        severity: Severity::Warning,
        kind,
        process,
        count,
        message,
    };
    let info = |kind, process, count, message: String| Diagnostic {
        severity: Severity::Info,
        kind,
        process,
        count,
        message,
    };
    for f in &scan.faults {
        diags.push(warn("store-damage", None, 1, f.to_string()));
    }
    if scan.bad_frames > 0 {
        diags.push(warn(
            "bad-frame",
            None,
            scan.bad_frames,
            format!(
                "{} data frames did not decode and were skipped",
                scan.bad_frames
            ),
        ));
    }
    if scan.bad_batches > 0 {
        diags.push(warn(
            "bad-events",
            None,
            scan.bad_batches,
            format!(
                "{} event batches stopped decoding part-way; the events before the damage are kept",
                scan.bad_batches
            ),
        ));
    }
    if scan.unknown_frames > 0 {
        diags.push(info(
            "unknown-frame",
            None,
            scan.unknown_frames,
            format!(
                "{} data frames of unknown types were skipped",
                scan.unknown_frames
            ),
        ));
    }

    // Hosts.
    let mut host_index: BTreeMap<String, usize> = BTreeMap::new();
    let mut host_rows: Vec<(String, String, String)> = Vec::new();
    let mut proc_host = Vec::with_capacity(scan.processes.len());
    for p in &scan.processes {
        let key = host_key(&p.identity);
        let h = *host_index.entry(key.clone()).or_insert_with(|| {
            host_rows.push((key, p.identity.host_id.clone(), p.identity.hostname.clone()));
            host_rows.len() - 1
        });
        proc_host.push(h);
    }

    // Clocks and matching.
    phase("matching");
    let matches: Matches = matching::match_calls(&scan.sockets, &scan.calls);
    let sync = domain::synchronize(&scan, &proc_host, &matches);
    let fits = &sync.fits;
    let tighten_ns = &sync.tighten_ns;
    let violations_before = sync.violations_before;
    for (p, pi) in scan.processes.iter().enumerate() {
        if fits[p].method == Method::None {
            let why = if pi.untimed_frames > 0 {
                "was imported from a spool file (no receipt times)"
            } else {
                "has no clock samples"
            };
            diags.push(warn("no-clock-samples", Some(p), 1, format!("process {} (pid {}) {why}: its times stay relative to its own start unless messages move them", format_id(pi.identity.process_uid), pi.identity.pid)));
        }
        if !pi.hello_seen {
            diags.push(warn("unknown-process", Some(p), 1, format!("data from process {} whose handshake is not in the store (damaged or missing segment)", format_id(pi.identity.process_uid))));
        }
    }

    let calls = &scan.calls;
    if matches.undescribed > 0 {
        diags.push(info("undescribed-socket", None, matches.undescribed, format!("{} communication calls on descriptors without a socket description cannot be matched", matches.undescribed)));
    }
    if matches.unmatched_sends + matches.unmatched_recvs > 0 {
        diags.push(info("unmatched-message", None, matches.unmatched_sends + matches.unmatched_recvs, format!("{} sends and {} receives have no recorded other end (peer not instrumented, events dropped, or still in flight)", matches.unmatched_sends, matches.unmatched_recvs)));
    }

    // The database: delete the old session, write the small tables.
    let mut db = db;
    let bulk = db.alone(&dir.name).await?;
    let sid = db.replace_session(&dir.name, bulk).await?;
    if bulk {
        db.indexes(false).await?;
    }
    let mut writer = Writer::new(db);
    phase("writing");
    for (h, (boot, machine, hostname)) in host_rows.iter().enumerate() {
        let v = [
            Value::Int(sid),
            Value::Int(h as i64 + 1),
            Value::from(boot.clone()),
            Value::from(machine.clone()),
            Value::from(hostname.clone()),
        ];
        writer.row(schema::HOST, v).await?;
    }
    let mut t_range: Option<(i64, i64)> = None;
    let mut widen = |a: i64, b: i64| {
        t_range = Some(t_range.map_or((a, b), |(x, y)| (x.min(a), y.max(b))));
    };
    // Threads (streams) and processes.
    let mut proc_span: Vec<Option<(i64, i64)>> = vec![None; scan.processes.len()];
    let mut thread_by_tid: HashMap<(usize, u64), i64> = HashMap::new();
    let mut stream_rows = Vec::with_capacity(scan.streams.len());
    for (s, st) in scan.streams.iter().enumerate() {
        let f = &fits[st.process];
        let start = st.t_first.map(|t| f.map(t));
        let end = st.end().map(|t| f.map(t));
        if let (Some(a), Some(b)) = (start, end) {
            let span = &mut proc_span[st.process];
            *span = Some(span.map_or((a, b), |(x, y)| (x.min(a), y.max(b))));
            widen(a, b);
        }
        if st.tid != 0 && st.kind == StreamKind::Thread as u8 {
            thread_by_tid
                .entry((proc_host[st.process], st.tid))
                .or_insert(s as i64 + 1);
        }
        if st.dropped > 0 {
            diags.push(warn(
                "dropped-events",
                Some(st.process),
                st.dropped,
                format!(
                    "stream {} ({}) of process {} lost {} events to a full buffer",
                    st.stream,
                    st.name,
                    format_id(scan.processes[st.process].identity.process_uid),
                    st.dropped
                ),
            ));
        }
        stream_rows.push([
            Value::Int(sid),
            Value::Int(s as i64 + 1),
            Value::Int(st.process as i64 + 1),
            Value::from(st.stream),
            Value::from(st.kind_name()),
            Value::from(st.tid),
            Value::from(st.name.clone()),
            Value::from(start),
            Value::from(end),
            Value::from(st.events),
            Value::from(st.dropped),
        ]);
    }
    for row in stream_rows {
        writer.row(schema::THREAD, row).await?;
    }
    let mut clocks = Vec::new();
    for (p, pi) in scan.processes.iter().enumerate() {
        let id = &pi.identity;
        let f = &fits[p];
        let domain = sync.domains[p].clone();
        let v = [
            Value::Int(sid),
            Value::Int(p as i64 + 1),
            Value::Int(proc_host[p] as i64 + 1),
            Value::from(id.process_uid),
            Value::from(id.pid),
            Value::from(id.ppid),
            Value::from(id.program.clone()),
            Value::from(serde_json::to_string(&id.argv).unwrap_or_default()),
            Value::from(runtime_name(id.runtime)),
            Value::from(clock_name(id.clock)),
            Value::Int(id.start_wall_ns),
            Value::from(id.start_mono_ns),
            Value::Int(proc_span[p].map_or(f.map(0), |s| s.0)),
            Value::from(proc_span[p].map(|s| s.1)),
        ];
        writer.row(schema::PROCESS, v).await?;
        let v = [
            Value::Int(sid),
            Value::Int(p as i64 + 1),
            Value::from(domain.clone()),
            Value::from(f.method.name()),
            Value::Int(f.map(0)),
            Value::Real(f.drift_ppm()),
            Value::from(f.forward),
            Value::from(f.backward),
            Value::from(f.error_bound_ns),
            Value::from(f.cosmos_min_ns),
            Value::Int(tighten_ns[p]),
        ];
        writer.row(schema::CLOCK_ESTIMATE, v).await?;
        clocks.push(ProcessClock {
            uid: id.process_uid,
            pid: id.pid,
            program: id.program.clone(),
            hostname: id.hostname.clone(),
            domain,
            fit: *f,
            tighten_ns: tighten_ns[p],
        });
    }

    // Source files and sensors.
    for (i, (_, f)) in manifests.files.iter().enumerate() {
        let text = manifests.source_text(i);
        if text.is_none() {
            diags.push(info(
                "missing-source",
                None,
                1,
                format!(
                    "no readable source copy for {} (sha256 {})",
                    f.path, f.sha256
                ),
            ));
        }
        let v = [
            Value::Int(sid),
            Value::Int(i as i64 + 1),
            Value::from(f.path.clone()),
            Value::from(f.language.clone()),
            Value::from(f.sha256.clone()),
            Value::from(f.lines),
            Value::from(text),
        ];
        writer.row(schema::SOURCE_FILE, v).await?;
    }
    let mut unknown = 0u64;
    let mut sensor_ids: Vec<u64> = scan.sensors.iter().copied().filter(|&s| s != 0).collect();
    for id in manifests.sensors.keys() {
        if !scan.sensors.contains(id) {
            sensor_ids.push(*id);
        }
    }
    sensor_ids.sort_unstable();
    for id in sensor_ids {
        let v: Vec<Value> = match manifests.sensors.get(&id) {
            Some((s, file)) => vec![
                Value::Int(sid),
                Value::from(id),
                Value::from(format_id(id)),
                Value::from(s.kind.clone()),
                Value::from(s.language.clone()),
                Value::from(s.file.clone()),
                Value::from(file.map(|f| f as i64 + 1)),
                Value::from(s.function.clone()),
                Value::from(s.name.clone()),
                Value::from(s.line),
                Value::from(s.column),
                Value::from(s.end_line),
                Value::from(s.end_column),
            ],
            None => {
                unknown += 1;
                let mut v = vec![Value::Int(sid), Value::from(id), Value::from(format_id(id))];
                v.extend([
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                ]);
                v.push(Value::from(format_id(id)));
                v.extend([Value::Null, Value::Null, Value::Null, Value::Null]);
                v
            }
        };
        writer.row(schema::SENSOR, v).await?;
    }
    if unknown > 0 {
        let why = if manifests.sensors.is_empty() {
            "no manifest was given (--manifest DIR)"
        } else {
            "they are in none of the given manifests"
        };
        diags.push(info(
            "unknown-sensor",
            None,
            unknown,
            format!("{unknown} sensor ids have no source location: {why}"),
        ));
    }

    // Metrics.
    let mut metric_names: HashMap<(usize, u64), &p5_wire::data::Name> = HashMap::new();
    for (p, n) in &scan.names {
        metric_names.insert((*p, n.id), n);
    }
    let mut metric_id: HashMap<(usize, u64), i64> = HashMap::new();
    for (i, &(p, key, host)) in scan.counters.iter().enumerate() {
        let id = i as i64 + 1;
        metric_id.insert((p, key), id);
        let (name, unit, scale) = match (host, metric_names.get(&(p, key))) {
            (_, Some(n)) => (n.name.clone(), n.unit.clone(), n.scale_exp),
            (false, None) => (
                manifests
                    .sensors
                    .get(&key)
                    .map_or_else(|| format_id(key), |s| s.0.name.clone()),
                String::new(),
                0,
            ),
            (true, None) => (format!("metric {}", format_id(key)), String::new(), 0),
        };
        let v = [
            Value::Int(sid),
            Value::Int(id),
            Value::Int(p as i64 + 1),
            Value::Int(proc_host[p] as i64 + 1),
            Value::from(if host { "host" } else { "counter" }),
            Value::from(key),
            Value::from(name),
            Value::from(unit),
            Value::Int(scale as i64),
        ];
        writer.row(schema::METRIC, v).await?;
    }

    // Messages.
    let mut violation_rows = 0u64;
    for (i, m) in matches.messages.iter().enumerate() {
        let send = m.send.map(|s| &calls[s]);
        let first = m.recv_first.map(|r| &calls[r]);
        let last = m.recv_last.map(|r| &calls[r]);
        let send_t = send.map(|c| fits[c.process].map(c.t));
        let send_end = send.map(|c| fits[c.process].map(c.t.saturating_add(c.duration)));
        let recv_t = first.map(|c| fits[c.process].map(c.t));
        let recv_end = last.map(|c| fits[c.process].map(c.t.saturating_add(c.duration)));
        let recv = last.or(first);
        let violation = matches!((send_t, recv_end), (Some(s), Some(r)) if r < s && m.send.is_some() && m.recv_last.is_some());
        violation_rows += violation as u64;
        let v = [
            Value::Int(sid),
            Value::Int(i as i64 + 1),
            Value::from(proto_name(m.proto)),
            Value::Int(m.bytes),
            Value::from(send.map(|c| c.process as i64 + 1)),
            Value::from(send.map(|c| c.thread as i64 + 1)),
            Value::from(send.map(|c| c.sensor)),
            Value::from(send_t),
            Value::from(send_end),
            Value::from(recv.map(|c| c.process as i64 + 1)),
            Value::from(recv.map(|c| c.thread as i64 + 1)),
            Value::from(recv.map(|c| c.sensor)),
            Value::from(recv_t),
            Value::from(recv_end),
            Value::from(m.recv_calls),
            Value::Int(violation as i64),
        ];
        writer.row(schema::MESSAGE, v).await?;
    }
    // Counted on the rows as written (the tightening's own count agrees up to rounding).
    let violations = violation_rows;
    if violations > 0 {
        diags.push(warn(
            "causality-violation",
            None,
            violations,
            format!(
                "{violations} messages are still received before they were sent after \
                 tightening the clocks ({violations_before} before)"
            ),
        ));
    }

    // Second pass: the events.
    phase("events");
    let mut streams: Vec<StreamState> = (0..scan.streams.len())
        .map(|_| StreamState::default())
        .collect();
    // Per (host, cpu): the thread on the CPU and since when.
    let mut on_cpu: BTreeMap<(usize, u32), (u32, i64)> = BTreeMap::new();
    let mut rows = Rows {
        w: &mut writer,
        sid,
        next_interval: 0,
        overview: Overview::new(t_range.map_or(0, |r| r.0), t_range.map_or(0, |r| r.1)),
    };
    let mut replay = Replay::new(dir, &scan)?;
    let mut batches = 0u64;
    let mut wakeups = 0u64;
    let mut intervals_out: Vec<Interval> = Vec::new();
    let mut states_out: Vec<StateSpan> = Vec::new();
    loop {
        batches += 1;
        if batches.is_multiple_of(64) {
            let pos = replay.position();
            progress.set_position(scan.bytes + pos);
        }
        let Some(b) = replay.next_batch()? else { break };
        let f = fits[b.process];
        let host = proc_host[b.process];
        let thread = b.stream as i64 + 1;
        let kind = scan.streams[b.stream].kind;
        let app = kind == StreamKind::Thread as u8 || kind == 0;
        let Ok(decoder) = b.frame.events() else {
            continue;
        };
        let st = &mut streams[b.stream];
        for e in decoder {
            let Ok(e) = e else { break };
            let t = f.map(e.time() as i64);
            if app {
                st.timeline.touch(t);
            }
            match e {
                Event::Enter { sensor, .. } => {
                    rows.next_interval += 1;
                    st.nesting.enter(t, sensor, rows.next_interval);
                }
                Event::Exit { sensor, .. } => {
                    st.nesting.exit(t, sensor, &mut |i| intervals_out.push(i));
                }
                Event::Mark { sensor, .. } => {
                    let v = [
                        Value::Int(sid),
                        Value::Int(thread),
                        Value::from(sensor),
                        Value::Int(t),
                    ];
                    rows.w.row(schema::MARK, v).await?;
                }
                Event::Counter { sensor, value, .. } => {
                    if let Some(&m) = metric_id.get(&(b.process, sensor)) {
                        let v = [
                            Value::Int(sid),
                            Value::Int(m),
                            Value::Int(thread),
                            Value::Int(t),
                            Value::Int(value),
                        ];
                        rows.w.row(schema::METRIC_SAMPLE, v).await?;
                    }
                }
                Event::Comm {
                    op,
                    fd,
                    duration,
                    result,
                    t: t0,
                    ..
                } => {
                    let end =
                        f.map((t0 as i64).saturating_add(duration.min(i64::MAX as u64) as i64));
                    st.timeline
                        .call(t, end.saturating_sub(t), op, fd, result, &mut |s| {
                            states_out.push(s)
                        });
                }
                Event::Switch {
                    cpu,
                    prev_tid,
                    prev_state,
                    next_tid,
                    ..
                } => {
                    if let Some((tid, since)) = on_cpu.remove(&(host, cpu))
                        && tid == prev_tid
                    {
                        let end_state = Value::from((prev_state as char).to_string());
                        let thread = thread_by_tid.get(&(host, tid as u64)).copied();
                        rows.sched(host, cpu, tid, thread, (since, t), end_state)
                            .await?;
                    }
                    if next_tid != 0 {
                        on_cpu.insert((host, cpu), (next_tid, t));
                    }
                }
                Event::Wakeup { .. } => wakeups += 1,
                Event::Irq {
                    cpu,
                    irq,
                    duration,
                    handled,
                    ..
                } => {
                    let v = [
                        Value::Int(sid),
                        Value::Int(host as i64 + 1),
                        Value::from(cpu),
                        Value::from(irq),
                        Value::Int(t),
                        Value::Int(duration.min(i64::MAX as u64) as i64),
                        Value::Int(handled as i64),
                    ];
                    let owner = Owner::Host(host as i64 + 1);
                    let cat = Category::Number(i64::from(irq));
                    rows.overview.add(owner, LANE_IRQ, t, t, cat);
                    rows.w.row(schema::IRQ, v).await?;
                }
                Event::Socket { .. } => {}
                _ => {}
            }
            for i in intervals_out.drain(..) {
                rows.interval(thread, i).await?;
            }
            for s in states_out.drain(..) {
                rows.state(thread, s).await?;
            }
        }
    }
    drop(replay);
    // Close what is open at each stream's end.
    let mut unmatched_exits = 0;
    let mut incomplete = 0;
    let mut too_deep = 0;
    for (s, st) in streams.iter_mut().enumerate() {
        let info = &scan.streams[s];
        let Some(end) = info.end() else { continue };
        let end = fits[info.process].map(end);
        let thread = s as i64 + 1;
        st.nesting.finish(end, &mut |i| intervals_out.push(i));
        st.timeline.finish(end, &mut |x| states_out.push(x));
        for i in intervals_out.drain(..) {
            rows.interval(thread, i).await?;
        }
        for x in states_out.drain(..) {
            rows.state(thread, x).await?;
        }
        unmatched_exits += st.nesting.unmatched_exits;
        incomplete += st.nesting.incomplete;
        too_deep += st.nesting.too_deep;
    }
    for ((host, cpu), (tid, since)) in std::mem::take(&mut on_cpu) {
        let end = t_range.map_or(since, |r| r.1.max(since));
        let thread = thread_by_tid.get(&(host, tid as u64)).copied();
        rows.sched(host, cpu, tid, thread, (since, end), Value::Null)
            .await?;
    }
    let overview = std::mem::replace(&mut rows.overview, Overview::new(0, 0));
    for v in overview.rows(sid) {
        writer.row(schema::OVERVIEW, v).await?;
    }
    if unmatched_exits > 0 {
        diags.push(warn(
            "unmatched-exit",
            None,
            unmatched_exits,
            format!("{unmatched_exits} exit events matched no open call and were dropped"),
        ));
    }
    if incomplete > 0 {
        diags.push(info("incomplete-interval", None, incomplete, format!("{incomplete} calls had no exit of their own (closed by an outer exit or the thread's end; complete = 0)")));
    }
    if too_deep > 0 {
        diags.push(warn(
            "too-deep",
            None,
            too_deep,
            format!(
                "{too_deep} calls nested deeper than {} were dropped",
                crate::intervals::MAX_DEPTH
            ),
        ));
    }
    if wakeups > 0 {
        diags.push(info(
            "wakeup",
            None,
            wakeups,
            format!("{wakeups} sched_wakeup events were counted, not stored"),
        ));
    }

    // Diagnostics and the session row.
    for (i, d) in diags.iter().enumerate() {
        let v = [
            Value::Int(sid),
            Value::Int(i as i64 + 1),
            Value::from(match d.severity {
                Severity::Info => "info",
                Severity::Warning => "warning",
            }),
            Value::from(d.kind),
            Value::from(d.process.map(|p| p as i64 + 1)),
            Value::from(d.count),
            Value::from(d.message.clone()),
        ];
        writer.row(schema::DIAGNOSTIC, v).await?;
    }
    writer.flush().await?;
    let counts: BTreeMap<String, u64> = writer
        .counts()
        .iter()
        .map(|(k, v)| ((*k).to_owned(), *v))
        .collect();
    let mut db = writer.finish().await?;
    if bulk {
        phase("indexing");
        db.indexes(true).await?;
    }
    let base = scan.base.unwrap_or(p5_wire::store::SegmentHeader {
        version: 0,
        server_run_id: 0,
        server_start_mono_ns: 0,
        server_start_wall_ns: 0,
        segment_index: 0,
        server_boot_id: [0; 16],
    });
    let merged_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64);
    let session_row = vec![
        Value::Int(sid),
        Value::from(dir.name.clone()),
        Value::from(store.to_owned()),
        Value::Int(merged_at),
        Value::from(base.server_run_id),
        Value::from(base.server_start_mono_ns),
        Value::Int(base.server_start_wall_ns),
        Value::from(t_range.map(|r| r.0)),
        Value::from(t_range.map(|r| r.1)),
        Value::from(scan.events),
        Value::from(scan.processes.len() as u64),
        Value::from(scan.streams.len() as u64),
        Value::from(matches.messages.len() as u64),
        Value::from(matches.matched),
        Value::from(violations),
        Value::from(diags.len() as u64),
    ];
    db.insert_session(session_row).await?;
    phase("done");
    progress.set_position(scan.bytes * 2);
    let summary = SessionSummary {
        name: dir.name.clone(),
        id: sid,
        clocks,
        streams: scan.streams.len() as u64,
        events: scan.events,
        messages: matches.messages.len() as u64,
        matched: matches.matched,
        unmatched_sends: matches.unmatched_sends,
        unmatched_recvs: matches.unmatched_recvs,
        violations_before,
        violations,
        diagnostics: diags,
        rows: counts,
        t_range,
    };
    Ok((db, summary))
}
