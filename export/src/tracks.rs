//! The track tree: hosts, processes, threads and the tracks under them, with their uuids and
//! the pids and tids Perfetto sees.
//!
//! - A **process** is a process track (`ProcessDescriptor`): its name is `program @ host`,
//!   its labels `host=…`, `pid=…` (the real one), `runtime=…`; a **thread** is a thread
//!   track (`ThreadDescriptor`) carrying its function calls, with child tracks `states`
//!   (thread states, where the message flows start and end), `on CPU` (`sched`) and `marks`.
//! - A **host** is a plain track `host NAME` grouping what belongs to the machine: one
//!   `cpu N` track per CPU for the on-CPU stretches of threads p5 did not record, one
//!   `irq cpu N` per CPU, and its metrics as counter tracks. Application counters are
//!   counter tracks under their process.
//! - **Pids and tids**: Perfetto has one pid and one tid namespace per trace, p5 one per
//!   host. A process keeps its pid when no other process of the session has it and no other
//!   process's thread has it as tid (likewise a thread its tid); otherwise, and for the
//!   tid 0 of streams that are no OS thread, it gets one above Linux's largest pid
//!   (2^22 + the p5 id), so nothing two hosts share is merged; the real id stays in the label
//!   and the name.
//!
//! Every process and thread track's description names its p5 id (`p5 thread 7 (…)`), so
//! a trace can be related back to the database.
//!
//! Uuids are handed out in order (hosts, processes, threads, then child tracks as they are
//! first used), so an export of the same database is byte-for-byte the same. Descriptors of
//! child tracks are written when their first event is, so no empty track is shown.

use crate::proto::{
    CHILD_ORDERING_EXPLICIT, CounterDescriptor, ProcessDescriptor, ThreadDescriptor,
    TrackDescriptor,
};
use crate::sequence::bounded;
use p5_tracedb::read;
use std::collections::HashMap;

/// Where synthetic pids and tids start: above Linux's `PID_MAX_LIMIT`.
pub const SYNTHETIC_ID: i64 = 1 << 22;

/// A host.
#[derive(Debug)]
pub struct Host {
    /// p5 host id.
    pub id: i64,
    /// Its track.
    pub uuid: u64,
    /// Host name.
    pub name: String,
    /// Whether its descriptor was written.
    pub described: bool,
}

/// A process.
#[derive(Debug)]
pub struct Process {
    /// Its track.
    pub uuid: u64,
    /// The pid Perfetto sees.
    pub pid: i32,
}

/// A thread (a p5 stream).
#[derive(Debug, Clone)]
pub struct Thread {
    /// p5 thread id.
    pub id: i64,
    /// Its process's track.
    pub process: u64,
    /// Its host id.
    pub host: i64,
    /// Its track.
    pub uuid: u64,
    /// Its name.
    pub name: String,
}

/// A sensor's display name and source place.
#[derive(Debug)]
pub struct Sensor {
    /// Display name.
    pub name: String,
    /// File (relative to the instrumented tree).
    pub file: Option<String>,
    /// Enclosing function.
    pub function: Option<String>,
    /// First line.
    pub line: Option<i64>,
}

/// The session's tracks.
#[derive(Debug, Default)]
pub struct Tree {
    /// Hosts by id order.
    pub hosts: Vec<Host>,
    /// Processes by p5 id.
    pub processes: HashMap<i64, Process>,
    /// Threads by p5 id order.
    pub threads: Vec<Thread>,
    /// Sensors by id.
    pub sensors: HashMap<i64, Sensor>,
    next_uuid: u64,
    next_sequence: u32,
}

impl Tree {
    /// Builds the tree and the descriptors of every process and thread (in that order).
    pub fn new(
        hosts: Vec<read::Host>,
        processes: Vec<read::Process>,
        threads: Vec<read::Thread>,
        sensors: Vec<read::Sensor>,
    ) -> (Tree, Vec<TrackDescriptor>) {
        let mut t = Tree {
            next_uuid: 1,
            next_sequence: 2,
            ..Tree::default()
        };
        for h in hosts {
            let uuid = t.uuid();
            t.hosts.push(Host {
                id: h.id,
                uuid,
                name: h.hostname,
                described: false,
            });
        }
        let (pids, tids) = ids(&processes, &threads);
        let mut out = Vec::new();
        for p in &processes {
            let uuid = t.uuid();
            let pid = pids[&p.id];
            t.processes.insert(p.id, Process { uuid, pid });
            out.push(t.process_descriptor(p, uuid, pid));
        }
        let host_of: HashMap<i64, i64> = processes.iter().map(|p| (p.id, p.host_id)).collect();
        for th in &threads {
            let uuid = t.uuid();
            let (puuid, pid) =
                (t.processes.get(&th.process_id)).map_or((0, 0), |p| (p.uuid, p.pid));
            let host = host_of.get(&th.process_id).copied().unwrap_or(0);
            t.threads.push(Thread {
                id: th.id,
                process: puuid,
                host,
                uuid,
                name: th.name.clone(),
            });
            out.push(TrackDescriptor {
                uuid: Some(uuid),
                parent_uuid: None,
                thread: Some(ThreadDescriptor {
                    pid: Some(pid),
                    tid: Some(tids[&th.id]),
                    thread_name: Some(bounded(th.name.clone())),
                }),
                child_ordering: Some(CHILD_ORDERING_EXPLICIT),
                description: Some(format!("p5 thread {} ({}, tid {})", th.id, th.kind, th.tid)),
                ..Default::default()
            });
        }
        for s in sensors {
            t.sensors.insert(
                s.id,
                Sensor {
                    name: s.name,
                    file: s.file,
                    function: s.function,
                    line: s.line,
                },
            );
        }
        (t, out)
    }

    /// A new track uuid.
    pub fn uuid(&mut self) -> u64 {
        let u = self.next_uuid;
        self.next_uuid += 1;
        u
    }

    /// A new packet sequence id.
    pub fn sequence(&mut self) -> u32 {
        let s = self.next_sequence;
        self.next_sequence = self.next_sequence.saturating_add(1);
        s
    }

    /// A host's name (`host N` when the database names none or an empty one).
    pub fn host_name(&self, id: i64) -> String {
        (self.hosts.iter().find(|h| h.id == id))
            .filter(|h| !h.name.is_empty())
            .map_or_else(|| format!("host {id}"), |h| h.name.clone())
    }

    fn process_descriptor(&self, p: &read::Process, uuid: u64, pid: i32) -> TrackDescriptor {
        let host = self.host_name(p.host_id);
        let argv: Vec<String> = serde_json::from_str::<Vec<String>>(&p.argv).unwrap_or_default();
        let mut cmdline = Vec::new();
        let mut len = 0;
        for a in argv.into_iter().take(64) {
            len += a.len();
            if len > 4 * crate::sequence::MAX_NAME {
                break;
            }
            cmdline.push(bounded(a));
        }
        TrackDescriptor {
            uuid: Some(uuid),
            process: Some(ProcessDescriptor {
                pid: Some(pid),
                cmdline,
                process_name: Some(bounded(format!("{} @ {host}", p.program))),
                process_labels: vec![
                    bounded(format!("host={host}")),
                    format!("pid={}", p.pid),
                    format!("runtime={}", p.runtime),
                ],
                start_timestamp_ns: None,
            }),
            description: Some(format!(
                "p5 process {} ({} on {host}, pid {})",
                p.id, p.runtime, p.pid
            )),
            ..Default::default()
        }
    }
}

/// The pid of every process and the tid of every thread as Perfetto sees them (see the
/// module docs).
fn ids(
    processes: &[read::Process],
    threads: &[read::Thread],
) -> (HashMap<i64, i32>, HashMap<i64, i64>) {
    // Who uses each number: (process id) for pids and (process id) of each tid's thread.
    let mut users: HashMap<i64, Vec<i64>> = HashMap::new();
    let mut pid_users: HashMap<i64, u32> = HashMap::new();
    for p in processes {
        users.entry(p.pid).or_default().push(p.id);
        *pid_users.entry(p.pid).or_default() += 1;
    }
    let mut tid_users: HashMap<i64, u32> = HashMap::new();
    for t in threads {
        *tid_users.entry(t.tid).or_default() += 1;
        users.entry(t.tid).or_default().push(t.process_id);
    }
    let alone = |n: i64, owner: i64| users.get(&n).is_some_and(|u| u.iter().all(|&o| o == owner));
    let mut pids = HashMap::new();
    for p in processes {
        let single = pid_users.get(&p.pid) == Some(&1);
        let keep = p.pid > 0 && p.pid < SYNTHETIC_ID && single && alone(p.pid, p.id);
        let pid = if keep { p.pid } else { SYNTHETIC_ID + p.id };
        pids.insert(p.id, i32::try_from(pid).unwrap_or(i32::MAX));
    }
    let mut tids = HashMap::new();
    for t in threads {
        let keep = t.tid > 0
            && t.tid < SYNTHETIC_ID
            && tid_users.get(&t.tid) == Some(&1)
            && alone(t.tid, t.process_id);
        let tid = if keep {
            t.tid
        } else {
            SYNTHETIC_ID + (1 << 24) + t.id
        };
        tids.insert(t.id, tid);
    }
    (pids, tids)
}

/// A named child track.
pub fn child(uuid: u64, parent: u64, name: String, rank: i32) -> TrackDescriptor {
    TrackDescriptor {
        uuid: Some(uuid),
        parent_uuid: Some(parent),
        name: Some(bounded(name)),
        sibling_order_rank: Some(rank),
        ..Default::default()
    }
}

/// A counter track: stored value × 10^`scale_exp` is the quantity in `unit`.
pub fn counter(
    uuid: u64,
    parent: u64,
    name: String,
    unit: String,
    scale_exp: i64,
) -> TrackDescriptor {
    let multiplier = (1..=scale_exp.clamp(0, 18)).fold(1i64, |m, _| m * 10);
    TrackDescriptor {
        uuid: Some(uuid),
        parent_uuid: Some(parent),
        name: Some(bounded(name)),
        counter: Some(CounterDescriptor {
            unit_name: (!unit.is_empty()).then(|| bounded(unit)),
            unit_multiplier: (multiplier != 1).then_some(multiplier),
        }),
        ..Default::default()
    }
}
