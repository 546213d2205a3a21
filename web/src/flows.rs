//! The results of `p5 analyze flows` and `p5 analyze diff` (`flow`, `flow_segment`,
//! `flow_path`, `flow_diff`):
//!
//! - `GET /sessions/{id}/runs/{run}/flows?limit=` — a flows run: its flows, most suspect
//!   first (suspect score bars); a diff run: the root-cause lists of both sides, each path with
//!   both ranks (by time and by length);
//! - `GET /sessions/{id}/runs/{run}/flows/{flow}` — one flow's segments (thread, time) and the
//!   call paths it covered.
//!
//! Every path comes with its functions resolved to sensors ([`functions`]), so the page can
//! open each one's source (click-back).

use crate::api::{ApiResult, Params, St, int, sid};
use crate::error::ApiError;
use crate::index::SessionIndex;
use crate::paths::{find_run, id};
use axum::Json;
use axum::extract::{Path, Query, State};
use p5_tracedb::read as query;
use p5_tracedb::schema::{Flow, FlowDiff};
use serde_json::{Value, json};

/// Splits a stored path (`program: main→A→B`) into its program and functions.
pub fn parse_path(path: &str) -> (&str, Vec<&str>) {
    let (program, calls) = path.split_once(": ").unwrap_or(("", path));
    let calls = calls
        .split('→')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    (program, calls)
}

/// The sensor standing for a function name: a function sensor of that name (or function),
/// else any sensor of that name.
pub fn sensor_of(ix: &SessionIndex, name: &str) -> Option<usize> {
    let is = |s: &p5_tracedb::read::Sensor| s.name == name || s.function.as_deref() == Some(name);
    ix.sensors
        .iter()
        .position(|s| is(s) && s.kind.as_deref() == Some("function"))
        .or_else(|| ix.sensors.iter().position(is))
}

/// The functions of a path (and the merged leaves of a diff row), each with its sensor.
pub fn functions(ix: &SessionIndex, path: &str, leaves: Option<&str>) -> Value {
    let (program, mut calls) = parse_path(path);
    if let Some(l) = leaves {
        calls.extend(l.split(',').map(str::trim).filter(|c| !c.is_empty()));
    }
    let list: Vec<Value> = calls
        .iter()
        .map(|c| json!({ "name": c, "sensor": sensor_of(ix, c) }))
        .collect();
    json!({ "program": program, "functions": list })
}

/// Most suspect first; unscored flows last, by id.
pub fn by_suspicion(flows: &mut [Flow]) {
    flows.sort_by(|a, b| {
        let ka = a.suspect_rank.unwrap_or(i64::MAX);
        let kb = b.suspect_rank.unwrap_or(i64::MAX);
        ka.cmp(&kb).then(a.id.cmp(&b.id))
    });
}

fn flow_json(ix: &SessionIndex, f: &Flow) -> Value {
    json!({
        "id": f.id,
        "start": f.start_ref,
        "thread": f.thread_id,
        "label": ix.thread_label(f.thread_id),
        "t_start": f.t_start,
        "t_end": f.t_end,
        "events": f.events,
        "messages": f.messages,
        "bytes": f.bytes,
        "suspect_score": f.suspect_score,
        "suspect_rank": f.suspect_rank,
        "known": f.label,
    })
}

fn diff_json(ix: &SessionIndex, d: &FlowDiff) -> Value {
    json!({
        "id": d.id,
        "path": d.path,
        "leaves": d.merged_leaves,
        "first_t": d.first_t,
        "len": d.len,
        "rank_time": d.rank_time,
        "rank_len": d.rank_len,
        "calls": functions(ix, &d.path, d.merged_leaves.as_deref()),
    })
}

/// `GET /sessions/{id}/runs/{run}/flows`.
pub async fn flows(
    State(st): St,
    Path((s, r)): Path<(String, String)>,
    Query(p): Params,
) -> ApiResult {
    let sid = sid(&s)?;
    let (run, _) = find_run(&st.db, sid, id("run", &r)?).await?;
    let limit = int(&p, "limit")?.unwrap_or(200).clamp(1, 10_000) as usize;
    let ix = st.cache.view(&st.db, sid).await?;
    match run.algorithm.as_str() {
        "flows" => {
            let mut all = query::flows(&st.db, sid, run.id).await?;
            let total = all.len();
            by_suspicion(&mut all);
            let list: Vec<Value> = all.iter().take(limit).map(|f| flow_json(&ix, f)).collect();
            Ok(Json(
                json!({ "kind": "flows", "total": total, "flows": list }),
            ))
        }
        "diff" => {
            let diffs = query::flow_diffs(&st.db, sid, run.id).await?;
            let side = |name: &str| -> Vec<Value> {
                let mut v: Vec<&FlowDiff> = diffs.iter().filter(|d| d.side == name).collect();
                v.sort_by_key(|d| (d.rank_time, d.id));
                v.into_iter()
                    .take(limit)
                    .map(|d| diff_json(&ix, d))
                    .collect()
            };
            Ok(Json(json!({
                "kind": "diff",
                "anomalous": side("anomalous"),
                "normal": side("normal"),
            })))
        }
        other => Err(ApiError::BadRequest(format!(
            "run {} is a {other} run: flows are the results of `p5 analyze flows` or `diff`",
            run.id
        ))),
    }
}

/// `GET /sessions/{id}/runs/{run}/flows/{flow}`.
pub async fn flow(State(st): St, Path((s, r, f)): Path<(String, String, String)>) -> ApiResult {
    let sid = sid(&s)?;
    let (run, _) = find_run(&st.db, sid, id("run", &r)?).await?;
    let fid = id("flow", &f)?;
    let flow = query::flows(&st.db, sid, run.id)
        .await?
        .into_iter()
        .find(|x| x.id == fid)
        .ok_or_else(|| ApiError::NotFound(format!("no flow {fid} in run {}", run.id)))?;
    let ix = st.cache.view(&st.db, sid).await?;
    let segments: Vec<Value> = query::flow_segments(&st.db, sid, run.id)
        .await?
        .iter()
        .filter(|g| g.flow_id == fid)
        .map(|g| {
            json!({ "thread": g.thread_id, "label": ix.thread_label(g.thread_id),
                    "t_start": g.t_start, "t_end": g.t_end })
        })
        .collect();
    let mut paths = query::flow_paths(&st.db, sid, run.id).await?;
    paths.retain(|p| p.flow_id == fid);
    paths.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(a.first_t.cmp(&b.first_t)));
    let paths: Vec<Value> = paths
        .iter()
        .map(|p| {
            json!({ "path": p.path, "first_t": p.first_t, "time_ns": p.time_ns,
                    "bytes": p.bytes, "calls": functions(&ix, &p.path, None) })
        })
        .collect();
    Ok(Json(json!({
        "flow": flow_json(&ix, &flow),
        "segments": segments,
        "paths": paths,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_paths_split_into_program_and_calls() {
        assert_eq!(parse_path("job: main→A→B"), ("job", vec!["main", "A", "B"]));
        assert_eq!(parse_path("main"), ("", vec!["main"]));
    }
}
