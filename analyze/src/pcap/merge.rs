//! Several captures of one system, merged into one time-ordered stream of segments.
//!
//! Each capture is read lazily; a heap holds the next segment of each (by time, after the
//! capture's `offset_ns`), so memory is one segment per file, not the files.
//!
//! **Duplicates.** Two sniffers (one near each end, or one per switch) see the same packet.
//! A packet is the same when its direction, sequence and acknowledgment numbers, flags and
//! payload length (for UDP: length and a hash of the payload's first bytes) are equal and it
//! came from *another* capture within [`PcapOptions::dup_window_ns`](super::PcapOptions) of the
//! first sighting. The later sighting is not fed to the flow table again: it widens the message
//! the first one went to, so the earliest sighting is the message's send time and the latest
//! its receive time. An equal packet from the *same* capture is a retransmission, left to the
//! TCP layer. The duplicate table holds only the last window's packets, and only when there is
//! more than one capture.

use super::capture::Capture;
use super::flows::{Flows, FxMap};
use super::packet::Segment;
use crate::report::ReadReport;
use crate::trace::Time;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::SocketAddr;

/// What makes two sightings the same packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct DupKey {
    src: SocketAddr,
    dst: SocketAddr,
    seq: u32,
    ack: u32,
    flags: u8,
    len: u32,
    digest: u64,
}

impl DupKey {
    fn of(s: &Segment) -> Self {
        DupKey {
            src: s.src,
            dst: s.dst,
            seq: s.seq,
            ack: s.ack,
            flags: s.flags,
            len: s.len,
            digest: s.digest,
        }
    }
}

/// The first sighting of a packet.
#[derive(Debug, Clone, Copy)]
struct Sighting {
    ts: Time,
    file: u32,
    msg: Option<usize>,
}

/// Recent packets, to recognise the same packet from another capture.
#[derive(Debug, Default)]
struct Dups {
    seen: FxMap<DupKey, Sighting>,
    order: VecDeque<(Time, DupKey)>,
    window: Time,
    removed: u64,
}

impl Dups {
    /// True if `seg` was already seen by another capture (and `flows` has been told).
    fn is_dup(&mut self, seg: &Segment, flows: &mut Flows) -> bool {
        while let Some(&(t, k)) = self.order.front() {
            if seg.ts.saturating_sub(t) <= self.window {
                break;
            }
            self.order.pop_front();
            if self.seen.get(&k).is_some_and(|s| s.ts == t) {
                self.seen.remove(&k);
            }
        }
        let k = DupKey::of(seg);
        match self.seen.get(&k) {
            Some(s) if s.file != seg.file => {
                self.removed += 1;
                if let Some(m) = s.msg {
                    flows.widen(m, seg.ts);
                }
                true
            }
            _ => false,
        }
    }

    fn remember(&mut self, seg: &Segment, msg: Option<usize>) {
        let k = DupKey::of(seg);
        self.seen.insert(
            k,
            Sighting {
                ts: seg.ts,
                file: seg.file,
                msg,
            },
        );
        self.order.push_back((seg.ts, k));
    }
}

/// Feeds every segment of `captures`, merged by time with duplicates removed, to `flows`.
pub fn run(captures: &mut [Capture<'_>], window: Time, flows: &mut Flows, report: &mut ReadReport) {
    if let [only] = captures {
        while let Some(seg) = only.next_segment(report) {
            flows.segment(&seg);
        }
        return;
    }
    let mut heads: Vec<Option<Segment>> = Vec::with_capacity(captures.len());
    let mut heap = BinaryHeap::new();
    for (i, c) in captures.iter_mut().enumerate() {
        let s = c.next_segment(report);
        if let Some(s) = &s {
            heap.push(Reverse((s.ts, i)));
        }
        heads.push(s);
    }
    let mut dups = Dups {
        window,
        ..Dups::default()
    };
    while let Some(Reverse((_, i))) = heap.pop() {
        let Some(seg) = heads[i].take() else { continue };
        if !dups.is_dup(&seg, flows) {
            let msg = flows.segment(&seg);
            dups.remember(&seg, msg);
        }
        if let Some(next) = captures[i].next_segment(report) {
            heap.push(Reverse((next.ts, i)));
            heads[i] = Some(next);
        }
    }
    if dups.removed > 0 {
        report.note("duplicate packets", dups.removed);
    }
}
