//! The mapping between a session of the trace database and the message model, both ways,
//! without I/O (the queries are in [`crate::db`]).
//!
//! **Reading** (analysis.md §4(a)): both ends' times are on the session's common base;
//! departure is `send_t` and arrival `recv_end`; a half message keeps its known end and the
//! other is [`NO_TIME`]. `message.direction` gives the kind (`call` → [`Kind::Call`],
//! `return` → [`Kind::Ret`], none → [`Kind::Msg`]) and `(connection_id, ordinal)` the call
//! id, `connection_id << 32 | ordinal`, so that the k-th call and the k-th return of a
//! connection share an id that no other connection uses. Nodes are named by [`NodeKey`]
//! from `process` ⨝ `host` (and `thread`, and the connection's endpoints); an end whose
//! process was not recorded is the connection's initiator or acceptor. An imported node
//! (its program named like its host) is named once, not `A@A`.
//!
//! **Importing** ([`import_rows`]): one host, process and thread per node (named after the
//! node), one `calculating` state per thread from its first to its last message (so the
//! viewer has a lane), the trace's connections, and for calls and returns that travelled on
//! none (text traces) one connection per `(caller, callee, call id)` — so ordinals pair each
//! call with its return exactly. Free-form messages without a connection get none.

use crate::causality::NO_THREAD;
use crate::node::{NodeKey, NodeParts};
use crate::trace::{CallId, Conn, ConnId, Kind, Message, NO_CALL_ID, NO_CONN, NO_TIME, NodeId};
use crate::{Proto, Trace};
use p5_tracedb::domain::{ClockSource, Direction, InitiatorFrom, Protocol, Runtime, ThreadState};
use p5_tracedb::read::{Connection, Host, MessageEnds, Process, Thread};
use p5_tracedb::schema;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;

/// The small tables of a session, read before its messages.
#[derive(Debug, Clone, Default)]
pub struct SessionTables {
    /// Hosts.
    pub hosts: Vec<Host>,
    /// Processes.
    pub processes: Vec<Process>,
    /// Threads.
    pub threads: Vec<Thread>,
    /// Connections.
    pub connections: Vec<Connection>,
}

/// Call id of the `ordinal`-th message of a direction on connection `conn_id`.
pub fn call_id(conn_id: i64, ordinal: i64) -> CallId {
    ((conn_id as u64) << 32) | (ordinal as u64 & 0xffff_ffff)
}

/// Builds a [`Trace`] from a session's rows: [`SessionTables`] first, then each message.
#[derive(Debug)]
pub struct Loader {
    key: NodeKey,
    trace: Trace,
    /// Node name of each process (by process id), interned when first used.
    process_name: HashMap<i64, String>,
    /// Node of each process seen so far.
    process_node: HashMap<i64, NodeId>,
    /// Node of each thread (thread key only).
    thread_node: HashMap<i64, NodeId>,
    /// Threads of processes a runtime recorded (not imported ones).
    recorded: HashSet<i64>,
    /// Index in `trace.conns` of each connection id.
    conn_index: HashMap<i64, ConnId>,
    /// Messages whose sender or receiver is not known at all.
    pub unknown_ends: u64,
}

fn proto(p: Option<Protocol>) -> Proto {
    match p {
        Some(Protocol::Tcp) => Proto::Tcp,
        Some(Protocol::Udp) => Proto::Udp,
        _ => Proto::Other,
    }
}

impl Loader {
    /// Names the nodes and connections of `tables` under `key`; `messages` is the expected
    /// message count (reserved up front).
    pub fn new(tables: &SessionTables, key: NodeKey, messages: usize) -> Loader {
        let mut trace = Trace::default();
        trace.messages.reserve_exact(messages);
        let hosts: HashMap<i64, &str> = tables
            .hosts
            .iter()
            .map(|h| (h.id, h.hostname.as_str()))
            .collect();
        fn parts<'a>(hosts: &HashMap<i64, &'a str>, p: &'a Process) -> NodeParts<'a> {
            let host = hosts.get(&p.host_id).copied().unwrap_or("?");
            NodeParts {
                host,
                program: if p.program == host { "" } else { &p.program },
                pid: u32::try_from(p.pid).ok().filter(|&pid| pid != 0),
                tid: None,
                endpoint: None,
            }
        }
        let procs: HashMap<i64, &Process> = tables.processes.iter().map(|p| (p.id, p)).collect();
        let k = if key == NodeKey::Endpoint {
            NodeKey::ProgramAtHost
        } else {
            key
        };
        let process_name: HashMap<i64, String> = tables
            .processes
            .iter()
            .map(|p| (p.id, k.name(&parts(&hosts, p))))
            .collect();
        // Threads a runtime recorded: their order of receives and sends is what they did (an
        // imported capture's or text trace's "threads" are its nodes, which is no order).
        let recorded: HashSet<i64> = tables
            .threads
            .iter()
            .filter(|t| {
                procs.get(&t.process_id).is_some_and(|p| {
                    !p.runtime.is_empty()
                        && p.runtime != p5_tracedb::domain::Runtime::Unknown.name()
                })
            })
            .map(|t| t.id)
            .collect();
        let mut thread_node = HashMap::new();
        if key == NodeKey::Thread {
            for t in &tables.threads {
                let Some(p) = procs.get(&t.process_id) else {
                    continue;
                };
                let mut np = parts(&hosts, p);
                np.tid = u32::try_from(t.tid).ok().filter(|&tid| tid != 0);
                thread_node.insert(t.id, trace.nodes.intern(&key.name(&np)));
            }
        }
        let mut l = Loader {
            key,
            trace,
            process_name,
            process_node: HashMap::new(),
            thread_node,
            recorded,
            conn_index: HashMap::new(),
            unknown_ends: 0,
        };
        for c in &tables.connections {
            let ie: Option<SocketAddr> = c.initiator_endpoint.parse().ok();
            let ae: Option<SocketAddr> = c.acceptor_endpoint.parse().ok();
            let initiator = l.end_node(c.initiator_process, c.initiator_thread, ie);
            let acceptor = l.end_node(c.acceptor_process, c.acceptor_thread, ae);
            let id = ConnId::try_from(l.trace.conns.len()).unwrap_or(NO_CONN);
            l.conn_index.insert(c.id, id);
            if let (Some(t), Some(th)) = (c.t_connect, c.initiator_thread)
                && l.recorded.contains(&th)
                && let Ok(th) = u32::try_from(th)
            {
                l.trace.threads.set_connect(id, th, t);
            }
            l.trace.conns.push(Conn {
                proto: proto(c.proto),
                initiator,
                acceptor,
                initiator_ep: ie,
                acceptor_ep: ae,
                conn_ref: c.id as u64,
            });
        }
        l
    }

    /// The node of one end: its thread, endpoint or process as the key says; `unknown`
    /// when nothing is known.
    fn end_node(
        &mut self,
        process: Option<i64>,
        thread: Option<i64>,
        endpoint: Option<SocketAddr>,
    ) -> NodeId {
        if self.key == NodeKey::Thread
            && let Some(&n) = thread.and_then(|t| self.thread_node.get(&t))
        {
            return n;
        }
        if self.key == NodeKey::Endpoint
            && let Some(ep) = endpoint
        {
            return self.trace.nodes.intern(&ep.to_string());
        }
        let Some(p) = process else {
            return self.trace.nodes.intern("unknown");
        };
        if let Some(&n) = self.process_node.get(&p) {
            return n;
        }
        let n = match self.process_name.get(&p) {
            Some(name) => self.trace.nodes.intern(name),
            None => self.trace.nodes.intern("unknown"),
        };
        self.process_node.insert(p, n);
        n
    }

    /// Adds one message row.
    pub fn push(&mut self, m: &MessageEnds) {
        let conn = m
            .connection
            .and_then(|c| self.conn_index.get(&c).copied())
            .unwrap_or(NO_CONN);
        let c = self.trace.conns.get(conn as usize);
        let (kind, from_initiator) = match m.direction {
            Some(Direction::Call) => (Kind::Call, Some(true)),
            Some(Direction::Return) => (Kind::Ret, Some(false)),
            None => (Kind::Msg, None),
        };
        // The sender's and receiver's sides of the connection, when the direction says.
        let side = |initiator: bool| {
            c.map(|c| {
                if initiator {
                    (c.initiator, c.initiator_ep)
                } else {
                    (c.acceptor, c.acceptor_ep)
                }
            })
        };
        let send_side = from_initiator.and_then(side);
        let recv_side = from_initiator.and_then(|i| side(!i));
        let src = self.node_of(m.send_process, m.send_thread, send_side);
        let dst = self.node_of(m.recv_process, m.recv_thread, recv_side);
        let call_id = match (kind, m.connection, m.ordinal) {
            (Kind::Call | Kind::Ret, Some(c), Some(o)) => call_id(c, o),
            _ => NO_CALL_ID,
        };
        let recorded = |t: &i64| self.recorded.contains(t);
        let (send_thread, recv_thread) = (
            m.send_thread.filter(recorded),
            m.recv_thread.filter(recorded),
        );
        let thread = |t: Option<i64>| t.and_then(|t| u32::try_from(t).ok()).unwrap_or(NO_THREAD);
        if send_thread.is_some() || recv_thread.is_some() {
            let (s, r) = (thread(send_thread), thread(recv_thread));
            self.trace.threads.set(m.id as u64, s, r);
        }
        self.trace.messages.push(Message {
            t_send: m.send_t.unwrap_or(NO_TIME),
            t_recv: m.recv_end.unwrap_or(NO_TIME),
            call_id,
            msg_ref: m.id as u64,
            bytes: u32::try_from(m.bytes).unwrap_or(u32::MAX),
            src,
            dst,
            conn,
            kind,
        });
    }

    fn node_of(
        &mut self,
        process: Option<i64>,
        thread: Option<i64>,
        side: Option<(NodeId, Option<SocketAddr>)>,
    ) -> NodeId {
        let endpoint = side.and_then(|s| s.1);
        if process.is_none() && !(self.key == NodeKey::Endpoint && endpoint.is_some()) {
            if let Some((n, _)) = side {
                return n;
            }
            self.unknown_ends += 1;
        }
        self.end_node(process, thread, endpoint)
    }

    /// The trace, messages ordered by time (ties by message id).
    pub fn finish(mut self) -> Trace {
        self.trace
            .messages
            .sort_unstable_by_key(|m| (m.time(), m.msg_ref));
        self.trace
    }
}

/// Where a trace being imported came from, for the `session` row.
#[derive(Debug, Clone)]
pub struct ImportSource {
    /// Shown as `session.store` (`trace:FILE`, `pcap:FILE,…`).
    pub store: String,
    /// Wall clock of the import, ns since the epoch.
    pub now_wall_ns: i64,
}

/// A message's place on a connection: `(connection id, direction, ordinal)`.
pub type Place = (i64, Direction, i64);

/// What [`import_rows`] builds: the small tables and, per message in trace order, its
/// connection id, direction and ordinal.
#[derive(Debug)]
pub struct ImportPlan {
    /// Small tables.
    pub rows: p5_tracedb::import::SessionRows<()>,
    /// Per message: `(connection id, direction, ordinal)` when it travelled on one.
    pub places: Vec<Option<Place>>,
}

fn db_proto(p: Proto) -> Protocol {
    match p {
        Proto::Tcp => Protocol::Tcp,
        Proto::Udp => Protocol::Udp,
        Proto::Other => Protocol::Unknown,
    }
}

fn ep(e: Option<SocketAddr>) -> String {
    e.map_or_else(|| "-".to_owned(), |e| e.to_string())
}

/// Per node: first and last time of its messages.
fn node_spans(trace: &Trace) -> Vec<Option<(i64, i64)>> {
    let mut span: Vec<Option<(i64, i64)>> = vec![None; trace.nodes.len()];
    for m in &trace.messages {
        for (n, t) in [(m.src, m.t_send), (m.dst, m.t_recv), (m.src, m.time())] {
            if t == NO_TIME {
                continue;
            }
            if let Some(s) = span.get_mut(n as usize) {
                *s = Some(s.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
            }
        }
    }
    span
}

/// The connections of a trace being imported and each message's place on one.
fn plan_connections(trace: &Trace, sid: i64) -> (Vec<schema::Connection>, Vec<Option<Place>>) {
    let mut conns: Vec<schema::Connection> = Vec::new();
    // Trace connection index → row index; synthetic (caller, callee, call id) → row index.
    let mut from_trace: HashMap<ConnId, usize> = HashMap::new();
    let mut synthetic: HashMap<(NodeId, NodeId, CallId), usize> = HashMap::new();
    let mut ordinals: Vec<[i64; 2]> = Vec::new();
    let mut places = Vec::with_capacity(trace.messages.len());
    let new_row = |conns: &mut Vec<schema::Connection>, ordinals: &mut Vec<[i64; 2]>, c: &Conn| {
        let from = match c.proto {
            Proto::Tcp => InitiatorFrom::Port,
            _ => InitiatorFrom::FirstSend,
        };
        conns.push(schema::Connection {
            session_id: sid,
            id: conns.len() as i64 + 1,
            proto: db_proto(c.proto),
            initiator_from: from,
            initiator_process_id: Some(i64::from(c.initiator) + 1),
            initiator_thread_id: Some(i64::from(c.initiator) + 1),
            acceptor_process_id: Some(i64::from(c.acceptor) + 1),
            acceptor_thread_id: Some(i64::from(c.acceptor) + 1),
            initiator_endpoint: ep(c.initiator_ep),
            acceptor_endpoint: ep(c.acceptor_ep),
            t_first: None,
            t_last: None,
            call_messages: 0,
            call_bytes: 0,
            return_messages: 0,
            return_bytes: 0,
            t_connect: None,
        });
        ordinals.push([0, 0]);
        conns.len() - 1
    };
    for m in &trace.messages {
        let row = if let Some(c) = trace.conns.get(m.conn as usize) {
            *from_trace
                .entry(m.conn)
                .or_insert_with(|| new_row(&mut conns, &mut ordinals, c))
        } else if m.kind != Kind::Msg && m.call_id != NO_CALL_ID {
            let (caller, callee) = if m.kind == Kind::Call {
                (m.src, m.dst)
            } else {
                (m.dst, m.src)
            };
            let c = Conn {
                proto: Proto::Other,
                initiator: caller,
                acceptor: callee,
                initiator_ep: None,
                acceptor_ep: None,
                conn_ref: 0,
            };
            *synthetic
                .entry((caller, callee, m.call_id))
                .or_insert_with(|| new_row(&mut conns, &mut ordinals, &c))
        } else {
            places.push(None);
            continue;
        };
        let c = &mut conns[row];
        let call = match m.kind {
            Kind::Call => true,
            Kind::Ret => false,
            Kind::Msg => c.initiator_process_id == Some(i64::from(m.src) + 1),
        };
        let d = usize::from(!call);
        let ordinal = ordinals[row][d];
        ordinals[row][d] += 1;
        let bytes = i64::from(m.bytes);
        if call {
            c.call_messages += 1;
            c.call_bytes += bytes;
        } else {
            c.return_messages += 1;
            c.return_bytes += bytes;
        }
        let (first, last) = (m.time(), m.t_recv.max(m.t_send));
        if first != NO_TIME {
            c.t_first = Some(c.t_first.map_or(first, |t| t.min(first)));
            c.t_last = Some(c.t_last.map_or(last, |t| t.max(last)));
        }
        let dir = if call {
            Direction::Call
        } else {
            Direction::Return
        };
        places.push(Some((c.id, dir, ordinal)));
    }
    (conns, places)
}

/// The rows of session `sid` for `trace` (messages in time order; see the module docs).
pub fn import_rows(trace: &Trace, sid: i64, source: &ImportSource) -> ImportPlan {
    let spans = node_spans(trace);
    let mut rows = p5_tracedb::import::SessionRows {
        session: schema::Session {
            id: sid,
            name: String::new(),
            store: source.store.clone(),
            merged_at_wall_ns: source.now_wall_ns,
            base_run_id: 0,
            base_mono_ns: 0,
            base_wall_ns: 0,
            t_min: spans.iter().flatten().map(|s| s.0).min(),
            t_max: spans.iter().flatten().map(|s| s.1).max(),
            events: 0,
            processes: trace.nodes.len() as i64,
            threads: trace.nodes.len() as i64,
            messages: trace.messages.len() as i64,
            matched: 0,
            violations: 0,
            diagnostics: 0,
        },
        hosts: Vec::new(),
        processes: Vec::new(),
        threads: Vec::new(),
        states: Vec::new(),
        connections: Vec::new(),
        messages: (),
    };
    for (i, name) in trace.nodes.names().enumerate() {
        let id = i as i64 + 1;
        let span = spans.get(i).copied().flatten();
        rows.hosts.push(schema::Host {
            session_id: sid,
            id,
            boot_id: format!("host:{name}"),
            machine_id: String::new(),
            hostname: name.to_owned(),
        });
        rows.processes.push(schema::Process {
            session_id: sid,
            id,
            host_id: id,
            uid: 0,
            pid: 0,
            ppid: 0,
            program: name.to_owned(),
            argv: "[]".to_owned(),
            runtime: Runtime::Unknown,
            clock: ClockSource::Unknown,
            start_wall_ns: 0,
            start_mono_ns: 0,
            t_start: span.map_or(0, |s| s.0),
            t_end: span.map(|s| s.1),
        });
        rows.threads.push(schema::Thread {
            session_id: sid,
            id,
            process_id: id,
            stream: 0,
            kind: "thread",
            tid: 0,
            name: name.to_owned(),
            t_start: span.map(|s| s.0),
            t_end: span.map(|s| s.1),
            events: 0,
            dropped: 0,
        });
        if let Some((a, b)) = span {
            rows.states.push(schema::State {
                session_id: sid,
                thread_id: id,
                t_start: a,
                t_end: b,
                state: ThreadState::Calculating,
                op: None,
                fd: None,
                result: None,
            });
        }
    }
    let (connections, places) = plan_connections(trace, sid);
    rows.connections = connections;
    for m in &trace.messages {
        if m.send().is_some() && m.recv().is_some() {
            rows.session.matched += 1;
            if m.t_recv < m.t_send {
                rows.session.violations += 1;
            }
        }
    }
    ImportPlan { rows, places }
}

/// The `message` row of the `i`-th message (id `i + 1`) of a trace being imported.
pub fn message_row(
    trace: &Trace,
    sid: i64,
    i: usize,
    m: &Message,
    place: Option<Place>,
) -> schema::Message {
    let proto = trace
        .conns
        .get(m.conn as usize)
        .map_or(Protocol::Unknown, |c| db_proto(c.proto));
    let send = m.send();
    let recv = m.recv();
    let node = |n: NodeId| Some(i64::from(n) + 1);
    schema::Message {
        session_id: sid,
        id: i as i64 + 1,
        proto,
        bytes: i64::from(m.bytes),
        send_process_id: node(m.src),
        send_thread_id: node(m.src),
        send_sensor_id: None,
        send_t: send,
        send_end: send,
        recv_process_id: node(m.dst),
        recv_thread_id: node(m.dst),
        recv_sensor_id: None,
        recv_t: recv,
        recv_end: recv,
        recv_calls: i64::from(recv.is_some()),
        violation: i64::from(matches!((send, recv), (Some(s), Some(r)) if r < s)),
        connection_id: place.map(|p| p.0),
        direction: place.map(|p| p.1),
        ordinal: place.map(|p| p.2),
        send_calls: i64::from(send.is_some()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tables() -> SessionTables {
        let process = |id, host_id, pid, program: &str| Process {
            id,
            host_id,
            pid,
            program: program.into(),
            argv: "[]".into(),
            runtime: "c".into(),
            t_start: 0,
            t_end: None,
        };
        SessionTables {
            hosts: vec![
                Host {
                    id: 1,
                    hostname: "n1".into(),
                },
                Host {
                    id: 2,
                    hostname: "n2".into(),
                },
            ],
            processes: vec![process(1, 1, 10, "web"), process(2, 2, 20, "db")],
            threads: Vec::new(),
            connections: vec![Connection {
                id: 7,
                proto: Some(Protocol::Tcp),
                initiator_from: Some(InitiatorFrom::Connect),
                initiator_process: Some(1),
                initiator_thread: None,
                acceptor_process: Some(2),
                acceptor_thread: None,
                initiator_endpoint: "10.0.0.1:5000".into(),
                acceptor_endpoint: "10.0.0.2:5432".into(),
                t_first: None,
                t_last: None,
                call_messages: 1,
                call_bytes: 5,
                return_messages: 1,
                return_bytes: 9,
                t_connect: None,
            }],
        }
    }

    fn ends(id: i64, dir: Direction, send: Option<i64>, recv: Option<i64>) -> MessageEnds {
        MessageEnds {
            id,
            bytes: 5,
            send_process: send.map(|_| if dir == Direction::Call { 1 } else { 2 }),
            send_thread: None,
            send_t: send,
            recv_process: recv.map(|_| if dir == Direction::Call { 2 } else { 1 }),
            recv_thread: None,
            recv_end: recv,
            connection: Some(7),
            direction: Some(dir),
            ordinal: Some(0),
        }
    }

    #[test]
    fn half_messages_keep_their_end_and_find_the_other_side_on_the_connection() {
        let mut l = Loader::new(&tables(), NodeKey::ProgramAtHost, 2);
        // A call whose receive was not recorded, a return whose send was not.
        l.push(&ends(2, Direction::Return, None, Some(300)));
        l.push(&ends(1, Direction::Call, Some(100), None));
        let t = l.finish();
        let [call, ret] = [t.messages[0], t.messages[1]];
        assert_eq!(
            (call.kind, call.send(), call.recv()),
            (Kind::Call, Some(100), None)
        );
        assert_eq!(
            (ret.kind, ret.send(), ret.recv()),
            (Kind::Ret, None, Some(300))
        );
        assert_eq!(call.call_id, call_id(7, 0));
        assert_eq!(ret.call_id, call.call_id);
        assert_eq!(
            (t.nodes.name(call.src), t.nodes.name(call.dst)),
            ("web@n1", "db@n2")
        );
        assert_eq!((ret.src, ret.dst), (call.dst, call.src));
        assert_eq!((call.msg_ref, ret.msg_ref), (1, 2));
        assert_eq!(t.conns[0].conn_ref, 7);
        assert_ne!(call_id(7, 1), call_id(8, 0));
    }

    #[test]
    fn endpoint_and_process_keys_name_the_ends() {
        let mut l = Loader::new(&tables(), NodeKey::Endpoint, 1);
        l.push(&ends(1, Direction::Call, Some(1), Some(2)));
        let t = l.finish();
        let names: Vec<&str> = t.nodes.names().collect();
        assert_eq!(names, ["10.0.0.1:5000", "10.0.0.2:5432"]);
        let mut l = Loader::new(&tables(), NodeKey::Process, 1);
        l.push(&ends(1, Direction::Call, Some(1), Some(2)));
        let t = l.finish();
        assert_eq!(t.nodes.name(t.messages[0].src), "web:10@n1");
    }
}
