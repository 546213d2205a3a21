//! Per-node clock skew on an existing trace: \[P5\] §7.5.6's "skewer". A node's offset is
//! added to the times it stamps — the send times of the messages it sends and the receive
//! times of those it receives — as if its clock ran that much fast (or slow, if negative).
//! Applying the opposite offsets de-skews a trace.

use crate::trace::{NO_TIME, NodeId, Time, Trace};

/// Adds `offsets` (node, ns) to the times each node stamps, then re-sorts the messages.
pub fn apply(trace: &mut Trace, offsets: &[(NodeId, Time)]) {
    let mut by_node = vec![0 as Time; trace.nodes.len()];
    for &(n, off) in offsets {
        if let Some(slot) = by_node.get_mut(n as usize) {
            *slot = slot.saturating_add(off);
        }
    }
    let shift = |t: Time, n: NodeId| {
        if t == NO_TIME {
            t
        } else {
            let s = t.saturating_add(by_node.get(n as usize).copied().unwrap_or(0));
            if s == NO_TIME { s + 1 } else { s }
        }
    };
    for m in &mut trace.messages {
        m.t_send = shift(m.t_send, m.src);
        m.t_recv = shift(m.t_recv, m.dst);
    }
    trace.sort();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Message;

    #[test]
    fn a_node_stamps_its_own_ends_only() {
        let mut t = Trace::default();
        let (a, b) = (t.nodes.intern("a"), t.nodes.intern("b"));
        let mut m = Message::new(a, b);
        (m.t_send, m.t_recv) = (100, 150);
        let mut back = Message::new(b, a);
        (back.t_send, back.t_recv) = (200, NO_TIME);
        t.messages = vec![m, back];
        apply(&mut t, &[(b, 30)]);
        let got: Vec<(Time, Time)> = t.messages.iter().map(|m| (m.t_send, m.t_recv)).collect();
        assert_eq!(got, [(100, 180), (230, NO_TIME)]);
        apply(&mut t, &[(b, -30)]);
        assert_eq!(t.messages[0].t_recv, 150);
    }
}
