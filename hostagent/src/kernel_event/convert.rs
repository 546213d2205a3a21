//! Turning trace records into wire events on the agent's clock.

use super::{TraceLine, comm_string};
use crate::clock::AgentClock;
use p5_wire::Event;
use p5_wire::event::SOFTIRQ_BASE;
use std::collections::{HashMap, HashSet};

/// `clone` flag: the new task is a thread of its creator's process.
pub(super) const CLONE_THREAD: u64 = 0x0001_0000;

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
