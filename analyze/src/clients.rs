//! Client aggregation (\[WAP5\] §2.5.1): many clients on ephemeral ports become one `CLIENT`,
//! so that otherwise identical paths from different clients aggregate into one pattern.
//!
//! * An endpoint (IP address and port) is *fixed* when it talks to at least `min_peers`
//!   distinct peer endpoints (WAP5 gives no number; analysis.md §1.3 sets 32), or when it
//!   *answers calls* — it receives a [`Kind::Call`] and sends a [`Kind::Ret`] — whatever its
//!   peer count; else *ephemeral*. The peer count alone mistakes a server for a client under
//!   keep-alive: a front whose few clients hold their connections open has fewer than 32
//!   peers on its port, and renaming it `CLIENT` merges it with its callers (and a capture's
//!   connections carry the call direction: the acceptor's runs are returns).
//! * A node that ever uses a fixed endpoint is a *server*, else a *client*.
//! * Clients are renamed `CLIENT`. When nodes are endpoints (named `ip:port`), a node is
//!   its IP address: a server's fixed endpoints keep their names and its ephemeral ones
//!   become `ip:*`.
//! * When no endpoint is fixed (a capture of a few long connections), nodes not named by
//!   endpoint keep their names: with no server known, nobody is a client.
//!
//! A message's endpoints come from its connection ([`crate::trace::Conn`]'s endpoints, by
//! direction) or else from its node names when they parse as socket addresses. Nodes with
//! no known endpoint keep their names.

use crate::hash::{FxHashMap, FxHashSet};
use crate::trace::{Conn, ConnId, Kind, NO_CONN, NodeId, Nodes, Trace};
use std::borrow::Cow;
use std::collections::{BTreeSet, HashSet};
use std::net::{IpAddr, SocketAddr};

/// The name aggregated clients get.
pub const CLIENT: &str = "CLIENT";

/// The default number of distinct peers that makes an endpoint fixed (ours).
pub const FIXED_PORT_PEERS: usize = 32;

/// The result of [`aggregate_clients`].
#[derive(Debug, Clone, Default)]
pub struct Aggregated {
    /// The trace with renamed nodes.
    pub trace: Trace,
    /// The fixed endpoints.
    pub fixed: BTreeSet<SocketAddr>,
    /// Nodes of the input that became `CLIENT`.
    pub clients: usize,
    /// Each input node's id in the output (by input id).
    pub map: Vec<NodeId>,
}

/// The endpoints (sender's, receiver's) of message `m`, if known.
fn endpoints(trace: &Trace, src: NodeId, conn: u32) -> Option<(SocketAddr, SocketAddr)> {
    if conn != NO_CONN {
        let c: &Conn = trace.conns.get(conn as usize)?;
        let (i, a) = (c.initiator_ep?, c.acceptor_ep?);
        return Some(if src == c.initiator { (i, a) } else { (a, i) });
    }
    None
}

fn parse_ep(nodes: &Nodes, id: NodeId) -> Option<SocketAddr> {
    nodes.name(id).parse().ok()
}

/// The names [`aggregate_clients`] gives, without a renamed copy of the messages:
/// `trace` holds only the new nodes, `map` each input node's id among them.
pub fn aggregate_names(trace: &Trace, min_peers: usize) -> Aggregated {
    let n = trace.nodes.len();
    // Each node's name parsed once.
    let named: Vec<Option<SocketAddr>> = (0..n as NodeId)
        .map(|id| parse_ep(&trace.nodes, id))
        .collect();
    let fixed = fixed_endpoints(trace, &named, min_peers);
    // Endpoint-named nodes are grouped by IP address.
    let server_ips: HashSet<IpAddr> = fixed.set.iter().map(SocketAddr::ip).collect();
    let mut out = Aggregated {
        fixed: fixed.set,
        ..Aggregated::default()
    };
    let mut map: Vec<NodeId> = Vec::with_capacity(n);
    for (id, name) in trace.nodes.names().enumerate() {
        let new_name: Cow<str> = match named[id].ok_or(()) {
            // No server recognised: nobody is a client of anyone, names stay.
            _ if out.fixed.is_empty() && !name.contains(':') => name.into(),
            Ok(ep) if !server_ips.contains(&ep.ip()) => CLIENT.into(),
            Ok(ep) if out.fixed.contains(&ep) => name.into(),
            Ok(ep) => format!("{}:*", fmt_ip(ep.ip())).into(),
            Err(_) if fixed.used[id] == Used::Nothing => name.into(),
            Err(_) if fixed.used[id] == Used::Fixed => name.into(),
            Err(_) => CLIENT.into(),
        };
        out.clients += usize::from(new_name == CLIENT);
        map.push(out.trace.nodes.intern(&new_name));
    }
    out.map = map;
    out
}

/// Which endpoints a node used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Used {
    /// None known.
    Nothing,
    /// Only ephemeral ones.
    Ephemeral,
    /// At least one fixed one.
    Fixed,
}

/// The fixed endpoints of a trace and what each node used.
struct Fixed {
    set: BTreeSet<SocketAddr>,
    used: Vec<Used>,
}

/// Every endpoint each node used and every endpoint's distinct peers, from connections and
/// messages (endpoints interned; pairs sorted and deduplicated, not hashed into a set per
/// endpoint — a capture may hold millions of ephemeral ones).
fn fixed_endpoints(trace: &Trace, named: &[Option<SocketAddr>], min_peers: usize) -> Fixed {
    let mut ids: FxHashMap<SocketAddr, u32> = FxHashMap::default();
    let mut eps: Vec<SocketAddr> = Vec::new();
    let mut intern = |e: SocketAddr| {
        *ids.entry(e).or_insert_with(|| {
            eps.push(e);
            (eps.len() - 1) as u32
        })
    };
    let mut used: Vec<(NodeId, u32)> = Vec::new();
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    let mut note = |a: (NodeId, SocketAddr), b: (NodeId, SocketAddr)| {
        let (ea, eb) = (intern(a.1), intern(b.1));
        used.extend([(a.0, ea), (b.0, eb)]);
        pairs.extend([(ea, eb), (eb, ea)]);
    };
    for c in &trace.conns {
        if let (Some(i), Some(a)) = (c.initiator_ep, c.acceptor_ep) {
            note((c.initiator, i), (c.acceptor, a));
        }
    }
    let ep = |id: NodeId| named.get(id as usize).copied().flatten();
    // Endpoints that received a call, and endpoints that sent a return.
    let (mut called, mut returned) = (FxHashSet::default(), FxHashSet::default());
    // Each (sender, receiver, connection, kind) once.
    let mut seen: FxHashSet<(NodeId, NodeId, ConnId, Kind)> = FxHashSet::default();
    for m in &trace.messages {
        if !seen.insert((m.src, m.dst, m.conn, m.kind)) {
            continue;
        }
        let pair = endpoints(trace, m.src, m.conn).or_else(|| Some((ep(m.src)?, ep(m.dst)?)));
        if let Some((s, d)) = pair {
            note((m.src, s), (m.dst, d));
            match m.kind {
                Kind::Call => called.insert(d),
                Kind::Ret => returned.insert(s),
                Kind::Msg => false,
            };
        }
    }
    drop(seen);
    pairs.sort_unstable();
    pairs.dedup();
    let mut is_fixed = vec![false; eps.len()];
    for run in pairs.chunk_by(|a, b| a.0 == b.0) {
        is_fixed[run[0].0 as usize] = run.len() >= min_peers;
    }
    // A listening endpoint that answers calls is a server's, however few its peers.
    for e in called.intersection(&returned) {
        if let Some(&id) = ids.get(e) {
            is_fixed[id as usize] = true;
        }
    }
    used.sort_unstable();
    used.dedup();
    let mut by_node = vec![Used::Nothing; named.len()];
    for &(node, e) in &used {
        if let Some(u) = by_node.get_mut(node as usize) {
            if is_fixed[e as usize] {
                *u = Used::Fixed;
            } else if *u == Used::Nothing {
                *u = Used::Ephemeral;
            }
        }
    }
    let set = eps
        .iter()
        .zip(&is_fixed)
        .filter(|(_, f)| **f)
        .map(|(e, _)| *e)
        .collect();
    Fixed { set, used: by_node }
}

/// Renames client nodes to `CLIENT` (see the module documentation).
pub fn aggregate_clients(trace: &Trace, min_peers: usize) -> Aggregated {
    let mut out = aggregate_names(trace, min_peers);
    let map = std::mem::take(&mut out.map);
    let remap = |id: NodeId| map.get(id as usize).copied().unwrap_or(id);
    out.trace.messages = trace
        .messages
        .iter()
        .map(|m| {
            let mut m = *m;
            m.src = remap(m.src);
            m.dst = remap(m.dst);
            m
        })
        .collect();
    out.trace.conns = trace
        .conns
        .iter()
        .map(|c| Conn {
            initiator: remap(c.initiator),
            acceptor: remap(c.acceptor),
            ..c.clone()
        })
        .collect();
    out.trace.call_id_names = trace.call_id_names.clone();
    out.trace.threads = trace.threads.clone();
    out.map = map;
    out
}

fn fmt_ip(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Kind, Message, Proto};

    fn msg(t: &mut Trace, a: &str, b: &str, at: i64) {
        let (s, d) = (t.nodes.intern(a), t.nodes.intern(b));
        let mut m = Message::new(s, d);
        m.t_send = at;
        m.kind = Kind::Call;
        t.messages.push(m);
    }

    #[test]
    fn a_thousand_ephemeral_clients_become_one() {
        let mut t = Trace::default();
        for i in 0..1000 {
            let client = format!("10.1.{}.{}:{}", i / 250, i % 250 + 1, 40000 + i);
            msg(&mut t, &client, "10.0.0.1:80", i);
            msg(&mut t, "10.0.0.1:80", &client, i + 1);
        }
        // The server calls a database from an ephemeral port.
        msg(&mut t, "10.0.0.1:51000", "10.0.0.2:5432", 5000);
        let a = aggregate_clients(&t, FIXED_PORT_PEERS);
        assert_eq!(
            a.fixed.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
            ["10.0.0.1:80"]
        );
        assert_eq!(a.clients, 1001, "the database talks to one peer only");
        let names: Vec<&str> = a.trace.nodes.names().collect();
        assert_eq!(names, ["CLIENT", "10.0.0.1:80", "10.0.0.1:*"]);
        assert_eq!(a.trace.messages.len(), 2001);
    }

    #[test]
    fn nodes_with_connections_are_servers_if_they_use_a_fixed_port() {
        let mut t = Trace::default();
        let web = t.nodes.intern("web@h1");
        let db = t.nodes.intern("db@h2");
        let other = t.nodes.intern("cron@h3");
        for i in 0..40u16 {
            let c = t.nodes.intern(&format!("curl{i}@c"));
            t.conns.push(Conn {
                proto: Proto::Tcp,
                initiator: c,
                acceptor: web,
                initiator_ep: format!("10.9.0.{}:{}", i + 1, 30000 + i).parse().ok(),
                acceptor_ep: "10.0.0.1:80".parse().ok(),
                conn_ref: u64::from(i),
            });
            let mut m = Message::new(c, web);
            m.conn = u32::from(i);
            t.messages.push(m);
        }
        t.conns.push(Conn {
            proto: Proto::Tcp,
            initiator: web,
            acceptor: db,
            initiator_ep: "10.0.0.1:50000".parse().ok(),
            acceptor_ep: "10.0.0.2:5432".parse().ok(),
            conn_ref: 99,
        });
        let a = aggregate_clients(&t, 32);
        let name = |id: NodeId| {
            a.trace
                .nodes
                .name(a.trace.messages[id as usize].src)
                .to_owned()
        };
        assert_eq!(name(0), CLIENT);
        assert_eq!(a.trace.nodes.name(a.trace.messages[0].dst), "web@h1");
        assert!(
            a.trace.nodes.get("db@h2").is_none(),
            "db talks to one peer: a client"
        );
        assert!(a.trace.nodes.get("cron@h3").is_some(), "no endpoints: kept");
        let _ = other;
    }

    /// A capture-like trace: `front` (10.0.0.1:80) is called by 8 keep-alive clients, calls
    /// a backend (10.0.0.2:8000) from one ephemeral port, and both answer every call.
    fn keep_alive(calls: u16) -> Trace {
        let mut t = Trace::default();
        let front = t.nodes.intern("10.0.0.1:80");
        let front_out = t.nodes.intern("10.0.0.1:51000");
        let back = t.nodes.intern("10.0.0.2:8000");
        let conn = |t: &mut Trace, i: NodeId, a: NodeId| {
            t.conns.push(Conn {
                proto: Proto::Tcp,
                initiator: i,
                acceptor: a,
                initiator_ep: t.nodes.name(i).parse().ok(),
                acceptor_ep: t.nodes.name(a).parse().ok(),
                conn_ref: t.conns.len() as u64,
            });
            (t.conns.len() - 1) as u32
        };
        let back_conn = conn(&mut t, front_out, back);
        let mut at = 0;
        for c in 0..8u16 {
            let client = t.nodes.intern(&format!("10.9.0.{}:{}", c + 1, 40000 + c));
            let cc = conn(&mut t, client, front);
            for _ in 0..calls {
                for (s, d, k, conn) in [
                    (client, front, Kind::Call, cc),
                    (front_out, back, Kind::Call, back_conn),
                    (back, front_out, Kind::Ret, back_conn),
                    (front, client, Kind::Ret, cc),
                ] {
                    let mut m = Message::new(s, d);
                    (m.t_send, m.kind, m.conn) = (at, k, conn);
                    at += 10;
                    t.messages.push(m);
                }
            }
        }
        t
    }

    #[test]
    fn a_server_with_few_keep_alive_peers_keeps_its_name() {
        let t = keep_alive(5);
        let a = aggregate_clients(&t, FIXED_PORT_PEERS);
        let names: BTreeSet<&str> = a.trace.nodes.names().collect();
        assert_eq!(
            names,
            BTreeSet::from(["10.0.0.1:80", "10.0.0.1:*", "10.0.0.2:8000", CLIENT]),
            "the front and the backend answer calls: servers, though with 8 and 1 peers"
        );
        assert_eq!(a.clients, 8, "only the 8 callers are clients");
        let front = a.trace.nodes.get("10.0.0.1:80");
        assert_eq!(a.trace.messages[0].dst, front.expect("front kept"));
        // The same endpoints with free-form messages only: the peer count decides alone.
        let mut free = t.clone();
        for m in &mut free.messages {
            m.kind = Kind::Msg;
        }
        let a = aggregate_clients(&free, FIXED_PORT_PEERS);
        assert!(a.fixed.is_empty(), "no call answered, too few peers");
    }
}
