//! One packet sequence per track: its incremental timestamps and its interned names.
//!
//! Every track's events are written on a sequence of their own (`trusted_packet_sequence_id`),
//! in time order, so that its timestamps can be deltas: the sequence's first packet clears
//! the incremental state (`SEQ_INCREMENTAL_STATE_CLEARED`) and carries a clock snapshot that
//! defines the sequence-scoped clock 64 as incremental, equal to CLOCK_MONOTONIC at the
//! sequence's first instant, plus `TracePacketDefaults` (timestamps on clock 64, events on
//! the track); every later packet sets `SEQ_NEEDS_INCREMENTAL_STATE` and a timestamp that is
//! the nanoseconds since the sequence's previous packet (one or two bytes for most events).
//! An event earlier than the previous one of its track (overlapping rows the database should
//! not hold) is moved to that previous instant and counted: deltas cannot be negative.
//!
//! Names are interned per sequence as Perfetto's SDK does: the first event that uses a name
//! carries it in `interned_data` with a new iid; later events carry only the iid. Callers
//! intern by a key of their own (a sensor id, a CPU number) and give the name only on a miss.

use crate::error::Error;
use crate::proto::{
    CLOCK_MONOTONIC, CLOCK_SEQUENCE, Clock, ClockSnapshot, DebugAnnotationName, EventName,
    InternedData, InternedString, SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE,
    SourceLocation, TracePacket, TracePacketDefaults, TrackEvent, TrackEventDefaults,
};
use crate::sink::Sink;
use prost::Message;
use prost::encoding::{encode_varint, encoded_len_varint};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Longest name written (longer ones are cut at a character boundary).
pub const MAX_NAME: usize = 1024;

/// Cuts `s` to at most [`MAX_NAME`] bytes.
pub fn bounded(mut s: String) -> String {
    if s.len() > MAX_NAME {
        let mut end = MAX_NAME;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// Which interning table a key belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Table {
    /// `event_names`.
    EventName,
    /// `debug_annotation_names`.
    ArgName,
    /// `debug_annotation_string_values`.
    ArgString,
    /// `source_locations`.
    SourceLocation,
}

/// A packet sequence carrying one track's events.
#[derive(Debug)]
pub struct Sequence {
    id: u32,
    track: u64,
    started: bool,
    last: u64,
    iids: HashMap<(Table, u64), u64, BuildHasherDefault<KeyHasher>>,
    next_iid: u64,
    interned: Option<InternedData>,
    /// Events moved forward to keep the track in time order.
    pub moved: u64,
    /// Events written.
    pub events: u64,
}

impl Sequence {
    /// A sequence for `track`'s events (`id` ≥ 2: 1 is the trace-wide sequence).
    pub fn new(id: u32, track: u64) -> Sequence {
        Sequence {
            id,
            track,
            started: false,
            last: 0,
            iids: HashMap::default(),
            next_iid: 1,
            interned: None,
            moved: 0,
            events: 0,
        }
    }

    /// Whether any event was written.
    pub fn started(&self) -> bool {
        self.started
    }

    /// The iid of `key` in `table`, interning `name()` on a miss (emitted with the next event).
    pub fn intern(&mut self, table: Table, key: u64, name: impl FnOnce() -> InternName) -> u64 {
        if let Some(&iid) = self.iids.get(&(table, key)) {
            return iid;
        }
        let iid = self.next_iid;
        self.next_iid += 1;
        self.iids.insert((table, key), iid);
        let d = self.interned.get_or_insert_with(InternedData::default);
        match name() {
            InternName::Text(n) => {
                let name = Some(bounded(n));
                match table {
                    Table::EventName => d.event_names.push(EventName {
                        iid: Some(iid),
                        name,
                    }),
                    Table::ArgName => d.debug_annotation_names.push(DebugAnnotationName {
                        iid: Some(iid),
                        name,
                    }),
                    Table::ArgString | Table::SourceLocation => {
                        d.debug_annotation_string_values.push(InternedString {
                            iid: Some(iid),
                            str: name.map(String::into_bytes),
                        })
                    }
                }
            }
            InternName::Location(mut loc) => {
                loc.iid = Some(iid);
                d.source_locations.push(loc);
            }
        }
        iid
    }

    /// Writes `ev` at `t` (ns on CLOCK_MONOTONIC), with the names interned since the last.
    pub fn event(&mut self, sink: &mut Sink, t: u64, ev: TrackEvent) -> Result<(), Error> {
        if !self.started {
            self.start(sink, t)?;
        }
        let t = if t < self.last {
            self.moved += 1;
            self.last
        } else {
            t
        };
        let delta = t - self.last;
        self.last = t;
        self.events += 1;
        if self.interned.is_some() {
            return sink.packet(&TracePacket {
                timestamp: Some(delta),
                trusted_packet_sequence_id: Some(self.id),
                sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
                interned_data: self.interned.take(),
                track_event: Some(ev),
                ..Default::default()
            });
        }
        // Most packets: the bytes prost writes for the packet above without interned data
        // (fields in tag order: timestamp, sequence id, event, flags), without walking the
        // packet's other fields twice (`encoded_like_prost` checks it).
        let ev_len = ev.encoded_len();
        let body = 1
            + encoded_len_varint(delta)
            + 1
            + encoded_len_varint(u64::from(self.id))
            + 2
            + 1
            + encoded_len_varint(ev_len as u64)
            + ev_len;
        sink.raw(|buf| {
            buf.push(0x0A); // Trace.packet, length-delimited
            encode_varint(body as u64, buf);
            buf.push(0x40); // timestamp (8), varint
            encode_varint(delta, buf);
            buf.push(0x50); // trusted_packet_sequence_id (10), varint
            encode_varint(u64::from(self.id), buf);
            buf.push(0x5A); // track_event (11), length-delimited
            encode_varint(ev_len as u64, buf);
            ev.encode_raw(buf);
            buf.push(0x68); // sequence_flags (13), varint
            buf.push(SEQ_NEEDS_INCREMENTAL_STATE as u8);
        })
    }

    /// The sequence's first packet: state cleared, clock 64 = CLOCK_MONOTONIC from `t` on,
    /// incremental; defaults.
    fn start(&mut self, sink: &mut Sink, t: u64) -> Result<(), Error> {
        self.started = true;
        self.last = t;
        let clock = |id, inc| Clock {
            clock_id: Some(id),
            timestamp: Some(t),
            is_incremental: inc,
        };
        sink.packet(&TracePacket {
            timestamp: Some(t),
            timestamp_clock_id: Some(CLOCK_MONOTONIC),
            trusted_packet_sequence_id: Some(self.id),
            sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED),
            first_packet_on_sequence: Some(true),
            clock_snapshot: Some(ClockSnapshot {
                clocks: vec![
                    clock(CLOCK_SEQUENCE, Some(true)),
                    clock(CLOCK_MONOTONIC, None),
                ],
                primary_trace_clock: None,
            }),
            trace_packet_defaults: Some(TracePacketDefaults {
                timestamp_clock_id: Some(CLOCK_SEQUENCE),
                track_event_defaults: Some(TrackEventDefaults {
                    track_uuid: Some(self.track),
                }),
            }),
            ..Default::default()
        })
    }
}

/// A hasher for the interning keys (small integers and 64-bit sensor ids): one multiply
/// per word instead of SipHash, which showed in the export's profile. Keys come from the
/// database, not from an adversary choosing collisions against a running service.
#[derive(Debug, Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_isize(&mut self, n: isize) {
        self.write_u64(n as u64);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// What is interned on a miss.
#[derive(Debug)]
pub enum InternName {
    /// A name or string value.
    Text(String),
    /// A source location.
    Location(SourceLocation),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{DebugAnnotation, EventType};

    /// The hand-framed packets are exactly prost's encoding of the same `TracePacket`.
    #[test]
    fn encoded_like_prost() {
        let events = [
            TrackEvent {
                r#type: Some(EventType::SliceEnd as i32),
                ..Default::default()
            },
            TrackEvent {
                r#type: Some(EventType::SliceBegin as i32),
                name_iid: Some(300),
                source_location_iid: Some(7),
                flow_ids: vec![1, u64::MAX],
                debug_annotations: vec![DebugAnnotation {
                    name_iid: Some(2),
                    int_value: Some(-5),
                    string_value_iid: None,
                }],
                ..Default::default()
            },
            TrackEvent {
                r#type: Some(EventType::Counter as i32),
                double_counter_value: Some(0.25),
                ..Default::default()
            },
        ];
        for (id, t) in [(2u32, 0u64), (200, 1), (70_000, 1 << 40)] {
            let mut expected = Vec::new();
            let mut got = Vec::new();
            {
                let (tx, _rx) = std::sync::mpsc::sync_channel(8);
                let (_ftx, frx) = std::sync::mpsc::sync_channel(1);
                let mut sink = Sink::detached(tx, frx);
                let mut seq = Sequence::new(id, 9);
                seq.started = true;
                seq.last = t;
                for ev in events.clone() {
                    seq.event(&mut sink, t + 5, ev.clone()).unwrap();
                    let p = TracePacket {
                        timestamp: Some(5),
                        trusted_packet_sequence_id: Some(id),
                        sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
                        track_event: Some(ev),
                        ..Default::default()
                    };
                    prost::encoding::message::encode(1, &p, &mut expected);
                    seq.last = t;
                }
                got.extend_from_slice(sink.pending());
            }
            assert_eq!(got, expected);
        }
    }
}
