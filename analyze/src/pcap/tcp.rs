//! TCP connections: sequence tracking per direction, and payload runs turned into messages.
//!
//! **Direction.** Direction 0 runs from the connection's *initiator* to its *acceptor*. The
//! initiator is the sender of a SYN (or the receiver of a SYN-ACK when the SYN was not
//! captured); for a connection whose handshake was not captured, it is the side with the
//! higher port — the ephemeral one in the usual client/server setup — and on equal ports the
//! first sender.
//!
//! **Runs.** A message is a run of payload in one direction, ended by the first payload in the
//! other direction (or by the connection's close, or the end of the capture). A run from the
//! initiator is a [`Kind::Call`], a run back a [`Kind::Ret`]. Each call takes a fresh call id
//! from a counter shared by the whole trace (so ids are unique across connections), and the
//! return that follows takes the id of the call before it: the k-th call and the k-th return of
//! a keep-alive connection share an id. A return with no call before it (a capture that begins
//! mid-exchange) takes a fresh id and stays unmatched.
//!
//! **Times.** A one-point capture sees each packet once, somewhere between the two ends. The
//! run's `t_send` is the first sighting of its first packet, its `t_recv` the last sighting of
//! its last packet (retransmissions inside the open run included). With one sniffer the two
//! bracket the message's passage past the sniffer (they are equal for a one-packet message);
//! the network delay on either side of the sniffer is not seen. When two sniffers saw the same
//! packet (see `merge`), the earliest sighting becomes the send side and the latest the
//! receive side.
//!
//! **Sequence numbers.** Each direction keeps the highest sequence number seen (as a 64-bit
//! position, so wrap-around is harmless) and the holes below it. A segment entirely below the
//! highest and in no hole is a retransmission: counted, its bytes not added again (one
//! byte just below the highest is a keep-alive probe: counted apart, and it does not extend the
//! run's receive time as a retransmission inside the open run does). A segment
//! that fills a hole is out of order: counted, nothing added (the hole's bytes were counted when
//! it opened). A segment beyond the highest opens a hole; holes still open when the run ends
//! are capture gaps. A message's `bytes` is the sequence span its run advanced, so a capture
//! gap does not shrink it. A jump of more than 16 MiB is not a hole but a resynchronisation
//! (counted as a gap, the span not added).
//!
//! **Close and reuse.** RST, or FIN from both sides, closes a connection. The closed state is
//! kept a while (trailing ACKs, retransmitted FINs and stray data attach to it and are
//! dropped); only a new SYN with another initial sequence number on the same 4-tuple starts a
//! new connection (port reuse). A SYN with another initial sequence number on a connection
//! still open also starts a new one: its close was not captured.

use super::packet::{FIN, RST, SYN, Segment};
use crate::trace::{CallId, ConnId, Kind, Message, NO_CALL_ID, NodeId, Time};
use std::net::SocketAddr;

/// Holes a direction remembers before the oldest is declared a capture gap.
const MAX_HOLES: usize = 16;

/// A forward jump larger than this is a resynchronisation, not a hole.
const MAX_JUMP: i64 = 16 << 20;

/// Counters the connections add to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpStats {
    /// Segments whose payload had been seen (retransmissions, keep-alive probes).
    pub retransmitted: u64,
    /// Sequence holes never filled.
    pub gaps: u64,
    /// Segments that filled a hole.
    pub reordered: u64,
    /// Keep-alive probes (one old byte, just below the highest sequence number).
    pub probes: u64,
}

/// Where messages go: the trace's message list and the trace-wide call-id counter.
#[derive(Debug, Default)]
pub struct Sink {
    /// Messages, in the order their runs began.
    pub messages: Vec<Message>,
    /// The next call id.
    pub next_call: CallId,
    /// Counters.
    pub stats: TcpStats,
}

impl Sink {
    /// Extends message `idx` to cover a sighting at `ts`.
    pub fn widen(&mut self, idx: usize, ts: Time) {
        if let Some(m) = self.messages.get_mut(idx) {
            m.t_send = m.t_send.min(ts);
            m.t_recv = m.t_recv.max(ts);
        }
    }
}

/// Sequence state of one direction.
#[derive(Debug, Clone, Default)]
struct Side {
    started: bool,
    isn: Option<u32>,
    /// One past the highest sequence position seen.
    high: i64,
    /// Missing ranges below `high`.
    holes: Vec<(i64, i64)>,
}

/// What a payload segment was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Accept {
    /// New data: the run advanced by this many bytes.
    New(u32),
    /// Already seen.
    Old,
    /// A keep-alive probe: the one byte just below the highest sequence number.
    Probe,
    /// Filled a hole.
    Filled,
}

impl Side {
    fn syn(&mut self, seq: u32) {
        self.started = true;
        self.isn = Some(seq);
        self.high = i64::from(seq) + 1;
        self.holes.clear();
    }

    fn abs(&self, seq: u32) -> i64 {
        self.high + i64::from(seq.wrapping_sub(self.high as u32) as i32)
    }

    fn accept(&mut self, seq: u32, len: u32, stats: &mut TcpStats) -> Accept {
        if !self.started {
            self.started = true;
            self.high = i64::from(seq) + i64::from(len);
            return Accept::New(len);
        }
        let s = self.abs(seq);
        let e = s + i64::from(len);
        if e <= self.high {
            return if self.fill(s, e) {
                Accept::Filled
            } else if len == 1 && e == self.high {
                Accept::Probe
            } else {
                Accept::Old
            };
        }
        if s > self.high + MAX_JUMP {
            stats.gaps += 1;
            self.high = e;
            return Accept::New(len);
        }
        if s > self.high {
            self.holes.push((self.high, s));
            if self.holes.len() > MAX_HOLES {
                self.holes.remove(0);
                stats.gaps += 1;
            }
        } else if s < self.high {
            self.fill(s, self.high);
        }
        let n = e - self.high;
        self.high = e;
        Accept::New(u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// Removes `[s, e)` from the holes; true if it overlapped one.
    fn fill(&mut self, s: i64, e: i64) -> bool {
        if self.holes.is_empty() {
            return false;
        }
        let mut hit = false;
        let mut kept = Vec::with_capacity(self.holes.len() + 1);
        for &(hs, he) in &self.holes {
            if s < he && e > hs {
                hit = true;
                if hs < s {
                    kept.push((hs, s));
                }
                if e < he {
                    kept.push((e, he));
                }
            } else {
                kept.push((hs, he));
            }
        }
        self.holes = kept;
        hit
    }

    /// Ends a run in this direction: holes still open are capture gaps.
    fn end_run(&mut self, stats: &mut TcpStats) {
        stats.gaps += self.holes.len() as u64;
        self.holes.clear();
    }
}

/// The open run of a connection.
#[derive(Debug, Clone, Copy)]
struct Run {
    dir: usize,
    msg: usize,
}

/// One TCP connection.
#[derive(Debug, Clone)]
pub struct TcpConn {
    /// Its index in the trace's connections.
    pub id: ConnId,
    /// The initiator's endpoint (direction 0 starts here).
    pub initiator: SocketAddr,
    /// Initiator and acceptor nodes.
    pub nodes: [NodeId; 2],
    /// Last packet time.
    pub last_ts: Time,
    /// Closed by RST or two FINs.
    pub closed: bool,
    sides: [Side; 2],
    run: Option<Run>,
    pending_call: Option<CallId>,
    fin: [bool; 2],
}

/// Who initiated a connection first seen in `seg`: the SYN sender, the SYN-ACK receiver, else
/// the higher port, else the sender.
pub fn initiator_of(seg: &Segment) -> SocketAddr {
    let syn = seg.flags & SYN != 0;
    let ack = seg.flags & super::packet::ACK != 0;
    if syn {
        return if ack { seg.dst } else { seg.src };
    }
    if seg.dst.port() > seg.src.port() {
        seg.dst
    } else {
        seg.src
    }
}

impl TcpConn {
    /// A new connection.
    pub fn new(id: ConnId, initiator: SocketAddr, nodes: [NodeId; 2]) -> Self {
        TcpConn {
            id,
            initiator,
            nodes,
            last_ts: 0,
            closed: false,
            sides: Default::default(),
            run: None,
            pending_call: None,
            fin: [false; 2],
        }
    }

    /// The direction of `seg`: 0 from the initiator, 1 back.
    pub fn dir(&self, seg: &Segment) -> usize {
        usize::from(seg.src != self.initiator)
    }

    /// True if `seg` starts a new connection on this 4-tuple: a SYN with another initial
    /// sequence number (or, once closed, any SYN from a side whose SYN was not seen).
    pub fn is_reuse(&self, seg: &Segment) -> bool {
        let dir = self.dir(seg);
        let side = &self.sides[dir];
        let is_syn = seg.flags & SYN != 0;
        if is_syn && side.isn.is_some_and(|isn| isn != seg.seq) {
            return true;
        }
        self.closed && is_syn && side.isn.is_none()
    }

    /// Takes `seg` (of this connection); returns the message its payload belongs to, if any.
    pub fn segment(&mut self, seg: &Segment, sink: &mut Sink) -> Option<usize> {
        self.last_ts = seg.ts;
        let dir = self.dir(seg);
        let mut seq = seg.seq;
        if seg.flags & SYN != 0 {
            if self.sides[dir].isn == Some(seg.seq) {
                sink.stats.retransmitted += 1;
            } else {
                self.sides[dir].syn(seg.seq);
            }
            seq = seq.wrapping_add(1);
        }
        let mut msg = None;
        if seg.len > 0 && !self.closed {
            msg = self.payload(dir, seq, seg, sink);
        }
        if seg.flags & RST != 0 {
            self.close(sink);
        } else if seg.flags & FIN != 0 {
            self.fin[dir] = true;
            if self.fin == [true, true] {
                self.close(sink);
            }
        }
        msg
    }

    fn payload(&mut self, dir: usize, seq: u32, seg: &Segment, sink: &mut Sink) -> Option<usize> {
        let in_run = self.run.filter(|r| r.dir == dir).map(|r| r.msg);
        match self.sides[dir].accept(seq, seg.len, &mut sink.stats) {
            Accept::Probe => {
                sink.stats.probes += 1;
                None
            }
            Accept::Old => {
                sink.stats.retransmitted += 1;
                if let Some(m) = in_run {
                    sink.widen(m, seg.ts);
                }
                in_run
            }
            Accept::Filled => {
                sink.stats.reordered += 1;
                if let Some(m) = in_run {
                    sink.widen(m, seg.ts);
                }
                in_run
            }
            Accept::New(n) => Some(match in_run {
                Some(m) => {
                    let msg = &mut sink.messages[m];
                    msg.bytes = msg.bytes.saturating_add(n);
                    msg.t_recv = msg.t_recv.max(seg.ts);
                    m
                }
                None => self.start_run(dir, n, seg, sink),
            }),
        }
    }

    fn start_run(&mut self, dir: usize, bytes: u32, seg: &Segment, sink: &mut Sink) -> usize {
        if let Some(r) = self.run.take() {
            self.sides[r.dir].end_run(&mut sink.stats);
        }
        let (kind, call_id) = if dir == 0 {
            let id = sink.next_call;
            sink.next_call += 1;
            self.pending_call = Some(id);
            (Kind::Call, id)
        } else {
            let id = self.pending_call.take().unwrap_or_else(|| {
                sink.next_call += 1;
                sink.next_call - 1
            });
            (Kind::Ret, id)
        };
        debug_assert_ne!(call_id, NO_CALL_ID);
        let mut m = Message::new(self.nodes[dir], self.nodes[1 - dir]);
        m.t_send = seg.ts;
        m.t_recv = seg.ts;
        m.kind = kind;
        m.call_id = call_id;
        m.conn = self.id;
        m.bytes = bytes;
        m.msg_ref = msg_ref(seg);
        sink.messages.push(m);
        self.run = Some(Run {
            dir,
            msg: sink.messages.len() - 1,
        });
        sink.messages.len() - 1
    }

    /// Closes the connection (RST, both FINs, or a new connection on its 4-tuple).
    pub fn close(&mut self, sink: &mut Sink) {
        if let Some(r) = self.run.take() {
            self.sides[r.dir].end_run(&mut sink.stats);
        }
        self.closed = true;
    }
}

/// A message's reference: its first packet's number, plus the capture's index × 2⁴⁰ (so a
/// single capture's references are plain packet numbers).
pub fn msg_ref(seg: &Segment) -> u64 {
    (u64::from(seg.file) << 40) | (seg.number & ((1 << 40) - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retransmission_reorder_and_gap() {
        let mut st = TcpStats::default();
        let mut s = Side::default();
        s.syn(u32::MAX - 5); // wraps during the test
        assert_eq!(s.accept(u32::MAX - 4, 10, &mut st), Accept::New(10));
        assert_eq!(s.accept(u32::MAX - 4, 10, &mut st), Accept::Old);
        assert_eq!(
            s.accept(u32::MAX.wrapping_add(5), 1, &mut st),
            Accept::Probe
        );
        // 10 bytes missing, then 10 more: the run spans 20.
        assert_eq!(s.accept(15, 10, &mut st), Accept::New(20));
        assert_eq!(s.accept(5, 5, &mut st), Accept::Filled);
        assert_eq!(
            s.holes,
            vec![(i64::from(u32::MAX) + 6 + 5, i64::from(u32::MAX) + 6 + 10)]
        );
        s.end_run(&mut st);
        assert_eq!(st.gaps, 1);
        assert_eq!(s.accept(25, 1, &mut st), Accept::New(1));
    }

    #[test]
    fn too_many_holes_become_gaps() {
        let mut st = TcpStats::default();
        let mut s = Side::default();
        s.syn(0);
        for i in 0..(MAX_HOLES as u32 + 3) {
            s.accept(1 + i * 10, 5, &mut st);
        }
        assert_eq!(st.gaps, 2);
        assert_eq!(s.holes.len(), MAX_HOLES);
    }
}
