//! The pattern output every analysis shares (analysis.md §6; issue 15 item 6).
//!
//! An analysis finds *instances* (one causal path each: which messages, when, how probable)
//! and aggregates them by their *signature* into [`Pattern`]s with latency statistics per
//! node. The signature is the root caller, `>`, then the callee's call tree with children in
//! call order: `CLIENT>WS1(AUTH(DB),AP2(DB,DB))`. A root that calls several callees in turn
//! lists them with commas: `A>B,C(D)` (ours). A node name containing `\ ( ) , >` escapes it
//! with a backslash.
//!
//! A pattern's call tree is a preorder list of [`PatternNode`]s: node 0 is the root caller,
//! and every other node is one call (a callee visit) with its parent's index. Per node:
//! `latency` = return time − call time (including callees) and `call_delay` = call time −
//! the parent's call time (\[P5\] §5.1.1.4); both on the trace's times.
//!
//! [`Collector`] builds an [`AnalysisResult`] from instances; `output` writes it as a table,
//! JSON or DOT, and [`read_json`] reads the JSON back (`score` reads results). The
//! signature's text is `signature`'s, the aggregation `collect`'s.

use crate::trace::{NO_TIME, Time};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;

pub use crate::output::{Format, write, write_dot, write_json, write_table};

mod collect;
mod signature;

pub use collect::{Collector, Rank, Visit, nodes_entered};
pub use signature::{CallTree, parse_signature, signature, signature_of_nodes};

/// Distribution of a duration over a pattern's instances, in nanoseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Stats {
    /// Samples.
    pub n: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Median.
    pub p50_ns: i64,
    /// 90th percentile.
    pub p90_ns: i64,
    /// Smallest.
    pub min_ns: i64,
    /// Largest.
    pub max_ns: i64,
}

impl Stats {
    /// Probability-weighted statistics of `samples` (`weights` beside them): the weighted
    /// mean, and as percentiles the smallest sample whose cumulative weight reaches the
    /// fraction. `n` counts samples. `None` when there are none or no weight is positive.
    pub fn of_weighted(samples: &[i64], weights: &[f32]) -> Option<Stats> {
        let mut pairs: Vec<(i64, f64)> = samples
            .iter()
            .zip(weights)
            .map(|(&s, &w)| (s, f64::from(w).max(0.0)))
            .collect();
        let total: f64 = pairs.iter().map(|p| p.1).sum();
        if pairs.is_empty() || total <= 0.0 || !total.is_finite() {
            return None;
        }
        pairs.sort_unstable_by_key(|p| p.0);
        let mean = pairs.iter().map(|&(s, w)| s as f64 * w).sum::<f64>() / total;
        let quantile = |q: f64| {
            let mut acc = 0.0;
            for &(s, w) in &pairs {
                acc += w;
                if acc >= q * total * (1.0 - 1e-12) {
                    return s;
                }
            }
            pairs[pairs.len() - 1].0
        };
        Some(Stats {
            n: pairs.len() as u64,
            mean_ns: mean,
            p50_ns: quantile(0.5),
            p90_ns: quantile(0.9),
            min_ns: pairs[0].0,
            max_ns: pairs[pairs.len() - 1].0,
        })
    }

    /// Statistics of `samples` (sorted in place); `None` when there are none.
    pub fn of(samples: &mut [i64]) -> Option<Stats> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        let n = samples.len();
        let sum: i128 = samples.iter().map(|&s| i128::from(s)).sum();
        Some(Stats {
            n: n as u64,
            mean_ns: sum as f64 / n as f64,
            p50_ns: samples[(n - 1) / 2],
            p90_ns: samples[(n - 1) * 9 / 10],
            min_ns: samples[0],
            max_ns: samples[n - 1],
        })
    }
}

/// Whether a pattern node's timings were observed or inferred for a node without a trace
/// (WAP5 §5.1): the database's own kind, stored as `path_node.kind`.
pub use p5_tracedb::domain::NodeKind;

/// One node of a pattern's call tree.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PatternNode {
    /// Parent's index in [`Pattern::nodes`] (`None` for the root caller, node 0).
    pub parent: Option<u32>,
    /// Position among its parent's children (call order), from 0.
    pub ord: u32,
    /// Node name.
    pub node: String,
    /// Traced or not.
    pub kind: NodeKind,
    /// Call time − parent's call time.
    pub call_delay: Option<Stats>,
    /// Return time − call time, including callees.
    pub latency: Option<Stats>,
    /// Receive − send of the call message, where both are known.
    pub net_delay: Option<Stats>,
}

/// A causal path pattern: the instances with one signature.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Pattern {
    /// The signature, e.g. `CLIENT>WS1(AUTH(DB),AP2(DB,DB))`.
    pub signature: String,
    /// The root caller.
    pub root_node: String,
    /// Instances.
    pub count: u64,
    /// Σ probability of the instances (= count when every instance is certain).
    pub expectation: f64,
    /// The most probable instance's probability.
    pub max_prob: f64,
    /// End-to-end latency: last return − first call.
    pub latency: Option<Stats>,
    /// The call tree in preorder; node 0 is the root caller.
    pub nodes: Vec<PatternNode>,
}

/// One causal path instance.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Instance {
    /// Index of its pattern in [`AnalysisResult::patterns`].
    pub pattern: u32,
    /// Probability (1 for algorithms that are certain).
    pub prob: f64,
    /// First call time.
    pub t_start: Time,
    /// Last return (or call) time.
    pub t_end: Time,
    /// `msg_ref`s of its messages, in path order.
    pub messages: Vec<u64>,
    /// For each of `messages`, the index in its pattern's nodes of the node it enters (a
    /// call enters its callee's node, a return its caller's); empty when not known. Stored
    /// as `path_instance_message.node_id`; not part of the JSON output, not read back.
    #[serde(skip)]
    pub nodes: Vec<u32>,
}

/// What an analysis found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AnalysisResult {
    /// `nesting`, `convolution`, `linking`, `truth`, …
    pub algorithm: String,
    /// The parameters it ran with.
    pub params: serde_json::Value,
    /// Patterns, most frequent first.
    pub patterns: Vec<Pattern>,
    /// Instances.
    pub instances: Vec<Instance>,
}

/// Reads a result (or a ground truth, which is a result with more fields) from JSON.
pub fn read_json(path: &Path) -> Result<AnalysisResult> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_slice(&bytes).map_err(|cause| Error::Json {
        path: path.into(),
        cause,
    })
}

/// Writes `value` as one line of JSON to `path` (a result, a ground truth).
pub fn write_json_file<T: Serialize>(value: &T, path: &Path) -> Result<()> {
    use std::io::Write;
    let f = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let mut w = std::io::BufWriter::new(f);
    serde_json::to_writer(&mut w, value).map_err(|e| Error::io(path, std::io::Error::other(e)))?;
    w.write_all(b"\n")
        .and_then(|()| w.flush())
        .map_err(|e| Error::io(path, e))
}
