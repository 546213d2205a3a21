//! Causal paths (\[P5\] §5.1 FindCallPaths): pairs without a parent are roots; each root's
//! tree of nested pairs is one instance, aggregated into patterns with the distribution of
//! every node's latency and call delay.

use super::assign::{ROOT, Tree};
use super::pairs::{CallPair, Kept};
use super::repair::LOST;
use crate::pattern::{Collector, Visit};
use crate::trace::{NO_TIME, NodeId, Nodes, Time};

/// What [`collect`] needs of a pair: its nodes, the times its messages have ([`NO_TIME`]
/// for a half the trace lost) and their refs. When its call's arrival was stamped, that
/// time is in [`Paths::call_recv`].
#[derive(Debug, Clone, Copy)]
pub struct PathPair {
    caller: NodeId,
    callee: NodeId,
    t_call: Time,
    t_ret: Time,
    call_ref: u64,
    ret_ref: u64,
}

const _: () = assert!(size_of::<PathPair>() <= size_of::<CallPair>());

/// The pairs as [`collect`] needs them.
#[derive(Debug)]
pub struct Paths {
    /// Each pair's nodes, times and refs.
    pub pairs: Vec<PathPair>,
    /// Each pair's call's arrival ([`NO_TIME`] if not stamped); empty when no message had
    /// its receive time (traces with one time per message).
    pub call_recv: Vec<Time>,
}

impl Paths {
    /// `pairs` as [`collect`] needs them, with their messages' refs from `kept`, in the
    /// pairs' memory: a [`PathPair`] is smaller than a [`CallPair`] (std collects a mapped
    /// `Vec::into_iter` in place), and the refs by message index go.
    pub fn of(pairs: Vec<CallPair>, kept: Kept) -> Paths {
        let any_recv = kept.any_recv();
        let mut call_recv = Vec::new();
        if any_recv {
            call_recv.reserve_exact(pairs.len());
        }
        let mut pairs: Vec<PathPair> = pairs
            .into_iter()
            .map(|p| {
                let (call, ret) = (p.call != LOST, p.ret != LOST);
                if any_recv {
                    let stamped = call && kept.recv_known(p.call);
                    call_recv.push(if stamped { p.in_call } else { NO_TIME });
                }
                PathPair {
                    caller: p.caller,
                    callee: p.callee,
                    t_call: if call { p.out_call } else { NO_TIME },
                    t_ret: if ret { p.in_ret } else { NO_TIME },
                    call_ref: if call { kept.msg_ref(p.call) } else { 0 },
                    ret_ref: if ret { kept.msg_ref(p.ret) } else { 0 },
                }
            })
            .collect();
        pairs.shrink_to_fit();
        Paths { pairs, call_recv }
    }
}

/// Aggregates the instances — each root's tree of nested pairs — into patterns.
pub fn collect(nodes: &Nodes, paths: &Paths, tree: Tree, local_delays: bool) -> Collector {
    let pairs = &paths.pairs;
    // The roots, and the parents go (their memory serves the instances).
    let roots: Vec<u32> = (0..tree.parent.len() as u32)
        .filter(|&i| tree.parent[i as usize] == ROOT)
        .collect();
    let Tree {
        last_kid, prev_sib, ..
    } = tree;
    // Children as lists from the last back (pushed last first, they pop in call order).
    let mut col = if local_delays {
        Collector::with_local_call_delay()
    } else {
        Collector::default()
    }
    .every_call_returns();
    col.reserve_instances(roots.len());
    let (mut visits, mut stack): (Vec<Visit<'_>>, Vec<_>) = (Vec::new(), Vec::new());
    // Reused per instance; each instance gets an exact-size copy of its message refs.
    let mut refs: Vec<u64> = Vec::new();
    // The visit each message enters (1-based; 0 = the root caller): a call its callee's,
    // a return its caller's.
    let mut entered: Vec<u32> = Vec::new();
    for root in roots {
        visits.clear();
        refs.clear();
        entered.clear();
        // (pair, visit index of its parent; 0 = the root caller), depth first, in order.
        stack.clear();
        stack.push((root, 0u32, false));
        while let Some((i, up, done)) = stack.pop() {
            let p = &pairs[i as usize];
            if done {
                if p.t_ret != NO_TIME {
                    refs.push(p.ret_ref);
                    entered.push(up);
                }
                continue;
            }
            if p.t_call != NO_TIME {
                refs.push(p.call_ref);
                entered.push(visits.len() as u32 + 1);
            }
            visits.push(Visit {
                parent: up,
                node: nodes.name(p.callee),
                t_call: p.t_call,
                t_ret: p.t_ret,
                t_call_recv: paths.call_recv.get(i as usize).copied().unwrap_or(NO_TIME),
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
        col.add_entering(
            nodes.name(pairs[root as usize].caller),
            &visits,
            1.0,
            (refs.clone(), &entered),
        );
    }
    col
}
