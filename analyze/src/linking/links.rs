//! Steps 1 and 2 of linking (\[WAP5\] §5.1): the mean causal delay of every edge, each
//! message's possible parents weighted `e^(−λ·gap)` beside the spontaneous weight `e^(−y)`,
//! normalised, classified, and inverted into possible-children lists.
//!
//! Times are read on the node that acts: a parent's *arrival* at B and the child's
//! *departure* from B, both stamped by B when the trace has both ends of every message, so
//! no clock offset between hosts changes a weight. Where a node stamped nothing (an untraced
//! node, \[WAP5\] §5.1), its peers' times stand in — the arrival of A→B is A's send time and
//! the departure of B→A is A's receive time — and only A→B→A causality is allowed.
//!
//! Candidates are the messages into B within the window `x` before the child left, newest
//! first; the scan stops where a weight falls below `e^(−y)·10⁻⁴` (a link 10,000 times less
//! likely than spontaneity cannot matter) or after [`MAX_CANDIDATES`] (ours; bounds the work
//! on nodes that receive thousands of messages within `x`).

use super::exclusive::Balancer;
use super::kernel::{EdgeKeys, Kernel, KeyOf, Learner};
use super::{KernelKind, Params};
use crate::hash::FxHashMap;
use crate::trace::{Kind, Message, NO_TIME, NodeId, Time, Trace};

/// At most this many candidate parents per message (ours).
pub const MAX_CANDIDATES: usize = 256;

/// At most this many candidate parents per message with the empirical kernel (ours): on
/// the CDN bench the 33rd newest arrival is seconds back, where the kernel's probabilities
/// are the background's wobble (a third of all links were such, beyond 200 ms), and
/// leaving them out made Fig. 10's top-N better, not worse (ARCHITECTURE.md).
pub const KERNEL_CANDIDATES: usize = 32;

/// At most this many candidate pairs per message teach the empirical kernel.
const MAX_LEARN: usize = 1024;

/// At most about this many children teach the empirical kernel.
const LEARN_CHILDREN: usize = 500_000;

/// The kernel is learned in this many parts (fixed, so the result does not depend on the
/// number of cores).
const LEARN_PARTS: usize = 8;

/// `ln(10⁴)`: candidates this far below the spontaneous weight are not considered.
const CUTOFF: f64 = 9.210_340_371_976_184;

/// When `m` left its sender (the receiver's time where the sender stamped nothing).
pub fn departure(m: &Message) -> Time {
    if m.t_send != NO_TIME {
        m.t_send
    } else {
        m.t_recv
    }
}

/// When `m` reached its receiver (the sender's time where the receiver stamped nothing).
pub fn arrival(m: &Message) -> Time {
    if m.t_recv != NO_TIME {
        m.t_recv
    } else {
        m.t_send
    }
}

/// Which nodes stamped at least one time of their own (a send or a receive).
pub fn traced_nodes(trace: &Trace) -> Vec<bool> {
    let mut traced = vec![false; trace.nodes.len()];
    for m in &trace.messages {
        if m.t_send != NO_TIME
            && let Some(t) = traced.get_mut(m.src as usize)
        {
            *t = true;
        }
        if m.t_recv != NO_TIME
            && let Some(t) = traced.get_mut(m.dst as usize)
        {
            *t = true;
        }
    }
    traced
}

/// What each node is to linking.
#[derive(Debug, Clone, Default)]
pub struct Roles {
    /// The node stamped a time of its own (else its peers' times stand in, and only
    /// A→B→A causality is allowed).
    pub traced: Vec<bool>,
    /// The node only starts paths: every message it sends is spontaneous
    /// ([`Params::client_roots`]).
    pub origin: Vec<bool>,
}

impl Roles {
    /// The roles in `trace`; `client(n)` tells whether node `n` is a client (\[WAP5\]
    /// §2.5.1: it never used a fixed port, or it is named `CLIENT`). With `client_roots`, a
    /// client, and a node into which only returns came (it was never called), is an
    /// origin.
    pub fn of(trace: &Trace, client_roots: bool, client: impl Fn(NodeId) -> bool) -> Roles {
        let n = trace.nodes.len();
        let mut origin = vec![false; n];
        if client_roots {
            let mut called = vec![false; n];
            let mut answered = vec![false; n];
            for m in &trace.messages {
                let d = m.dst as usize;
                if m.kind == Kind::Ret {
                    answered[d] = true;
                } else {
                    called[d] = true;
                }
            }
            for (i, o) in origin.iter_mut().enumerate() {
                *o = client(i as NodeId) || (answered[i] && !called[i]);
            }
        }
        Roles {
            traced: traced_nodes(trace),
            origin,
        }
    }

    fn traced(&self, n: NodeId) -> bool {
        self.traced.get(n as usize).copied().unwrap_or(false)
    }

    fn origin(&self, n: NodeId) -> bool {
        self.origin.get(n as usize).copied().unwrap_or(false)
    }
}

/// Per node, the messages into it by arrival: `(arrival, message index, its sender as
/// aggregated)` — the sender beside it, so that weighing a candidate reads no message.
struct Arrivals {
    off: Vec<u32>,
    at: Vec<(Time, u32, NodeId)>,
    /// Per message: the end (in `at`) of its sender's arrivals up to its departure — found
    /// once, by a cursor per node that moves with the trace, not by a search per look.
    upto: Vec<u32>,
}

impl Arrivals {
    fn build(trace: &Trace, group: &[NodeId]) -> Arrivals {
        let n = trace.nodes.len();
        let mut off = vec![0u32; n + 1];
        for m in &trace.messages {
            off[m.dst as usize + 1] += 1;
        }
        for i in 0..n {
            off[i + 1] += off[i];
        }
        let mut fill = off.clone();
        let mut at = vec![(0, 0u32, 0); trace.messages.len()];
        for (i, m) in trace.messages.iter().enumerate() {
            let slot = &mut fill[m.dst as usize];
            let from = group.get(m.src as usize).copied().unwrap_or(m.src);
            at[*slot as usize] = (arrival(m), i as u32, from);
            *slot += 1;
        }
        for w in off.windows(2) {
            // Nearly sorted already (the trace is in send order).
            at[w[0] as usize..w[1] as usize].sort_unstable();
        }
        let upto = Self::ends(trace, &off, &at);
        Arrivals { off, at, upto }
    }

    /// For every message, the end of its sender's arrivals at or before its departure. In a
    /// trace sorted by time a node's departures only grow, so its cursor only moves forward
    /// (it moves back where they do not).
    fn ends(trace: &Trace, off: &[u32], at: &[(Time, u32, NodeId)]) -> Vec<u32> {
        let mut cursor: Vec<u32> = off.to_vec();
        trace
            .messages
            .iter()
            .map(|m| {
                let s = m.src as usize;
                let (lo, hi) = (off[s], off[s + 1]);
                let dep = departure(m);
                let c = &mut cursor[s];
                while *c < hi && at[*c as usize].0 <= dep {
                    *c += 1;
                }
                while *c > lo && at[*c as usize - 1].0 > dep {
                    *c -= 1;
                }
                *c
            })
            .collect()
    }

    /// Node `b`'s first arrival, on its own clock.
    fn first(&self, b: NodeId) -> Option<Time> {
        let (lo, hi) = (self.off[b as usize], self.off[b as usize + 1]);
        (lo < hi).then(|| self.at[lo as usize].0)
    }

    /// The arrivals at message `i`'s sender `b` up to and including `i`'s departure.
    fn until(&self, i: usize, b: NodeId) -> &[(Time, u32, NodeId)] {
        &self.at[self.off[b as usize] as usize..self.upto[i] as usize]
    }
}

/// How step 3 treats a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// p above the try-both range: always included.
    True,
    /// p within the range, or the child's most likely cause: both ways (`most_likely` decides
    /// once a root's try-both links are used up).
    TryBoth {
        /// The child's most likely cause (spontaneity included).
        most_likely: bool,
    },
}

/// One possible child of a message.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Kid {
    /// The child message.
    pub child: u32,
    /// The link's probability.
    pub p: f32,
    /// How it is treated.
    pub class: Class,
    /// The child's receiver as aggregated: siblings with equal `to` are alternatives when
    /// a parent causes one message per edge ([`super::Params::exclusive`]).
    pub to: NodeId,
}

/// The mean causal delay of one edge B→C (step 1).
#[derive(Debug, Clone, PartialEq)]
pub struct EdgeDelay {
    /// B.
    pub src: NodeId,
    /// C.
    pub dst: NodeId,
    /// Messages B→C.
    pub messages: u64,
    /// Those with a message into B within the window before them.
    pub caused: u64,
    /// Mean gap since the latest message into B (ns); `None` when none was caused.
    pub mean_ns: Option<f64>,
}

/// What steps 1 and 2 produce.
#[derive(Debug, Default)]
pub struct Links {
    /// Possible children of message `m`: `kids[off[m]..off[m + 1]]`, in the children's order.
    off: Vec<u32>,
    kids: Vec<Kid>,
    /// Per message, Π(1 − p) over its probably-false child links (omitted whenever it is in
    /// an instance).
    pub omitted: Vec<f32>,
    /// Per message, the probability that it is spontaneous when that makes it a root (the
    /// spontaneous choice is probably-true or try-both), else 0.
    pub root_p: Vec<f32>,
    /// Step 1's estimates, one per edge.
    pub edges: Vec<EdgeDelay>,
    /// Links kept by class: (probably-true, try-both); and probably-false ones.
    pub kept: (u64, u64),
    /// Probably-false links (omitted).
    pub dropped: u64,
}

impl Links {
    /// The possible children of message `m`.
    pub fn kids(&self, m: u32) -> &[Kid] {
        &self.kids[self.off[m as usize] as usize..self.off[m as usize + 1] as usize]
    }
}

/// Every child's candidate parents with their weights, and its spontaneous weight.
#[derive(Debug, Default)]
pub struct Weighed {
    /// Candidates of child `i`: `off[i]..off[i + 1]`.
    pub off: Vec<u32>,
    /// Candidate parents.
    pub parent: Vec<u32>,
    /// Their weights (single precision: a trace has millions of candidate pairs).
    pub w: Vec<f32>,
    /// Their kernel cells, key and gap bin in one ([`Kernel::cell`]; empty without the
    /// empirical kernel).
    pub cell: Vec<u32>,
    /// The spontaneous weight of every child.
    pub spont: Vec<f64>,
    /// Links weighed the paper's way (a thin kernel key, [`super::kernel::THIN`]): (link,
    /// child, `e^(y − gap/d)`), their weight that factor times the child's spontaneous
    /// weight; their cell is [`FIXED`].
    pub fixed: Vec<(u32, u32, f32)>,
}

/// The cell of a link weighed the paper's way: no kernel cell.
pub const FIXED: u32 = u32::MAX;

impl Weighed {
    fn with_capacity(n: usize) -> Weighed {
        let mut off = Vec::with_capacity(n + 1);
        off.push(0);
        Weighed {
            off,
            spont: Vec::with_capacity(n),
            ..Weighed::default()
        }
    }

    fn push(&mut self, spont: f64, cands: impl Iterator<Item = (u32, f64, Option<u32>)>) {
        let child = self.spont.len() as u32;
        for (j, w, cell) in cands {
            if cell == Some(FIXED) {
                let factor = w / spont;
                self.fixed
                    .push((self.parent.len() as u32, child, factor as f32));
            }
            self.parent.push(j);
            self.w.push(w as f32);
            if let Some(c) = cell {
                self.cell.push(c);
            }
        }
        self.off.push(self.parent.len() as u32);
        self.spont.push(spont);
    }

    /// Appends `other`'s children after this one's.
    fn append(&mut self, other: Weighed) {
        let (links, children) = (self.parent.len() as u32, self.spont.len() as u32);
        self.off.extend(other.off[1..].iter().map(|&o| o + links));
        self.parent.extend_from_slice(&other.parent);
        self.w.extend_from_slice(&other.w);
        self.cell.extend_from_slice(&other.cell);
        self.spont.extend_from_slice(&other.spont);
        let fixed = other.fixed.iter();
        self.fixed
            .extend(fixed.map(|&(l, c, f)| (l + links, c + children, f)));
    }

    /// Every link's probability (its weight over its child's total, spontaneity included)
    /// into `post`; returns every child's probability of being spontaneous. Children in
    /// chunks on all cores.
    pub fn posteriors(&self, post: &mut [f32]) -> Vec<f64> {
        use rayon::prelude::*;
        const CHUNK: usize = 1 << 15;
        let n = self.spont.len();
        let mut spont = vec![0f64; n];
        // Each chunk's links are one run of `post`.
        let mut runs = Vec::with_capacity(n.div_ceil(CHUNK));
        let mut rest = post;
        for c in 0..n.div_ceil(CHUNK) {
            let (a, b) = (c * CHUNK, n.min((c + 1) * CHUNK));
            let len = (self.off[b] - self.off[a]) as usize;
            let (run, tail) = std::mem::take(&mut rest).split_at_mut(len);
            runs.push(run);
            rest = tail;
        }
        let chunks = spont.par_chunks_mut(CHUNK).zip(runs).enumerate();
        chunks.for_each(|(c, (out, run))| {
            let first = c * CHUNK;
            let base = self.off[first] as usize;
            for (k, s) in out.iter_mut().enumerate() {
                let i = first + k;
                let r = self.off[i] as usize..self.off[i + 1] as usize;
                let sum: f64 = self.w[r.clone()].iter().map(|&x| f64::from(x)).sum();
                let total = self.spont[i] + sum;
                for l in r {
                    run[l - base] = (f64::from(self.w[l]) / total) as f32;
                }
                *s = self.spont[i] / total;
            }
        });
        spont
    }

    /// Keeps, for every child `pin` gives a cause, only that candidate's weight (none for
    /// [`ROOT`](crate::causality::ROOT)), so that refits and balancing learn from the links
    /// the threads gave.
    fn pin(&mut self, pin: impl Fn(usize) -> Option<u32>) {
        for i in 0..self.spont.len() {
            let Some(cause) = pin(i) else { continue };
            let r = self.off[i] as usize..self.off[i + 1] as usize;
            // A cause beyond the candidates weighs nothing here: spontaneity keeps the
            // child's total above 0.
            let among = self.parent[r.clone()].contains(&cause);
            for l in r {
                if self.parent[l] != cause {
                    self.w[l] = 0.0;
                }
            }
            if among {
                self.spont[i] = 0.0;
            }
        }
    }

    /// Child `i`'s candidates, their weights and its spontaneous weight.
    pub fn of(&self, i: usize) -> (&[u32], &[f32], f64) {
        let r = self.off[i] as usize..self.off[i + 1] as usize;
        (&self.parent[r.clone()], &self.w[r], self.spont[i])
    }
}

/// Edge id of every message, and the edges.
fn edge_ids(trace: &Trace) -> (Vec<u32>, Vec<EdgeDelay>) {
    let mut by_pair: FxHashMap<(NodeId, NodeId), u32> = FxHashMap::default();
    let mut edges = Vec::new();
    let ids = trace
        .messages
        .iter()
        .map(|m| {
            *by_pair.entry((m.src, m.dst)).or_insert_with(|| {
                edges.push(EdgeDelay {
                    src: m.src,
                    dst: m.dst,
                    messages: 0,
                    caused: 0,
                    mean_ns: None,
                });
                (edges.len() - 1) as u32
            })
        })
        .collect();
    (ids, edges)
}

/// The messages into message `i`'s sender that may have caused it, newest first, as
/// `(parent, gap, its sender as aggregated)`: none for a message a client sends (its requests
/// start paths), only the answers of `i`'s receiver for an untraced sender, never `i`
/// itself. Gaps grow along the scan; callers stop it where they need.
fn scan<'a>(
    trace: &'a Trace,
    arrivals: &'a Arrivals,
    roles: &Roles,
    i: usize,
) -> impl Iterator<Item = (u32, Time, NodeId)> + 'a {
    let m = &trace.messages[i];
    let dep = departure(m);
    let (origin, untraced) = (roles.origin(m.src), !roles.traced(m.src));
    let list = if origin {
        // A client's requests start paths: the reply before one is not its cause.
        &[][..]
    } else {
        arrivals.until(i, m.src)
    };
    list.iter().rev().filter_map(move |&(t, j, x)| {
        let skip = j as usize == i || (untraced && trace.messages[j as usize].src != m.dst);
        (!skip).then(|| (j, dep.saturating_sub(t), x))
    })
}

/// The candidate parents of message `i` ([`scan`]), at most `max`; `limit` stops the scan at
/// that gap (inclusive).
fn candidates(
    trace: &Trace,
    arrivals: &Arrivals,
    roles: &Roles,
    i: usize,
    limit: Time,
    max: usize,
    out: &mut Vec<(u32, Time, NodeId)>,
) {
    out.clear();
    out.extend(
        scan(trace, arrivals, roles, i)
            .take_while(|&(_, gap, _)| gap <= limit)
            .take(max),
    );
}

/// How a child's candidates of thin keys are weighed: the paper's way, relative to
/// spontaneity.
#[derive(Debug, Clone, Copy)]
struct Paper {
    /// Step 1's mean delay of the child's edge (ns).
    d: f64,
    /// `y`: spontaneity weighs `e^(−y)`.
    y: f64,
    /// The child's spontaneous weight (the kernel's prior).
    spont: f64,
    /// No longer gap is considered.
    limit: Time,
}

/// Child `i`'s candidate parents as [`candidates`] finds them (newest first, at most
/// [`KERNEL_CANDIDATES`] within the reach of its edge's keys), those the kernel gives a
/// probability above 0, into `out` as (parent, cell, odds); a thin key's candidates weigh
/// `spont · e^(y − gap/d)` (the paper's odds against spontaneity) with cell [`FIXED`]. Gaps
/// grow along the scan, so the gap bin moves forward, never computed from scratch.
fn weigh(
    trace: &Trace,
    arrivals: &Arrivals,
    roles: &Roles,
    i: usize,
    (k, e, paper): (&Kernel, &EdgeKeys, Paper),
    out: &mut Vec<(u32, u32, f64)>,
) {
    out.clear();
    let mut bin = 0;
    let reach = if e.thin {
        e.reach.max(paper.limit)
    } else {
        e.reach
    };
    let near = scan(trace, arrivals, roles, i)
        .take_while(|&(_, gap, _)| gap <= reach)
        .take(KERNEL_CANDIDATES);
    for (j, gap, x) in near {
        let (id, reach) = match e.key(x) {
            None => continue,
            Some(KeyOf::Thin) => {
                if gap <= paper.limit {
                    let odds = (paper.y - gap as f64 / paper.d).exp();
                    out.push((j, FIXED, paper.spont * odds));
                }
                continue;
            }
            Some(KeyOf::Learned(id, reach)) => (id, reach),
        };
        if gap > reach {
            continue;
        }
        bin = k.bin_from(gap, bin);
        let cell = k.cell_of(id, bin);
        let q = k.prob_cell(cell);
        if q > 0.0 {
            out.push((j, cell, q / (1.0 - q)));
        }
    }
}

/// Step 1: the mean gap since the latest message into B, per edge B→C (\[WAP5\] §5.1).
fn estimate(
    trace: &Trace,
    arrivals: &Arrivals,
    roles: &Roles,
    window: Time,
) -> (Vec<u32>, Vec<EdgeDelay>) {
    use rayon::prelude::*;
    let (edge_of, mut edges) = edge_ids(trace);
    let mut sums = vec![0f64; edges.len()];
    // The newest candidate of each message, a chunk at a time on all cores.
    const CHUNK: usize = 1 << 16;
    let mut newest: Vec<Option<Time>> = Vec::with_capacity(CHUNK);
    for a in (0..edge_of.len()).step_by(CHUNK) {
        let b = edge_of.len().min(a + CHUNK);
        (a..b)
            .into_par_iter()
            .map(|i| {
                let first = scan(trace, arrivals, roles, i).next();
                first.and_then(|(_, gap, _)| (gap <= window).then_some(gap))
            })
            .collect_into_vec(&mut newest);
        for (&e, gap) in edge_of[a..b].iter().zip(&newest) {
            let e = e as usize;
            edges[e].messages += 1;
            if let Some(gap) = *gap {
                edges[e].caused += 1;
                sums[e] += gap as f64;
            }
        }
    }
    for (e, s) in edges.iter_mut().zip(&sums) {
        e.mean_ns = (e.caused > 0).then(|| s / e.caused as f64);
    }
    (edge_of, edges)
}

/// The empirical kernel's pass: every candidate pair within the window counted; the
/// children in [`LEARN_PARTS`] parts on all cores, merged in order (the same kernel
/// whatever the number of cores).
fn learn(
    trace: &Trace,
    arrivals: &Arrivals,
    roles: &Roles,
    group: &[NodeId],
    window: Time,
) -> Kernel {
    use rayon::prelude::*;
    let g = |n: NodeId| group.get(n as usize).copied().unwrap_or(n);
    // Half a million children teach enough; longer traces teach with every k-th.
    let n = trace.messages.len();
    let stride = n.div_ceil(LEARN_CHILDREN).max(1);
    let children = n.div_ceil(stride);
    let per = children.div_ceil(LEARN_PARTS).max(1);
    let parts: Vec<Learner> = (0..LEARN_PARTS)
        .into_par_iter()
        .map(|part| {
            let mut learner = Learner::new();
            let mut cands = Vec::with_capacity(MAX_LEARN);
            for i in (part * per..children.min((part + 1) * per)).map(|c| c * stride) {
                let m = &trace.messages[i];
                let (b, c) = (g(m.src), g(m.dst));
                candidates(trace, arrivals, roles, i, window, MAX_LEARN, &mut cands);
                // The gaps this child could show, on its sender's clock: to the window, to
                // the sender's first arrival, or to the last candidate counted when there
                // were more.
                let reach = match cands.last() {
                    Some(&(_, gap, _)) if cands.len() == MAX_LEARN => gap,
                    _ => arrivals
                        .first(m.src)
                        .map_or(0, |t| window.min(departure(m).saturating_sub(t))),
                };
                learner.child((b, c), reach);
                let mut bin = 0;
                for &(_, gap, x) in &cands {
                    bin = learner.count_from((x, b, c), gap, bin);
                }
            }
            learner
        })
        .collect();
    let mut learner = Learner::new();
    for part in parts {
        learner.merge(part);
    }
    learner.finish(window)
}

/// One EM round of the empirical kernel: posteriors from the weights, the kernel refitted
/// to them, the weights recomputed.
fn refit(trace: &Trace, group: &[NodeId], w: &mut Weighed, k: &mut Kernel) {
    let g = |n: NodeId| group.get(n as usize).copied().unwrap_or(n);
    let mut post = vec![0f32; w.w.len()];
    let spont = w.posteriors(&mut post);
    k.refit(
        (0..post.len()).map(|l| (w.cell[l], f64::from(post[l]))),
        trace
            .messages
            .iter()
            .zip(&spont)
            .map(|(m, &s)| ((g(m.src), g(m.dst)), s)),
    );
    drop(post);
    use rayon::prelude::*;
    let k = &*k;
    w.w.par_iter_mut().zip(&w.cell).for_each(|(x, &cell)| {
        let q = k.prob_cell(cell);
        *x = (q / (1.0 - q)) as f32;
    });
    let msgs = trace.messages.par_iter();
    w.spont.par_iter_mut().zip(msgs).for_each(|(s, m)| {
        *s = k.spont((g(m.src), g(m.dst)));
    });
    // The paper's weights keep their odds against the new spontaneity.
    for &(l, child, factor) in &w.fixed {
        w.w[l as usize] = (f64::from(factor) * w.spont[child as usize]) as f32;
    }
}

/// Normalises child `i`'s weights (spontaneity's beside them), classifies its links and
/// records them.
#[allow(clippy::too_many_arguments)]
fn classify(
    i: u32,
    to: NodeId,
    parents: &[u32],
    weights: &[f64],
    spont_w: f64,
    p: &Params,
    out: &mut Links,
    raw: &mut Vec<(u32, Kid)>,
) {
    let total = spont_w + weights.iter().sum::<f64>();
    let best = weights.iter().copied().fold(spont_w, f64::max);
    let class = |w: f64| {
        let q = w / total;
        if q > p.try_both.1 {
            Some(Class::True)
        } else if q >= p.try_both.0 || w >= best {
            Some(Class::TryBoth {
                most_likely: w >= best,
            })
        } else {
            None
        }
    };
    if class(spont_w).is_some() {
        out.root_p[i as usize] = (spont_w / total) as f32;
    }
    for (&j, &w) in parents.iter().zip(weights) {
        let q = (w / total) as f32;
        match class(w) {
            Some(c) => {
                raw.push((
                    j,
                    Kid {
                        child: i,
                        p: q,
                        class: c,
                        to,
                    },
                ));
                if c == Class::True {
                    out.kept.0 += 1;
                } else {
                    out.kept.1 += 1;
                }
            }
            None => {
                out.omitted[j as usize] *= 1.0 - q;
                out.dropped += 1;
            }
        }
    }
}

/// Classifies child `i` whose cause the recorded threads gave: that link (or spontaneity,
/// for [`ROOT`](crate::causality::ROOT)) with probability 1.
fn classify_pinned(
    i: u32,
    to: NodeId,
    cause: u32,
    p: &Params,
    out: &mut Links,
    raw: &mut Vec<(u32, Kid)>,
) {
    if cause == crate::causality::ROOT {
        classify(i, to, &[], &[], 1.0, p, out, raw);
    } else {
        classify(i, to, &[cause], &[1.0], 0.0, p, out, raw);
    }
}

/// What step 2 reads, shared by the threads that weigh.
struct Step2<'a> {
    trace: &'a Trace,
    arrivals: &'a Arrivals,
    roles: &'a Roles,
    group: &'a [NodeId],
    edges: &'a [EdgeDelay],
    edge_of: &'a [u32],
    p: &'a Params,
}

impl Step2<'_> {
    /// The window, or the paper's cut-off if shorter: `(y + ln 10⁴)` mean delays.
    fn limit(&self, d: f64) -> Time {
        let y = self.p.spontaneous_y;
        self.p.window.min(((y + CUTOFF) * d).min(9e18) as Time)
    }

    /// Step 1's mean delay of child `i`'s edge (ns, at least 1).
    fn d(&self, i: usize) -> f64 {
        let e = self.edge_of[i] as usize;
        self.edges[e].mean_ns.unwrap_or(0.0).max(1.0)
    }

    /// Every child's candidates weighed by kernel `k`, in child order; children in chunks
    /// on all cores (each child's weighing reads only shared data).
    fn with_kernel(&self, k: &Kernel) -> Weighed {
        use rayon::prelude::*;
        const CHUNK: usize = 1 << 15;
        let n = self.trace.messages.len();
        let g = |n: NodeId| self.group.get(n as usize).copied().unwrap_or(n);
        let parts: Vec<Weighed> = (0..n.div_ceil(CHUNK))
            .into_par_iter()
            .map(|c| {
                let range = c * CHUNK..n.min((c + 1) * CHUNK);
                let mut w = Weighed::with_capacity(range.len());
                let mut scored = Vec::with_capacity(KERNEL_CANDIDATES);
                for i in range {
                    let m = &self.trace.messages[i];
                    let edge = (g(m.src), g(m.dst));
                    let spont = k.spont(edge);
                    scored.clear();
                    // Only the child edge's keys can weigh, and only up to their reach.
                    if let Some(e) = k.edge(edge) {
                        let d = self.d(i);
                        let y = self.p.spontaneous_y;
                        let paper = Paper {
                            d,
                            y,
                            spont,
                            limit: self.limit(d),
                        };
                        let (t, a, r) = (self.trace, self.arrivals, self.roles);
                        weigh(t, a, r, i, (k, e, paper), &mut scored);
                    }
                    let cands = scored.iter().map(|&(j, cell, odds)| (j, odds, Some(cell)));
                    w.push(spont, cands);
                }
                w
            })
            .collect();
        let mut w = Weighed::with_capacity(n);
        let links: usize = parts.iter().map(|x| x.parent.len()).sum();
        w.parent.reserve_exact(links);
        w.w.reserve_exact(links);
        w.cell.reserve_exact(links);
        for part in parts {
            w.append(part);
        }
        w
    }
}

/// Steps 1 and 2 on a trace sorted by time; `group` maps each node to its aggregated id
/// (the empirical kernel's key), `roles` tells which nodes are untraced or only start paths.
///
/// `pins` (p5 mode, by message: [`crate::causality::Causes::cause`]) fixes the cause of
/// every message the recorded threads placed, with probability 1; the weights decide only
/// the [`FREE`](crate::causality::FREE) ones, and the kernel learns from the pinned links.
pub fn link(
    trace: &Trace,
    p: &Params,
    group: &[NodeId],
    roles: &Roles,
    pins: Option<&[u32]>,
) -> Links {
    let pin = |i: usize| {
        pins.and_then(|v| v.get(i).copied())
            .filter(|&c| c != crate::causality::FREE)
    };
    let n = trace.messages.len();
    let arrivals = Arrivals::build(trace, group);
    let (edge_of, edges) = estimate(trace, &arrivals, roles, p.window);
    let kernel = (p.kernel == KernelKind::Empirical)
        .then(|| learn(trace, &arrivals, roles, group, p.window));
    // Step 2: weights, normalised, classified; links collected by child.
    let g = |n: NodeId| group.get(n as usize).copied().unwrap_or(n);
    let mut out = Links {
        omitted: vec![1.0; n],
        root_p: vec![0.0; n],
        ..Links::default()
    };
    // Weights are kept for a second look only when the kernel is refitted or balanced.
    let keep = kernel.is_some() || p.exclusive;
    let mut raw: Vec<(u32, Kid)> = Vec::new(); // (parent, kid)
    let mut weights: Vec<f64> = Vec::with_capacity(MAX_CANDIDATES);
    let step2 = Step2 {
        trace,
        arrivals: &arrivals,
        roles,
        group,
        edges: &edges,
        edge_of: &edge_of,
        p,
    };
    let mut w = match &kernel {
        Some(k) => step2.with_kernel(k),
        None => Weighed::with_capacity(if keep { n } else { 0 }),
    };
    let mut parents: Vec<u32> = Vec::with_capacity(MAX_CANDIDATES);
    let mut cands = Vec::with_capacity(MAX_CANDIDATES);
    let spont_w = (-p.spontaneous_y).exp();
    for i in (0..n).filter(|_| kernel.is_none()) {
        let d = step2.d(i);
        let limit = step2.limit(d);
        candidates(
            trace,
            &arrivals,
            roles,
            i,
            limit,
            MAX_CANDIDATES,
            &mut cands,
        );
        weights.clear();
        weights.extend(cands.iter().map(|&(_, gap, _)| (-(gap as f64) / d).exp()));
        if keep {
            let cands = cands.iter().zip(&weights).map(|(c, &wt)| (c.0, wt, None));
            w.push(spont_w, cands);
        } else {
            // The paper's way needs no second look: classify now, keep nothing else.
            parents.clear();
            parents.extend(cands.iter().map(|c| c.0));
            let to = g(trace.messages[i].dst);
            match pin(i) {
                Some(c) => classify_pinned(i as u32, to, c, p, &mut out, &mut raw),
                None => classify(
                    i as u32, to, &parents, &weights, spont_w, p, &mut out, &mut raw,
                ),
            }
        }
    }
    drop(arrivals);
    if keep && pins.is_some() {
        w.pin(pin);
    }
    let balancer = p.exclusive.then(|| {
        let to: Vec<NodeId> = trace.messages.iter().map(|m| g(m.dst)).collect();
        let whole: Vec<bool> = trace.messages.iter().map(|m| m.kind == Kind::Ret).collect();
        Balancer::new(&w, &to, &whole)
    });
    let rounds = super::exclusive::ROUNDS;
    if let Some(mut k) = kernel {
        for _ in 0..p.refits {
            if let Some(b) = &balancer {
                b.balance(&mut w, super::exclusive::REFIT_ROUNDS);
            }
            refit(trace, group, &mut w, &mut k);
        }
    }
    if let Some(b) = &balancer {
        b.balance(&mut w, rounds);
    }
    drop(balancer);
    for i in (0..n).filter(|_| keep) {
        let to = g(trace.messages[i].dst);
        if let Some(c) = pin(i) {
            classify_pinned(i as u32, to, c, p, &mut out, &mut raw);
            continue;
        }
        let (parents, ws, spont_w) = w.of(i);
        weights.clear();
        weights.extend(ws.iter().map(|&x| f64::from(x)));
        classify(
            i as u32, to, parents, &weights, spont_w, p, &mut out, &mut raw,
        );
    }
    drop(w);
    // Inversion (step 2's end): children by parent, each parent's in child order.
    out.off = vec![0u32; n + 1];
    for &(parent, _) in &raw {
        out.off[parent as usize + 1] += 1;
    }
    for i in 0..n {
        out.off[i + 1] += out.off[i];
    }
    let mut fill = out.off.clone();
    let blank = Kid {
        child: 0,
        p: 0.0,
        class: Class::True,
        to: 0,
    };
    out.kids = vec![blank; raw.len()];
    for (parent, kid) in raw {
        let slot = &mut fill[parent as usize];
        out.kids[*slot as usize] = kid;
        *slot += 1;
    }
    // Alternatives side by side: each parent's children by receiver, then in order.
    for w in out.off.windows(2) {
        out.kids[w[0] as usize..w[1] as usize].sort_by_key(|k| (k.to, k.child));
    }
    out.edges = edges;
    out
}
