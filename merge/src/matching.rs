//! Message matching: every send call to the receive call(s) that got its bytes.
//!
//! Pure: no I/O, no clocks (it works on each process's own times and on byte counts).
//!
//! - A `Socket` event tells, per process, what a descriptor is: protocol, local and peer
//!   endpoint. A call on descriptor `fd` belongs to the latest description of `fd` stamped no
//!   later than the call's end (the runtime describes a descriptor on connect/accept or on its
//!   first wrapped call, before recording that call).
//! - Stream sockets (TCP, unix stream): the two ends of a connection see swapped endpoints, so
//!   a send on `(local L, peer P)` and a receive on `(local P, peer L)` carry the same *flow*
//!   `L → P`. If a process used the same endpoint pair more than once (port reuse), its k-th
//!   use pairs with the other side's k-th. Within a flow, sends and receives are laid out
//!   on the byte stream in time order (byte counting, seed 002 §2.1): a send covering bytes
//!   `[a, a+n)` is received by every receive whose range overlaps it — partial writes, several
//!   messages per read and several reads per message all fall out. A message row links the
//!   send to the first and the last of those receives; receive bytes no send covers stay
//!   unmatched.
//! - Datagram sockets (UDP, unix datagram): a flow is `(source port, destination port)` (IP
//!   addresses differ between a wildcard-bound sender and what the receiver sees) or the two
//!   paths; datagrams are matched in order by size, skipping sends that never arrived (lost).
//! - Anything without a socket description, failed calls and zero-byte results are not
//!   messages; unmatched ends are kept as half-messages and counted.
//! - Connections: the two flows of a stream connection (`L → P` and `P → L`, same use
//!   ordinal), or of a datagram port pair, form one [`Connection`] with two sides; every
//!   message records its connection and the side that sent it. Which side initiated is decided
//!   later ([`crate::connections`]) from the socket descriptions' roles: a description made
//!   right after a successful `connect` is the initiator's, one made for an `accept`ed
//!   descriptor the acceptor's (the load pass attaches these, [`Role`]).

use p5_wire::{CommOp, Endpoint, SocketProto};
use std::collections::HashMap;

/// How far ahead (in sends) a datagram receive looks for a send of its size.
const DATAGRAM_WINDOW: usize = 64;

/// A socket description of one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketDesc {
    /// Process index.
    pub process: usize,
    /// Time (process clock).
    pub t: i64,
    /// Descriptor.
    pub fd: i64,
    /// Protocol.
    pub proto: SocketProto,
    /// Local endpoint.
    pub local: Endpoint,
    /// Peer endpoint.
    pub peer: Endpoint,
    /// Stream (thread) index that described it.
    pub thread: usize,
    /// Whether this descriptor came from `connect` or `accept`, if recorded.
    pub role: Option<Role>,
}

/// How a socket descriptor came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A successful (or in-progress) `connect`: this side initiated.
    Connect,
    /// Returned by `accept`: this side accepted.
    Accept,
}

/// A connection: the flows between two endpoints (stream sockets: one connect/accept pair;
/// datagrams: one port or path pair), seen from its two sides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    /// Protocol.
    pub proto: SocketProto,
    /// Each side's endpoint as text (`ip:port`, `unix:path`, `*:port` for a datagram port
    /// no recorded socket describes, `-`); side 0 sent the connection's first flow.
    pub ends: [String; 2],
    /// Each side's socket description (index into the descriptions), if recorded.
    pub descs: [Option<usize>; 2],
}

/// A data-moving communication call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// Process index.
    pub process: usize,
    /// Thread index (opaque to matching, passed through).
    pub thread: usize,
    /// Start (process clock).
    pub t: i64,
    /// Duration, ns.
    pub duration: i64,
    /// Operation.
    pub op: CommOp,
    /// Descriptor.
    pub fd: i64,
    /// Bytes moved (≤ 0: failed or end of file).
    pub bytes: i64,
    /// Peer of a datagram call.
    pub peer: Endpoint,
    /// Call-site sensor.
    pub sensor: u64,
}

/// One message: a send and where its bytes went (either end may be missing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message {
    /// Index of the send call (the first, for a message written in several sends).
    pub send: Option<usize>,
    /// Index of its last send call (the same as `send` unless coalesced).
    pub send_last: Option<usize>,
    /// Send calls that wrote it (1 unless coalesced, [`crate::coalesce`]; 0 for a receive
    /// no send accounts for).
    pub send_calls: u32,
    /// Index of the receive call that got its first byte.
    pub recv_first: Option<usize>,
    /// Index of the receive call that got its last byte.
    pub recv_last: Option<usize>,
    /// Receive calls that got some of its bytes.
    pub recv_calls: u32,
    /// Bytes (the send's, or the receive's for an unmatched receive).
    pub bytes: i64,
    /// Protocol.
    pub proto: SocketProto,
    /// Its connection (index into [`Matches::connections`]).
    pub conn: u32,
    /// The side of the connection that sent it (0 or 1).
    pub side: u8,
}

/// What matching found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Matches {
    /// Messages, matched and half.
    pub messages: Vec<Message>,
    /// Messages with both ends.
    pub matched: u64,
    /// Sends nobody received.
    pub unmatched_sends: u64,
    /// Receives no send accounts for.
    pub unmatched_recvs: u64,
    /// Data calls on descriptors never described (not matchable).
    pub undescribed: u64,
    /// Messages folded into the one they continue ([`crate::coalesce`]).
    pub folded: u64,
    /// Connections, in order of their first call.
    pub connections: Vec<Connection>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum FlowKey {
    Stream(Endpoint, Endpoint, u32),
    Datagram(DgramEnd, DgramEnd),
}

impl FlowKey {
    /// The same connection's flow the other way.
    fn reversed(&self) -> FlowKey {
        match self {
            FlowKey::Stream(a, b, n) => FlowKey::Stream(b.clone(), a.clone(), *n),
            FlowKey::Datagram(a, b) => FlowKey::Datagram(b.clone(), a.clone()),
        }
    }

    /// Source and destination as text.
    fn ends(&self) -> [String; 2] {
        match self {
            FlowKey::Stream(a, b, _) => [a.to_string(), b.to_string()],
            FlowKey::Datagram(a, b) => [a.to_string(), b.to_string()],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum DgramEnd {
    Port(u16),
    Path(Vec<u8>),
    None,
}

impl std::fmt::Display for DgramEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DgramEnd::Port(p) => write!(f, "*:{p}"),
            DgramEnd::Path(p) => write!(f, "unix:{}", String::from_utf8_lossy(p)),
            DgramEnd::None => f.write_str("-"),
        }
    }
}

fn dgram_end(e: &Endpoint) -> DgramEnd {
    match e {
        Endpoint::Inet(a) => DgramEnd::Port(a.port()),
        Endpoint::Unix(p) => DgramEnd::Path(p.clone()),
        Endpoint::None => DgramEnd::None,
    }
}

fn is_stream(p: SocketProto) -> bool {
    matches!(p, SocketProto::Tcp | SocketProto::UnixStream)
}

fn is_datagram(p: SocketProto) -> bool {
    matches!(p, SocketProto::Udp | SocketProto::UnixDgram)
}

#[derive(Debug, Default)]
struct Flow {
    proto: Option<SocketProto>,
    sends: Vec<usize>,
    recvs: Vec<usize>,
    /// Socket description of the sending side (first seen).
    src_desc: Option<usize>,
    /// Socket description of the receiving side.
    dst_desc: Option<usize>,
}

/// Matches sends to receives.
pub fn match_calls(sockets: &[SocketDesc], calls: &[Call]) -> Matches {
    // Descriptions per (process, fd), in time order, each with the ordinal of its endpoint
    // pair within the process.
    let mut order: Vec<usize> = (0..sockets.len()).collect();
    order.sort_by_key(|&i| (sockets[i].process, sockets[i].t, i));
    // (process, fd) → [(time, socket index, ordinal of its endpoint pair)]
    type Descriptions = HashMap<(usize, i64), Vec<(i64, usize, u32)>>;
    let mut by_fd: Descriptions = HashMap::new();
    let mut uses: HashMap<(usize, &Endpoint, &Endpoint), u32> = HashMap::new();
    for &i in &order {
        let s = &sockets[i];
        let n = uses.entry((s.process, &s.local, &s.peer)).or_insert(0);
        by_fd
            .entry((s.process, s.fd))
            .or_default()
            .push((s.t, i, *n));
        *n += 1;
    }
    let mut out = Matches::default();
    let mut flows: HashMap<FlowKey, Flow> = HashMap::new();
    for (ci, c) in calls.iter().enumerate() {
        let send = c.op.is_send();
        if !(send || c.op.is_recv()) || c.bytes <= 0 {
            continue;
        }
        let end = c.t.saturating_add(c.duration.max(0));
        let desc = by_fd.get(&(c.process, c.fd)).and_then(|v| {
            let k = v.partition_point(|d| d.0 <= end);
            k.checked_sub(1).map(|k| v[k])
        });
        let Some((_, si, ordinal)) = desc else {
            out.undescribed += 1;
            continue;
        };
        let s = &sockets[si];
        let key = if is_stream(s.proto) {
            let (a, b) = if send {
                (s.local.clone(), s.peer.clone())
            } else {
                (s.peer.clone(), s.local.clone())
            };
            FlowKey::Stream(a, b, ordinal)
        } else if is_datagram(s.proto) {
            let other = if c.peer != Endpoint::None {
                &c.peer
            } else {
                &s.peer
            };
            let (a, b) = if send {
                (dgram_end(&s.local), dgram_end(other))
            } else {
                (dgram_end(other), dgram_end(&s.local))
            };
            FlowKey::Datagram(a, b)
        } else {
            out.undescribed += 1;
            continue;
        };
        let f = flows.entry(key).or_default();
        f.proto.get_or_insert(s.proto);
        if send {
            f.sends.push(ci);
            f.src_desc.get_or_insert(si);
        } else {
            f.recvs.push(ci);
            f.dst_desc.get_or_insert(si);
        }
    }
    let mut keys: Vec<&FlowKey> = flows.keys().collect();
    // Deterministic output: flows ordered by their first call.
    keys.sort_by_key(|k| {
        let f = &flows[*k];
        f.sends
            .iter()
            .chain(f.recvs.iter())
            .min()
            .copied()
            .unwrap_or(0)
    });
    // Connection of each flow: (connection index, side of the flow's source).
    let mut conn_of: HashMap<&FlowKey, (u32, u8)> = HashMap::new();
    for k in keys {
        let f = &flows[k];
        let proto = f.proto.unwrap_or(SocketProto::Unknown);
        let (conn, side) = match conn_of.get(&k.reversed()) {
            Some(&(c, s)) => (c, 1 - s),
            None => {
                out.connections.push(Connection {
                    proto,
                    ends: k.ends(),
                    descs: [None, None],
                });
                ((out.connections.len() - 1) as u32, 0)
            }
        };
        conn_of.insert(k, (conn, side));
        let c = &mut out.connections[conn as usize];
        let (src, dst) = (usize::from(side), usize::from(1 - side));
        c.descs[src] = c.descs[src].or(f.src_desc);
        c.descs[dst] = c.descs[dst].or(f.dst_desc);
        // A datagram side described by a recorded socket is named by its local endpoint.
        for (i, d) in [(src, f.src_desc), (dst, f.dst_desc)] {
            if let (FlowKey::Datagram(..), Some(d)) = (k, d) {
                c.ends[i] = sockets[d].local.to_string();
            }
        }
        let mut sends = f.sends.clone();
        let mut recvs = f.recvs.clone();
        let by_time = |i: &usize| (calls[*i].process, calls[*i].t, *i);
        sends.sort_by_key(by_time);
        recvs.sort_by_key(by_time);
        let first = out.messages.len();
        match k {
            FlowKey::Stream(..) => bytes_flow(calls, &sends, &recvs, proto, &mut out),
            FlowKey::Datagram(..) => datagram_flow(calls, &sends, &recvs, proto, &mut out),
        }
        for m in &mut out.messages[first..] {
            m.conn = conn;
            m.side = side;
        }
    }
    out
}

fn bytes_flow(
    calls: &[Call],
    sends: &[usize],
    recvs: &[usize],
    proto: SocketProto,
    out: &mut Matches,
) {
    let mut r = 0usize; // first receive that may still hold unsent-to bytes
    let mut r_start = 0i64; // byte offset where receive r starts
    let mut covered = vec![false; recvs.len()];
    let mut s_start = 0i64;
    for &si in sends {
        let n = calls[si].bytes;
        let (a, b) = (s_start, s_start.saturating_add(n));
        s_start = b;
        // Skip receives that end before this send's first byte.
        while r < recvs.len() && r_start.saturating_add(calls[recvs[r]].bytes) <= a {
            r_start = r_start.saturating_add(calls[recvs[r]].bytes);
            r += 1;
        }
        let (mut j, mut j_start) = (r, r_start);
        let mut first = None;
        let mut last = None;
        let mut count = 0u32;
        while j < recvs.len() && j_start < b {
            first.get_or_insert(recvs[j]);
            last = Some(recvs[j]);
            covered[j] = true;
            count += 1;
            j_start = j_start.saturating_add(calls[recvs[j]].bytes);
            j += 1;
        }
        // The last receive only completes the message if it got byte b − 1.
        let complete = j_start >= b;
        let m = Message {
            send: Some(si),
            send_last: Some(si),
            send_calls: 1,
            recv_first: first,
            recv_last: if complete { last } else { None },
            recv_calls: count,
            bytes: n,
            proto,
            conn: 0,
            side: 0,
        };
        if complete && count > 0 {
            out.matched += 1;
        } else {
            out.unmatched_sends += 1;
        }
        out.messages.push(Message {
            recv_first: if complete { m.recv_first } else { None },
            recv_calls: if complete { count } else { 0 },
            ..m
        });
    }
    for (j, &ri) in recvs.iter().enumerate() {
        if !covered[j] {
            out.unmatched_recvs += 1;
            out.messages.push(half_recv(calls, ri, proto));
        }
    }
}

fn half_recv(calls: &[Call], ri: usize, proto: SocketProto) -> Message {
    Message {
        send: None,
        send_last: None,
        send_calls: 0,
        recv_first: Some(ri),
        recv_last: Some(ri),
        recv_calls: 1,
        bytes: calls[ri].bytes,
        proto,
        conn: 0,
        side: 0,
    }
}

fn datagram_flow(
    calls: &[Call],
    sends: &[usize],
    recvs: &[usize],
    proto: SocketProto,
    out: &mut Matches,
) {
    let mut used = vec![false; sends.len()];
    let mut p = 0usize;
    for &ri in recvs {
        let size = calls[ri].bytes;
        let found = (p..sends.len().min(p + DATAGRAM_WINDOW))
            .find(|&k| !used[k] && calls[sends[k]].bytes == size);
        match found {
            Some(k) => {
                used[k] = true;
                out.matched += 1;
                out.messages.push(Message {
                    send: Some(sends[k]),
                    send_last: Some(sends[k]),
                    send_calls: 1,
                    recv_first: Some(ri),
                    recv_last: Some(ri),
                    recv_calls: 1,
                    bytes: size,
                    proto,
                    conn: 0,
                    side: 0,
                });
                p = k + 1;
            }
            None => {
                out.unmatched_recvs += 1;
                out.messages.push(half_recv(calls, ri, proto));
            }
        }
    }
    for (k, &si) in sends.iter().enumerate() {
        if !used[k] {
            out.unmatched_sends += 1;
            out.messages.push(Message {
                send: Some(si),
                send_last: Some(si),
                send_calls: 1,
                recv_first: None,
                recv_last: None,
                recv_calls: 0,
                bytes: calls[si].bytes,
                proto,
                conn: 0,
                side: 0,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(s: &str) -> Endpoint {
        Endpoint::Inet(s.parse().unwrap())
    }

    fn sock(process: usize, fd: i64, proto: SocketProto, local: &str, peer: &str) -> SocketDesc {
        SocketDesc {
            process,
            t: 0,
            fd,
            proto,
            local: ep(local),
            peer: ep(peer),
            thread: process,
            role: None,
        }
    }

    fn call(process: usize, t: i64, op: CommOp, fd: i64, bytes: i64) -> Call {
        Call {
            process,
            thread: process,
            t,
            duration: 5,
            op,
            fd,
            bytes,
            peer: Endpoint::None,
            sensor: 0,
        }
    }

    #[test]
    fn byte_counting_handles_partial_and_coalesced_reads() {
        let sockets = vec![
            sock(0, 3, SocketProto::Tcp, "10.0.0.1:4000", "10.0.0.2:80"),
            sock(1, 7, SocketProto::Tcp, "10.0.0.2:80", "10.0.0.1:4000"),
        ];
        let calls = vec![
            call(0, 10, CommOp::Send, 3, 100),  // 0: [0,100)
            call(0, 20, CommOp::Send, 3, 50),   // 1: [100,150)
            call(0, 30, CommOp::Write, 3, 300), // 2: [150,450)
            call(1, 15, CommOp::Recv, 7, 60),   // 3: [0,60)
            call(1, 25, CommOp::Recv, 7, 140),  // 4: [60,200): end of 0, all of 1, start of 2
            call(1, 35, CommOp::Read, 7, 250),  // 5: [200,450)
            call(1, 40, CommOp::Recv, 7, 10),   // 6: [450,460) never sent
            call(1, 45, CommOp::Recv, 7, 0),    // end of file: ignored
        ];
        let m = match_calls(&sockets, &calls);
        assert_eq!((m.matched, m.unmatched_sends, m.unmatched_recvs), (3, 0, 1));
        let got: Vec<_> = m
            .messages
            .iter()
            .map(|m| (m.send, m.recv_first, m.recv_last, m.recv_calls))
            .collect();
        assert_eq!(
            got,
            vec![
                (Some(0), Some(3), Some(4), 2),
                (Some(1), Some(4), Some(4), 1),
                (Some(2), Some(4), Some(5), 2),
                (None, Some(6), Some(6), 1),
            ]
        );
    }

    #[test]
    fn both_flows_of_a_connection_share_it_with_their_sides() {
        let sockets = vec![
            sock(0, 3, SocketProto::Tcp, "10.0.0.1:4000", "10.0.0.2:80"),
            sock(1, 7, SocketProto::Tcp, "10.0.0.2:80", "10.0.0.1:4000"),
        ];
        let calls = vec![
            call(0, 10, CommOp::Send, 3, 10), // request
            call(1, 20, CommOp::Recv, 7, 10),
            call(1, 30, CommOp::Send, 7, 20), // reply
            call(0, 40, CommOp::Recv, 3, 20),
            call(0, 50, CommOp::Send, 3, 10), // second request, never read
        ];
        let m = match_calls(&sockets, &calls);
        assert_eq!(m.connections.len(), 1);
        let c = &m.connections[0];
        assert_eq!(
            c.ends,
            ["10.0.0.1:4000".to_owned(), "10.0.0.2:80".to_owned()]
        );
        assert_eq!(c.descs, [Some(0), Some(1)]);
        let sides: Vec<_> = m
            .messages
            .iter()
            .map(|m| (m.send, m.conn, m.side))
            .collect();
        assert_eq!(
            sides,
            vec![(Some(0), 0, 0), (Some(4), 0, 0), (Some(2), 0, 1)]
        );
    }

    #[test]
    fn a_send_whose_tail_was_never_read_is_unmatched() {
        let sockets = vec![
            sock(0, 3, SocketProto::Tcp, "10.0.0.1:4000", "10.0.0.2:80"),
            sock(1, 7, SocketProto::Tcp, "10.0.0.2:80", "10.0.0.1:4000"),
        ];
        let calls = vec![
            call(0, 10, CommOp::Send, 3, 100),
            call(1, 15, CommOp::Recv, 7, 60),
        ];
        let m = match_calls(&sockets, &calls);
        assert_eq!((m.matched, m.unmatched_sends, m.unmatched_recvs), (0, 1, 0));
        assert_eq!(m.messages[0].recv_last, None);
    }

    #[test]
    fn datagrams_match_in_order_by_size_skipping_lost_ones() {
        let sockets = vec![
            sock(0, 3, SocketProto::Udp, "0.0.0.0:5000", "0.0.0.0:0"),
            sock(1, 4, SocketProto::Udp, "0.0.0.0:6000", "0.0.0.0:0"),
        ];
        let mut calls = vec![
            call(0, 10, CommOp::SendTo, 3, 32),
            call(0, 20, CommOp::SendTo, 3, 64), // lost
            call(0, 30, CommOp::SendTo, 3, 16),
            call(1, 40, CommOp::RecvFrom, 4, 32),
            call(1, 50, CommOp::RecvFrom, 4, 16),
            call(1, 60, CommOp::RecvFrom, 4, 8), // from elsewhere
        ];
        for c in &mut calls[..3] {
            c.peer = ep("127.0.0.1:6000");
        }
        for c in &mut calls[3..5] {
            c.peer = ep("127.0.0.1:5000");
        }
        calls[5].peer = ep("127.0.0.1:5001");
        let m = match_calls(&sockets, &calls);
        assert_eq!((m.matched, m.unmatched_sends, m.unmatched_recvs), (2, 1, 1));
        assert_eq!(m.messages[0].send, Some(0));
        assert_eq!(m.messages[0].recv_last, Some(3));
        assert_eq!(m.messages[1].send, Some(2));
    }

    #[test]
    fn calls_on_undescribed_descriptors_are_counted() {
        let calls = vec![call(0, 10, CommOp::Send, 9, 10)];
        let m = match_calls(&[], &calls);
        assert_eq!(m.undescribed, 1);
        assert!(m.messages.is_empty());
    }

    #[test]
    fn reused_endpoint_pairs_pair_by_ordinal() {
        let mut sockets = vec![
            sock(0, 3, SocketProto::Tcp, "10.0.0.1:4000", "10.0.0.2:80"),
            sock(1, 7, SocketProto::Tcp, "10.0.0.2:80", "10.0.0.1:4000"),
            sock(0, 3, SocketProto::Tcp, "10.0.0.1:4000", "10.0.0.2:80"),
            sock(1, 8, SocketProto::Tcp, "10.0.0.2:80", "10.0.0.1:4000"),
        ];
        sockets[2].t = 100;
        sockets[3].t = 100;
        let calls = vec![
            call(0, 10, CommOp::Send, 3, 10),
            call(1, 20, CommOp::Recv, 7, 10),
            call(0, 110, CommOp::Send, 3, 20),
            call(1, 120, CommOp::Recv, 8, 20),
        ];
        let m = match_calls(&sockets, &calls);
        assert_eq!(m.matched, 2);
        assert_eq!(m.messages[1].recv_last, Some(3));
    }
}
