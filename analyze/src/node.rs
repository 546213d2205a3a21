//! Node naming: what a "node" of a causal path is (`--node`, analysis.md §4(a)).
//!
//! Readers know some of a message end's host, program, process, thread and endpoint, and
//! [`NodeKey`] picks how they become a node name. The text format has only names, which are
//! used as written whatever the key; captures know hosts (IP addresses) and endpoints.

use std::net::SocketAddr;

/// How message ends are grouped into nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum NodeKey {
    /// The host (for captures: the IP address).
    Host,
    /// The program (aggregates the instances of a role).
    Program,
    /// The program on its host (`web@node1`).
    #[default]
    ProgramAtHost,
    /// One process (`web:1234@node1`).
    Process,
    /// One thread (`web:1234/1240@node1`).
    Thread,
    /// One endpoint, IP address and port (`10.0.0.1:8080`).
    Endpoint,
}

crate::choices!(NodeKey { "host" => NodeKey::Host, "program" => NodeKey::Program, "program@host" => NodeKey::ProgramAtHost, "process" => NodeKey::Process, "thread" => NodeKey::Thread, "endpoint" => NodeKey::Endpoint });

/// What a reader knows about one end of a message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeParts<'a> {
    /// Host name or address.
    pub host: &'a str,
    /// Program name (empty if unknown).
    pub program: &'a str,
    /// Process id.
    pub pid: Option<u32>,
    /// Thread id.
    pub tid: Option<u32>,
    /// Endpoint.
    pub endpoint: Option<SocketAddr>,
}

impl NodeKey {
    /// The node name of `p` under this key. Parts that are unknown fall back to the next
    /// coarser ones: no program → the host; no endpoint → the host.
    pub fn name(self, p: &NodeParts<'_>) -> String {
        let program = if p.program.is_empty() {
            p.host
        } else {
            p.program
        };
        match (self, p.pid, p.tid, p.endpoint) {
            (NodeKey::Host, ..) => p.host.to_owned(),
            (NodeKey::Program, ..) => program.to_owned(),
            (NodeKey::Endpoint, _, _, Some(ep)) => ep.to_string(),
            (NodeKey::Endpoint, ..) => p.host.to_owned(),
            (NodeKey::Thread, Some(pid), Some(tid), _) => {
                format!("{program}:{pid}/{tid}@{}", p.host)
            }
            (NodeKey::Thread | NodeKey::Process, Some(pid), ..) => {
                format!("{program}:{pid}@{}", p.host)
            }
            _ if p.program.is_empty() => p.host.to_owned(),
            _ => format!("{}@{}", p.program, p.host),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_key_names_a_node() {
        let p = NodeParts {
            host: "n1",
            program: "web",
            pid: Some(12),
            tid: Some(13),
            endpoint: "10.0.0.1:80".parse().ok(),
        };
        let names: Vec<String> = [
            NodeKey::Host,
            NodeKey::Program,
            NodeKey::ProgramAtHost,
            NodeKey::Process,
            NodeKey::Thread,
            NodeKey::Endpoint,
        ]
        .iter()
        .map(|k| k.name(&p))
        .collect();
        assert_eq!(
            names,
            [
                "n1",
                "web",
                "web@n1",
                "web:12@n1",
                "web:12/13@n1",
                "10.0.0.1:80"
            ]
        );
        let bare = NodeParts {
            host: "10.0.0.2",
            ..NodeParts::default()
        };
        assert_eq!(NodeKey::default().name(&bare), "10.0.0.2");
        assert_eq!(NodeKey::Endpoint.name(&bare), "10.0.0.2");
        assert_eq!(NodeKey::default().to_string(), "program@host");
    }
}
