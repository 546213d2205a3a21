//! The kernel trace records the OS monitor reads, below both the tracefs session
//! ([`crate::kernel_trace`]) and the monitor ([`crate::osmon`]): a record as one
//! [`TraceLine`] whether it came as text from `trace_pipe` ([`parse_line`]) or as a binary
//! ring-buffer record, and the [`Converter`] that turns records into wire events on the
//! agent's clock. Also the names both sides agree on: the trace instances' prefix and the
//! softirq vectors traced.

use p5_wire::event::{NET_RX_SOFTIRQ, NET_TX_SOFTIRQ};

mod convert;
mod parse;
#[cfg(test)]
mod tests;

pub use convert::Converter;
pub use parse::parse_line;

/// Trace instances are named this plus the agent's pid.
pub const INSTANCE_PREFIX: &str = "p5-hostagent-";

/// The softirq vectors the OS monitor traces.
pub const NET_SOFTIRQS: [u32; 2] = [NET_TX_SOFTIRQ, NET_RX_SOFTIRQ];

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

/// A NUL-padded kernel task name as a string (lossy for invalid UTF-8).
pub(crate) fn comm_string(c: &[u8; 16]) -> String {
    let end = c.iter().position(|&b| b == 0).unwrap_or(c.len());
    String::from_utf8_lossy(&c[..end]).into_owned()
}
