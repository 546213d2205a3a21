//! Instances aggregated into patterns: per signature, the instances' counts, expectations
//! and latency distributions per node ([`Collector`]), ranked as asked ([`Rank`]).

use super::signature::escape;
use super::*;

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
#[path = "tests.rs"]
mod tests;
