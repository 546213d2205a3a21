//! The in-memory index of one session: every Gantt lane as a [`Lane`], the matched messages,
//! the host load series and per-sensor accumulators, built once from SQL on first use (or at
//! start-up, in the background) and shared by every request.
//!
//! Why in memory: a pan or zoom must answer in ≤ 50 ms however many events the session holds;
//! SQL range scans over millions of rows cannot, while binary searches over sorted columns in
//! memory do it in microseconds per lane (see `lod`). Loading is one ordered scan per table.

use crate::error::ApiError;
use crate::lod::Lane;
use crate::snapshot::{self, Snapshots};
use p5_tracedb::read::{
    self as query, Host, MessageRow, Process, Reader as Db, Sensor, Session, Thread,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::OnceCell;

/// State names in category order (the Gantt colour index): the database's own list.
pub const STATES: &[&str] = p5_tracedb::domain::ThreadState::NAMES;

/// One session, or a 404.
pub async fn session(db: &Db, sid: i64) -> Result<Session, ApiError> {
    query::session(db, sid)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no session {sid}")))
}

/// Lanes beyond this nesting depth are dropped (and counted).
const MAX_LANES: usize = 128;

/// One thread's Gantt lanes.
#[derive(Debug, Default)]
pub struct ThreadLanes {
    /// States, category = index into [`STATES`] (unknown states: `STATES.len()`).
    pub states: Lane,
    /// Intervals by nesting level, category = sensor index.
    pub levels: Vec<Lane>,
    /// Scheduling: when the thread had a CPU, category = CPU number.
    pub sched: Lane,
}

/// A host load series: `(t, value)` in display units.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Series {
    /// `cpu`, `net_rx`, `net_tx`, `mem`, `load`.
    pub name: String,
    /// Unit shown on the axis.
    pub unit: String,
    /// Points by time.
    pub points: Vec<(i64, f64)>,
    /// For the network rates: the interfaces whose traffic the sum holds (those that carried
    /// any, `lo` included), by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<String>,
}

/// Per-sensor accumulators (filled while loading).
#[derive(Debug, Default, Clone, Copy)]
pub struct SensorTotals {
    /// Intervals.
    pub count: u64,
    /// Total duration.
    pub total: i64,
    /// Total self time.
    pub self_ns: i64,
}

/// The part of an index built from the big tables (what a snapshot stores).
#[derive(Debug)]
pub struct Detail {
    /// Lanes by thread id.
    pub lanes: HashMap<i64, ThreadLanes>,
    /// IRQ lanes by host id.
    pub irqs: HashMap<i64, Lane>,
    /// Messages by send time.
    pub messages: Vec<MessageRow>,
    /// Largest latency.
    pub max_latency: i64,
    /// Per-sensor totals.
    pub totals: Vec<SensorTotals>,
    /// Nesting tree edges.
    pub tree: HashMap<(u32, u32), (u64, i64)>,
    /// Intervals that could not be placed.
    pub dropped_intervals: u64,
}

/// What the index is built from.
struct Rows {
    session: Session,
    hosts: Vec<Host>,
    processes: Vec<Process>,
    threads: Vec<Thread>,
    sensors: Vec<Sensor>,
    intervals: Vec<query::IntervalRow>,
    states: Vec<query::StateRow>,
    sched: Vec<query::SchedRow>,
    irqs: Vec<query::IrqRow>,
    messages: Vec<query::MatchedMessage>,
    series: HashMap<i64, Vec<Series>>,
}

/// The small tables of a session, read by both the index and the preview.
struct Head {
    session: Session,
    hosts: Vec<Host>,
    processes: Vec<Process>,
    threads: Vec<Thread>,
    sensors: Vec<Sensor>,
    series: HashMap<i64, Vec<Series>>,
}

impl Head {
    async fn load(db: &Db, sid: i64) -> Result<Head, ApiError> {
        let session = session(db, sid).await?;
        let (hosts, processes, threads, sensors) = tokio::try_join!(
            query::hosts(db, sid),
            query::processes(db, sid),
            query::threads(db, sid),
            query::sensors(db, sid),
        )?;
        let series = load_series(db, sid).await?;
        Ok(Head {
            session,
            hosts,
            processes,
            threads,
            sensors,
            series,
        })
    }
}

/// Everything the viewer needs of one session.
#[derive(Debug)]
pub struct SessionIndex {
    /// The session row.
    pub session: Session,
    /// Hosts.
    pub hosts: Vec<Host>,
    /// Processes, in display order.
    pub processes: Vec<Process>,
    /// Threads.
    pub threads: Vec<Thread>,
    /// Sensors; a sensor's position here is its compact index.
    pub sensors: Vec<Sensor>,
    /// Sensor id → index.
    pub sensor_index: HashMap<i64, u32>,
    /// Lanes by thread id.
    pub lanes: HashMap<i64, ThreadLanes>,
    /// IRQ instants by host id, category = IRQ number.
    pub irqs: HashMap<i64, Lane>,
    /// Matched messages by send time.
    pub messages: Vec<MessageRow>,
    /// Largest `recv_t - send_t` (bounds the message window search).
    pub max_latency: i64,
    /// Host load series by host id.
    pub series: HashMap<i64, Vec<Series>>,
    /// Per-sensor totals, by sensor index.
    pub totals: Vec<SensorTotals>,
    /// Nesting tree edges: (parent sensor index or `u32::MAX` for roots, child) → (count, total).
    pub tree: HashMap<(u32, u32), (u64, i64)>,
    /// Intervals that could not be placed (overlaps deeper than the lane limit).
    pub dropped_intervals: u64,
    /// Statistics, computed on first request.
    pub stats: OnceLock<serde_json::Value>,
    /// True for a preview made from the session overview while the index is being built:
    /// lanes hold buckets of spans, there are no messages, totals or nesting tree.
    pub preview: bool,
}

impl SessionIndex {
    /// Loads a session's index: from its snapshot in `snapshots` when there is a usable one,
    /// else from the database (and then writes the snapshot).
    pub async fn load(
        db: &Db,
        sid: i64,
        snapshots: Option<&Snapshots>,
    ) -> Result<SessionIndex, ApiError> {
        let Head {
            session,
            hosts,
            processes,
            threads,
            sensors,
            series,
        } = Head::load(db, sid).await?;
        let path = snapshots.map(|s| s.path(&session));
        let pruner = snapshots.cloned();
        if let Some(p) = &path
            && let Ok(bytes) = tokio::fs::read(p).await
        {
            let n = sensors.len();
            let detail = tokio::task::spawn_blocking(move || snapshot::decode(&bytes, n)).await;
            if let Ok(Some(d)) = detail {
                let sensor_index = sensor_index(&sensors);
                return Ok(SessionIndex {
                    session,
                    hosts,
                    processes,
                    threads,
                    sensors,
                    sensor_index,
                    lanes: d.lanes,
                    irqs: d.irqs,
                    messages: d.messages,
                    max_latency: d.max_latency,
                    series,
                    totals: d.totals,
                    tree: d.tree,
                    dropped_intervals: d.dropped_intervals,
                    stats: OnceLock::new(),
                    preview: false,
                });
            }
            tracing::warn!("index snapshot {} is unusable: rebuilding it", p.display());
        }
        // The big tables load concurrently (each SQLite connection has its own thread).
        let (intervals, states, sched, irq_rows, msgs) = tokio::try_join!(
            query::intervals(db, sid),
            query::states(db, sid, STATES),
            query::sched(db, sid),
            query::irqs(db, sid),
            query::messages(db, sid),
        )?;
        let rows = Rows {
            session,
            hosts,
            processes,
            threads,
            sensors,
            intervals,
            states,
            sched,
            irqs: irq_rows,
            messages: msgs,
            series,
        };
        // Sorting, lane building and the snapshot are CPU and file work: off the async workers.
        tokio::task::spawn_blocking(move || {
            let ix = SessionIndex::build(rows);
            if let (Some(p), Some(snaps)) = (path, pruner) {
                match snapshot::write(&ix, &p) {
                    Ok(()) => snaps.prune(ix.session.id, &p),
                    Err(e) => tracing::warn!("cannot write index snapshot {}: {e}", p.display()),
                }
            }
            ix
        })
        .await
        .map_err(|e| ApiError::Internal(format!("building the session index failed: {e}")))
    }

    /// Builds the index from the rows.
    fn build(rows: Rows) -> SessionIndex {
        let Rows {
            session,
            hosts,
            processes,
            threads,
            sensors,
            mut intervals,
            mut states,
            mut sched,
            irqs: mut irq_rows,
            messages: msgs,
            series,
        } = rows;
        intervals.sort_unstable_by_key(|r| (r.thread, r.t_start, r.depth));
        states.sort_unstable_by_key(|r| (r.thread, r.t_start));
        sched.sort_unstable_by_key(|r| (r.thread, r.t_start));
        irq_rows.sort_unstable_by_key(|r| (r.host, r.t));
        let sensor_index = sensor_index(&sensors);
        let mut totals = vec![SensorTotals::default(); sensors.len()];
        let mut tree: HashMap<(u32, u32), (u64, i64)> = HashMap::new();
        let mut lanes: HashMap<i64, ThreadLanes> = HashMap::new();
        let mut dropped_intervals = 0u64;

        // Enclosing intervals of the current thread: (end, sensor index).
        let mut stack: Vec<(i64, u32)> = Vec::new();
        let mut cur_thread = None;
        for iv in &intervals {
            if cur_thread != Some(iv.thread) {
                stack.clear();
                cur_thread = Some(iv.thread);
            }
            let Some(&si) = sensor_index.get(&iv.sensor) else {
                dropped_intervals += 1;
                continue;
            };
            let tl = lanes.entry(iv.thread).or_default();
            let mut level = usize::try_from(iv.depth).unwrap_or(0);
            while level < MAX_LANES {
                if tl.levels.len() <= level {
                    tl.levels.resize_with(level + 1, Lane::default);
                }
                if tl.levels[level].push(iv.t_start, iv.t_end, si) {
                    break;
                }
                level += 1;
            }
            if level >= MAX_LANES {
                dropped_intervals += 1;
                continue;
            }
            let t = &mut totals[si as usize];
            let d = iv.t_end.saturating_sub(iv.t_start);
            t.count += 1;
            t.total = t.total.saturating_add(d);
            t.self_ns = t.self_ns.saturating_add(iv.self_ns);
            while stack.last().is_some_and(|&(end, _)| end <= iv.t_start) {
                stack.pop();
            }
            let parent = stack.last().map_or(u32::MAX, |&(_, s)| s);
            let e = tree.entry((parent, si)).or_default();
            e.0 += 1;
            e.1 = e.1.saturating_add(d);
            stack.push((iv.t_end, si));
        }
        drop(intervals);

        for st in &states {
            let cat = st.state;
            lanes
                .entry(st.thread)
                .or_default()
                .states
                .push(st.t_start, st.t_end, cat);
        }
        for s in sched {
            let cpu = u32::try_from(s.cpu).unwrap_or(u32::MAX);
            lanes
                .entry(s.thread)
                .or_default()
                .sched
                .push(s.t_start, s.t_end, cpu);
        }
        let mut irqs: HashMap<i64, Lane> = HashMap::new();
        for q in irq_rows {
            let n = u32::try_from(q.irq).unwrap_or(u32::MAX);
            irqs.entry(q.host).or_default().push(q.t, q.t, n);
        }

        let mut max_latency = 0;
        let mut messages: Vec<MessageRow> = msgs
            .into_iter()
            .map(|m| {
                max_latency = i64::max(max_latency, m.recv_t.saturating_sub(m.send_t));
                MessageRow {
                    id: m.id,
                    bytes: m.bytes,
                    send_thread: m.send_thread,
                    send_t: m.send_t,
                    recv_thread: m.recv_thread,
                    recv_t: m.recv_t,
                    violation: m.violation,
                    send_sensor: m.send_sensor.and_then(|x| sensor_index.get(&x).copied()),
                    recv_sensor: m.recv_sensor.and_then(|x| sensor_index.get(&x).copied()),
                }
            })
            .collect();
        messages.sort_unstable_by_key(|m| (m.send_t, m.id));
        SessionIndex {
            session,
            hosts,
            processes,
            threads,
            sensors,
            sensor_index,
            lanes,
            irqs,
            messages,
            max_latency,
            series,
            totals,
            tree,
            dropped_intervals,
            stats: OnceLock::new(),
            preview: false,
        }
    }

    /// A preview of the session from its overview (the buckets the merge wrote), or `None`
    /// when the database holds no overview for it. Reads a few thousand rows where the index
    /// reads millions: what the viewer shows while [`SessionIndex::load`] runs.
    pub async fn preview(db: &Db, sid: i64) -> Result<Option<SessionIndex>, ApiError> {
        let buckets = query::overview(db, sid, STATES).await?;
        if buckets.is_empty() {
            return Ok(None);
        }
        let Head {
            session,
            hosts,
            processes,
            threads,
            sensors,
            series,
        } = Head::load(db, sid).await?;
        let sensor_index = sensor_index(&sensors);
        let mut lanes: HashMap<i64, ThreadLanes> = HashMap::new();
        let mut irqs: HashMap<i64, Lane> = HashMap::new();
        for b in &buckets {
            let cat = |c: Option<i64>| u32::try_from(c.unwrap_or(-1)).unwrap_or(u32::MAX);
            let count = u64::try_from(b.spans).unwrap_or(1);
            let lane = match (b.thread, b.host, b.lane) {
                (None, Some(h), -2) => Some((irqs.entry(h).or_default(), cat(b.category))),
                (Some(t), _, lane) => {
                    let tl = lanes.entry(t).or_default();
                    match lane {
                        0 => Some((&mut tl.states, b.state)),
                        -1 => Some((&mut tl.sched, cat(b.category))),
                        d if (1..=MAX_LANES as i64).contains(&d) => {
                            let si = b.category.and_then(|c| sensor_index.get(&c).copied());
                            let level = d as usize - 1;
                            if tl.levels.len() <= level {
                                tl.levels.resize_with(level + 1, Lane::default);
                            }
                            si.map(|si| (&mut tl.levels[level], si))
                        }
                        _ => None,
                    }
                }
                _ => None,
            };
            if let Some((lane, cat)) = lane {
                lane.push_group(b.t_start, b.t_end, cat, count, b.covered);
            }
        }
        Ok(Some(SessionIndex {
            session,
            hosts,
            processes,
            threads,
            totals: vec![SensorTotals::default(); sensors.len()],
            sensors,
            sensor_index,
            lanes,
            irqs,
            messages: Vec::new(),
            max_latency: 0,
            series,
            tree: HashMap::new(),
            dropped_intervals: 0,
            stats: OnceLock::new(),
            preview: true,
        }))
    }

    /// A thread's label: `program[pid] thread` (its name alone without its process).
    pub fn thread_label(&self, th: i64) -> String {
        let Some(t) = self.threads.iter().find(|t| t.id == th) else {
            return format!("thread {th}");
        };
        match self.processes.iter().find(|p| p.id == t.process_id) {
            Some(p) => format!("{}[{}] {}", p.program, p.pid, t.name),
            None => t.name.clone(),
        }
    }

    /// The window the session covers (`[0, 1)` when empty).
    pub fn span(&self) -> (i64, i64) {
        let t0 = self.session.t_min.unwrap_or(0);
        let t1 = self.session.t_max.unwrap_or(t0).max(t0 + 1);
        (t0, t1)
    }
}

/// Sensor id → position in `sensors`.
fn sensor_index(sensors: &[Sensor]) -> HashMap<i64, u32> {
    sensors
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id, i as u32))
        .collect()
}

/// The host load series: CPU busy %, memory used %, 1-minute load, network receive and
/// transmit rates (bytes/s, summed over the interfaces that carried traffic, loopback
/// included: the programs p5 records often talk over `lo`).
async fn load_series(db: &Db, sid: i64) -> Result<HashMap<i64, Vec<Series>>, ApiError> {
    let mut out: HashMap<i64, Vec<Series>> = HashMap::new();
    let metrics = query::host_metrics(db, sid).await?;
    // Per host: rx/tx cumulative series to turn into rates.
    // (host, direction) → (interface, cumulative bytes) per interface.
    type Points = Vec<(i64, f64)>;
    let mut net: HashMap<(i64, &'static str), Vec<(String, Points)>> = HashMap::new();
    let mut mem_total: HashMap<i64, f64> = HashMap::new();
    let mut mem_used: HashMap<i64, Vec<(i64, f64)>> = HashMap::new();
    for m in &metrics {
        let kind = classify(&m.name);
        let Some(kind) = kind else { continue };
        let scale = 10f64.powi(m.scale_exp.clamp(-18, 18) as i32);
        let pts: Vec<(i64, f64)> = query::metric_samples(db, sid, m.id)
            .await?
            .into_iter()
            .map(|(t, v)| (t, v as f64 * scale))
            .collect();
        match kind {
            "cpu" => out.entry(m.host_id).or_default().push(Series {
                name: "cpu".into(),
                unit: "%".into(),
                points: pts,
                interfaces: Vec::new(),
            }),
            "load" => out.entry(m.host_id).or_default().push(Series {
                name: "load".into(),
                unit: String::new(),
                points: pts,
                interfaces: Vec::new(),
            }),
            "mem.total" => {
                if let Some(&(_, v)) = pts.last() {
                    mem_total.insert(m.host_id, v);
                }
            }
            "mem.used" => {
                mem_used.insert(m.host_id, pts);
            }
            dir => {
                let iface = m.name.split('.').nth(1).unwrap_or_default().to_owned();
                net.entry((m.host_id, dir)).or_default().push((iface, pts));
            }
        }
    }
    for (host, pts) in mem_used {
        if let Some(&total) = mem_total.get(&host).filter(|t| **t > 0.0) {
            out.entry(host).or_default().push(Series {
                name: "mem".into(),
                unit: "%".into(),
                points: pts.iter().map(|&(t, v)| (t, 100.0 * v / total)).collect(),
                interfaces: Vec::new(),
            });
        }
    }
    let mut keys: Vec<_> = net.keys().copied().collect();
    keys.sort();
    for key in keys {
        let mut sum: Vec<(i64, f64)> = Vec::new();
        let mut interfaces = Vec::new();
        let mut ifaces: Vec<&(String, Points)> = net[&key].iter().collect();
        ifaces.sort_by(|a, b| a.0.cmp(&b.0));
        for (iface, pts) in ifaces {
            let rate: Vec<(i64, f64)> = pts
                .windows(2)
                .filter_map(|w| {
                    let dt = w[1].0.saturating_sub(w[0].0) as f64 / 1e9;
                    (dt > 0.0 && w[1].1 >= w[0].1).then(|| (w[1].0, (w[1].1 - w[0].1) / dt))
                })
                .collect();
            if rate.iter().any(|p| p.1 > 0.0) {
                interfaces.push(iface.clone());
            }
            if sum.is_empty() {
                sum = rate;
            } else {
                // Interfaces are sampled together: add by position when the times agree.
                for (acc, (t, v)) in sum.iter_mut().zip(rate) {
                    if acc.0 == t {
                        acc.1 += v;
                    }
                }
            }
        }
        out.entry(key.0).or_default().push(Series {
            name: key.1.into(),
            unit: "B/s".into(),
            points: sum,
            interfaces,
        });
    }
    for v in out.values_mut() {
        v.sort_by(|a, b| a.name.cmp(&b.name));
    }
    Ok(out)
}

/// Which derived series a host metric feeds, if any.
fn classify(name: &str) -> Option<&'static str> {
    match name {
        "cpu.total.busy" => Some("cpu"),
        "load.1" => Some("load"),
        "mem.total" => Some("mem.total"),
        "mem.used" => Some("mem.used"),
        n if n.starts_with("net.") => {
            if n.ends_with(".rx_bytes_total") {
                Some("net_rx")
            } else if n.ends_with(".tx_bytes_total") {
                Some("net_tx")
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Sessions with fewer events are indexed before the first answer (in well under a second);
/// larger ones are answered from their preview while the index builds.
pub const PREVIEW_MIN_EVENTS: u64 = 200_000;

/// How often a session's row is checked for a new merge while its index is cached.
const RECHECK: Duration = Duration::from_secs(1);

/// One session's index and preview.
#[derive(Debug, Default)]
struct Entry {
    full: Arc<OnceCell<Arc<SessionIndex>>>,
    preview: OnceCell<Option<Arc<SessionIndex>>>,
    checked: Mutex<Option<Instant>>,
}

impl Entry {
    /// `merged_at_wall_ns` of the session this entry was loaded from, if loaded.
    fn merged_at(&self) -> Option<i64> {
        let full = self.full.get().map(|i| i.session.merged_at_wall_ns);
        full.or_else(|| {
            let p = self.preview.get()?.as_ref()?;
            Some(p.session.merged_at_wall_ns)
        })
    }

    /// True at most once per [`RECHECK`].
    fn check_due(&self) -> bool {
        let mut c = self.checked.lock().unwrap_or_else(|p| p.into_inner());
        let due = c.is_none_or(|t| t.elapsed() >= RECHECK);
        if due {
            *c = Some(Instant::now());
        }
        due
    }
}

/// Session indexes, built once per session and shared; rebuilt when a session is merged
/// again while the viewer runs.
#[derive(Debug)]
pub struct Cache {
    entries: Mutex<HashMap<i64, Arc<Entry>>>,
    snapshots: Option<Snapshots>,
    /// [`PREVIEW_MIN_EVENTS`] (tests set 0 to see the preview).
    preview_min_events: AtomicU64,
}

impl Cache {
    /// A cache that keeps index snapshots in `snapshots` (none: always index from SQL).
    pub fn new(snapshots: Option<Snapshots>) -> Cache {
        Cache {
            entries: Mutex::default(),
            snapshots,
            preview_min_events: AtomicU64::new(PREVIEW_MIN_EVENTS),
        }
    }

    /// Sets the session size from which a never-indexed session is answered from its preview.
    pub fn set_preview_min_events(&self, n: u64) {
        self.preview_min_events.store(n, Ordering::Relaxed);
    }

    /// The entry of session `sid`: a fresh one when the session was merged again since its
    /// index was loaded (checked once per [`RECHECK`]).
    async fn entry(&self, db: &Db, sid: i64) -> Result<Arc<Entry>, ApiError> {
        let e = self.lock().entry(sid).or_default().clone();
        let Some(loaded) = e.merged_at() else {
            return Ok(e);
        };
        if !e.check_due() {
            return Ok(e);
        }
        let now = match session(db, sid).await {
            Ok(s) => s.merged_at_wall_ns,
            Err(err) => {
                self.forget(sid, &e);
                return Err(err);
            }
        };
        if now == loaded {
            return Ok(e);
        }
        tracing::info!("session {sid} was merged again: indexing it anew");
        let fresh = Arc::new(Entry::default());
        self.lock().insert(sid, fresh.clone());
        Ok(fresh)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Arc<Entry>>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drops `e` if it is still the entry of `sid` and holds nothing (unknown ids must not
    /// accumulate entries).
    fn forget(&self, sid: i64, e: &Arc<Entry>) {
        let mut entries = self.lock();
        if entries.get(&sid).is_some_and(|x| Arc::ptr_eq(x, e)) && e.full.get().is_none() {
            entries.remove(&sid);
        }
    }

    /// Builds the index of `e` in a task of its own, so that it completes when the request
    /// that started it is gone; concurrent callers share one build. A failed build is not
    /// cached.
    fn build(&self, db: &Db, sid: i64, e: &Entry) -> tokio::task::JoinHandle<BuildResult> {
        let (cell, db, snaps) = (e.full.clone(), db.clone(), self.snapshots.clone());
        tokio::spawn(async move {
            cell.get_or_try_init(|| async {
                SessionIndex::load(&db, sid, snaps.as_ref())
                    .await
                    .map(Arc::new)
            })
            .await
            .cloned()
        })
    }

    /// The index of session `sid`, loading it on first use (concurrent callers wait for one
    /// load).
    pub async fn get(&self, db: &Db, sid: i64) -> Result<Arc<SessionIndex>, ApiError> {
        let e = self.entry(db, sid).await?;
        if let Some(ix) = e.full.get() {
            return Ok(ix.clone());
        }
        let r = joined(self.build(db, sid, &e).await);
        if r.is_err() {
            self.forget(sid, &e);
        }
        r
    }

    /// The index of session `sid` if it is built; else, for a session of at least
    /// [`PREVIEW_MIN_EVENTS`] events (or as set with [`Cache::set_preview_min_events`]) whose
    /// database holds an overview, its preview (see [`SessionIndex::preview`]: a few thousand
    /// rows, read before the index build starts competing for the cores and the database),
    /// while the index is built in the background; else the index once built.
    pub async fn view(&self, db: &Db, sid: i64) -> Result<Arc<SessionIndex>, ApiError> {
        let e = self.entry(db, sid).await?;
        if let Some(ix) = e.full.get() {
            return Ok(ix.clone());
        }
        let r = match self.preview_of(db, sid, &e).await {
            Ok(Some(p)) => {
                drop(self.build(db, sid, &e));
                return Ok(p);
            }
            Ok(None) => joined(self.build(db, sid, &e).await),
            Err(err) => Err(err),
        };
        if r.is_err() {
            self.forget(sid, &e);
        }
        r
    }

    /// Loads the preview of session `sid` (if it is large enough and has an overview) without
    /// starting its index build: the start-up warm-up does this for every session first, so
    /// that any of them paints at once while the indexes are built one after the other.
    pub async fn preload(&self, db: &Db, sid: i64) -> Result<(), ApiError> {
        let e = self.entry(db, sid).await?;
        if e.full.get().is_none() {
            self.preview_of(db, sid, &e).await?;
        }
        Ok(())
    }

    /// The entry's preview, loaded once: `None` for a session below the size threshold or
    /// without an overview.
    async fn preview_of(
        &self,
        db: &Db,
        sid: i64,
        e: &Entry,
    ) -> Result<Option<Arc<SessionIndex>>, ApiError> {
        let min = self.preview_min_events.load(Ordering::Relaxed);
        let p = e
            .preview
            .get_or_try_init(|| async {
                let events = session(db, sid).await?.events;
                if u64::try_from(events).unwrap_or(0) < min {
                    return Ok::<_, ApiError>(None);
                }
                Ok(SessionIndex::preview(db, sid).await?.map(Arc::new))
            })
            .await?;
        Ok(p.clone())
    }
}

type BuildResult = Result<Arc<SessionIndex>, ApiError>;

/// The result of a build task.
fn joined(r: Result<BuildResult, tokio::task::JoinError>) -> BuildResult {
    r.map_err(|e| ApiError::Internal(format!("building the session index failed: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::classify;

    #[test]
    fn metric_names_map_to_series() {
        assert_eq!(classify("cpu.total.busy"), Some("cpu"));
        assert_eq!(classify("cpu.0.busy"), None);
        assert_eq!(classify("net.eth0.rx_bytes_total"), Some("net_rx"));
        assert_eq!(classify("net.eth0.tx_bytes_total"), Some("net_tx"));
        assert_eq!(classify("net.lo.tx_bytes_total"), Some("net_tx"));
        assert_eq!(classify("net.eth0.rx_packets_total"), None);
    }
}
