//! Candidate parents, the scoreboard's votes and one parent per child (\[P5\] §5.1
//! ScoreNestings and FindNestedPairs).
//!
//! A call pair `c` (B→C) may be nested in a pair `P` (X→B) when P's call reached B before B
//! sent c's call and P's return left B after c's return reached B — all four times stamped
//! by B when the trace has both ends of every message (p5's own sessions), so no clock offset
//! between hosts can change the answer. For a child no parent holds that way, `window` widens
//! both comparisons: in traces with one timestamp per message B's times are other hosts', and
//! a skewed clock moves children out of their parents (\[P5\] §7.5.6).
//!
//! Passes, in order: the first scores each candidate by the scoreboard's call-delay row, scaled
//! by the share of the return gap ([`score`]); each of `gap_passes` more rebuilds the
//! histograms from the pass before's assignment, keyed by the callee of the sibling before
//! ([`gap_scoreboard`]), because a call delay measured from the parent's arrival mixes a first
//! DB call with a second that spans it, and keyed by the sibling before each is one peak; then
//! [`rebalance`]. A child none of whose candidates scores above 0 is a root. A delay one end of
//! which is a lost half's estimate casts no vote and scores [`UNKNOWN_SHARE`] of its row's
//! typical value.

use super::bins::{BinLut, Scoreboard, Scores};
use super::pairs::CallPair;
use super::repair::{Ends, LOST};
use crate::trace::{NodeId, Time};

/// The penalties (\[P5\] §5.1.1.3) and the skew window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Penalties {
    /// Exponent of (1 + children of the parent that overlap this one).
    pub overlap: f64,
    /// Exponent of (1 + children of the parent calling the same node).
    pub same: f64,
    /// Exponent of (1 + all children of the parent so far).
    pub generic: f64,
}

/// The bin of a delay one end of which a lost half's estimate gave ([`super::repair`]):
/// it casts no vote and scores a share of the typical value ([`UNKNOWN_SHARE`]).
pub const UNKNOWN: u16 = u16::MAX;

/// Candidate parents of every child with the bin of its delay after each and of the gap from
/// its return to each one's: `offsets[c]..offsets[c + 1]` index `parents`, `bins` and
/// `ret_bins`.
#[derive(Debug, Default)]
pub struct Candidates {
    offsets: Vec<u32>,
    parents: Vec<u32>,
    bins: Vec<u16>,
    /// The bin of the gap from the child's return to the parent's return, per candidate.
    ret_bins: Vec<u16>,
}

impl Candidates {
    fn of(&self, c: usize) -> (&[u32], &[u16]) {
        let r = self.offsets[c] as usize..self.offsets[c + 1] as usize;
        (&self.parents[r.clone()], &self.bins[r])
    }

    /// The return bins of child `c`'s candidates (none without return gaps).
    fn ret_of(&self, c: usize) -> &[u16] {
        self.ret_bins
            .get(self.offsets[c] as usize..self.offsets[c + 1] as usize)
            .unwrap_or(&[])
    }
}

/// Finds every child's candidate parents (ordered by when their call arrived) with a sweep
/// over the pairs in call order: O(pairs × parallelism). A pair that lost a half holds
/// children by its loose ends (`ends`).
pub fn candidates(
    pairs: &[CallPair],
    nodes: usize,
    window: Time,
    bins: &BinLut,
    returns: bool,
    ends: &impl Ends,
) -> Candidates {
    // Per node, the pairs into it by arrival of their call.
    let mut into: Vec<Vec<u32>> = vec![Vec::new(); nodes];
    for (i, p) in pairs.iter().enumerate() {
        into[p.callee as usize].push(i as u32);
    }
    for v in &mut into {
        v.sort_by_key(|&i| ends.start(&pairs[i as usize]));
    }
    let mut next = vec![0usize; nodes];
    let mut active: Vec<Vec<u32>> = vec![Vec::new(); nodes];
    let mut out = Candidates {
        offsets: Vec::with_capacity(pairs.len() + 1),
        parents: Vec::new(),
        bins: Vec::new(),
        ret_bins: Vec::new(),
    };
    out.offsets.push(0);
    for (ci, c) in pairs.iter().enumerate() {
        let b = c.caller as usize;
        let (list, act) = (&into[b], &mut active[b]);
        let (c_out, c_in) = (ends.call_out(c), ends.ret_in(c));
        while next[b] < list.len()
            && ends.start(&pairs[list[next[b]] as usize]) <= c_out.saturating_add(window)
        {
            act.push(list[next[b]]);
            next[b] += 1;
        }
        // A parent whose return left before this call cannot hold this or any later child.
        act.retain(|&p| ends.end(&pairs[p as usize]) >= c.out_call.saturating_sub(window));
        // The parents that hold the child on the times as they are; only if there is none,
        // those the skew window admits (it rescues children a skewed clock moved out of their
        // parent, without diluting the votes of the children it did not move).
        for w in [0, window] {
            for &p in act.iter() {
                let pp = &pairs[p as usize];
                if p as usize != ci && ends.start(pp) <= c_out + w && ends.end(pp) >= c_in - w {
                    out.parents.push(p);
                    out.bins.push(if pp.call == LOST || c.call == LOST {
                        UNKNOWN
                    } else {
                        bins.of(c.out_call.saturating_sub(pp.in_call)) as u16
                    });
                    if returns {
                        out.ret_bins.push(if pp.ret == LOST || c.ret == LOST {
                            UNKNOWN
                        } else {
                            bins.of(pp.out_ret.saturating_sub(c.in_ret)) as u16
                        });
                    }
                }
            }
            if out.parents.len() > *out.offsets.last().unwrap_or(&0) as usize || window == 0 {
                break;
            }
        }
        out.offsets.push(out.parents.len() as u32);
    }
    out
}

/// The scoreboard key of child `c`'s vote for parent `p`.
fn key(pairs: &[CallPair], p: u32, c: &CallPair) -> (NodeId, NodeId, NodeId) {
    (pairs[p as usize].caller, c.caller, c.callee)
}

/// The scoreboard: each child gives each of its N candidates 1/N, at the candidate's call
/// delay and, when the candidates have them, at its return gap (ours): the gap from the
/// child's return to the candidate parent's return. The paper scores the call delay alone;
/// a program that returns a typical time after its last call did is as telling, and it is
/// what tells a call that made one call from one that made two (the second child's return
/// gap is the parent's last stretch of work, the first's spans the second call): on the
/// multi-tier trace it takes the application tier's mean latency error from 6.7–7.5 % to
/// about 3 %.
pub fn score(pairs: &[CallPair], cands: &Candidates, bins: &BinLut) -> Scoreboard {
    let returns = !cands.ret_bins.is_empty();
    let mut sb = Scoreboard::new(bins.count(), returns);
    for (ci, c) in pairs.iter().enumerate() {
        let (ps, bs) = cands.of(ci);
        let w = 1.0 / ps.len().max(1) as f64;
        if returns {
            for ((&p, &b), &rb) in ps.iter().zip(bs).zip(cands.ret_of(ci)) {
                if b != UNKNOWN && rb != UNKNOWN {
                    sb.add_with_return(key(pairs, p, c), b as usize, rb as usize, w);
                }
            }
        } else {
            for (&p, &b) in ps.iter().zip(bs).filter(|(_, b)| **b != UNKNOWN) {
                sb.add(key(pairs, p, c), b as usize, w);
            }
        }
    }
    sb
}

/// `(1 + n)^-x`, with the common integer exponents multiplied out.
fn penalty(n: usize, x: f64) -> f64 {
    let base = 1.0 + n as f64;
    match x {
        0.0 => 1.0,
        1.0 => 1.0 / base,
        2.0 => 1.0 / (base * base),
        _ => base.powf(-x),
    }
}

/// No parent: the pair is a root.
pub const ROOT: u32 = u32::MAX;

/// In the `fixed` parents [`assign`] and [`rebalance`] take: a child whose parent is left to
/// the scoreboard. Any other value is the child's parent, or [`ROOT`].
pub const FREE: u32 = u32::MAX - 1;

/// The fixed parent of child `c`, if any (`fixed` may be empty: none is fixed).
fn fixed_of(fixed: &[u32], c: usize) -> Option<u32> {
    fixed.get(c).copied().filter(|&f| f != FREE)
}

/// Who nests in whom: each pair's parent ([`ROOT`] for none) and each parent's children
/// as a list from the last (in call order) back through `prev_sib` (`u32::MAX` ends it).
#[derive(Debug, Default)]
pub struct Tree {
    /// Parent of each pair, or [`ROOT`].
    pub parent: Vec<u32>,
    /// Last child of each pair.
    pub last_kid: Vec<u32>,
    /// The child assigned to the same parent before this one.
    pub prev_sib: Vec<u32>,
}

impl Tree {
    /// Pairs nested in a parent.
    pub fn nested(&self) -> usize {
        self.parent.iter().filter(|&&p| p != ROOT).count()
    }

    /// Takes child `c` out of its parent's list.
    fn unlink(&mut self, c: u32) {
        let p = self.parent[c as usize];
        if p == ROOT {
            return;
        }
        let next = self.prev_sib[c as usize];
        if self.last_kid[p as usize] == c {
            self.last_kid[p as usize] = next;
        } else {
            let mut k = self.last_kid[p as usize];
            while k != u32::MAX && self.prev_sib[k as usize] != c {
                k = self.prev_sib[k as usize];
            }
            if k != u32::MAX {
                self.prev_sib[k as usize] = next;
            }
        }
        self.parent[c as usize] = ROOT;
        self.prev_sib[c as usize] = u32::MAX;
    }

    /// Makes `c` a child of `p`, in its place in call order (pairs are in call order).
    fn link(&mut self, c: u32, p: u32) {
        self.parent[c as usize] = p;
        // The list runs from the newest back: find the first child older than `c`.
        let (mut newer, mut k) = (u32::MAX, self.last_kid[p as usize]);
        while k != u32::MAX && k > c {
            (newer, k) = (k, self.prev_sib[k as usize]);
        }
        self.prev_sib[c as usize] = k;
        if newer == u32::MAX {
            self.last_kid[p as usize] = c;
        } else {
            self.prev_sib[newer as usize] = c;
        }
    }
}

/// One parent per child (or none: a root), in call order, scaling each candidate's score
/// by `(1 + c)^-x` per penalty; ties go to the parent whose call arrived first. With return
/// gaps ([`score`]) a candidate's score is also scaled by the share of its key's votes at
/// its return gap: how typical it is for such a parent to return that long after such a
/// child did. The scoreboard is read smoothed when it was smoothed: with the return gaps,
/// smoothing every child's scores (not only those the skew window rescued, as before them)
/// helps even without skew (\[P5\] Fig. 22: 44.67 → 43.65 % instance false negatives at no
/// skew, 78.48 → 77.94 % at 60 ms). In a gap pass (`gaps`: [`gap_scoreboard`] of the pass
/// before), a candidate's score is instead its [`GapKey`] row at the local gap it would have
/// under the children assigned to it so far, times that row's share at its return gap.
pub fn assign(
    pairs: &[CallPair],
    cands: &Candidates,
    sb: &Scores,
    pen: Penalties,
    gaps: Option<(&Scores<GapKey>, &BinLut)>,
    (root_below, fixed): (f64, &[u32]),
) -> Tree {
    // Children assigned so far, per parent, as a list from the newest back.
    let mut t = Tree {
        parent: vec![ROOT; pairs.len()],
        last_kid: vec![u32::MAX; pairs.len()],
        prev_sib: vec![u32::MAX; pairs.len()],
    };
    for (ci, c) in pairs.iter().enumerate() {
        if let Some(f) = fixed_of(fixed, ci) {
            if f != ROOT {
                t.parent[ci] = f;
                t.prev_sib[ci] = t.last_kid[f as usize];
                t.last_kid[f as usize] = ci as u32;
            }
            continue;
        }
        // (score, parent, score before the penalties)
        let mut best: Option<(f64, u32, f64)> = None;
        let (ps, bs) = cands.of(ci);
        let rbs = cands.ret_of(ci);
        for (i, (&p, &b)) in ps.iter().zip(bs).enumerate() {
            let rb = rbs.get(i).copied();
            let raw = match gaps {
                None => sb.row(key(pairs, p, c)).map_or(0.0, |row| {
                    row_score(sb, row, (b != UNKNOWN).then_some(b as usize), rb)
                }),
                Some((g, bins)) => {
                    let (gap, k) = local_gap(pairs, &t.last_kid, p, c);
                    g.row(k)
                        .map_or(0.0, |r| row_score(g, r, gap.map(|gap| bins.of(gap)), rb))
                }
            };
            if raw <= 0.0 {
                continue;
            }
            let (mut overlap, mut same, mut any) = (0, 0, 0);
            let mut k = t.last_kid[p as usize];
            while k != u32::MAX {
                let kp = &pairs[k as usize];
                overlap += usize::from(kp.out_call <= c.in_ret && c.out_call <= kp.in_ret);
                same += usize::from(kp.callee == c.callee);
                any += 1;
                k = t.prev_sib[k as usize];
            }
            let s = raw
                * penalty(overlap, pen.overlap)
                * penalty(same, pen.same)
                * penalty(any, pen.generic);
            if best.is_none_or(|(b, ..)| s > b) {
                best = Some((s, p, raw));
            }
        }
        if let Some((_, p, raw)) = best
            && root_below > 0.0
            && ps.len() > 1
            && raw < root_below * typical(pairs, sb, gaps, &t.last_kid, p, c)
        {
            best = None;
        }
        if let Some((_, p, _)) = best {
            t.parent[ci] = p;
            t.prev_sib[ci] = t.last_kid[p as usize];
            t.last_kid[p as usize] = ci as u32;
        }
    }
    t
}

/// What child `c` typically scores under a parent like `p` (before the penalties):
/// [`Scores::typical_score`] of the row it reads.
fn typical(
    pairs: &[CallPair],
    sb: &Scores,
    gaps: Option<(&Scores<GapKey>, &BinLut)>,
    last_kid: &[u32],
    p: u32,
    c: &CallPair,
) -> f64 {
    match gaps {
        None => sb
            .row(key(pairs, p, c))
            .map_or(0.0, |r| sb.typical_score(r)),
        Some((g, _)) => g
            .row(local_gap(pairs, last_kid, p, c).1)
            .map_or(0.0, |r| g.typical_score(r)),
    }
}

/// What a delay one end of which is a lost half's estimate scores, as a share of its row's
/// typical value (ours; [`UNKNOWN`]). A real candidate at a real delay scores above the
/// typical value about half the time, so an unknown one scored at it took children from
/// their true parents (on the multi-tier trace at 1 % dropped, 7.55 % instance false
/// negatives against 6.88 % at this share; 0.15–0.5 differ by less than 0.2 points).
pub const UNKNOWN_SHARE: f64 = 0.25;

/// A candidate's score in `row` of `s`: the value at its call (or local-gap) bin — a share
/// ([`UNKNOWN_SHARE`]) of the row's typical value when the delay is not known (`None`) —
/// times the share at its return bin `rb` (none without return gaps; [`UNKNOWN`]: that
/// share of the row's typical share).
#[inline]
fn row_score<K: std::hash::Hash + Eq + Copy>(
    s: &Scores<K>,
    row: &[f32],
    bin: Option<usize>,
    rb: Option<u16>,
) -> f64 {
    let v = bin.map_or_else(|| UNKNOWN_SHARE * s.typical(row), |b| row[b] as f64);
    v * match rb {
        None => 1.0,
        Some(UNKNOWN) => UNKNOWN_SHARE * s.typical_share(row),
        Some(rb) => s.return_share(row, rb as usize),
    }
}

/// The key of a local gap: the scoreboard's key and the callee of the sibling before
/// ([`NO_SIBLING`] for a first child).
pub type GapKey = (NodeId, NodeId, NodeId, NodeId);

/// The previous sibling's callee of a first child, in a [`GapKey`].
pub const NO_SIBLING: NodeId = NodeId::MAX;

/// Child `c`'s local gap under parent `p`, given each parent's last child so far: the
/// delay from the last one's return (from its call if it had not returned by `c`'s call:
/// parallel calls) else from `p`'s call's arrival — the work B did just before calling —
/// with its [`GapKey`]. Times stamped by B alone when the trace has both ends of every
/// message. No gap (`None`) when either end is a lost half's estimate.
fn local_gap(pairs: &[CallPair], last_kid: &[u32], p: u32, c: &CallPair) -> (Option<Time>, GapKey) {
    let k = last_kid[p as usize];
    gap_after(pairs, p, (k != u32::MAX).then_some(k), c)
}

/// Child `c`'s local gap under parent `p` after sibling `prev` (`None`: its first child), as
/// [`local_gap`] gives it.
fn gap_after(
    pairs: &[CallPair],
    p: u32,
    prev: Option<u32>,
    c: &CallPair,
) -> (Option<Time>, GapKey) {
    let pp = &pairs[p as usize];
    // Whether `since` came from a lost half's estimate (then the gap is not known).
    let (since, prev, guessed) = match prev {
        None => (pp.in_call, NO_SIBLING, pp.call == LOST),
        Some(k) => {
            let kp = &pairs[k as usize];
            if kp.in_ret <= c.out_call {
                (kp.in_ret, kp.callee, kp.ret == LOST)
            } else {
                (kp.out_call, kp.callee, kp.call == LOST)
            }
        }
    };
    (
        (!guessed && c.call != LOST).then(|| c.out_call.saturating_sub(since)),
        (pp.caller, c.caller, c.callee, prev),
    )
}

/// The scoreboard of a gap pass (ours): per [`GapKey`], histograms of each child's local gap
/// (`local_gap`) in `tree`, the pass before's assignment, and with `returns` of the gap
/// from its return to its parent's. Call delays from the parent's arrival mix a first
/// child's delay with a second's, which spans the first call, and the return gaps mix a last
/// child's with the others'; keyed by the sibling before, each is one peak (a second DB call
/// is the last), so a call that made one call stops adopting another's second one. Each
/// child counts 1: the tree says which parent it has.
pub fn gap_scoreboard(
    pairs: &[CallPair],
    tree: &Tree,
    bins: &BinLut,
    returns: bool,
) -> Scoreboard<GapKey> {
    let mut sb = Scoreboard::new(bins.count(), returns);
    // The last child of each parent so far, as `assign` keeps it.
    let mut last_kid = vec![u32::MAX; pairs.len()];
    for (ci, c) in pairs.iter().enumerate() {
        let p = tree.parent[ci];
        if p == ROOT {
            continue;
        }
        let (gap, key) = local_gap(pairs, &last_kid, p, c);
        last_kid[p as usize] = ci as u32;
        let pp = &pairs[p as usize];
        match gap {
            Some(gap) if returns && pp.ret != LOST && c.ret != LOST => {
                let ret_gap = pp.out_ret.saturating_sub(c.in_ret);
                sb.add_with_return(key, bins.of(gap), bins.of(ret_gap), 1.0);
            }
            Some(gap) if !returns => sb.add(key, bins.of(gap), 1.0),
            // A delay from a lost half's estimate: no vote.
            _ => {}
        }
    }
    sb
}

/// A number of children to one callee is common for a kind of parent when at least this
/// share of such parents have it ([`rebalance`]).
const COMMON: f64 = 0.1;

/// Counts of children to one callee told apart by [`count_rules`] (more are one).
const COUNTS: usize = 8;

/// Children moved by [`rebalance`] (ours): a parent has a rare number of children to a
/// callee, or of children in all, for its kind when under 10 % (`COMMON`) of such parents have
/// that number. A request makes one call to an application server, API or AP2, and that
/// call one or two DB calls, not none or three. The greedy assignment, one child at a time,
/// lets a concurrent parent of the same kind take a child (most often one whose return the
/// trace lost, held by its loose ends), and the child's own parent is left without it.
/// Taken in call order, a child of a parent with a rare number finds the candidate parent
/// where a move leaves the fewest rare numbers in the two, if fewer than before (the
/// best-scoring of those); then of its parent's children to the same callee that
/// candidate may hold, the one that keeps most of its score moves. Scores are the last gap
/// pass's (`gaps`: the local gap after the sibling before in the tree as it stands, and the
/// return gap), else the first pass's. Returns how many moved.
pub fn rebalance(
    pairs: &[CallPair],
    cands: &Candidates,
    sb: &Scores,
    gaps: Option<(&Scores<GapKey>, &BinLut)>,
    t: &mut Tree,
    fixed: &[u32],
) -> u64 {
    let rules = count_rules(pairs, t);
    if rules.is_empty() {
        return 0;
    }
    // 1 if parent `p`, with `by` more (fewer if negative) children to `x` (`ANY`: children
    // of any callee), would have a rare number of them for its kind, else 0.
    let rare = |t: &Tree, p: u32, x: NodeId, by: isize| {
        let pp = &pairs[p as usize];
        let Some(common) = rules.get(&(pp.caller, pp.callee, x)) else {
            return 0;
        };
        let n = kids(t, p)
            .filter(|&k| x == ANY || pairs[k as usize].callee == x)
            .count();
        n.checked_add_signed(by)
            .map_or(1, |n| u32::from(!common[n.min(COUNTS - 1)]))
    };
    // The rare numbers in `p` and `q` with `by` children to `c`'s callee moved from `p` to
    // `q`.
    let rare_after = |t: &Tree, p: u32, q: u32, c: &CallPair, by: isize| {
        [c.callee, ANY]
            .iter()
            .map(|&x| rare(t, p, x, -by) + rare(t, q, x, by))
            .sum::<u32>()
    };
    // Child `ci`'s score under candidate `q` before the penalties: the last gap pass's in the
    // tree as it stands when there was one, else the first pass's.
    let score = |t: &Tree, ci: usize, q: u32| {
        let (ps, bs) = cands.of(ci);
        let i = ps.iter().position(|&p| p == q)?;
        let (b, rb) = (bs[i], cands.ret_of(ci).get(i).copied());
        let c = &pairs[ci];
        match gaps {
            None => {
                let row = sb.row(key(pairs, q, c))?;
                Some(row_score(sb, row, (b != UNKNOWN).then_some(b as usize), rb))
            }
            Some((g, bins)) => {
                let prev = kids(t, q).find(|&k| (k as usize) < ci);
                let (gap, k) = gap_after(pairs, q, prev, c);
                let row = g.row(k)?;
                Some(row_score(g, row, gap.map(|gap| bins.of(gap)), rb))
            }
        }
    };
    let mut moved = 0;
    for (ci, c) in pairs.iter().enumerate() {
        let p = t.parent[ci];
        if p == ROOT
            || fixed_of(fixed, ci).is_some()
            || rare(t, p, c.callee, 0) + rare(t, p, ANY, 0) == 0
        {
            continue;
        }
        // (rare numbers after the move, score, candidate)
        let mut best: Option<(u32, f64, u32)> = None;
        for &q in cands.of(ci).0.iter().filter(|&&q| q != p) {
            let (before, after) = (rare_after(t, p, q, c, 0), rare_after(t, p, q, c, 1));
            let s = score(t, ci, q).unwrap_or(0.0);
            if after < before && s > 0.0 && best.is_none_or(|(a, b, _)| (after, -s) < (a, -b)) {
                best = Some((after, s, q));
            }
        }
        let Some((.., q)) = best else {
            continue;
        };
        let kept = |k: u32| {
            let here = score(t, k as usize, p)
                .unwrap_or(0.0)
                .max(f64::MIN_POSITIVE);
            Some(score(t, k as usize, q)? / here)
        };
        let k = kids(t, p)
            .filter(|&k| pairs[k as usize].callee == c.callee)
            .filter(|&k| fixed_of(fixed, k as usize).is_none())
            .filter_map(|k| Some((kept(k)?, k)))
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map_or(ci as u32, |(_, k)| k);
        t.unlink(k);
        t.link(k, q);
        moved += 1;
    }
    moved
}

/// The children of `p` in `t`, the newest first.
fn kids(t: &Tree, p: u32) -> impl Iterator<Item = u32> + '_ {
    std::iter::successors(
        Some(t.last_kid[p as usize]).filter(|&k| k != u32::MAX),
        |&k| Some(t.prev_sib[k as usize]).filter(|&k| k != u32::MAX),
    )
}

/// The callee of a [`count_rules`] key that counts every child.
const ANY: NodeId = NodeId::MAX;

/// Per (parent's caller, parent, child's callee — [`ANY`] for every child), which numbers
/// of such children are common ([`COMMON`]; zero counted), where some number seen is not.
fn count_rules(pairs: &[CallPair], t: &Tree) -> crate::hash::FxHashMap<CountKey, [bool; COUNTS]> {
    use crate::hash::FxHashMap;
    // The callees each kind of parent calls at all.
    let mut callees: FxHashMap<(NodeId, NodeId), Vec<NodeId>> = FxHashMap::default();
    for (ci, &p) in t.parent.iter().enumerate() {
        if p != ROOT {
            let pp = &pairs[p as usize];
            let v = callees
                .entry((pp.caller, pp.callee))
                .or_insert_with(|| vec![ANY]);
            if !v.contains(&pairs[ci].callee) {
                v.push(pairs[ci].callee);
            }
        }
    }
    // Per key, how many parents have 0, 1, … such children.
    let mut hist: FxHashMap<CountKey, [u64; COUNTS]> = FxHashMap::default();
    let mut called: Vec<NodeId> = Vec::new();
    for (p, pp) in pairs.iter().enumerate() {
        let Some(xs) = callees.get(&(pp.caller, pp.callee)) else {
            continue;
        };
        called.clear();
        called.extend(kids(t, p as u32).map(|k| pairs[k as usize].callee));
        for &x in xs {
            let n = called.iter().filter(|&&k| x == ANY || k == x).count();
            let n = n.min(COUNTS - 1);
            hist.entry((pp.caller, pp.callee, x)).or_default()[n] += 1;
        }
    }
    hist.into_iter()
        .filter_map(|(key, h)| {
            let total = h.iter().sum::<u64>() as f64;
            let common = h.map(|n| n as f64 >= COMMON * total);
            h.iter()
                .zip(common)
                .any(|(&n, c)| n > 0 && !c)
                .then_some((key, common))
        })
        .collect()
}

/// A parent kind and a child's callee.
type CountKey = (NodeId, NodeId, NodeId);

#[cfg(test)]
mod tests {
    use super::*;

    /// The children of `p`, in call order.
    fn kids(t: &Tree, p: u32) -> Vec<u32> {
        let mut v = Vec::new();
        let mut k = t.last_kid[p as usize];
        while k != u32::MAX {
            v.push(k);
            k = t.prev_sib[k as usize];
        }
        v.reverse();
        v
    }

    #[test]
    fn a_moved_child_keeps_call_order_in_both_lists() {
        let mut t = Tree {
            parent: vec![ROOT; 8],
            last_kid: vec![u32::MAX; 8],
            prev_sib: vec![u32::MAX; 8],
        };
        for c in [2, 4, 6] {
            t.link(c, 0);
        }
        for c in [3, 7] {
            t.link(c, 1);
        }
        t.link(5, 1);
        assert_eq!((kids(&t, 0), kids(&t, 1)), (vec![2, 4, 6], vec![3, 5, 7]));
        t.unlink(4);
        t.link(4, 1);
        assert_eq!((kids(&t, 0), kids(&t, 1)), (vec![2, 6], vec![3, 4, 5, 7]));
        t.unlink(6);
        t.unlink(2);
        assert_eq!((t.parent[2], kids(&t, 0)), (ROOT, vec![]));
        t.unlink(2);
        assert_eq!(t.nested(), 4);
    }
}
