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
use std::collections::HashMap;

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
    iids: HashMap<(Table, u64), u64>,
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
            iids: HashMap::new(),
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
        let p = TracePacket {
            timestamp: Some(t - self.last),
            trusted_packet_sequence_id: Some(self.id),
            sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
            interned_data: self.interned.take(),
            track_event: Some(ev),
            ..Default::default()
        };
        self.last = t;
        self.events += 1;
        sink.packet(&p)
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

/// What is interned on a miss.
#[derive(Debug)]
pub enum InternName {
    /// A name or string value.
    Text(String),
    /// A source location.
    Location(SourceLocation),
}
