//! The subset of Perfetto's trace protobuf that the export writes, as prost messages.
//!
//! Written by hand rather than generated: `prost-build` needs `protoc`, which is not part of
//! the toolchain here, and the subset is small. Every message, field number, type and
//! packing below is that of Perfetto's `protos/perfetto/trace/…` definitions (`Trace`,
//! `TracePacket`, `TrackEvent`, `TrackDescriptor`, `ProcessDescriptor`, `ThreadDescriptor`,
//! `CounterDescriptor`, `InternedData`, `TracePacketDefaults`, `ClockSnapshot`,
//! `DebugAnnotation`, `SourceLocation`); Perfetto's own generated classes check them: the
//! tests decode every packet with the `perfetto` PyPI package and refuse any field it does
//! not know. Perfetto's messages are proto2: optional scalars are `Option`s, repeated scalars
//! are not packed (`flow_ids` are `fixed64` one by one), oneofs are plain optional fields
//! here (the export sets at most one member).

/// A trace file: a sequence of packets (field 1 each, length-delimited).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Trace {
    /// The packets.
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

/// `TracePacket.sequence_flags`: the writer re-emits incremental state after this packet.
pub const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
/// `TracePacket.sequence_flags`: this packet needs the sequence's incremental state.
pub const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;

/// `BuiltinClock.BUILTIN_CLOCK_REALTIME`.
pub const CLOCK_REALTIME: u32 = 1;
/// `BuiltinClock.BUILTIN_CLOCK_MONOTONIC`.
pub const CLOCK_MONOTONIC: u32 = 3;
/// The first sequence-scoped clock id (64–127 are defined per packet sequence).
pub const CLOCK_SEQUENCE: u32 = 64;

/// One packet.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacket {
    /// Timestamp on `timestamp_clock_id` (or the sequence's default clock).
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    /// The clock of `timestamp`.
    #[prost(uint32, optional, tag = "58")]
    pub timestamp_clock_id: Option<u32>,
    /// The packet sequence (its interning and defaults are per sequence).
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    /// Names interned on this sequence from here on.
    #[prost(message, optional, tag = "12")]
    pub interned_data: Option<InternedData>,
    /// `SEQ_*` flags.
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    /// Defaults for the sequence's later packets.
    #[prost(message, optional, tag = "59")]
    pub trace_packet_defaults: Option<TracePacketDefaults>,
    /// The first packet of its sequence.
    #[prost(bool, optional, tag = "87")]
    pub first_packet_on_sequence: Option<bool>,
    /// A track event (`data` oneof).
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    /// A track's description (`data` oneof).
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
    /// Clock values at one instant (`data` oneof).
    #[prost(message, optional, tag = "6")]
    pub clock_snapshot: Option<ClockSnapshot>,
    /// Packets of a `Trace`, deflated (zlib format) (`data` oneof).
    #[prost(bytes = "vec", optional, tag = "50")]
    pub compressed_packets: Option<Vec<u8>>,
}

/// `TrackEvent.Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
#[repr(i32)]
pub enum EventType {
    /// Unspecified.
    Unspecified = 0,
    /// Opens a slice.
    SliceBegin = 1,
    /// Closes the innermost open slice of its track.
    SliceEnd = 2,
    /// An instant.
    Instant = 3,
    /// A counter value.
    Counter = 4,
}

/// An event on a track.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackEvent {
    /// Interned name (`EventName.iid`).
    #[prost(uint64, optional, tag = "10")]
    pub name_iid: Option<u64>,
    /// Name, not interned.
    #[prost(string, optional, tag = "23")]
    pub name: Option<String>,
    /// Type.
    #[prost(enumeration = "EventType", optional, tag = "9")]
    pub r#type: Option<i32>,
    /// Track (else the sequence's default track).
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    /// Counter value (integer).
    #[prost(int64, optional, tag = "30")]
    pub counter_value: Option<i64>,
    /// Counter value (floating point).
    #[prost(double, optional, tag = "44")]
    pub double_counter_value: Option<f64>,
    /// Flows starting at (or passing through) this event.
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
    /// Flows ending at this event.
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
    /// Arguments.
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    /// Interned source location (`SourceLocation.iid`).
    #[prost(uint64, optional, tag = "34")]
    pub source_location_iid: Option<u64>,
}

/// A named argument of an event.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DebugAnnotation {
    /// Interned name (`DebugAnnotationName.iid`).
    #[prost(uint64, optional, tag = "1")]
    pub name_iid: Option<u64>,
    /// Integer value.
    #[prost(int64, optional, tag = "4")]
    pub int_value: Option<i64>,
    /// Interned string value (`InternedData.debug_annotation_string_values`).
    #[prost(uint64, optional, tag = "17")]
    pub string_value_iid: Option<u64>,
}

/// A track: a process, a thread, a counter or a named child track.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackDescriptor {
    /// Trace-wide id.
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    /// The track it belongs under.
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
    /// Name.
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    /// A process's track.
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    /// A thread's track.
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    /// A counter track.
    #[prost(message, optional, tag = "8")]
    pub counter: Option<CounterDescriptor>,
    /// Rank among siblings (`child_ordering` EXPLICIT of the parent).
    #[prost(int32, optional, tag = "12")]
    pub sibling_order_rank: Option<i32>,
    /// `ChildTracksOrdering` of the children.
    #[prost(int32, optional, tag = "11")]
    pub child_ordering: Option<i32>,
    /// A longer description.
    #[prost(string, optional, tag = "14")]
    pub description: Option<String>,
}

/// `TrackDescriptor.ChildTracksOrdering.EXPLICIT`: children by `sibling_order_rank`.
pub const CHILD_ORDERING_EXPLICIT: i32 = 3;

/// A process.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessDescriptor {
    /// Process id (unique in the trace).
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// Command line.
    #[prost(string, repeated, tag = "2")]
    pub cmdline: Vec<String>,
    /// Name.
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
    /// Free-form labels.
    #[prost(string, repeated, tag = "8")]
    pub process_labels: Vec<String>,
    /// Start, ns on the trace clock.
    #[prost(int64, optional, tag = "7")]
    pub start_timestamp_ns: Option<i64>,
}

/// A thread.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ThreadDescriptor {
    /// Its process's pid.
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// Thread id (unique in the trace).
    #[prost(int64, optional, tag = "2")]
    pub tid: Option<i64>,
    /// Name.
    #[prost(string, optional, tag = "5")]
    pub thread_name: Option<String>,
}

/// A counter track's unit.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CounterDescriptor {
    /// Free-form unit.
    #[prost(string, optional, tag = "6")]
    pub unit_name: Option<String>,
    /// Each integer value times this is the quantity.
    #[prost(int64, optional, tag = "4")]
    pub unit_multiplier: Option<i64>,
}

/// Names interned on a sequence.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedData {
    /// Event names.
    #[prost(message, repeated, tag = "2")]
    pub event_names: Vec<EventName>,
    /// Argument names.
    #[prost(message, repeated, tag = "3")]
    pub debug_annotation_names: Vec<DebugAnnotationName>,
    /// Source locations.
    #[prost(message, repeated, tag = "4")]
    pub source_locations: Vec<SourceLocation>,
    /// String argument values.
    #[prost(message, repeated, tag = "29")]
    pub debug_annotation_string_values: Vec<InternedString>,
}

/// An interned event name.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EventName {
    /// Id on the sequence.
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// Name.
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}

/// An interned argument name.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DebugAnnotationName {
    /// Id on the sequence.
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// Name.
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}

/// An interned string.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedString {
    /// Id on the sequence.
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// The bytes (UTF-8).
    #[prost(bytes = "vec", optional, tag = "2")]
    pub str: Option<Vec<u8>>,
}

/// An interned source location.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SourceLocation {
    /// Id on the sequence.
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// File.
    #[prost(string, optional, tag = "2")]
    pub file_name: Option<String>,
    /// Function.
    #[prost(string, optional, tag = "3")]
    pub function_name: Option<String>,
    /// Line (1-based).
    #[prost(uint32, optional, tag = "4")]
    pub line_number: Option<u32>,
}

/// Defaults for a sequence's packets.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacketDefaults {
    /// Clock of packets without `timestamp_clock_id`.
    #[prost(uint32, optional, tag = "58")]
    pub timestamp_clock_id: Option<u32>,
    /// Defaults of track events.
    #[prost(message, optional, tag = "11")]
    pub track_event_defaults: Option<TrackEventDefaults>,
}

/// Defaults for a sequence's track events.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackEventDefaults {
    /// Track of events without `track_uuid`.
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
}

/// Clock readings at one instant.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ClockSnapshot {
    /// The clocks.
    #[prost(message, repeated, tag = "1")]
    pub clocks: Vec<Clock>,
    /// The clock the trace is shown on (`BuiltinClock`).
    #[prost(int32, optional, tag = "2")]
    pub primary_trace_clock: Option<i32>,
}

/// One clock's reading.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Clock {
    /// Builtin or sequence-scoped clock id.
    #[prost(uint32, optional, tag = "1")]
    pub clock_id: Option<u32>,
    /// Its value.
    #[prost(uint64, optional, tag = "2")]
    pub timestamp: Option<u64>,
    /// Later timestamps on this clock are deltas from the previous one on the sequence.
    #[prost(bool, optional, tag = "3")]
    pub is_incremental: Option<bool>,
}
