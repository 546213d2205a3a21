//! Fat-message coalescing (\[WAP5\] §2.3): a large transfer written with several `write()`s
//! is several messages; adjacent messages of one flow in one direction, with no message the
//! other way in between, are merged into one before causal analysis.
//!
//! * A flow is the message's connection, or, without one, the unordered pair of its nodes.
//! * Merged are only messages of the same kind and call id (ours: two calls with different
//!   ids on one node pair are parallel calls, not pieces of one).
//! * The merged message keeps the first piece's send time, call id and `msg_ref`, takes the
//!   last piece's receive time (where known), and sums the bytes (saturating).
//!
//! The merge works in place on the trace's own messages, so an analysis given its trace
//! (linking's `linking_owned`) pays no copy for it.

use crate::hash::FxHashMap;
use crate::trace::{ConnId, NO_CONN, NO_TIME, NodeId, Trace};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Flow {
    Conn(ConnId),
    Pair(NodeId, NodeId),
}

/// Merges fat messages in place (the trace must be sorted by time); returns how many
/// messages were merged away.
pub fn coalesce(trace: &mut Trace) -> u64 {
    coalesce_flows(trace, true)
}

/// [`coalesce`] on connections only: messages without a connection stay as they are (on a
/// node pair shared by parallel clients, adjacent messages need not be pieces of one).
pub fn coalesce_connections(trace: &mut Trace) -> u64 {
    coalesce_flows(trace, false)
}

fn coalesce_flows(trace: &mut Trace, pairs: bool) -> u64 {
    let mut last: FxHashMap<Flow, usize> = FxHashMap::default();
    let msgs = std::mem::take(&mut trace.messages);
    let before = msgs.len();
    let mut out = Vec::with_capacity(msgs.len());
    for m in msgs {
        let flow = if m.conn != NO_CONN {
            Flow::Conn(m.conn)
        } else if pairs {
            Flow::Pair(m.src.min(m.dst), m.src.max(m.dst))
        } else {
            out.push(m);
            continue;
        };
        if let Some(&i) = last.get(&flow) {
            let prev: &mut crate::Message = &mut out[i];
            if prev.src == m.src && prev.kind == m.kind && prev.call_id == m.call_id {
                prev.bytes = prev.bytes.saturating_add(m.bytes);
                if m.t_recv != NO_TIME {
                    prev.t_recv = m.t_recv;
                }
                if prev.t_send == NO_TIME {
                    prev.t_send = m.t_send;
                }
                continue;
            }
        }
        last.insert(flow, out.len());
        out.push(m);
    }
    let merged = (before - out.len()) as u64;
    trace.messages = out;
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Kind, Message};

    fn m(src: NodeId, dst: NodeId, t: i64, bytes: u32) -> Message {
        let mut m = Message::new(src, dst);
        m.t_send = t;
        m.t_recv = t + 5;
        m.bytes = bytes;
        m.msg_ref = t as u64;
        m
    }

    #[test]
    fn pieces_in_one_direction_merge_until_the_other_side_speaks() {
        let mut t = Trace {
            messages: vec![
                m(0, 1, 10, 100),
                m(0, 1, 20, 100),
                m(2, 3, 25, 7), // another flow in between does not break the run
                m(0, 1, 30, 50),
                m(1, 0, 40, 10),
                m(0, 1, 50, 1),
            ],
            ..Trace::default()
        };
        assert_eq!(coalesce(&mut t), 2);
        let got: Vec<(u64, i64, i64, u32)> = t
            .messages
            .iter()
            .map(|m| (m.msg_ref, m.t_send, m.t_recv, m.bytes))
            .collect();
        assert_eq!(
            got,
            [
                (10, 10, 35, 250),
                (25, 25, 30, 7),
                (40, 40, 45, 10),
                (50, 50, 55, 1)
            ]
        );
    }

    #[test]
    fn parallel_calls_with_different_ids_stay_apart() {
        let mut a = m(0, 1, 10, 1);
        a.kind = Kind::Call;
        a.call_id = 1;
        let mut b = a;
        b.call_id = 2;
        b.t_send = 11;
        let mut t = Trace {
            messages: vec![a, b],
            ..Trace::default()
        };
        coalesce(&mut t);
        assert_eq!(t.messages.len(), 2);
    }
}
