//! What step 3's walkers ([`super::trees`]) find for a run of roots, before it is counted:
//! every instance's visits by node id, its probability, and each root's most probable
//! instance. Walkers run on all cores; their finds go into the one [`Collector`] in root
//! order ([`Found::collect`]), so the patterns, their statistics and the listed instances
//! are those a single walker would give.

use super::Names;
use super::trees::TreeCounts;
use crate::pattern::{Collector, Instance, Visit, nodes_entered};
use crate::trace::{NodeId, Time};

/// One visit of an instance, as [`Visit`] but naming its node by id.
#[derive(Debug, Clone, Copy)]
pub(super) struct VisitRec {
    pub parent: u32,
    pub node: NodeId,
    pub t_call: Time,
    pub t_ret: Time,
    pub t_call_recv: Time,
    pub net_offset: Time,
}

/// A root's most probable instance, with what listing it needs.
#[derive(Debug, Clone)]
pub(super) struct Best {
    /// Its index in [`Found::instances`].
    pub inst: u32,
    pub prob: f64,
    /// The `msg_ref`s of its messages, in path order.
    pub messages: Vec<u64>,
    /// For each message, the 1-based visit (in preorder) it enters; 0 the root caller.
    pub entered: Vec<u32>,
}

/// One expanded root.
#[derive(Debug, Clone)]
pub(super) struct RootFound {
    /// The end of its instances in [`Found::instances`].
    pub end: u32,
    /// Its sender.
    pub node: NodeId,
    pub best: Option<Best>,
}

/// The instances of a run of roots, in root order.
#[derive(Debug, Default)]
pub(super) struct Found {
    pub visits: Vec<VisitRec>,
    /// Per instance: the end of its visits in `visits`, and its probability.
    pub instances: Vec<(u32, f64)>,
    pub roots: Vec<RootFound>,
    pub counts: TreeCounts,
}

impl Found {
    /// Counts every instance in `collector` (names as `names` prints them), lists each
    /// root's most probable one, and adds the walker's counts to `counts`. `visits` is a
    /// buffer reused across calls.
    pub(super) fn collect<'n>(
        self,
        names: &'n Names,
        collector: &mut Collector,
        counts: &mut TreeCounts,
        visits: &mut Vec<Visit<'n>>,
    ) {
        counts.add(&self.counts);
        let (mut inst, mut v0) = (0usize, 0usize);
        for mut root in self.roots {
            let mut listed = None;
            for k in inst..root.end as usize {
                let (v1, prob) = self.instances[k];
                visits.clear();
                visits.extend(self.visits[v0..v1 as usize].iter().map(|r| Visit {
                    parent: r.parent,
                    node: names.name(r.node),
                    t_call: r.t_call,
                    t_ret: r.t_ret,
                    t_call_recv: r.t_call_recv,
                    net_offset: r.net_offset,
                }));
                v0 = v1 as usize;
                let root_name = names.name(root.node);
                let (pattern, t_start, t_end) = collector.aggregate(root_name, visits, prob);
                if let Some(best) = root.best.take_if(|b| b.inst as usize == k) {
                    let node_of = collector.node_of_visits(visits.len());
                    listed = Some(Instance {
                        pattern,
                        prob: best.prob,
                        t_start,
                        t_end,
                        messages: best.messages,
                        nodes: nodes_entered(&node_of, &best.entered),
                    });
                }
            }
            inst = root.end as usize;
            if let Some(i) = listed {
                collector.push_instance(i);
            }
        }
    }
}
