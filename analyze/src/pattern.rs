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
//! JSON or DOT, and [`read_json`] reads the JSON back (`score` reads results).

use crate::trace::{NO_TIME, Time};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;

pub use crate::output::{Format, write, write_dot, write_json, write_table};

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

/// Whether a pattern node's timings were observed or inferred for a node without a trace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    /// A traced node.
    #[default]
    Node,
    /// A node seen only through its peers' messages (WAP5 §5.1).
    Untraced,
}

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

/// A call tree: a node and its callees in call order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallTree {
    /// Node name.
    pub name: String,
    /// Callees, in call order.
    pub children: Vec<CallTree>,
}

fn escape(name: &str, out: &mut String) {
    for c in name.chars() {
        if matches!(c, '\\' | '(' | ')' | ',' | '>') {
            out.push('\\');
        }
        out.push(c);
    }
}

fn write_tree(t: &CallTree, out: &mut String) {
    escape(&t.name, out);
    if !t.children.is_empty() {
        out.push('(');
        for (i, c) in t.children.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_tree(c, out);
        }
        out.push(')');
    }
}

/// The signature of a path: `root>callee(…)` (several top-level callees separated by `,`).
pub fn signature(root: &str, callees: &[CallTree]) -> String {
    let mut s = String::new();
    escape(root, &mut s);
    s.push('>');
    for (i, c) in callees.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        write_tree(c, &mut s);
    }
    s
}

/// The signature of a preorder node list (node 0 the root caller).
pub fn signature_of_nodes(nodes: &[PatternNode]) -> String {
    let Some(root) = nodes.first() else {
        return String::new();
    };
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate().skip(1) {
        if let Some(p) = n.parent.map(|p| p as usize).filter(|&p| p < i) {
            children[p].push(i);
        }
    }
    fn build(i: usize, nodes: &[PatternNode], children: &[Vec<usize>]) -> CallTree {
        CallTree {
            name: nodes[i].node.clone(),
            children: children[i]
                .iter()
                .map(|&c| build(c, nodes, children))
                .collect(),
        }
    }
    let callees: Vec<CallTree> = children[0]
        .iter()
        .map(|&c| build(c, nodes, &children))
        .collect();
    signature(&root.node, &callees)
}

/// Parses a signature into its root caller and callee trees.
pub fn parse_signature(sig: &str) -> Result<(String, Vec<CallTree>), String> {
    let chars: Vec<char> = sig.chars().collect();
    let mut pos = 0;
    let root = name(&chars, &mut pos);
    if chars.get(pos) != Some(&'>') {
        return Err(format!("signature {sig:?}: no '>' after the root caller"));
    }
    pos += 1;
    let mut callees = vec![tree(&chars, &mut pos, 0)?];
    while chars.get(pos) == Some(&',') {
        pos += 1;
        callees.push(tree(&chars, &mut pos, 0)?);
    }
    if pos != chars.len() {
        return Err(format!("signature {sig:?}: unexpected {:?}", chars[pos]));
    }
    Ok((root, callees))
}

fn name(chars: &[char], pos: &mut usize) -> String {
    let mut s = String::new();
    while let Some(&c) = chars.get(*pos) {
        match c {
            '\\' if *pos + 1 < chars.len() => {
                s.push(chars[*pos + 1]);
                *pos += 2;
            }
            '(' | ')' | ',' | '>' => break,
            _ => {
                s.push(c);
                *pos += 1;
            }
        }
    }
    s
}

fn tree(chars: &[char], pos: &mut usize, depth: usize) -> Result<CallTree, String> {
    if depth > 256 {
        return Err("signature nests too deeply".into());
    }
    let n = name(chars, pos);
    if n.is_empty() {
        return Err(format!("empty node name at {}", *pos));
    }
    let mut t = CallTree {
        name: n,
        children: Vec::new(),
    };
    if chars.get(*pos) == Some(&'(') {
        *pos += 1;
        loop {
            t.children.push(tree(chars, pos, depth + 1)?);
            match chars.get(*pos) {
                Some(',') => *pos += 1,
                Some(')') => {
                    *pos += 1;
                    break;
                }
                _ => return Err(format!("unclosed '(' at {}", *pos)),
            }
        }
    }
    Ok(t)
}

/// One call of an instance, for [`Collector::add`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Visit<'a> {
    /// The caller: 0 is the root caller, `k` is the `k-1`-th visit of the same list.
    pub parent: u32,
    /// The callee's name.
    pub node: &'a str,
    /// When the call was made ([`NO_TIME`] if unknown).
    pub t_call: Time,
    /// When the return came back ([`NO_TIME`] if unknown or none).
    pub t_ret: Time,
    /// When the call arrived ([`NO_TIME`] if unknown).
    pub t_call_recv: Time,
    /// The receiver's clock minus the caller's, as estimated, taken off the network delay
    /// (0: none known).
    pub net_offset: Time,
}

/// Weighted samples kept per duration before the reservoir samples them down.
const RESERVOIR: usize = 4096;

/// Samples of one duration. Unweighted (nesting, truth): every sample. Weighted (linking,
/// each sample carrying its instance's probability): count, weighted mean, minimum and
/// maximum exactly, and for the percentiles every sample with its weight until there are
/// [`RESERVOIR`], then a weighted reservoir of that many (Efraimidis–Spirakis: key
/// `ln(u) / w`, the largest kept; u from a fixed-seed generator, so the same input gives the
/// same statistics) — memory per duration is bounded whatever the number of instances.
#[derive(Debug, Default, Clone)]
struct Samples {
    v: Vec<i64>,
    /// Present for weighted samples (boxed: most patterns of a linking run are rare, and
    /// their many nodes each hold three of these).
    weighted: Option<Box<Weighted>>,
}

/// The weighted part of [`Samples`]: weights and reservoir keys beside `v`, and the exact
/// moments.
#[derive(Debug, Clone)]
struct Weighted {
    w: Vec<f32>,
    keys: Vec<f32>,
    n: u64,
    sum_w: f64,
    sum_wx: f64,
    min: i64,
    max: i64,
    rng: u64,
    sampled: bool,
}

impl Samples {
    fn push(&mut self, x: i64, weight: Option<f32>) {
        let Some(w) = weight else {
            self.v.push(x);
            return;
        };
        let r = self.weighted.get_or_insert_with(|| {
            Box::new(Weighted {
                w: Vec::new(),
                keys: Vec::new(),
                n: 0,
                sum_w: 0.0,
                sum_wx: 0.0,
                min: x,
                max: x,
                rng: 0x9e37_79b9_7f4a_7c15,
                sampled: false,
            })
        });
        r.n += 1;
        r.sum_w += f64::from(w);
        r.sum_wx += f64::from(w) * x as f64;
        r.min = r.min.min(x);
        r.max = r.max.max(x);
        // splitmix64
        r.rng = r.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = r.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let u = ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        self.v.push(x);
        r.w.push(w);
        r.keys
            .push((u.ln() / f64::from(w.max(f32::MIN_POSITIVE))) as f32);
        if self.v.len() >= 2 * RESERVOIR {
            r.sampled = true;
            Self::trim(&mut self.v, r);
        }
    }

    /// Keeps the [`RESERVOIR`] samples with the largest keys.
    fn trim(v: &mut Vec<i64>, r: &mut Weighted) {
        let mut idx: Vec<usize> = (0..v.len()).collect();
        idx.select_nth_unstable_by(RESERVOIR - 1, |&a, &b| r.keys[b].total_cmp(&r.keys[a]));
        idx.truncate(RESERVOIR);
        idx.sort_unstable();
        *v = idx.iter().map(|&i| v[i]).collect();
        r.w = idx.iter().map(|&i| r.w[i]).collect();
        r.keys = idx.iter().map(|&i| r.keys[i]).collect();
    }

    fn stats(&mut self) -> Option<Stats> {
        let Some(r) = self.weighted.as_deref_mut() else {
            return Stats::of(&mut self.v);
        };
        // A reservoir already represents the weights: its percentiles are unweighted (once
        // the samples pushed since the last trim have been through it too).
        let mut s = if r.sampled {
            if self.v.len() > RESERVOIR {
                Self::trim(&mut self.v, r);
            }
            Stats::of(&mut self.v)?
        } else {
            Stats::of_weighted(&self.v, &r.w)?
        };
        s.n = r.n;
        s.mean_ns = if r.sum_w > 0.0 {
            r.sum_wx / r.sum_w
        } else {
            s.mean_ns
        };
        (s.min_ns, s.max_ns) = (r.min, r.max);
        Some(s)
    }
}

/// Per-pattern accumulator of [`Collector`].
#[derive(Debug, Default)]
struct Acc {
    pattern: Pattern,
    total: Samples,
    call_delay: Vec<Samples>,
    latency: Vec<Samples>,
    net: Vec<Samples>,
}

/// How [`Collector::finish_ranked`] orders patterns (\[WAP5\] §6.6).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rank {
    /// Instance count.
    #[default]
    Count,
    /// Σ probability: the expected number of true instances.
    Expectation,
    /// The most probable instance's probability.
    MaxProb,
    /// Expectation / count: the mean confidence.
    ExpectationPerCount,
    /// Expectation / √count.
    ExpectationPerSqrtCount,
}

crate::choices!(Rank { "count" => Rank::Count, "expectation" => Rank::Expectation, "max-prob" => Rank::MaxProb, "expectation-per-count" => Rank::ExpectationPerCount, "expectation-per-sqrt-count" => Rank::ExpectationPerSqrtCount });

impl Rank {
    /// The value patterns are sorted by (descending).
    pub fn value(self, p: &Pattern) -> f64 {
        let count = p.count.max(1) as f64;
        match self {
            Rank::Count => p.count as f64,
            Rank::Expectation => p.expectation,
            Rank::MaxProb => p.max_prob,
            Rank::ExpectationPerCount => p.expectation / count,
            Rank::ExpectationPerSqrtCount => p.expectation / count.sqrt(),
        }
    }
}

/// Aggregates instances into patterns by signature.
#[derive(Debug, Default)]
pub struct Collector {
    by_sig: HashMap<String, u32>,
    acc: Vec<Acc>,
    instances: Vec<Instance>,
    local_call_delay: bool,
    weighted: bool,
    every_call_returns: bool,
    untraced: std::collections::HashSet<String>,
    // Reused per instance: the signature, the preorder, first child / next sibling links.
    sig_buf: String,
    order_buf: Vec<usize>,
    links: Vec<(u32, u32, u32)>,
}

impl Collector {
    /// A collector whose call delays are measured on one node's clock: a visit's call time
    /// minus the time its parent's call *arrived* (both stamped by the node that makes the
    /// child call), where that arrival is known; so they do not change when a host's clock
    /// is offset. (The default, \[P5\] §5.1.1.4, subtracts the parent's call time, which the
    /// parent's caller stamped.)
    pub fn with_local_call_delay() -> Collector {
        Collector {
            local_call_delay: true,
            ..Collector::default()
        }
    }

    /// Weighs every sample by its instance's probability: means and percentiles of the
    /// node statistics are probability-weighted (\[WAP5\] §5.2).
    pub fn weighted(mut self) -> Collector {
        self.weighted = true;
        self
    }

    /// Every call has a return (nesting): an instance whose root call or return is unknown
    /// (a half the trace lost) is listed and counted but adds nothing to its pattern's
    /// total time, which its known times would understate.
    pub fn every_call_returns(mut self) -> Collector {
        self.every_call_returns = true;
        self
    }

    /// Marks nodes seen only through their peers' messages ([`NodeKind::Untraced`]).
    pub fn untraced(mut self, names: impl IntoIterator<Item = String>) -> Collector {
        self.untraced.extend(names);
        self
    }

    /// Adds one instance: the root caller, its visits (each with a parent earlier in the list;
    /// children are ordered by their position in the list), its probability and messages.
    /// Returns, for each visit, its node's index in the pattern's call tree.
    pub fn add(
        &mut self,
        root: &str,
        visits: &[Visit<'_>],
        prob: f64,
        messages: Vec<u64>,
    ) -> Vec<u32> {
        let (pattern, t_start, t_end) = self.aggregate(root, visits, prob);
        self.instances.push(Instance {
            pattern,
            prob,
            t_start,
            t_end,
            messages,
            nodes: Vec::new(),
        });
        self.node_of_visits(visits.len())
    }

    /// Room for exactly `n` more listed instances (an analysis that knows how many it will
    /// list: no spare capacity, no copy while growing).
    pub fn reserve_instances(&mut self, n: usize) {
        self.instances.reserve_exact(n);
    }

    /// [`Collector::add`], also noting which pattern node each message enters: `entered[i]`
    /// is the 1-based visit message `i` enters (0: the root caller).
    pub fn add_entering(
        &mut self,
        root: &str,
        visits: &[Visit<'_>],
        prob: f64,
        (messages, entered): (Vec<u64>, &[u32]),
    ) {
        let node_of = self.add(root, visits, prob, messages);
        if let Some(last) = self.instances.last_mut() {
            last.nodes = nodes_entered(&node_of, entered);
        }
    }

    /// For the visits of the instance just aggregated, the index of each visit's node in its
    /// pattern's nodes.
    pub fn node_of_visits(&self, visits: usize) -> Vec<u32> {
        let mut node_of = vec![0u32; visits];
        for (new, &old) in self.order_buf.iter().enumerate().skip(1) {
            if let Some(slot) = node_of.get_mut(old - 1) {
                *slot = new as u32;
            }
        }
        node_of
    }

    /// Lists an instance whose statistics [`Collector::aggregate`] already counted (an
    /// analysis that keeps only some of its instances, e.g. the most probable per root).
    pub fn push_instance(&mut self, instance: Instance) {
        self.instances.push(instance);
    }

    /// Counts one instance in its pattern's statistics without listing it; returns its
    /// pattern's index and its start and end times.
    pub fn aggregate(&mut self, root: &str, visits: &[Visit<'_>], prob: f64) -> (u32, Time, Time) {
        // The signature and the preorder straight from the visits, into reused buffers: a
        // pattern's node list (names, owned) is built only the first time it is seen.
        let mut sig = std::mem::take(&mut self.sig_buf);
        let mut order = std::mem::take(&mut self.order_buf);
        tree_of_visits(root, visits, &mut self.links, &mut sig, &mut order);
        let idx = match self.by_sig.get(sig.as_str()) {
            Some(&i) => i,
            None => {
                let i = self.acc.len() as u32;
                self.new_pattern(root, visits, &sig);
                self.by_sig.insert(sig.clone(), i);
                i
            }
        };
        self.sig_buf = sig;
        let acc = &mut self.acc[idx as usize];
        acc.pattern.count += 1;
        acc.pattern.expectation += prob;
        acc.pattern.max_prob = acc.pattern.max_prob.max(prob);
        let (mut start, mut end) = (Time::MAX, Time::MIN);
        let w = self.weighted.then_some(prob as f32);
        for (new, &old) in order.iter().enumerate().skip(1) {
            let v = &visits[old - 1];
            let known = |t: Time| (t != NO_TIME).then_some(t);
            if let Some(tc) = known(v.t_call) {
                start = start.min(tc);
                end = end.max(tc);
                let parent = v.parent as usize;
                let local = self.local_call_delay;
                if let Some(pc) = parent
                    .checked_sub(1)
                    .and_then(|p| visits.get(p))
                    .and_then(|p| {
                        local
                            .then(|| known(p.t_call_recv))
                            .flatten()
                            .or_else(|| known(p.t_call))
                    })
                {
                    acc.call_delay[new].push(tc - pc, w);
                }
                if let Some(tr) = known(v.t_ret) {
                    acc.latency[new].push(tr - tc, w);
                    end = end.max(tr);
                }
                if let Some(rc) = known(v.t_call_recv) {
                    acc.net[new].push(rc - tc - v.net_offset, w);
                }
            }
        }
        let whole = !self.every_call_returns
            || visits
                .iter()
                .filter(|v| v.parent == 0)
                .all(|v| v.t_call != NO_TIME && v.t_ret != NO_TIME);
        if start <= end && whole {
            acc.total.push(end - start, w);
        } else if start > end {
            (start, end) = (NO_TIME, NO_TIME);
        }
        self.order_buf = order;
        (idx, start, end)
    }

    /// Starts the pattern of a signature not seen before.
    fn new_pattern(&mut self, root: &str, visits: &[Visit<'_>], sig: &str) {
        let mut nodes = Vec::with_capacity(visits.len() + 1);
        nodes.push(PatternNode {
            node: root.to_owned(),
            ..PatternNode::default()
        });
        let mut kids = vec![0u32; visits.len() + 1];
        for (i, v) in visits.iter().enumerate() {
            let parent = (v.parent as usize).min(i);
            nodes.push(PatternNode {
                parent: Some(parent as u32),
                ord: kids[parent],
                node: v.node.to_owned(),
                ..PatternNode::default()
            });
            kids[parent] += 1;
        }
        let (mut nodes, _) = preorder(nodes);
        for n in nodes.iter_mut().skip(1) {
            if self.untraced.contains(&n.node) {
                n.kind = NodeKind::Untraced;
            }
        }
        debug_assert_eq!(signature_of_nodes(&nodes), sig);
        let n = nodes.len();
        self.acc.push(Acc {
            pattern: Pattern {
                signature: sig.to_owned(),
                root_node: root.to_owned(),
                nodes,
                ..Pattern::default()
            },
            call_delay: vec![Samples::default(); n],
            latency: vec![Samples::default(); n],
            net: vec![Samples::default(); n],
            ..Acc::default()
        });
    }

    /// The result: patterns sorted by count (then signature), instances renumbered.
    pub fn finish(self, algorithm: &str, params: serde_json::Value) -> AnalysisResult {
        self.finish_ranked(algorithm, params, Rank::Count)
    }

    /// The result: patterns sorted by `rank` (then count, then signature), instances
    /// renumbered.
    pub fn finish_ranked(
        self,
        algorithm: &str,
        params: serde_json::Value,
        rank: Rank,
    ) -> AnalysisResult {
        let mut pats: Vec<(u32, Pattern)> = Vec::with_capacity(self.acc.len());
        for (i, mut a) in self.acc.into_iter().enumerate() {
            a.pattern.latency = a.total.stats();
            for (j, n) in a.pattern.nodes.iter_mut().enumerate() {
                n.call_delay = a.call_delay[j].stats();
                n.latency = a.latency[j].stats();
                n.net_delay = a.net[j].stats();
            }
            pats.push((i as u32, a.pattern));
        }
        pats.sort_by(|a, b| {
            rank.value(&b.1)
                .total_cmp(&rank.value(&a.1))
                .then_with(|| b.1.count.cmp(&a.1.count))
                .then_with(|| a.1.signature.cmp(&b.1.signature))
        });
        let mut rank = vec![0u32; pats.len()];
        for (r, (old, _)) in pats.iter().enumerate() {
            rank[*old as usize] = r as u32;
        }
        let mut instances = self.instances;
        for inst in &mut instances {
            inst.pattern = rank[inst.pattern as usize];
        }
        AnalysisResult {
            algorithm: algorithm.to_owned(),
            params,
            patterns: pats.into_iter().map(|p| p.1).collect(),
            instances,
        }
    }
}

/// Pattern node indices from 1-based visits (0: the root caller, node 0), by `node_of`.
pub fn nodes_entered(node_of: &[u32], entered: &[u32]) -> Vec<u32> {
    entered
        .iter()
        .map(|&v| match v.checked_sub(1) {
            Some(k) => node_of.get(k as usize).copied().unwrap_or(0),
            None => 0,
        })
        .collect()
}

/// The signature of an instance (as [`signature_of_nodes`] gives it for its node list) into
/// `sig`, and its nodes' depth-first preorder into `order` (0 = the root caller, `k` = visit
/// `k - 1`), without building the node list. `links` is scratch: (first child, last child,
/// next sibling) per node.
fn tree_of_visits(
    root: &str,
    visits: &[Visit<'_>],
    links: &mut Vec<(u32, u32, u32)>,
    sig: &mut String,
    order: &mut Vec<usize>,
) {
    const NONE: u32 = u32::MAX;
    links.clear();
    links.resize(visits.len() + 1, (NONE, NONE, NONE));
    for (i, v) in visits.iter().enumerate() {
        let (me, parent) = (i + 1, (v.parent as usize).min(i));
        if links[parent].0 == NONE {
            links[parent].0 = me as u32;
        } else {
            let last = links[parent].1 as usize;
            links[last].2 = me as u32;
        }
        links[parent].1 = me as u32;
    }
    let name = |k: usize| if k == 0 { root } else { visits[k - 1].node };
    sig.clear();
    order.clear();
    escape(root, sig);
    sig.push('>');
    order.push(0);
    // Depth-first: `open` holds the nodes whose children are being written; `k` is the next
    // node to write and `first` whether it opens its sibling list (no ',').
    let mut open: Vec<u32> = Vec::new();
    let (mut k, mut first) = (links[0].0, true);
    while k != NONE {
        if !first {
            sig.push(',');
        }
        let i = k as usize;
        order.push(i);
        escape(name(i), sig);
        if links[i].0 != NONE {
            sig.push('(');
            open.push(k);
            (k, first) = (links[i].0, true);
            continue;
        }
        (k, first) = (links[i].2, false);
        while k == NONE {
            let Some(up) = open.pop() else { break };
            sig.push(')');
            k = links[up as usize].2;
        }
    }
}

/// Puts nodes (parents before children, siblings by `ord`) into depth-first preorder;
/// returns them and, for each new index, the old one.
fn preorder(nodes: Vec<PatternNode>) -> (Vec<PatternNode>, Vec<usize>) {
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate().skip(1) {
        children[n.parent.unwrap_or(0) as usize].push(i);
    }
    let mut order = Vec::with_capacity(nodes.len());
    let mut stack = vec![0usize];
    while let Some(i) = stack.pop() {
        order.push(i);
        stack.extend(children[i].iter().rev());
    }
    let mut new_index = vec![0u32; nodes.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new as u32;
    }
    let out = order
        .iter()
        .map(|&old| {
            let mut n = nodes[old].clone();
            n.parent = n.parent.map(|p| new_index[p as usize]);
            n
        })
        .collect();
    (out, order)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(parent: u32, node: &str, t_call: Time, t_ret: Time) -> Visit<'_> {
        Visit {
            parent,
            node,
            t_call,
            t_ret,
            t_call_recv: NO_TIME,
            net_offset: 0,
        }
    }

    /// Weighted samples beyond the reservoir: exact count, mean, minimum and maximum;
    /// percentiles close to the weighted ones; bounded memory.
    #[test]
    fn weighted_samples_keep_exact_moments_and_a_bounded_reservoir() {
        let mut s = Samples::default();
        // 0..100_000 with weight 1 below 50_000 and 0.25 above: 62,500 in all.
        let (mut sw, mut swx) = (0.0f64, 0.0f64);
        for x in 0..100_000i64 {
            let w = if x < 50_000 { 1.0f32 } else { 0.25 };
            sw += f64::from(w);
            swx += f64::from(w) * x as f64;
            s.push(x, Some(w));
        }
        assert!(s.v.len() < 2 * RESERVOIR);
        let st = s.stats().unwrap();
        assert_eq!((st.n, st.min_ns, st.max_ns), (100_000, 0, 99_999));
        assert!((st.mean_ns - swx / sw).abs() < 1e-6);
        // Cumulative weight reaches half (31,250) at x = 31,250.
        assert!((st.p50_ns - 31_250).abs() < 2_500, "{}", st.p50_ns);
        let mut small = Samples::default();
        for x in [10, 20, 30] {
            small.push(x, Some(if x == 30 { 3.0 } else { 1.0 }));
        }
        let st = small.stats().unwrap();
        assert_eq!(
            (st.p50_ns, st.n),
            (30, 3),
            "weighted exactly below the reservoir"
        );
    }

    #[test]
    fn signatures_print_and_parse() {
        let sig = "CLIENT>WS1(AUTH(DB),AP2(DB,DB))";
        let (root, callees) = parse_signature(sig).unwrap();
        assert_eq!(root, "CLIENT");
        assert_eq!(callees[0].children.len(), 2);
        assert_eq!(signature(&root, &callees), sig);
        let odd = signature(
            "a>b",
            &[CallTree {
                name: "f(x),y".into(),
                children: vec![],
            }],
        );
        assert_eq!(odd, r"a\>b>f\(x\)\,y");
        let (r, c) = parse_signature(&odd).unwrap();
        assert_eq!((r.as_str(), c[0].name.as_str()), ("a>b", "f(x),y"));
        assert!(parse_signature("A").is_err());
        assert!(parse_signature("A>B(C").is_err());
        assert!(parse_signature("A>B)").is_err());
        assert_eq!(parse_signature("A>B,C(D)").unwrap().1.len(), 2);
    }

    #[test]
    fn collector_aggregates_by_signature_with_node_stats() {
        let mut c = Collector::default();
        // CLIENT calls WS1 at 0, WS1 calls AUTH at 10 (back at 20) and DB at 30 (back at 40).
        for k in 0..3 {
            let b = k * 1000;
            let visits = [
                v(0, "WS1", b, b + 50),
                v(1, "AUTH", b + 10, b + 20),
                v(1, "DB", b + 30 + k, b + 40),
            ];
            c.add("CLIENT", &visits, 1.0, vec![k as u64]);
        }
        c.add("CLIENT", &[v(0, "WS1", 5000, 5001)], 0.5, vec![9]);
        let r = c.finish("test", serde_json::Value::Null);
        assert_eq!(r.patterns[0].signature, "CLIENT>WS1(AUTH,DB)");
        assert_eq!(r.patterns[0].count, 3);
        assert_eq!(r.patterns[1].signature, "CLIENT>WS1");
        assert_eq!(r.patterns[1].max_prob, 0.5);
        let db = &r.patterns[0].nodes[3];
        assert_eq!((db.node.as_str(), db.parent, db.ord), ("DB", Some(1), 1));
        let d = db.call_delay.as_ref().unwrap();
        assert_eq!((d.n, d.min_ns, d.max_ns, d.mean_ns), (3, 30, 32, 31.0));
        assert_eq!(r.patterns[0].latency.as_ref().unwrap().p50_ns, 50);
        assert_eq!(r.instances[3].pattern, 1);
        assert_eq!((r.instances[1].t_start, r.instances[1].t_end), (1000, 1050));
    }

    #[test]
    fn visits_out_of_preorder_get_the_same_signature() {
        let mut c = Collector::default();
        // A>B(C(D),E) listed as B, C, E, D.
        let visits = [
            v(0, "B", 0, 100),
            v(1, "C", 1, 10),
            v(1, "E", 20, 30),
            v(2, "D", 2, 3),
        ];
        c.add("A", &visits, 1.0, vec![]);
        let r = c.finish("t", serde_json::Value::Null);
        assert_eq!(r.patterns[0].signature, "A>B(C(D),E)");
        let names: Vec<&str> = r.patterns[0]
            .nodes
            .iter()
            .map(|n| n.node.as_str())
            .collect();
        assert_eq!(names, ["A", "B", "C", "D", "E"]);
        assert_eq!(
            r.patterns[0].nodes[4].latency.as_ref().unwrap().mean_ns,
            10.0
        );
    }

    #[test]
    fn json_round_trips_and_minimal_json_reads() {
        let mut c = Collector::default();
        c.add("A", &[v(0, "B", 0, 5)], 1.0, vec![1, 2]);
        let r = c.finish("t", serde_json::json!({"x": 2}));
        let s = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<AnalysisResult>(&s).unwrap(), r);
        let min: AnalysisResult =
            serde_json::from_str(r#"{"patterns": [{"signature": "A>B", "count": 3}]}"#).unwrap();
        assert_eq!(min.patterns[0].count, 3);
    }

    /// The signature and preorder written straight from the visits equal those of the node
    /// list they stand for, on many random call trees (names that need escaping included).
    #[test]
    fn signatures_from_visits_equal_those_from_node_lists() {
        let names = ["A", "B", "C(x)", "D,E", "F>G", "H\\I"];
        let mut seed = 7u64;
        let mut rnd = |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) as usize) % n
        };
        for _ in 0..2000 {
            let len = rnd(9);
            let visits: Vec<Visit<'_>> = (0..len)
                .map(|i| v(rnd(i + 1) as u32, names[rnd(names.len())], 0, 1))
                .collect();
            let (mut sig, mut order, mut links) = (String::new(), Vec::new(), Vec::new());
            tree_of_visits("R,", &visits, &mut links, &mut sig, &mut order);
            let mut nodes = vec![PatternNode {
                node: "R,".into(),
                ..PatternNode::default()
            }];
            let mut kids = vec![0u32; len + 1];
            for (i, x) in visits.iter().enumerate() {
                let p = (x.parent as usize).min(i);
                nodes.push(PatternNode {
                    parent: Some(p as u32),
                    ord: kids[p],
                    node: x.node.into(),
                    ..PatternNode::default()
                });
                kids[p] += 1;
            }
            let (nodes, want_order) = preorder(nodes);
            assert_eq!(sig, signature_of_nodes(&nodes));
            assert_eq!(order, want_order);
        }
    }
}
