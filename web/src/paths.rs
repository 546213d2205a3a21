//! The analysis runs of a session and their path patterns, as `p5 analyze` stored them
//! (`analysis_run`, `path_pattern`, `path_node`, `path_node_hist`, `path_instance`):
//!
//! - `GET /sessions/{id}/runs` — the runs, newest last, with their parameters;
//! - `GET /sessions/{id}/runs/{run}/paths?sort=&offset=&limit=&q=` — the patterns, sorted by
//!   `count`, `expectation` (the default), `expectation_per_count`, `expectation_per_sqrt_count`
//!   or `total` (mean total latency × expectation), optionally filtered by a substring of the
//!   signature;
//! - `GET /sessions/{id}/runs/{run}/paths/{pattern}` — one pattern as a call tree (seed 000
//!   Fig. 8) and a timeline (seed 001 Fig. 10): each node's mean entry offset from the root's
//!   entry (the sum of the call delays above it), latency including children, network delay,
//!   latency histogram and whether it is on the critical path; and its first instances;
//! - `GET /sessions/{id}/runs/{run}/graph` — every pattern's edges merged into one graph of
//!   node names (the convolution graph of seed 000 Fig. 9: edge count and delays by weight).
//!
//! Pure helpers ([`sort_patterns`], [`layout`], [`graph`]) hold the logic; the handlers only
//! read and serialize.

use crate::api::{ApiResult, AppState, Params, St, int, sid};
use crate::error::ApiError;
use axum::Json;
use axum::extract::{Path, State};
use p5_tracedb::read::{self as query, Reader as Db};
use p5_tracedb::schema::{AnalysisRun, PathNode, PathNodeHist, PathPattern};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// How patterns can be sorted (all descending), by their query-parameter names.
pub const SORTS: &[&str] = &[
    "expectation",
    "count",
    "expectation_per_count",
    "expectation_per_sqrt_count",
    "total",
];

/// Patterns sent at most per request.
const MAX_LIMIT: i64 = 10_000;

/// A pattern's weight: its expectation, or (nesting, convolution: every instance certain) its
/// count.
pub fn expectation(p: &PathPattern) -> f64 {
    p.expected.unwrap_or(p.instances as f64)
}

/// The value a pattern is sorted by under `sort` (one of [`SORTS`]).
pub fn sort_key(p: &PathPattern, sort: &str) -> f64 {
    let e = expectation(p);
    let n = (p.instances.max(1)) as f64;
    match sort {
        "count" => p.instances as f64,
        "expectation_per_count" => e / n,
        "expectation_per_sqrt_count" => e / n.sqrt(),
        "total" => e * p.mean_total_ns as f64,
        _ => e,
    }
}

/// Sorts patterns by `sort`, descending; ties keep the analysis' rank.
pub fn sort_patterns(patterns: &mut [PathPattern], sort: &str) {
    patterns.sort_by(|a, b| {
        sort_key(b, sort)
            .total_cmp(&sort_key(a, sort))
            .then(a.rank.cmp(&b.rank))
            .then(a.id.cmp(&b.id))
    });
}

/// A pattern as the list and the detail send it.
pub fn pattern_json(p: &PathPattern) -> Value {
    let e = expectation(p);
    json!({
        "id": p.id,
        "rank": p.rank,
        "signature": p.signature,
        "root": p.root_node,
        "count": p.instances,
        "expectation": e,
        "max_prob": p.max_prob,
        "mean_total_ns": p.mean_total_ns,
        "p50_total_ns": p.p50_total_ns,
        "p90_total_ns": p.p90_total_ns,
        "total_ns": e * p.mean_total_ns as f64,
        "expectation_per_count": sort_key(p, "expectation_per_count"),
        "expectation_per_sqrt_count": sort_key(p, "expectation_per_sqrt_count"),
    })
}

/// A run as listed.
fn run_json(r: &AnalysisRun, session_merged_at: i64) -> Value {
    let params: Value = serde_json::from_str(&r.params_json).unwrap_or(Value::Null);
    json!({
        "id": r.id,
        "algorithm": r.algorithm,
        "source": r.source,
        "messages": r.messages,
        "created_at_wall_ns": r.created_at_wall_ns,
        "params": params,
        // Made from an earlier merge of the session: its message ids may not match.
        "stale": r.session_merged_at_wall_ns != session_merged_at,
    })
}

/// The run `run` of session `sid`, or a 404 naming the runs there are.
pub async fn find_run(db: &Db, sid: i64, run: i64) -> Result<(AnalysisRun, i64), ApiError> {
    let session = crate::index::session(db, sid).await?;
    let runs = query::analysis_runs(db, sid).await?;
    let ids: Vec<String> = runs.iter().map(|r| r.id.to_string()).collect();
    runs.into_iter()
        .find(|r| r.id == run)
        .map(|r| (r, session.merged_at_wall_ns))
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "no analysis run {run} in session {sid} (runs: {})",
                if ids.is_empty() {
                    "none; run p5 analyze with --db".to_string()
                } else {
                    ids.join(", ")
                }
            ))
        })
}

/// Parses a run or pattern id from the path.
pub fn id(what: &str, s: &str) -> Result<i64, ApiError> {
    s.parse()
        .map_err(|_| ApiError::BadRequest(format!("bad {what} id {s:?}")))
}

/// `GET /sessions/{id}/runs`.
pub async fn runs(State(st): St, Path(s): Path<String>) -> ApiResult {
    let sid = sid(&s)?;
    let session = crate::index::session(&st.db, sid).await?;
    let runs = query::analysis_runs(&st.db, sid).await?;
    let list: Vec<Value> = runs
        .iter()
        .map(|r| run_json(r, session.merged_at_wall_ns))
        .collect();
    Ok(Json(json!({ "runs": list, "sorts": SORTS })))
}

/// `GET /sessions/{id}/runs/{run}/paths`.
pub async fn paths(
    State(st): St,
    Path((s, r)): Path<(String, String)>,
    axum::extract::Query(p): Params,
) -> ApiResult {
    let sid = sid(&s)?;
    let (run, merged_at) = find_run(&st.db, sid, id("run", &r)?).await?;
    let sort = p.get("sort").map(String::as_str).unwrap_or("expectation");
    if !SORTS.contains(&sort) {
        return Err(ApiError::BadRequest(format!(
            "sort must be one of {}",
            SORTS.join(", ")
        )));
    }
    let offset = int(&p, "offset")?.unwrap_or(0);
    let limit = int(&p, "limit")?.unwrap_or(500);
    if offset < 0 || !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::BadRequest(format!(
            "offset must be ≥ 0 and limit 1 to {MAX_LIMIT}"
        )));
    }
    let mut all = query::path_patterns(&st.db, sid, run.id).await?;
    if let Some(q) = p.get("q").filter(|q| !q.is_empty()) {
        all.retain(|p| p.signature.contains(q.as_str()));
    }
    sort_patterns(&mut all, sort);
    let total = all.len();
    let page: Vec<Value> = all
        .iter()
        .skip(offset as usize)
        .take(limit as usize)
        .map(pattern_json)
        .collect();
    Ok(Json(json!({
        "run": run_json(&run, merged_at),
        "sort": sort,
        "total": total,
        "offset": offset,
        "patterns": page,
    })))
}

/// A node placed on the pattern's timeline: mean entry offset from the root's entry and
/// whether it is on the critical path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Placed {
    /// Mean entry time after the root's entry.
    pub start_ns: i64,
    /// `start_ns` + mean latency (the entry when the latency is unknown).
    pub end_ns: i64,
    /// On the chain of last-ending children from the root.
    pub critical: bool,
}

/// Places every node of a pattern (parents before children, as stored): a child enters its
/// call delay after its parent entered; the critical path follows, from the root, the child
/// that ends last.
pub fn layout(nodes: &[PathNode]) -> Vec<Placed> {
    let pos: HashMap<i64, usize> = nodes.iter().enumerate().map(|(i, n)| (n.id, i)).collect();
    let mut out: Vec<Placed> = Vec::with_capacity(nodes.len());
    for n in nodes {
        let parent = n
            .parent_id
            .and_then(|p| pos.get(&p))
            .map(|&i| out[i].start_ns);
        let start = match parent {
            Some(ps) => ps.saturating_add(n.call_delay_mean_ns.unwrap_or(0).max(0)),
            None => 0,
        };
        let end = start.saturating_add(n.latency_mean_ns.unwrap_or(0).max(0));
        out.push(Placed {
            start_ns: start,
            end_ns: end,
            critical: false,
        });
    }
    let mut children: HashMap<i64, Vec<usize>> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        if let Some(p) = n.parent_id {
            children.entry(p).or_default().push(i);
        }
    }
    // A node without a latency (the root caller, whose own time nobody measured) lasts until
    // its last child ends; children come after parents, so walk backwards.
    for i in (0..nodes.len()).rev() {
        if nodes[i].latency_mean_ns.is_none()
            && let Some(c) = children.get(&nodes[i].id)
        {
            let last = c
                .iter()
                .map(|&j| out[j].end_ns)
                .max()
                .unwrap_or(out[i].end_ns);
            out[i].end_ns = out[i].end_ns.max(last);
        }
    }
    let mut at = nodes.iter().position(|n| n.parent_id.is_none());
    let mut guard = nodes.len();
    while let Some(i) = at {
        out[i].critical = true;
        guard = guard.saturating_sub(1);
        if guard == 0 {
            break;
        }
        at = children.get(&nodes[i].id).and_then(|c| {
            c.iter()
                .copied()
                .max_by_key(|&j| (out[j].end_ns, std::cmp::Reverse(nodes[j].ord)))
        });
    }
    out
}

/// One node as the detail sends it.
fn node_json(n: &PathNode, at: &Placed, hist: &[&PathNodeHist]) -> Value {
    let bins: Vec<Value> = hist.iter().map(|h| json!([h.bin, h.weight])).collect();
    json!({
        "id": n.id,
        "parent": n.parent_id,
        "ord": n.ord,
        "node": n.node,
        "kind": n.kind,
        "visit": n.visit,
        "call_delay_ns": n.call_delay_mean_ns,
        "latency_ns": n.latency_mean_ns,
        "net_delay_ns": n.net_delay_mean_ns,
        "samples": n.samples,
        "start_ns": at.start_ns,
        "end_ns": at.end_ns,
        "critical": at.critical,
        "hist": bins,
    })
}

/// `GET /sessions/{id}/runs/{run}/paths/{pattern}?offset=&limit=` (instances page).
pub async fn pattern(
    State(st): St,
    Path((s, r, pat)): Path<(String, String, String)>,
    axum::extract::Query(p): Params,
) -> ApiResult {
    let sid = sid(&s)?;
    let (run, _) = find_run(&st.db, sid, id("run", &r)?).await?;
    let pid = id("pattern", &pat)?;
    let offset = int(&p, "offset")?.unwrap_or(0).max(0);
    let limit = int(&p, "limit")?.unwrap_or(100).clamp(1, 1000);
    let detail = pattern_detail(&st, sid, run.id, pid, (offset, limit)).await?;
    Ok(Json(detail))
}

/// The detail document of one pattern.
pub async fn pattern_detail(
    st: &Arc<AppState>,
    sid: i64,
    run: i64,
    pid: i64,
    page: (i64, i64),
) -> Result<Value, ApiError> {
    let pattern = query::path_pattern(&st.db, sid, run, pid)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no pattern {pid} in run {run}")))?;
    let nodes = query::path_nodes(&st.db, sid, run, pid).await?;
    let hist = query::pattern_hist(&st.db, sid, run, pid).await?;
    let instances = query::pattern_instances(&st.db, sid, run, pid, page).await?;
    let placed = layout(&nodes);
    let mut by_node: HashMap<i64, Vec<&PathNodeHist>> = HashMap::new();
    for h in &hist {
        by_node.entry(h.node_id).or_default().push(h);
    }
    let nodes: Vec<Value> = nodes
        .iter()
        .zip(&placed)
        .map(|(n, at)| node_json(n, at, by_node.get(&n.id).map_or(&[][..], |v| v)))
        .collect();
    let instances: Vec<Value> = instances
        .iter()
        .map(|i| json!({ "id": i.id, "prob": i.prob, "t_start": i.t_start, "t_end": i.t_end }))
        .collect();
    Ok(json!({
        "pattern": pattern_json(&pattern),
        "nodes": nodes,
        "instances": { "offset": page.0, "items": instances },
    }))
}

/// An edge of the merged graph: weight (expected instances through it) and the call delays
/// seen on it with their weights, heaviest first.
#[derive(Debug, Clone, PartialEq)]
pub struct Edge {
    /// Caller's node name.
    pub from: String,
    /// Callee's node name.
    pub to: String,
    /// Sum of the weights of the patterns that hold it.
    pub weight: f64,
    /// (mean call delay, weight) per pattern, heaviest first.
    pub delays: Vec<(i64, f64)>,
}

/// Merges the edges of every pattern (weight = its expectation) into a graph of node names.
pub fn graph(patterns: &[(f64, Vec<PathNode>)]) -> (Vec<String>, Vec<Edge>) {
    let mut names: Vec<String> = Vec::new();
    let mut edges: HashMap<(String, String), Edge> = HashMap::new();
    for (w, nodes) in patterns {
        let by_id: HashMap<i64, &PathNode> = nodes.iter().map(|n| (n.id, n)).collect();
        for n in nodes {
            if !names.contains(&n.node) {
                names.push(n.node.clone());
            }
            let Some(parent) = n.parent_id.and_then(|p| by_id.get(&p)) else {
                continue;
            };
            let e = edges
                .entry((parent.node.clone(), n.node.clone()))
                .or_insert_with(|| Edge {
                    from: parent.node.clone(),
                    to: n.node.clone(),
                    weight: 0.0,
                    delays: Vec::new(),
                });
            e.weight += w;
            if let Some(d) = n.call_delay_mean_ns {
                e.delays.push((d, *w));
            }
        }
    }
    let mut edges: Vec<Edge> = edges.into_values().collect();
    for e in &mut edges {
        e.delays
            .sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        e.delays.truncate(8);
    }
    edges.sort_by(|a, b| {
        b.weight
            .total_cmp(&a.weight)
            .then_with(|| (&a.from, &a.to).cmp(&(&b.from, &b.to)))
    });
    (names, edges)
}

/// Patterns merged into the graph at most (the heaviest).
const GRAPH_PATTERNS: usize = 200;

/// `GET /sessions/{id}/runs/{run}/graph`.
pub async fn run_graph(State(st): St, Path((s, r)): Path<(String, String)>) -> ApiResult {
    let sid = sid(&s)?;
    let (run, _) = find_run(&st.db, sid, id("run", &r)?).await?;
    let stored = query::conv_edges(&st.db, sid, run.id).await?;
    if !stored.is_empty() {
        let edges: Vec<Edge> = stored
            .iter()
            .map(|e| Edge {
                from: e.from_node.clone(),
                to: e.to_node.clone(),
                weight: e.messages as f64,
                delays: e
                    .delay_ns
                    .map(|d| (d, e.messages as f64))
                    .into_iter()
                    .collect(),
            })
            .collect();
        let names = node_names(&edges);
        let mut doc = graph_json(&run.algorithm, (0, 0), &names, &edges);
        doc["spikes"] = spikes_json(&stored, &query::conv_spikes(&st.db, sid, run.id).await?);
        return Ok(Json(doc));
    }
    let params: Value = serde_json::from_str(&run.params_json).unwrap_or(Value::Null);
    if let Some(edges) = convolution_edges(&params) {
        let names = node_names(&edges);
        return Ok(Json(graph_json(&run.algorithm, (0, 0), &names, &edges)));
    }
    let mut pats = query::path_patterns(&st.db, sid, run.id).await?;
    let total = pats.len();
    sort_patterns(&mut pats, "expectation");
    let mut with_nodes = Vec::new();
    for p in pats.iter().take(GRAPH_PATTERNS) {
        let nodes = query::path_nodes(&st.db, sid, run.id, p.id).await?;
        with_nodes.push((expectation(p), nodes));
    }
    let (names, edges) = graph(&with_nodes);
    Ok(Json(graph_json(
        &run.algorithm,
        (with_nodes.len(), total),
        &names,
        &edges,
    )))
}

/// The node names of `edges`, in order of appearance.
fn node_names(edges: &[Edge]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for e in edges {
        for n in [&e.from, &e.to] {
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
    }
    names
}

/// A convolution run's spikes: where (the correlated edge's receiver → `to`), lag, height,
/// messages explained and the verdict, the kept ones first.
fn spikes_json(
    edges: &[p5_tracedb::schema::ConvEdge],
    spikes: &[p5_tracedb::schema::ConvSpike],
) -> Value {
    let at: HashMap<i64, &str> = edges.iter().map(|e| (e.id, e.to_node.as_str())).collect();
    let mut v: Vec<&p5_tracedb::schema::ConvSpike> = spikes.iter().collect();
    v.sort_by(|a, b| {
        (a.verdict != "edge")
            .cmp(&(b.verdict != "edge"))
            .then(b.height_sd.total_cmp(&a.height_sd))
    });
    Value::Array(
        v.iter()
            .map(|x| {
                json!({ "from": at.get(&x.edge_id).copied(), "to": x.to_node, "lag_ns": x.lag_ns,
                        "height_sd": x.height_sd, "messages": x.messages, "verdict": x.verdict })
            })
            .collect(),
    )
}

/// The graph document.
fn graph_json(
    algorithm: &str,
    patterns: (usize, usize),
    names: &[String],
    edges: &[Edge],
) -> Value {
    let edges: Vec<Value> = edges
        .iter()
        .map(|e| json!({ "from": e.from, "to": e.to, "weight": e.weight, "delays": e.delays }))
        .collect();
    json!({
        "algorithm": algorithm,
        "patterns": patterns.0,
        "patterns_total": patterns.1,
        "nodes": names,
        "edges": edges,
    })
}

/// A convolution run's own edges (its parameters keep them: from, to, message count and the
/// delay of the spike that linked them), when `params` has them.
pub fn convolution_edges(params: &Value) -> Option<Vec<Edge>> {
    let list = params.get("edges")?.as_array()?;
    Some(
        list.iter()
            .filter_map(|e| {
                let weight = e.get("messages")?.as_f64()?;
                let delays = e
                    .get("delay_ns")
                    .and_then(Value::as_i64)
                    .map(|d| vec![(d, weight)])
                    .unwrap_or_default();
                Some(Edge {
                    from: e.get("from")?.as_str()?.to_string(),
                    to: e.get("to")?.as_str()?.to_string(),
                    weight,
                    delays,
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use p5_tracedb::domain::{NodeKind, Visit};

    fn node(id: i64, parent: Option<i64>, ord: i64, name: &str, call: i64, lat: i64) -> PathNode {
        PathNode {
            session_id: 1,
            run_id: 1,
            pattern_id: 1,
            id,
            parent_id: parent,
            ord,
            node: name.into(),
            kind: NodeKind::Node,
            visit: Visit::Call,
            call_delay_mean_ns: Some(call),
            latency_mean_ns: Some(lat),
            net_delay_mean_ns: None,
            samples: 1,
        }
    }

    #[test]
    fn layout_places_children_and_follows_the_last_ending_child() {
        // web(0..100) calls db at +10 for 20 and cache at +40 for 50: cache ends last.
        let nodes = vec![
            node(1, None, 0, "web", 0, 100),
            node(2, Some(1), 0, "db", 10, 20),
            node(3, Some(1), 1, "cache", 40, 50),
            node(4, Some(2), 0, "disk", 5, 5),
        ];
        let at = layout(&nodes);
        assert_eq!((at[1].start_ns, at[1].end_ns), (10, 30));
        assert_eq!((at[2].start_ns, at[2].end_ns), (40, 90));
        assert_eq!((at[3].start_ns, at[3].end_ns), (15, 20));
        let crit: Vec<bool> = at.iter().map(|p| p.critical).collect();
        assert_eq!(crit, [true, false, true, false]);
        // Without its latency the root lasts until its last child ends.
        let mut open = nodes.clone();
        open[0].latency_mean_ns = None;
        assert_eq!(layout(&open)[0].end_ns, 90);
    }

    #[test]
    fn sorts_differ_by_key() {
        let p = |id, n, e: Option<f64>, mean| PathPattern {
            session_id: 1,
            run_id: 1,
            id,
            signature: format!("p{id}"),
            root_node: "c".into(),
            instances: n,
            expected: e,
            max_prob: None,
            mean_total_ns: mean,
            p50_total_ns: mean,
            p90_total_ns: mean,
            rank: id,
        };
        let mut v = vec![
            p(1, 100, Some(10.0), 5),
            p(2, 4, Some(4.0), 1000),
            p(3, 50, None, 2),
        ];
        let order = |v: &mut Vec<PathPattern>, s| {
            sort_patterns(v, s);
            v.iter().map(|p| p.id).collect::<Vec<_>>()
        };
        assert_eq!(order(&mut v, "count"), [1, 3, 2]);
        assert_eq!(order(&mut v, "expectation"), [3, 1, 2]);
        assert_eq!(order(&mut v, "expectation_per_count"), [2, 3, 1]);
        assert_eq!(order(&mut v, "expectation_per_sqrt_count"), [3, 2, 1]);
        assert_eq!(order(&mut v, "total"), [2, 3, 1]);
    }

    #[test]
    fn a_convolution_runs_edges_come_from_its_parameters() {
        let p = json!({ "edges": [
            { "from": "client", "to": "shop", "messages": 2000, "delay_ns": null },
            { "from": "shop", "to": "db", "messages": 1990, "delay_ns": 3000 } ] });
        let e = convolution_edges(&p).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(
            (e[1].weight, e[1].delays.clone()),
            (1990.0, vec![(3000, 1990.0)])
        );
        assert!(convolution_edges(&json!({})).is_none());
    }

    #[test]
    fn graph_merges_edges_of_patterns() {
        let a = vec![node(1, None, 0, "c", 0, 9), node(2, Some(1), 0, "s", 3, 4)];
        let b = vec![node(1, None, 0, "c", 0, 9), node(2, Some(1), 0, "s", 5, 4)];
        let (names, edges) = graph(&[(3.0, a), (1.0, b)]);
        assert_eq!(names, ["c", "s"]);
        assert_eq!(edges.len(), 1);
        assert_eq!(edges[0].weight, 4.0);
        assert_eq!(edges[0].delays, [(3, 3.0), (5, 1.0)]);
    }
}
