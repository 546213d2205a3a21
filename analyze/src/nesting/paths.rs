//! Causal paths (\[P5\] §5.1 FindCallPaths): pairs without a parent are roots; each root's
//! tree of nested pairs is one instance, aggregated into patterns with the distribution of
//! every node's latency and call delay.

use super::pairs::CallPair;
use crate::pattern::{AnalysisResult, Collector, Visit};
use crate::trace::Trace;

/// Builds the patterns from the pairs and their parents.
pub fn collect(
    trace: &Trace,
    pairs: &[CallPair],
    parent: &[Option<u32>],
    local_delays: bool,
    params: serde_json::Value,
) -> AnalysisResult {
    // Children as lists from the last back (pushed last first, they pop in call order).
    let mut last_kid = vec![u32::MAX; pairs.len()];
    let mut prev_sib = vec![u32::MAX; pairs.len()];
    for (c, p) in parent.iter().enumerate() {
        if let Some(p) = *p {
            prev_sib[c] = last_kid[p as usize];
            last_kid[p as usize] = c as u32;
        }
    }
    let mut col = if local_delays {
        Collector::with_local_call_delay()
    } else {
        Collector::default()
    };
    let (mut visits, mut stack): (Vec<Visit<'_>>, Vec<_>) = (Vec::new(), Vec::new());
    for (root, _) in parent.iter().enumerate().filter(|(_, p)| p.is_none()) {
        visits.clear();
        let mut refs = Vec::with_capacity(8);
        // The visit each message enters (1-based; 0 = the root caller): a call its callee's,
        // a return its caller's.
        let mut entered: Vec<u32> = Vec::with_capacity(8);
        // (pair, visit index of its parent; 0 = the root caller), depth first, in order.
        stack.clear();
        stack.push((root as u32, 0u32, false));
        while let Some((i, up, done)) = stack.pop() {
            let p = &pairs[i as usize];
            if done {
                refs.push(trace.messages[p.ret as usize].msg_ref);
                entered.push(up);
                continue;
            }
            refs.push(trace.messages[p.call as usize].msg_ref);
            entered.push(visits.len() as u32 + 1);
            visits.push(Visit {
                parent: up,
                node: trace.nodes.name(p.callee),
                t_call: p.out_call,
                t_ret: p.in_ret,
                t_call_recv: trace.messages[p.call as usize].t_recv,
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
        let root_name = trace.nodes.name(pairs[root].caller);
        col.add_entering(root_name, &visits, 1.0, (refs, &entered));
    }
    col.finish("nesting", params)
}
