//! The OS monitor (CoSMoS §2.3): when the scheduler put the monitored processes' threads on
//! and off the CPUs, when they were woken, when the chosen interrupt lines (the NIC's by
//! default) were served, and when the kernel did network work in the NET_RX / NET_TX softirqs
//! (on loopback, where no NIC interrupt fires, that is where packets are sent and received).
//!
//! With tracefs (root) it records `sched_switch` and `sched_wakeup` for the monitored threads,
//! `irq_handler_entry`/`exit` (paired per CPU into one interval) for the chosen IRQs and
//! `softirq_entry`/`exit` (paired the same way, in a slot of their own, since a hard IRQ can
//! arrive inside a softirq) for the network softirqs, as `Irq` events numbered
//! [`SOFTIRQ_BASE`]` + vector`, all with `trace_clock=mono`: a kernel time maps exactly to the
//! agent's relative time (`t − start_mono_ns`, the agent's Hello carries `start_mono_ns`), and
//! so onto every process's clock on the same host. Kernel filters limit what is traced; the
//! same filter runs again in user space. Records are read as binary per-CPU ring-buffer pages
//! ([`crate::ringbuf`], nanosecond timestamps, no formatting in the kernel); where an event's
//! binary layout cannot be read the text `trace_pipe` (microsecond resolution) is used.
//!
//! Without tracefs it falls back to sampling each monitored thread's CPU time from
//! `/proc/PID/task/TID/stat` every interval (`Counter` events `thread.PID.TID.cpu_ns_total`,
//! 10 ms kernel tick granularity); the stream's name says it is lower fidelity.
//!
//! Tracing starts when the first monitored process appears and stops (the trace instance is
//! removed) after the last one ended.

use crate::clock::AgentClock;
use crate::metric::metric_id;
use crate::proc_stat;
use crate::ringbuf::{Layouts, RawEvent, decode_page};
use crate::sample::ProcessFinder;
use crate::tracefs::{self, Instance, TraceError};
use p5_wire::Event;
use p5_wire::data::Name;
use std::collections::{HashMap, HashSet};
use std::io::Read as _;
use std::path::Path;
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
    let (cpu, after) = loop {
        let open = i + line.get(i..)?.find('[')?;
        let close = open + line.get(open..)?.find(']')?;
        let inner = line.get(open + 1..close)?;
        if !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_digit()) {
            break (inner.parse::<u32>().ok()?, close + 1);
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
        "sched_wakeup" => TraceLine::Wakeup {
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
        _ => return None,
    })
}

/// Turns trace lines into wire events: user-space filtering by thread, IRQ and softirq
/// vector, pairing of entry/exit per CPU (hard IRQs and softirqs in separate slots: a hard
/// IRQ may interrupt a softirq), mapping of kernel times onto the agent's clock.
#[derive(Debug)]
pub struct Converter {
    clock: AgentClock,
    tids: HashSet<u32>,
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
            tids: HashSet::new(),
            irqs: irqs.iter().copied().collect(),
            softirqs: softirqs.iter().copied().collect(),
            irq_open: HashMap::new(),
            softirq_open: HashMap::new(),
        }
    }

    /// The monitored threads.
    pub fn set_tids(&mut self, tids: &[u32]) {
        self.tids = tids.iter().copied().collect();
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
            } if self.tids.contains(&prev_tid) || self.tids.contains(&next_tid) => {
                Some(Event::Switch {
                    t: self.clock.from_mono(mono),
                    cpu,
                    prev_tid,
                    prev_state,
                    next_tid,
                })
            }
            TraceLine::Wakeup { mono, cpu, tid } if self.tids.contains(&tid) => {
                Some(Event::Wakeup {
                    t: self.clock.from_mono(mono),
                    cpu,
                    tid,
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

/// How a session reads the kernel's buffer.
#[derive(Debug)]
enum Source {
    /// Binary per-CPU pages (`per_cpu/cpuN/trace_pipe_raw`): ns resolution, cheapest.
    Raw {
        cpus: Vec<(u32, std::fs::File)>,
        layouts: Box<Layouts>,
        page: Vec<u8>,
        scratch: Vec<(u32, RawEvent)>,
    },
    /// Text (`trace_pipe`): µs resolution; used where the binary layout is unknown.
    Text {
        pipe: std::fs::File,
        partial: Vec<u8>,
    },
}

/// A running tracefs session for a set of threads and IRQ lines.
#[derive(Debug)]
pub struct TraceSession {
    // Field order matters: the pipes must be closed before the instance is removed.
    source: Source,
    inst: Instance,
    conv: Converter,
    softirqs: bool,
    tids: Vec<u32>,
    /// Records that were not decoded (other events, text lines of another shape).
    pub unparsed: u64,
    /// Pages the kernel flagged as preceded by lost events (buffer overrun).
    pub lost_pages: u64,
}

fn read_nonblocking(f: &mut std::fs::File, buf: &mut [u8]) -> Result<usize, TraceError> {
    loop {
        return match f.read(buf) {
            Ok(n) => Ok(n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(0),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => Err(TraceError::Io {
                path: "trace pipe".into(),
                source: e,
            }),
        };
    }
}

fn raw_source(root: &Path, inst: &Instance) -> Option<Source> {
    let fmt = |e: &str| std::fs::read_to_string(root.join("events").join(e).join("format")).ok();
    let (sw, wk) = (fmt("sched/sched_switch"), fmt("sched/sched_wakeup"));
    let (ie, ix) = (fmt("irq/irq_handler_entry"), fmt("irq/irq_handler_exit"));
    let (se, sx) = (fmt("irq/softirq_entry"), fmt("irq/softirq_exit"));
    let layouts = Layouts::from_formats(
        sw.as_deref(),
        wk.as_deref(),
        ie.as_deref(),
        ix.as_deref(),
        se.as_deref(),
        sx.as_deref(),
    );
    if !layouts.has_switch() {
        return None;
    }
    let cpus = inst.raw_pipes().ok()?;
    // SAFETY: sysconf has no preconditions.
    let ps = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(Source::Raw {
        cpus,
        layouts: Box::new(layouts),
        page: vec![0u8; if ps > 0 { ps as usize } else { 4096 }],
        scratch: Vec::new(),
    })
}

impl TraceSession {
    /// Creates the instance, sets the mono clock, enables the IRQ events, the network softirq
    /// events if `net_softirqs` (and the sched events once threads are set) and opens the
    /// per-CPU binary pipes (or the text pipe). A kernel without softirq events traces the
    /// rest.
    pub fn start(clock: AgentClock, irqs: &[u32], net_softirqs: bool) -> Result<Self, TraceError> {
        let root = tracefs::find_or_mount()?;
        tracefs::remove_stale_instances(&root, INSTANCE_PREFIX);
        let inst = Instance::create(&root, &format!("{INSTANCE_PREFIX}{}", std::process::id()))?;
        inst.write("tracing_on", "0")?;
        inst.set_clock("mono")?;
        inst.write("buffer_size_kb", "4096")?;
        inst.write("trace", "")?;
        if !irqs.is_empty() {
            let f = tracefs::or_filter("irq", irqs);
            inst.event("irq/irq_handler_entry", f.as_deref(), true)?;
            inst.event("irq/irq_handler_exit", f.as_deref(), true)?;
        }
        let mut softirqs: &[u32] = &[];
        if net_softirqs {
            let f = tracefs::or_filter("vec", &NET_SOFTIRQS);
            let on = inst
                .event("irq/softirq_entry", f.as_deref(), true)
                .and_then(|()| inst.event("irq/softirq_exit", f.as_deref(), true));
            match on {
                Ok(()) => softirqs = &NET_SOFTIRQS,
                Err(e) => {
                    tracing::warn!("os monitor: network softirqs not traced: {e}");
                    let _ = inst.event("irq/softirq_entry", None, false);
                }
            }
        }
        inst.write("tracing_on", "1")?;
        let source = match raw_source(&root, &inst) {
            Some(s) => s,
            None => Source::Text {
                pipe: inst.pipe()?,
                partial: Vec::new(),
            },
        };
        Ok(Self {
            source,
            inst,
            conv: Converter::new(clock, irqs, softirqs),
            softirqs: !softirqs.is_empty(),
            tids: Vec::new(),
            unparsed: 0,
            lost_pages: 0,
        })
    }

    /// True if reading binary pages (ns resolution), false for the text pipe (µs).
    pub fn is_binary(&self) -> bool {
        matches!(self.source, Source::Raw { .. })
    }

    /// True if the network softirqs are traced.
    pub fn traces_softirqs(&self) -> bool {
        self.softirqs
    }

    /// Sets the monitored threads (updates the kernel filters when the set changed).
    pub fn set_tids(&mut self, tids: &[u32]) -> Result<(), TraceError> {
        let mut t = tids.to_vec();
        t.sort_unstable();
        if t == self.tids {
            return Ok(());
        }
        self.conv.set_tids(&t);
        let on = !t.is_empty();
        let sw = tracefs::or_filter("prev_pid", &t).map(|a| {
            let b = tracefs::or_filter("next_pid", &t).unwrap_or_default();
            format!("{a} || {b}")
        });
        self.inst.event("sched/sched_switch", sw.as_deref(), on)?;
        let wk = tracefs::or_filter("pid", &t);
        self.inst.event("sched/sched_wakeup", wk.as_deref(), on)?;
        self.tids = t;
        Ok(())
    }

    /// Reads what the kernel has buffered and appends the converted events (in time order).
    pub fn drain(&mut self, out: &mut Vec<Event>) -> Result<(), TraceError> {
        match &mut self.source {
            Source::Raw {
                cpus,
                layouts,
                page,
                scratch,
            } => {
                scratch.clear();
                let mut evs = Vec::new();
                for (cpu, f) in cpus.iter_mut() {
                    loop {
                        let n = read_nonblocking(f, page)?;
                        if n == 0 {
                            break;
                        }
                        evs.clear();
                        let st = decode_page(&page[..n], layouts, &mut evs);
                        self.unparsed += st.other;
                        self.lost_pages += st.missed as u64;
                        scratch.extend(evs.iter().map(|e| (*cpu, *e)));
                    }
                }
                scratch.sort_by_key(|(_, e)| raw_ts(e));
                for (cpu, e) in scratch.iter() {
                    out.extend(self.conv.convert(raw_to_line(*cpu, *e)));
                }
            }
            Source::Text { pipe, partial } => {
                let mut buf = [0u8; 64 * 1024];
                loop {
                    let n = read_nonblocking(pipe, &mut buf)?;
                    if n == 0 {
                        break;
                    }
                    partial.extend_from_slice(&buf[..n]);
                }
                let end = partial
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1);
                let text: Vec<u8> = partial.drain(..end).collect();
                for line in String::from_utf8_lossy(&text).lines() {
                    match parse_line(line) {
                        Some(l) => out.extend(self.conv.convert(l)),
                        None => self.unparsed += 1,
                    }
                }
            }
        }
        Ok(())
    }
}

fn raw_ts(e: &RawEvent) -> u64 {
    match *e {
        RawEvent::Switch { ts, .. }
        | RawEvent::Wakeup { ts, .. }
        | RawEvent::IrqEntry { ts, .. }
        | RawEvent::IrqExit { ts, .. }
        | RawEvent::SoftirqEntry { ts, .. }
        | RawEvent::SoftirqExit { ts, .. } => ts,
    }
}

fn raw_to_line(cpu: u32, e: RawEvent) -> TraceLine {
    match e {
        RawEvent::Switch {
            ts,
            prev_tid,
            prev_state,
            next_tid,
        } => TraceLine::Switch {
            mono: ts,
            cpu,
            prev_tid,
            prev_state,
            next_tid,
        },
        RawEvent::Wakeup {
            ts,
            tid,
            target_cpu,
        } => TraceLine::Wakeup {
            mono: ts,
            cpu: target_cpu,
            tid,
        },
        RawEvent::IrqEntry { ts, irq } => TraceLine::IrqEntry { mono: ts, cpu, irq },
        RawEvent::IrqExit { ts, irq, ret } => TraceLine::IrqExit {
            mono: ts,
            cpu,
            irq,
            handled: ret != 0,
        },
        RawEvent::SoftirqEntry { ts, vec } => TraceLine::SoftirqEntry { mono: ts, cpu, vec },
        RawEvent::SoftirqExit { ts, vec } => TraceLine::SoftirqExit { mono: ts, cpu, vec },
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

fn all_tids(pids: &[u32]) -> Vec<u32> {
    let mut v: Vec<u32> = pids.iter().flat_map(|&p| proc_stat::threads(p)).collect();
    v.sort_unstable();
    v
}

/// Runs the OS monitor until `stop`; reports its state through `state`. While `recording()`
/// is false (`hostagent ctl stop`) it monitors nothing, as if no process were monitored.
pub fn run(
    mut cfg: OsmonConfig,
    tx: mpsc::Sender<OsmonBatch>,
    stop: &AtomicBool,
    recording: &dyn Fn() -> bool,
    state: &dyn Fn(String),
) {
    let irqs = cfg.irqs.clone().unwrap_or_else(default_irqs);
    let mut session: Option<TraceSession> = None;
    let mut fallback = cfg.force_proc;
    let mut active = false;
    let mut named: Option<&str> = None;
    let mut last_tids = Instant::now() - Duration::from_secs(10);
    let mut declared = HashSet::new();
    let ns_per_tick = 1_000_000_000 / proc_stat::clock_ticks();
    state("waiting for a monitored process".into());
    while !stop.load(Ordering::Acquire) {
        let pids = if recording() {
            cfg.finder.pids().to_vec()
        } else {
            Vec::new()
        };
        let mut batch = OsmonBatch::default();
        if pids.is_empty() {
            if active {
                session = None;
                active = false;
                tracing::info!(
                    "os monitor: no monitored process (or recording stopped): monitoring stopped"
                );
                state("waiting for a monitored process".into());
            }
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        if !active {
            active = true;
            if !fallback {
                match TraceSession::start(cfg.clock, &irqs, cfg.net_softirqs) {
                    Ok(s) => {
                        let soft = if s.traces_softirqs() {
                            ", net softirqs"
                        } else {
                            ""
                        };
                        tracing::info!(?irqs, soft, "os monitor: tracing with tracefs");
                        state(format!("tracefs (irqs {irqs:?}{soft})"));
                        session = Some(s);
                        last_tids = Instant::now() - Duration::from_secs(10);
                    }
                    Err(e) => {
                        tracing::warn!(
                            "os monitor: {e}; falling back to /proc sampling (lower fidelity)"
                        );
                        fallback = true;
                    }
                }
            }
            if fallback {
                state("proc sampling (lower fidelity)".into());
            }
        }
        let mode_name = match &session {
            _ if fallback => PROC_STREAM_NAME,
            Some(s) if s.is_binary() => TRACEFS_STREAM_NAME,
            _ => TRACEFS_TEXT_STREAM_NAME,
        };
        if named != Some(mode_name) {
            named = Some(mode_name);
            batch.stream_name = Some(mode_name.to_owned());
        }
        if let Some(s) = session.as_mut() {
            if last_tids.elapsed() >= Duration::from_millis(100) {
                last_tids = Instant::now();
                if let Err(e) = s.set_tids(&all_tids(&pids)) {
                    tracing::warn!("os monitor: cannot update filters: {e}");
                }
            }
            if let Err(e) = s.drain(&mut batch.events) {
                tracing::warn!("os monitor: {e}; falling back to /proc sampling (lower fidelity)");
                session = None;
                fallback = true;
                state("proc sampling (lower fidelity)".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        } else {
            let t = cfg.clock.now_ns();
            for &pid in &pids {
                for tid in proc_stat::threads(pid) {
                    let Some(st) = proc_stat::read_task_stat(pid, Some(tid)) else {
                        continue;
                    };
                    let name = format!("thread.{pid}.{tid}.cpu_ns_total");
                    let id = metric_id(&name);
                    if declared.insert(id) {
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
                            .saturating_mul(ns_per_tick)
                            .min(i64::MAX as u64) as i64,
                    });
                }
            }
            std::thread::sleep(cfg.interval);
        }
        if (batch.stream_name.is_some() || !batch.events.is_empty()) && tx.send(batch).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        c.set_tids(&[5]);
        let sw = |p, n| TraceLine::Switch {
            mono: 3_000,
            cpu: 0,
            prev_tid: p,
            prev_state: b'S',
            next_tid: n,
        };
        assert!(c.convert(sw(1, 2)).is_none());
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
}
