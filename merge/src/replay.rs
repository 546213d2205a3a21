//! The second pass: every event again, in store order, on the session base — function-call
//! intervals ([`crate::intervals`]), thread states ([`crate::states`]), marks, metric
//! samples, scheduling intervals from `sched_switch`, IRQs — and the overview of every lane
//! ([`crate::overview`]), written as they come.
//!
//! Late calls (see [`crate::intervals`]): the threads of processes with throttled sensors hold
//! back their last closed calls — `LATE_HOLD_ALL` shared by them, at least `LATE_HOLD_MIN` each
//! — so a long call recorded at its exit can take the calls inside it.
//!
//! Scheduling: some kernels leave out a switch from the idle task into a followed thread, so a
//! stretch on a CPU whose switch-in is missing starts at the thread's last wakeup onto that
//! CPU, or at the CPU's last recorded switch if later (`woken_onto`, diagnostic
//! `sched-from-wakeup`). Such a start is the wakeup, so it includes any wait on the run queue
//! behind a thread nobody follows.

use crate::error::Error;
use crate::intervals::{Interval, Nesting};
use crate::inventory::Inventory;
use crate::load::Replay;
use crate::overview::{Category, LANE_IRQ, LANE_SCHED, LANE_STATES, Overview, Owner};
use crate::progress::Progress;
use crate::session::{Diagnostic, Plan};
use crate::states::{StateSpan, Timeline};
use p5_logserver::reader::SessionDir;
use p5_tracedb::{Writer, schema};
use p5_wire::{Event, StreamKind};
use std::collections::{BTreeMap, HashMap};

/// At most this many threads' wakeups are remembered (cleared when full: memory stays
/// bounded whatever the monitor sent).
const WOKEN_MAX: usize = 1 << 16;

/// Closed calls the threads of processes with throttled sensors hold back in all, so that a
/// late call (recorded at its exit) can still wrap them (`intervals`): 2^19 calls, ≈ 32 MiB,
/// shared evenly, each thread holding at least [`LATE_HOLD_MIN`].
const LATE_HOLD_ALL: usize = 1 << 19;
/// The least a thread holds back.
const LATE_HOLD_MIN: usize = 4096;

/// Per-stream state of the second pass.
#[derive(Debug, Default)]
struct StreamState {
    nesting: Nesting,
    timeline: Timeline,
}

/// Rows of the second pass, written through a [`Writer`], with the overview they feed.
struct Rows<'a> {
    w: &'a mut Writer,
    sid: i64,
    next_interval: i64,
    overview: Overview,
    /// Per (host, cpu): the thread on the CPU and since when.
    on_cpu: BTreeMap<(usize, u32), (u32, i64)>,
    /// Per (host, thread): its last wakeup not yet followed by a switch into it (time, the
    /// CPU it was woken onto).
    woken: HashMap<(usize, u32), (i64, u32)>,
    /// Per (host, cpu): when a switch was last recorded there.
    cpu_last: HashMap<(usize, u32), i64>,
    intervals: Vec<Interval>,
    states: Vec<StateSpan>,
    wakeups: u64,
    /// On-CPU stretches whose start is the thread's wakeup (no switch into it recorded).
    from_wakeup: u64,
}

impl Rows<'_> {
    async fn interval(&mut self, thread: i64, i: Interval) -> Result<(), Error> {
        let lane = i64::from(i.depth) + 1;
        let cat = Category::Number(i.sensor as i64);
        (self.overview).add(Owner::Thread(thread), lane, i.start, i.end, cat);
        let row = schema::Interval {
            session_id: self.sid,
            id: i.id,
            parent_id: i.parent,
            thread_id: thread,
            sensor_id: i.sensor as i64,
            t_start: i.start,
            t_end: i.end,
            depth: i64::from(i.depth),
            self_ns: i.self_ns,
            complete: i64::from(i.complete),
        };
        Ok(self.w.row(row).await?)
    }

    /// A scheduling interval: `tid` had `cpu` of `host` (0-based) during `span`.
    async fn sched(
        &mut self,
        (host, cpu, tid): (usize, u32, u32),
        thread: Option<i64>,
        span: (i64, i64),
        end_state: Option<String>,
    ) -> Result<(), Error> {
        if let Some(t) = thread {
            let cat = Category::Number(i64::from(cpu));
            (self.overview).add(Owner::Thread(t), LANE_SCHED, span.0, span.1, cat);
        }
        let row = schema::Sched {
            session_id: self.sid,
            host_id: host as i64 + 1,
            cpu: i64::from(cpu),
            tid: i64::from(tid),
            thread_id: thread,
            t_start: span.0,
            t_end: span.1,
            end_state,
        };
        Ok(self.w.row(row).await?)
    }

    async fn state(&mut self, thread: i64, s: StateSpan) -> Result<(), Error> {
        let cat = Category::State(s.state.name());
        (self.overview).add(Owner::Thread(thread), LANE_STATES, s.start, s.end, cat);
        let row = schema::State {
            session_id: self.sid,
            thread_id: thread,
            t_start: s.start,
            t_end: s.end,
            state: s.state,
            op: s.op.map(|o| o.name()),
            fd: s.op.map(|_| s.fd),
            result: s.op.map(|_| s.result),
        };
        Ok(self.w.row(row).await?)
    }

    /// Where no switch into `tid` was recorded before it left `cpu` at `t`: its stretch
    /// began when it was woken onto that CPU, if it was (some kernels leave out switches
    /// from the idle task into a followed thread), or at `last`, the CPU's last recorded
    /// switch, if that came later (and not after `t`).
    fn woken_onto(
        &mut self,
        (host, cpu, tid): (usize, u32, u32),
        t: i64,
        last: Option<i64>,
    ) -> Option<i64> {
        if tid == 0 {
            return None;
        }
        let (at, onto) = self.woken.remove(&(host, tid))?;
        (onto == cpu && at <= t).then(|| {
            self.from_wakeup += 1;
            last.filter(|&l| l <= t).map_or(at, |l| at.max(l))
        })
    }

    /// Writes the intervals and states the last event completed.
    async fn drain(&mut self, thread: i64) -> Result<(), Error> {
        for i in std::mem::take(&mut self.intervals) {
            self.interval(thread, i).await?;
        }
        for s in std::mem::take(&mut self.states) {
            self.state(thread, s).await?;
        }
        Ok(())
    }

    /// One event of stream `stream` (thread `thread`) at base time `t`.
    async fn event(
        &mut self,
        (st, thread, host, process): (&mut StreamState, i64, usize, usize),
        e: Event,
        t: i64,
        ctx: (&Plan, &Inventory),
    ) -> Result<(), Error> {
        let (plan, inv) = ctx;
        match e {
            Event::Enter { sensor, .. } => {
                self.next_interval += 1;
                st.nesting.enter(t, sensor, self.next_interval);
            }
            Event::Exit { sensor, .. } => {
                st.nesting.exit(t, sensor, &mut |i| self.intervals.push(i));
            }
            Event::Mark { sensor, .. } => {
                let row = schema::Mark {
                    session_id: self.sid,
                    thread_id: thread,
                    sensor_id: sensor as i64,
                    t,
                };
                self.w.row(row).await?;
            }
            Event::Counter { sensor, value, .. } => {
                if let Some(&m) = inv.metric_id.get(&(process, sensor)) {
                    let row = schema::MetricSample {
                        session_id: self.sid,
                        metric_id: m,
                        thread_id: thread,
                        t,
                        value,
                    };
                    self.w.row(row).await?;
                }
            }
            Event::Comm {
                op,
                fd,
                duration,
                result,
                t: t0,
                ..
            } => {
                let f = plan.fit(process);
                let end = f.map((t0 as i64).saturating_add(duration.min(i64::MAX as u64) as i64));
                let states = &mut self.states;
                (st.timeline).call(t, end.saturating_sub(t), op, fd, result, &mut |s| {
                    states.push(s)
                });
            }
            Event::Switch {
                cpu,
                prev_tid,
                prev_state,
                next_tid,
                ..
            } => {
                let last = self.cpu_last.get(&(host, cpu)).copied();
                self.cpu_last
                    .insert((host, cpu), last.map_or(t, |l| l.max(t)));
                let since = match self.on_cpu.remove(&(host, cpu)) {
                    Some((tid, since)) if tid == prev_tid => Some(since),
                    _ => self.woken_onto((host, cpu, prev_tid), t, last),
                };
                if let Some(since) = since {
                    let end_state = Some((prev_state as char).to_string());
                    let thread = inv.thread_by_tid.get(&(host, u64::from(prev_tid))).copied();
                    self.sched((host, cpu, prev_tid), thread, (since, t), end_state)
                        .await?;
                }
                if next_tid != 0 {
                    self.on_cpu.insert((host, cpu), (next_tid, t));
                    self.woken.remove(&(host, next_tid));
                }
            }
            Event::Wakeup { cpu, tid, .. } => {
                self.wakeups += 1;
                if self.woken.len() >= WOKEN_MAX {
                    self.woken.clear();
                }
                self.woken.insert((host, tid), (t, cpu));
            }
            Event::Irq {
                cpu,
                irq,
                duration,
                handled,
                ..
            } => {
                let owner = Owner::Host(host as i64 + 1);
                let cat = Category::Number(i64::from(irq));
                self.overview.add(owner, LANE_IRQ, t, t, cat);
                let row = schema::Irq {
                    session_id: self.sid,
                    host_id: host as i64 + 1,
                    cpu: i64::from(cpu),
                    irq: i64::from(irq),
                    t,
                    duration: duration.min(i64::MAX as u64) as i64,
                    handled: i64::from(handled),
                };
                self.w.row(row).await?;
            }
            _ => {}
        }
        self.drain(thread).await
    }
}

/// Runs the second pass and writes its rows, the overview and its diagnostics.
pub async fn replay(
    w: &mut Writer,
    sid: i64,
    dir: &SessionDir,
    plan: &Plan,
    inv: &Inventory,
    progress: &dyn Progress,
    diags: &mut Vec<Diagnostic>,
) -> Result<(), Error> {
    let scan = &plan.scan;
    // Threads of a process with throttled sensors may record late calls (intervals).
    let throttles = |p: usize| {
        (scan.throttled.range((p, 0)..=(p, u64::MAX)))
            .next()
            .is_some()
    };
    let holding = (scan.streams.iter())
        .filter(|i| throttles(i.process))
        .count();
    let hold = (LATE_HOLD_ALL / holding.max(1)).max(LATE_HOLD_MIN);
    let mut streams: Vec<StreamState> = (scan.streams.iter())
        .map(|info| StreamState {
            nesting: match throttles(info.process) {
                true => Nesting::holding(hold),
                false => Nesting::default(),
            },
            timeline: Timeline::default(),
        })
        .collect();
    let (t0, t1) = inv.t_range.unwrap_or((0, 0));
    let mut rows = Rows {
        w,
        sid,
        next_interval: 0,
        overview: Overview::new(t0, t1),
        on_cpu: BTreeMap::new(),
        woken: HashMap::new(),
        cpu_last: HashMap::new(),
        intervals: Vec::new(),
        states: Vec::new(),
        wakeups: 0,
        from_wakeup: 0,
    };
    let mut replay = Replay::new(dir, scan)?;
    let mut batches = 0u64;
    loop {
        batches += 1;
        if batches.is_multiple_of(64) {
            progress.position(scan.bytes + replay.position());
        }
        let Some(b) = replay.next_batch()? else { break };
        let f = *plan.fit(b.process);
        let host = plan.proc_host[b.process];
        let thread = b.stream as i64 + 1;
        let kind = scan.streams[b.stream].kind;
        let app = kind == StreamKind::Thread as u8 || kind == 0;
        let Ok(decoder) = b.frame.events() else {
            continue;
        };
        let st = &mut streams[b.stream];
        for e in decoder {
            let Ok(e) = e else { break };
            let t = f.map(e.time() as i64);
            if app {
                st.timeline.touch(t);
            }
            let at = (&mut *st, thread, host, b.process);
            rows.event(at, e, t, (plan, inv)).await?;
        }
    }
    drop(replay);
    close(&mut rows, &mut streams, plan, inv, diags).await?;
    let overview = std::mem::replace(&mut rows.overview, Overview::new(0, 0));
    for row in overview.rows(sid) {
        rows.w.row(row).await?;
    }
    Ok(())
}

/// Closes what is open at each stream's end (calls, states, CPUs) and reports what the
/// nesting dropped or guessed.
async fn close(
    rows: &mut Rows<'_>,
    streams: &mut [StreamState],
    plan: &Plan,
    inv: &Inventory,
    diags: &mut Vec<Diagnostic>,
) -> Result<(), Error> {
    let (mut unmatched_exits, mut incomplete, mut too_deep, mut late) = (0, 0, 0, 0);
    for (s, st) in streams.iter_mut().enumerate() {
        let info = &plan.scan.streams[s];
        let thread = s as i64 + 1;
        let Some(end) = info.end() else {
            st.nesting.release(&mut |i| rows.intervals.push(i));
            rows.drain(thread).await?;
            continue;
        };
        let end = plan.fit(info.process).map(end);
        st.nesting.finish(end, &mut |i| rows.intervals.push(i));
        st.timeline.finish(end, &mut |x| rows.states.push(x));
        rows.drain(thread).await?;
        unmatched_exits += st.nesting.unmatched_exits;
        incomplete += st.nesting.incomplete;
        too_deep += st.nesting.too_deep;
        late += st.nesting.late_partial;
    }
    for ((host, cpu), (tid, since)) in std::mem::take(&mut rows.on_cpu) {
        let end = inv.t_range.map_or(since, |r| r.1.max(since));
        let thread = inv.thread_by_tid.get(&(host, u64::from(tid))).copied();
        rows.sched((host, cpu, tid), thread, (since, end), None)
            .await?;
    }
    if unmatched_exits > 0 {
        let msg = format!("{unmatched_exits} exit events matched no open call and were dropped");
        diags.push(Diagnostic::warn(
            "unmatched-exit",
            None,
            unmatched_exits,
            msg,
        ));
    }
    if incomplete > 0 {
        let msg = format!(
            "{incomplete} calls had no exit of their own (closed by an outer exit or the \
             thread's end; complete = 0)"
        );
        diags.push(Diagnostic::info(
            "incomplete-interval",
            None,
            incomplete,
            msg,
        ));
    }
    if too_deep > 0 {
        let msg = format!(
            "{too_deep} calls nested deeper than {} were dropped",
            crate::intervals::MAX_DEPTH
        );
        diags.push(Diagnostic::warn("too-deep", None, too_deep, msg));
    }
    if late > 0 {
        let msg = format!(
            "{late} long calls of throttled sensors (recorded at their exits) held more \
             calls than merge keeps back (at least {LATE_HOLD_MIN} per thread): the \
             earlier of those calls sit one level too shallow"
        );
        diags.push(Diagnostic::info("late-partial", None, late, msg));
    }
    let n = rows.wakeups;
    if n > 0 {
        let msg = format!("{n} sched_wakeup events were counted, not stored");
        diags.push(Diagnostic::info("wakeup", None, n, msg));
    }
    let n = rows.from_wakeup;
    if n > 0 {
        let msg = format!(
            "{n} on-CPU stretches start at their thread's wakeup: the kernel recorded no \
             switch into the thread (seen on 6.18 for switches from the idle task)"
        );
        diags.push(Diagnostic::info("sched-from-wakeup", None, n, msg));
    }
    Ok(())
}
