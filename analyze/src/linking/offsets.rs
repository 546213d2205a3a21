//! Pairwise clock offsets for network delays (\[WAP5\] §5.2, after Paxson): the network delay
//! of a message is its receive time (receiver's clock) minus its send time (sender's clock),
//! so it includes the offset between the two clocks. Assuming the fastest message each way
//! took the same time, the receiver's clock is ahead of the sender's by half the difference of
//! the two directions' smallest delays; that is taken off. Skew is ignored, as in the paper.
//! Node delays never need it: they are read on one node's clock.

use crate::hash::FxHashMap;
use crate::trace::{NO_TIME, NodeId, Time, Trace};

/// Estimated offsets between node pairs that exchanged messages both ways with both times.
#[derive(Debug, Default)]
pub struct Offsets {
    /// (a, b) with a < b → b's clock minus a's.
    by_pair: FxHashMap<(NodeId, NodeId), Time>,
}

impl Offsets {
    /// Estimates the offsets of `trace`.
    pub fn estimate(trace: &Trace) -> Offsets {
        // (a, b) with a < b → (smallest delay a→b, smallest delay b→a).
        let mut mins: FxHashMap<(NodeId, NodeId), (Time, Time)> = FxHashMap::default();
        for m in &trace.messages {
            if m.t_send == NO_TIME || m.t_recv == NO_TIME || m.src == m.dst {
                continue;
            }
            let d = m.t_recv.saturating_sub(m.t_send);
            let e = mins
                .entry((m.src.min(m.dst), m.src.max(m.dst)))
                .or_insert((Time::MAX, Time::MAX));
            if m.src < m.dst {
                e.0 = e.0.min(d);
            } else {
                e.1 = e.1.min(d);
            }
        }
        let by_pair = mins
            .into_iter()
            .filter(|(_, (ab, ba))| *ab != Time::MAX && *ba != Time::MAX)
            .map(|(k, (ab, ba))| (k, ((i128::from(ab) - i128::from(ba)) / 2) as Time))
            .collect();
        Offsets { by_pair }
    }

    /// `dst`'s clock minus `src`'s (0 when not known).
    pub fn get(&self, src: NodeId, dst: NodeId) -> Time {
        let off = self
            .by_pair
            .get(&(src.min(dst), src.max(dst)))
            .copied()
            .unwrap_or(0);
        if src < dst { off } else { -off }
    }

    /// The estimates, as (a, b, b's clock minus a's), sorted.
    pub fn list(&self) -> Vec<(NodeId, NodeId, Time)> {
        let mut v: Vec<_> = self.by_pair.iter().map(|(k, &o)| (k.0, k.1, o)).collect();
        v.sort_unstable();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Message;

    #[test]
    fn an_offset_is_half_the_difference_of_the_fastest_delays() {
        let mut t = Trace::default();
        let (a, b) = (t.nodes.intern("a"), t.nodes.intern("b"));
        // b's clock is 3 ms ahead; one-way delays 1–2 ms.
        for (i, d) in [1_000_000, 1_500_000, 2_000_000].into_iter().enumerate() {
            let base = i as Time * 10_000_000;
            let mut m = Message::new(a, b);
            (m.t_send, m.t_recv) = (base, base + d + 3_000_000);
            let mut r = Message::new(b, a);
            (r.t_send, r.t_recv) = (base + 3_000_000 + 5_000_000, base + 5_000_000 + d);
            t.messages.extend([m, r]);
        }
        let o = Offsets::estimate(&t);
        assert_eq!(o.get(a, b), 3_000_000);
        assert_eq!(o.get(b, a), -3_000_000);
        assert_eq!(o.list(), [(a, b, 3_000_000)]);
        let c = t.nodes.intern("c");
        assert_eq!(o.get(a, c), 0);
    }
}
