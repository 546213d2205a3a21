//! Causal paths (\[P5\] §5.1 FindCallPaths): pairs without a parent are roots; each root's
//! tree of nested pairs is one instance, aggregated into patterns with the distribution of
//! every node's latency and call delay.

use super::assign::{ROOT, Tree};
use super::pairs::{CallPair, received, sent};
use crate::pattern::{Collector, Visit};
use crate::trace::Trace;

/// The call and return message of each pair (indexes into the trace): all [`collect`]
/// needs of the pairs, a sixth of their size (the trace has the rest).
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
    };
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
            let (call, ret) = (
                &msgs[ends[i as usize].0 as usize],
                &msgs[ends[i as usize].1 as usize],
            );
            if done {
                refs.push(ret.msg_ref);
                entered.push(up);
                continue;
            }
            refs.push(call.msg_ref);
            entered.push(visits.len() as u32 + 1);
            // The times [`CallPair`] has: out_call and in_ret.
            visits.push(Visit {
                parent: up,
                node: trace.nodes.name(call.dst),
                t_call: sent(call),
                t_ret: received(ret),
                t_call_recv: call.t_recv,
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
        let root_name = trace.nodes.name(msgs[ends[root].0 as usize].src);
        col.add_entering(root_name, &visits, 1.0, (refs.clone(), &entered));
    }
    col
}
