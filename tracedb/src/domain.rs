//! The names the database stores for domain values, in one place: thread states, runtimes,
//! clocks, protocols, message directions, how a connection's initiator was known, diagnostic
//! severities and the analysis tables' node kinds and visits.
//!
//! Each enum has `name()` (the stored text) and `parse()` (its inverse, `None` for text this
//! version does not know — readers keep such rows rather than fail).

macro_rules! names {
    ($(#[$doc:meta])* $ty:ident { $($(#[$vdoc:meta])* $var:ident = $name:literal),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $ty {
            $($(#[$vdoc])* $var),*
        }

        impl $ty {
            /// Every value, in category order.
            pub const ALL: &'static [$ty] = &[$($ty::$var),*];
            /// Every stored name, in category order.
            pub const NAMES: &'static [&'static str] = &[$($name),*];

            /// The stored name.
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$var => $name),*
                }
            }

            /// The value of a stored name.
            pub fn parse(s: &str) -> Option<$ty> {
                match s {
                    $($name => Some($ty::$var),)*
                    _ => None,
                }
            }
        }

        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
                $ty::parse(&s).ok_or_else(|| {
                    serde::de::Error::unknown_variant(&s, $ty::NAMES)
                })
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

names! {
    /// A thread's state in the Gantt chart (`state.state`, CoSMoS Fig. 7). The order is the
    /// viewer's category index (new states are appended, so stored indices keep their
    /// meaning).
    ThreadState {
        /// Running the program's own code.
        Calculating = "calculating",
        /// In a send call.
        Sending = "sending",
        /// In a receive call.
        Receiving = "receiving",
        /// In connect.
        Connecting = "connecting",
        /// In accept.
        Accepting = "accepting",
        /// In close or shutdown.
        Closing = "closing",
        /// Waiting for descriptors to become ready (poll, select, epoll_wait, a selector):
        /// neither calculating nor moving data.
        Waiting = "waiting",
    }
}

impl ThreadState {
    /// The state of a thread inside a communication call.
    pub fn of(op: p5_wire::CommOp) -> ThreadState {
        use p5_wire::CommOp::*;
        match op {
            Send | SendTo | SendMsg | Write => ThreadState::Sending,
            Recv | RecvFrom | RecvMsg | Read => ThreadState::Receiving,
            Connect => ThreadState::Connecting,
            Accept => ThreadState::Accepting,
            Close | Shutdown => ThreadState::Closing,
            Wait => ThreadState::Waiting,
        }
    }
}

names! {
    /// Who produced a process's data (`process.runtime`).
    Runtime {
        /// The Rust runtime used from Rust.
        Rust = "rust",
        /// The Rust runtime through the C ABI.
        C = "c",
        /// The Python client.
        Python = "python",
        /// The Java client.
        Java = "java",
        /// A host agent.
        HostAgent = "host-agent",
        /// An OS monitor.
        OsMonitor = "os-monitor",
        /// A process of the program that recorded nothing itself (no runtime, or it never
        /// announced itself): known from an OS monitor that followed it (`Task` events).
        Uninstrumented = "uninstrumented",
        /// Not said.
        Unknown = "unknown",
    }
}

impl Runtime {
    /// True for the program under study (not a host agent or OS monitor).
    pub fn is_program(self) -> bool {
        !matches!(self, Runtime::HostAgent | Runtime::OsMonitor)
    }
}

impl From<p5_wire::RuntimeKind> for Runtime {
    fn from(k: p5_wire::RuntimeKind) -> Self {
        use p5_wire::RuntimeKind as K;
        match k {
            K::Rust => Runtime::Rust,
            K::C => Runtime::C,
            K::Python => Runtime::Python,
            K::Java => Runtime::Java,
            K::HostAgent => Runtime::HostAgent,
            K::OsMonitor => Runtime::OsMonitor,
            _ => Runtime::Unknown,
        }
    }
}

names! {
    /// The clock source of a runtime (`process.clock`).
    ClockSource {
        /// The invariant TSC.
        Tsc = "tsc",
        /// CLOCK_MONOTONIC.
        Monotonic = "monotonic",
        /// Not said.
        Unknown = "unknown",
    }
}

impl ClockSource {
    /// From the handshake's byte.
    pub fn from_u8(b: u8) -> ClockSource {
        match b {
            1 => ClockSource::Tsc,
            2 => ClockSource::Monotonic,
            _ => ClockSource::Unknown,
        }
    }
}

names! {
    /// A socket protocol (`message.proto`, `connection.proto`).
    Protocol {
        /// TCP.
        Tcp = "tcp",
        /// UDP.
        Udp = "udp",
        /// A Unix stream socket.
        UnixStream = "unix-stream",
        /// A Unix datagram (or seqpacket) socket.
        UnixDgram = "unix-dgram",
        /// Not known.
        Unknown = "unknown",
    }
}

impl Protocol {
    /// True for byte streams (TCP, Unix stream).
    pub fn is_stream(self) -> bool {
        matches!(self, Protocol::Tcp | Protocol::UnixStream)
    }
}

impl From<p5_wire::SocketProto> for Protocol {
    fn from(p: p5_wire::SocketProto) -> Self {
        use p5_wire::SocketProto as P;
        match p {
            P::Tcp => Protocol::Tcp,
            P::Udp => Protocol::Udp,
            P::UnixStream => Protocol::UnixStream,
            P::UnixDgram => Protocol::UnixDgram,
            _ => Protocol::Unknown,
        }
    }
}

names! {
    /// A message's direction on its connection (`message.direction`).
    Direction {
        /// Initiator → acceptor (a request).
        Call = "call",
        /// Acceptor → initiator (a reply).
        Return = "return",
    }
}

names! {
    /// How a connection's initiator was known (`connection.initiator_from`).
    InitiatorFrom {
        /// The initiator's `connect` was recorded.
        Connect = "connect",
        /// The acceptor's `accept` was recorded.
        Accept = "accept",
        /// Neither was recorded (connected before recording): the side with the higher,
        /// ephemeral, port is taken as the initiator.
        Port = "port",
        /// Datagrams: the side that sent first.
        FirstSend = "first-send",
    }
}

names! {
    /// Severity of a `diagnostic` row.
    Severity {
        /// Worth knowing.
        Info = "info",
        /// Something was lost or guessed.
        Warning = "warning",
    }
}

names! {
    /// A node of a causal path (`path_node.kind`).
    NodeKind {
        /// A traced node.
        Node = "node",
        /// A node that was not traced, seen only through its messages.
        Untraced = "untraced",
    }
}

// The `names!` enums derive nothing beyond their names: the default is written out.
#[allow(clippy::derivable_impls)]
impl Default for NodeKind {
    fn default() -> Self {
        NodeKind::Node
    }
}

names! {
    /// Which visit of a node a path node is (`path_node.visit`).
    Visit {
        /// Entered by a call.
        Call = "call",
        /// Entered by a return.
        Return = "return",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in ThreadState::ALL {
            assert_eq!(ThreadState::parse(s.name()), Some(*s));
        }
        for (i, s) in ThreadState::ALL.iter().enumerate() {
            assert_eq!(ThreadState::NAMES[i], s.name());
        }
        assert_eq!(Protocol::parse("unix-dgram"), Some(Protocol::UnixDgram));
        assert_eq!(Direction::parse("sideways"), None);
        assert_eq!(
            Runtime::from(p5_wire::RuntimeKind::HostAgent).name(),
            "host-agent"
        );
        assert!(!Runtime::OsMonitor.is_program());
    }
}
