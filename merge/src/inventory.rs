//! The small tables of a merge: hosts, threads (streams), processes and their clock estimates,
//! source files, sensors and metrics — written before the messages and the second pass, which
//! refer to them.

use crate::error::Error;
use crate::manifest::Manifests;
use crate::session::{Diagnostic, Plan, ProcessClock};
use p5_tracedb::domain::{ClockSource, Runtime};
use p5_tracedb::{Writer, schema};
use p5_wire::StreamKind;
use p5_wire::hello::RuntimeKind;
use p5_wire::manifest::format_id;
use std::collections::HashMap;

/// What the later phases need from the small tables.
#[derive(Debug, Default)]
pub struct Inventory {
    /// Per process clocks (the summary's).
    pub clocks: Vec<ProcessClock>,
    /// (host index, OS tid) → `thread.id` of the first application thread with that tid.
    pub thread_by_tid: HashMap<(usize, u64), i64>,
    /// (process, key) → `metric.id`.
    pub metric_id: HashMap<(usize, u64), i64>,
    /// First and last stream time on the session base.
    pub t_range: Option<(i64, i64)>,
}

/// Writes the small tables.
pub async fn write(
    w: &mut Writer,
    sid: i64,
    plan: &Plan,
    manifests: &Manifests,
    diags: &mut Vec<Diagnostic>,
) -> Result<Inventory, Error> {
    let mut inv = Inventory::default();
    for (h, (boot, machine, hostname)) in plan.hosts.iter().enumerate() {
        let row = schema::Host {
            session_id: sid,
            id: h as i64 + 1,
            boot_id: boot.clone(),
            machine_id: machine.clone(),
            hostname: hostname.clone(),
        };
        w.row(row).await?;
    }
    let spans = threads(w, sid, plan, &mut inv, diags).await?;
    processes(w, sid, plan, &spans, &mut inv).await?;
    sensor_calls(w, sid, plan).await?;
    followed(w, sid, plan, &mut inv).await?;
    sources(w, sid, plan, manifests, diags).await?;
    metrics(w, sid, plan, manifests, &mut inv).await?;
    Ok(inv)
}

/// Call counts of throttled and count-only sensors (`sensor_calls`).
async fn sensor_calls(w: &mut Writer, sid: i64, plan: &Plan) -> Result<(), Error> {
    let big = |v: u64| v.min(i64::MAX as u64) as i64;
    for (&(p, sensor), c) in &plan.scan.throttled {
        w.row(schema::SensorCalls {
            session_id: sid,
            process_id: p as i64 + 1,
            sensor_id: sensor as i64,
            t_throttled: plan.fit(p).map(c.t),
            calls: big(c.calls),
            timed: big(c.timed),
            timed_ns: big(c.timed_ns),
            recorded: big(c.recorded),
            pinned: i64::from(c.pinned),
        })
        .await?;
    }
    Ok(())
}

/// Threads; returns each process's span on the base.
async fn threads(
    w: &mut Writer,
    sid: i64,
    plan: &Plan,
    inv: &mut Inventory,
    diags: &mut Vec<Diagnostic>,
) -> Result<Vec<Option<(i64, i64)>>, Error> {
    let scan = &plan.scan;
    let mut proc_span: Vec<Option<(i64, i64)>> = vec![None; scan.processes.len()];
    for (s, st) in scan.streams.iter().enumerate() {
        let f = plan.fit(st.process);
        let start = st.t_first.map(|t| f.map(t));
        let end = st.end().map(|t| f.map(t));
        if let (Some(a), Some(b)) = (start, end) {
            let span = &mut proc_span[st.process];
            *span = Some(span.map_or((a, b), |(x, y)| (x.min(a), y.max(b))));
            inv.t_range = Some(inv.t_range.map_or((a, b), |(x, y)| (x.min(a), y.max(b))));
        }
        if st.tid != 0 && st.kind == StreamKind::Thread as u8 {
            inv.thread_by_tid
                .entry((plan.proc_host[st.process], st.tid))
                .or_insert(s as i64 + 1);
        }
        if st.dropped > 0 {
            let msg = format!(
                "stream {} ({}) of process {} lost {} events to a full buffer",
                st.stream,
                st.name,
                format_id(scan.processes[st.process].identity.process_uid),
                st.dropped
            );
            diags.push(Diagnostic::warn(
                "dropped-events",
                Some(st.process),
                st.dropped,
                msg,
            ));
        }
        let row = schema::Thread {
            session_id: sid,
            id: s as i64 + 1,
            process_id: st.process as i64 + 1,
            stream: i64::from(st.stream),
            kind: st.kind_name(),
            tid: st.tid as i64,
            name: st.name.clone(),
            t_start: start,
            t_end: end,
            events: st.events as i64,
            dropped: st.dropped as i64,
        };
        w.row(row).await?;
        for &(from, to, events) in &st.drops {
            w.row(schema::DropRange {
                session_id: sid,
                thread_id: s as i64 + 1,
                t_start: f.map(from),
                t_end: f.map(to),
                events: events.min(i64::MAX as u64) as i64,
            })
            .await?;
        }
    }
    Ok(proc_span)
}

/// Processes and their clock estimates.
async fn processes(
    w: &mut Writer,
    sid: i64,
    plan: &Plan,
    spans: &[Option<(i64, i64)>],
    inv: &mut Inventory,
) -> Result<(), Error> {
    let sync = &plan.sync;
    for (p, pi) in plan.scan.processes.iter().enumerate() {
        let id = &pi.identity;
        let f = plan.fit(p);
        let row = schema::Process {
            session_id: sid,
            id: p as i64 + 1,
            host_id: plan.proc_host[p] as i64 + 1,
            uid: id.process_uid as i64,
            pid: i64::from(id.pid),
            ppid: i64::from(id.ppid),
            program: id.program.clone(),
            argv: serde_json::to_string(&id.argv).unwrap_or_default(),
            runtime: Runtime::from(RuntimeKind::from_u8(id.runtime)),
            clock: ClockSource::from_u8(id.clock),
            start_wall_ns: id.start_wall_ns,
            start_mono_ns: id.start_mono_ns as i64,
            t_start: spans[p].map_or(f.map(0), |s| s.0),
            t_end: spans[p].map(|s| s.1),
        };
        w.row(row).await?;
        let row = schema::ClockEstimate {
            session_id: sid,
            process_id: p as i64 + 1,
            domain: sync.domains[p].clone(),
            method: f.method.name(),
            offset_ns: f.map(0),
            drift_ppm: f.drift_ppm(),
            forward_samples: f.forward as i64,
            backward_samples: f.backward as i64,
            error_bound_ns: f.error_bound_ns,
            cosmos_min_ns: f.cosmos_min_ns,
            tighten_ns: sync.tighten_ns[p],
        };
        w.row(row).await?;
        inv.clocks.push(ProcessClock {
            uid: id.process_uid,
            pid: id.pid,
            program: id.program.clone(),
            hostname: id.hostname.clone(),
            domain: sync.domains[p].clone(),
            fit: *f,
            tighten_ns: sync.tighten_ns[p],
        });
    }
    Ok(())
}

/// Threads an OS monitor followed that no recorded stream stands for (children the program
/// started, uninstrumented processes, threads that recorded nothing): each gets a `thread`
/// row of kind `os-thread` named by its `comm`, under its recorded process when one has its
/// pid on that host, else under a `process` row of runtime `uninstrumented` (named by its
/// main thread), so its scheduling rows have a Gantt lane.
async fn followed(w: &mut Writer, sid: i64, plan: &Plan, inv: &mut Inventory) -> Result<(), Error> {
    let scan = &plan.scan;
    let mut by_pid: HashMap<(usize, u32), i64> = HashMap::new();
    for (p, pi) in scan.processes.iter().enumerate() {
        let runtime = Runtime::from(RuntimeKind::from_u8(pi.identity.runtime));
        if runtime.is_program() {
            by_pid.insert((plan.proc_host[p], pi.identity.pid), p as i64 + 1);
        }
    }
    let mut next_thread = scan.streams.len() as i64 + 1;
    let mut next_process = scan.processes.len() as i64 + 1;
    for (&(monitor, tid), task) in &scan.tasks {
        let host = plan.proc_host[monitor];
        if inv.thread_by_tid.contains_key(&(host, u64::from(tid))) {
            continue;
        }
        let t = plan.fit(monitor).map(task.t_first as i64);
        let process_id = match by_pid.get(&(host, task.pid)) {
            Some(&id) => id,
            None => {
                let id = next_process;
                next_process += 1;
                by_pid.insert((host, task.pid), id);
                let leader = scan.tasks.get(&(monitor, task.pid)).unwrap_or(task);
                let row = schema::Process {
                    session_id: sid,
                    id,
                    host_id: host as i64 + 1,
                    uid: 0,
                    pid: i64::from(task.pid),
                    ppid: 0,
                    program: leader.comm.clone(),
                    argv: "[]".to_owned(),
                    runtime: Runtime::Uninstrumented,
                    clock: ClockSource::Monotonic,
                    start_wall_ns: 0,
                    start_mono_ns: 0,
                    t_start: plan.fit(monitor).map(leader.t_first as i64),
                    t_end: None,
                };
                w.row(row).await?;
                id
            }
        };
        let id = next_thread;
        next_thread += 1;
        inv.thread_by_tid.insert((host, u64::from(tid)), id);
        let row = schema::Thread {
            session_id: sid,
            id,
            process_id,
            stream: -1,
            kind: "os-thread",
            tid: i64::from(tid),
            name: task.comm.clone(),
            t_start: Some(t),
            t_end: None,
            events: 0,
            dropped: 0,
        };
        w.row(row).await?;
    }
    Ok(())
}

/// Source files and sensors.
async fn sources(
    w: &mut Writer,
    sid: i64,
    plan: &Plan,
    manifests: &Manifests,
    diags: &mut Vec<Diagnostic>,
) -> Result<(), Error> {
    for (i, (_, f)) in manifests.files.iter().enumerate() {
        let text = manifests.source_text(i);
        if text.is_none() {
            let msg = format!(
                "no readable source copy for {} (sha256 {})",
                f.path, f.sha256
            );
            diags.push(Diagnostic::info("missing-source", None, 1, msg));
        }
        let row = schema::SourceFile {
            session_id: sid,
            id: i as i64 + 1,
            path: f.path.clone(),
            language: f.language.clone(),
            sha256: f.sha256.clone(),
            // A sensor table does not say how long its file is: the text does.
            lines: match (&text, f.lines) {
                (Some(t), 0) => t.lines().count() as i64,
                _ => i64::from(f.lines),
            },
            text,
        };
        w.row(row).await?;
    }
    let scan = &plan.scan;
    let mut unknown = 0u64;
    let mut sensor_ids: Vec<u64> = scan.sensors.iter().copied().filter(|&s| s != 0).collect();
    for id in manifests.sensors.keys() {
        if !scan.sensors.contains(id) {
            sensor_ids.push(*id);
        }
    }
    sensor_ids.sort_unstable();
    for id in sensor_ids {
        let hex = hex_id(id);
        let mut row = schema::Sensor {
            session_id: sid,
            id: id as i64,
            hex: hex.clone(),
            kind: None,
            language: None,
            file: None,
            source_file_id: None,
            function: None,
            name: hex,
            line: None,
            col: None,
            end_line: None,
            end_col: None,
        };
        match manifests.sensors.get(&id) {
            Some((s, file)) => {
                row.kind = Some(s.kind.clone());
                row.language = Some(s.language.clone());
                row.file = Some(s.file.clone());
                row.source_file_id = file.map(|f| f as i64 + 1);
                row.function = Some(s.function.clone());
                row.name = s.name.clone();
                row.line = Some(i64::from(s.line));
                row.col = Some(i64::from(s.column));
                row.end_line = Some(i64::from(s.end_line));
                row.end_col = Some(i64::from(s.end_column));
            }
            None => match p5_wire::RUNTIME_SENSORS.iter().find(|(s, _)| *s == id) {
                // A runtime's own sensor (a Python selector's select): named, no source.
                Some((_, name)) => {
                    row.kind = Some("comm".to_owned());
                    row.name = (*name).to_owned();
                }
                None => unknown += 1,
            },
        }
        w.row(row).await?;
    }
    if unknown > 0 {
        let why = if manifests.sensors.is_empty() {
            "the recording holds no sensor table and no manifest was given (--manifest DIR)"
        } else {
            "they are in no sensor table of the recording and no given manifest"
        };
        let msg = format!("{unknown} sensor ids have no source location: {why}");
        diags.push(Diagnostic::info("unknown-sensor", None, unknown, msg));
    }
    Ok(())
}

/// [`format_id`] without the formatting machinery (a recorded session may have a sensor per
/// interval, so this runs once per event there): `0x` and 16 lowercase hex digits.
fn hex_id(id: u64) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(18);
    s.push_str("0x");
    for i in (0..16).rev() {
        s.push(char::from(DIGITS[(id >> (4 * i)) as usize & 0xf]));
    }
    s
}

/// Metrics: host metrics named by `Names` frames, application counters by the manifest.
async fn metrics(
    w: &mut Writer,
    sid: i64,
    plan: &Plan,
    manifests: &Manifests,
    inv: &mut Inventory,
) -> Result<(), Error> {
    let scan = &plan.scan;
    let mut names: HashMap<(usize, u64), &p5_wire::data::Name> = HashMap::new();
    for (p, n) in &scan.names {
        names.insert((*p, n.id), n);
    }
    for (i, &(p, key, host)) in scan.counters.iter().enumerate() {
        let id = i as i64 + 1;
        inv.metric_id.insert((p, key), id);
        let (name, unit, scale) = match (host, names.get(&(p, key))) {
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
        let row = schema::Metric {
            session_id: sid,
            id,
            process_id: p as i64 + 1,
            host_id: plan.proc_host[p] as i64 + 1,
            kind: if host { "host" } else { "counter" },
            key: key as i64,
            name,
            unit,
            scale_exp: i64::from(scale),
        };
        w.row(row).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_id_is_format_id() {
        for id in [
            0,
            1,
            0xabc,
            u64::MAX,
            0x8000_0000_0000_0000,
            0x0123_4567_89ab_cdef,
        ] {
            assert_eq!(hex_id(id), format_id(id));
        }
    }
}
