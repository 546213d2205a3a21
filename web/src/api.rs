//! The JSON API, versioned under `/api/v1` (the browser and any script use the same one):
//!
//! | route | answer |
//! |---|---|
//! | `GET /sessions` | every session with its counts |
//! | `GET /sessions/{id}/rows` | hosts, processes (label, consecutive number) and their threads (with where each lost events) |
//! | `GET /sessions/{id}/sensors` | sensors; a sensor's position is the index Gantt items use |
//! | `GET /sessions/{id}/gantt?t0=&t1=&px=` | per thread: states, interval levels, scheduling; per host: IRQs — level of detail per pixel column (`lod`) |
//! | `GET /sessions/{id}/messages?t0=&t1=&limit=` | message arrows crossing the window (evenly thinned beyond `limit`; `total` is estimated when `total_exact` is false) |
//! | `GET /sessions/{id}/metrics?t0=&t1=&px=` | host CPU, memory, load and network series (with the interfaces that carried traffic) |
//! | `GET /sessions/{id}/stats` | per-sensor statistics, nesting tree, state totals, Kiviat, throttled sensors with their call counts |
//! | `GET /sessions/{id}/sensors/{hex}/source` | the sensor's source text (from the database), the file's other sensors, and its throttling (`throttled`, or null) |
//! | `GET /sessions/{id}/runs` | the analysis runs (`p5 analyze … --db`) and the pattern sorts |
//! | `GET /sessions/{id}/runs/{run}/paths?sort=&offset=&limit=&q=` | path patterns, sorted (`paths`) |
//! | `GET /sessions/{id}/runs/{run}/paths/{pattern}` | a pattern's call tree, timeline, histograms, critical path, instances |
//! | `GET /sessions/{id}/runs/{run}/graph` | the patterns' edges merged (convolution graph) |
//! | `GET /sessions/{id}/runs/{run}/instances/{instance}` | an instance's messages and each node's time split into on-CPU, waiting for a CPU, blocked, and top functions (`instance`) |
//! | `GET /sessions/{id}/runs/{run}/flows` | a flows run's flows by suspect score, or a diff run's root-cause lists (`flows`) |
//! | `GET /sessions/{id}/runs/{run}/flows/{flow}` | a flow's segments and call paths with their sensors |
//! | `GET /compare/paths?a=SID:RUN&b=SID:RUN` | two runs' patterns matched by signature, per-node deltas (`compare`) |
//! | `GET /compare/stats?a=SID&b=SID` | two sessions' statistics diffed |
//! | `POST /selection/toml` | a selection rendered as `p5.select.toml` |
//! | `POST /selection` | the same, written into the server's `--select-dir` |
//! | `GET /config` | what this server allows |
//!
//! Times are integer nanoseconds on the session's time base. Errors are JSON (`error`).
//! Parameters are parsed by hand so that every malformed one is a 400 with a JSON body.

use crate::error::ApiError;
use crate::index::{Cache, STATES, SessionIndex};
use crate::lod::Item;
use crate::selection::{self, Selection};
use axum::extract::rejection::StringRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use p5_tracedb::read::{self as query, Reader as Db};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Shared server state.
#[derive(Debug)]
pub struct AppState {
    /// The database.
    pub db: Db,
    /// Session indexes.
    pub cache: Cache,
    /// Where `POST /selection` writes `p5.select.toml`, if enabled.
    pub select_dir: Option<PathBuf>,
    /// What the integrity check found, once it found damage (see [`crate::integrity`]):
    /// every request is then answered with it.
    pub damaged: std::sync::OnceLock<String>,
    /// The database was too large to check before starting; [`crate::server::warm`] checks it
    /// after indexing.
    pub unchecked: bool,
}

/// Largest request body (a selection): with the connection cap, what bodies being read can
/// hold in memory is bounded (1024 × 256 KiB).
pub const MAX_BODY: usize = 256 * 1024;

pub(crate) type St = State<Arc<AppState>>;
pub(crate) type Params = Query<HashMap<String, String>>;
pub(crate) type ApiResult = Result<Json<Value>, ApiError>;

/// The `/api/v1` router.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/config", get(config))
        .route("/sessions", get(sessions))
        .route("/sessions/{sid}/rows", get(rows))
        .route("/sessions/{sid}/sensors", get(sensors))
        .route("/sessions/{sid}/gantt", get(gantt))
        .route("/sessions/{sid}/messages", get(messages))
        .route("/sessions/{sid}/metrics", get(metrics))
        .route("/sessions/{sid}/stats", get(stats))
        .route("/sessions/{sid}/sensors/{sensor}/source", get(source))
        .route("/sessions/{sid}/runs", get(crate::paths::runs))
        .route("/sessions/{sid}/runs/{run}/paths", get(crate::paths::paths))
        .route(
            "/sessions/{sid}/runs/{run}/paths/{pattern}",
            get(crate::paths::pattern),
        )
        .route(
            "/sessions/{sid}/runs/{run}/graph",
            get(crate::paths::run_graph),
        )
        .route(
            "/sessions/{sid}/runs/{run}/instances/{instance}",
            get(crate::instance::instance),
        )
        .route("/sessions/{sid}/runs/{run}/flows", get(crate::flows::flows))
        .route(
            "/sessions/{sid}/runs/{run}/flows/{flow}",
            get(crate::flows::flow),
        )
        .route("/compare/paths", get(crate::compare::paths))
        .route("/compare/stats", get(crate::compare::stats))
        .route("/selection/toml", post(selection_toml))
        .route("/selection", post(selection_save))
        .fallback(|| async { ApiError::NotFound("no such api route".into()) })
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            refuse_if_damaged,
        ))
        .with_state(state)
}

/// Answers every request with the damage once the integrity check found some.
async fn refuse_if_damaged(
    State(st): St,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    match st.damaged.get() {
        Some(d) => ApiError::Damaged(d.clone()).into_response(),
        None => next.run(req).await,
    }
}

async fn config(State(st): St) -> ApiResult {
    Ok(Json(json!({
        "api": "v1",
        "version": env!("CARGO_PKG_VERSION"),
        "save_selection": st.select_dir.is_some(),
        "states": STATES,
    })))
}

async fn sessions(State(st): St) -> ApiResult {
    Ok(Json(json!(query::sessions(&st.db).await?)))
}

/// Parses a session id from the path.
pub(crate) fn sid(s: &str) -> Result<i64, ApiError> {
    s.parse()
        .map_err(|_| ApiError::BadRequest(format!("bad session id {s:?}")))
}

/// The session's index, or its preview while the index is being built (answers carry
/// `"partial": true` then).
async fn index(st: &AppState, s: &str) -> Result<Arc<SessionIndex>, ApiError> {
    st.cache.view(&st.db, sid(s)?).await
}

/// An optional integer parameter.
pub(crate) fn int(p: &HashMap<String, String>, key: &str) -> Result<Option<i64>, ApiError> {
    p.get(key)
        .map(|v| {
            v.parse::<i64>()
                .map_err(|_| ApiError::BadRequest(format!("parameter {key} must be an integer")))
        })
        .transpose()
}

/// The window `[t0, t1)` and pixel width of a request (defaults: the whole session, 1000 px).
fn window(p: &HashMap<String, String>, ix: &SessionIndex) -> Result<(i64, i64, u32), ApiError> {
    let (a, b) = ix.span();
    let t0 = int(p, "t0")?.unwrap_or(a);
    let t1 = int(p, "t1")?.unwrap_or(b);
    // Far beyond any trace (2^61 ns ≈ 73 years), and small enough that no arithmetic on the
    // window can overflow.
    const LIMIT: i64 = 1 << 61;
    if !(-LIMIT..=LIMIT).contains(&t0) || !(-LIMIT..=LIMIT).contains(&t1) {
        return Err(ApiError::BadRequest(
            "t0 and t1 must be within ±2^61 ns".into(),
        ));
    }
    if t1 <= t0 {
        return Err(ApiError::BadRequest("t1 must be greater than t0".into()));
    }
    let px = int(p, "px")?.unwrap_or(1000);
    if !(1..=20_000).contains(&px) {
        return Err(ApiError::BadRequest("px must be 1 to 20000".into()));
    }
    Ok((t0, t1, px as u32))
}

async fn rows(State(st): St, Path(s): Path<String>) -> ApiResult {
    let ix = index(&st, &s).await?;
    // Where threads lost events: `[t_start, t_end, events]` per thread, drawn as warning bands.
    let bounds: HashMap<i64, Option<i64>> = query::clock_bounds(&st.db, ix.session.id)
        .await?
        .into_iter()
        .collect();
    let mut drops: HashMap<i64, Vec<[i64; 3]>> = HashMap::new();
    for d in query::drop_ranges(&st.db, ix.session.id).await? {
        drops
            .entry(d.thread_id)
            .or_default()
            .push([d.t_start, d.t_end, d.events]);
    }
    let hostname = |id: i64| {
        ix.hosts
            .iter()
            .find(|h| h.id == id)
            .map_or_else(|| format!("host {id}"), |h| h.hostname.clone())
    };
    let mut processes = Vec::new();
    for p in &ix.processes {
        let threads: Vec<Value> = ix
            .threads
            .iter()
            .filter(|t| t.process_id == p.id && ix.lanes.contains_key(&t.id))
            .map(|t| {
                let l = &ix.lanes[&t.id];
                json!({
                    "id": t.id, "tid": t.tid, "name": t.name, "kind": t.kind,
                    "dropped": t.dropped, "drops": drops.get(&t.id).map_or(&[][..], |v| &v[..]),
                    "levels": l.levels.len(),
                    "sched": !l.sched.is_empty(), "states": !l.states.is_empty(),
                })
            })
            .collect();
        if threads.is_empty() {
            continue;
        }
        let number = processes.len() + 1;
        let host = hostname(p.host_id);
        processes.push(json!({
            "id": p.id, "number": number, "host_id": p.host_id, "hostname": host,
            "program": p.program, "pid": p.pid, "argv": p.argv, "runtime": p.runtime,
            "label": format!("{host} · {} · {number}", p.program),
            "t_start": p.t_start, "t_end": p.t_end, "threads": threads,
            "clock_bound_ns": bounds.get(&p.id).copied().flatten(),
        }));
    }
    let (t0, t1) = ix.span();
    Ok(Json(json!({
        "session": ix.session,
        "t_min": t0,
        "t_max": t1,
        "states": STATES,
        "hosts": ix.hosts,
        "processes": processes,
        "irq_hosts": sorted_keys(&ix.irqs),
        "partial": ix.preview,
    })))
}

fn sorted_keys<V>(m: &HashMap<i64, V>) -> Vec<i64> {
    let mut k: Vec<i64> = m.keys().copied().collect();
    k.sort_unstable();
    k
}

async fn sensors(State(st): St, Path(s): Path<String>) -> ApiResult {
    let ix = index(&st, &s).await?;
    Ok(Json(json!(ix.sensors)))
}

async fn gantt(
    State(st): St,
    Path(s): Path<String>,
    Query(p): Params,
) -> Result<Json<Gantt>, ApiError> {
    let ix = index(&st, &s).await?;
    let (t0, t1, px) = window(&p, &ix)?;
    // Typed rows (not `json!` values): the answer can hold tens of thousands of items.
    let threads: Vec<GanttThread> = sorted_keys(&ix.lanes)
        .into_iter()
        .map(|id| {
            let l = &ix.lanes[&id];
            GanttThread {
                id,
                states: l.states.query(t0, t1, px),
                levels: l.levels.iter().map(|lane| lane.query(t0, t1, px)).collect(),
                sched: l.sched.query(t0, t1, px),
            }
        })
        .collect();
    let irqs: Vec<GanttIrqs> = sorted_keys(&ix.irqs)
        .into_iter()
        .map(|host| GanttIrqs {
            host,
            items: ix.irqs[&host].query(t0, t1, px),
        })
        .collect();
    Ok(Json(Gantt {
        t0,
        t1,
        px,
        partial: ix.preview,
        threads,
        irqs,
    }))
}

/// The Gantt answer. Items are `[start, end, category, count, covered ns]`; count 1 is one
/// exact span. `partial`: drawn from the session overview while the index is built.
#[derive(Debug, Serialize)]
struct Gantt {
    t0: i64,
    t1: i64,
    px: u32,
    partial: bool,
    threads: Vec<GanttThread>,
    irqs: Vec<GanttIrqs>,
}

#[derive(Debug, Serialize)]
struct GanttThread {
    id: i64,
    states: Vec<Item>,
    levels: Vec<Vec<Item>>,
    sched: Vec<Item>,
}

#[derive(Debug, Serialize)]
struct GanttIrqs {
    host: i64,
    items: Vec<Item>,
}

async fn messages(State(st): St, Path(s): Path<String>, Query(p): Params) -> ApiResult {
    let ix = index(&st, &s).await?;
    let (t0, t1, _) = window(&p, &ix)?;
    let limit = int(&p, "limit")?.unwrap_or(5000);
    if !(1..=100_000).contains(&limit) {
        return Err(ApiError::BadRequest("limit must be 1 to 100000".into()));
    }
    // Candidates: sent in [t0 - longest latency, t1). Thinning strides over the candidates, so
    // the cost is O(limit + log n) however many messages the window holds.
    let from = t0.saturating_sub(ix.max_latency);
    let a = ix.messages.partition_point(|m| m.send_t < from);
    let b = ix.messages.partition_point(|m| m.send_t < t1);
    let visible =
        |m: &&query::MessageRow| m.recv_t.max(m.send_t) >= t0 && m.recv_t.min(m.send_t) < t1;
    let candidates = b.saturating_sub(a);
    let (total, exact, shown): (usize, bool, Vec<&query::MessageRow>) =
        if candidates <= limit as usize * 4 {
            let v: Vec<_> = ix.messages[a..b].iter().filter(visible).collect();
            let step = v.len().div_ceil(limit as usize).max(1);
            (v.len(), true, v.into_iter().step_by(step).collect())
        } else {
            // Many candidates: estimate the total from the stride sample.
            let step = candidates.div_ceil(limit as usize).max(1);
            let sample: Vec<_> = ix.messages[a..b]
                .iter()
                .step_by(step)
                .filter(visible)
                .collect();
            (sample.len() * step, false, sample)
        };
    Ok(Json(json!({
        "t0": t0, "t1": t1, "total": total, "total_exact": exact, "messages": shown,
        "partial": ix.preview,
    })))
}

async fn metrics(State(st): St, Path(s): Path<String>, Query(p): Params) -> ApiResult {
    let ix = index(&st, &s).await?;
    let (t0, t1, px) = window(&p, &ix)?;
    let mut hosts = Vec::new();
    for h in &ix.hosts {
        let Some(series) = ix.series.get(&h.id) else {
            continue;
        };
        let series: Vec<Value> = series
            .iter()
            .map(|s| {
                // One point before and after the window so lines reach the edges.
                let a = s.points.partition_point(|q| q.0 < t0).saturating_sub(1);
                let b = (s.points.partition_point(|q| q.0 <= t1) + 1).min(s.points.len());
                let pts = downsample(&s.points[a..b], t0, t1, px);
                let mut v = json!({ "name": s.name, "unit": s.unit, "points": pts });
                if !s.interfaces.is_empty() {
                    v["interfaces"] = json!(s.interfaces);
                }
                v
            })
            .collect();
        hosts.push(json!({ "host": h.id, "hostname": h.hostname, "series": series }));
    }
    Ok(Json(json!({ "t0": t0, "t1": t1, "hosts": hosts })))
}

/// Keeps points as they are when there are few; otherwise one mean point per pixel column.
fn downsample(pts: &[(i64, f64)], t0: i64, t1: i64, px: u32) -> Vec<(i64, f64)> {
    if pts.len() <= 2 * px as usize {
        return pts.to_vec();
    }
    let w = t1.saturating_sub(t0) as f64 / px as f64;
    let mut out: Vec<(i64, f64)> = Vec::new();
    let mut acc: Option<(i64, f64, f64, u32)> = None; // column, sum t, sum v, n
    for &(t, v) in pts {
        let col = (t.saturating_sub(t0) as f64 / w).floor() as i64;
        match &mut acc {
            Some(a) if a.0 == col => {
                a.1 += t as f64;
                a.2 += v;
                a.3 += 1;
            }
            _ => {
                if let Some(a) = acc {
                    out.push(((a.1 / a.3 as f64) as i64, a.2 / a.3 as f64));
                }
                acc = Some((col, t as f64, v, 1));
            }
        }
    }
    if let Some(a) = acc {
        out.push(((a.1 / a.3 as f64) as i64, a.2 / a.3 as f64));
    }
    out
}

async fn stats(State(st): St, Path(s): Path<String>) -> ApiResult {
    let ix = st.cache.get(&st.db, sid(&s)?).await?;
    let ix2 = ix.clone();
    let v = tokio::task::spawn_blocking(move || {
        ix2.stats
            .get_or_init(|| crate::stats::compute(&ix2))
            .clone()
    })
    .await
    .map_err(|e| ApiError::Internal(format!("computing the statistics failed: {e}")))?;
    // Throttled sensors: from `sensor_calls`, not from the index (their calls are counted,
    // not intervals).
    let calls = query::sensor_calls(&st.db, ix.session.id).await?;
    let mut v = v;
    if let Some(o) = v.as_object_mut() {
        o.insert(
            "throttled".into(),
            json!(crate::stats::throttled(&ix, &calls)),
        );
    }
    Ok(Json(v))
}

/// Parses a sensor id: `0x` + hex (as listed) or decimal.
fn sensor_id(s: &str) -> Result<i64, ApiError> {
    let bad = || ApiError::BadRequest(format!("bad sensor id {s:?} (0x… hex or decimal)"));
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16)
            .map(|v| v as i64)
            .map_err(|_| bad())
    } else {
        s.parse::<i64>()
            .or_else(|_| s.parse::<u64>().map(|v| v as i64))
            .map_err(|_| bad())
    }
}

async fn source(State(st): St, Path((s, sensor)): Path<(String, String)>) -> ApiResult {
    let sid = sid(&s)?;
    let id = sensor_id(&sensor)?;
    let ix = st.cache.view(&st.db, sid).await?;
    let &idx = ix
        .sensor_index
        .get(&id)
        .ok_or_else(|| ApiError::NotFound(format!("no sensor {sensor} in session {sid}")))?;
    let sen = &ix.sensors[idx as usize];
    let file = match sen.source_file_id {
        Some(f) => query::source_file(&st.db, sid, f).await?,
        None => None,
    };
    let throttled = query::sensor_calls(&st.db, sid)
        .await?
        .into_iter()
        .filter(|r| r.sensor_id == id)
        .collect::<Vec<_>>();
    let throttled = crate::stats::throttled(&ix, &throttled).pop();
    let siblings: Vec<Value> = ix
        .sensors
        .iter()
        .enumerate()
        .filter(|(_, o)| o.file.is_some() && o.file == sen.file)
        .map(|(i, o)| {
            json!({ "sensor": i, "hex": o.hex, "name": o.name, "function": o.function,
                    "kind": o.kind, "line": o.line, "end_line": o.end_line })
        })
        .collect();
    Ok(Json(json!({
        "sensor": sen,
        "index": idx,
        "file": file.as_ref().map(|f| json!({
            "id": f.id, "path": f.path, "language": f.language, "lines": f.lines })),
        "text": file.and_then(|f| f.text),
        "line": sen.line,
        "end_line": sen.end_line,
        "sensors_in_file": siblings,
        "throttled": throttled,
    })))
}

/// Parses a selection body (a JSON error on malformed input, not axum's plain text).
fn parse_selection(body: &str) -> Result<Selection, ApiError> {
    let sel: Selection = serde_json::from_str(body)
        .map_err(|e| ApiError::BadRequest(format!("bad selection: {e}")))?;
    selection::validate(&sel)?;
    Ok(sel)
}

/// A request body as text, or the JSON error of a body too large or not UTF-8.
fn body_text(body: Result<String, StringRejection>) -> Result<String, ApiError> {
    body.map_err(|e| ApiError::Rejected(e.status(), e.body_text().to_lowercase()))
}

async fn selection_toml(body: Result<String, StringRejection>) -> Result<Response, ApiError> {
    let sel = parse_selection(&body_text(body)?)?;
    Ok((
        [
            (header::CONTENT_TYPE, "application/toml; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"p5.select.toml\"",
            ),
        ],
        sel.to_toml(selection::WRITER),
    )
        .into_response())
}

async fn selection_save(State(st): St, body: Result<String, StringRejection>) -> ApiResult {
    let sel = parse_selection(&body_text(body)?)?;
    let dir = st.select_dir.as_ref().ok_or_else(|| {
        ApiError::Conflict("saving is off: start p5 web with --select-dir DIR".into())
    })?;
    let text = sel.to_toml(selection::WRITER);
    let tmp = dir.join(format!(".{}.tmp", selection::FILE_NAME));
    tokio::fs::write(&tmp, &text).await?;
    tokio::fs::rename(&tmp, dir.join(selection::FILE_NAME)).await?;
    Ok(Json(
        json!({ "saved": selection::FILE_NAME, "bytes": text.len() }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sensor_ids_parse_as_hex_or_decimal() {
        assert_eq!(sensor_id("0x0000000000000010").unwrap(), 16);
        assert_eq!(sensor_id("0xffffffffffffffff").unwrap(), -1);
        assert_eq!(sensor_id("-5").unwrap(), -5);
        assert_eq!(sensor_id("18446744073709551615").unwrap(), -1);
        assert!(sensor_id("0xzz").is_err());
        assert!(sensor_id("../etc/passwd").is_err());
    }

    #[test]
    fn downsampling_keeps_few_points_and_averages_many() {
        let few = vec![(0, 1.0), (10, 2.0)];
        assert_eq!(downsample(&few, 0, 100, 10), few);
        let many: Vec<(i64, f64)> = (0..1000).map(|t| (t, (t % 2) as f64)).collect();
        let d = downsample(&many, 0, 1000, 10);
        assert_eq!(d.len(), 10);
        assert!(d.iter().all(|p| (p.1 - 0.5).abs() < 1e-9));
    }
}
