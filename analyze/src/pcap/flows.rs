//! The flow table: segments in time order in, a [`Trace`] out.
//!
//! It holds only per-flow state — one [`TcpConn`] per TCP 4-tuple, one [`UdpFlow`] per UDP
//! endpoint pair — plus the messages built so far. A message is pushed when its run begins and
//! widened in place as the run grows, so the message list stays in order of first packet.
//!
//! Nodes are named by [`NodeNaming`]: `host` is the IP address as text (`10.0.0.1`, `::1`),
//! `endpoint` is `ip:port` (`[::1]:80` for IPv6). Every connection in the trace records both
//! endpoints whatever the naming.
//!
//! UDP: each datagram is one [`Kind::Msg`]; the first sender of an endpoint pair is its flow's
//! initiator. Closed TCP connections are forgotten [`CLOSED_KEEP_NS`] after their last packet.

use super::NodeNaming;
use super::packet::{RST, SYN, Segment};
use super::tcp::{Sink, TcpConn, initiator_of, msg_ref};
use crate::report::ReadReport;
use crate::trace::{Conn, ConnId, Kind, Message, NodeId, Nodes, Proto, Time, Trace};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::{IpAddr, SocketAddr};

/// How long a closed connection's state is kept for trailing packets (ns of capture time).
pub const CLOSED_KEEP_NS: Time = 30_000_000_000;

/// Packets between sweeps of closed connections.
const SWEEP_EVERY: u64 = 1 << 16;

/// A small, fast, non-cryptographic hasher (FxHash) for flow keys, which come from one's
/// own captures.
#[derive(Debug, Default, Clone, Copy)]
pub struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(b));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl FxHasher {
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// A hash map keyed with [`FxHasher`].
pub type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// An unordered endpoint pair.
type FlowKey = (SocketAddr, SocketAddr);

fn key(seg: &Segment) -> FlowKey {
    if seg.src <= seg.dst {
        (seg.src, seg.dst)
    } else {
        (seg.dst, seg.src)
    }
}

/// One UDP endpoint pair.
#[derive(Debug, Clone, Copy)]
pub struct UdpFlow {
    id: ConnId,
    initiator: SocketAddr,
    nodes: [NodeId; 2],
}

/// Flow state and the trace being built.
#[derive(Debug)]
pub struct Flows {
    naming: NodeNaming,
    nodes: Nodes,
    node_ids: FxMap<SocketAddr, NodeId>,
    host_ids: FxMap<IpAddr, NodeId>,
    conns: Vec<Conn>,
    tcp: FxMap<FlowKey, TcpConn>,
    udp: FxMap<FlowKey, UdpFlow>,
    sink: Sink,
    packets: u64,
}

impl Flows {
    /// An empty table naming nodes by `naming`.
    pub fn new(naming: NodeNaming) -> Self {
        Flows {
            naming,
            nodes: Nodes::default(),
            node_ids: FxMap::default(),
            host_ids: FxMap::default(),
            conns: Vec::new(),
            tcp: FxMap::default(),
            udp: FxMap::default(),
            sink: Sink::default(),
            packets: 0,
        }
    }

    /// Takes the next segment in time order; returns the message it belongs to, if any.
    pub fn segment(&mut self, seg: &Segment) -> Option<usize> {
        self.packets += 1;
        if self.packets.is_multiple_of(SWEEP_EVERY) {
            self.sweep(seg.ts);
        }
        match seg.proto {
            Proto::Tcp => self.tcp_segment(seg),
            _ => Some(self.datagram(seg)),
        }
    }

    /// Extends message `idx` to cover another sighting at `ts` (the same packet seen by
    /// another sniffer).
    pub fn widen(&mut self, idx: usize, ts: Time) {
        self.sink.widen(idx, ts);
    }

    fn tcp_segment(&mut self, seg: &Segment) -> Option<usize> {
        let k = key(seg);
        let reuse = match self.tcp.get(&k) {
            Some(c) => c.is_reuse(seg),
            None => {
                // Only a SYN or data opens a connection; stray ACKs and RSTs do not.
                if seg.flags & SYN == 0 && (seg.len == 0 || seg.flags & RST != 0) {
                    return None;
                }
                true
            }
        };
        if reuse {
            if let Some(old) = self.tcp.get_mut(&k) {
                old.close(&mut self.sink);
            }
            let conn = self.open(Proto::Tcp, initiator_of(seg), seg);
            self.tcp.insert(k, TcpConn::new(conn.0, conn.1, conn.2));
        }
        let c = self.tcp.get_mut(&k)?;
        c.segment(seg, &mut self.sink)
    }

    fn datagram(&mut self, seg: &Segment) -> usize {
        let k = key(seg);
        let flow = match self.udp.get(&k) {
            Some(f) => *f,
            None => {
                let (id, initiator, nodes) = self.open(Proto::Udp, seg.src, seg);
                let f = UdpFlow {
                    id,
                    initiator,
                    nodes,
                };
                self.udp.insert(k, f);
                f
            }
        };
        let dir = usize::from(seg.src != flow.initiator);
        let mut m = Message::new(flow.nodes[dir], flow.nodes[1 - dir]);
        m.t_send = seg.ts;
        m.t_recv = seg.ts;
        m.kind = Kind::Msg;
        m.conn = flow.id;
        m.bytes = seg.len;
        m.msg_ref = msg_ref(seg);
        self.sink.messages.push(m);
        self.sink.messages.len() - 1
    }

    /// Adds a connection initiated by `initiator` to the trace.
    fn open(
        &mut self,
        proto: Proto,
        initiator: SocketAddr,
        seg: &Segment,
    ) -> (ConnId, SocketAddr, [NodeId; 2]) {
        let acceptor = if initiator == seg.src {
            seg.dst
        } else {
            seg.src
        };
        let nodes = [self.node(initiator), self.node(acceptor)];
        let id = ConnId::try_from(self.conns.len()).unwrap_or(ConnId::MAX - 1);
        self.conns.push(Conn {
            proto,
            initiator: nodes[0],
            acceptor: nodes[1],
            initiator_ep: Some(initiator),
            acceptor_ep: Some(acceptor),
            conn_ref: self.conns.len() as u64 + 1,
        });
        (id, initiator, nodes)
    }

    fn node(&mut self, ep: SocketAddr) -> NodeId {
        match self.naming {
            NodeNaming::Host => {
                if let Some(&id) = self.host_ids.get(&ep.ip()) {
                    return id;
                }
                let id = self.nodes.intern(&ep.ip().to_string());
                self.host_ids.insert(ep.ip(), id);
                id
            }
            NodeNaming::Endpoint => {
                if let Some(&id) = self.node_ids.get(&ep) {
                    return id;
                }
                let id = self.nodes.intern(&ep.to_string());
                self.node_ids.insert(ep, id);
                id
            }
        }
    }

    fn sweep(&mut self, now: Time) {
        self.tcp
            .retain(|_, c| !(c.closed && now.saturating_sub(c.last_ts) > CLOSED_KEEP_NS));
    }

    /// Connections currently held (open, or closed and kept a while).
    pub fn held(&self) -> usize {
        self.tcp.len() + self.udp.len()
    }

    /// Closes every run, adds the counters to `report`, and returns the trace sorted by time.
    pub fn finish(mut self, report: &mut ReadReport) -> Trace {
        for c in self.tcp.values_mut() {
            c.close(&mut self.sink);
        }
        let st = self.sink.stats;
        for (kind, n) in [
            ("retransmitted segments", st.retransmitted),
            ("capture gaps", st.gaps),
            ("out-of-order segments", st.reordered),
            ("keep-alive probes", st.probes),
        ] {
            if n > 0 {
                report.note(kind, n);
            }
        }
        let mut trace = Trace {
            nodes: self.nodes,
            conns: self.conns,
            messages: self.sink.messages,
            ..Trace::default()
        };
        trace.sort();
        trace
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcap::packet::{ACK, FIN};

    fn seg(ts: Time, src: &str, dst: &str, seq: u32, flags: u8, len: u32) -> Segment {
        Segment {
            ts,
            file: 0,
            number: 1,
            proto: Proto::Tcp,
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            seq,
            ack: 0,
            flags,
            len,
            digest: 0,
        }
    }

    #[test]
    fn closed_connections_are_forgotten_and_open_ones_kept() {
        let mut f = Flows::new(NodeNaming::Endpoint);
        let server = "10.0.0.1:80";
        let mut t = 0;
        // 20,000 short connections, one second apart: SYN, request, reply, FIN, FIN.
        for i in 0..20_000u32 {
            let client = format!("10.0.{}.{}:{}", i / 250 % 250, i % 250, 1024 + i % 60_000);
            for s in [
                seg(t, &client, server, 0, SYN, 0),
                seg(t, &client, server, 1, ACK, 10),
                seg(t, server, &client, 0, ACK, 10),
                seg(t, &client, server, 11, FIN | ACK, 0),
                seg(t, server, &client, 10, FIN | ACK, 0),
            ] {
                f.segment(&s);
            }
            t += 1_000_000_000;
        }
        // The sweep at packet 65,536 (connection 13,107) kept the last 30 s (30 connections);
        // 6,893 came after it.
        assert_eq!(f.held(), 20_000 - 13_107 + 30);
        let mut report = ReadReport::default();
        let trace = f.finish(&mut report);
        assert_eq!(trace.messages.len(), 40_000);
        assert_eq!(trace.conns.len(), 20_000);
    }
}
