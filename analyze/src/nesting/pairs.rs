//! Call pairs (\[P5\] §5.1 FindCallPairs): each return closes the open call it answers.
//!
//! Calls and returns pair by `(caller, callee, call id)`. Without ids a return takes the
//! earliest unmatched call between the same two nodes (the paper's rule, which mispairs
//! out-of-order completions). Unmatched calls and returns come back apart, for
//! [`super::repair`] to keep as pairs or leave out.
//!
//! Memory: the messages are consumed — sorted in place by (callee-side time, call before
//! return, index) and read once — and the pairs are written into their memory as they are read
//! (a pair is smaller than the two messages it is made of), so pairing adds next to nothing to
//! the trace's own size. What later steps need of the messages (their refs, which arrivals were
//! stamped) is kept aside first, compactly when the refs count up.
//!
//! A return that seems to leave before its call arrived (the two ends stamped by clocks that
//! disagree) still answers it when the call ids match; such pairs are counted (`reversed`), and
//! `p5 analyze nesting` says the clocks disagree. Without call ids they cannot be told apart.

use crate::hash::FxHashMap;
use crate::trace::{Kind, Message, NO_CALL_ID, NO_TIME, NodeId, Time};
use bit_vec::BitVec;
use rayon::slice::ParallelSliceMut;

/// One call and its return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallPair {
    /// The caller.
    pub caller: NodeId,
    /// The callee.
    pub callee: NodeId,
    /// When the caller sent the call (its send time, else the one time known).
    pub out_call: Time,
    /// When the call reached the callee (its receive time, else the one time known).
    pub in_call: Time,
    /// When the callee sent the return.
    pub out_ret: Time,
    /// When the return reached the caller.
    pub in_ret: Time,
    /// Index of the call message in the trace.
    pub call: u32,
    /// Index of the return message.
    pub ret: u32,
}

/// When a message left: its send time, else the one time known.
pub fn sent(m: &Message) -> Time {
    m.send().unwrap_or(m.t_recv)
}

/// When a message arrived: its receive time, else the one time known.
pub fn received(m: &Message) -> Time {
    m.recv().unwrap_or(m.t_send)
}

/// What [`find_pairs`] found: the pairs, in no particular order, and the calls and returns
/// that found no partner (each with its index in the trace).
#[derive(Debug, Default)]
pub struct Pairing {
    /// The call pairs.
    pub pairs: Vec<CallPair>,
    /// Calls no return answered.
    pub lone_calls: Vec<(u32, Message)>,
    /// Returns that answered no call.
    pub lone_rets: Vec<(u32, Message)>,
    /// Of the pairs, those whose return seemed to leave before their call arrived, beyond
    /// the window: paired by their call id (the clocks that stamped them disagree).
    pub reversed: u64,
}

/// What the later steps need of the messages [`find_pairs`] consumed: each one's `msg_ref`
/// and whether its receive time was known (by message index), whether every message had
/// both times, and the earliest and the latest time the trace held.
#[derive(Debug)]
pub struct Kept {
    /// `msg_ref` by message index.
    refs: Refs,
    /// Bit `i`: message `i` had its receive time.
    recv: BitVec,
    /// Every message had both its send and its receive time.
    pub both_ends: bool,
    /// The earliest and the latest time of any message (`(Time::MAX, Time::MIN)` if none).
    pub span: (Time, Time),
}

/// The messages' `msg_ref`s: the first when they count up from it (a text trace's lines
/// without comments, a session's ids: nothing to hold), else each.
#[derive(Debug)]
enum Refs {
    From(u64),
    Each(Vec<u64>),
}

impl Kept {
    /// Takes what the later steps need of `msgs` and puts each message's index in its
    /// `msg_ref` (the pairing reorders them).
    fn take(msgs: &mut [Message]) -> Kept {
        let first = msgs.first().map_or(0, |m| m.msg_ref);
        let mut k = Kept {
            refs: Refs::From(first),
            recv: BitVec::from_elem(msgs.len(), false),
            both_ends: true,
            span: (Time::MAX, Time::MIN),
        };
        let n = msgs.len();
        for (i, m) in msgs.iter_mut().enumerate() {
            match &mut k.refs {
                Refs::Each(refs) => refs.push(m.msg_ref),
                Refs::From(first) if m.msg_ref == first.wrapping_add(i as u64) => {}
                Refs::From(first) => {
                    let mut refs = Vec::with_capacity(n);
                    refs.extend((0..i as u64).map(|j| first.wrapping_add(j)));
                    refs.push(m.msg_ref);
                    k.refs = Refs::Each(refs);
                }
            }
            m.msg_ref = i as u64;
            k.recv.set(i, m.t_recv != NO_TIME);
            k.both_ends &= m.t_send != NO_TIME && m.t_recv != NO_TIME;
            for t in [m.t_send, m.t_recv] {
                if t != NO_TIME {
                    k.span = (k.span.0.min(t), k.span.1.max(t));
                }
            }
        }
        k
    }

    /// Message `i`'s `msg_ref`.
    pub fn msg_ref(&self, i: u32) -> u64 {
        match &self.refs {
            Refs::From(first) => first.wrapping_add(u64::from(i)),
            Refs::Each(refs) => refs[i as usize],
        }
    }

    /// Whether some message had its receive time.
    pub fn any_recv(&self) -> bool {
        self.recv.any()
    }

    /// Whether message `i` had its receive time.
    pub fn recv_known(&self, i: u32) -> bool {
        self.recv.get(i as usize).unwrap_or(false)
    }
}

/// The call pairs of `msgs` (unordered: see [`sort`]) and the calls and returns that found
/// no partner. Calls and returns are taken in the order the callee saw them — a call when it
/// arrived, a return when it left — so that with both ends of every message known the pairing
/// uses one node's clock only. Under a skew `window` a return may seem to leave up to that
/// much before its call arrived (two clocks stamped them); a return that seems to leave
/// even earlier still answers a call no return answered if their call ids say so (a skewed
/// clock otherwise loses every short call it stamps one end of: on the multi-tier trace
/// with one server 20 ms fast, 58 % of the instances against 14 %).
///
/// The messages are consumed: sorted in place, and the pairs written into their memory as
/// they are read (std collects a filtered `Vec::into_iter` in place, and a pair is smaller
/// than the two messages it is made of), so that the trace and its pairs never take more
/// than the trace did.
pub fn find_pairs(mut msgs: Vec<Message>, window: Time) -> (Pairing, Kept) {
    let kept = Kept::take(&mut msgs);
    // Calls and returns by (callee-side time, call before return, message index); the rest
    // first (they are skipped). Keys are distinct, so an unstable sort gives the one order
    // there is.
    let key = |m: &Message| match m.kind {
        _ if m.time() == NO_TIME => (Time::MIN, m.msg_ref),
        Kind::Msg => (Time::MIN, m.msg_ref),
        Kind::Ret => (sent(m).saturating_add(window), 1 << 32 | m.msg_ref),
        Kind::Call => (received(m), m.msg_ref),
    };
    if !msgs.is_sorted_by_key(key) {
        msgs.par_sort_unstable_by_key(key);
    }
    let mut open = Open::default();
    let mut lone_rets = Vec::new();
    let mut pairs: Vec<CallPair> = msgs
        .into_iter()
        .filter_map(|m| match m.kind {
            _ if m.time() == NO_TIME => None,
            Kind::Msg => None,
            Kind::Call => {
                open.push(m);
                None
            }
            Kind::Ret => match open.take((m.dst, m.src, m.call_id)) {
                Some(c) => Some(pair(&c, &m)),
                None => {
                    lone_rets.push(m);
                    None
                }
            },
        })
        .collect();
    // A return that seemed to leave before its call arrived (two clocks stamped them, more
    // than the window apart) answers that call if the call id says so.
    let before = pairs.len();
    lone_rets.retain(|m| {
        if m.call_id == NO_CALL_ID {
            return true;
        }
        match open.take((m.dst, m.src, m.call_id)) {
            Some(c) => {
                pairs.push(pair(&c, m));
                false
            }
            None => true,
        }
    });
    let reversed = (pairs.len() - before) as u64;
    let lone = |m: Message| {
        (
            m.msg_ref as u32,
            Message {
                msg_ref: kept.msg_ref(m.msg_ref as u32),
                ..m
            },
        )
    };
    let pairing = Pairing {
        pairs,
        lone_calls: open.into_calls().map(lone).collect(),
        lone_rets: lone_rets.into_iter().map(lone).collect(),
        reversed,
    };
    (pairing, kept)
}

/// Calls no return has answered yet (each message's index in its `msg_ref`): per (caller,
/// callee, id), the slots of the oldest and the newest, and the rest as a list through the
/// slots (memory follows the parallelism, not the trace).
#[derive(Default)]
struct Open {
    calls: FxHashMap<(NodeId, NodeId, u64), (u32, u32)>,
    slots: Vec<(Message, u32)>,
    free: Vec<u32>,
}

impl Open {
    /// Call `m` is open.
    #[inline]
    fn push(&mut self, m: Message) {
        let key = (m.src, m.dst, m.call_id);
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = (m, u32::MAX);
                s
            }
            None => {
                self.slots.push((m, u32::MAX));
                (self.slots.len() - 1) as u32
            }
        };
        let slots = &mut self.slots;
        self.calls
            .entry(key)
            .and_modify(|(_, tail)| {
                slots[*tail as usize].1 = slot;
                *tail = slot;
            })
            .or_insert((slot, slot));
    }

    /// The oldest open call under `key`, no longer open: one lookup when it was the only one
    /// (with call ids, nearly always).
    #[inline]
    fn take(&mut self, key: (NodeId, NodeId, u64)) -> Option<Message> {
        let (head, tail) = self.calls.remove(&key)?;
        let (m, next) = self.slots[head as usize];
        if head != tail {
            self.calls.insert(key, (next, tail));
        }
        self.free.push(head);
        Some(m)
    }

    /// The calls still open.
    fn into_calls(self) -> impl Iterator<Item = Message> {
        let Open { calls, slots, .. } = self;
        let mut out = Vec::new();
        for (mut s, tail) in calls.into_values() {
            out.push(slots[s as usize].0);
            while s != tail {
                s = slots[s as usize].1;
                out.push(slots[s as usize].0);
            }
        }
        out.into_iter()
    }
}

/// The pair of call `c` and return `r` (their indexes in their `msg_ref`).
fn pair(call: &Message, ret: &Message) -> CallPair {
    CallPair {
        caller: call.src,
        callee: call.dst,
        out_call: sent(call),
        in_call: received(call),
        out_ret: sent(ret),
        in_ret: received(ret),
        call: call.msg_ref as u32,
        ret: ret.msg_ref as u32,
    }
}

/// Orders pairs by when their call left (then by their messages: every key is distinct).
pub fn sort(pairs: &mut [CallPair]) {
    // Unstable (no buffer of half the pairs), on both cores (each of the pairing's two sorts
    // is about a quarter of its time alone).
    pairs.par_sort_unstable_by_key(|p| (p.out_call, p.call, p.ret));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Trace;

    /// A → B call and its return, with `id`, the return sent at `ret` (the call at 100).
    fn trace(id: u64, ret: Time) -> Trace {
        let mut t = Trace::default();
        let (a, b) = (t.nodes.intern("A"), t.nodes.intern("B"));
        for (src, dst, kind, at) in [(a, b, Kind::Call, 100), (b, a, Kind::Ret, ret)] {
            let mut m = Message::new(src, dst);
            (m.kind, m.call_id, m.t_send) = (kind, id, at);
            t.messages.push(m);
        }
        t.messages.sort_by_key(|m| m.t_send);
        t
    }

    /// The pairing of `t`'s messages.
    fn find_pairs(t: Trace, window: Time) -> Pairing {
        super::find_pairs(t.messages, window).0
    }

    #[test]
    fn a_return_stamped_before_its_call_answers_it_by_id() {
        let p = find_pairs(trace(7, 40), 0);
        assert_eq!(
            (p.pairs.len(), p.lone_calls.len(), p.lone_rets.len()),
            (1, 0, 0)
        );
        assert_eq!(p.reversed, 1);
        let c = &p.pairs[0];
        assert_eq!((c.out_call, c.out_ret), (100, 40));
        // In order it pairs as always, and within the window too.
        let p = find_pairs(trace(7, 140), 0);
        assert_eq!((p.pairs.len(), p.reversed), (1, 0));
        let p = find_pairs(trace(7, 40), 70);
        assert_eq!((p.pairs.len(), p.reversed), (1, 0));
        // Without an id nothing says they belong together.
        let p = find_pairs(trace(NO_CALL_ID, 40), 0);
        assert_eq!(
            (p.pairs.len(), p.lone_calls.len(), p.lone_rets.len()),
            (0, 1, 1)
        );
    }

    #[test]
    fn the_pairs_take_the_messages_memory() {
        // 1,000 calls A → B and their returns, and free-form messages that pair with nothing.
        let mut t = Trace::default();
        let (a, b) = (t.nodes.intern("A"), t.nodes.intern("B"));
        for k in 0..1000u64 {
            for (src, dst, kind, at) in [
                (a, b, Kind::Call, 10 * k as Time),
                (b, a, Kind::Msg, 10 * k as Time + 3),
                (b, a, Kind::Ret, 10 * k as Time + 5),
            ] {
                let mut m = Message::new(src, dst);
                (m.kind, m.call_id, m.t_send, m.msg_ref) = (kind, k, at, 7 + k);
                t.messages.push(m);
            }
        }
        let bytes = t.messages.capacity() * size_of::<Message>();
        let at = t.messages.as_ptr() as usize;
        let (p, kept) = super::find_pairs(t.messages, 0);
        assert_eq!(p.pairs.len(), 1000);
        assert_eq!(p.pairs[999].call, 2997);
        assert_eq!(kept.msg_ref(2997), 7 + 999);
        assert!(matches!(kept.refs, Refs::Each(_)));
        // Written where the messages were (std's in-place collect): no second buffer.
        assert_eq!(p.pairs.as_ptr() as usize, at);
        assert!(p.pairs.capacity() * size_of::<CallPair>() > bytes - size_of::<CallPair>());
    }

    #[test]
    fn refs_that_count_up_are_kept_as_their_first() {
        // A call, its return and a lone return, numbered from 100 in trace order.
        let mut t = trace(7, 140);
        let mut lone = Message::new(t.messages[1].src, t.messages[1].dst);
        (lone.kind, lone.call_id, lone.t_send) = (Kind::Ret, 8, 150);
        t.messages.push(lone);
        for (i, m) in t.messages.iter_mut().enumerate() {
            m.msg_ref = 100 + i as u64;
        }
        let (p, kept) = super::find_pairs(t.messages, 0);
        assert!(matches!(kept.refs, Refs::From(100)));
        assert_eq!((kept.msg_ref(0), kept.msg_ref(2)), (100, 102));
        assert_eq!((p.pairs[0].call, p.pairs[0].ret), (0, 1));
        assert_eq!(p.lone_rets.len(), 1);
        assert_eq!((p.lone_rets[0].0, p.lone_rets[0].1.msg_ref), (2, 102));
    }
}
