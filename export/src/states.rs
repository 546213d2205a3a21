//! A thread's states, with the flows of the messages it sent and received.
//!
//! Four cursors are merged in time order: the thread's states (by start), the matched
//! messages it sent (by send start) and those it received (by the end of the receive that
//! completed them, or the start of the first receive for those never completed: a second
//! cursor, as that column has no index). A message's flow starts on the begin event of the state slice its send
//! started in (`[start, end)`, a zero-length slice holding its own instant) and ends on the
//! end event of the state slice its receive ended in (`(start, end]`), so Perfetto draws an
//! arrow from the `sending` slice to the `receiving` one. An end that no state slice of its
//! thread holds (a gap between states, a thread without states) gets an instant of its own,
//! `send` or `receive`, carrying the flow. The flow id is the message id; a message with one
//! end only has no flow (Perfetto cannot draw half an arrow; the summary counts them).

use crate::error::{Context, Error};
use crate::export::{Exporter, end};
use crate::proto::{DebugAnnotation, EventType, TrackEvent};
use crate::sequence::{InternName, Sequence, Table};
use crate::tracks::Thread;
use p5_tracedb::stream::Cursor;

/// Interning keys of the instants (state names use their index in the track's list).
const SEND_KEY: u64 = 1 << 32;
const RECEIVE_KEY: u64 = (1 << 32) + 1;
/// Argument-name keys.
const OP: u64 = 1;
const FD: u64 = 2;
const RESULT: u64 = 3;

/// Message ends `(id, time)` in time order, from one or more cursors each in time order,
/// with the next one read ahead.
struct Ends {
    parts: Vec<(Cursor, Option<(u64, u64)>)>,
    head: Option<(u64, u64)>,
}

impl Ends {
    fn new(rows: Vec<Cursor>, x: &Exporter, what: &dyn Fn() -> String) -> Result<Ends, Error> {
        let mut parts = Vec::new();
        for mut c in rows {
            let next = read(&mut c, x, what)?;
            parts.push((c, next));
        }
        let mut e = Ends { parts, head: None };
        e.head = e.earliest().map(|i| e.parts[i].1).unwrap_or(None);
        Ok(e)
    }

    /// The part whose next end is the earliest.
    fn earliest(&self) -> Option<usize> {
        (self.parts.iter().enumerate())
            .filter_map(|(i, (_, n))| n.map(|(id, t)| (t, id, i)))
            .min()
            .map(|(_, _, i)| i)
    }

    fn advance(&mut self, x: &Exporter, what: &dyn Fn() -> String) -> Result<(), Error> {
        if let Some(i) = self.earliest() {
            let (c, next) = &mut self.parts[i];
            *next = read(c, x, what)?;
        }
        self.head = self.earliest().map(|i| self.parts[i].1).unwrap_or(None);
        Ok(())
    }

    /// Takes the ends `(id, time)` with time `<= until` (or `< until` if not `inclusive`).
    fn take(
        &mut self,
        until: u64,
        inclusive: bool,
        x: &Exporter,
        what: &dyn Fn() -> String,
    ) -> Result<Vec<(u64, u64)>, Error> {
        let mut ends = Vec::new();
        while let Some((id, t)) = self.head {
            if t > until || (t == until && !inclusive) {
                break;
            }
            ends.push((id, t));
            self.advance(x, what)?;
        }
        Ok(ends)
    }
}

/// The names seen on one state track (few: the state and op names), by first use.
#[derive(Default)]
struct Names(Vec<String>);

impl Names {
    fn key(&mut self, s: &str) -> u64 {
        match self.0.iter().position(|n| n == s) {
            Some(i) => i as u64,
            None => {
                self.0.push(s.to_owned());
                (self.0.len() - 1) as u64
            }
        }
    }
}

/// The next `(id, time)` of a cursor.
fn read(
    c: &mut Cursor,
    x: &Exporter,
    what: &dyn Fn() -> String,
) -> Result<Option<(u64, u64)>, Error> {
    Ok(match c.next().reading(what)? {
        Some(r) => Some((
            r.i64(0).reading(what)? as u64,
            x.at(r.i64(1).reading(what)?),
        )),
        None => None,
    })
}

impl Exporter<'_> {
    /// A thread's states and its messages' flows, on its `states` track.
    pub(crate) fn states(&mut self, th: &Thread) -> Result<(), Error> {
        let (sid, id) = (self.meta.sid, th.id);
        self.step(|| format!("states of thread {id}"));
        let what = move || format!("the states and messages of thread {id}");
        let sent = vec![self.stream.sends(sid, id).reading(what)?];
        let mut sends = Ends::new(sent, self, &what)?;
        let received = vec![
            self.stream.receives(sid, id).reading(what)?,
            self.stream.partial_receives(sid, id).reading(what)?,
        ];
        let mut recvs = Ends::new(received, self, &what)?;
        let mut rows = self.stream.states(sid, id).reading(what)?;
        let mut seq: Option<Sequence> = None;
        let mut names = Names::default();
        while let Some(r) = rows.next().reading(what)? {
            let s = self.at(r.i64(0).reading(what)?);
            let e = self.at(r.i64(1).reading(what)?).max(s);
            let seq = match seq.as_mut() {
                Some(q) => q,
                None => seq.insert(self.state_track(th)?),
            };
            // Ends in the gap before this state.
            self.gap(seq, (&mut sends, &mut recvs), Some(s), &what)?;
            let state = r.text(2).reading(what)?.unwrap_or_default();
            let key = names.key(&state);
            let name = seq.intern(Table::EventName, key, || {
                InternName::Text(state.into_owned())
            });
            let mut args = Vec::new();
            if let Some(op) = r.text(3).reading(what)? {
                let key = names.key(&op);
                let v = seq.intern(Table::ArgString, key, || InternName::Text(op.into_owned()));
                args.push(DebugAnnotation {
                    name_iid: Some(arg(seq, OP, "op")),
                    string_value_iid: Some(v),
                    ..Default::default()
                });
                for (k, n, col) in [(FD, "fd", 4), (RESULT, "result", 5)] {
                    if let Some(v) = r.int(col).reading(what)? {
                        args.push(DebugAnnotation {
                            name_iid: Some(arg(seq, k, n)),
                            int_value: Some(v),
                            ..Default::default()
                        });
                    }
                }
            }
            let flow_ids: Vec<u64> = (sends.take(e, s == e, self, &what)?)
                .into_iter()
                .map(|(m, _)| m)
                .collect();
            self.summary.flows += flow_ids.len() as u64;
            let begin = TrackEvent {
                r#type: Some(EventType::SliceBegin as i32),
                name_iid: Some(name),
                debug_annotations: args,
                flow_ids,
                ..Default::default()
            };
            self.event(seq, s, begin)?;
            let terminating_flow_ids = (recvs.take(e, true, self, &what)?)
                .into_iter()
                .map(|(m, _)| m)
                .collect();
            let end = TrackEvent {
                terminating_flow_ids,
                ..end()
            };
            self.event(seq, e, end)?;
            self.summary.states += 1;
        }
        // Ends after the last state (or of a thread without states).
        if sends.head.is_some() || recvs.head.is_some() {
            let seq = match seq.as_mut() {
                Some(q) => q,
                None => seq.insert(self.state_track(th)?),
            };
            self.gap(seq, (&mut sends, &mut recvs), None, &what)?;
        }
        if let Some(seq) = seq {
            self.done(&seq, &crate::nest::Nest::default());
        }
        Ok(())
    }

    /// Instants for the ends before `before` (all if `None`), in time order, sends first.
    fn gap(
        &mut self,
        seq: &mut Sequence,
        (sends, recvs): (&mut Ends, &mut Ends),
        before: Option<u64>,
        what: &dyn Fn() -> String,
    ) -> Result<(), Error> {
        loop {
            let send_first = match (sends.head, recvs.head) {
                (Some((_, a)), Some((_, b))) => a <= b,
                (a, _) => a.is_some(),
            };
            let ends = if send_first { &mut *sends } else { &mut *recvs };
            let Some((m, t)) = ends.head else {
                return Ok(());
            };
            if before.is_some_and(|b| t >= b) {
                return Ok(());
            }
            ends.advance(self, what)?;
            self.flow_instant(seq, (m, send_first), t)?;
        }
    }

    /// The thread's `states` track (described now) and its sequence.
    fn state_track(&mut self, th: &Thread) -> Result<Sequence, Error> {
        let uuid = self.child(th.uuid, "states".into(), 0)?;
        Ok(Sequence::new(self.tree.sequence(), uuid))
    }

    /// An instant at `t`: `send` (the start of message `m`'s flow) or `receive` (its end).
    fn flow_instant(
        &mut self,
        seq: &mut Sequence,
        (m, send): (u64, bool),
        t: u64,
    ) -> Result<(), Error> {
        let (key, name) = if send {
            (SEND_KEY, "send")
        } else {
            (RECEIVE_KEY, "receive")
        };
        let iid = seq.intern(Table::EventName, key, || InternName::Text(name.into()));
        let mut ev = TrackEvent {
            r#type: Some(EventType::Instant as i32),
            name_iid: Some(iid),
            ..Default::default()
        };
        if send {
            ev.flow_ids.push(m);
            self.summary.flows += 1;
        } else {
            ev.terminating_flow_ids.push(m);
        }
        self.summary.flow_instants += 1;
        self.event(seq, t, ev)
    }
}

/// The iid of argument name `name` (key `key`) on `seq`.
fn arg(seq: &mut Sequence, key: u64, name: &str) -> u64 {
    seq.intern(Table::ArgName, key, || InternName::Text(name.into()))
}
