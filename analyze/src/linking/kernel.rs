//! The empirical delay kernel (ours, `--kernel empirical`): how likely a parent→child pair
//! with a given gap is causal, learned from the trace itself.
//!
//! WAP5 weighs a candidate parent `e^(−λ·gap)`, which always prefers the newest message into
//! the node. Under parallelism the newest is rarely the cause — a web server that calls its
//! database 50 ms after each request, with a request arriving every 20 ms, has two or three
//! newer messages in between — and the paper's own estimate of `λ` (the gap to the newest)
//! shrinks, so the true parent weighs less than spontaneity.
//!
//! Instead: per (parent's sender X, node B, child's receiver C), after client aggregation,
//! a histogram of every candidate gap within the window, in exponential bins (1 µs × 1.05^k,
//! as nesting's scoreboard), smoothed with a Gaussian of 2 bins. Pairs that are not causal
//! arrive independently of the child, so their gaps spread uniformly over the gaps each
//! child could see — up to the window, to its sender's first arrival or to its farthest
//! candidate counted, whichever is nearest (its *reach*): a bin's background is the key's
//! pairs times the bin's share of all its children's reaches (`ρ·width` per bin,
//! `ρ = pairs / window`, when every child sees the whole window). Without the reach a trace
//! shorter than the window, or a node busier than the learning pass's candidate limit,
//! puts far fewer pairs at long gaps than the window would hold, and the flat background
//! it is measured against is too low near the child: every gap looks causal. The excess
//! above that background, less two standard deviations of it, is the causal part; a pair
//! in bin `b` is causal with probability `w = excess(b) / count(b)` (at most 0.99). A
//! child's candidates then weigh their odds `w / (1 − w)` — the likelihood ratio of causal
//! over background at that gap, times the share of the edge's messages such a parent
//! causes — against spontaneity's prior: the share of the edge B→C's messages that the
//! excess of all its keys leaves unexplained (at least 0.01). Exactly one candidate is the
//! cause, or none.
//!
//! A key is *thin* when its parent edge X→B or its child edge B→C had fewer than
//! [`THIN`] messages among those that taught the kernel: even if every one of them were
//! causal, their peak could not rise above two standard deviations of the background (a
//! 1-in-1,000 variant's keys). Step 2 weighs a thin key's candidates the paper's way
//! instead, `e^(−gap/d)` against `e^(−y)`, scaled to the edge's spontaneity prior
//! ([`super::links`]).
//!
//! With the kernel a child keeps at most `KERNEL_CANDIDATES` candidates (in [`super::links`]):
//! far from a key's peaks the background subtraction leaves small positive bins, and without
//! the cap most kept links were such wobble, long after the causal gaps. The scan also stops at
//! the reach of the child edge's keys (the last gap bin with a probability above 0).

use super::gallop::last_at_most;
use crate::hash::FxHashMap;
use crate::nesting::bins::{Bins, gaussian, smooth_into};
use crate::trace::{NodeId, Time};

/// The largest probability a pair gets.
const MAX_W: f64 = 0.99;

/// The smallest prior of spontaneity an edge gets.
const MIN_SPONT: f64 = 0.01;

/// Fewer messages than this on a key's parent or child edge make it thin (see the module
/// doc): a peak of `n` pairs smoothed over 2 bins stands about `n / 5` high, against a floor
/// of 2 (two standard deviations of an empty background).
pub const THIN: f64 = 64.0;

/// A (parent's sender, node, child's receiver) key.
pub type Key = (NodeId, NodeId, NodeId);

/// Dense ids of keys.
#[derive(Debug, Default)]
pub struct Keys {
    ids: FxHashMap<Key, u32>,
    list: Vec<Key>,
}

impl Keys {
    /// The id of `key`, added if new.
    pub fn id(&mut self, key: Key) -> u32 {
        *self.ids.entry(key).or_insert_with(|| {
            self.list.push(key);
            (self.list.len() - 1) as u32
        })
    }

    /// The id of `key`, if known.
    pub fn get(&self, key: Key) -> Option<u32> {
        self.ids.get(&key).copied()
    }
}

/// The keys of one child edge B→C: where step 2 looks a candidate up.
#[derive(Debug, Default)]
pub struct EdgeKeys {
    /// (parent's sender X, key id, the key's reach, whether it is thin), by X.
    from: Vec<(NodeId, u32, Time, bool)>,
    /// No pair of these keys' that are not thin is causal at a longer gap (ns).
    pub reach: Time,
    /// Some of these keys are thin: weighed the paper's way.
    pub thin: bool,
}

/// A candidate's key as step 2 sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOf {
    /// Learned: the key's id, and the longest gap at which its pairs may be causal.
    Learned(u32, Time),
    /// Too few messages to learn from: the paper's weight.
    Thin,
}

impl EdgeKeys {
    /// The key (X, B, C), if known.
    pub fn key(&self, x: NodeId) -> Option<KeyOf> {
        self.from
            .binary_search_by_key(&x, |e| e.0)
            .ok()
            .map(|i| match self.from[i] {
                (_, _, _, true) => KeyOf::Thin,
                (_, id, reach, false) => KeyOf::Learned(id, reach),
            })
    }
}

/// Per-key causal probabilities by gap bin.
#[derive(Debug)]
pub struct Kernel {
    bins: Bins,
    /// Key ids.
    pub keys: Keys,
    /// The keys of each child edge (B, C), with their reach.
    edges: FxHashMap<(NodeId, NodeId), EdgeKeys>,
    /// `bounds[k]`: the shortest gap in bin `k` (as `Bins::of` puts it).
    bounds: Vec<Time>,
    /// `probs[key * bins + bin]`.
    probs: Vec<f32>,
    spont: FxHashMap<(NodeId, NodeId), f64>,
    totals: Vec<f64>,
    /// Per child edge B→C, each bin's share of the gaps its children could see.
    shares: FxHashMap<(NodeId, NodeId), Vec<f64>>,
}

/// Gap counts, before [`Learner::finish`] makes a [`Kernel`] of them.
#[derive(Debug)]
pub struct Learner {
    bins: Bins,
    /// `bounds[k]`: the shortest gap in bin `k`.
    bounds: Vec<Time>,
    keys: Keys,
    counts: Vec<f64>,
    totals: Vec<f64>,
    children: FxHashMap<(NodeId, NodeId), f64>,
    /// Per child edge: the children whose reach ends in each bin, and the part of that bin
    /// they reach, summed.
    reaches: FxHashMap<(NodeId, NodeId), Reaches>,
}

/// Where a child edge's children's reaches end: per bin, how many, and how far into the
/// bin in sum (ns).
#[derive(Debug, Clone)]
struct Reaches {
    ends: Vec<f64>,
    into: Vec<f64>,
}

impl Reaches {
    fn new(bins: usize) -> Reaches {
        Reaches {
            ends: vec![0.0; bins],
            into: vec![0.0; bins],
        }
    }

    /// Each bin's share of all the gaps the children could see: a bin below a child's
    /// reach is seen whole, the bin its reach ends in up to the reach.
    fn shares(&self, b: Bins) -> Vec<f64> {
        let mut beyond: f64 = self.ends.iter().sum();
        let mut seen = vec![0.0; b.count];
        for (k, s) in seen.iter_mut().enumerate() {
            beyond -= self.ends[k];
            *s = full_width(b, k) * beyond.max(0.0) + self.into[k];
        }
        let total: f64 = seen.iter().sum();
        if total > 0.0 {
            seen.iter_mut().for_each(|s| *s /= total);
        }
        seen
    }
}

/// The lower edge of bin `k` (ns), as [`Bins::of`] puts gaps in it.
fn lower(b: Bins, k: usize) -> f64 {
    if k == 0 {
        0.0
    } else {
        b.first_ns * 1.05f64.powi(k as i32)
    }
}

/// The width of bin `k` (ns).
fn full_width(b: Bins, k: usize) -> f64 {
    b.first_ns * 1.05f64.powi(k as i32 + 1) - lower(b, k)
}

/// Smooths each key's histogram (`bins` values each) with a Gaussian of `sigma` bins, cut
/// at 3 sigma.
fn smooth(h: &mut [f64], bins: usize, sigma: f64) {
    let kernel = gaussian(sigma);
    let mut out = vec![0.0; bins];
    for row in h.chunks_mut(bins) {
        smooth_into(row, &kernel, &mut out);
        row.copy_from_slice(&out);
    }
}

/// The shortest gap (ns) of every bin, as `Bins::of` puts gaps in them.
fn bounds(b: Bins) -> Vec<Time> {
    b.lut().bounds().to_vec()
}

/// Each child edge's keys and the longest gap at which any of them is causal: past the
/// upper edge of its last bin with a probability above 0 (the window if that is the last
/// bin, which holds every longer gap too).
fn edge_keys(
    keys: &Keys,
    probs: &[f32],
    thin: &[bool],
    b: Bins,
    window: f64,
) -> FxHashMap<(NodeId, NodeId), EdgeKeys> {
    let mut edges: FxHashMap<(NodeId, NodeId), EdgeKeys> = FxHashMap::default();
    for (id, &(x, node, to)) in keys.list.iter().enumerate() {
        if thin[id] {
            let e = edges.entry((node, to)).or_default();
            e.from.push((x, id as u32, 0, true));
            e.thin = true;
            continue;
        }
        let row = &probs[id * b.count..(id + 1) * b.count];
        let reach = match row.iter().rposition(|&p| p > 0.0) {
            None => 0.0,
            Some(k) if k + 1 == b.count => window,
            // One nanosecond more: a gap on the edge itself may round into bin k.
            Some(k) => (b.first_ns * 1.05f64.powi(k as i32 + 1)).ceil() + 1.0,
        };
        let reach = reach.min(window) as Time;
        let e = edges.entry((node, to)).or_default();
        e.from.push((x, id as u32, reach, false));
        e.reach = e.reach.max(reach);
    }
    for e in edges.values_mut() {
        e.from.sort_unstable();
    }
    edges
}

impl Learner {
    /// An empty learner.
    pub fn new() -> Learner {
        Learner {
            bins: Bins::FINE,
            bounds: bounds(Bins::FINE),
            keys: Keys::default(),
            counts: Vec::new(),
            totals: Vec::new(),
            children: FxHashMap::default(),
            reaches: FxHashMap::default(),
        }
    }

    /// Counts one child message B→C whose candidates' gaps were looked at up to `reach`
    /// (ns; see the module doc).
    pub fn child(&mut self, edge: (NodeId, NodeId), reach: Time) {
        *self.children.entry(edge).or_default() += 1.0;
        let b = self.bins;
        let r = self
            .reaches
            .entry(edge)
            .or_insert_with(|| Reaches::new(b.count));
        let k = b.of(reach);
        r.ends[k] += 1.0;
        r.into[k] += (reach as f64 - lower(b, k)).clamp(0.0, full_width(b, k));
    }

    /// The id of `key`, its row of counts made if new.
    fn row(&mut self, key: Key) -> usize {
        let id = self.keys.id(key) as usize;
        if self.totals.len() <= id {
            self.totals.resize(id + 1, 0.0);
            self.counts.resize((id + 1) * self.bins.count, 0.0);
        }
        id
    }

    /// Counts one candidate pair.
    pub fn count(&mut self, key: Key, gap: Time) {
        self.count_from(key, gap, 0);
    }

    /// Counts one candidate pair whose gap is in bin `from` or later (a child's candidates
    /// come in growing gaps); returns the gap's bin.
    pub fn count_from(&mut self, key: Key, gap: Time, from: usize) -> usize {
        let (id, nb) = (self.row(key), self.bins.count);
        let bin = last_at_most(&self.bounds, gap, from);
        self.counts[id * nb + bin] += 1.0;
        self.totals[id] += 1.0;
        bin
    }

    /// Adds what `other` counted (learners of parts of a trace, merged in order).
    pub fn merge(&mut self, other: Learner) {
        let nb = self.bins.count;
        for (oid, &key) in other.keys.list.iter().enumerate() {
            let id = self.row(key);
            self.totals[id] += other.totals[oid];
            let from = &other.counts[oid * nb..(oid + 1) * nb];
            for (c, o) in self.counts[id * nb..(id + 1) * nb].iter_mut().zip(from) {
                *c += o;
            }
        }
        for (e, n) in other.children {
            *self.children.entry(e).or_default() += n;
        }
        for (e, r) in other.reaches {
            let mine = self.reaches.entry(e).or_insert_with(|| Reaches::new(nb));
            for (a, b) in mine.ends.iter_mut().zip(&r.ends) {
                *a += b;
            }
            for (a, b) in mine.into.iter_mut().zip(&r.into) {
                *a += b;
            }
        }
    }

    /// The kernel: background-subtracted causal probabilities per bin.
    pub fn finish(mut self, window: Time) -> Kernel {
        let b = self.bins;
        let nb = b.count;
        smooth(&mut self.counts, nb, 2.0);
        let window = window.max(1) as f64;
        let shares: FxHashMap<(NodeId, NodeId), Vec<f64>> = self
            .reaches
            .iter()
            .map(|(&e, r)| (e, r.shares(b)))
            .collect();
        let none = vec![0.0; nb];
        let mut probs = vec![0f32; self.counts.len()];
        let mut caused: FxHashMap<(NodeId, NodeId), f64> = FxHashMap::default();
        for (id, &key) in self.keys.list.iter().enumerate() {
            let share = shares.get(&(key.1, key.2)).unwrap_or(&none);
            let mut mass = 0.0;
            for k in 0..nb {
                let h = self.counts[id * nb + k];
                let bg = self.totals[id] * share[k];
                let excess = h - bg - 2.0 * (bg + 1.0).sqrt();
                if h > 0.0 && excess > 0.0 && share[k] > 0.0 {
                    mass += excess;
                    probs[id * nb + k] = (excess / h).min(MAX_W) as f32;
                }
            }
            *caused.entry((key.1, key.2)).or_default() += mass;
        }
        // An edge's messages that no parent's excess explains are spontaneous.
        let spont = self
            .children
            .iter()
            .map(|(&e, &n)| {
                let explained = caused.get(&e).copied().unwrap_or(0.0) / n.max(1.0);
                (e, (1.0 - explained).clamp(MIN_SPONT, 1.0))
            })
            .collect();
        // Keys with too few messages on either edge to show a peak.
        let few = |e: (NodeId, NodeId)| self.children.get(&e).copied().unwrap_or(0.0) < THIN;
        let thin: Vec<bool> = self
            .keys
            .list
            .iter()
            .map(|&(x, node, to)| few((x, node)) || few((node, to)))
            .collect();
        let edges = edge_keys(&self.keys, &probs, &thin, b, window);
        Kernel {
            bounds: bounds(b),
            bins: b,
            keys: self.keys,
            edges,
            probs,
            spont,
            totals: self.totals,
            shares,
        }
    }
}

impl Default for Learner {
    fn default() -> Self {
        Learner::new()
    }
}

impl Kernel {
    /// Refits the kernel to link posteriors (an EM step): per key, the causal pairs per bin
    /// are the posteriors' sum there (smoothed), the background the key's other pairs spread
    /// over the gaps its children could see; a pair weighs causal / background at its gap, as odds
    /// `w / (1 − w)` with `w` stored. Spontaneity's prior per edge becomes the mean posterior
    /// that its messages were spontaneous.
    pub fn refit(
        &mut self,
        links: impl Iterator<Item = (u32, f64)>,
        spont: impl Iterator<Item = ((NodeId, NodeId), f64)>,
    ) {
        let nb = self.bins.count;
        let mut causal = vec![0f64; self.probs.len()];
        let mut sums = vec![0f64; self.totals.len()];
        for (cell, p) in links {
            if let Some(c) = causal.get_mut(cell as usize) {
                *c += p;
                sums[cell as usize / nb] += p;
            }
        }
        smooth(&mut causal, nb, 2.0);
        let none = vec![0.0; nb];
        for (id, row) in self.probs.chunks_mut(nb).enumerate() {
            let (_, node, to) = self.keys.list[id];
            let share = self.shares.get(&(node, to)).unwrap_or(&none);
            let others = (self.totals[id] - sums[id]).max(1.0);
            for (k, w) in row.iter_mut().enumerate() {
                let c = causal[id * nb + k];
                let bg = others * share[k];
                *w = if c <= 0.0 || share[k] <= 0.0 {
                    0.0
                } else {
                    (c / (c + bg)).min(MAX_W) as f32
                };
            }
        }
        let mut acc: FxHashMap<(NodeId, NodeId), (f64, f64)> = FxHashMap::default();
        for (edge, p) in spont {
            let a = acc.entry(edge).or_default();
            a.0 += p;
            a.1 += 1.0;
        }
        for (edge, (p, n)) in acc {
            self.spont.insert(edge, (p / n).clamp(MIN_SPONT, 1.0));
        }
    }

    /// The prior probability that a message B→C is spontaneous: the share of the edge's
    /// messages that the excess of all its keys does not explain (at least 0.01).
    pub fn spont(&self, edge: (NodeId, NodeId)) -> f64 {
        self.spont.get(&edge).copied().unwrap_or(1.0)
    }

    /// The keys of child edge B→C, if any pair was causal on it.
    pub fn edge(&self, edge: (NodeId, NodeId)) -> Option<&EdgeKeys> {
        self.edges.get(&edge)
    }

    /// The gap bin of `gap`, found from bin `from` on (a bin at or below `gap`'s: gaps
    /// taken in increasing order move it forward). The same bin as `Bins::of`.
    pub fn bin_from(&self, gap: Time, from: usize) -> usize {
        last_at_most(&self.bounds, gap, from)
    }

    /// The cell of key `id` and gap bin `bin`.
    pub fn cell_of(&self, id: u32, bin: usize) -> u32 {
        (id as usize * self.bins.count + bin) as u32
    }

    /// The cell of key `id` and this gap: where [`Kernel::prob_cell`] looks.
    pub fn cell(&self, id: u32, gap: Time) -> u32 {
        (id as usize * self.bins.count + self.bins.of(gap)) as u32
    }

    /// The probability that a pair in `cell` is causal.
    pub fn prob_cell(&self, cell: u32) -> f64 {
        self.probs.get(cell as usize).map_or(0.0, |&p| f64::from(p))
    }

    /// The probability that a pair of key `id` with this gap is causal.
    pub fn prob_id(&self, id: u32, gap: Time) -> f64 {
        let at = id as usize * self.bins.count + self.bins.of(gap);
        self.probs.get(at).map_or(0.0, |&p| f64::from(p))
    }

    /// The probability that a pair of `key` with this gap is causal.
    pub fn prob(&self, key: Key, gap: Time) -> f64 {
        self.keys.get(key).map_or(0.0, |id| self.prob_id(id, gap))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Uniform numbers in [0, 1) from a seeded LCG.
    fn uniform(mut seed: u64) -> impl FnMut() -> f64 {
        move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// Causal pairs 50 ms apart among uniformly spread others: the kernel finds them.
    #[test]
    fn a_delay_peak_stands_out_of_the_background() {
        let mut l = Learner::new();
        let ms = 1_000_000;
        let mut rnd = uniform(1);
        for _ in 0..5000 {
            // Each child, and the messages into its node.
            l.child((1, 2), 1000 * ms);
            l.child((0, 1), 1000 * ms);
            l.child((3, 1), 1000 * ms);
            l.count(
                (0, 1, 2),
                50 * ms + ((rnd() - 0.5) * 4.0 * ms as f64) as Time,
            );
            for _ in 0..20 {
                l.count((0, 1, 2), (rnd() * 1000.0 * ms as f64) as Time);
            }
            l.count((3, 1, 2), (rnd() * 1000.0 * ms as f64) as Time);
        }
        let k = l.finish(1000 * ms);
        assert!(
            k.prob((0, 1, 2), 50 * ms) > 0.5,
            "{}",
            k.prob((0, 1, 2), 50 * ms)
        );
        assert!(k.prob((0, 1, 2), 5 * ms) < 0.1);
        assert!(k.prob((0, 1, 2), 500 * ms) < 0.1);
        assert!(k.prob((3, 1, 2), 50 * ms) < 0.1);
        assert_eq!(k.prob((9, 9, 9), 50 * ms), 0.0);
        // Step 2's look-up: the edge's keys, reaching past the peak, within the window.
        let e = k.edge((1, 2)).expect("edge (1, 2)");
        let Some(KeyOf::Learned(id, reach)) = e.key(0) else {
            panic!("key (0, 1, 2) learned")
        };
        assert!(reach > 50 * ms && reach <= 1000 * ms, "{reach}");
        assert!(e.reach >= reach);
        assert!(k.edge((2, 1)).is_none());
        let bin = k.bin_from(50 * ms, 0);
        assert_eq!(k.prob_cell(k.cell_of(id, bin)), k.prob((0, 1, 2), 50 * ms));
    }

    /// Children that could only see gaps up to 100 ms (a trace shorter than the 2 s window):
    /// the background is spread over what they saw, so only the causal peak stands out.
    #[test]
    fn the_background_is_spread_over_each_childs_reach() {
        let mut l = Learner::new();
        let ms = 1_000_000;
        let mut rnd = uniform(7);
        for _ in 0..2000 {
            l.child((1, 2), 100 * ms);
            l.child((0, 1), 100 * ms);
            l.count((0, 1, 2), ms + ((rnd() - 0.5) * 0.2 * ms as f64) as Time);
            for _ in 0..50 {
                l.count((0, 1, 2), (rnd() * 100.0 * ms as f64) as Time);
            }
        }
        let k = l.finish(2000 * ms);
        assert!(k.prob((0, 1, 2), ms) > 0.5, "{}", k.prob((0, 1, 2), ms));
        for gap in [5, 20, 50, 90] {
            let p = k.prob((0, 1, 2), gap * ms);
            assert!(p < 0.1, "{gap} ms: {p}");
        }
    }

    /// A key whose parent or child edge had fewer than [`THIN`] messages is thin, however
    /// many pairs it counted; one with enough on both is learned.
    #[test]
    fn keys_of_rare_edges_are_thin() {
        let mut l = Learner::new();
        for i in 0..200 {
            l.child((1, 2), 2_000_000_000);
            l.child((0, 1), 2_000_000_000);
            l.count((0, 1, 2), 1_000_000 + i);
            if i < 10 {
                // A rare sender into node 1, and a rare edge out of it.
                l.child((5, 1), 2_000_000_000);
                l.child((1, 6), 2_000_000_000);
                l.count((5, 1, 2), 2_000_000 + i);
                l.count((0, 1, 6), 1_000_000 + i);
            }
        }
        let k = l.finish(2_000_000_000);
        let e = k.edge((1, 2)).expect("edge (1, 2)");
        assert!(matches!(e.key(0), Some(KeyOf::Learned(..))));
        assert_eq!(e.key(5), Some(KeyOf::Thin));
        assert!(e.thin);
        assert_eq!(k.edge((1, 6)).and_then(|e| e.key(0)), Some(KeyOf::Thin));
        assert_eq!(e.key(7), None);
    }

    /// Moving the bin forward along growing gaps gives `Bins::of`'s bin, at the bins'
    /// edges too.
    #[test]
    fn bins_found_forward_match_bins_of() {
        let b = Bins::FINE;
        let k = Learner::new().finish(2_000_000_000);
        let mut gaps: Vec<Time> = (0..4000).map(|i| i * 997).collect();
        for &edge in &bounds(b)[1..] {
            gaps.extend([edge - 1, edge, edge + 1]);
        }
        // Far apart too: jumps of many bins, and past the last bin.
        gaps.extend((0..75).map(|i| (1.4f64.powi(i) * 1e3) as Time));
        gaps.sort_unstable();
        let mut bin = 0;
        let mut l = Learner::new();
        let mut lbin = 0;
        for g in gaps {
            bin = k.bin_from(g, bin);
            assert_eq!(bin, b.of(g), "gap {g}");
            assert_eq!(k.bin_from(g, 0), b.of(g), "gap {g} from bin 0");
            lbin = l.count_from((0, 1, 2), g, lbin);
            assert_eq!(lbin, b.of(g), "gap {g} counted");
        }
    }
}
