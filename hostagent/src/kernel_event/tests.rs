//! The converter: filtering, pairing per CPU, task names, time mapping.

use super::convert::CLONE_THREAD;
use super::*;
use crate::clock::AgentClock;
use p5_wire::Event;
use p5_wire::event::{NET_RX_SOFTIRQ, NET_TX_SOFTIRQ, SOFTIRQ_BASE};

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
