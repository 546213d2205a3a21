//! The path graph (\[P5\] §5.2, Fig. 6): depth first from a root, each node's incoming
//! messages correlated with each set of messages it sends; every spike is an edge labelled
//! with its delay and the messages it explains, and those messages are followed further.
//!
//! Ours, where the paper only names its filters (analysis.md §1.2, issue 17): delays are
//! ≥ 0; an edge needs `min_messages` messages; at most `max_depth` edges deep; no cycles — a
//! path never returns to a node already on it (with a (node, delay) rule instead, the returns
//! of an RPC system start ever new spurious paths: 8,073 edges in 69 s on the multi-tier
//! trace).

use super::Params;
use super::signal::{Correlator, indicator};
use super::spikes::{Spike, spikes, split};
use crate::hash::FxHashMap;
use crate::trace::{NodeId, Time, Trace};
use rustfft::num_complex::Complex;
use serde::Serialize;

/// One edge of the path graph.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Edge {
    /// Index of the edge it continues (`None` for an edge out of the root).
    pub parent: Option<u32>,
    /// Sender.
    pub from: String,
    /// Receiver.
    pub to: String,
    /// Messages on it: all of `from → to` for a root edge, else those the delay explains.
    pub messages: u64,
    /// The delay from a message into `from` to this one (ns; `None` for a root edge).
    pub delay_ns: Option<Time>,
    /// The spike's height in standard deviations of the correlation.
    pub height_sd: Option<f64>,
}

/// A spike of one correlation: under which edge it was found, where the receiver's messages
/// went, and whether it became an edge.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpikeSeen {
    /// The edge whose messages were correlated (index into the edges).
    pub edge: u32,
    /// The receiver's receiver.
    pub to: String,
    /// Lag (ns).
    pub lag_ns: Time,
    /// Height in standard deviations.
    pub height_sd: f64,
    /// Messages its delay explains.
    pub messages: u64,
    /// `edge`, `cycle` or `few-messages`.
    pub verdict: &'static str,
    /// The edge it became.
    pub child: Option<u32>,
}

/// What a walk found: edges and every spike seen.
#[derive(Debug, Default)]
pub struct Found {
    /// Edges, depth first.
    pub edges: Vec<Edge>,
    /// Spikes, in the order the walk saw them.
    pub spikes: Vec<SpikeSeen>,
}

/// Message times per (sender, receiver), sorted, and each sender's receivers.
#[derive(Debug)]
pub struct Flows {
    times: FxHashMap<(NodeId, NodeId), Vec<Time>>,
    to: FxHashMap<NodeId, Vec<NodeId>>,
    /// First message time.
    pub t0: Time,
    /// Quanta the trace spans.
    pub len: usize,
}

impl Flows {
    /// Groups `trace`'s messages (each at its send time, else its receive time).
    pub fn of(trace: &Trace, quantum: Time) -> Flows {
        let mut times: FxHashMap<(NodeId, NodeId), Vec<Time>> = FxHashMap::default();
        let (mut t0, mut t1) = (Time::MAX, Time::MIN);
        for m in &trace.messages {
            let t = m.time();
            if t == crate::trace::NO_TIME {
                continue;
            }
            (t0, t1) = (t0.min(t), t1.max(t));
            times.entry((m.src, m.dst)).or_default().push(t);
        }
        let mut to: FxHashMap<NodeId, Vec<NodeId>> = FxHashMap::default();
        for (&(s, d), v) in times.iter_mut() {
            v.sort_unstable();
            to.entry(s).or_default().push(d);
        }
        for v in to.values_mut() {
            v.sort_unstable();
        }
        // A span too long for i64 (times from both ends of the range) is too many quanta.
        let len = if t0 <= t1 {
            t1.checked_sub(t0)
                .and_then(|span| usize::try_from(span / quantum.max(1) + 1).ok())
                .unwrap_or(usize::MAX)
        } else {
            0
        };
        Flows { times, to, t0, len }
    }

    /// The receivers `node` sends to.
    pub fn receivers(&self, node: NodeId) -> &[NodeId] {
        self.to.get(&node).map_or(&[], Vec::as_slice)
    }

    /// The times of `from → to`.
    pub fn times(&self, from: NodeId, to: NodeId) -> &[Time] {
        self.times.get(&(from, to)).map_or(&[], Vec::as_slice)
    }
}

/// The messages of `z` that follow one of `v` (sorted) after a delay in `[lo, hi]`.
fn caused(v: &[Time], z: &[Time], (lo, hi): (Time, Time)) -> Vec<Time> {
    z.iter()
        .copied()
        .filter(|&t| {
            let i = v.partition_point(|&x| x < t.saturating_sub(hi));
            v.get(i).is_some_and(|&x| x <= t.saturating_sub(lo))
        })
        .collect()
}

/// The correlations a walk computes: at the quantum, and (when a cluster needs a second look,
/// [`super::spikes::split`]) at half of it.
struct Correlators {
    coarse: Correlator,
    fine: std::cell::OnceCell<Correlator>,
    len: usize,
}

impl Correlators {
    fn new(len: usize) -> Correlators {
        Correlators {
            coarse: Correlator::new(len),
            fine: std::cell::OnceCell::new(),
            len,
        }
    }
}

/// The signal of the messages into a node, as [`delays`] correlates it with each set the node
/// sends: its spectrum at the quantum and (computed when first needed) at half of it.
struct Source<'a> {
    times: &'a [Time],
    coarse: Vec<Complex<f64>>,
    fine: std::cell::OnceCell<Vec<Complex<f64>>>,
}

/// The spikes of `v` against `z`, each with its delay and the window of delays whose messages
/// it explains: `d ± v`, except that spikes split out of one cluster share it at their
/// midpoints.
fn delays(
    flows: &Flows,
    corr: &Correlators,
    p: &Params,
    v: &Source,
    z: &[Time],
) -> Vec<(Spike, Time, (Time, Time))> {
    let s2 = indicator(z, flows.t0, p.quantum, flows.len);
    let c = corr
        .coarse
        .lagged_spectra(&v.coarse, &corr.coarse.spectrum(&s2), flows.len);
    let (mean, sd) = super::spikes::moments(&c);
    let mut fine: Option<Vec<Spike>> = None;
    let mut out = Vec::new();
    for sp in spikes(&c, p.spike_sd, p.valley_sd) {
        let half = p.quantum / 2;
        // Two delays in neighbouring quanta: two points at spike height in a cluster of two
        // or three lags. (Wider clusters are a spread delay, for the valley rule alone.)
        if sp.peaks != 2 || sp.span.1 - sp.span.0 > 2 || half == 0 {
            let d = sp.lag as Time * p.quantum;
            out.push((sp, d, (d - p.tolerance, d + p.tolerance)));
            continue;
        }
        let fine = fine.get_or_insert_with(|| {
            let f = corr.fine.get_or_init(|| Correlator::new(2 * corr.len));
            let fa = v
                .fine
                .get_or_init(|| f.spectrum(&indicator(v.times, flows.t0, half, 2 * corr.len)));
            let b = indicator(z, flows.t0, half, 2 * corr.len);
            let c = f.lagged_spectra(fa, &f.spectrum(&b), 2 * corr.len);
            spikes(&c, p.spike_sd, p.valley_sd)
        });
        let parts = split(&sp, fine, |lag| (c[lag] - mean) / sd);
        let ds: Vec<Time> = parts.iter().map(|s| s.lag as Time * p.quantum).collect();
        for (i, part) in parts.into_iter().enumerate() {
            let d = ds[i];
            let lo = match i.checked_sub(1) {
                Some(j) => (d - p.tolerance).max((ds[j] + d) / 2),
                None => d - p.tolerance,
            };
            let hi = match ds.get(i + 1) {
                Some(&n) => (d + p.tolerance).min((d + n) / 2 - 1),
                None => d + p.tolerance,
            };
            out.push((part, d, (lo, hi)));
        }
    }
    out
}

/// Walks the graph from `root`.
pub fn from_root(trace: &Trace, flows: &Flows, root: NodeId, p: &Params) -> Found {
    let corr = Correlators::new(flows.len);
    let mut out = Found::default();
    for &j in flows.receivers(root) {
        let v = flows.times(root, j);
        if (v.len() as u64) < p.min_messages {
            continue;
        }
        out.edges.push(Edge {
            parent: None,
            from: trace.nodes.name(root).to_owned(),
            to: trace.nodes.name(j).to_owned(),
            messages: v.len() as u64,
            delay_ns: None,
            height_sd: None,
        });
        let mut path = vec![(root, usize::MAX), (j, 0)];
        let at = out.edges.len() as u32 - 1;
        walk(trace, flows, &corr, p, (j, v, at), &mut path, &mut out);
    }
    out
}

/// Follows edge `parent` (into `j`, messages `v`): correlates `v` with each set of messages
/// `j` sends and continues along every spike that explains enough messages.
fn walk(
    trace: &Trace,
    flows: &Flows,
    corr: &Correlators,
    p: &Params,
    (j, v, parent): (NodeId, &[Time], u32),
    path: &mut Vec<(NodeId, usize)>,
    out: &mut Found,
) {
    if path.len() > p.max_depth {
        return;
    }
    let source = Source {
        times: v,
        coarse: corr
            .coarse
            .spectrum(&indicator(v, flows.t0, p.quantum, flows.len)),
        fine: std::cell::OnceCell::new(),
    };
    for &k in flows.receivers(j) {
        let z = flows.times(j, k);
        if (z.len() as u64) < p.min_messages {
            continue;
        }
        let cycle = path.iter().any(|&(n, _)| n == k);
        // Every spike with the messages it explains, the most frequent delay first (Fig. 9).
        let mut found: Vec<(Spike, Time, Vec<Time>)> = Vec::new();
        for (sp, d, window) in delays(flows, corr, p, &source, z) {
            let w = if cycle {
                Vec::new()
            } else {
                caused(v, z, window)
            };
            let verdict = if cycle {
                Some("cycle")
            } else if (w.len() as u64) < p.min_messages {
                Some("few-messages")
            } else {
                None
            };
            if let Some(verdict) = verdict {
                out.spikes.push(SpikeSeen {
                    edge: parent,
                    to: trace.nodes.name(k).to_owned(),
                    lag_ns: d,
                    height_sd: sp.height_sd,
                    messages: w.len() as u64,
                    verdict,
                    child: None,
                });
            } else {
                found.push((sp, d, w));
            }
        }
        found.sort_by(|a, b| b.2.len().cmp(&a.2.len()).then(a.1.cmp(&b.1)));
        for (sp, d, w) in found {
            out.edges.push(Edge {
                parent: Some(parent),
                from: trace.nodes.name(j).to_owned(),
                to: trace.nodes.name(k).to_owned(),
                messages: w.len() as u64,
                delay_ns: Some(d),
                height_sd: Some(sp.height_sd),
            });
            let at = out.edges.len() as u32 - 1;
            out.spikes.push(SpikeSeen {
                edge: parent,
                to: trace.nodes.name(k).to_owned(),
                lag_ns: d,
                height_sd: sp.height_sd,
                messages: w.len() as u64,
                verdict: "edge",
                child: Some(at),
            });
            path.push((k, sp.lag));
            walk(trace, flows, corr, p, (k, &w, at), path, out);
            path.pop();
        }
    }
}
