//! The export's walk: the trace-wide clock snapshot and the process and thread descriptors
//! first, then track after track, each read by one query in time order on a sequence of its
//! own: per thread its calls, states (with the message flows), on-CPU stretches and marks;
//! per host the CPUs of unrecorded threads and the interrupts; then every metric.

use crate::error::{Context, Error};
use crate::nest::{Nest, Nesting};
use crate::proto::{
    CLOCK_MONOTONIC, CLOCK_REALTIME, Clock, ClockSnapshot, EventType, SourceLocation, TracePacket,
    TrackDescriptor, TrackEvent,
};
use crate::sequence::{InternName, Sequence, Table};
use crate::sink::Sink;
use crate::tracks::{self, Thread, Tree};
use crate::{Progress, Summary};
use p5_tracedb::read;
use p5_tracedb::stream::Stream;

/// The trace-wide sequence: clock snapshot and descriptors.
const GLOBAL: u32 = 1;
/// Progress is reported every this many events within a track.
const EVERY: u64 = 1 << 16;

/// The session's ids and time base.
#[derive(Debug, Clone, Copy)]
pub struct Meta {
    /// Session id.
    pub sid: i64,
    /// CLOCK_MONOTONIC of the base (session time 0).
    pub base_mono_ns: i64,
    /// Wall clock of the base.
    pub base_wall_ns: i64,
}

/// The rows of the small tables the tree is built from.
pub type Rows = (
    Vec<read::Host>,
    Vec<read::Process>,
    Vec<read::Thread>,
    Vec<read::Sensor>,
);

/// One export in progress.
pub struct Exporter<'a> {
    pub(crate) stream: &'a Stream,
    pub(crate) sink: Sink,
    pub(crate) tree: Tree,
    pub(crate) meta: Meta,
    pub(crate) summary: &'a mut Summary,
    progress: &'a mut dyn FnMut(&Progress),
    state: Progress,
    /// Ends of slices to close, reused.
    pub(crate) closed: Vec<u64>,
}

impl Exporter<'_> {
    /// Writes the whole trace into `sink`.
    pub fn run(
        stream: &Stream,
        sink: Sink,
        meta: Meta,
        (hosts, processes, threads, sensors): Rows,
        summary: &mut Summary,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<(), Error> {
        let (tree, descriptors) = Tree::new(hosts, processes, threads, sensors);
        summary.processes = tree.processes.len() as u64;
        summary.threads = tree.threads.len() as u64;
        let total = 4 * tree.threads.len() as u64 + 2 * tree.hosts.len() as u64 + 1;
        let mut x = Exporter {
            stream,
            sink,
            tree,
            meta,
            summary,
            progress,
            state: Progress {
                total,
                ..Progress::default()
            },
            closed: Vec::new(),
        };
        x.clock_snapshot()?;
        for d in descriptors {
            x.describe(d)?;
        }
        let threads = x.tree.threads.clone();
        for th in &threads {
            x.intervals(th)?;
            x.states(th)?;
            x.sched(th)?;
            x.marks(th)?;
        }
        let hosts: Vec<i64> = x.tree.hosts.iter().map(|h| h.id).collect();
        for h in hosts {
            x.host_sched(h)?;
            x.irqs(h)?;
        }
        x.metrics()?;
        x.summary.packets = x.sink.packets;
        x.summary.raw_bytes = x.sink.raw_bytes;
        x.sink.finish()
    }

    /// Session time `t` on CLOCK_MONOTONIC.
    pub(crate) fn at(&self, t: i64) -> u64 {
        self.meta.base_mono_ns.saturating_add(t).max(0) as u64
    }

    /// The session's clocks: CLOCK_MONOTONIC is the trace's, tied to the wall clock.
    fn clock_snapshot(&mut self) -> Result<(), Error> {
        let at = |id, t: i64| Clock {
            clock_id: Some(id),
            timestamp: Some(t.max(0) as u64),
            is_incremental: None,
        };
        self.sink.packet(&TracePacket {
            trusted_packet_sequence_id: Some(GLOBAL),
            clock_snapshot: Some(ClockSnapshot {
                clocks: vec![
                    at(CLOCK_MONOTONIC, self.meta.base_mono_ns),
                    at(CLOCK_REALTIME, self.meta.base_wall_ns),
                ],
                primary_trace_clock: Some(CLOCK_MONOTONIC as i32),
            }),
            ..Default::default()
        })
    }

    /// Writes a track descriptor.
    pub(crate) fn describe(&mut self, d: TrackDescriptor) -> Result<(), Error> {
        self.summary.tracks += 1;
        self.sink.packet(&TracePacket {
            trusted_packet_sequence_id: Some(GLOBAL),
            track_descriptor: Some(d),
            ..Default::default()
        })
    }

    /// A new child track of `parent`, described now.
    pub(crate) fn child(&mut self, parent: u64, name: String, rank: i32) -> Result<u64, Error> {
        let uuid = self.tree.uuid();
        self.describe(tracks::child(uuid, parent, name, rank))?;
        Ok(uuid)
    }

    /// A host's track, described on first use.
    pub(crate) fn host_track(&mut self, host: i64) -> Result<u64, Error> {
        let name = self.tree.host_name(host);
        let (uuid, fresh) = match self.tree.hosts.iter_mut().find(|h| h.id == host) {
            Some(h) => (h.uuid, !std::mem::replace(&mut h.described, true)),
            None => {
                let uuid = self.tree.uuid();
                let described = true;
                self.tree.hosts.push(tracks::Host {
                    id: host,
                    uuid,
                    name: name.clone(),
                    described,
                });
                (uuid, true)
            }
        };
        if fresh {
            self.describe(TrackDescriptor {
                uuid: Some(uuid),
                // `host N` already when the database names none.
                name: Some(if name.starts_with("host ") {
                    name
                } else {
                    format!("host {name}")
                }),
                ..Default::default()
            })?;
        }
        Ok(uuid)
    }

    /// Reports that a query starts.
    pub(crate) fn step(&mut self, what: impl FnOnce() -> String) {
        self.state.what = what();
        (self.progress)(&self.state);
        self.state.done += 1;
    }

    /// Counts an event; reports every [`EVERY`].
    pub(crate) fn tick(&mut self) {
        self.state.events += 1;
        self.summary.events += 1;
        if self.state.events.is_multiple_of(EVERY) {
            (self.progress)(&self.state);
        }
    }

    /// Writes an event on `seq` and counts it.
    pub(crate) fn event(
        &mut self,
        seq: &mut Sequence,
        t: u64,
        ev: TrackEvent,
    ) -> Result<(), Error> {
        self.tick();
        seq.event(&mut self.sink, t, ev)
    }

    /// Closes the slices in `self.closed` on `seq`.
    pub(crate) fn close(&mut self, seq: &mut Sequence) -> Result<(), Error> {
        let mut closed = std::mem::take(&mut self.closed);
        for &t in &closed {
            self.event(seq, t, end())?;
        }
        closed.clear();
        self.closed = closed;
        Ok(())
    }

    /// Adds a finished sequence's counts.
    pub(crate) fn done(&mut self, seq: &Sequence, nest: &Nest) {
        self.summary.moved += seq.moved;
        self.summary.clipped += nest.clipped;
    }

    /// A thread's function calls, on its own track. Calls of equal start come from the
    /// database in table order (inner first, as merge writes them at their exits): they are
    /// put outer first (by depth) before they are opened.
    fn intervals(&mut self, th: &Thread) -> Result<(), Error> {
        let (sid, id) = (self.meta.sid, th.id);
        self.step(|| format!("calls of thread {id}"));
        let what = || format!("the calls of thread {id}");
        let mut rows = self.stream.intervals(sid, id).reading(what)?;
        let mut seq = Sequence::new(self.tree.sequence(), th.uuid);
        let mut nest = Nest::default();
        // Calls starting at the same instant: (depth, end, sensor).
        let mut group: Vec<(i64, u64, i64)> = Vec::new();
        let mut group_start = 0;
        loop {
            let row = match rows.next().reading(what)? {
                Some(r) => {
                    let s = self.at(r.i64(0).reading(what)?);
                    let e = self.at(r.i64(1).reading(what)?);
                    Some((s, e, r.i64(2).reading(what)?, r.i64(3).reading(what)?))
                }
                None => None,
            };
            if row.is_none_or(|(s, ..)| s != group_start) && !group.is_empty() {
                group.sort_by_key(|&(depth, ..)| depth);
                for (depth, e, sensor) in group.drain(..) {
                    nest.open(group_start, e, Nesting::Depth(depth), &mut self.closed);
                    self.close(&mut seq)?;
                    let ev = self.call(&mut seq, sensor, EventType::SliceBegin);
                    self.event(&mut seq, group_start, ev)?;
                    self.summary.intervals += 1;
                }
            }
            let Some((s, e, sensor, depth)) = row else {
                break;
            };
            group_start = s;
            group.push((depth, e, sensor));
        }
        nest.close_all(&mut self.closed);
        self.close(&mut seq)?;
        self.done(&seq, &nest);
        Ok(())
    }

    /// A begin or instant event named by `sensor`, with its source place.
    fn call(&self, seq: &mut Sequence, sensor: i64, ty: EventType) -> TrackEvent {
        let s = self.tree.sensors.get(&sensor);
        let name = seq.intern(Table::EventName, sensor as u64, || {
            InternName::Text(
                s.map_or_else(|| format!("{:#018x}", sensor as u64), |s| s.name.clone()),
            )
        });
        let place = s.filter(|s| s.file.is_some() || s.function.is_some());
        let loc = place.map(|s| {
            seq.intern(Table::SourceLocation, sensor as u64, || {
                InternName::Location(SourceLocation {
                    iid: None,
                    file_name: s.file.clone().map(crate::sequence::bounded),
                    function_name: s.function.clone().map(crate::sequence::bounded),
                    line_number: s.line.and_then(|l| u32::try_from(l).ok()),
                })
            })
        });
        TrackEvent {
            r#type: Some(ty as i32),
            name_iid: Some(name),
            source_location_iid: loc,
            ..Default::default()
        }
    }

    /// A thread's on-CPU stretches, on its `on CPU` track.
    fn sched(&mut self, th: &Thread) -> Result<(), Error> {
        let (sid, id) = (self.meta.sid, th.id);
        self.step(|| format!("scheduling of thread {id}"));
        let what = || format!("the scheduling of thread {id}");
        let mut rows = self.stream.sched_of_thread(sid, id).reading(what)?;
        let mut track = None;
        let mut seq = Sequence::new(0, 0);
        let mut nest = Nest::default();
        while let Some(r) = rows.next().reading(what)? {
            let (s, e) = (
                self.at(r.i64(0).reading(what)?),
                self.at(r.i64(1).reading(what)?),
            );
            let cpu = r.i64(2).reading(what)?;
            if track.is_none() {
                let uuid = self.child(th.uuid, "on CPU".into(), 1)?;
                track = Some(uuid);
                seq = Sequence::new(self.tree.sequence(), uuid);
            }
            self.slice(
                &mut seq,
                &mut nest,
                (s, e),
                Nesting::Flat,
                cpu as u64,
                || format!("cpu {cpu}"),
            )?;
            self.summary.sched += 1;
        }
        nest.close_all(&mut self.closed);
        self.close(&mut seq)?;
        self.done(&seq, &nest);
        Ok(())
    }

    /// Opens a slice named by `key` (`name()` on its first use on `seq`).
    pub(crate) fn slice(
        &mut self,
        seq: &mut Sequence,
        nest: &mut Nest,
        (s, e): (u64, u64),
        how: Nesting,
        key: u64,
        name: impl FnOnce() -> String,
    ) -> Result<(), Error> {
        nest.open(s, e, how, &mut self.closed);
        self.close(seq)?;
        let iid = seq.intern(Table::EventName, key, || InternName::Text(name()));
        let ev = TrackEvent {
            r#type: Some(EventType::SliceBegin as i32),
            name_iid: Some(iid),
            ..Default::default()
        };
        self.event(seq, s, ev)
    }

    /// A thread's marks, instants on its `marks` track.
    fn marks(&mut self, th: &Thread) -> Result<(), Error> {
        let (sid, id) = (self.meta.sid, th.id);
        self.step(|| format!("marks of thread {id}"));
        let what = || format!("the marks of thread {id}");
        let mut rows = self.stream.marks(sid, id).reading(what)?;
        let mut seq = None;
        while let Some(r) = rows.next().reading(what)? {
            let (t, sensor) = (self.at(r.i64(0).reading(what)?), r.i64(1).reading(what)?);
            if seq.is_none() {
                let uuid = self.child(th.uuid, "marks".into(), 2)?;
                seq = Some(Sequence::new(self.tree.sequence(), uuid));
            }
            if let Some(seq) = seq.as_mut() {
                let ev = self.call(seq, sensor, EventType::Instant);
                self.event(seq, t, ev)?;
                self.summary.marks += 1;
            }
        }
        if let Some(seq) = seq {
            self.done(&seq, &Nest::default());
        }
        Ok(())
    }
}

/// A slice's end.
pub(crate) fn end() -> TrackEvent {
    TrackEvent {
        r#type: Some(EventType::SliceEnd as i32),
        ..Default::default()
    }
}
