//! `p5 analyze convolution`: Project 5's convolution algorithm (\[P5\] §5.2, Fig. 6;
//! `../shared/analysis.md` §1.2) — causal paths and their delays from message timestamps
//! alone, for free-form messages (no call/return needed).
//!
//! [`signal`] (square-root indicator functions, linear cross-correlation by FFT), [`spikes`]
//! (N standard deviations up, separated by S-deviation valleys), [`graph`] (the depth-first
//! path graph from a root, with the filters the paper only names). The algorithm is pure;
//! [`job`] is how a [`crate::job`] runs it, stores its graph and prints it.
//!
//! Roots, where the graph starts: the nodes named (`--root`), else every node that sends and
//! never receives, else the first sender (in an RPC system every client also receives its
//! replies).

pub mod graph;
pub mod job;
pub mod signal;
pub mod spikes;

use crate::pattern::{AnalysisResult, Pattern, PatternNode, Stats};
use crate::trace::{NodeId, Time, Trace};
use crate::{Error, Result};
use graph::Edge;

/// Longest signal (quanta) a run may correlate: beyond, the quantum is too fine for the
/// trace's length (a 2^24-point signal is 128 MB of FFT buffers).
pub const MAX_QUANTA: usize = 1 << 24;

/// Parameters of [`convolution`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// The quantum μ (ns).
    pub quantum: Time,
    /// A spike is this many standard deviations above the mean (N = 4).
    pub spike_sd: f64,
    /// Spikes are apart when a point below this many deviations lies between (S = 3).
    pub valley_sd: f64,
    /// How far a message may be from its delay (v; ns; default μ).
    pub tolerance: Time,
    /// An edge needs this many messages (100, \[P5\] §7.5.7).
    pub min_messages: u64,
    /// Longest path, in edges.
    pub max_depth: usize,
}

impl Params {
    /// The paper's parameters at quantum `q` (ns).
    pub fn at(q: Time) -> Params {
        Params {
            quantum: q,
            spike_sd: 4.0,
            valley_sd: 3.0,
            tolerance: q,
            min_messages: 100,
            max_depth: 16,
        }
    }
}

/// What a convolution run found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Graph {
    /// The edges, depth first from each root.
    pub edges: Vec<Edge>,
    /// Every spike the correlations showed (`edge` indices into [`Graph::edges`]).
    pub spikes: Vec<graph::SpikeSeen>,
    /// Its linear paths, root to leaf, in the shared pattern output (count: the messages of
    /// the path's last edge; call delay of a node: its edge's delay).
    pub result: AnalysisResult,
}

/// The roots: `names` if given, else every node that sends and never receives, else the
/// sender of the first message.
pub fn roots(trace: &Trace, names: &[String]) -> Result<Vec<NodeId>> {
    if !names.is_empty() {
        return names
            .iter()
            .map(|n| {
                trace
                    .nodes
                    .get(n)
                    .ok_or_else(|| Error::Usage(format!("--root {n}: no such node")))
            })
            .collect();
    }
    let mut sends = vec![false; trace.nodes.len()];
    let mut recvs = vec![false; trace.nodes.len()];
    for m in &trace.messages {
        sends[m.src as usize] = true;
        recvs[m.dst as usize] = true;
    }
    let pure: Vec<NodeId> = (0..trace.nodes.len() as NodeId)
        .filter(|&n| sends[n as usize] && !recvs[n as usize])
        .collect();
    if !pure.is_empty() {
        return Ok(pure);
    }
    // Every node also receives (an RPC system's clients get replies): the first sender.
    Ok(trace
        .messages
        .iter()
        .filter(|m| m.time() != crate::trace::NO_TIME)
        .min_by_key(|m| m.time())
        .map(|m| vec![m.src])
        .unwrap_or_default())
}

/// Runs convolution from `roots` over `trace`.
pub fn convolution(trace: &Trace, roots: &[NodeId], p: &Params) -> Result<Graph> {
    if p.quantum <= 0 {
        return Err(Error::Usage("the quantum must be positive".into()));
    }
    let flows = graph::Flows::of(trace, p.quantum);
    if flows.len > MAX_QUANTA {
        return Err(Error::Usage(format!(
            "the trace spans {} quanta of {} ns; at most {MAX_QUANTA}: use a larger --quantum",
            flows.len, p.quantum
        )));
    }
    let (mut edges, mut spikes) = (Vec::new(), Vec::new());
    for &r in roots {
        let base = edges.len() as u32;
        let found = graph::from_root(trace, &flows, r, p);
        edges.extend(found.edges.into_iter().map(|mut e| {
            e.parent = e.parent.map(|x| x + base);
            e
        }));
        spikes.extend(found.spikes.into_iter().map(|mut s| {
            s.edge += base;
            s.child = s.child.map(|c| c + base);
            s
        }));
    }
    let result = linear_paths(&edges, p);
    Ok(Graph {
        edges,
        spikes,
        result,
    })
}

/// Every root-to-leaf path as a pattern: `A>B(C(D))`.
fn linear_paths(edges: &[Edge], p: &Params) -> AnalysisResult {
    let mut is_parent = vec![false; edges.len()];
    for e in edges {
        if let Some(x) = e.parent {
            is_parent[x as usize] = true;
        }
    }
    let mut patterns = Vec::new();
    for (leaf, e) in edges.iter().enumerate().filter(|(i, _)| !is_parent[*i]) {
        let mut chain = vec![leaf];
        let mut at = e.parent;
        while let Some(x) = at {
            chain.push(x as usize);
            at = edges[x as usize].parent;
        }
        chain.reverse();
        let root = &edges[chain[0]].from;
        let mut nodes = vec![PatternNode {
            node: root.clone(),
            ..PatternNode::default()
        }];
        for (k, &i) in chain.iter().enumerate() {
            let d = edges[i].delay_ns.unwrap_or(0);
            nodes.push(PatternNode {
                parent: Some(k as u32),
                node: edges[i].to.clone(),
                call_delay: Some(Stats {
                    n: edges[i].messages,
                    mean_ns: d as f64,
                    p50_ns: d,
                    p90_ns: d,
                    min_ns: d,
                    max_ns: d,
                }),
                ..PatternNode::default()
            });
        }
        let signature = crate::pattern::signature_of_nodes(&nodes);
        patterns.push(Pattern {
            signature,
            root_node: root.clone(),
            count: e.messages,
            expectation: e.messages as f64,
            max_prob: 1.0,
            nodes,
            ..Pattern::default()
        });
    }
    patterns.sort_by(|a, b| b.count.cmp(&a.count).then(a.signature.cmp(&b.signature)));
    AnalysisResult {
        algorithm: "convolution".into(),
        params: serde_json::json!({
            "quantum_ns": p.quantum,
            "spike_sd": p.spike_sd,
            "valley_sd": p.valley_sd,
            "tolerance_ns": p.tolerance,
            "min_messages": p.min_messages,
            "max_depth": p.max_depth,
            "edges": edges,
        }),
        patterns,
        instances: Vec::new(),
    }
}
