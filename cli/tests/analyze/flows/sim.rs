//! Merged sessions of simulated programs: threads' events (calls, marks, counters, TCP
//! connections, sends and receives) written as a real store with merge's fixture writer
//! (`merge/tests/fixture`), a manifest naming every sensor, then `p5 merge` into the
//! database — so the flow analysis reads what the merge of a recording would give it.
#![allow(dead_code)]

#[path = "../../../../merge/tests/fixture/mod.rs"]
mod fixture;

use fixture::{Clock, SimProcess, StoreBuilder, identity, write_sim};
use p5_wire::manifest::{Manifest, Sensor, SourceFile, format_id};
use p5_wire::{CommOp, Endpoint, Event, SocketProto};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Microseconds.
pub const US: i64 = 1_000;
/// Milliseconds.
pub const MS: i64 = 1_000_000;

/// A thread: (process index, thread index).
pub type Th = (usize, usize);

struct Proc {
    program: String,
    threads: Vec<Vec<(i64, Event)>>,
    next_fd: i64,
    port: u16,
}

/// A simulated system.
#[derive(Default)]
pub struct Sim {
    procs: Vec<Proc>,
    sensors: BTreeMap<u64, (String, &'static str)>,
    next_port: u16,
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn ep(port: u16) -> Endpoint {
    Endpoint::Inet(format!("127.0.0.1:{port}").parse().unwrap())
}

impl Sim {
    /// A new process of `program` with one thread; returns that thread.
    pub fn process(&mut self, program: &str) -> Th {
        let port = 7000 + self.procs.len() as u16;
        self.procs.push(Proc {
            program: program.into(),
            threads: vec![Vec::new()],
            next_fd: 3,
            port,
        });
        (self.procs.len() - 1, 0)
    }

    /// Another thread of process `p`.
    pub fn thread(&mut self, p: usize) -> Th {
        self.procs[p].threads.push(Vec::new());
        (p, self.procs[p].threads.len() - 1)
    }

    /// The id of sensor `name` of `kind`.
    pub fn sensor(&mut self, name: &str, kind: &'static str) -> u64 {
        let id = fnv(&format!("{kind}:{name}")) | 1;
        self.sensors.insert(id, (name.into(), kind));
        id
    }

    fn push(&mut self, th: Th, t: i64, e: Event) {
        self.procs[th.0].threads[th.1].push((t, e));
    }

    /// A call of `name` from `t0` to `t1`.
    pub fn call(&mut self, th: Th, t0: i64, t1: i64, name: &str) {
        let sensor = self.sensor(name, "function");
        self.push(th, t0, Event::Enter { t: 0, sensor });
        self.push(th, t1, Event::Exit { t: 0, sensor });
    }

    /// A mark.
    pub fn mark(&mut self, th: Th, t: i64, name: &str) {
        let sensor = self.sensor(name, "mark");
        self.push(th, t, Event::Mark { t: 0, sensor });
    }

    /// A counter sample.
    pub fn counter(&mut self, th: Th, t: i64, name: &str, value: i64) {
        let sensor = self.sensor(name, "counter");
        self.push(
            th,
            t,
            Event::Counter {
                t: 0,
                sensor,
                value,
            },
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn comm(&mut self, th: Th, t: i64, op: CommOp, fd: i64, dur: i64, result: i64, peer: Endpoint) {
        let name = match op {
            CommOp::Send => "send",
            CommOp::Recv => "recv",
            CommOp::Connect => "connect",
            _ => "accept",
        };
        let sensor = self.sensor(name, "comm");
        self.push(
            th,
            t,
            Event::Comm {
                t: 0,
                sensor,
                op,
                fd,
                duration: dur as u64,
                result,
                peer,
            },
        );
    }

    /// A TCP connection from `client` to `server` at `t`; returns (client fd, server fd).
    pub fn connect(&mut self, client: Th, server: Th, t: i64) -> (i64, i64) {
        self.next_port += 1;
        let cport = 40_000 + self.next_port;
        let sport = self.procs[server.0].port;
        let cfd = self.procs[client.0].next_fd;
        self.procs[client.0].next_fd += 1;
        let sfd = self.procs[server.0].next_fd;
        self.procs[server.0].next_fd += 1;
        self.comm(client, t, CommOp::Connect, cfd, 10 * US, 0, ep(sport));
        let sock = |fd, local, peer| Event::Socket {
            t: 0,
            sensor: 0,
            fd,
            proto: SocketProto::Tcp,
            local: ep(local),
            peer: ep(peer),
        };
        self.push(client, t + 10 * US, sock(cfd, cport, sport));
        self.comm(server, t, CommOp::Accept, 99, 10 * US, sfd, ep(cport));
        self.push(server, t + 10 * US, sock(sfd, sport, cport));
        (cfd, sfd)
    }

    /// A message of `bytes` on a connection: sent by `from` on `from_fd` at `t_send`,
    /// received by `to` on `to_fd` in one receive that ends at `t_recv`.
    #[allow(clippy::too_many_arguments)]
    pub fn message(
        &mut self,
        from: Th,
        from_fd: i64,
        to: Th,
        to_fd: i64,
        t_send: i64,
        t_recv: i64,
        bytes: i64,
    ) {
        self.comm(
            from,
            t_send,
            CommOp::Send,
            from_fd,
            2 * US,
            bytes,
            Endpoint::None,
        );
        self.comm(
            to,
            t_recv - 5 * US,
            CommOp::Recv,
            to_fd,
            5 * US,
            bytes,
            Endpoint::None,
        );
    }

    /// Writes the store and manifest under `root`; returns (store, manifest directory).
    pub fn write(&self, root: &Path, session: &str) -> (PathBuf, PathBuf) {
        let store = root.join(format!("store-{session}"));
        let mut b = StoreBuilder::new(&store, session, 7, 1_000_000_000_000);
        let procs: Vec<SimProcess> = self
            .procs
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let uid = 0x100 + i as u64;
                SimProcess {
                    identity: identity(
                        uid,
                        100 + i as u32,
                        "boot-h",
                        "h",
                        &p.program,
                        2_000_000_000,
                        2,
                    ),
                    clock: Clock {
                        offset: 0,
                        drift: 0.0,
                    },
                    streams: p
                        .threads
                        .iter()
                        .enumerate()
                        .map(|(k, evs)| {
                            let mut evs = evs.clone();
                            evs.sort_by_key(|e| e.0);
                            let evs = evs
                                .into_iter()
                                .map(|(t, e)| with_time(e, t as u64))
                                .collect();
                            (
                                k as u32 + 1,
                                1,
                                1000 * (i as u64 + 1) + k as u64,
                                format!("t{k}"),
                                evs,
                            )
                        })
                        .collect(),
                    names: vec![],
                    tree: vec![],
                    pings: true,
                    timed: true,
                }
            })
            .collect();
        write_sim(&mut b, &procs, 16, 7);
        b.finish();
        let mdir = root.join(format!("manifest-{session}"));
        std::fs::create_dir_all(mdir.join("sources")).unwrap();
        std::fs::write(mdir.join("sources").join("ab12"), "int main(void) {}\n").unwrap();
        let sensors = self
            .sensors
            .iter()
            .map(|(&id, (name, kind))| Sensor {
                id: format_id(id),
                kind: (*kind).into(),
                language: "c".into(),
                file: "app.c".into(),
                function: name.clone(),
                name: name.clone(),
                line: 1,
                column: 1,
                end_line: 1,
                end_column: 2,
            })
            .collect();
        let m = Manifest {
            version: 1,
            tool: "test".into(),
            root: "/src".into(),
            files: vec![SourceFile {
                path: "app.c".into(),
                language: "c".into(),
                sha256: "ab12".into(),
                lines: 1,
            }],
            sensors,
        };
        std::fs::write(
            mdir.join("p5-manifest.json"),
            serde_json::to_string(&m).unwrap(),
        )
        .unwrap();
        (store, mdir)
    }

    /// Writes and merges the system as session `session` into `url`.
    pub fn merge(&self, root: &Path, session: &str, url: &str) {
        let (store, mdir) = self.write(root, session);
        let mut args = p5_merge::MergeOptions::new(&store);
        args.db = Some(url.to_owned());
        args.manifests = vec![mdir];
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let sums = rt.block_on(p5_merge::merge_store(&args)).unwrap();
        assert_eq!(sums.len(), 1);
    }
}

fn with_time(e: Event, t: u64) -> Event {
    match e {
        Event::Enter { sensor, .. } => Event::Enter { t, sensor },
        Event::Exit { sensor, .. } => Event::Exit { t, sensor },
        Event::Mark { sensor, .. } => Event::Mark { t, sensor },
        Event::Counter { sensor, value, .. } => Event::Counter { t, sensor, value },
        Event::Comm {
            sensor,
            op,
            fd,
            duration,
            result,
            peer,
            ..
        } => Event::Comm {
            t,
            sensor,
            op,
            fd,
            duration,
            result,
            peer,
        },
        Event::Socket {
            sensor,
            fd,
            proto,
            local,
            peer,
            ..
        } => Event::Socket {
            t,
            sensor,
            fd,
            proto,
            local,
            peer,
        },
        other => other,
    }
}
