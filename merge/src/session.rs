//! Merging one session: scan, synchronize clocks, match messages, then stream the rows.
//!
//! Order of work, one function per phase: [`crate::load::scan`] (first pass, `scan`) →
//! matching ([`crate::matching`]) and the clock domains, fits, refinement and tightening with
//! the matched messages ([`crate::domain`], [`crate::clock`]) (`synchronize`) → the session's
//! old rows are deleted (`prepare`) → the small tables ([`crate::inventory`]) → messages and
//! connections ([`crate::messages`]) → [`crate::replay`] (second pass: intervals, states,
//! marks, metric samples, scheduling intervals, IRQs, the overview) → diagnostics and the
//! session row (`session_row`). Everything goes into one transaction. When the session is alone
//! in the database its tables are emptied and the indexes dropped during the load and built
//! afterwards (a bulk load; much faster than maintaining them row by row). Rows are written
//! as `p5_tracedb::schema` structs through a `p5_tracedb::Writer`.

use crate::clock::{Fit, Method};
use crate::error::Error;
use crate::load::{self, Scan};
use crate::manifest::Manifests;
use crate::matching::{self, Matches};
use crate::progress::Progress;
use crate::{coalesce, domain, inventory, messages, replay};
use p5_logserver::reader::SessionDir;
use p5_tracedb::schema;
use p5_tracedb::{Db, Writer};
use p5_wire::manifest::format_id;
use std::collections::BTreeMap;

/// Severity of a diagnostic (the names stored in `diagnostic.severity`).
pub use p5_tracedb::domain::Severity;

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

impl Diagnostic {
    /// A warning: something was lost or guessed.
    pub fn warn(kind: &'static str, process: Option<usize>, count: u64, message: String) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            kind,
            process,
            count,
            message,
        }
    }

    /// Worth knowing.
    pub fn info(kind: &'static str, process: Option<usize>, count: u64, message: String) -> Self {
        Diagnostic {
            severity: Severity::Info,
            kind,
            process,
            count,
            message,
        }
    }
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
    /// Connections.
    pub connections: u64,
    /// Sends nobody received.
    pub unmatched_sends: u64,
    /// Receives no send accounts for.
    pub unmatched_recvs: u64,
    /// Sends (or receives) stored as further pieces of the message before them.
    pub folded: u64,
    /// Communication calls on descriptors no socket description names: not matchable.
    pub undescribed: u64,
    /// Events the runtimes lost to full buffers, and in how many threads.
    pub dropped: (u64, u64),
    /// Scope sensors throttled by the runtime or pinned count-only (table `sensor_calls`),
    /// most calls first.
    pub throttled: Vec<ThrottledSensor>,
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

/// What the first pass, matching and clock synchronization found: everything the writing
/// phases need.
#[derive(Debug)]
pub struct Plan {
    /// The first pass.
    pub scan: Scan,
    /// Host key → row per process (0-based host index).
    pub proc_host: Vec<usize>,
    /// Hosts: (boot id or key, machine id, host name).
    pub hosts: Vec<(String, String, String)>,
    /// Matched messages and connections.
    pub matches: Matches,
    /// Clocks.
    pub sync: domain::Synchronized,
}

impl Plan {
    /// The fit of process `p`.
    pub fn fit(&self, p: usize) -> &Fit {
        &self.sync.fits[p]
    }
}

/// Merges one session into `db` (inside the caller's transaction).
pub async fn merge(
    db: Db,
    store: &str,
    dir: &SessionDir,
    manifests: &Manifests,
    progress: &dyn Progress,
) -> Result<(Db, SessionSummary), Error> {
    let started = std::time::Instant::now();
    let phase = |what: &str| {
        let ms = started.elapsed().as_millis() as u64;
        tracing::debug!(session = %dir.name, elapsed_ms = ms, "merge: {what}");
        progress.phase(&dir.name, what);
    };
    phase("scanning");
    let (scan, mut diags) = scan(dir, progress)?;
    phase("matching");
    let mut plan = synchronize(scan, &mut diags);
    // Names and locations: the given manifests first, then the tables the processes sent.
    let manifests = if plan.scan.tables.is_empty() {
        std::borrow::Cow::Borrowed(manifests)
    } else {
        std::borrow::Cow::Owned(manifests.with_tables(&plan.scan.tables))
    };
    let manifests = manifests.as_ref();
    let (mut db, sid, bulk) = prepare(db, &dir.name).await?;
    let mut writer = Writer::new(db);
    phase("writing");
    let inv = inventory::write(&mut writer, sid, &plan, manifests, &mut diags).await?;
    let violations = messages::write(&mut writer, sid, &plan, &mut diags).await?;
    // Every socket call was kept for matching and the message rows; the second pass does
    // not read them, so a communication-heavy session's peak falls by their size.
    plan.scan.calls = Vec::new();
    phase("events");
    replay::replay(&mut writer, sid, dir, &plan, &inv, progress, &mut diags).await?;
    for (i, d) in diags.iter().enumerate() {
        writer.row(diagnostic_row(sid, i, d)).await?;
    }
    writer.flush().await?;
    let counts: BTreeMap<String, u64> = writer
        .counts()
        .iter()
        .map(|(k, v)| ((*k).to_owned(), *v))
        .collect();
    phase("finishing");
    db = writer.finish().await?;
    if bulk {
        phase("indexing");
        db.indexes(true).await?;
    }
    let row = session_row(
        sid,
        &dir.name,
        store,
        &plan,
        inv.t_range,
        violations,
        diags.len(),
    );
    phase("session row");
    db.insert_session(row).await?;
    phase("done");
    progress.position(plan.scan.bytes * 2);
    let m = &plan.matches;
    let summary = SessionSummary {
        name: dir.name.clone(),
        id: sid,
        clocks: inv.clocks,
        streams: plan.scan.streams.len() as u64,
        events: plan.scan.events,
        messages: m.messages.len() as u64,
        matched: m.matched,
        connections: m.connections.len() as u64,
        unmatched_sends: m.unmatched_sends,
        unmatched_recvs: m.unmatched_recvs,
        folded: m.folded,
        undescribed: m.undescribed,
        dropped: plan
            .scan
            .streams
            .iter()
            .filter(|s| s.dropped > 0)
            .fold((0, 0), |(n, k), s| (n + s.dropped, k + 1)),
        throttled: throttled(&plan, manifests, inv.t_range.map(|r| r.0)),
        violations_before: plan.sync.violations_before,
        violations,
        diagnostics: diags,
        rows: counts,
        t_range: inv.t_range,
    };
    Ok((db, summary))
}

/// A throttled (or count-only) sensor for the summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThrottledSensor {
    /// The manifest's name of the sensor (`file:function`), or its hex id.
    pub name: String,
    /// Calls in all, summed over processes.
    pub calls: u64,
    /// Long calls still recorded while throttled.
    pub recorded: u64,
    /// When it was first throttled, ns after the session's first event.
    pub after_ns: i64,
    /// Pinned count-only by the selection file.
    pub pinned: bool,
}

/// The summary's view of `sensor_calls`: one entry per sensor, most calls first.
fn throttled(plan: &Plan, manifests: &Manifests, t0: Option<i64>) -> Vec<ThrottledSensor> {
    let mut by: BTreeMap<u64, ThrottledSensor> = BTreeMap::new();
    for (&(p, sensor), c) in &plan.scan.throttled {
        let t = plan.fit(p).map(c.t) - t0.unwrap_or(0);
        let e = by.entry(sensor).or_insert_with(|| ThrottledSensor {
            name: manifests.sensors.get(&sensor).map_or_else(
                || p5_wire::manifest::format_id(sensor),
                |(s, _)| format!("{}:{}", s.file, s.function),
            ),
            calls: 0,
            recorded: 0,
            after_ns: t,
            pinned: c.pinned,
        });
        e.calls += c.calls;
        e.recorded += c.recorded;
        e.after_ns = e.after_ns.min(t);
    }
    let mut v: Vec<ThrottledSensor> = by.into_values().collect();
    v.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.name.cmp(&b.name)));
    v
}

/// The first pass, with the diagnostics of what it found damaged or unknown.
fn scan(dir: &SessionDir, progress: &dyn Progress) -> Result<(Scan, Vec<Diagnostic>), Error> {
    progress.position(0);
    let total: u64 = dir.segments()?.iter().map(|s| s.len).sum();
    progress.length(total.max(1) * 2);
    let scan = load::scan(dir, |b| progress.position(b))?;
    progress.length(scan.bytes.max(1) * 2);
    let mut diags = Vec::new();
    for f in &scan.faults {
        diags.push(Diagnostic::warn("store-damage", None, 1, f.to_string()));
    }
    let n = scan.bad_frames;
    if n > 0 {
        let msg = format!("{n} data frames did not decode and were skipped");
        diags.push(Diagnostic::warn("bad-frame", None, n, msg));
    }
    let n = scan.bad_batches;
    if n > 0 {
        let msg = format!(
            "{n} event batches stopped decoding part-way; the events before the damage are kept"
        );
        diags.push(Diagnostic::warn("bad-events", None, n, msg));
    }
    let n = scan.duplicate_frames;
    if n > 0 {
        let msg =
            format!("{n} data frames were stored twice (a copied segment?); each was counted once");
        diags.push(Diagnostic::info("duplicate-frame", None, n, msg));
    }
    let n = scan.unknown_frames;
    if n > 0 {
        let msg = format!("{n} data frames of unknown types were skipped");
        diags.push(Diagnostic::info("unknown-frame", None, n, msg));
    }
    Ok((scan, diags))
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

/// Hosts, matching and clocks.
fn synchronize(scan: Scan, diags: &mut Vec<Diagnostic>) -> Plan {
    let mut host_index: BTreeMap<String, usize> = BTreeMap::new();
    let mut hosts: Vec<(String, String, String)> = Vec::new();
    let mut proc_host = Vec::with_capacity(scan.processes.len());
    for p in &scan.processes {
        let key = host_key(&p.identity);
        let h = *host_index.entry(key.clone()).or_insert_with(|| {
            hosts.push((key, p.identity.host_id.clone(), p.identity.hostname.clone()));
            hosts.len() - 1
        });
        proc_host.push(h);
    }
    let mut matches = matching::match_calls(&scan.sockets, &scan.calls);
    // Clocks from every piece (each bounds the offset); the rows from whole messages.
    let sync = domain::synchronize(&scan, &proc_host, &matches);
    coalesce::coalesce(&mut matches, &scan.calls);
    for (p, pi) in scan.processes.iter().enumerate() {
        let uid = format_id(pi.identity.process_uid);
        if sync.fits[p].method == Method::None {
            let why = if pi.untimed_frames > 0 {
                "was imported from a spool file (no receipt times)"
            } else {
                "has no clock samples"
            };
            let msg = format!(
                "process {uid} (pid {}) {why}: its times stay relative to its own start unless \
                 messages move them",
                pi.identity.pid
            );
            diags.push(Diagnostic::warn("no-clock-samples", Some(p), 1, msg));
        }
        if !pi.hello_seen {
            let msg = format!(
                "data from process {uid} whose handshake is not in the store (damaged or \
                 missing segment)"
            );
            diags.push(Diagnostic::warn("unknown-process", Some(p), 1, msg));
        }
    }
    let n = matches.undescribed;
    if n > 0 {
        let msg = format!(
            "{n} communication calls on descriptors without a socket description cannot be \
             matched"
        );
        diags.push(Diagnostic::info("undescribed-socket", None, n, msg));
    }
    let (s, r) = (matches.unmatched_sends, matches.unmatched_recvs);
    if s + r > 0 {
        let msg = format!(
            "{s} sends and {r} receives have no recorded other end (peer not instrumented, \
             events dropped, or still in flight)"
        );
        diags.push(Diagnostic::info("unmatched-message", None, s + r, msg));
    }
    Plan {
        scan,
        proc_host,
        hosts,
        matches,
        sync,
    }
}

/// Deletes the session's old rows (everything keyed by it) and returns the connection, its
/// id and whether this is a bulk load (alone in the database: indexes dropped until the end).
async fn prepare(mut db: Db, name: &str) -> Result<(Db, i64, bool), Error> {
    let bulk = db.alone(name).await?;
    let sid = db.replace_session(name, bulk).await?;
    if bulk {
        db.indexes(false).await?;
    }
    Ok((db, sid, bulk))
}

fn diagnostic_row(sid: i64, i: usize, d: &Diagnostic) -> schema::Diagnostic {
    schema::Diagnostic {
        session_id: sid,
        id: i as i64 + 1,
        severity: d.severity,
        kind: d.kind,
        process_id: d.process.map(|p| p as i64 + 1),
        count: d.count as i64,
        message: d.message.clone(),
    }
}

fn session_row(
    sid: i64,
    name: &str,
    store: &str,
    plan: &Plan,
    t_range: Option<(i64, i64)>,
    violations: u64,
    diagnostics: usize,
) -> schema::Session {
    let base = plan.scan.base.unwrap_or(p5_wire::store::SegmentHeader {
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
    let m = &plan.matches;
    schema::Session {
        id: sid,
        name: name.to_owned(),
        store: store.to_owned(),
        merged_at_wall_ns: merged_at,
        base_run_id: base.server_run_id as i64,
        base_mono_ns: base.server_start_mono_ns as i64,
        base_wall_ns: base.server_start_wall_ns,
        t_min: t_range.map(|r| r.0),
        t_max: t_range.map(|r| r.1),
        events: plan.scan.events as i64,
        processes: plan.scan.processes.len() as i64,
        threads: plan.scan.streams.len() as i64,
        messages: m.messages.len() as i64,
        matched: m.matched as i64,
        violations: violations as i64,
        diagnostics: diagnostics as i64,
    }
}
