//! Step 3 of linking (\[WAP5\] §5.1): path instances built from each root down, with
//! probably-true links included, probably-false ones omitted and try-both links taken both
//! ways (at most `max_try_both` per root; beyond that a try-both link is included only when
//! it is its child's most likely cause). An instance's probability is the product of its
//! decisions: `p` for every link included, `1 − p` for every link omitted, and for the root
//! the probability that it was spontaneous (ours: the paper's worked example starts from a
//! certain root).
//!
//! A branch whose probability falls below `min_prob` (ours, 0.01 by default) is given up:
//! factors are at most 1, so it could only yield instances below it, and a root's instances'
//! probabilities sum to at most 1, so at most `1 / min_prob` instances per root are kept.
//!
//! Call/return rules (ours): a message into a node that only starts paths (a client,
//! `Roles::origin`) joins only the path that node started — a reply ends
//! its own client's path, never another's. With `exclusive`, a call or a return into any
//! other node causes exactly one next step (its callee calls on or answers; its caller goes
//! on): its possible children are alternatives without a "none" option, renormalised over
//! those that may join, and a branch where it can cause none is given up (`dead_ends`).
//! On \[P5\] Fig. 10 at 500 s this took the fragments `CLIENT>WS1(AUTH)` and `CLIENT>WS1`
//! from above the true patterns to below all eight.
//!
//! Every instance counts in its pattern's statistics; only the most probable instance of
//! each root is listed (`AnalysisResult::instances`, what a viewer highlights): a root with
//! k try-both links has 2^k instances, mostly improbable.
//!
//! Roots are walked in batches on all cores, each part by its own `Walker`; what the
//! walkers find (`super::found`) is counted in root order while the next batch is
//! walked, so the result is the one a single walker gives.
//!
//! An instance is a tree of messages; the pattern output is a call tree of node visits
//! ([`crate::pattern`]). A message becomes a visit of its receiver, except a return
//! ([`Kind::Ret`]) that goes back to the node that called the visit it leaves: that one
//! closes the visit (its arrival is the visit's return time) and its children continue in
//! the caller's visit. So call/return traces give the signatures nesting gives
//! (`CLIENT>WS1(AUTH,API(DB))`), and free-form messages show each hop
//! (`A>B(C(A))` for A→B→C→A). Siblings are ordered by their call times, which the parent
//! node stamped.
//!
//! A return into a node that has already answered the call that opened its visit in this
//! instance may end the path (a delayed write-back: B answers A, then writes to C); letting
//! every return without children end a path instead brings fragments back above the true
//! patterns.

use super::found::{Best, Found, RootFound, VisitRec};
use super::links::{Class, Links, arrival, departure};
use super::offsets::Offsets;
use crate::pattern::Collector;
use crate::progress::Progress;
use crate::trace::{Kind, NO_TIME, NodeId, Time, Trace};
use bit_vec::BitVec;
use std::ops::Range;

/// Messages per batch of roots.
const BATCH: usize = 1 << 16;

/// Walkers per batch (fixed, so the work does not depend on the number of cores).
const PARTS: usize = 8;

/// Alternatives whose probabilities sum to more than this are parallel children, each
/// decided on its own.
const MAX_ONE: f64 = 1.5;

/// What the walkers count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeCounts {
    /// Roots expanded.
    pub roots: u64,
    /// Instances built.
    pub instances: u64,
    /// Roots that used up their try-both links.
    pub capped: u64,
    /// Links left out because an instance reached `max_messages`.
    pub truncated: u64,
    /// Branches given up because their probability fell below `min_prob`.
    pub pruned: u64,
    /// Branches given up because a message that causes a next step could cause none
    /// ([`super::Params::exclusive`]).
    pub dead_ends: u64,
}

impl TreeCounts {
    /// Adds `o`'s counts.
    pub fn add(&mut self, o: &TreeCounts) {
        self.roots += o.roots;
        self.instances += o.instances;
        self.capped += o.capped;
        self.truncated += o.truncated;
        self.pruned += o.pruned;
        self.dead_ends += o.dead_ends;
    }
}

/// One visit under construction.
#[derive(Debug, Clone, Copy)]
struct Open {
    parent: u32,
    /// The node of the parent visit (the root caller for parent 0), as in the trace.
    parent_node: NodeId,
    node: NodeId,
    t_call: Time,
    t_ret: Time,
    t_call_recv: Time,
    net_offset: Time,
}

/// What every walker reads.
#[derive(Debug, Clone, Copy)]
struct Shared<'a> {
    trace: &'a Trace,
    links: &'a Links,
    offsets: &'a Offsets,
    /// Nodes that only start paths ([`super::links::Roles::origin`]).
    origin: &'a [bool],
    max_try_both: u32,
    max_messages: usize,
    exclusive: bool,
    lo: f64,
    min_prob: f64,
}

/// Builds instances from roots into a [`Collector`].
#[derive(Debug)]
pub struct Builder<'a> {
    shared: Shared<'a>,
    /// The printed name of every node (clients aggregated).
    names: &'a super::Names,
    collector: Collector,
}

/// Walks roots one at a time: the state of the instance being built.
#[derive(Debug)]
struct Walker<'a> {
    shared: Shared<'a>,
    /// The sender of the current root.
    root_node: NodeId,
    /// The instance being built: (message, position of its parent message).
    inc: Vec<(u32, u32)>,
    /// Which messages are in it, one bit each.
    in_inst: BitVec,
    ctx: Vec<u32>,
    open: Vec<Open>,
    kids: Vec<Vec<u32>>,
    order: Vec<u32>,
    new_index: Vec<u32>,
    capped_now: bool,
    /// The most probable instance of the current root.
    best: Option<Best>,
    /// What this walker found since [`Walker::walk`] began.
    found: Found,
}

impl<'a> Builder<'a> {
    /// A builder over `trace` with the links of step 2.
    pub fn new(
        trace: &'a Trace,
        links: &'a Links,
        names: &'a super::Names,
        offsets: &'a Offsets,
        origin: &'a [bool],
        p: &super::Params,
        collector: Collector,
    ) -> Builder<'a> {
        let shared = Shared {
            trace,
            links,
            offsets,
            origin,
            max_try_both: p.max_try_both,
            max_messages: p.max_messages.max(1),
            exclusive: p.exclusive,
            lo: p.try_both.0,
            min_prob: p.min_prob,
        };
        Builder {
            shared,
            names,
            collector,
        }
    }

    /// Expands every root, in time order: a batch is walked on all cores while the one
    /// before it is counted.
    pub fn run(self, progress: &mut dyn FnMut(Progress)) -> (Collector, TreeCounts) {
        use rayon::prelude::*;
        let n = self.shared.trace.messages.len();
        progress(Progress::Phase("building paths", Some(n as u64)));
        let mut walkers: Vec<Walker> = (0..PARTS).map(|_| Walker::new(self.shared)).collect();
        let (names, mut collector) = (self.names, self.collector);
        let mut counts = TreeCounts::default();
        let mut visits = Vec::new();
        let mut pending: Vec<Found> = Vec::new();
        for start in (0..n).step_by(BATCH) {
            progress(Progress::At(start as u64));
            let end = n.min(start + BATCH);
            let per = (end - start).div_ceil(PARTS);
            let part = |k: usize| end.min(start + k * per)..end.min(start + (k + 1) * per);
            let walk = || {
                let parts = walkers.par_iter_mut().enumerate();
                parts.map(|(k, w)| w.walk(part(k))).collect::<Vec<Found>>()
            };
            let count = || {
                for f in pending.drain(..) {
                    f.collect(names, &mut collector, &mut counts, &mut visits);
                }
            };
            pending = rayon::join(walk, count).0;
        }
        for f in pending {
            f.collect(names, &mut collector, &mut counts, &mut visits);
        }
        (collector, counts)
    }
}

impl<'a> Walker<'a> {
    fn new(shared: Shared<'a>) -> Walker<'a> {
        Walker {
            shared,
            root_node: 0,
            inc: Vec::new(),
            in_inst: BitVec::from_elem(shared.trace.messages.len(), false),
            ctx: Vec::new(),
            open: Vec::new(),
            kids: Vec::new(),
            order: Vec::new(),
            new_index: Vec::new(),
            capped_now: false,
            best: None,
            found: Found::default(),
        }
    }

    /// Expands the roots among messages `range`.
    fn walk(&mut self, range: Range<usize>) -> Found {
        for r in range {
            let p = self.shared.links.root_p[r];
            if p > 0.0 {
                self.root(r as u32, f64::from(p));
            }
        }
        std::mem::take(&mut self.found)
    }

    fn root(&mut self, r: u32, p: f64) {
        self.found.counts.roots += 1;
        self.capped_now = false;
        self.root_node = self.shared.trace.messages[r as usize].src;
        self.inc.clear();
        self.inc.push((r, u32::MAX));
        self.in_inst.set(r as usize, true);
        let prob = p * f64::from(self.shared.links.omitted[r as usize]);
        self.explore(0, 0, prob, 0);
        // The last branch explored leaves its messages in: none is in the next root's.
        self.truncate(0);
        self.found.counts.capped += u64::from(self.capped_now);
        self.found.roots.push(RootFound {
            end: self.found.instances.len() as u32,
            node: self.root_node,
            best: self.best.take(),
        });
    }

    fn is_origin(&self, n: NodeId) -> bool {
        self.shared.origin.get(n as usize).copied().unwrap_or(false)
    }

    /// Whether message `c` may join the current instance: not yet in it, and not into a
    /// node that only starts paths unless that node started this one (a client's reply
    /// ends the client's own path, never another's).
    fn allowed(&self, c: u32) -> bool {
        let dst = self.shared.trace.messages[c as usize].dst;
        !self.in_inst[c as usize] && (dst == self.root_node || !self.is_origin(dst))
    }

    /// Whether message `m` surely causes one next step (ours, with `exclusive`): a call
    /// (its callee calls on or answers) or a return (its caller goes on, with another call
    /// or its own return) into a node that does not only start paths.
    fn continues(&self, m: u32) -> bool {
        let msg = &self.shared.trace.messages[m as usize];
        self.shared.exclusive && msg.kind != Kind::Msg && !self.is_origin(msg.dst)
    }

    /// Whether the message at `pos` is a return into a node that has already answered the
    /// call that opened its visit in this instance (B after a delayed write-back: it
    /// answered A, then called C; C's answer ends the path), or into the root's sender.
    fn answered(&self, pos: usize) -> bool {
        let msgs = &self.shared.trace.messages;
        let (m, mut up) = self.inc[pos];
        let node = msgs[m as usize].dst;
        if msgs[m as usize].kind != Kind::Ret {
            return false;
        }
        // The call into `node` that opened its visit: the nearest such ancestor.
        let caller = loop {
            let Some(&(a, next)) = self.inc.get(up as usize) else {
                // No call opened it: the root's sender, whose path a reply may end.
                return node == self.root_node;
            };
            let am = &msgs[a as usize];
            if am.dst == node && am.kind == Kind::Call {
                break am.src;
            }
            up = next;
        };
        self.inc.iter().any(|&(x, _)| {
            msgs[x as usize].kind == Kind::Ret
                && msgs[x as usize].src == node
                && msgs[x as usize].dst == caller
        })
    }

    /// Includes message `c` as a child of the message at position `pos`.
    fn include(&mut self, c: u32, pos: usize) {
        self.inc.push((c, pos as u32));
        self.in_inst.set(c as usize, true);
    }

    /// Drops the messages included after position `len`.
    fn truncate(&mut self, len: usize) {
        for &(m, _) in &self.inc[len..] {
            self.in_inst.set(m as usize, false);
        }
        self.inc.truncate(len);
    }

    /// Decides the links from position `pos` on (starting at the `j`-th possible child of the
    /// message there), with `k` try-both decisions used; emits every instance.
    fn explore(&mut self, mut pos: usize, mut j: usize, mut prob: f64, mut k: u32) {
        let links = self.shared.links;
        loop {
            // Factors are at most 1: a branch below the floor stays below it.
            if prob < self.shared.min_prob {
                self.found.counts.pruned += 1;
                return;
            }
            let Some(&(m, _)) = self.inc.get(pos) else {
                self.emit(prob);
                return;
            };
            let kids = links.kids(m);
            let Some(kid) = kids.get(j) else {
                if j == 0 && self.continues(m) && !self.answered(pos) {
                    // It caused nothing it could have: not a path.
                    self.found.counts.dead_ends += 1;
                    return;
                }
                (pos, j) = (pos + 1, 0);
                continue;
            };
            if self.shared.exclusive {
                // A call or a return causes one next step, whichever node it goes to.
                let end = if self.continues(m) {
                    kids.len()
                } else {
                    j + kids[j..].iter().take_while(|x| x.to == kid.to).count()
                };
                let sum: f64 = kids[j..end].iter().map(|x| f64::from(x.p)).sum();
                if (end - j > 1 || self.continues(m)) && sum <= MAX_ONE {
                    match self.alternatives(pos, j, end, prob, k) {
                        Some((p2, k2)) => (prob, k, j) = (p2, k2, end),
                        None => return,
                    }
                    continue;
                }
            }
            j += 1;
            let (c, q) = (kid.child, f64::from(kid.p));
            let with = q * f64::from(links.omitted[c as usize]);
            if !self.allowed(c) || self.inc.len() >= self.shared.max_messages {
                self.found.counts.truncated += u64::from(!self.in_inst[c as usize]);
                prob *= 1.0 - q;
                continue;
            }
            match kid.class {
                Class::True => {
                    self.include(c, pos);
                    prob *= with;
                }
                Class::TryBoth { .. } if k < self.shared.max_try_both => {
                    let len = self.inc.len();
                    self.include(c, pos);
                    self.explore(pos, j, prob * with, k + 1);
                    self.truncate(len);
                    prob *= 1.0 - q;
                    k += 1;
                }
                Class::TryBoth { most_likely } => {
                    self.capped_now = true;
                    if most_likely {
                        self.include(c, pos);
                        prob *= with;
                    } else {
                        prob *= 1.0 - q;
                    }
                }
            }
        }
    }

    /// One decision among the alternatives `kids[j..end]` of the message at `pos` (children
    /// towards one receiver) and none of them: every option whose probability is in or above
    /// the try-both range, or the most likely one, is explored; the last option explored is
    /// returned as (probability, try-both decisions used) for the caller to go on with, the
    /// others recurse. `None` when no option is left.
    fn alternatives(
        &mut self,
        pos: usize,
        j: usize,
        end: usize,
        prob: f64,
        k: u32,
    ) -> Option<(f64, u32)> {
        let m = self.inc[pos].0;
        let kids = self.shared.links.kids(m);
        // (child or none, its probability, the factor it puts on the instance: its
        // probability times its own omitted links').
        let mut opts: Vec<(Option<u32>, f64, f64)> = kids[j..end]
            .iter()
            .filter(|x| self.allowed(x.child))
            .map(|x| {
                let p = f64::from(x.p);
                let factor = p * f64::from(self.shared.links.omitted[x.child as usize]);
                (Some(x.child), p, factor)
            })
            .collect();
        let feasible: f64 = opts.iter().map(|o| o.1).sum();
        if self.continues(m) {
            if feasible <= 0.0 {
                self.found.counts.dead_ends += 1;
                return None;
            }
            // One of the feasible children is the next step: their probabilities given
            // that.
            for o in &mut opts {
                (o.1, o.2) = (o.1 / feasible, o.2 / feasible);
            }
        } else {
            let none = (1.0 - kids[j..end].iter().map(|x| f64::from(x.p)).sum::<f64>()).max(0.0);
            opts.push((None, none, none));
        }
        let best = opts.iter().map(|o| o.1).fold(0.0, f64::max);
        let full = self.inc.len() >= self.shared.max_messages;
        opts.retain(|o| {
            (o.0.is_none() || !full) && (o.1 >= self.shared.lo || o.1 >= best) && o.2 > 0.0
        });
        opts.sort_by(|a, b| b.1.total_cmp(&a.1));
        if opts.len() > 1 && k >= self.shared.max_try_both {
            self.capped_now = true;
            opts.truncate(1);
        }
        let k = k + u32::from(opts.len() > 1);
        let (last, rest) = opts.split_last()?;
        for &(c, _, factor) in rest {
            let len = self.inc.len();
            if let Some(c) = c {
                self.include(c, pos);
            }
            self.explore(pos, end, prob * factor, k);
            self.truncate(len);
        }
        if let Some(c) = last.0 {
            self.include(c, pos);
        }
        Some((prob * last.2, k))
    }

    /// The current instance as visits, into the collector.
    fn emit(&mut self, prob: f64) {
        self.found.counts.instances += 1;
        let trace = self.shared.trace;
        self.open.clear();
        self.ctx.clear();
        let Some(&(root, _)) = self.inc.first() else {
            return;
        };
        let root_node = trace.messages[root as usize].src;
        for &(m, ppos) in &self.inc {
            let msg = &trace.messages[m as usize];
            let v = self.ctx.get(ppos as usize).copied().unwrap_or(0);
            if let Some(o) = (v as usize)
                .checked_sub(1)
                .and_then(|i| self.open.get_mut(i))
                .filter(|o| msg.kind == Kind::Ret && o.parent_node == msg.dst && o.t_ret == NO_TIME)
            {
                o.t_ret = arrival(msg);
                let up = o.parent;
                self.ctx.push(up);
                continue;
            }
            let parent_node = match (v as usize).checked_sub(1) {
                Some(i) => self.open[i].node,
                None => root_node,
            };
            self.open.push(Open {
                parent: v,
                parent_node,
                node: msg.dst,
                t_call: departure(msg),
                t_ret: NO_TIME,
                t_call_recv: msg.t_recv,
                net_offset: self.shared.offsets.get(msg.src, msg.dst),
            });
            self.ctx.push(self.open.len() as u32);
        }
        // Preorder with siblings by call time: parents come first, children in the order
        // their node sent them.
        let n = self.open.len();
        self.kids.iter_mut().for_each(Vec::clear);
        if self.kids.len() < n + 1 {
            self.kids.resize(n + 1, Vec::new());
        }
        for (i, o) in self.open.iter().enumerate() {
            self.kids[o.parent as usize].push(i as u32 + 1);
        }
        let open = &self.open;
        for k in &mut self.kids[..=n] {
            k.sort_by_key(|&c| open[c as usize - 1].t_call);
        }
        self.order.clear();
        let mut stack = vec![0u32];
        self.new_index.clear();
        self.new_index.resize(n + 1, 0);
        while let Some(v) = stack.pop() {
            self.new_index[v as usize] = self.order.len() as u32;
            self.order.push(v);
            stack.extend(self.kids[v as usize].iter().rev());
        }
        let visits = self.order[1..].iter().map(|&v| {
            let o = &open[v as usize - 1];
            VisitRec {
                parent: self.new_index[o.parent as usize],
                node: o.node,
                t_call: o.t_call,
                t_ret: o.t_ret,
                t_call_recv: o.t_call_recv,
                net_offset: o.net_offset,
            }
        });
        self.found.visits.extend(visits);
        let inst = self.found.instances.len() as u32;
        self.found
            .instances
            .push((self.found.visits.len() as u32, prob));
        if self.best.as_ref().is_none_or(|b| prob > b.prob) {
            let messages = self
                .inc
                .iter()
                .map(|&(m, _)| trace.messages[m as usize].msg_ref)
                .collect();
            // Each message entered the open visit `ctx` noted for it (a return its caller's):
            // as a 1-based visit in preorder.
            let entered = self
                .ctx
                .iter()
                .map(|&o| self.new_index.get(o as usize).copied().unwrap_or(0))
                .collect();
            self.best = Some(Best {
                inst,
                prob,
                messages,
                entered,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linking::{Names, Params, links};
    use crate::maketrace::{self, Config, Options};
    use std::path::Path;

    /// A root's walk leaves no message in an instance — its last branch's messages
    /// included, which once stayed marked and were refused to every later root — so
    /// walking the roots in parts finds what one walker finds.
    #[test]
    fn roots_are_walked_independently() {
        let text = include_str!("../../fixtures/fig10-multi-tier.toml");
        let cfg = Config::parse(text, Path::new("fig10.toml")).expect("fixture");
        let opts = Options {
            seed: 7,
            duration: Some(60 * 1_000_000_000),
            queue: 64,
            client_endpoints: true,
            ..Options::default()
        };
        let mut trace = maketrace::generate(&cfg, &opts).trace;
        trace.sort();
        let p = Params::ours();
        let (names, _) = Names::of(&trace, &p);
        let client = |n| names.name(n) == crate::clients::CLIENT;
        let roles = links::Roles::of(&trace, p.client_roots, client);
        let l = links::link(&trace, &p, &names.of, &roles, None);
        let offsets = Offsets::estimate(&trace);
        let b = Builder::new(
            &trace,
            &l,
            &names,
            &offsets,
            &roles.origin,
            &p,
            Collector::default(),
        );
        let n = trace.messages.len();
        let mut one = Walker::new(b.shared);
        let whole = one.walk(0..n);
        assert!(whole.counts.instances > 1000, "{:?}", whole.counts);
        assert!(one.in_inst.none(), "messages left marked");
        let (mut w1, mut w2) = (Walker::new(b.shared), Walker::new(b.shared));
        let (a, c) = (w1.walk(0..n / 2), w2.walk(n / 2..n));
        let probs = |f: &[&Found]| -> Vec<f64> {
            f.iter()
                .flat_map(|f| f.instances.iter().map(|i| i.1))
                .collect()
        };
        assert_eq!(probs(&[&whole]), probs(&[&a, &c]));
        let visits = |f: &[&Found]| -> Vec<(u32, NodeId, Time)> {
            let v = f.iter().flat_map(|f| f.visits.iter());
            v.map(|v| (v.parent, v.node, v.t_call)).collect()
        };
        assert_eq!(visits(&[&whole]), visits(&[&a, &c]));
    }
}
