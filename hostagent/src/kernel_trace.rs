//! The OS monitor's tracefs session: which kernel events it records, in which instances, and
//! how it follows processes.
//!
//! Two private instances ([`crate::tracefs::Instance`]), both with `trace_clock=mono`:
//!
//! - `p5-hostagent-PID` records `sched_switch`, `sched_wakeup`, `sched_wakeup_new` (a new
//!   thread's first wakeup, recorded like any other), `task_newtask` and `task_rename` of
//!   the followed threads. The kernel filters them by `set_event_pid` with
//!   `options/event-fork` on: every thread and child process a followed thread creates joins
//!   the list at `fork`/`clone` (and leaves it at exit), so a process tree is followed from
//!   the instant its root is added, instrumented or not — `p5 record` adds the program's pid
//!   before the program runs. `sched_switch` is kept when either side is followed,
//!   `sched_wakeup` when the waker or the woken thread is. `task_newtask` (with its clone
//!   flags: a thread or a process) and `task_rename` (exec, `PR_SET_NAME`) become
//!   [`Event::Task`] records, so the merge can name processes that never announced
//!   themselves.
//! - `p5-hostagent-PID-irq` records the chosen IRQ lines and the network softirqs. These run
//!   on behalf of whoever was interrupted, so they must not be pid-filtered: hence a second
//!   instance.
//!
//! The session is created once (the instances and their buffers cost a few milliseconds) and
//! then paused and resumed: while nothing is followed, the sched events are off, the pid list
//! is empty and the IRQ instance does not trace. Resuming is a few writes to control files.
//!
//! [`BindWatch`] is how a standalone agent learns of an instrumented process at once: the
//! runtimes announce themselves by binding an abstract unix socket, so a third instance
//! (`p5-hostagent-PID-watch`) traces successful `bind` calls system-wide (rare) and a thread
//! waiting in `poll` on its pipe (`buffer_percent` 0: woken by every event) wakes the OS
//! monitor, which then reads `/proc/net/unix` at once instead of at its next scan.

use crate::clock::AgentClock;
use crate::kernel_event::{Converter, INSTANCE_PREFIX, NET_SOFTIRQS, TraceLine, parse_line};
use crate::ringbuf::{Layouts, RawEvent, decode_page};
use crate::tracefs::{self, Instance, TraceError};
use p5_wire::Event;
use std::collections::HashSet;
use std::io::Read as _;
use std::os::fd::AsRawFd as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

/// The events of the followed threads (filtered by `set_event_pid`).
const SCHED_EVENTS: [&str; 5] = [
    "sched/sched_switch",
    "sched/sched_wakeup",
    "sched/sched_wakeup_new",
    "task/task_newtask",
    "task/task_rename",
];

/// Events without which the monitor cannot follow scheduling; the others (a new thread's
/// first wakeup, names) are missing from some kernels and only lose detail.
fn required(event: &str) -> bool {
    matches!(event, "sched/sched_switch" | "sched/sched_wakeup")
}

/// How an instance is read.
#[derive(Debug)]
enum Source {
    /// Binary per-CPU pages (`per_cpu/cpuN/trace_pipe_raw`): ns resolution, cheapest.
    Raw {
        cpus: Vec<(u32, std::fs::File)>,
        layouts: Box<Layouts>,
        page: Vec<u8>,
    },
    /// Text (`trace_pipe`): µs resolution; used where the binary layout is unknown.
    Text {
        pipe: std::fs::File,
        partial: Vec<u8>,
    },
}

/// One instance and its reader.
#[derive(Debug)]
struct Reader {
    // Field order matters: the pipes must be closed before the instance is removed.
    source: Source,
    inst: Instance,
}

fn read_nonblocking(f: &mut std::fs::File, buf: &mut [u8]) -> Result<usize, TraceError> {
    loop {
        return match f.read(buf) {
            Ok(n) => Ok(n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(0),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => Err(TraceError::Io {
                path: "trace pipe".into(),
                cause: e,
            }),
        };
    }
}

fn layouts(root: &Path) -> Layouts {
    let fmt = |e: &str| std::fs::read_to_string(root.join("events").join(e).join("format")).ok();
    let (sw, wk) = (fmt("sched/sched_switch"), fmt("sched/sched_wakeup"));
    let (ie, ix) = (fmt("irq/irq_handler_entry"), fmt("irq/irq_handler_exit"));
    let (se, sx) = (fmt("irq/softirq_entry"), fmt("irq/softirq_exit"));
    let (nt, rn) = (fmt("task/task_newtask"), fmt("task/task_rename"));
    let wn = fmt("sched/sched_wakeup_new");
    Layouts::from_formats(
        sw.as_deref(),
        wk.as_deref(),
        ie.as_deref(),
        ix.as_deref(),
        se.as_deref(),
        sx.as_deref(),
    )
    .with_tasks(nt.as_deref(), rn.as_deref())
    .with_wakeup_new(wn.as_deref())
}

impl Reader {
    /// Opens the per-CPU binary pipes when the layouts can decode `sched_switch`, else the
    /// text pipe.
    fn open(inst: Instance, layouts: &Layouts) -> Result<Self, TraceError> {
        let raw = if layouts.has_switch() {
            inst.raw_pipes().ok()
        } else {
            None
        };
        let source = match raw {
            Some(cpus) => {
                // SAFETY: sysconf has no preconditions.
                let ps = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
                Source::Raw {
                    cpus,
                    layouts: Box::new(layouts.clone()),
                    page: vec![0u8; if ps > 0 { ps as usize } else { 4096 }],
                }
            }
            None => Source::Text {
                pipe: inst.pipe()?,
                partial: Vec::new(),
            },
        };
        Ok(Self { source, inst })
    }

    /// Appends what the kernel has buffered; returns (undecoded records, lost pages).
    fn read(&mut self, out: &mut Vec<TraceLine>) -> Result<(u64, u64), TraceError> {
        let (mut other, mut lost) = (0, 0);
        match &mut self.source {
            Source::Raw {
                cpus,
                layouts,
                page,
            } => {
                let mut evs = Vec::new();
                for (cpu, f) in cpus.iter_mut() {
                    loop {
                        let n = read_nonblocking(f, page)?;
                        if n == 0 {
                            break;
                        }
                        evs.clear();
                        let st = decode_page(&page[..n], layouts, &mut evs);
                        other += st.other;
                        lost += u64::from(st.missed);
                        out.extend(evs.iter().map(|e| raw_to_line(*cpu, *e)));
                    }
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
                        Some(l) => out.push(l),
                        None => other += 1,
                    }
                }
            }
        }
        Ok((other, lost))
    }
}

/// A tracefs session: the followed threads' scheduling and the chosen interrupts.
#[derive(Debug)]
pub struct TraceSession {
    sched: Reader,
    irq: Option<Reader>,
    conv: Converter,
    clock: AgentClock,
    softirqs: bool,
    /// Threads written to `set_event_pid` (the kernel adds their children itself).
    added: HashSet<u32>,
    active: bool,
    lines: Vec<TraceLine>,
    /// Records that were not decoded (other events, text lines of another shape).
    pub unparsed: u64,
    /// Pages the kernel flagged as preceded by lost events (buffer overrun).
    pub lost_pages: u64,
}

fn new_instance(root: &Path, suffix: &str) -> Result<Instance, TraceError> {
    let inst = Instance::create(
        root,
        &format!("{INSTANCE_PREFIX}{}{suffix}", std::process::id()),
    )?;
    inst.write("tracing_on", "0")?;
    inst.set_clock("mono")?;
    inst.write("trace", "")?;
    Ok(inst)
}

/// The IRQ instance, or None when neither IRQ lines nor softirqs are wanted (or the softirq
/// events are missing and there are no lines). Returns whether softirqs are traced.
fn irq_instance(
    root: &Path,
    irqs: &[u32],
    net_softirqs: bool,
) -> Result<(Option<Instance>, bool), TraceError> {
    if irqs.is_empty() && !net_softirqs {
        return Ok((None, false));
    }
    let inst = new_instance(root, "-irq")?;
    inst.write("buffer_size_kb", "1024")?;
    if !irqs.is_empty() {
        let f = tracefs::or_filter("irq", irqs);
        inst.event("irq/irq_handler_entry", f.as_deref(), true)?;
        inst.event("irq/irq_handler_exit", f.as_deref(), true)?;
    }
    let mut softirqs = false;
    if net_softirqs {
        let f = tracefs::or_filter("vec", &NET_SOFTIRQS);
        let on = inst
            .event("irq/softirq_entry", f.as_deref(), true)
            .and_then(|()| inst.event("irq/softirq_exit", f.as_deref(), true));
        match on {
            Ok(()) => softirqs = true,
            Err(e) => {
                tracing::warn!("os monitor: network softirqs not traced: {e}");
                let _ = inst.event("irq/softirq_entry", None, false);
            }
        }
    }
    Ok(((!irqs.is_empty() || softirqs).then_some(inst), softirqs))
}

impl TraceSession {
    /// Creates the instances (mono clock), sets the IRQ lines, the network softirqs if
    /// `net_softirqs` (a kernel without softirq events traces the rest) and `event-fork`, and
    /// opens the pipes. Nothing is traced until threads are followed.
    pub fn start(clock: AgentClock, irqs: &[u32], net_softirqs: bool) -> Result<Self, TraceError> {
        let root = tracefs::find_or_mount()?;
        tracefs::remove_stale_instances(&root, INSTANCE_PREFIX);
        let layouts = layouts(&root);
        let sched = new_instance(&root, "")?;
        sched.write("buffer_size_kb", "4096")?;
        sched.write("set_event_pid", "")?;
        sched.write("options/event-fork", "1")?;
        for e in SCHED_EVENTS {
            // task_* events are missing from some kernels: then no names for children.
            if let Err(err) = sched.event(e, None, false)
                && required(e)
            {
                return Err(err);
            }
        }
        let sched = Reader::open(sched, &layouts)?;
        let (irq, softirqs) = irq_instance(&root, irqs, net_softirqs)?;
        let irq = irq.map(|i| Reader::open(i, &layouts)).transpose()?;
        Ok(Self {
            sched,
            irq,
            conv: Converter::new(clock, irqs, if softirqs { &NET_SOFTIRQS } else { &[] }),
            clock,
            softirqs,
            added: HashSet::new(),
            active: false,
            lines: Vec::new(),
            unparsed: 0,
            lost_pages: 0,
        })
    }

    /// True if reading binary pages (ns resolution), false for the text pipe (µs).
    pub fn is_binary(&self) -> bool {
        matches!(self.sched.source, Source::Raw { .. })
    }

    /// True if the network softirqs are traced.
    pub fn traces_softirqs(&self) -> bool {
        self.softirqs
    }

    /// True while threads are followed.
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// Follows threads `(pid, tid)` and, from now on, every thread and process they create.
    /// Threads followed already are skipped. Returns a [`Event::Task`] for each new one
    /// (named from `/proc`). The first call turns tracing on.
    pub fn follow(&mut self, tasks: &[(u32, u32)]) -> Result<Vec<Event>, TraceError> {
        let new: Vec<(u32, u32)> = tasks
            .iter()
            .copied()
            .filter(|(_, tid)| !self.added.contains(tid))
            .collect();
        if new.is_empty() {
            return Ok(Vec::new());
        }
        let list: Vec<String> = new.iter().map(|(_, tid)| tid.to_string()).collect();
        self.sched.inst.append("set_event_pid", &list.join(" "))?;
        if !self.active {
            for e in SCHED_EVENTS {
                if let Err(err) = self.sched.inst.event(e, None, true)
                    && required(e)
                {
                    return Err(err);
                }
            }
            self.sched.inst.write("tracing_on", "1")?;
            if let Some(i) = &self.irq {
                i.inst.write("tracing_on", "1")?;
            }
            self.active = true;
        }
        let t = self.clock.now_ns();
        let mut out = Vec::new();
        for (pid, tid) in new {
            self.added.insert(tid);
            if self.conv.follow(pid, tid) {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
                    .unwrap_or_default();
                let comm = comm.trim_end().to_owned();
                out.push(Event::Task { t, tid, pid, comm });
            }
        }
        Ok(out)
    }

    /// Stops tracing and forgets the followed threads (events already buffered are still
    /// read by [`TraceSession::drain`]).
    pub fn pause(&mut self) -> Result<(), TraceError> {
        if !self.active {
            return Ok(());
        }
        self.active = false;
        self.added.clear();
        self.conv.forget_tasks();
        for e in SCHED_EVENTS {
            let _ = self.sched.inst.event(e, None, false);
        }
        self.sched.inst.write("set_event_pid", "")?;
        if let Some(i) = &self.irq {
            i.inst.write("tracing_on", "0")?;
        }
        Ok(())
    }

    /// Forgets the followed threads that ended (the kernel drops them from its list itself).
    pub fn forget_ended(&mut self) {
        let alive = |tid: u32| Path::new(&format!("/proc/{tid}")).exists();
        self.added.retain(|&tid| alive(tid));
        self.conv.retain_tasks(&alive);
    }

    /// Follows exactly these threads (each its own process unless `/proc` says otherwise)
    /// and their descendants; an empty list pauses.
    pub fn set_tids(&mut self, tids: &[u32]) -> Result<(), TraceError> {
        if tids.is_empty() {
            return self.pause();
        }
        let tasks: Vec<(u32, u32)> = tids
            .iter()
            .map(|&tid| (crate::proc_stat::tgid(tid).unwrap_or(tid), tid))
            .collect();
        self.follow(&tasks).map(drop)
    }

    /// Reads what the kernel has buffered and appends the converted events (in time order).
    pub fn drain(&mut self, out: &mut Vec<Event>) -> Result<(), TraceError> {
        self.lines.clear();
        let (o, l) = self.sched.read(&mut self.lines)?;
        self.unparsed += o;
        self.lost_pages += l;
        if let Some(i) = self.irq.as_mut() {
            let (o, l) = i.read(&mut self.lines)?;
            self.unparsed += o;
            self.lost_pages += l;
        }
        self.lines.sort_by_key(TraceLine::mono);
        for l in self.lines.drain(..) {
            out.extend(self.conv.convert(l));
        }
        Ok(())
    }
}

/// The [`TraceLine`] of a binary record read on `cpu`.
pub fn raw_to_line(cpu: u32, e: RawEvent) -> TraceLine {
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
        RawEvent::NewTask {
            ts,
            parent,
            tid,
            comm,
            flags,
        } => TraceLine::NewTask {
            mono: ts,
            parent,
            tid,
            comm,
            flags,
        },
        RawEvent::Rename { ts, tid, comm } => TraceLine::Rename {
            mono: ts,
            tid,
            comm,
        },
    }
}

/// Wakes the OS monitor when any process binds a socket (see the module docs).
#[derive(Debug)]
pub struct BindWatch {
    inst: Instance,
}

impl BindWatch {
    /// Creates the watch instance (needs tracefs and the `sys_exit_bind` event).
    pub fn start() -> Result<Self, TraceError> {
        let root = tracefs::find_or_mount()?;
        let inst = new_instance(&root, "-watch")?;
        inst.write("buffer_size_kb", "16")?;
        inst.write("buffer_percent", "0")?;
        inst.event("syscalls/sys_exit_bind", Some("ret == 0"), true)?;
        inst.write("tracing_on", "1")?;
        Ok(Self { inst })
    }

    /// Sends `()` on `wake` after every successful `bind` until `stop` is set (checked every
    /// 100 ms) or the receiver is gone.
    pub fn run(&self, wake: &mpsc::Sender<()>, stop: &AtomicBool) {
        let mut pipe = match self.inst.pipe() {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("os monitor: bind watch: {e}");
                return;
            }
        };
        let mut buf = [0u8; 4096];
        while !stop.load(Ordering::Acquire) {
            let mut pfd = libc::pollfd {
                fd: pipe.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd for the duration of the call.
            let n = unsafe { libc::poll(&mut pfd, 1, 100) };
            if n <= 0 {
                continue;
            }
            let mut any = false;
            while let Ok(k) = read_nonblocking(&mut pipe, &mut buf) {
                if k == 0 {
                    break;
                }
                any = true;
            }
            if any && wake.send(()).is_err() {
                return;
            }
        }
    }
}
