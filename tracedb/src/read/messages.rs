//! Messages as the viewer and the demo read them (both ends matched), the connections they
//! travel on, and each message's place on its connection.

use super::{Reader, RowExt};
use crate::domain::{Direction, InitiatorFrom, Protocol};
use crate::error::Error;
use serde::Serialize;

/// A message with its ends.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct MessageRow {
    /// Id.
    pub id: i64,
    /// Payload bytes.
    pub bytes: i64,
    /// Sending thread.
    pub send_thread: i64,
    /// Send call start.
    pub send_t: i64,
    /// Receiving thread.
    pub recv_thread: i64,
    /// End of the receive call that completed the message.
    pub recv_t: i64,
    /// Received before sent on the merged time base.
    pub violation: bool,
    /// Sensor of the send call (compact index into the session's sensors, if known).
    pub send_sensor: Option<u32>,
    /// Sensor of the receive call.
    pub recv_sensor: Option<u32>,
}

/// A matched message (both ends known) as the viewer and the demo read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchedMessage {
    /// Message id.
    pub id: i64,
    /// Bytes.
    pub bytes: i64,
    /// Sending thread.
    pub send_thread: i64,
    /// Send call start.
    pub send_t: i64,
    /// Receiving thread.
    pub recv_thread: i64,
    /// End of the receive that completed it (its start if it never completed).
    pub recv_t: i64,
    /// Received before sent.
    pub violation: bool,
    /// Sensor of the send call.
    pub send_sensor: Option<i64>,
    /// Sensor of the receive call.
    pub recv_sensor: Option<i64>,
}

impl MatchedMessage {
    /// Receive minus send, ns (negative for a violation).
    pub fn latency_ns(&self) -> i64 {
        self.recv_t - self.send_t
    }
}

/// Matched messages (both ends known), in table order.
pub async fn messages(db: &Reader, sid: i64) -> Result<Vec<MatchedMessage>, Error> {
    const Q: &str = "SELECT id, bytes, send_thread_id, send_t, recv_thread_id, \
         COALESCE(recv_end, recv_t) AS recv_at, violation, send_sensor_id, recv_sensor_id \
         FROM message \
         WHERE session_id = $1 AND send_thread_id IS NOT NULL AND send_t IS NOT NULL \
         AND recv_thread_id IS NOT NULL AND COALESCE(recv_end, recv_t) IS NOT NULL";
    Ok(fetch!(db, Q, [sid], |r| MatchedMessage {
        id: r.i("id")?,
        bytes: r.i("bytes")?,
        send_thread: r.i("send_thread_id")?,
        send_t: r.i("send_t")?,
        recv_thread: r.i("recv_thread_id")?,
        recv_t: r.i("recv_at")?,
        violation: r.i("violation")? != 0,
        send_sensor: r.oi("send_sensor_id")?,
        recv_sensor: r.oi("recv_sensor_id")?,
    }))
}

/// A connection (`connection`, migration 0003).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Connection {
    /// Connection id.
    pub id: i64,
    /// Protocol (`None`: a name this version does not know).
    pub proto: Option<Protocol>,
    /// How the initiator was known.
    pub initiator_from: Option<InitiatorFrom>,
    /// Initiator's process.
    pub initiator_process: Option<i64>,
    /// Initiator's thread.
    pub initiator_thread: Option<i64>,
    /// Acceptor's process.
    pub acceptor_process: Option<i64>,
    /// Acceptor's thread.
    pub acceptor_thread: Option<i64>,
    /// Initiator's endpoint.
    pub initiator_endpoint: String,
    /// Acceptor's endpoint.
    pub acceptor_endpoint: String,
    /// First call's start.
    pub t_first: Option<i64>,
    /// Last call's end.
    pub t_last: Option<i64>,
    /// Messages initiator → acceptor.
    pub call_messages: i64,
    /// Their bytes.
    pub call_bytes: i64,
    /// Messages acceptor → initiator.
    pub return_messages: i64,
    /// Their bytes.
    pub return_bytes: i64,
    /// When the initiator's `connect` was made (`None`: not recorded).
    pub t_connect: Option<i64>,
}

/// The connections of a session, by id (empty for a database merged before migration 0003
/// until the session is merged again).
pub async fn connections(db: &Reader, sid: i64) -> Result<Vec<Connection>, Error> {
    const Q: &str = "SELECT id, proto, initiator_from, initiator_process_id, \
         initiator_thread_id, acceptor_process_id, acceptor_thread_id, initiator_endpoint, \
         acceptor_endpoint, t_first, t_last, call_messages, call_bytes, return_messages, \
         return_bytes, t_connect FROM connection WHERE session_id = $1 ORDER BY id";
    Ok(fetch!(db, Q, [sid], |r| Connection {
        id: r.i("id")?,
        proto: Protocol::parse(&r.s("proto")?),
        initiator_from: InitiatorFrom::parse(&r.s("initiator_from")?),
        initiator_process: r.oi("initiator_process_id")?,
        initiator_thread: r.oi("initiator_thread_id")?,
        acceptor_process: r.oi("acceptor_process_id")?,
        acceptor_thread: r.oi("acceptor_thread_id")?,
        initiator_endpoint: r.s("initiator_endpoint")?,
        acceptor_endpoint: r.s("acceptor_endpoint")?,
        t_first: r.oi("t_first")?,
        t_last: r.oi("t_last")?,
        call_messages: r.i("call_messages")?,
        call_bytes: r.i("call_bytes")?,
        return_messages: r.i("return_messages")?,
        return_bytes: r.i("return_bytes")?,
        t_connect: r.oi("t_connect")?,
    }))
}

/// A message's place on its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageRole {
    /// Message id.
    pub id: i64,
    /// → `connection.id`.
    pub connection: i64,
    /// Call or return.
    pub direction: Direction,
    /// 0-based index within the connection and direction.
    pub ordinal: i64,
}

/// Every message's connection, direction and ordinal, by connection, direction, ordinal:
/// the k-th call and the k-th return of a connection are a request and its reply.
pub async fn message_roles(db: &Reader, sid: i64) -> Result<Vec<MessageRole>, Error> {
    const Q: &str = "SELECT id, connection_id, direction, ordinal FROM message \
         WHERE session_id = $1 AND connection_id IS NOT NULL \
         ORDER BY connection_id, direction, ordinal";
    let rows = fetch!(db, Q, [sid], |r| (
        r.i("id")?,
        r.i("connection_id")?,
        r.s("direction")?,
        r.i("ordinal")?
    ));
    Ok(rows
        .into_iter()
        .filter_map(|(id, connection, d, ordinal)| {
            Some(MessageRole {
                id,
                connection,
                direction: Direction::parse(&d)?,
                ordinal,
            })
        })
        .collect())
}
