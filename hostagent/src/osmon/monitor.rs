//! The OS monitor's loop: following the monitored processes (tracefs) or sampling their
//! threads' CPU time (`/proc`), pausing when none is left, naming the stream by mode.

use super::{
    OsmonBatch, OsmonConfig, PROC_STREAM_NAME, TRACEFS_STREAM_NAME, TRACEFS_TEXT_STREAM_NAME,
    default_irqs,
};
use crate::kernel_trace::TraceSession;
use crate::metric::metric_id;
use crate::proc_stat;
use p5_wire::Event;
use p5_wire::data::Name;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Every thread of these processes, as `(pid, tid)`.
fn all_tasks(pids: &[u32]) -> Vec<(u32, u32)> {
    let mut v: Vec<(u32, u32)> = pids
        .iter()
        .flat_map(|&p| proc_stat::threads(p).into_iter().map(move |t| (p, t)))
        .collect();
    v.sort_unstable();
    v
}

/// How often the monitor forgets the followed threads that ended.
const PRUNE_EVERY: Duration = Duration::from_secs(10);

/// What the loop sleeps on: the bind watch's wake-ups, or plain sleeps without one.
pub(super) struct Waker {
    pub(super) rx: Option<mpsc::Receiver<()>>,
}

impl Waker {
    /// Waits up to `d`; true if a process bound a socket meanwhile.
    fn wait(&mut self, d: Duration) -> bool {
        let Some(rx) = &self.rx else {
            std::thread::sleep(d);
            return false;
        };
        match rx.recv_timeout(d) {
            Ok(()) => {
                while rx.try_recv().is_ok() {}
                true
            }
            Err(mpsc::RecvTimeoutError::Timeout) => false,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                self.rx = None;
                false
            }
        }
    }
}

/// The OS monitor's state between rounds.
pub(super) struct Monitor<'a> {
    pub(super) cfg: OsmonConfig,
    irqs: Vec<u32>,
    pub(super) session: Option<TraceSession>,
    fallback: bool,
    active: bool,
    named: Option<&'static str>,
    last_tasks: Instant,
    declared: HashSet<u64>,
    ns_per_tick: u64,
    last_prune: Instant,
    /// Processes followed because an ancestor was (from `Task` records, or `/proc` in the
    /// fallback): monitoring goes on while any lives, after the monitored ones ended.
    tree: std::collections::BTreeSet<u32>,
    state: &'a dyn Fn(String),
}

impl<'a> Monitor<'a> {
    /// Creates the tracefs session at once (unless told to sample), so that following a
    /// process later takes a few control-file writes.
    pub(super) fn new(cfg: OsmonConfig, state: &'a dyn Fn(String)) -> Self {
        let irqs = cfg.irqs.clone().unwrap_or_else(default_irqs);
        let mut session = None;
        if !cfg.force_proc {
            match TraceSession::start(cfg.clock, &irqs, cfg.net_softirqs) {
                Ok(s) => session = Some(s),
                Err(e) => {
                    tracing::warn!(
                        "os monitor: {e}; falling back to /proc sampling (lower fidelity)"
                    )
                }
            }
        }
        Self {
            fallback: session.is_none(),
            cfg,
            irqs,
            session,
            active: false,
            named: None,
            last_tasks: Instant::now(),
            declared: HashSet::new(),
            ns_per_tick: 1_000_000_000 / proc_stat::clock_ticks(),
            tree: std::collections::BTreeSet::new(),
            last_prune: Instant::now(),
            state,
        }
    }

    fn fall_back(&mut self, e: &dyn std::fmt::Display) {
        tracing::warn!("os monitor: {e}; falling back to /proc sampling (lower fidelity)");
        self.session = None;
        self.fallback = true;
        (self.state)("proc sampling (lower fidelity)".into());
    }

    /// Follows the monitored processes' threads (new ones only; the kernel follows their
    /// children by itself) and turns monitoring on at the first call. The state is reported
    /// after tracing is on: `p5 record` waits for it before letting the program run.
    fn follow(&mut self, pids: &[u32], batch: &mut OsmonBatch, now: bool) {
        if let Some(s) = self.session.as_mut()
            && (now || !self.active || self.last_tasks.elapsed() >= Duration::from_millis(100))
        {
            self.last_tasks = Instant::now();
            match s.follow(&all_tasks(pids)) {
                Ok(tasks) => batch.events.extend(tasks),
                Err(e) => self.fall_back(&e),
            }
        }
        if self.active {
            return;
        }
        self.active = true;
        match &self.session {
            Some(s) => {
                let soft = if s.traces_softirqs() {
                    ", net softirqs"
                } else {
                    ""
                };
                let irqs = &self.irqs;
                tracing::info!(?irqs, soft, "os monitor: tracing with tracefs");
                (self.state)(format!("tracefs (irqs {irqs:?}{soft})"));
            }
            None => (self.state)("proc sampling (lower fidelity)".into()),
        }
    }

    fn pause(&mut self) {
        if !self.active {
            return;
        }
        self.active = false;
        if let Some(s) = self.session.as_mut()
            && let Err(e) = s.pause()
        {
            tracing::warn!("os monitor: cannot pause tracing: {e}");
        }
        tracing::info!(
            "os monitor: no monitored process (or recording stopped): monitoring stopped"
        );
        (self.state)("waiting for a monitored process".into());
    }

    fn drain(&mut self, batch: &mut OsmonBatch) {
        let from = batch.events.len();
        if let Some(s) = self.session.as_mut()
            && let Err(e) = s.drain(&mut batch.events)
        {
            self.fall_back(&e);
        }
        for e in &batch.events[from..] {
            if let Event::Task { pid, .. } = e {
                self.tree.insert(*pid);
            }
        }
    }

    /// The monitored processes (none while not recording) and the live descendants followed
    /// through them.
    fn monitored(&mut self, recording: bool) -> Vec<u32> {
        if !recording {
            return Vec::new();
        }
        let mut pids = self.cfg.finder.pids().to_vec();
        self.tree
            .retain(|p| std::path::Path::new(&format!("/proc/{p}")).exists());
        pids.extend(self.tree.iter().copied());
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// One `/proc` sample of every thread of the monitored processes and their descendants.
    fn sample(&mut self, pids: &[u32], batch: &mut OsmonBatch) {
        let t = self.cfg.clock.now_ns();
        let all = proc_stat::with_descendants(pids);
        self.tree.extend(all.iter().copied());
        for pid in all {
            for tid in proc_stat::threads(pid) {
                let Some(st) = proc_stat::read_task_stat(pid, Some(tid)) else {
                    continue;
                };
                let name = format!("thread.{pid}.{tid}.cpu_ns_total");
                let id = metric_id(&name);
                if self.declared.insert(id) {
                    batch.names.push(Name {
                        id,
                        name,
                        unit: "ns".into(),
                        scale_exp: 0,
                    });
                }
                batch.events.push(Event::Counter {
                    t,
                    sensor: id,
                    value: st
                        .cpu_ticks
                        .saturating_mul(self.ns_per_tick)
                        .min(i64::MAX as u64) as i64,
                });
            }
        }
    }

    fn name(&mut self, batch: &mut OsmonBatch) {
        let mode = match &self.session {
            _ if self.fallback => PROC_STREAM_NAME,
            Some(s) if s.is_binary() => TRACEFS_STREAM_NAME,
            _ => TRACEFS_TEXT_STREAM_NAME,
        };
        if self.named != Some(mode) {
            self.named = Some(mode);
            batch.stream_name = Some(mode.to_owned());
        }
    }

    /// Rounds until `stop` (or the receiver is gone).
    pub(super) fn run(
        &mut self,
        tx: &mpsc::Sender<OsmonBatch>,
        stop: &AtomicBool,
        recording: &dyn Fn() -> bool,
        waker: &mut Waker,
    ) {
        (self.state)("waiting for a monitored process".into());
        let mut woken = false;
        while !stop.load(Ordering::Acquire) {
            if woken {
                self.cfg.finder.rescan_instrumented();
            }
            if self.last_prune.elapsed() >= PRUNE_EVERY {
                self.last_prune = Instant::now();
                if let Some(s) = self.session.as_mut() {
                    s.forget_ended();
                }
            }
            let pids = self.monitored(recording());
            let mut batch = OsmonBatch::default();
            if pids.is_empty() {
                self.pause();
                self.drain(&mut batch);
                woken = waker.wait(Duration::from_millis(100));
            } else {
                self.follow(&pids, &mut batch, woken);
                self.name(&mut batch);
                if self.session.is_some() {
                    self.drain(&mut batch);
                    woken = waker.wait(Duration::from_millis(50));
                } else {
                    self.sample(&pids, &mut batch);
                    woken = waker.wait(self.cfg.interval);
                }
            }
            let any = batch.stream_name.is_some() || !batch.events.is_empty();
            if any && tx.send(batch).is_err() {
                return;
            }
        }
        // What the kernel buffered since the last round.
        let mut batch = OsmonBatch::default();
        self.drain(&mut batch);
        if !batch.events.is_empty() {
            let _ = tx.send(batch);
        }
    }
}
