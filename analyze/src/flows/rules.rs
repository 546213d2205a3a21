//! Flow construction (seed 002 §3): the program-dependence graph's events — interval enters
//! and exits, sends, receives, marks and counter samples of every thread — walked in time
//! order, which is a topological order of its happened-before edges (a receive is never
//! taken before its send: a receive stamped earlier, a clock-sync violation, is moved to its
//! send's time).
//!
//! * *Communication-pair rule*: a receive joins the flow its message was sent in.
//! * *Message-switch rule*, per thread (analysis.md §6 WP4): a thread stays in its flow from
//!   event to event unless an event has a second predecessor — the receive that completes a
//!   message, or the later event of a mapping directive — where its local edge is removed
//!   and the thread switches to that predecessor's flow. A receive from a sender that was
//!   not recorded leaves the thread in no flow.
//! * *Start events* open a new flow on their thread: the enters of `sensor:NAME`, the marks
//!   of `mark:NAME`, and the sends of `messages-from:PROGRAM` that no message caused. A
//!   thread is *caused* in a flow it entered by receiving a call or a free-form message, by
//!   a directive or by a start event; it is not in a flow it started by a send of its own (a
//!   second send is a second request, and the reply to its own request does not change
//!   that: a client's next request is a new flow), nor in no flow. A reply keeps a thread
//!   as caused as it was when it entered the reply's flow (a front server that called a back
//!   end still answers its own caller in the same flow). With no start given, every
//!   program's uncaused sends start flows.
//! * *Directives* (`--join A=B`, §3.2) are inserted first and act as inter-process edges: a
//!   counter sample of `B` switches its thread to the flow of the earliest unconsumed sample
//!   of `A` with the same value in the same process.
//!
//! Φᵢ is then what the walk attributes to flow i: its *segments* (stretches of a thread in
//! one flow) and, per call path, the first time the flow entered it, the time it spent with
//! that path innermost and the bytes it sent there. The wait inside a receive that switches
//! flows belongs to neither (the thread was idle between requests).

use super::model::{Events, Interval, Rules, Start};
use super::paths::{PathId, PathTable};
use crate::hash::FxHashMap;
use crate::{Error, Result};
use p5_tracedb::domain::Direction;
use std::collections::{HashSet, VecDeque};

/// No flow.
pub const NO_FLOW: u32 = u32::MAX;
const NO_STAT: u32 = u32::MAX;

/// One flow.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Flow {
    /// 1-based id, in start order.
    pub id: u32,
    /// What started it: `sensor:NAME`, `mark:NAME` or `message:ID`.
    pub start: String,
    /// Thread of the start event.
    pub thread: i64,
    /// The start event's time.
    pub t_start: i64,
    /// Its last event's time.
    pub t_end: i64,
    /// Events attributed to it.
    pub events: u64,
    /// Messages sent in it.
    pub messages: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// A stretch of one thread in one flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Segment {
    /// Flow index (id − 1).
    pub flow: u32,
    /// Thread.
    pub thread: i64,
    /// Its first event.
    pub t_start: i64,
    /// Its last event.
    pub t_end: i64,
}

/// What one flow did on one call path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathStat {
    /// Flow index (id − 1).
    pub flow: u32,
    /// The path.
    pub path: PathId,
    /// First time the flow was on it.
    pub first_t: i64,
    /// Time with it innermost, ns.
    pub time_ns: i64,
    /// Bytes sent with it innermost.
    pub bytes: i64,
}

/// The flows of a session.
#[derive(Debug, Clone, Default)]
pub struct Flows {
    /// Flows, by id.
    pub flows: Vec<Flow>,
    /// Segments, by flow and start.
    pub segments: Vec<Segment>,
    /// Path statistics, by flow and path.
    pub paths: Vec<PathStat>,
    /// Events walked (enters and exits, sends, receives, marks, counter samples).
    pub events: u64,
    /// Events in no flow.
    pub outside: u64,
    /// Directive targets that found no earlier event to join.
    pub unjoined: u64,
}

impl Flows {
    /// The path statistics of flow index `f`.
    pub fn paths_of(&self, f: u32) -> &[PathStat] {
        let lo = self.paths.partition_point(|p| p.flow < f);
        let hi = self.paths.partition_point(|p| p.flow <= f);
        &self.paths[lo..hi]
    }
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    path: PathId,
    t_end: i64,
    stat: u32,
}

#[derive(Debug, Clone)]
struct ThreadState {
    id: i64,
    process: i64,
    root: PathId,
    starts_messages: bool,
    flow: u32,
    caused: bool,
    last_t: i64,
    seg_start: i64,
    seg_last: i64,
    stack: Vec<Frame>,
}

// Event ranks at equal times: a send before the receive of the same instant.
const SEND: u64 = 0;
const ENTER: u64 = 1;
const MARK: u64 = 2;
const COUNTER: u64 = 3;
const RECV: u64 = 4;

#[derive(Debug, Clone, Copy)]
struct Ev {
    t: i64,
    key: u64,
    thread: u32,
}

/// The rules resolved against a session's sensors and programs.
struct Resolved {
    start_sensors: FxHashMap<i64, String>,
    start_marks: FxHashMap<i64, String>,
    programs: Option<HashSet<String>>,
    join_from: FxHashMap<i64, Vec<u32>>,
    join_to: FxHashMap<i64, Vec<u32>>,
}

fn resolve(ev: &Events, rules: &Rules) -> Result<Resolved> {
    let mut r = Resolved {
        start_sensors: FxHashMap::default(),
        start_marks: FxHashMap::default(),
        programs: None,
        join_from: FxHashMap::default(),
        join_to: FxHashMap::default(),
    };
    let sensors = |name: &str, what: &str| -> Result<Vec<i64>> {
        let ids = ev.sensors_named(name);
        if ids.is_empty() {
            return Err(Error::Usage(format!(
                "{what} {name:?}: no sensor of that name in session {:?}",
                ev.session
            )));
        }
        Ok(ids)
    };
    for s in &rules.starts {
        match s {
            Start::Sensor(n) => {
                for id in sensors(n, "--start sensor:")? {
                    r.start_sensors.insert(id, s.to_string());
                }
            }
            Start::Mark(n) => {
                for id in sensors(n, "--start mark:")? {
                    r.start_marks.insert(id, s.to_string());
                }
            }
            Start::MessagesFrom(p) => {
                if !ev.threads.iter().any(|t| &t.program == p) {
                    let mut all: Vec<&str> =
                        ev.threads.iter().map(|t| t.program.as_str()).collect();
                    all.sort_unstable();
                    all.dedup();
                    return Err(Error::Usage(format!(
                        "--start messages-from:{p}: no such program in session {:?} (programs: {})",
                        ev.session,
                        all.join(", ")
                    )));
                }
                r.programs
                    .get_or_insert_with(HashSet::new)
                    .insert(p.clone());
            }
        }
    }
    if rules.starts.is_empty() {
        r.programs = Some(ev.threads.iter().map(|t| t.program.clone()).collect());
    }
    for (d, j) in rules.joins.iter().enumerate() {
        for id in sensors(&j.from, "--join")? {
            r.join_from.entry(id).or_default().push(d as u32);
        }
        for id in sensors(&j.to, "--join")? {
            r.join_to.entry(id).or_default().push(d as u32);
        }
    }
    Ok(r)
}

struct Builder<'a> {
    ev: &'a Events,
    rules: &'a Resolved,
    paths: &'a mut PathTable,
    intervals: Vec<Interval>,
    names: FxHashMap<i64, u32>,
    threads: Vec<ThreadState>,
    flows: Vec<Flow>,
    segments: Vec<Segment>,
    stats: Vec<PathStat>,
    stat_index: FxHashMap<u64, u32>,
    msg_flow: Vec<u32>,
    /// Whether each thread was caused when it entered each flow, by `thread << 32 | flow`.
    entered: FxHashMap<u64, bool>,
    pending: FxHashMap<(u32, i64, i64), VecDeque<u32>>,
    outside: u64,
    unjoined: u64,
}

fn thread_state(id: i64, process: i64, root: PathId, starts_messages: bool) -> ThreadState {
    ThreadState {
        id,
        process,
        root,
        starts_messages,
        flow: NO_FLOW,
        caused: false,
        last_t: i64::MIN,
        seg_start: 0,
        seg_last: 0,
        stack: Vec::new(),
    }
}

impl<'a> Builder<'a> {
    fn new(ev: &'a Events, rules: &'a Resolved, paths: &'a mut PathTable) -> Self {
        let threads = ev
            .threads
            .iter()
            .map(|t| {
                let starts = rules
                    .programs
                    .as_ref()
                    .is_some_and(|p| p.contains(&t.program));
                thread_state(t.id, t.process, paths.program(&t.program), starts)
            })
            .collect();
        let mut intervals = ev.intervals.clone();
        intervals.sort_unstable_by_key(|i| (i.thread, i.t_start, i.depth));
        let names = ev
            .sensors
            .iter()
            .map(|s| (s.id, paths.name(&s.name)))
            .collect();
        Builder {
            ev,
            rules,
            paths,
            intervals,
            names,
            threads,
            flows: Vec::new(),
            segments: Vec::new(),
            stats: Vec::new(),
            stat_index: FxHashMap::default(),
            msg_flow: vec![NO_FLOW; ev.messages.len()],
            entered: FxHashMap::default(),
            pending: FxHashMap::default(),
            outside: 0,
            unjoined: 0,
        }
    }

    /// Every event, in the order of the walk.
    fn events(&mut self) -> Vec<Ev> {
        let mut ix: FxHashMap<i64, u32> = FxHashMap::default();
        for (i, t) in self.threads.iter().enumerate() {
            ix.insert(t.id, i as u32);
        }
        let mut thread = |id: i64, b: &mut Self| -> u32 {
            *ix.entry(id).or_insert_with(|| {
                let root = b.paths.program("?");
                b.threads.push(thread_state(id, -1, root, false));
                b.threads.len() as u32 - 1
            })
        };
        let ev = self.ev;
        let mut evs: Vec<Ev> = Vec::with_capacity(ev.count() as usize);
        let key = |rank: u64, i: usize| (rank << 40) | i as u64;
        for i in 0..self.intervals.len() {
            let iv = self.intervals[i];
            let thread = thread(iv.thread, self);
            evs.push(Ev {
                t: iv.t_start,
                key: key(ENTER, i),
                thread,
            });
        }
        for (i, m) in ev.messages.iter().enumerate() {
            if let Some((th, t)) = m.send {
                let thread = thread(th, self);
                evs.push(Ev {
                    t,
                    key: key(SEND, i),
                    thread,
                });
            }
            if let Some((th, t)) = m.recv {
                let thread = thread(th, self);
                let t = m.send.map_or(t, |s| t.max(s.1));
                evs.push(Ev {
                    t,
                    key: key(RECV, i),
                    thread,
                });
            }
        }
        for (rank, list) in [(MARK, &ev.marks), (COUNTER, &ev.counters)] {
            for (i, m) in list.iter().enumerate() {
                let thread = thread(m.thread, self);
                evs.push(Ev {
                    t: m.t,
                    key: key(rank, i),
                    thread,
                });
            }
        }
        evs.sort_unstable_by_key(|e| (e.t, e.key));
        evs
    }

    fn stat(&mut self, flow: u32, path: PathId, t: i64) -> u32 {
        if flow == NO_FLOW {
            return NO_STAT;
        }
        let key = (u64::from(flow) << 32) | u64::from(path);
        let next = self.stats.len() as u32;
        let i = *self.stat_index.entry(key).or_insert(next);
        if i == next {
            self.stats.push(PathStat {
                flow,
                path,
                first_t: t,
                time_ns: 0,
                bytes: 0,
            });
        }
        i
    }

    /// Time up to `t` goes to the innermost path of the thread's flow.
    fn account(&mut self, th: usize, t: i64) {
        let s = &mut self.threads[th];
        if t > s.last_t {
            if let Some(top) = s.stack.last()
                && top.stat != NO_STAT
                && s.last_t != i64::MIN
            {
                self.stats[top.stat as usize].time_ns += t - s.last_t;
            }
            s.last_t = t;
        }
    }

    /// One event of the thread at `t`, in its current flow.
    fn event(&mut self, th: usize, t: i64) {
        let s = &mut self.threads[th];
        if s.flow == NO_FLOW {
            self.outside += 1;
            return;
        }
        s.seg_last = s.seg_last.max(t);
        let f = &mut self.flows[s.flow as usize];
        f.events += 1;
        f.t_end = f.t_end.max(t);
    }

    /// Exits of the thread's open calls that end by `t`.
    fn exits_until(&mut self, th: usize, t: i64) {
        while let Some(top) = self.threads[th].stack.last().copied() {
            if top.t_end > t {
                break;
            }
            self.account(th, top.t_end);
            self.threads[th].stack.pop();
            self.event(th, top.t_end);
        }
    }

    fn close_segment(&mut self, th: usize) {
        let s = &self.threads[th];
        if s.flow != NO_FLOW {
            self.segments.push(Segment {
                flow: s.flow,
                thread: s.id,
                t_start: s.seg_start,
                t_end: s.seg_last,
            });
        }
    }

    /// The thread continues in `flow` from `t`; its open calls are on their paths in it.
    fn switch(&mut self, th: usize, flow: u32, t: i64) {
        if self.threads[th].flow == flow {
            return;
        }
        self.close_segment(th);
        let s = &mut self.threads[th];
        s.flow = flow;
        s.seg_start = t;
        s.seg_last = t;
        let mut stack = std::mem::take(&mut s.stack);
        for f in &mut stack {
            f.stat = self.stat(flow, f.path, t);
        }
        self.threads[th].stack = stack;
    }

    /// Whether the thread's sends are caused from now on (and when it comes back to this
    /// flow on a reply).
    fn set_caused(&mut self, th: usize, caused: bool) {
        let s = &mut self.threads[th];
        s.caused = caused;
        if s.flow != NO_FLOW {
            self.entered
                .insert(((th as u64) << 32) | u64::from(s.flow), caused);
        }
    }

    fn start(&mut self, th: usize, t: i64, start: String) {
        let id = self.flows.len() as u32;
        self.flows.push(Flow {
            id: id + 1,
            start,
            thread: self.threads[th].id,
            t_start: t,
            t_end: t,
            events: 0,
            messages: 0,
            bytes: 0,
        });
        self.switch(th, id, t);
        self.set_caused(th, true);
    }

    fn enter(&mut self, th: usize, t: i64, i: usize) {
        let iv = self.intervals[i];
        self.account(th, t);
        if let Some(s) = self.rules.start_sensors.get(&iv.sensor) {
            self.start(th, t, s.clone());
        }
        let name = match self.names.get(&iv.sensor) {
            Some(&n) => n,
            None => self.paths.name(&format!("{:#018x}", iv.sensor as u64)),
        };
        let s = &self.threads[th];
        let parent = s.stack.last().map_or(s.root, |f| f.path);
        let flow = s.flow;
        let path = self.paths.child(parent, name);
        let stat = self.stat(flow, path, t);
        self.threads[th].stack.push(Frame {
            path,
            t_end: iv.t_end.max(iv.t_start),
            stat,
        });
        self.event(th, t);
    }

    fn send(&mut self, th: usize, t: i64, i: usize) {
        let m = self.ev.messages[i];
        self.account(th, t);
        let s = &self.threads[th];
        if s.starts_messages && !(s.flow != NO_FLOW && s.caused) {
            self.start(th, t, format!("message:{}", m.id));
            self.set_caused(th, false);
        }
        let s = &self.threads[th];
        self.msg_flow[i] = s.flow;
        if s.flow != NO_FLOW {
            let bytes = m.bytes.max(0);
            let f = &mut self.flows[s.flow as usize];
            f.messages += 1;
            f.bytes += bytes as u64;
            if let Some(top) = s.stack.last()
                && top.stat != NO_STAT
            {
                self.stats[top.stat as usize].bytes += bytes;
            }
        }
        self.event(th, t);
    }

    fn recv(&mut self, th: usize, t: i64, i: usize) {
        let flow = self.msg_flow[i];
        if flow == self.threads[th].flow {
            self.account(th, t);
        } else {
            // Waiting for another flow's message: idle, in neither.
            let s = &mut self.threads[th];
            s.last_t = s.last_t.max(t);
        }
        let before = self.threads[th].flow;
        self.switch(th, flow, t);
        if self.ev.messages[i].direction != Some(Direction::Return) {
            self.set_caused(th, true);
        } else if flow != before {
            // Back to a flow on a reply: as caused as the thread was when it entered it.
            let key = ((th as u64) << 32) | u64::from(flow);
            self.threads[th].caused = self.entered.get(&key).copied().unwrap_or(false);
        }
        self.event(th, t);
    }

    fn mark(&mut self, th: usize, t: i64, i: usize) {
        self.account(th, t);
        if let Some(s) = self.rules.start_marks.get(&self.ev.marks[i].sensor) {
            self.start(th, t, s.clone());
        }
        self.event(th, t);
    }

    fn counter(&mut self, th: usize, t: i64, i: usize) {
        let c = self.ev.counters[i];
        self.account(th, t);
        let process = self.threads[th].process;
        let rules = self.rules;
        if let Some(ds) = rules.join_to.get(&c.sensor) {
            for &d in ds {
                let q = self.pending.get_mut(&(d, process, c.value));
                match q.and_then(VecDeque::pop_front) {
                    Some(f) => {
                        self.switch(th, f, t);
                        self.set_caused(th, true);
                    }
                    None => self.unjoined += 1,
                }
            }
        }
        let flow = self.threads[th].flow;
        if let Some(ds) = rules.join_from.get(&c.sensor)
            && flow != NO_FLOW
        {
            for &d in ds {
                let q = self.pending.entry((d, process, c.value)).or_default();
                q.push_back(flow);
            }
        }
        self.event(th, t);
    }
}

/// Builds the flows of `ev` under `rules`, interning call paths in `paths`.
pub fn build(ev: &Events, rules: &Rules, paths: &mut PathTable) -> Result<Flows> {
    let r = resolve(ev, rules)?;
    let mut b = Builder::new(ev, &r, paths);
    let evs = b.events();
    for e in &evs {
        let th = e.thread as usize;
        let i = (e.key & ((1 << 40) - 1)) as usize;
        b.exits_until(th, e.t);
        match e.key >> 40 {
            ENTER => b.enter(th, e.t, i),
            SEND => b.send(th, e.t, i),
            RECV => b.recv(th, e.t, i),
            MARK => b.mark(th, e.t, i),
            _ => b.counter(th, e.t, i),
        }
    }
    for th in 0..b.threads.len() {
        b.exits_until(th, i64::MAX);
        b.close_segment(th);
    }
    let events = (evs.len() + b.intervals.len()) as u64;
    let Builder {
        flows,
        mut segments,
        stats: mut paths,
        outside,
        unjoined,
        ..
    } = b;
    segments.sort_unstable_by_key(|s| (s.flow, s.t_start, s.thread));
    paths.sort_unstable_by_key(|s| (s.flow, s.path));
    Ok(Flows {
        flows,
        segments,
        paths,
        events,
        outside,
        unjoined,
    })
}

/// Every call path the session's threads were on, with its first time, whatever the flows
/// (a whole session as one side of a diff). A thread's stack follows the intervals' depths.
pub fn session_coverage(ev: &Events, paths: &mut PathTable) -> super::rootcause::Coverage {
    let programs: FxHashMap<i64, &str> = ev
        .threads
        .iter()
        .map(|t| (t.id, t.program.as_str()))
        .collect();
    let names: FxHashMap<i64, &str> = ev.sensor_names();
    let mut order: Vec<&Interval> = ev.intervals.iter().collect();
    order.sort_unstable_by_key(|i| (i.thread, i.t_start, i.depth));
    let mut out = super::rootcause::Coverage::default();
    let mut stack: Vec<PathId> = Vec::new();
    let mut thread = None;
    for iv in order {
        if thread != Some(iv.thread) {
            thread = Some(iv.thread);
            stack.clear();
            stack.push(paths.program(programs.get(&iv.thread).copied().unwrap_or("?")));
        }
        stack.truncate(
            usize::try_from(iv.depth)
                .unwrap_or(0)
                .saturating_add(1)
                .max(1),
        );
        let name = match names.get(&iv.sensor) {
            Some(n) => paths.name(n),
            None => paths.name(&format!("{:#018x}", iv.sensor as u64)),
        };
        let parent = *stack.last().unwrap_or(&super::paths::NO_PATH);
        let p = paths.child(parent, name);
        let e = out.entry(p).or_insert(iv.t_start);
        *e = (*e).min(iv.t_start);
        stack.push(p);
    }
    out
}

/// The paths of flow index `f` with their first times.
pub fn flow_coverage(flows: &Flows, f: u32) -> super::rootcause::Coverage {
    flows
        .paths_of(f)
        .iter()
        .map(|p| (p.path, p.first_t))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::model::{Msg, SensorInfo, ThreadInfo};

    /// client → front → back, three requests, no start given: three flows, whatever the
    /// front's reply from the back end.
    #[test]
    fn a_cascade_is_one_flow_per_request_under_the_default_start() {
        let mut ev = Events::default();
        for (id, p) in [(1, "client"), (2, "front"), (3, "back")] {
            ev.threads.push(ThreadInfo {
                id,
                process: id,
                program: p.into(),
            });
        }
        ev.sensors.push(SensorInfo {
            id: 9,
            name: "handle".into(),
            function: None,
            hex: "0x9".into(),
        });
        let mut id = 0;
        for r in 0..3i64 {
            let t = r * 100;
            for (from, to, s, e, d) in [
                (1, 2, t, t + 5, Direction::Call),
                (2, 3, t + 10, t + 15, Direction::Call),
                (3, 2, t + 20, t + 25, Direction::Return),
                (2, 1, t + 30, t + 35, Direction::Return),
            ] {
                id += 1;
                ev.messages.push(Msg {
                    id,
                    bytes: 10,
                    send: Some((from, s)),
                    recv: Some((to, e)),
                    direction: Some(d),
                });
            }
            ev.intervals.push(Interval {
                thread: 2,
                sensor: 9,
                t_start: t + 6,
                t_end: t + 31,
                depth: 0,
            });
        }
        let mut paths = PathTable::default();
        let f = build(&ev, &Rules::default(), &mut paths).unwrap();
        assert_eq!(f.flows.len(), 3, "{:?}", f.flows);
        assert!(f.flows.iter().all(|x| x.messages == 4 && x.bytes == 40));
        assert_eq!(f.segments.len(), 9);
        // Each flow's front segment has `handle` on it, with its time.
        for k in 0..3 {
            let p = f.paths_of(k);
            assert_eq!(p.len(), 1);
            assert_eq!(paths.render(p[0].path), "front: handle");
            // 6..10 and 25..30 (the wait for the back end's reply is in the flow).
            assert_eq!(p[0].time_ns, 25);
        }
        // A sensor start: each enter of `handle` starts a flow on the front.
        let rules = Rules {
            starts: vec![Start::Sensor("handle".into())],
            joins: vec![],
        };
        let f = build(&ev, &rules, &mut paths).unwrap();
        assert_eq!(f.flows.len(), 3);
        assert!(f.flows.iter().all(|x| x.start == "sensor:handle"));
        // The first request was sent before any start; each later one is sent in the flow
        // the client's last reply came back in (message switch), until `handle` starts the
        // next.
        let msgs: Vec<u64> = f.flows.iter().map(|x| x.messages).collect();
        assert_eq!(msgs, [4, 4, 3]);
    }
}
