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
//!
//! Here: the configuration, the batches handed to the sampling loop and [`run`]; the loop's
//! state in `monitor`. The trace records and their conversion are in [`crate::kernel_event`],
//! below both this module and the tracefs session ([`crate::kernel_trace`]); they are
//! re-exported here.

use crate::clock::AgentClock;
use crate::proc_stat;
use crate::sample::ProcessFinder;
use monitor::{Monitor, Waker};
use p5_wire::Event;
use p5_wire::data::Name;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

mod monitor;
#[cfg(test)]
mod tests;

/// Stream name in tracefs mode.
pub const TRACEFS_STREAM_NAME: &str = "os monitor: tracefs sched_switch/sched_wakeup/irq_handler/softirq, mono clock, 1 ns resolution";
/// Stream name in tracefs mode when only the text pipe could be used.
pub const TRACEFS_TEXT_STREAM_NAME: &str = "os monitor: tracefs sched_switch/sched_wakeup/irq_handler/softirq, mono clock, 1 us resolution";
/// Stream name in the fallback mode.
pub const PROC_STREAM_NAME: &str =
    "os monitor (lower fidelity): /proc per-thread CPU time sampling, 10 ms ticks";

/// How softirqs are numbered in `Event::Irq` (defined with the wire format).
pub use p5_wire::event::{NET_RX_SOFTIRQ, NET_TX_SOFTIRQ, SOFTIRQ_BASE};

pub use crate::kernel_trace::{BindWatch, TraceSession};

/// The trace records and their conversion, defined below both the monitor and the session.
pub use crate::kernel_event::{
    Converter, INSTANCE_PREFIX, NET_SOFTIRQS, TraceLine, comm_array, parse_line,
};

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
