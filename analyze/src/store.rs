//! An [`AnalysisResult`] as rows of the analysis tables (migration 0004, docs/schema.md)
//! and back, without I/O ([`crate::db`] runs the queries).
//!
//! Patterns keep their order as `rank`; each pattern's call tree is its `path_node` rows
//! (ids per run, parents before children). Per node, the means of call delay, latency and
//! network delay are stored (rounded to the nanosecond) with the sample count, and the
//! latency distribution as a four-edge histogram in `path_node_hist`: bins at the minimum,
//! the median, the 90th percentile and the maximum, weighted 0.5, 0.4, 0.1 and 0 of the
//! samples (always four rows; equal edges repeat). Reading it back gives the
//! latency statistics exactly (mean rounded); call and network delays come back as their
//! means only, and a pattern's end-to-end latency as mean, median and 90th percentile.
//! Instances keep their probability, times and messages (`msg_ref` → `message.id`, read
//! back in message-id order); each message row names the path node it enters when the
//! producer knows it (ground truth), else the pattern's root.

use crate::pattern::{AnalysisResult, Instance, Pattern, PatternNode, Stats};
use crate::trace::Trace;
use crate::{Error, Result};
use p5_tracedb::analysis::RunResults;
use p5_tracedb::domain::Visit;
use p5_tracedb::read::Session;
use p5_tracedb::schema::{
    AnalysisRun, PathInstance, PathInstanceMessage, PathNode, PathNodeHist, PathPattern,
};
use std::collections::HashMap;

/// How a result's `msg_ref`s become `message.id`s, and which pattern node each enters.
#[derive(Debug, Clone, Default)]
pub struct MessageIds {
    /// `msg_ref` → message id; empty: they are the same (a trace read from the database).
    pub ids: HashMap<u64, i64>,
    /// `msg_ref` → index of the pattern node it enters (ground truth's `position`).
    pub positions: HashMap<u64, u32>,
}

impl MessageIds {
    /// The ids an import gives: message `i` of the trace (in its order) is id `i + 1`.
    pub fn of_import(trace: &Trace) -> MessageIds {
        Self::of_refs(trace.messages.iter().map(|m| m.msg_ref))
    }

    /// [`MessageIds::of_import`] from the trace's `msg_ref`s in its order.
    pub fn of_refs(refs: impl IntoIterator<Item = u64>) -> MessageIds {
        MessageIds {
            ids: refs
                .into_iter()
                .enumerate()
                .map(|(i, r)| (r, i as i64 + 1))
                .collect(),
            positions: HashMap::new(),
        }
    }

    fn id(&self, msg_ref: u64) -> Option<i64> {
        if self.ids.is_empty() {
            i64::try_from(msg_ref).ok()
        } else {
            self.ids.get(&msg_ref).copied()
        }
    }
}

fn round(x: f64) -> i64 {
    if x.is_finite() { x.round() as i64 } else { 0 }
}

/// The histogram edges and weights of a latency distribution (see the module docs).
fn hist_of(s: &Stats) -> [(i64, f64); 4] {
    let n = s.n as f64;
    [
        (s.min_ns, 0.5 * n),
        (s.p50_ns, 0.4 * n),
        (s.p90_ns, 0.1 * n),
        (s.max_ns, 0.0),
    ]
}

/// The latency statistics of a histogram (bins by edge): the four edges [`hist_of`] writes,
/// or, for another producer's histogram, its first edge, weighted quantiles and last edge.
fn stats_of_hist(bins: &[(i64, f64)], n: u64, mean: f64) -> Option<Stats> {
    let (first, last) = (bins.first()?, bins.last()?);
    if let [a, b, c, d] = bins {
        return Some(Stats {
            n,
            mean_ns: mean,
            p50_ns: b.0,
            p90_ns: c.0,
            min_ns: a.0,
            max_ns: d.0,
        });
    }
    let total: f64 = bins.iter().map(|b| b.1).sum();
    let quantile = |q: f64| {
        let mut before = 0.0;
        for &(edge, w) in bins {
            before += w;
            if before >= q * total {
                return edge;
            }
        }
        last.0
    };
    Some(Stats {
        n,
        mean_ns: mean,
        p50_ns: quantile(0.5),
        p90_ns: quantile(0.9),
        min_ns: first.0,
        max_ns: last.0,
    })
}

pub(crate) fn now_wall_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// The rows of run `run_id` of session `s` holding `result`.
pub fn result_rows(
    result: &AnalysisResult,
    s: &Session,
    run_id: i64,
    source: &str,
    ids: &MessageIds,
) -> (AnalysisRun, RunResults) {
    let sid = s.id;
    let mut rows = RunResults::default();
    let mut node_ids: Vec<Vec<i64>> = Vec::with_capacity(result.patterns.len());
    let mut next_node = 1i64;
    for (pi, p) in result.patterns.iter().enumerate() {
        let pattern_id = pi as i64 + 1;
        let lat = p.latency.as_ref();
        rows.patterns.push(PathPattern {
            session_id: sid,
            run_id,
            id: pattern_id,
            signature: p.signature.clone(),
            root_node: p.root_node.clone(),
            instances: i64::try_from(p.count).unwrap_or(i64::MAX),
            expected: Some(p.expectation),
            max_prob: Some(p.max_prob),
            mean_total_ns: lat.map_or(0, |l| round(l.mean_ns)),
            p50_total_ns: lat.map_or(0, |l| l.p50_ns),
            p90_total_ns: lat.map_or(0, |l| l.p90_ns),
            rank: pattern_id,
        });
        let ids: Vec<i64> = (0..p.nodes.len() as i64).map(|k| next_node + k).collect();
        next_node += p.nodes.len() as i64;
        for (k, n) in p.nodes.iter().enumerate() {
            let mean = |s: &Option<Stats>| s.as_ref().map(|s| round(s.mean_ns));
            let samples = [&n.latency, &n.call_delay, &n.net_delay]
                .iter()
                .filter_map(|s| s.as_ref().map(|s| s.n))
                .max()
                .unwrap_or(0);
            rows.nodes.push(PathNode {
                session_id: sid,
                run_id,
                pattern_id,
                id: ids[k],
                parent_id: n.parent.and_then(|p| ids.get(p as usize).copied()),
                ord: i64::from(n.ord),
                node: n.node.clone(),
                kind: n.kind,
                visit: Visit::Call,
                call_delay_mean_ns: mean(&n.call_delay),
                latency_mean_ns: mean(&n.latency),
                net_delay_mean_ns: mean(&n.net_delay),
                samples: i64::try_from(samples).unwrap_or(i64::MAX),
            });
            if let Some(l) = &n.latency {
                rows.hist
                    .extend(hist_of(l).into_iter().map(|(bin, weight)| PathNodeHist {
                        session_id: sid,
                        run_id,
                        node_id: ids[k],
                        bin,
                        weight,
                    }));
            }
        }
        node_ids.push(ids);
    }
    let mut messages = 0i64;
    for (ii, inst) in result.instances.iter().enumerate() {
        let Some(nodes) = node_ids.get(inst.pattern as usize) else {
            continue;
        };
        let id = ii as i64 + 1;
        rows.instances.push(PathInstance {
            session_id: sid,
            run_id,
            id,
            pattern_id: i64::from(inst.pattern) + 1,
            prob: inst.prob,
            t_start: inst.t_start,
            t_end: inst.t_end,
        });
        for (j, &r) in inst.messages.iter().enumerate() {
            let Some(message_id) = ids.id(r) else {
                continue;
            };
            let pos = inst
                .nodes
                .get(j)
                .or_else(|| ids.positions.get(&r))
                .copied()
                .unwrap_or(0) as usize;
            messages += 1;
            rows.instance_messages.push(PathInstanceMessage {
                session_id: sid,
                run_id,
                instance_id: id,
                message_id,
                node_id: nodes.get(pos).or(nodes.first()).copied().unwrap_or(0),
            });
        }
    }
    let run = AnalysisRun {
        session_id: sid,
        id: run_id,
        algorithm: result.algorithm.clone(),
        params_json: result.params.to_string(),
        source: source.to_owned(),
        session_merged_at_wall_ns: s.merged_at_wall_ns,
        created_at_wall_ns: now_wall_ns(),
        messages,
    };
    (run, rows)
}

/// Only the mean of a distribution is stored: its statistics read back as that value.
fn mean_only(mean: Option<i64>, n: u64) -> Option<Stats> {
    mean.map(|m| Stats {
        n,
        mean_ns: m as f64,
        p50_ns: m,
        p90_ns: m,
        min_ns: m,
        max_ns: m,
    })
}

/// A result from the rows of one run (the inverse of [`result_rows`], see the module docs).
pub fn result_of_rows(run: &AnalysisRun, rows: RunResults) -> Result<AnalysisResult> {
    let bad = |what: String| Error::Usage(format!("analysis run {}: {what}", run.id));
    let mut hist: HashMap<i64, Vec<(i64, f64)>> = HashMap::new();
    for h in rows.hist {
        hist.entry(h.node_id).or_default().push((h.bin, h.weight));
    }
    let pattern_index: HashMap<i64, u32> = rows
        .patterns
        .iter()
        .enumerate()
        .map(|(i, p)| (p.id, i as u32))
        .collect();
    let mut patterns: Vec<Pattern> = rows
        .patterns
        .iter()
        .map(|p| Pattern {
            signature: p.signature.clone(),
            root_node: p.root_node.clone(),
            count: u64::try_from(p.instances).unwrap_or(0),
            expectation: p.expected.unwrap_or(p.instances as f64),
            max_prob: p.max_prob.unwrap_or(1.0),
            latency: (p.instances > 0
                && (p.mean_total_ns, p.p50_total_ns, p.p90_total_ns) != (0, 0, 0))
                .then(|| Stats {
                    n: u64::try_from(p.instances).unwrap_or(0),
                    mean_ns: p.mean_total_ns as f64,
                    p50_ns: p.p50_total_ns,
                    p90_ns: p.p90_total_ns,
                    min_ns: p.p50_total_ns,
                    max_ns: p.p90_total_ns,
                }),
            nodes: Vec::new(),
        })
        .collect();
    // Node id → (pattern index, index within the pattern).
    let mut node_index: HashMap<i64, (u32, u32)> = HashMap::new();
    for n in rows.nodes {
        let pi = *pattern_index
            .get(&n.pattern_id)
            .ok_or_else(|| bad(format!("node {} of a missing pattern", n.id)))?;
        let p = &mut patterns[pi as usize];
        let k = p.nodes.len() as u32;
        node_index.insert(n.id, (pi, k));
        let samples = u64::try_from(n.samples).unwrap_or(0);
        let parent = match n.parent_id {
            None => None,
            Some(pid) => match node_index.get(&pid) {
                Some(&(ppi, pk)) if ppi == pi => Some(pk),
                _ => return Err(bad(format!("node {} has no parent {pid} before it", n.id))),
            },
        };
        let latency = match (hist.get(&n.id), n.latency_mean_ns) {
            (Some(bins), Some(m)) => stats_of_hist(bins, samples, m as f64),
            (None, m) => mean_only(m, samples),
            (Some(_), None) => None,
        };
        p.nodes.push(PatternNode {
            parent,
            ord: u32::try_from(n.ord).unwrap_or(0),
            node: n.node,
            kind: n.kind,
            call_delay: mean_only(n.call_delay_mean_ns, samples),
            latency,
            net_delay: mean_only(n.net_delay_mean_ns, samples),
        });
    }
    let mut instance_index: HashMap<i64, usize> = HashMap::new();
    let mut instances: Vec<Instance> = Vec::with_capacity(rows.instances.len());
    for i in rows.instances {
        let pattern = *pattern_index
            .get(&i.pattern_id)
            .ok_or_else(|| bad(format!("instance {} of a missing pattern", i.id)))?;
        instance_index.insert(i.id, instances.len());
        instances.push(Instance {
            pattern,
            prob: i.prob,
            t_start: i.t_start,
            t_end: i.t_end,
            messages: Vec::new(),
            nodes: Vec::new(),
        });
    }
    for m in rows.instance_messages {
        if let Some(&k) = instance_index.get(&m.instance_id) {
            instances[k]
                .messages
                .push(u64::try_from(m.message_id).unwrap_or(0));
        }
    }
    Ok(AnalysisResult {
        algorithm: run.algorithm.clone(),
        params: serde_json::from_str(&run.params_json).unwrap_or(serde_json::Value::Null),
        patterns,
        instances,
    })
}
