//! Two sessions or two analysis runs side by side:
//!
//! - `GET /compare/paths?a=SID:RUN&b=SID:RUN&limit=` — patterns matched by signature; for the
//!   matched ones (largest change of mean total first), every node matched by its place in the
//!   tree with its latency and call delay on both sides, and the change of its own delay (its
//!   latency's change minus its children's): the node a delay was added to stands out (seed 000
//!   Figs. 12, 14 and 15). Patterns found on one side only are listed apart.
//! - `GET /compare/stats?a=SID&b=SID` — per sensor (by name and file) count, total and mean,
//!   per thread state the time, and the messages' count and mean latency, on both sides, with
//!   the differences, largest first.

use crate::api::{ApiResult, AppState, Params, St, int};
use crate::error::ApiError;
use crate::index::{STATES, SessionIndex};
use crate::paths::{expectation, find_run, pattern_json, sort_patterns};
use axum::Json;
use axum::extract::{Query, State};
use p5_tracedb::read as query;
use p5_tracedb::schema::{PathNode, PathPattern};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Parses `SID:RUN` (`run` required) or `SID`.
pub fn side(p: &HashMap<String, String>, key: &str, run: bool) -> Result<(i64, i64), ApiError> {
    let v = p
        .get(key)
        .ok_or_else(|| ApiError::BadRequest(format!("parameter {key} is required")))?;
    let bad = || {
        ApiError::BadRequest(format!(
            "parameter {key} must be {}",
            if run {
                "SESSION:RUN (ids)"
            } else {
                "a session id"
            }
        ))
    };
    if run {
        let (s, r) = v.split_once(':').ok_or_else(bad)?;
        Ok((s.parse().map_err(|_| bad())?, r.parse().map_err(|_| bad())?))
    } else {
        Ok((v.parse().map_err(|_| bad())?, 0))
    }
}

/// Each node's key: its ancestors' and its own name, with the occurrence among same-named
/// siblings (`client/shop#0/db#1`), so two runs' trees match by place.
pub fn node_keys(nodes: &[PathNode]) -> Vec<String> {
    let pos: HashMap<i64, usize> = nodes.iter().enumerate().map(|(i, n)| (n.id, i)).collect();
    let mut keys: Vec<String> = Vec::with_capacity(nodes.len());
    let mut seen: HashMap<(Option<i64>, &str), usize> = HashMap::new();
    for n in nodes {
        let k = seen.entry((n.parent_id, n.node.as_str())).or_insert(0);
        let own = format!("{}#{}", n.node, k);
        *k += 1;
        let key = match n.parent_id.and_then(|p| pos.get(&p)) {
            Some(&i) if i < keys.len() => format!("{}/{own}", keys[i]),
            _ => own,
        };
        keys.push(key);
    }
    keys
}

/// A node matched across two runs.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeDelta {
    /// Its key ([`node_keys`]).
    pub key: String,
    /// Node name.
    pub node: String,
    /// Depth in the tree.
    pub depth: usize,
    /// Mean latency on each side.
    pub latency: (Option<i64>, Option<i64>),
    /// Mean call delay on each side.
    pub call_delay: (Option<i64>, Option<i64>),
    /// Change of latency minus the change of its children's (its own delay's change).
    pub own_delta: Option<i64>,
}

/// Matches two trees of one pattern by node key.
pub fn match_nodes(a: &[PathNode], b: &[PathNode]) -> Vec<NodeDelta> {
    let (ka, kb) = (node_keys(a), node_keys(b));
    let in_b: HashMap<&str, &PathNode> = kb.iter().map(String::as_str).zip(b.iter()).collect();
    let mut out: Vec<NodeDelta> = ka
        .iter()
        .zip(a)
        .map(|(k, n)| {
            let m = in_b.get(k.as_str());
            NodeDelta {
                key: k.clone(),
                node: n.node.clone(),
                depth: k.matches('/').count(),
                latency: (n.latency_mean_ns, m.and_then(|m| m.latency_mean_ns)),
                call_delay: (n.call_delay_mean_ns, m.and_then(|m| m.call_delay_mean_ns)),
                own_delta: None,
            }
        })
        .collect();
    let delta = |d: &NodeDelta| match d.latency {
        (Some(x), Some(y)) => Some(y - x),
        _ => None,
    };
    for i in 0..out.len() {
        let prefix = format!("{}/", out[i].key);
        let children: i64 = out
            .iter()
            .filter(|c| c.key.starts_with(&prefix) && c.depth == out[i].depth + 1)
            .filter_map(delta)
            .sum();
        out[i].own_delta = delta(&out[i]).map(|d| d - children);
    }
    out
}

fn node_delta_json(d: &NodeDelta) -> Value {
    let sub = |p: (Option<i64>, Option<i64>)| match p {
        (Some(x), Some(y)) => Some(y - x),
        _ => None,
    };
    json!({
        "key": d.key, "node": d.node, "depth": d.depth,
        "a_latency_ns": d.latency.0, "b_latency_ns": d.latency.1,
        "delta_latency_ns": sub(d.latency),
        "a_call_delay_ns": d.call_delay.0, "b_call_delay_ns": d.call_delay.1,
        "delta_call_delay_ns": sub(d.call_delay),
        "own_delta_ns": d.own_delta,
    })
}

/// Loads a run's patterns (checking that it exists), by expectation.
async fn run_patterns(st: &AppState, (sid, run): (i64, i64)) -> Result<Vec<PathPattern>, ApiError> {
    let (run, _) = find_run(&st.db, sid, run).await?;
    let mut v = query::path_patterns(&st.db, sid, run.id).await?;
    sort_patterns(&mut v, "expectation");
    Ok(v)
}

/// `GET /compare/paths`.
pub async fn paths(State(st): St, Query(p): Params) -> ApiResult {
    let (a, b) = (side(&p, "a", true)?, side(&p, "b", true)?);
    let limit = int(&p, "limit")?.unwrap_or(50).clamp(1, 500) as usize;
    let (pa, pb) = (run_patterns(&st, a).await?, run_patterns(&st, b).await?);
    let by_sig: HashMap<&str, &PathPattern> =
        pb.iter().map(|p| (p.signature.as_str(), p)).collect();
    let mut matched: Vec<(&PathPattern, &PathPattern)> = pa
        .iter()
        .filter_map(|x| by_sig.get(x.signature.as_str()).map(|y| (x, *y)))
        .collect();
    // The most frequent first, then the largest change among them.
    matched.truncate(limit);
    matched.sort_by_key(|(x, y)| std::cmp::Reverse((y.mean_total_ns - x.mean_total_ns).abs()));
    let mut list = Vec::new();
    let mut largest: Option<(i64, Value)> = None;
    for (x, y) in &matched {
        let na = query::path_nodes(&st.db, a.0, a.1, x.id).await?;
        let nb = query::path_nodes(&st.db, b.0, b.1, y.id).await?;
        let nodes = match_nodes(&na, &nb);
        for n in &nodes {
            let d = n.own_delta.unwrap_or(0);
            if largest.as_ref().is_none_or(|(m, _)| d.abs() > m.abs()) {
                largest = Some((
                    d,
                    json!({ "signature": x.signature, "node": n.node,
                    "key": n.key, "own_delta_ns": d }),
                ));
            }
        }
        list.push(json!({
            "signature": x.signature,
            "a": pattern_json(x),
            "b": pattern_json(y),
            "delta_mean_total_ns": y.mean_total_ns - x.mean_total_ns,
            "nodes": nodes.iter().map(node_delta_json).collect::<Vec<_>>(),
        }));
    }
    let only = |from: &[PathPattern], other: &[PathPattern]| -> Vec<Value> {
        let sigs: std::collections::HashSet<&str> =
            other.iter().map(|p| p.signature.as_str()).collect();
        from.iter()
            .filter(|p| !sigs.contains(p.signature.as_str()))
            .take(20)
            .map(|p| json!({ "signature": p.signature, "expectation": expectation(p) }))
            .collect()
    };
    Ok(Json(json!({
        "a": { "session": a.0, "run": a.1, "patterns": pa.len() },
        "b": { "session": b.0, "run": b.1, "patterns": pb.len() },
        "matched": list,
        "only_a": only(&pa, &pb),
        "only_b": only(&pb, &pa),
        "largest": largest.map(|l| l.1),
    })))
}

/// Per-sensor (name, file) count and total, per state the time, messages and their latency.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    /// (name, file) → (count, total ns).
    pub sensors: BTreeMap<(String, String), (u64, i64)>,
    /// State → time.
    pub states: BTreeMap<String, i64>,
    /// Messages and the sum of their latencies.
    pub messages: (u64, i64),
}

/// What one session's index sums to.
pub fn totals(ix: &SessionIndex) -> Totals {
    let mut t = Totals::default();
    for (i, s) in ix.sensors.iter().enumerate() {
        let Some(x) = ix.totals.get(i).filter(|x| x.count > 0) else {
            continue;
        };
        let e = t
            .sensors
            .entry((s.name.clone(), s.file.clone().unwrap_or_default()))
            .or_default();
        e.0 += x.count;
        e.1 += x.total;
    }
    for (k, ns) in crate::stats::state_totals(ix).into_iter().enumerate() {
        if ns > 0 {
            let name = STATES.get(k).copied().unwrap_or("other");
            *t.states.entry(name.to_string()).or_default() += ns;
        }
    }
    for m in &ix.messages {
        t.messages.0 += 1;
        t.messages.1 += m.recv_t - m.send_t;
    }
    t
}

/// Two sessions' totals diffed, largest change of total first.
pub fn diff(a: &Totals, b: &Totals) -> Value {
    let mut keys: Vec<&(String, String)> = a.sensors.keys().chain(b.sensors.keys()).collect();
    keys.sort();
    keys.dedup();
    let mean = |(n, t): (u64, i64)| (n > 0).then(|| t as f64 / n as f64);
    let mut sensors: Vec<(i64, Value)> = keys
        .into_iter()
        .map(|k| {
            let x = a.sensors.get(k).copied().unwrap_or_default();
            let y = b.sensors.get(k).copied().unwrap_or_default();
            let dm = mean(y).zip(mean(x)).map(|(q, p)| q - p);
            (
                (y.1 - x.1).abs(),
                json!({ "name": k.0, "file": k.1,
                    "a": { "count": x.0, "total": x.1, "mean": mean(x) },
                    "b": { "count": y.0, "total": y.1, "mean": mean(y) },
                    "delta_count": y.0 as i64 - x.0 as i64, "delta_total": y.1 - x.1,
                    "delta_mean": dm }),
            )
        })
        .collect();
    sensors.sort_by_key(|s| std::cmp::Reverse(s.0));
    let mut states: Vec<&String> = a.states.keys().chain(b.states.keys()).collect();
    states.sort();
    states.dedup();
    let states: Vec<Value> = states
        .into_iter()
        .map(|s| {
            let (x, y) = (
                a.states.get(s).copied().unwrap_or(0),
                b.states.get(s).copied().unwrap_or(0),
            );
            json!({ "state": s, "a": x, "b": y, "delta": y - x })
        })
        .collect();
    json!({
        "sensors": sensors.into_iter().map(|s| s.1).collect::<Vec<_>>(),
        "states": states,
        "messages": {
            "a": { "count": a.messages.0, "mean_latency": mean(a.messages) },
            "b": { "count": b.messages.0, "mean_latency": mean(b.messages) },
        },
    })
}

/// `GET /compare/stats`.
pub async fn stats(State(st): St, Query(p): Params) -> ApiResult {
    let (a, b) = (side(&p, "a", false)?.0, side(&p, "b", false)?.0);
    let st: &Arc<AppState> = &st;
    let (ia, ib) = (
        st.cache.get(&st.db, a).await?,
        st.cache.get(&st.db, b).await?,
    );
    let v = tokio::task::spawn_blocking(move || {
        let mut d = diff(&totals(&ia), &totals(&ib));
        d["a"] = json!({ "session": ia.session.id, "name": ia.session.name });
        d["b"] = json!({ "session": ib.session.id, "name": ib.session.name });
        d
    })
    .await
    .map_err(|e| ApiError::Internal(format!("comparing the statistics failed: {e}")))?;
    Ok(Json(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use p5_tracedb::domain::{NodeKind, Visit};

    fn node(id: i64, parent: Option<i64>, name: &str, lat: i64) -> PathNode {
        PathNode {
            session_id: 1,
            run_id: 1,
            pattern_id: 1,
            id,
            parent_id: parent,
            ord: id,
            node: name.into(),
            kind: NodeKind::Node,
            visit: Visit::Call,
            call_delay_mean_ns: Some(1),
            latency_mean_ns: Some(lat),
            net_delay_mean_ns: None,
            samples: 1,
        }
    }

    #[test]
    fn the_node_a_delay_was_added_to_stands_out() {
        // client → web → (db, db): 200 added inside the second db call.
        let a = [
            node(1, None, "client", 1000),
            node(2, Some(1), "web", 900),
            node(3, Some(2), "db", 100),
            node(4, Some(2), "db", 100),
        ];
        let b = [
            node(1, None, "client", 1200),
            node(2, Some(1), "web", 1100),
            node(3, Some(2), "db", 100),
            node(4, Some(2), "db", 300),
        ];
        let d = match_nodes(&a, &b);
        let keys: Vec<&str> = d.iter().map(|n| n.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "client#0",
                "client#0/web#0",
                "client#0/web#0/db#0",
                "client#0/web#0/db#1"
            ]
        );
        let own: Vec<Option<i64>> = d.iter().map(|n| n.own_delta).collect();
        assert_eq!(own, [Some(0), Some(0), Some(0), Some(200)]);
    }

    #[test]
    fn sides_parse_or_say_what_they_want() {
        let p: HashMap<String, String> = [("a".to_string(), "3:7".to_string())].into();
        assert_eq!(side(&p, "a", true).unwrap(), (3, 7));
        assert!(side(&p, "a", false).is_err());
        assert!(side(&p, "b", true).is_err());
    }
}
