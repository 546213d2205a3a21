//! The message model every analysis reads: messages between named nodes.
//!
//! A [`Message`] is one application-level message: who sent it to whom, when it left and when
//! it arrived (either may be unknown: a capture at one point, a one-sided recording), whether
//! it is a call, a return or a free-form message, its call id (which pairs a call with its
//! return), the connection it travelled on, its size, and a reference back to where it came
//! from (a database row id, a packet number, a line number).
//!
//! Times are integer nanoseconds on the trace's one time base. An unknown time is
//! [`NO_TIME`]; use [`Message::send`] and [`Message::recv`] to read them as `Option`s.
//! The struct is kept small (56 bytes) because traces hold millions of messages.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::SocketAddr;

/// Nanoseconds on the trace's time base.
pub type Time = i64;

/// The value of a time that is not known.
pub const NO_TIME: Time = i64::MIN;

/// Index of a node in [`Nodes`].
pub type NodeId = u32;

/// Index of a connection in [`Trace::conns`]; [`NO_CONN`] when a message has none.
pub type ConnId = u32;

/// The connection id of a message that travelled on no known connection.
pub const NO_CONN: ConnId = u32::MAX;

/// A call id. Calls and returns with equal `(caller, callee, call id)` pair up. Readers
/// that know no id use [`NO_CALL_ID`]. A trace whose ids are names (the text format's
/// `id37`) keeps the names in [`Trace::call_id_names`], indexed by the id.
pub type CallId = u64;

/// The call id of a message that has none.
pub const NO_CALL_ID: CallId = u64::MAX;

/// What a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A request: caller → callee (`CALL_SENT`/`CALL_RCVD`).
    Call,
    /// A reply: callee → caller (`RET_SENT`/`RET_RCVD`).
    Ret,
    /// A free-form message, neither call nor return (`MSG_SENT`/`MSG_RCVD`).
    #[default]
    Msg,
}

/// Transport protocol of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// Unix-domain or unknown.
    #[default]
    Other,
}

/// One message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message {
    /// When it left the sender ([`NO_TIME`] if unknown).
    pub t_send: Time,
    /// When it arrived at the receiver ([`NO_TIME`] if unknown).
    pub t_recv: Time,
    /// Call id ([`NO_CALL_ID`] if none).
    pub call_id: CallId,
    /// Where it came from: a database message id, a packet number (1-based, in its file),
    /// or a line number (1-based).
    pub msg_ref: u64,
    /// Payload bytes (0 if unknown).
    pub bytes: u32,
    /// Sender.
    pub src: NodeId,
    /// Receiver.
    pub dst: NodeId,
    /// Connection ([`NO_CONN`] if none).
    pub conn: ConnId,
    /// Call, return or free-form.
    pub kind: Kind,
}

impl Message {
    /// A free-form message from `src` to `dst` with unknown times and no id, connection,
    /// size or reference; set the fields that are known.
    pub fn new(src: NodeId, dst: NodeId) -> Self {
        Message {
            t_send: NO_TIME,
            t_recv: NO_TIME,
            call_id: NO_CALL_ID,
            msg_ref: 0,
            bytes: 0,
            src,
            dst,
            conn: NO_CONN,
            kind: Kind::Msg,
        }
    }

    /// Send time, if known.
    pub fn send(&self) -> Option<Time> {
        (self.t_send != NO_TIME).then_some(self.t_send)
    }

    /// Receive time, if known.
    pub fn recv(&self) -> Option<Time> {
        (self.t_recv != NO_TIME).then_some(self.t_recv)
    }

    /// The time to order it by: the send time, else the receive time.
    pub fn time(&self) -> Time {
        if self.t_send != NO_TIME {
            self.t_send
        } else {
            self.t_recv
        }
    }

    /// Call id, if any.
    pub fn call(&self) -> Option<CallId> {
        (self.call_id != NO_CALL_ID).then_some(self.call_id)
    }
}

/// A connection messages travelled on: who opened it and who accepted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conn {
    /// Protocol.
    pub proto: Proto,
    /// The node that opened it (SYN sender, connect caller, first UDP sender).
    pub initiator: NodeId,
    /// The node that accepted it.
    pub acceptor: NodeId,
    /// The initiator's endpoint, if known.
    pub initiator_ep: Option<SocketAddr>,
    /// The acceptor's endpoint, if known.
    pub acceptor_ep: Option<SocketAddr>,
    /// Where it came from (a database connection id, a capture's flow number).
    pub conn_ref: u64,
}

/// Node names, each with a dense id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Nodes {
    names: Vec<String>,
    by_name: HashMap<String, NodeId>,
}

impl Nodes {
    /// The id of `name`, added if new.
    pub fn intern(&mut self, name: &str) -> NodeId {
        if let Some(&id) = self.by_name.get(name) {
            return id;
        }
        let id = NodeId::try_from(self.names.len()).unwrap_or(NodeId::MAX);
        self.names.push(name.to_owned());
        self.by_name.insert(name.to_owned(), id);
        id
    }

    /// The id of `name`, if present.
    pub fn get(&self, name: &str) -> Option<NodeId> {
        self.by_name.get(name).copied()
    }

    /// The name of node `id` (`"?"` for an id that is not here).
    pub fn name(&self, id: NodeId) -> &str {
        self.names.get(id as usize).map_or("?", String::as_str)
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when there are no nodes.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Names in id order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }
}

/// A trace: nodes, connections and messages ordered by [`Message::time`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    /// Node names.
    pub nodes: Nodes,
    /// Connections, indexed by [`ConnId`].
    pub conns: Vec<Conn>,
    /// Messages.
    pub messages: Vec<Message>,
    /// Names of call ids, when the source named them (the text format): id `i` is named
    /// `call_id_names[i]`. Empty when ids are plain numbers.
    pub call_id_names: Vec<String>,
    /// The recorded threads that sent and received each message (a session's; empty for
    /// text traces and captures), by `msg_ref`: what [`crate::causality`] reads.
    pub threads: crate::causality::ThreadEnds,
}

impl Trace {
    /// Sorts the messages by time (stable: equal times keep their input order).
    pub fn sort(&mut self) {
        self.messages.sort_by_key(Message::time);
    }

    /// The printable name of a call id: its name if the source named it, else the number.
    pub fn call_id_name(&self, id: CallId) -> String {
        if id == NO_CALL_ID {
            return String::new();
        }
        match usize::try_from(id)
            .ok()
            .and_then(|i| self.call_id_names.get(i))
        {
            Some(name) => name.clone(),
            None => id.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_stays_small() {
        assert!(
            std::mem::size_of::<Message>() <= 56,
            "{}",
            std::mem::size_of::<Message>()
        );
    }

    #[test]
    fn unknown_times_read_as_none() {
        let mut m = Message::new(0, 1);
        assert_eq!((m.send(), m.recv()), (None, None));
        m.t_recv = 5;
        assert_eq!((m.send(), m.recv(), m.time()), (None, Some(5), 5));
        m.t_send = 3;
        assert_eq!(m.time(), 3);
    }

    #[test]
    fn nodes_intern_once() {
        let mut n = Nodes::default();
        let a = n.intern("a");
        assert_eq!(n.intern("b"), 1);
        assert_eq!(n.intern("a"), a);
        assert_eq!(n.name(1), "b");
        assert_eq!(n.name(9), "?");
        assert_eq!(n.len(), 2);
    }
}
