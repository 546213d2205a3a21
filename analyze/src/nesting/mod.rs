//! `p5 analyze nesting`: Project 5's nesting algorithm (\[P5\] §5.1, Fig. 4;
//! `../shared/analysis.md` §1.1) — causal paths and their latencies from the timing of calls
//! and returns alone.
//!
//! Steps, one module each: [`pairs`] (FindCallPairs), [`repair`] (ours: a pair that lost
//! its call or its return keeps its place, the lost half estimated), [`assign`] (candidate
//! parents, ScoreNestings with the [`bins`] scoreboard, FindNestedPairs with the penalties),
//! [`paths`] (FindCallPaths into the shared pattern output). The algorithm is pure; [`job`]
//! is how a [`crate::job`] runs it.
//!
//! Ours, where the paper is silent or inconsistent (analysis.md §1.1): penalties scale a
//! score by `(1 + c)^-x`; a child whose best score is 0 is a root; smoothing σ = 2 bins, on
//! by default; bins start at 1 µs unless `paper_bins`. Beyond the paper: the gaps from a
//! child's return to its parent's return, beside the call delays in the scoreboard, scale
//! each candidate's score (`returns`; [`assign::score`]); then `gap_passes` more
//! assignments score each candidate by the gap since the child it made before and by the
//! return gap, keyed by that child's callee and histogrammed from the pass before
//! ([`assign::gap_scoreboard`]). When every message has both its send and its receive time
//! (p5's own sessions), nesting compares times stamped by one node only and call delays are
//! measured at the node that makes the call, so a host's clock offset changes nothing.
//!
//! After the last pass, [`assign::rebalance`] (ours, on by default, `rebalance`) moves a child
//! from a parent with a number of children that few parents of its kind have (a request without
//! its application call, an application call with three DB calls) to a candidate the move
//! leaves with fewer such numbers: the greedy assignment, one child at a time, lets a
//! concurrent request take a child, and the score counts instances per signature, where such a
//! count shows. `root_below` (ours, off by default) leaves a child a root when its best parent
//! scores below that share of its row's typical value: it removes unlikely nestings, but a
//! genuinely slow call scores low too, and that is the request a user of a performance tool
//! looks for.
//!
//! On a recorded session (`threads`, on by default) each call's parent is the request its
//! caller's thread was serving ([`crate::causality`]); the scoreboard places only the rest. Off
//! (`--black-box`), or on a trace without threads, nesting infers every parent from timing, as
//! the paper does.

pub mod assign;
pub mod bins;
pub mod job;
pub mod pairs;
pub mod paths;
pub mod repair;

use crate::pattern::AnalysisResult;
use crate::trace::{Time, Trace};
use assign::Penalties;
use bins::Bins;

/// Parameters of [`nesting`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// The three penalties (default x = 2, y = z = 0).
    pub penalties: Penalties,
    /// Gaussian smoothing of the scoreboards, σ in bins (0: none; default 2, ours: on the
    /// multi-tier trace it halves instance false negatives, 9.7–10.6 → 5.6–6.3 %, and
    /// brings every node of the eight frequent patterns within 5 % on every seed).
    pub smooth: f64,
    /// Skew window (ns): how much a child may seem to start before its parent or end after
    /// it (single-timestamp traces under clock skew).
    pub window: Time,
    /// The paper's 340 bins from 1 ms instead of ours from 1 µs.
    pub paper_bins: bool,
    /// Also score each candidate parent by the gap from the child's return to its return
    /// (ours, on by default; off: the paper's call delays alone).
    pub returns: bool,
    /// Passes after the first that score each candidate parent by the local gap — from the
    /// return of the last child assigned to it so far (else its call's arrival) to the
    /// child's call — and the return gap, both keyed by that child's callee and histogrammed
    /// from the pass before's assignment (ours; 0: the paper's one pass).
    pub gap_passes: u32,
    /// Keep a call whose return was lost, or a return whose call was, as a pair with the
    /// lost half estimated from its link's typical delays ([`repair`]; ours, on by default).
    pub repair: bool,
    /// After the last pass, a child with more than one candidate whose best parent scores
    /// (before the penalties) below this share of what a child typically scores under such
    /// a parent stays a root (ours; 0, the default: every child with a positive score gets
    /// its best parent). A call whose true parent the trace lost is then not forced into
    /// another request: on the multi-tier trace 0.005 takes instance false negatives from
    /// 5.6–6.3 % to 5.3–6.0 % (no better once the counts are rebalanced, [`Params::rebalance`]).
    /// Off by default because it also cuts off the child of a
    /// genuinely slow request, the one a user looks for: the demo's black-box session lost
    /// one of its 200 requests that way.
    pub root_below: f64,
    /// After the last pass, move children where a parent has a number of children to a
    /// callee, or in all, that is rare for its kind of parent, to a candidate parent the move
    /// leaves with fewer rare numbers ([`assign::rebalance`]; ours, on by default: on the
    /// multi-tier trace 5.63–6.33 → 2.10–2.46 % instance false negatives over seven seeds,
    /// and half of what dropped messages cost).
    pub rebalance: bool,
    /// p5 mode: where the trace knows which recorded thread sent and received each message
    /// (a p5 session), a child's parent is the request its caller's thread was serving when
    /// it sent the call ([`crate::causality`]); the scoreboard places only the rest (calls
    /// of untraced nodes). On by default; off, or on a trace without threads, nesting runs
    /// as the paper's black box.
    pub threads: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            penalties: Penalties {
                overlap: 2.0,
                same: 0.0,
                generic: 0.0,
            },
            smooth: 2.0,
            window: 0,
            paper_bins: false,
            returns: true,
            gap_passes: 3,
            repair: true,
            root_below: 0.0,
            rebalance: true,
            threads: true,
        }
    }
}

/// What a nesting run did besides its patterns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Call pairs found (with those kept after losing a half, [`Counts::repaired`]).
    pub pairs: u64,
    /// Calls no return answered.
    pub unmatched_calls: u64,
    /// Returns that answered no call.
    pub unmatched_rets: u64,
    /// Pairs nested in a parent.
    pub nested: u64,
    /// Pairs whose return seemed to leave before their call arrived, beyond the skew window,
    /// paired by call id ([`pairs::Pairing::reversed`]): a sign that the hosts' clocks
    /// disagree.
    pub reversed: u64,
    /// Of the unmatched calls and returns, those kept as pairs with the lost half
    /// estimated ([`Params::repair`]).
    pub repaired: repair::Repaired,
    /// Children moved where their parents' numbers of children were rare
    /// ([`Params::rebalance`]).
    pub rebalanced: u64,
    /// What the recorded threads placed (p5 mode; `None`: the black box ran alone).
    pub threads: Option<crate::causality::CauseCounts>,
}

/// Infers the causal paths of `trace` (messages in time order) — on a copy: see
/// [`nesting_owned`].
pub fn nesting(trace: &Trace, p: &Params) -> (AnalysisResult, Counts) {
    nesting_owned(trace.clone(), p)
}

/// Infers the causal paths of `trace` (messages in time order), consuming it: its pairs
/// are written into its memory, and what is left of it goes once they are found, so that
/// the run holds little more than the trace did (on the 2 M-message multi-tier trace,
/// 121.4 MB at the peak with the trace's 117.5).
pub fn nesting_owned(trace: Trace, p: &Params) -> (AnalysisResult, Counts) {
    let causes = p
        .threads
        .then(|| crate::causality::from_threads(&trace, &trace.threads))
        .flatten();
    let Trace {
        nodes, messages, ..
    } = trace;
    let (pairing, kept) = pairs::find_pairs(messages, p.window);
    let pairs::Pairing {
        mut pairs,
        lone_calls,
        mut lone_rets,
        reversed,
    } = pairing;
    let greetings = causes
        .as_ref()
        .map_or(0, |c| keep_greetings(&mut pairs, &mut lone_rets, c));
    let (mut repaired, slack) = if p.repair {
        repair::repair(&mut pairs, &lone_calls, &lone_rets, kept.span)
    } else {
        Default::default()
    };
    repaired.rets += greetings;
    pairs.shrink_to_fit();
    pairs::sort(&mut pairs);
    let bins = if p.paper_bins {
        Bins::PAPER
    } else {
        Bins::FINE
    }
    .lut();
    let (n, w) = (nodes.len(), p.window);
    let cands = if slack.is_empty() {
        assign::candidates(&pairs, n, w, &bins, p.returns, &repair::Exact)
    } else {
        assign::candidates(&pairs, n, w, &bins, p.returns, &slack)
    };
    let fixed = causes
        .as_ref()
        .map_or_else(Vec::new, |c| fixed_parents(&pairs, c));
    let threads = causes.map(|c| c.counts);
    let sb = assign::score(&pairs, &cands, &bins).scores(p.smooth);
    // The last pass leaves a child whose best parent is too unlikely a root.
    let root_below = |pass: u32| {
        if pass == p.gap_passes {
            p.root_below
        } else {
            0.0
        }
    };
    let mut tree = assign::assign(
        &pairs,
        &cands,
        &sb,
        p.penalties,
        None,
        (root_below(0), &fixed),
    );
    let mut last_gaps = None;
    for pass in 1..=p.gap_passes {
        let gaps = assign::gap_scoreboard(&pairs, &tree, &bins, p.returns).scores(p.smooth);
        drop(tree);
        tree = assign::assign(
            &pairs,
            &cands,
            &sb,
            p.penalties,
            Some((&gaps, &bins)),
            (root_below(pass), &fixed),
        );
        last_gaps = Some(gaps);
    }
    let rebalanced = if p.rebalance {
        let gaps = last_gaps.as_ref().map(|g| (g, &bins));
        assign::rebalance(&pairs, &cands, &sb, gaps, &mut tree, &fixed)
    } else {
        0
    };
    drop(cands);
    let both_ends = !pairs.is_empty() && kept.both_ends;
    let counts = Counts {
        pairs: pairs.len() as u64,
        unmatched_calls: lone_calls.len() as u64,
        unmatched_rets: lone_rets.len() as u64,
        nested: tree.nested() as u64,
        reversed,
        repaired,
        rebalanced,
        threads,
    };
    let params = serde_json::json!({
        "overlap": p.penalties.overlap,
        "same": p.penalties.same,
        "generic": p.penalties.generic,
        "smooth": p.smooth,
        "skew_window_ns": p.window,
        "paper_bins": p.paper_bins,
        "returns": p.returns,
        "gap_passes": p.gap_passes,
        "repair": p.repair,
        "root_below": p.root_below,
        "rebalance": p.rebalance,
        "rebalanced": rebalanced,
        "repaired_calls": repaired.calls,
        "repaired_returns": repaired.rets,
        "reversed_pairs": reversed,
        "local_call_delays": both_ends,
        "causality": if threads.is_some() { "threads" } else { "timing" },
        "threads": threads,
    });
    let paths = paths::Paths::of(pairs, kept);
    drop(sb);
    let col = paths::collect(&nodes, &paths, tree, both_ends);
    drop(paths);
    (col.finish("nesting", params), counts)
}

/// Keeps as pairs the returns of `lone_rets` that answer no call and that the threads placed
/// in a request (a server's greeting on a connection opened for it, [`crate::causality`]):
/// their call was never sent, so nothing is estimated — the pair spans the greeting alone.
/// Removes them from `lone_rets`; returns how many.
fn keep_greetings(
    pairs: &mut Vec<pairs::CallPair>,
    lone_rets: &mut Vec<(u32, crate::trace::Message)>,
    c: &crate::causality::Causes,
) -> u64 {
    use crate::causality::{FREE, ROOT};
    let before = lone_rets.len();
    lone_rets.retain(|(i, m)| {
        let serving = c.serving.get(*i as usize).copied().unwrap_or(FREE);
        if serving == FREE || serving == ROOT {
            return true;
        }
        let (out_ret, in_ret) = (pairs::sent(m), pairs::received(m));
        pairs.push(pairs::CallPair {
            caller: m.dst,
            callee: m.src,
            out_call: out_ret,
            in_call: out_ret,
            out_ret,
            in_ret,
            call: repair::LOST,
            ret: *i,
        });
        false
    });
    (before - lone_rets.len()) as u64
}

/// Each pair's parent as the threads placed its call ([`crate::causality`]): the pair of the
/// call its caller was serving, [`assign::ROOT`] for a request that starts a path, or
/// [`assign::FREE`] where the threads do not tell (the scoreboard decides). A pair whose
/// call was never sent (a server's greeting) goes by its return's placement.
fn fixed_parents(pairs: &[pairs::CallPair], c: &crate::causality::Causes) -> Vec<u32> {
    use crate::causality::{FREE, ROOT};
    let mut pair_of_call = crate::hash::FxHashMap::default();
    for (k, p) in pairs.iter().enumerate() {
        if p.call != repair::LOST {
            pair_of_call.insert(p.call, k as u32);
        }
    }
    pairs
        .iter()
        .map(|p| {
            let at = if p.call != repair::LOST {
                p.call
            } else {
                p.ret
            };
            let serving = c.serving.get(at as usize).copied().unwrap_or(FREE);
            match serving {
                ROOT => assign::ROOT,
                FREE => assign::FREE,
                s => pair_of_call.get(&s).copied().unwrap_or(assign::FREE),
            }
        })
        .collect()
}
