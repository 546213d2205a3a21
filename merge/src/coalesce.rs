//! Messages as the application meant them: the sends of one reply (headers, then body; a
//! `sendall` the kernel split; `sendfile` after a header) become one message.
//!
//! Pure: works on [`Matches`] and the calls' own process clocks.
//!
//! Matching makes one message per send call. On a stream connection that carries traffic both
//! ways, two consecutive messages of the same side are one message when nothing went the other
//! way between them, as seen from both ends that were recorded:
//!
//! - the sender (same process for both sends) received nothing on the connection between the
//!   end of the first message's last send and the start of the second's first send (a receive
//!   counts when its call returned: a reader thread blocked in `recv` sees the reply only then);
//! - the receiver (same process for both) sent nothing on the connection between the end of
//!   the receive that got the first message's last byte and the end of the receive that got
//!   the second's first byte (one receive holding both pieces leaves no room at all).
//!
//! A thread's transfers to itself (one end written, the other read by the same thread) stay
//! one message per send. Both messages must be of the same kind (both matched, both sends nobody received, or both
//! receives no send accounts for); a message whose receive is incomplete stays alone. A
//! one-way connection (a stream of events with no reply) keeps one message per send: nothing
//! there says where the application's messages end. Pipelined requests stay apart when the
//! server answered the first before reading the second; read in one receive and answered in
//! two sends without a read between, they become one call and one return, which still pairs
//! call k with return k.

use crate::matching::{Call, Matches, Message};
use p5_wire::SocketProto;
use std::collections::HashMap;

/// Coalesces the pieces of each message and returns how many it folded (also added to
/// [`Matches::folded`]); keeps the counters (`matched`, `unmatched_*`) and the messages'
/// order (a message takes the place of its first piece).
pub fn coalesce(m: &mut Matches, calls: &[Call]) -> u64 {
    // Message indices per (connection, side), in their order (each flow's sends by time).
    let mut by_side: HashMap<(u32, u8), Vec<usize>> = HashMap::new();
    for (i, msg) in m.messages.iter().enumerate() {
        if is_stream(msg.proto) {
            by_side.entry((msg.conn, msg.side)).or_default().push(i);
        }
    }
    let mut keys: Vec<(u32, u8)> = by_side.keys().copied().collect();
    keys.sort_unstable();
    // What each side's opposite direction left, from the pieces before any folding.
    let seen: HashMap<(u32, u8), Opposite> = keys
        .iter()
        .filter_map(|&(conn, side)| {
            let other = by_side.get(&(conn, 1 - side))?; // one-way: nothing marks the ends
            Some(((conn, side), Opposite::new(&m.messages, other, calls)))
        })
        .collect();
    let mut gone = vec![false; m.messages.len()];
    let mut folded = 0u64;
    for key in keys {
        let Some(seen) = seen.get(&key) else {
            continue;
        };
        let mine = &by_side[&key];
        let mut head = mine[0];
        for &next in &mine[1..] {
            if continues(&m.messages[head], &m.messages[next], seen, calls) {
                let tail = m.messages[next];
                fold(&mut m.messages[head], &tail);
                gone[next] = true;
                folded += 1;
                match kind(&tail) {
                    Kind::Matched => m.matched = m.matched.saturating_sub(1),
                    Kind::Sent => m.unmatched_sends = m.unmatched_sends.saturating_sub(1),
                    Kind::Received => m.unmatched_recvs = m.unmatched_recvs.saturating_sub(1),
                    Kind::Incomplete => unreachable!("incomplete messages do not continue"),
                }
            } else {
                head = next;
            }
        }
    }
    m.folded += folded;
    if folded > 0 {
        let mut i = 0;
        m.messages.retain(|_| {
            i += 1;
            !gone[i - 1]
        });
    }
    folded
}

fn is_stream(p: SocketProto) -> bool {
    matches!(p, SocketProto::Tcp | SocketProto::UnixStream)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Matched,
    Sent,
    Received,
    /// A send whose bytes were only partly received.
    Incomplete,
}

fn kind(m: &Message) -> Kind {
    match (m.send, m.recv_first, m.recv_last) {
        (Some(_), Some(_), Some(_)) => Kind::Matched,
        (Some(_), None, None) => Kind::Sent,
        (None, Some(_), _) => Kind::Received,
        _ => Kind::Incomplete,
    }
}

/// What the other direction of a connection left at each end: `(process, time)` sorted.
struct Opposite {
    /// When a receive of an opposite message returned (its first receive's end).
    received: Vec<(usize, i64)>,
    /// When a send of an opposite message started.
    sent: Vec<(usize, i64)>,
}

impl Opposite {
    fn new(messages: &[Message], other: &[usize], calls: &[Call]) -> Opposite {
        let mut received = Vec::new();
        let mut sent = Vec::new();
        for &i in other {
            let o = &messages[i];
            if let Some(r) = o.recv_first {
                received.push((calls[r].process, end(&calls[r])));
            }
            if let Some(s) = o.send {
                sent.push((calls[s].process, calls[s].t));
            }
        }
        received.sort_unstable();
        sent.sort_unstable();
        Opposite { received, sent }
    }
}

/// Whether `list` holds an entry of `process` strictly inside `(lo, hi)`.
fn any_between(list: &[(usize, i64)], process: usize, lo: i64, hi: i64) -> bool {
    let k = list.partition_point(|&e| e <= (process, lo));
    list.get(k).is_some_and(|&(p, t)| p == process && t < hi)
}

fn end(c: &Call) -> i64 {
    c.t.saturating_add(c.duration.max(0))
}

/// Whether `b` is the next piece of `a` (the message `a` has become so far).
fn continues(a: &Message, b: &Message, seen: &Opposite, calls: &[Call]) -> bool {
    let k = kind(a);
    if k != kind(b) || k == Kind::Incomplete {
        return false;
    }
    // A thread that writes on one end and reads on the other shows each message read whole
    // before it writes the next: those are its messages, one per send.
    if let (Some(s), Some(r)) = (a.send_last, a.recv_last)
        && (calls[s].process, calls[s].thread) == (calls[r].process, calls[r].thread)
    {
        return false;
    }
    if let (Some(a_last), Some(b_first)) = (a.send_last, b.send) {
        let (x, y) = (&calls[a_last], &calls[b_first]);
        if x.process != y.process || any_between(&seen.received, x.process, end(x), y.t) {
            return false;
        }
    }
    if let (Some(a_last), Some(b_first)) = (a.recv_last, b.recv_first) {
        let (x, y) = (&calls[a_last], &calls[b_first]);
        if x.process != y.process {
            return false;
        }
        if a_last != b_first && any_between(&seen.sent, x.process, end(x), end(y)) {
            return false;
        }
    }
    true
}

/// Folds `b` into `a`.
fn fold(a: &mut Message, b: &Message) {
    a.send_last = b.send_last.or(a.send_last);
    a.send_calls += b.send_calls;
    let shared = a.recv_last.is_some() && a.recv_last == b.recv_first;
    a.recv_calls = (a.recv_calls + b.recv_calls).saturating_sub(u32::from(shared));
    a.recv_first = a.recv_first.or(b.recv_first);
    a.recv_last = b.recv_last.or(a.recv_last);
    a.bytes = a.bytes.saturating_add(b.bytes);
}

#[cfg(test)]
mod tests;
