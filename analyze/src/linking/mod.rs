//! `p5 analyze linking`: WAP5's message-linking algorithm (\[WAP5\] §5; `../shared/analysis.md`
//! §1.3) — probabilistic causal trees for free-form messages, calls and returns alike.
//!
//! Steps, one module each: [`links`] (the mean causal delay per edge, each message's
//! possible parents weighted `e^(−λ·gap)` against spontaneity at `e^(−y)`, normalised,
//! classified probably-true / try-both / probably-false, inverted into possible-children
//! lists) and [`trees`] (instances from every root down, `2^k` for `k` try-both links, capped
//! per root; their probabilities as products; aggregation into patterns with
//! probability-weighted node statistics; walked on all cores, counted in root order,
//! `found`). Before linking, fat messages on one connection are
//! merged (\[WAP5\] §2.3); after it, names are aggregated (clients become `CLIENT`,
//! \[WAP5\] §2.5.1) — linking itself runs on the nodes as read, so two clients that share a
//! server never look like one.
//!
//! Ours, where the paper is silent (analysis.md §1.3): try-both when 0.3 ≤ p ≤ 0.7 or p is
//! the child's most likely cause; at most 10 try-both links per root, after which only the
//! most likely cause is followed; candidates within the window `x`; a root's instances carry
//! the probability that it was spontaneous; instances below `min_prob` are not built.
//! [`offsets`] takes the pairwise clock offsets off network delays (\[WAP5\] §5.2).
//! Ours is the default ([`Params::ours`]): [`kernel`] (a delay distribution learned from the
//! trace, refitted by EM, at most `links::KERNEL_CANDIDATES` candidates per child) and
//! [`exclusive`] (one child per receiver); the paper's weights are [`Params::paper`]. With
//! the paper's weights the multi-tier patterns of \[P5\] Fig. 10 are lost: the mean gap to the
//! newest message is far shorter than the true call delays, so a true parent a few arrivals
//! back weighs less than spontaneity.
//!
//! When the caller gives its trace up ([`linking_owned`], as `p5 analyze linking` does) fat
//! messages are merged in place; [`linking`] merges a copy. Clients start paths
//! (`client_roots`, on by default): a node aggregated into `CLIENT`, or one only ever answered,
//! sends only spontaneous messages, so a client that chains requests is split into one path per
//! request, as nesting does. On a recorded session each message's parent comes from its
//! sender's thread ([`crate::causality`]) unless the run is a black box.

pub mod exclusive;
mod found;
mod gallop;
pub mod job;
pub mod kernel;
pub mod links;
pub mod offsets;
pub mod trees;

use crate::clients::aggregate_names;
use crate::pattern::{AnalysisResult, Collector, Rank};
use crate::progress::Progress;
use crate::trace::{NodeId, Time, Trace};
use links::EdgeDelay;
use std::borrow::Cow;
use trees::{Builder, TreeCounts};

/// How a candidate parent is weighed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KernelKind {
    /// \[WAP5\]'s `e^(−λ·gap)` with `λ` = 1 / the edge's mean gap to the newest message in.
    #[default]
    Exponential,
    /// Ours: background-subtracted gap histograms per (sender, node, receiver)
    /// ([`kernel`]).
    Empirical,
}

crate::choices!(KernelKind { "exponential" => KernelKind::Exponential, "empirical" => KernelKind::Empirical });

/// Parameters of [`linking`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// The window `x` (ns): a parent arrived at most this long before its child left.
    pub window: Time,
    /// Spontaneity weighs like a link of `y` mean delays.
    pub spontaneous_y: f64,
    /// Links with a probability in this range are tried both ways.
    pub try_both: (f64, f64),
    /// At most this many try-both links per root.
    pub max_try_both: u32,
    /// At most this many messages per instance.
    pub max_messages: usize,
    /// Instances less probable than this are not built (ours; bounds the instances per root
    /// to `1 / min_prob`).
    pub min_prob: f64,
    /// Rename clients `CLIENT` (\[WAP5\] §2.5.1).
    pub aggregate_clients: bool,
    /// An endpoint with at least this many peers is fixed (a server's).
    pub fixed_port_peers: usize,
    /// Merge the pieces of a message written in several writes (\[WAP5\] §2.3).
    pub coalesce: bool,
    /// The order of the patterns.
    pub rank: Rank,
    /// How candidates are weighed.
    pub kernel: KernelKind,
    /// A message causes at most one message per receiver, a return one next step (ours; off
    /// is the paper's way): candidates are balanced ([`exclusive::Balancer`]) and a parent's
    /// possible children towards one receiver are alternatives in step 3, unless their
    /// probabilities sum to more than 1.5 (parallel calls).
    pub exclusive: bool,
    /// EM rounds refitting the empirical kernel to the links it gave.
    pub refits: u32,
    /// Clients only start paths (ours, on by default): every message out of a client
    /// (\[WAP5\] §2.5.1's: a node that never uses a fixed port, or one named `CLIENT`) or
    /// out of a node that was only ever answered, never called, is spontaneous. Without it a
    /// closed-loop client chains each request to the reply before it.
    pub client_roots: bool,
    /// p5 mode: where the trace knows which recorded thread sent and received each message
    /// (a p5 session), a message's cause is the last message its sender's thread received
    /// for the request it was serving ([`crate::causality`]), with probability 1; the
    /// weights decide only the rest (messages of untraced nodes). On by default; off, or on
    /// a trace without threads, linking runs as the paper's black box.
    pub threads: bool,
}

impl Default for Params {
    /// Ours ([`Params::ours`]): it meets issue 18's accuracy targets, where the paper's
    /// weights ([`Params::paper`]) miss the multi-tier patterns, within its time budget
    /// (ARCHITECTURE.md).
    fn default() -> Self {
        Params::ours()
    }
}

impl Params {
    /// The paper's weights: `e^(−gap/d)` against `e^(−y)`, independent children, no refits
    /// (`--kernel exponential --exclusive false --refits 0`).
    pub fn paper() -> Self {
        Params {
            window: 2_000_000_000,
            spontaneous_y: 4.0,
            try_both: (0.3, 0.7),
            max_try_both: 10,
            max_messages: 10_000,
            min_prob: 0.01,
            aggregate_clients: true,
            fixed_port_peers: crate::clients::FIXED_PORT_PEERS,
            coalesce: true,
            rank: Rank::Expectation,
            kernel: KernelKind::Exponential,
            exclusive: false,
            refits: 0,
            client_roots: true,
            threads: true,
        }
    }

    /// Ours: the empirical kernel ([`kernel`]), exclusive children
    /// ([`exclusive`]) and [`REFITS`] EM rounds.
    pub fn ours() -> Self {
        Params {
            kernel: KernelKind::Empirical,
            exclusive: true,
            refits: REFITS,
            ..Params::paper()
        }
    }
}

/// EM rounds refitting the empirical kernel in [`Params::ours`].
pub const REFITS: u32 = 5;

/// What a linking run did besides its patterns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    /// Messages linked (after fat messages were merged).
    pub messages: u64,
    /// Messages merged into the one before them.
    pub coalesced: u64,
    /// Links kept as probably-true.
    pub true_links: u64,
    /// Links kept as try-both.
    pub try_both_links: u64,
    /// Probably-false links.
    pub false_links: u64,
    /// Nodes that stamped no time of their own.
    pub untraced: Vec<String>,
    /// Nodes renamed `CLIENT`.
    pub clients: u64,
    /// Step 3's counts.
    pub trees: TreeCounts,
    /// Step 1's delay estimates, per edge between the printed (aggregated) names.
    pub edges: Vec<NamedDelay>,
    /// What the recorded threads placed (p5 mode; `None`: the black box ran alone).
    pub threads: Option<crate::causality::CauseCounts>,
}

/// Step 1's estimate for the edges between two printed names.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedDelay {
    /// Sender.
    pub from: String,
    /// Receiver.
    pub to: String,
    /// Messages.
    pub messages: u64,
    /// Those with a message into the sender within the window before them.
    pub caused: u64,
    /// Mean gap since the newest message into the sender (ns), over the caused ones.
    pub mean_ns: Option<f64>,
}

/// The printed name of every node: after client aggregation thousands of endpoints share
/// one name, held once.
#[derive(Debug, Clone, Default)]
pub struct Names {
    /// The distinct printed names.
    pub list: Vec<String>,
    /// Each node's index in `list`.
    pub of: Vec<NodeId>,
}

impl Names {
    /// Node `n`'s printed name.
    pub fn name(&self, n: NodeId) -> &str {
        self.of
            .get(n as usize)
            .and_then(|&i| self.list.get(i as usize))
            .map_or("?", String::as_str)
    }

    /// The names of `trace`'s nodes, clients aggregated into `CLIENT` or as read; and how
    /// many nodes became `CLIENT`.
    fn of(trace: &Trace, p: &Params) -> (Names, u64) {
        if p.aggregate_clients {
            let agg = aggregate_names(trace, p.fixed_port_peers);
            let list = agg.trace.nodes.names().map(str::to_owned).collect();
            let names = Names { list, of: agg.map };
            (names, agg.clients as u64)
        } else {
            let names = Names {
                list: trace.nodes.names().map(str::to_owned).collect(),
                of: (0..trace.nodes.len() as NodeId).collect(),
            };
            (names, 0)
        }
    }
}

/// Step 1's estimates summed over the edges whose ends print alike.
fn named(edges: &[EdgeDelay], names: &Names) -> Vec<NamedDelay> {
    let mut by: std::collections::BTreeMap<(&str, &str), (u64, u64, f64)> = Default::default();
    let name = |n: u32| names.name(n);
    for e in edges {
        let a = by.entry((name(e.src), name(e.dst))).or_default();
        a.0 += e.messages;
        a.1 += e.caused;
        a.2 += e.mean_ns.unwrap_or(0.0) * e.caused as f64;
    }
    by.into_iter()
        .map(|((from, to), (messages, caused, sum))| NamedDelay {
            from: from.to_owned(),
            to: to.to_owned(),
            messages,
            caused,
            mean_ns: (caused > 0).then(|| sum / caused as f64),
        })
        .collect()
}

/// Infers the causal paths of `trace` (messages in time order; sorted here if not). Merging
/// the pieces of fat messages (`Params::coalesce`) or sorting works on a copy of the trace:
/// [`linking_owned`] saves that copy where the caller no longer needs the trace.
pub fn linking(
    trace: &Trace,
    p: &Params,
    progress: &mut dyn FnMut(Progress),
) -> (AnalysisResult, Counts) {
    run(Cow::Borrowed(trace), p, progress)
}

/// [`linking`] on a trace the caller gives up: merged and sorted in place, without a copy
/// (`p5 analyze linking`: a capture's messages all have connections, and the copy cost 56
/// bytes a message at the peak).
pub fn linking_owned(
    trace: Trace,
    p: &Params,
    progress: &mut dyn FnMut(Progress),
) -> (AnalysisResult, Counts) {
    run(Cow::Owned(trace), p, progress)
}

fn run(
    mut trace: Cow<'_, Trace>,
    p: &Params,
    progress: &mut dyn FnMut(Progress),
) -> (AnalysisResult, Counts) {
    let mut counts = Counts::default();
    if !trace.messages.is_sorted_by_key(|m| m.time()) {
        trace.to_mut().sort();
    }
    // Only messages on connections are merged: without any, a borrowed trace is not copied.
    if p.coalesce && !trace.conns.is_empty() {
        counts.coalesced = crate::fat::coalesce_connections(trace.to_mut());
    }
    let trace: &Trace = &trace;
    counts.messages = trace.messages.len() as u64;
    // A recorded session names every thread it saw: nothing to guess about who is a client.
    let recorded = Params {
        aggregate_clients: false,
        ..*p
    };
    let p = if p.threads && !trace.threads.is_empty() {
        &recorded
    } else {
        p
    };
    let (names, clients) = Names::of(trace, p);
    counts.clients = clients;
    progress(Progress::Phase("linking", None));
    let roles = links::Roles::of(trace, p.client_roots, |n| {
        names.name(n) == crate::clients::CLIENT
    });
    let causes = p
        .threads
        .then(|| crate::causality::from_threads(trace, &trace.threads))
        .flatten();
    counts.threads = causes.as_ref().map(|c| c.counts);
    let pins = causes.as_ref().map(|c| &c.cause[..]);
    let links = links::link(trace, p, &names.of, &roles, pins);
    drop(causes);
    counts.true_links = links.kept.0;
    counts.try_both_links = links.kept.1;
    counts.false_links = links.dropped;
    counts.untraced = roles
        .traced
        .iter()
        .enumerate()
        .filter(|(_, t)| !**t)
        .map(|(i, _)| names.name(i as NodeId).to_owned())
        .collect();
    counts.untraced.sort();
    counts.untraced.dedup();
    let collector = Collector::with_local_call_delay()
        .weighted()
        .untraced(counts.untraced.iter().cloned());
    let offsets = offsets::Offsets::estimate(trace);
    let builder = Builder::new(trace, &links, &names, &offsets, &roles.origin, p, collector);
    let (collector, trees) = builder.run(progress);
    counts.trees = trees;
    counts.edges = named(&links.edges, &names);
    let clock_offsets: Vec<serde_json::Value> = offsets
        .list()
        .into_iter()
        .map(|(a, b, o)| {
            serde_json::json!({
                "a": trace.nodes.name(a),
                "b": trace.nodes.name(b),
                "b_minus_a_ns": o,
            })
        })
        .take(1000)
        .collect();
    let params = serde_json::json!({
        "window_ns": p.window,
        "spontaneous_y": p.spontaneous_y,
        "try_both": [p.try_both.0, p.try_both.1],
        "max_try_both": p.max_try_both,
        "max_messages": p.max_messages,
        "min_prob": p.min_prob,
        "aggregate_clients": p.aggregate_clients,
        "fixed_port_peers": p.fixed_port_peers,
        "coalesce": p.coalesce,
        "rank": p.rank,
        "kernel": p.kernel,
        "exclusive": p.exclusive,
        "client_roots": p.client_roots,
        "causality": if counts.threads.is_some() { "threads" } else { "timing" },
        "threads": counts.threads,
        "clock_offsets": clock_offsets,
    });
    let result = collector.finish_ranked("linking", params, p.rank);
    progress(Progress::Done);
    (result, counts)
}
