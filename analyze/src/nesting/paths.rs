//! Causal paths (\[P5\] §5.1 FindCallPaths): pairs without a parent are roots; each root's
//! tree of nested pairs is one instance, aggregated into patterns with the distribution of
//! every node's latency and call delay.

use super::assign::{ROOT, Tree};
use super::pairs::{CallPair, received, sent};
use super::repair::LOST;
use crate::pattern::{Collector, Visit};
use crate::trace::{Message, NO_TIME, NodeId, Trace};

/// The call and return message of each pair (indexes into the trace, [`LOST`] for a half
/// the trace lost): all [`collect`] needs of the pairs, a sixth of their size (the trace has
/// the rest).
pub fn ends(pairs: &[CallPair]) -> Vec<(u32, u32)> {
    pairs.iter().map(|p| (p.call, p.ret)).collect()
}

/// Aggregates the instances — each root's tree of nested pairs, given by their [`ends`] —
/// into patterns.
pub fn collect(trace: &Trace, ends: &[(u32, u32)], tree: &Tree, local_delays: bool) -> Collector {
    let msgs = &trace.messages;
    // Children as lists from the last back (pushed last first, they pop in call order).
    let (last_kid, prev_sib) = (&tree.last_kid, &tree.prev_sib);
    let mut col = if local_delays {
        Collector::with_local_call_delay()
    } else {
        Collector::default()
    }
    .every_call_returns();
    col.reserve_instances(tree.parent.len() - tree.nested());
    let (mut visits, mut stack): (Vec<Visit<'_>>, Vec<_>) = (Vec::new(), Vec::new());
    // Reused per instance; each instance gets an exact-size copy of its message refs.
    let mut refs: Vec<u64> = Vec::new();
    // The visit each message enters (1-based; 0 = the root caller): a call its callee's,
    // a return its caller's.
    let mut entered: Vec<u32> = Vec::new();
    for (root, _) in tree.parent.iter().enumerate().filter(|(_, p)| **p == ROOT) {
        visits.clear();
        refs.clear();
        entered.clear();
        // (pair, visit index of its parent; 0 = the root caller), depth first, in order.
        stack.clear();
        stack.push((root as u32, 0u32, false));
        while let Some((i, up, done)) = stack.pop() {
            let (call, ret) = half(msgs, ends[i as usize]);
            if done {
                if let Some(ret) = ret {
                    refs.push(ret.msg_ref);
                    entered.push(up);
                }
                continue;
            }
            let Some((_, callee)) = nodes_of(call, ret) else {
                continue;
            };
            if let Some(call) = call {
                refs.push(call.msg_ref);
                entered.push(visits.len() as u32 + 1);
            }
            // The times [`CallPair`] has: out_call and in_ret; none from a lost half.
            visits.push(Visit {
                parent: up,
                node: trace.nodes.name(callee),
                t_call: call.map_or(NO_TIME, sent),
                t_ret: ret.map_or(NO_TIME, received),
                t_call_recv: call.map_or(NO_TIME, |c| c.t_recv),
                net_offset: 0,
            });
            let me = visits.len() as u32;
            stack.push((i, up, true));
            let mut k = last_kid[i as usize];
            while k != u32::MAX {
                stack.push((k, me, false));
                k = prev_sib[k as usize];
            }
        }
        let (call, ret) = half(msgs, ends[root]);
        let Some((caller, _)) = nodes_of(call, ret) else {
            continue;
        };
        col.add_entering(
            trace.nodes.name(caller),
            &visits,
            1.0,
            (refs.clone(), &entered),
        );
    }
    col
}

/// The call and the return message of a pair's [`ends`], `None` for a half the trace lost.
fn half(msgs: &[Message], (call, ret): (u32, u32)) -> (Option<&Message>, Option<&Message>) {
    let at = |i: u32| (i != LOST).then(|| &msgs[i as usize]);
    (at(call), at(ret))
}

/// A pair's caller and callee, from whichever of its messages the trace has (a pair never
/// loses both; `None` if it did).
fn nodes_of(call: Option<&Message>, ret: Option<&Message>) -> Option<(NodeId, NodeId)> {
    match (call, ret) {
        (Some(c), _) => Some((c.src, c.dst)),
        (None, Some(r)) => Some((r.dst, r.src)),
        (None, None) => None,
    }
}
