//! Pairs that lost a half (ours; a sniffer that drops messages, \[P5\] §7.5.5): a call whose
//! return never showed, or a return whose call never did, is kept as a pair with the lost
//! half's times estimated from its link's complete pairs, so that the instance it belongs
//! to keeps its shape instead of losing a node and the subtree under it.
//!
//! The estimate is the link's (caller → callee) median call delay, service time and return
//! delay, from up to `SAMPLES` of its complete pairs spread over the trace. A half is only
//! taken as lost when the trace would have held it: a call is not repaired when even the
//! link's longest round trip would end after the trace does (the call was in flight when
//! the recording stopped), nor a return when its call would have left before the trace
//! began. The estimated times place the pair among the candidates and votes; they are never
//! reported: the lost message is absent from the instance, and no latency or delay is
//! measured from it ([`LOST`]). Which children such a pair may hold is decided by its loose
//! ends ([`Slack`]), not by the estimate, and a delay from an estimate scores below the
//! typical value ([`super::assign::UNKNOWN_SHARE`]).

use super::pairs::{CallPair, received, sent};
use crate::hash::FxHashMap;
use crate::trace::{Message, NodeId, Time};

/// The message index of a half the trace lost.
pub const LOST: u32 = u32::MAX;

/// Complete pairs per link the estimates come from, at most.
const SAMPLES: usize = 4096;

/// Complete pairs a link needs before its lost halves are estimated.
const MIN_PAIRS: usize = 8;

/// A link's typical delays: medians of call delay, service time and return delay, and the
/// longest round trip and service time among the samples.
#[derive(Debug, Clone, Copy)]
struct Typical {
    call: Time,
    serve: Time,
    ret: Time,
    longest: Time,
    longest_serve: Time,
}

/// How far from its estimate a lost half may have been: per link with a repaired pair, the
/// longest service time among its samples. A pair holds a child by these loose ends
/// ([`Ends`]) — an estimate at the median
/// puts a long request's lost return before its last children's, and its lost call after
/// its first children's — and the scores choose among the candidates that admits.
#[derive(Debug, Default)]
pub struct Slack(FxHashMap<(NodeId, NodeId), Time>);

impl Slack {
    fn of(&self, p: &CallPair) -> Time {
        self.0.get(&(p.caller, p.callee)).copied().unwrap_or(0)
    }

    /// No link has a repaired pair: [`Exact`] ends do.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The times by which a pair holds children (as a parent: when its call reached the callee
/// at the earliest, when its return left at the latest; as a child: when its call left at
/// the latest, when its return arrived at the earliest). [`Exact`] when no pair lost a half
/// (the sweep then reads the times themselves), [`Slack`] otherwise.
pub trait Ends {
    /// The earliest pair `p`'s call can have reached its callee.
    fn start(&self, p: &CallPair) -> Time;
    /// The latest pair `p`'s return can have left its callee.
    fn end(&self, p: &CallPair) -> Time;
    /// The latest pair `p`'s call can have left its caller.
    fn call_out(&self, p: &CallPair) -> Time;
    /// The earliest pair `p`'s return can have reached its caller.
    fn ret_in(&self, p: &CallPair) -> Time;
}

/// The pairs' own times: no pair lost a half.
#[derive(Debug)]
pub struct Exact;

impl Ends for Exact {
    #[inline]
    fn start(&self, p: &CallPair) -> Time {
        p.in_call
    }
    #[inline]
    fn end(&self, p: &CallPair) -> Time {
        p.out_ret
    }
    #[inline]
    fn call_out(&self, p: &CallPair) -> Time {
        p.out_call
    }
    #[inline]
    fn ret_in(&self, p: &CallPair) -> Time {
        p.in_ret
    }
}

impl Ends for Slack {
    #[inline]
    fn start(&self, p: &CallPair) -> Time {
        if p.call == LOST {
            p.out_ret.saturating_sub(self.of(p))
        } else {
            p.in_call
        }
    }
    #[inline]
    fn end(&self, p: &CallPair) -> Time {
        if p.ret == LOST {
            p.in_call.saturating_add(self.of(p))
        } else {
            p.out_ret
        }
    }
    /// Its return's arrival if the call was lost.
    #[inline]
    fn call_out(&self, p: &CallPair) -> Time {
        if p.call == LOST { p.in_ret } else { p.out_call }
    }
    /// Its call's departure if the return was lost.
    #[inline]
    fn ret_in(&self, p: &CallPair) -> Time {
        if p.ret == LOST { p.out_call } else { p.in_ret }
    }
}

/// How many pairs [`repair`] added.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Repaired {
    /// Calls kept with their lost return estimated.
    pub calls: u64,
    /// Returns kept with their lost call estimated.
    pub rets: u64,
}

/// Adds to `pairs` (complete pairs, in any order) a pair for every call of `lone_calls` and
/// every return of `lone_rets` (with their message indexes) whose link has enough complete
/// pairs and whose lost half falls inside the trace's `span` (its earliest and latest time);
/// returns how many and how loosely they hold children.
pub fn repair(
    pairs: &mut Vec<CallPair>,
    lone_calls: &[(u32, Message)],
    lone_rets: &[(u32, Message)],
    (first, last): (Time, Time),
) -> (Repaired, Slack) {
    let mut links: FxHashMap<(NodeId, NodeId), Link> = FxHashMap::default();
    for (_, m) in lone_calls {
        links.entry((m.src, m.dst)).or_default();
    }
    for (_, m) in lone_rets {
        links.entry((m.dst, m.src)).or_default();
    }
    if links.is_empty() {
        return Default::default();
    }
    let typical = typical_delays(pairs, links);
    let mut done = Repaired::default();
    for &(i, ref m) in lone_calls {
        let Some(t) = typical.get(&(m.src, m.dst)) else {
            continue;
        };
        let (out_call, in_call) = (sent(m), received(m));
        if out_call.saturating_add(t.longest) > last {
            continue;
        }
        let out_ret = in_call + t.serve;
        pairs.push(CallPair {
            caller: m.src,
            callee: m.dst,
            out_call,
            in_call,
            out_ret,
            in_ret: out_ret + t.ret,
            call: i,
            ret: LOST,
        });
        done.calls += 1;
    }
    for &(i, ref m) in lone_rets {
        let Some(t) = typical.get(&(m.dst, m.src)) else {
            continue;
        };
        let (out_ret, in_ret) = (sent(m), received(m));
        if in_ret.saturating_sub(t.longest) < first {
            continue;
        }
        let in_call = out_ret - t.serve;
        pairs.push(CallPair {
            caller: m.dst,
            callee: m.src,
            out_call: in_call - t.call,
            in_call,
            out_ret,
            in_ret,
            call: LOST,
            ret: i,
        });
        done.rets += 1;
    }
    let slack = typical
        .into_iter()
        .map(|(link, t)| (link, t.longest_serve))
        .collect();
    (done, Slack(slack))
}

/// A link with a lost half, while its complete pairs are sampled: how many it has, how
/// many were seen so far, and the samples (call delay, service time, return delay, round
/// trip).
#[derive(Debug, Default)]
struct Link {
    pairs: usize,
    seen: usize,
    samples: Vec<[Time; 4]>,
}

/// The typical delays of each link of `links` with at least [`MIN_PAIRS`] complete pairs,
/// from every k-th of them (at most [`SAMPLES`]).
fn typical_delays(
    pairs: &[CallPair],
    mut links: FxHashMap<(NodeId, NodeId), Link>,
) -> FxHashMap<(NodeId, NodeId), Typical> {
    for p in pairs {
        if let Some(l) = links.get_mut(&(p.caller, p.callee)) {
            l.pairs += 1;
        }
    }
    for p in pairs {
        let Some(l) = links.get_mut(&(p.caller, p.callee)) else {
            continue;
        };
        if l.seen.is_multiple_of(l.pairs.div_ceil(SAMPLES)) {
            l.samples.push([
                p.in_call - p.out_call,
                p.out_ret - p.in_call,
                p.in_ret - p.out_ret,
                p.in_ret - p.out_call,
            ]);
        }
        l.seen += 1;
    }
    links
        .into_iter()
        .filter(|(_, l)| l.samples.len() >= MIN_PAIRS)
        .map(|(link, Link { samples: mut s, .. })| {
            let mut median = |k: usize| {
                let mid = s.len() / 2;
                s.select_nth_unstable_by_key(mid, |d| d[k]);
                s[mid][k]
            };
            let (call, serve, ret) = (median(0), median(1), median(2));
            let longest = s.iter().map(|d| d[3]).max().unwrap_or(0);
            let longest_serve = s.iter().map(|d| d[1]).max().unwrap_or(0);
            (
                link,
                Typical {
                    call,
                    serve,
                    ret,
                    longest,
                    longest_serve,
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::nesting::{Params, nesting};
    use crate::trace::{Kind, Message, Time, Trace};

    const MS: Time = 1_000_000;

    /// Requests C → S → D every 100 ms (S calls D 10 ms after the call arrives, D answers in
    /// 10 ms, S answers 10 ms later, 1 ms on the wire), both times of every message. Request
    /// 5 lost its return to C, request 10 its call from C; request 20 is in flight when the
    /// trace ends (no return), and a return to C opens the trace without its call. Requests
    /// 5, 7 and 10 take more than twice as long (D answers after 50 ms, in 10 after a call
    /// 29 ms late): at the link's median service time, 5's lost return would leave S before
    /// D's answer came and 10's lost call would reach S after S called D.
    fn trace() -> Trace {
        let mut t = Trace::default();
        let (c, s, d) = (
            t.nodes.intern("C"),
            t.nodes.intern("S"),
            t.nodes.intern("D"),
        );
        let mut msg = |src, dst, kind, id, at: Time| {
            let mut m = Message::new(src, dst);
            (m.kind, m.call_id, m.t_send, m.t_recv) = (kind, id, at, at + MS);
            m.msg_ref = t.messages.len() as u64 + 1;
            t.messages.push(m);
        };
        msg(s, c, Kind::Ret, 999, 20 * MS);
        for k in 0..=20u64 {
            // A little jitter so the medians are not every sample.
            let (at, j) = (100 * MS * (k as Time + 1), (k % 3) as Time * MS / 10);
            if k != 10 {
                msg(c, s, Kind::Call, 2 * k, at);
            }
            if k == 20 {
                break;
            }
            let (d_call, d_ret, s_ret) = match k {
                5 | 7 => (11 * MS, 61 * MS, 72 * MS),
                10 => (30 * MS, 61 * MS, 72 * MS),
                _ => (11 * MS + j, 22 * MS + j, 33 * MS + 2 * j),
            };
            msg(s, d, Kind::Call, 2 * k + 1, at + d_call);
            msg(d, s, Kind::Ret, 2 * k + 1, at + d_ret);
            if k != 5 {
                msg(s, c, Kind::Ret, 2 * k, at + s_ret);
            }
        }
        t.messages.sort_by_key(|m| m.t_send);
        t
    }

    #[test]
    fn a_pair_that_lost_a_half_keeps_its_place() {
        let t = trace();
        let (r, counts) = nesting(&t, &Params::default());
        assert_eq!((counts.unmatched_calls, counts.unmatched_rets), (2, 2));
        // Request 20's call was in flight and the first return's call before the trace: both
        // stay out.
        assert_eq!((counts.repaired.calls, counts.repaired.rets), (1, 1));
        assert_eq!(r.patterns.len(), 1, "{:?}", r.patterns);
        let p = &r.patterns[0];
        assert_eq!((p.signature.as_str(), p.count), ("C>S(D)", 20));
        // Nothing is measured from an estimate: S's latency and the whole request's only from
        // the 18 requests with both of C's messages; D's call delay from all 20 (S stamps it).
        let n = |s: &Option<crate::pattern::Stats>| s.as_ref().map_or(0, |s| s.n);
        let (s, d) = (&p.nodes[1], &p.nodes[2]);
        assert_eq!((s.node.as_str(), d.node.as_str()), ("S", "D"));
        assert_eq!((n(&s.latency), n(&p.latency), n(&d.latency)), (18, 18, 20));
        // The instances hold only the messages the trace has.
        let mut sizes: Vec<usize> = r.instances.iter().map(|i| i.messages.len()).collect();
        sizes.sort_unstable();
        assert_eq!(sizes[..3], [3, 3, 4]);
        let refs: std::collections::HashSet<u64> = t.messages.iter().map(|m| m.msg_ref).collect();
        assert!(
            r.instances
                .iter()
                .flat_map(|i| &i.messages)
                .all(|m| refs.contains(m))
        );
    }

    #[test]
    fn without_repair_the_requests_that_lost_a_half_lose_their_shape() {
        let p = Params {
            repair: false,
            ..Params::default()
        };
        let (r, counts) = nesting(&trace(), &p);
        assert_eq!((counts.repaired.calls, counts.repaired.rets), (0, 0));
        let count = |sig: &str| {
            r.patterns
                .iter()
                .find(|p| p.signature == sig)
                .map(|p| p.count)
        };
        assert_eq!(count("C>S(D)"), Some(18));
        assert_eq!(count("S>D"), Some(2));
    }
}
