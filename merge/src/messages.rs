//! The `message` and `connection` rows: every matched or half message on the session base,
//! with its connection, direction and ordinal ([`crate::connections`]), and one row per
//! connection with its two ends and what went each way.

use crate::connections;
use crate::error::Error;
use crate::session::{Diagnostic, Plan};
use p5_tracedb::domain::{Direction, Protocol};
use p5_tracedb::{Writer, schema};

/// Writes the messages and the connections; returns the matched messages still received
/// before they were sent (counted on the rows as written; the tightening's own count agrees
/// up to rounding).
pub async fn write(
    w: &mut Writer,
    sid: i64,
    plan: &Plan,
    diags: &mut Vec<Diagnostic>,
) -> Result<u64, Error> {
    let calls = &plan.scan.calls;
    let m = &plan.matches;
    let map = |c: usize| plan.fit(calls[c].process).map(calls[c].t);
    let map_end = |c: usize| {
        let call = &calls[c];
        plan.fit(call.process)
            .map(call.t.saturating_add(call.duration))
    };
    let starts: Vec<Option<i64>> = m
        .messages
        .iter()
        .map(|msg| msg.send.or(msg.recv_first).map(map))
        .collect();
    let spans: Vec<connections::Span> = m
        .messages
        .iter()
        .map(|msg| {
            let send_t = msg.send.map(map);
            let recv_end = msg.recv_last.map(map_end);
            connections::Span {
                sent_by: send_t.or(recv_end),
                arrived_from: recv_end.or(send_t),
            }
        })
        .collect();
    let oriented = connections::orient(m, &plan.scan.sockets, &starts, &spans);
    let mut conns: Vec<schema::Connection> = m
        .connections
        .iter()
        .enumerate()
        .map(|(i, c)| connection_row(sid, i, c, plan, oriented.initiator[i]))
        .collect();
    let mut violations = 0u64;
    for (i, msg) in m.messages.iter().enumerate() {
        let send = msg.send;
        let recv = msg.recv_last.or(msg.recv_first);
        let send_t = send.map(map);
        let recv_end = msg.recv_last.map(map_end);
        let violation =
            matches!((send_t, recv_end), (Some(s), Some(r)) if r < s && msg.recv_last.is_some());
        violations += u64::from(violation);
        let direction = oriented.direction[i];
        let row = schema::Message {
            session_id: sid,
            id: i as i64 + 1,
            proto: Protocol::from(msg.proto),
            bytes: msg.bytes,
            send_process_id: send.map(|c| calls[c].process as i64 + 1),
            send_thread_id: send.map(|c| calls[c].thread as i64 + 1),
            send_sensor_id: send.map(|c| calls[c].sensor as i64),
            send_t,
            send_end: msg.send_last.map(map_end),
            recv_process_id: recv.map(|c| calls[c].process as i64 + 1),
            recv_thread_id: recv.map(|c| calls[c].thread as i64 + 1),
            recv_sensor_id: recv.map(|c| calls[c].sensor as i64),
            recv_t: msg.recv_first.map(map),
            recv_end,
            recv_calls: i64::from(msg.recv_calls),
            violation: i64::from(violation),
            connection_id: Some(i64::from(msg.conn) + 1),
            direction: Some(direction),
            ordinal: Some(oriented.ordinal[i]),
            send_calls: i64::from(msg.send_calls),
        };
        let c = &mut conns[msg.conn as usize];
        let first = row.send_t.or(row.recv_t);
        let last = row.recv_end.or(row.send_end).or(row.recv_t);
        c.t_first = min_opt(c.t_first, first);
        c.t_last = max_opt(c.t_last, last);
        match direction {
            Direction::Call => {
                c.call_messages += 1;
                c.call_bytes += msg.bytes;
            }
            Direction::Return => {
                c.return_messages += 1;
                c.return_bytes += msg.bytes;
            }
        }
        w.row(row).await?;
    }
    for c in conns {
        w.row(c).await?;
    }
    if violations > 0 {
        let before = plan.sync.violations_before;
        let msg = format!(
            "{violations} messages are still received before they were sent after tightening \
             the clocks ({before} before)"
        );
        diags.push(Diagnostic::warn(
            "causality-violation",
            None,
            violations,
            msg,
        ));
    }
    Ok(violations)
}

fn min_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn max_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// A connection's row before its messages are counted.
fn connection_row(
    sid: i64,
    i: usize,
    c: &crate::matching::Connection,
    plan: &Plan,
    (init, from): (u8, p5_tracedb::domain::InitiatorFrom),
) -> schema::Connection {
    let (ini, acc) = (usize::from(init), usize::from(1 - init));
    let sockets = &plan.scan.sockets;
    let process = |side: usize| c.descs[side].map(|d| sockets[d].process as i64 + 1);
    let thread = |side: usize| c.descs[side].map(|d| sockets[d].thread as i64 + 1);
    let t_connect = c.descs[ini]
        .map(|d| &sockets[d])
        .filter(|d| d.role == Some(crate::matching::Role::Connect))
        .map(|d| plan.fit(d.process).map(d.t));
    schema::Connection {
        session_id: sid,
        id: i as i64 + 1,
        proto: Protocol::from(c.proto),
        initiator_from: from,
        initiator_process_id: process(ini),
        initiator_thread_id: thread(ini),
        acceptor_process_id: process(acc),
        acceptor_thread_id: thread(acc),
        initiator_endpoint: c.ends[ini].clone(),
        acceptor_endpoint: c.ends[acc].clone(),
        t_first: None,
        t_last: None,
        call_messages: 0,
        call_bytes: 0,
        return_messages: 0,
        return_bytes: 0,
        t_connect,
    }
}
