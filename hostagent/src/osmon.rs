//! The OS monitor (CoSMoS §2.3): when the scheduler put the monitored processes' threads on
//! and off the CPUs, when they were woken, when the chosen interrupt lines (the NIC's by
//! default) were served, and when the kernel did network work in the NET_RX / NET_TX softirqs
//! (on loopback, where no NIC interrupt fires, that is where packets are sent and received).
//!
//! With tracefs (root) it records `sched_switch`, `sched_wakeup`, `task_newtask` and
//! `task_rename` of the monitored processes' threads and of every thread and process they
//! create — the kernel follows them (`set_event_pid`, `event-fork`; see
//! [`crate::kernel_trace`]) —, `irq_handler_entry`/`exit` (paired per CPU into one interval)
//! for the chosen IRQs and `softirq_entry`/`exit` (paired the same way, in a slot of their
//! own, since a hard IRQ can arrive inside a softirq) for the network softirqs, as `Irq`
//! events numbered [`SOFTIRQ_BASE`]` + vector`, all with `trace_clock=mono`: a kernel time
//! maps exactly to the agent's relative time (`t − start_mono_ns`, the agent's Hello carries
//! `start_mono_ns`), and so onto every process's clock on the same host. Task records become
//! `Task` events naming each followed thread and its process. Records are read as binary
//! per-CPU ring-buffer pages ([`crate::ringbuf`], nanosecond timestamps, no formatting in the
//! kernel); where an event's binary layout cannot be read the text `trace_pipe` (microsecond
//! resolution) is used.
//!
//! Without tracefs it falls back to sampling the CPU time of each thread of the monitored
//! processes and their descendants from `/proc/PID/task/TID/stat` every interval (`Counter`
//! events `thread.PID.TID.cpu_ns_total`, 10 ms kernel tick granularity; a descendant is found
//! at the next sample); the stream's name says it is lower fidelity.
//!
//! The trace session is made when the monitor starts; tracing is turned on when the first
//! monitored process appears (within milliseconds of its announcement: [`BindWatch`]) and
//! off again after the last one, and every process followed through it, ended. The trace
//! instances are removed when the monitor stops.

use crate::clock::AgentClock;
use crate::metric::metric_id;
use crate::proc_stat;
use crate::sample::ProcessFinder;
use p5_wire::Event;
use p5_wire::data::Name;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Stream name in tracefs mode.
pub const TRACEFS_STREAM_NAME: &str = "os monitor: tracefs sched_switch/sched_wakeup/irq_handler/softirq, mono clock, 1 ns resolution";
/// Stream name in tracefs mode when only the text pipe could be used.
pub const TRACEFS_TEXT_STREAM_NAME: &str = "os monitor: tracefs sched_switch/sched_wakeup/irq_handler/softirq, mono clock, 1 us resolution";
/// Stream name in the fallback mode.
pub const PROC_STREAM_NAME: &str =
    "os monitor (lower fidelity): /proc per-thread CPU time sampling, 10 ms ticks";

/// Trace instances are named this plus the agent's pid.
pub const INSTANCE_PREFIX: &str = "p5-hostagent-";

/// How softirqs are numbered in `Event::Irq` (defined with the wire format).
pub use p5_wire::event::{NET_RX_SOFTIRQ, NET_TX_SOFTIRQ, SOFTIRQ_BASE};

pub use crate::kernel_trace::{BindWatch, TraceSession};

/// `clone` flag: the new task is a thread of its creator's process.
const CLONE_THREAD: u64 = 0x0001_0000;

/// The softirq vectors the OS monitor traces.
pub const NET_SOFTIRQS: [u32; 2] = [NET_TX_SOFTIRQ, NET_RX_SOFTIRQ];

/// What the OS monitor hands to the sampling loop.
#[derive(Debug, Default)]
pub struct OsmonBatch {
    /// Set when the stream is (re)named (mode known).
    pub stream_name: Option<String>,
    /// Metric declarations (fallback mode).
    pub names: Vec<Name>,
    /// Events, agent-relative times.
    pub events: Vec<Event>,
}

/// One parsed `trace_pipe` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceLine {
    /// `sched_switch`.
    Switch {
        /// CLOCK_MONOTONIC ns.
        mono: u64,
        /// CPU.
        cpu: u32,
        /// Outgoing thread.
        prev_tid: u32,
        /// Its state letter.
        prev_state: u8,
        /// Incoming thread.
        next_tid: u32,
    },
    /// `sched_wakeup`.
    Wakeup {
        /// CLOCK_MONOTONIC ns.
        mono: u64,
        /// Target CPU.
        cpu: u32,
        /// Woken thread.
        tid: u32,
    },
    /// `irq_handler_entry`.
    IrqEntry {
        /// CLOCK_MONOTONIC ns.
        mono: u64,
        /// CPU.
        cpu: u32,
        /// Line.
        irq: u32,
    },
    /// `irq_handler_exit`.
    IrqExit {
        /// CLOCK_MONOTONIC ns.
        mono: u64,
        /// CPU.
        cpu: u32,
        /// Line.
        irq: u32,
        /// `ret=handled`.
        handled: bool,
    },
    /// `softirq_entry`.
    SoftirqEntry {
        /// CLOCK_MONOTONIC ns.
        mono: u64,
        /// CPU.
        cpu: u32,
        /// Softirq vector.
        vec: u32,
    },
    /// `softirq_exit`.
    SoftirqExit {
        /// CLOCK_MONOTONIC ns.
        mono: u64,
        /// CPU.
        cpu: u32,
        /// Softirq vector.
        vec: u32,
    },
    /// `task_newtask`.
    NewTask {
        /// CLOCK_MONOTONIC ns.
        mono: u64,
        /// The creating thread.
        parent: u32,
        /// The new thread.
        tid: u32,
        /// Its name (NUL-padded).
        comm: [u8; 16],
        /// `clone` flags.
        flags: u64,
    },
    /// `task_rename`.
    Rename {
        /// CLOCK_MONOTONIC ns.
        mono: u64,
        /// The thread.
        tid: u32,
        /// Its new name (NUL-padded).
        comm: [u8; 16],
    },
}

impl TraceLine {
    /// The record's CLOCK_MONOTONIC time.
    pub fn mono(&self) -> u64 {
        match *self {
            TraceLine::Switch { mono, .. }
            | TraceLine::Wakeup { mono, .. }
            | TraceLine::IrqEntry { mono, .. }
            | TraceLine::IrqExit { mono, .. }
            | TraceLine::SoftirqEntry { mono, .. }
            | TraceLine::SoftirqExit { mono, .. }
            | TraceLine::NewTask { mono, .. }
            | TraceLine::Rename { mono, .. } => mono,
        }
    }
}

/// A kernel task name as a fixed, NUL-padded array (cut at 15 bytes, as the kernel does).
pub fn comm_array(s: &str) -> [u8; 16] {
    let mut c = [0u8; 16];
    let b = s.as_bytes();
    let n = b.len().min(15);
    c[..n].copy_from_slice(&b[..n]);
    c
}

fn comm_string(c: &[u8; 16]) -> String {
    let end = c.iter().position(|&b| b == 0).unwrap_or(c.len());
    String::from_utf8_lossy(&c[..end]).into_owned()
}

fn field<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    let i = s.find(key)? + key.len();
    let rest = s.get(i..)?;
    Some(rest.split(' ').next().unwrap_or(""))
}

fn num(s: &str, key: &str) -> Option<u32> {
    field(s, key)?.parse().ok()
}

/// Parses `SECONDS.FRACTION` into ns.
fn parse_ts(t: &str) -> Option<u64> {
    let (s, f) = t.split_once('.')?;
    if f.is_empty() || f.len() > 9 || !f.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac: u64 = f.parse().ok()?;
    let scale = 10u64.pow(9 - f.len() as u32);
    s.parse::<u64>()
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(frac * scale)
}

/// Parses one `trace_pipe` line (None for lines of other events or in another shape).
pub fn parse_line(line: &str) -> Option<TraceLine> {
    // The CPU is the first `[digits]` token; the task name before it may contain anything.
    let bytes = line.as_bytes();
    let mut i = 0;
    let (cpu, after, task) = loop {
        let open = i + line.get(i..)?.find('[')?;
        let close = open + line.get(open..)?.find(']')?;
        let inner = line.get(open + 1..close)?;
        if !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_digit()) {
            break (
                inner.parse::<u32>().ok()?,
                close + 1,
                line.get(..open)?.trim(),
            );
        }
        i = open + 1;
        if i >= bytes.len() {
            return None;
        }
    };
    let rest = line.get(after..)?;
    // Next: optional flags, then `TIMESTAMP:`, then `EVENT:`, then the fields.
    let mut words = rest.split_ascii_whitespace();
    let mut mono = None;
    for w in words.by_ref().take(3) {
        if let Some(t) = w.strip_suffix(':').and_then(parse_ts) {
            mono = Some(t);
            break;
        }
    }
    let mono = mono?;
    let event = words.next()?.strip_suffix(':')?;
    let fields = line.get(line.find(event)? + event.len()..)?;
    Some(match event {
        "sched_switch" => TraceLine::Switch {
            mono,
            cpu,
            prev_tid: num(fields, " prev_pid=")?,
            prev_state: field(fields, " prev_state=")?
                .bytes()
                .next()
                .unwrap_or(b'?'),
            next_tid: num(fields, " next_pid=")?,
        },
        "sched_wakeup" | "sched_wakeup_new" => TraceLine::Wakeup {
            mono,
            cpu: num(fields, " target_cpu=").unwrap_or(cpu),
            tid: num(fields, " pid=")?,
        },
        "irq_handler_entry" => TraceLine::IrqEntry {
            mono,
            cpu,
            irq: num(fields, " irq=")?,
        },
        "irq_handler_exit" => TraceLine::IrqExit {
            mono,
            cpu,
            irq: num(fields, " irq=")?,
            handled: field(fields, " ret=") == Some("handled"),
        },
        "softirq_entry" => TraceLine::SoftirqEntry {
            mono,
            cpu,
            vec: num(fields, " vec=")?,
        },
        "softirq_exit" => TraceLine::SoftirqExit {
            mono,
            cpu,
            vec: num(fields, " vec=")?,
        },
        "task_newtask" => TraceLine::NewTask {
            mono,
            parent: task.rsplit_once('-')?.1.parse().ok()?,
            tid: num(fields, " pid=")?,
            comm: comm_array(field(fields, " comm=")?),
            flags: u64::from_str_radix(field(fields, " clone_flags=")?, 16).ok()?,
        },
        "task_rename" => TraceLine::Rename {
            mono,
            tid: num(fields, " pid=")?,
            comm: comm_array(field(fields, " newcomm=")?),
        },
        _ => return None,
    })
}

/// Turns trace lines into wire events: user-space filtering by IRQ and softirq vector (the
/// scheduling events come from an instance the kernel filters by followed thread), pairing of
/// entry/exit per CPU (hard IRQs and softirqs in separate slots: a hard IRQ may interrupt a
/// softirq), the followed threads' processes and names ([`Event::Task`]), mapping of kernel
/// times onto the agent's clock.
#[derive(Debug)]
pub struct Converter {
    clock: AgentClock,
    /// Followed thread → its process.
    tasks: HashMap<u32, u32>,
    irqs: HashSet<u32>,
    softirqs: HashSet<u32>,
    /// Per CPU: the open hard IRQ (entry time, line).
    irq_open: HashMap<u32, (u64, u32)>,
    /// Per CPU: the open softirq (entry time, vector).
    softirq_open: HashMap<u32, (u64, u32)>,
}

impl Converter {
    /// A converter for the agent's clock, the chosen IRQ lines and softirq vectors.
    pub fn new(clock: AgentClock, irqs: &[u32], softirqs: &[u32]) -> Self {
        Self {
            clock,
            tasks: HashMap::new(),
            irqs: irqs.iter().copied().collect(),
            softirqs: softirqs.iter().copied().collect(),
            irq_open: HashMap::new(),
            softirq_open: HashMap::new(),
        }
    }

    /// Follows thread `tid` of process `pid`; false if it was followed already.
    pub fn follow(&mut self, pid: u32, tid: u32) -> bool {
        self.tasks.insert(tid, pid).is_none()
    }

    /// Forgets every followed thread (tracing paused).
    pub fn forget_tasks(&mut self) {
        self.tasks.clear();
    }

    /// Forgets the followed threads `alive` says are gone (memory stays bounded by the live
    /// threads, however many a program starts over time).
    pub fn retain_tasks(&mut self, alive: &dyn Fn(u32) -> bool) {
        self.tasks.retain(|&tid, _| alive(tid));
    }

    /// Converts one line; `None` if filtered out or unpaired.
    pub fn convert(&mut self, l: TraceLine) -> Option<Event> {
        match l {
            TraceLine::Switch {
                mono,
                cpu,
                prev_tid,
                prev_state,
                next_tid,
            } => Some(Event::Switch {
                t: self.clock.from_mono(mono),
                cpu,
                prev_tid,
                prev_state,
                next_tid,
            }),
            TraceLine::Wakeup { mono, cpu, tid } => Some(Event::Wakeup {
                t: self.clock.from_mono(mono),
                cpu,
                tid,
            }),
            TraceLine::NewTask {
                mono,
                parent,
                tid,
                comm,
                flags,
            } => {
                let pid = if flags & CLONE_THREAD != 0 {
                    *self.tasks.entry(parent).or_insert(parent)
                } else {
                    tid
                };
                self.tasks.insert(tid, pid);
                Some(Event::Task {
                    t: self.clock.from_mono(mono),
                    tid,
                    pid,
                    comm: comm_string(&comm),
                })
            }
            TraceLine::Rename { mono, tid, comm } => {
                let pid = *self.tasks.get(&tid)?;
                Some(Event::Task {
                    t: self.clock.from_mono(mono),
                    tid,
                    pid,
                    comm: comm_string(&comm),
                })
            }
            TraceLine::IrqEntry { mono, cpu, irq } if self.irqs.contains(&irq) => {
                self.irq_open.insert(cpu, (mono, irq));
                None
            }
            TraceLine::IrqExit {
                mono,
                cpu,
                irq,
                handled,
            } => {
                let (start, open_irq) = self.irq_open.remove(&cpu)?;
                (open_irq == irq).then(|| Event::Irq {
                    t: self.clock.from_mono(start),
                    cpu,
                    irq,
                    duration: mono.saturating_sub(start),
                    handled: handled as u8,
                })
            }
            TraceLine::SoftirqEntry { mono, cpu, vec } if self.softirqs.contains(&vec) => {
                self.softirq_open.insert(cpu, (mono, vec));
                None
            }
            TraceLine::SoftirqExit { mono, cpu, vec } => {
                let (start, open_vec) = self.softirq_open.remove(&cpu)?;
                (open_vec == vec).then(|| Event::Irq {
                    t: self.clock.from_mono(start),
                    cpu,
                    irq: SOFTIRQ_BASE + vec,
                    duration: mono.saturating_sub(start),
                    handled: 1,
                })
            }
            _ => None,
        }
    }
}

/// What the OS monitor needs.
#[derive(Debug)]
pub struct OsmonConfig {
    /// The agent's clock.
    pub clock: AgentClock,
    /// Monitored processes.
    pub finder: ProcessFinder,
    /// IRQ lines to trace (None: the NIC's, from /proc/interrupts).
    pub irqs: Option<Vec<u32>>,
    /// Trace the network softirqs (NET_RX, NET_TX) too.
    pub net_softirqs: bool,
    /// Sampling interval of the fallback mode.
    pub interval: Duration,
    /// Use the /proc fallback even where tracefs works.
    pub force_proc: bool,
}

/// The NIC's IRQ lines: interrupts whose device names mention a non-loopback interface
/// (or a virtio network queue).
pub fn default_irqs() -> Vec<u32> {
    let ifaces: Vec<String> =
        proc_stat::parse_net_dev(&std::fs::read_to_string("/proc/net/dev").unwrap_or_default())
            .into_iter()
            .map(|d| d.name)
            .filter(|n| n != "lo")
            .collect();
    let lines = proc_stat::parse_interrupts(
        &std::fs::read_to_string("/proc/interrupts").unwrap_or_default(),
    );
    proc_stat::nic_irqs(&lines, &ifaces)
}

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
struct Waker {
    rx: Option<mpsc::Receiver<()>>,
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
struct Monitor<'a> {
    cfg: OsmonConfig,
    irqs: Vec<u32>,
    session: Option<TraceSession>,
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
    fn new(cfg: OsmonConfig, state: &'a dyn Fn(String)) -> Self {
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
    fn run(
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

/// Runs the OS monitor until `stop`; reports its state through `state`. While `recording()`
/// is false (`hostagent ctl stop`) it monitors nothing, as if no process were monitored.
/// With tracefs and instrumented-process discovery, a [`BindWatch`] thread wakes it as soon
/// as a process binds a socket (the runtimes' announcement), so it follows a new
/// instrumented process within milliseconds, not at its next `/proc/net/unix` scan.
pub fn run(
    cfg: OsmonConfig,
    tx: mpsc::Sender<OsmonBatch>,
    stop: &AtomicBool,
    recording: &dyn Fn() -> bool,
    state: &dyn Fn(String),
) {
    let mut m = Monitor::new(cfg, state);
    let watch = if m.session.is_some() && m.cfg.finder.watches_instrumented() {
        match BindWatch::start() {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!(
                    "os monitor: cannot watch for announcements ({e}); instrumented processes \
                     are found by scanning /proc/net/unix every 100 ms"
                );
                None
            }
        }
    } else {
        None
    };
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let mut waker = Waker { rx: None };
        if let Some(w) = &watch {
            let (wake_tx, wake_rx) = mpsc::channel();
            let done = &done;
            let spawned = std::thread::Builder::new()
                .name("p5ha-bindwatch".into())
                .spawn_scoped(s, move || w.run(&wake_tx, done));
            if spawned.is_ok() {
                waker.rx = Some(wake_rx);
            }
        }
        m.run(&tx, stop, recording, &mut waker);
        done.store(true, Ordering::Release);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel_trace::raw_to_line;
    use crate::ringbuf::{Layouts, RawEvent};

    #[test]
    fn parses_trace_pipe_lines() {
        let l = "     busy loop-1234    [001] d..2.  5123.456789: sched_switch: prev_comm=busy loop prev_pid=1234 prev_prio=120 prev_state=R+ ==> next_comm=swapper/1 next_pid=0 next_prio=120";
        assert_eq!(
            parse_line(l),
            Some(TraceLine::Switch {
                mono: 5_123_456_789_000,
                cpu: 1,
                prev_tid: 1234,
                prev_state: b'R',
                next_tid: 0
            })
        );
        let w = "          <idle>-0       [000] dNh3.    10.000001: sched_wakeup: comm=x pid=77 prio=120 target_cpu=001";
        assert_eq!(
            parse_line(w),
            Some(TraceLine::Wakeup {
                mono: 10_000_001_000,
                cpu: 1,
                tid: 77
            })
        );
        let n = "  sh-489 [000] d..2. 10.000002: sched_wakeup_new: comm=sh pid=493 prio=120 target_cpu=001";
        assert_eq!(
            parse_line(n),
            Some(TraceLine::Wakeup {
                mono: 10_000_002_000,
                cpu: 1,
                tid: 493
            })
        );
        let e = "  <idle>-0 [003] d.h1. 1.5: irq_handler_entry: irq=24 name=virtio0-input.0";
        assert_eq!(
            parse_line(e),
            Some(TraceLine::IrqEntry {
                mono: 1_500_000_000,
                cpu: 3,
                irq: 24
            })
        );
        for bad in [
            "",
            "CPU:1 [LOST 5 EVENTS]",
            "x [12] 1.0: sched_switch: nothing",
            "[a] [1",
        ] {
            assert_eq!(parse_line(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn converter_filters_pairs_and_maps_time() {
        let clock = AgentClock {
            start_mono_ns: 1_000,
            start_wall_ns: 0,
        };
        let mut c = Converter::new(clock, &[24], &[]);
        let sw = |p, n| TraceLine::Switch {
            mono: 3_000,
            cpu: 0,
            prev_tid: p,
            prev_state: b'S',
            next_tid: n,
        };
        // The kernel filters scheduling events by followed thread (set_event_pid).
        assert_eq!(c.convert(sw(1, 5)).map(|e| e.time()), Some(2_000));
        assert!(
            c.convert(TraceLine::IrqEntry {
                mono: 4_000,
                cpu: 1,
                irq: 9
            })
            .is_none()
        );
        assert!(
            c.convert(TraceLine::IrqExit {
                mono: 4_100,
                cpu: 1,
                irq: 9,
                handled: true
            })
            .is_none()
        );
        assert!(
            c.convert(TraceLine::IrqEntry {
                mono: 5_000,
                cpu: 1,
                irq: 24
            })
            .is_none()
        );
        assert_eq!(
            c.convert(TraceLine::IrqExit {
                mono: 5_700,
                cpu: 1,
                irq: 24,
                handled: true
            }),
            Some(Event::Irq {
                t: 4_000,
                cpu: 1,
                irq: 24,
                duration: 700,
                handled: 1
            })
        );
    }

    #[test]
    fn parses_softirq_lines() {
        let e = "         python3-5619    [001] ..s1.  2976.556567: softirq_entry: vec=3 [action=NET_RX]";
        assert_eq!(
            parse_line(e),
            Some(TraceLine::SoftirqEntry {
                mono: 2_976_556_567_000,
                cpu: 1,
                vec: 3
            })
        );
        let x = "          <idle>-0       [000] ..s2.    10.000001: softirq_exit: vec=2 [action=NET_TX]";
        assert_eq!(
            parse_line(x),
            Some(TraceLine::SoftirqExit {
                mono: 10_000_001_000,
                cpu: 0,
                vec: 2
            })
        );
        assert_eq!(
            parse_line("  x-1 [000] ..s1. 1.0: softirq_entry: [action=NET_RX]"),
            None
        );
    }

    /// softirq_entry/exit records as the kernel writes them (format of Linux 6.x).
    const SOFTIRQ_ENTRY_FORMAT: &str = "name: softirq_entry\nID: 223\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:unsigned int vec;\toffset:8;\tsize:4;\tsigned:0;\n\nprint fmt: \"vec=%u [action=%s]\", REC->vec\n";
    const SOFTIRQ_EXIT_FORMAT: &str = "name: softirq_exit\nID: 222\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:unsigned int vec;\toffset:8;\tsize:4;\tsigned:0;\n";
    const IRQ_ENTRY_FORMAT: &str = "name: irq_handler_entry\nID: 225\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int irq;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:__data_loc char[] name;\toffset:12;\tsize:4;\tsigned:0;\n";
    const IRQ_EXIT_FORMAT: &str = "name: irq_handler_exit\nID: 224\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int irq;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:int ret;\toffset:12;\tsize:4;\tsigned:1;\n";

    /// A ring-buffer page of small records `(delta, record)`.
    fn page(recs: &[(u32, Vec<u8>)]) -> Vec<u8> {
        let mut data = Vec::new();
        for (delta, r) in recs {
            assert_eq!(r.len() % 4, 0);
            data.extend_from_slice(&((r.len() as u32 / 4) | (delta << 5)).to_le_bytes());
            data.extend_from_slice(r);
        }
        let mut p = Vec::new();
        p.extend_from_slice(&1_000_000u64.to_le_bytes());
        p.extend_from_slice(&(data.len() as u64).to_le_bytes());
        p.extend_from_slice(&data);
        p.resize(4096, 0);
        p
    }

    /// A record: common_type, then u32 words from offset 8.
    fn rec(id: u16, words: &[u32]) -> Vec<u8> {
        let mut r = vec![0u8; 8];
        r[..2].copy_from_slice(&id.to_le_bytes());
        for w in words {
            r.extend_from_slice(&w.to_le_bytes());
        }
        r
    }

    #[test]
    fn softirq_records_decode_and_pair_around_a_nested_hard_irq() {
        let l = Layouts::from_formats(
            None,
            None,
            Some(IRQ_ENTRY_FORMAT),
            Some(IRQ_EXIT_FORMAT),
            Some(SOFTIRQ_ENTRY_FORMAT),
            Some(SOFTIRQ_EXIT_FORMAT),
        );
        // NET_RX from 1_000_100; the NIC's IRQ 24 interrupts it at +300 for 200 ns; NET_RX
        // ends at +1_000; then TIMER (vector 1, not traced) and NET_TX.
        let p = page(&[
            (100, rec(223, &[3])),
            (300, rec(225, &[24, 0])),
            (200, rec(224, &[24, 1])),
            (500, rec(222, &[3])),
            (50, rec(223, &[1])),
            (50, rec(222, &[1])),
            (100, rec(223, &[2])),
            (40, rec(222, &[2])),
        ]);
        let mut raw = Vec::new();
        let st = crate::ringbuf::decode_page(&p, &l, &mut raw);
        assert_eq!(st.other, 0);
        assert_eq!(
            raw[..2],
            [
                RawEvent::SoftirqEntry {
                    ts: 1_000_100,
                    vec: 3
                },
                RawEvent::IrqEntry {
                    ts: 1_000_400,
                    irq: 24
                }
            ]
        );
        assert_eq!(
            raw[3],
            RawEvent::SoftirqExit {
                ts: 1_001_100,
                vec: 3
            }
        );
        let clock = AgentClock {
            start_mono_ns: 1_000_000,
            start_wall_ns: 0,
        };
        let mut c = Converter::new(clock, &[24], &NET_SOFTIRQS);
        let out: Vec<Event> = raw
            .into_iter()
            .filter_map(|e| c.convert(raw_to_line(1, e)))
            .collect();
        assert_eq!(
            out,
            [
                Event::Irq {
                    t: 400,
                    cpu: 1,
                    irq: 24,
                    duration: 200,
                    handled: 1
                },
                Event::Irq {
                    t: 100,
                    cpu: 1,
                    irq: SOFTIRQ_BASE + NET_RX_SOFTIRQ,
                    duration: 1_000,
                    handled: 1
                },
                Event::Irq {
                    t: 1_300,
                    cpu: 1,
                    irq: SOFTIRQ_BASE + NET_TX_SOFTIRQ,
                    duration: 40,
                    handled: 1
                },
            ]
        );
        // Without softirq vectors nothing but the hard IRQ comes out.
        let mut c = Converter::new(clock, &[24], &[]);
        let mut raw = Vec::new();
        crate::ringbuf::decode_page(&p, &l, &mut raw);
        let n = raw
            .into_iter()
            .filter_map(|e| c.convert(raw_to_line(1, e)))
            .count();
        assert_eq!(n, 1);
    }

    #[test]
    fn converter_keeps_softirqs_apart_per_cpu_and_from_hard_irqs() {
        let clock = AgentClock {
            start_mono_ns: 0,
            start_wall_ns: 0,
        };
        let mut c = Converter::new(clock, &[24], &NET_SOFTIRQS);
        let lines = [
            // CPU 0: NET_RX with IRQ 24 nested; CPU 1: NET_TX overlapping in time.
            TraceLine::SoftirqEntry {
                mono: 100,
                cpu: 0,
                vec: 3,
            },
            TraceLine::SoftirqEntry {
                mono: 150,
                cpu: 1,
                vec: 2,
            },
            TraceLine::IrqEntry {
                mono: 200,
                cpu: 0,
                irq: 24,
            },
            TraceLine::IrqExit {
                mono: 210,
                cpu: 0,
                irq: 24,
                handled: true,
            },
            TraceLine::SoftirqExit {
                mono: 260,
                cpu: 1,
                vec: 2,
            },
            TraceLine::SoftirqExit {
                mono: 400,
                cpu: 0,
                vec: 3,
            },
            // An exit without its entry (lost, or from before tracing) is dropped, as is a
            // mismatched pair.
            TraceLine::SoftirqExit {
                mono: 500,
                cpu: 0,
                vec: 3,
            },
            TraceLine::SoftirqEntry {
                mono: 600,
                cpu: 0,
                vec: 3,
            },
            TraceLine::SoftirqExit {
                mono: 700,
                cpu: 0,
                vec: 2,
            },
        ];
        let out: Vec<(u32, u32, u64, u64)> = lines
            .into_iter()
            .filter_map(|l| c.convert(l))
            .map(|e| match e {
                Event::Irq {
                    t,
                    cpu,
                    irq,
                    duration,
                    ..
                } => (cpu, irq, t, duration),
                e => panic!("{e:?}"),
            })
            .collect();
        assert_eq!(
            out,
            [
                (0, 24, 200, 10),
                (1, SOFTIRQ_BASE + NET_TX_SOFTIRQ, 150, 110),
                (0, SOFTIRQ_BASE + NET_RX_SOFTIRQ, 100, 300),
            ]
        );
    }

    #[test]
    fn new_tasks_and_renames_name_threads_and_processes() {
        let clock = AgentClock {
            start_mono_ns: 0,
            start_wall_ns: 0,
        };
        let mut c = Converter::new(clock, &[], &[]);
        assert!(c.follow(100, 100));
        assert!(!c.follow(100, 100));
        let task = |e: Option<Event>| match e {
            Some(Event::Task { tid, pid, comm, .. }) => (tid, pid, comm),
            e => panic!("{e:?}"),
        };
        // A thread of 100, a child process of that thread, its exec.
        let thread = TraceLine::NewTask {
            mono: 10,
            parent: 100,
            tid: 101,
            comm: comm_array("app"),
            flags: CLONE_THREAD | 0x0f00,
        };
        assert_eq!(task(c.convert(thread)), (101, 100, "app".into()));
        let child = TraceLine::NewTask {
            mono: 20,
            parent: 101,
            tid: 200,
            comm: comm_array("app"),
            flags: 0x11,
        };
        assert_eq!(task(c.convert(child)), (200, 200, "app".into()));
        let exec = TraceLine::Rename {
            mono: 30,
            tid: 200,
            comm: comm_array("a-very-long-program-name"),
        };
        assert_eq!(
            task(c.convert(exec.clone())),
            (200, 200, "a-very-long-pro".into())
        );
        // A rename of a thread nobody follows says nothing.
        let other = TraceLine::Rename {
            mono: 40,
            tid: 999,
            comm: comm_array("x"),
        };
        assert!(c.convert(other).is_none());
        // Ended threads are forgotten: nothing more is said of them.
        c.retain_tasks(&|tid| tid != 200);
        assert!(c.convert(exec).is_none());
        let l = "  bash-4242 [001] ..... 77.000001: task_newtask: pid=4300 comm=bash clone_flags=1200011 oom_score_adj=0";
        assert_eq!(
            parse_line(l),
            Some(TraceLine::NewTask {
                mono: 77_000_001_000,
                parent: 4242,
                tid: 4300,
                comm: comm_array("bash"),
                flags: 0x1200011
            })
        );
        let r = "  sh-4300 [000] ..... 77.5: task_rename: pid=4300 oldcomm=bash newcomm=sleep oom_score_adj=0";
        assert_eq!(
            parse_line(r),
            Some(TraceLine::Rename {
                mono: 77_500_000_000,
                tid: 4300,
                comm: comm_array("sleep")
            })
        );
    }
}
