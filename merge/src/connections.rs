//! Which side of each connection initiated it, and each message's direction and ordinal.
//!
//! Pure. Matching ([`crate::matching`]) groups messages into connections with two sides;
//! here a side becomes the *initiator* or the *acceptor*:
//!
//! - stream sockets: the side whose socket description follows a recorded `connect` is the
//!   initiator (`connect`); else the other side of one that follows an `accept`
//!   (`accept`); else — both ends connected before recording, or not instrumented — the
//!   side with the higher port, the ephemeral one, is taken as the initiator (`port`; for
//!   Unix sockets the unnamed side, the client's);
//! - datagrams: the side that sent the first message on the session base (`first-send`).
//!
//! A message from the initiator is a `call`, from the acceptor a `return`. Its ordinal is its
//! 0-based index among the messages of its connection and direction, ordered by start (the
//! send's start, or the receive's for a receive-only row) on the session base, ties by id. So
//! on a keep-alive connection without pipelining, request k is (call, k) and its reply
//! (return, k).
//!
//! A server that speaks first (MySQL's and MariaDB's greeting, SMTP's, FTP's and POP3's
//! banners) sends returns before any call arrived: those returns answer no call, and
//! numbering them from 0 would pair every later call with the return before its own. So on a
//! stream connection the returns sent before the first call arrived — certainly: sent (the
//! send's start, or at the latest the receive's end) before the call arrived (the receive's
//! end, or at the earliest the send's start) — are numbered −n … −1, and the return after
//! them is 0, the answer to call 0.

use crate::matching::{Connection, Matches, Role, SocketDesc};
use p5_tracedb::domain::{Direction, InitiatorFrom};
use std::collections::HashMap;

/// The orientation of every connection and message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Oriented {
    /// Per connection: the initiator's side (0 or 1) and how it was known.
    pub initiator: Vec<(u8, InitiatorFrom)>,
    /// Per message: its direction.
    pub direction: Vec<Direction>,
    /// Per message: its ordinal within its connection and direction.
    pub ordinal: Vec<i64>,
}

/// When a message was sent at the latest and arrived at the earliest, on the session base
/// (`None` where neither end says).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Span {
    /// The send's start if its sender was recorded, else the receive's end.
    pub sent_by: Option<i64>,
    /// The receive's end if its receiver was recorded, else the send's start.
    pub arrived_from: Option<i64>,
}

/// Orients the connections; `starts[i]` is message `i`'s start on the session base, `spans[i]`
/// its [`Span`].
pub fn orient(
    m: &Matches,
    sockets: &[SocketDesc],
    starts: &[Option<i64>],
    spans: &[Span],
) -> Oriented {
    let mut first_send: Vec<Option<(i64, usize, u8)>> = vec![None; m.connections.len()];
    for (i, msg) in m.messages.iter().enumerate() {
        let key = (starts[i].unwrap_or(i64::MAX), i, msg.side);
        let slot = &mut first_send[msg.conn as usize];
        if slot.is_none_or(|s| key < s) {
            *slot = Some(key);
        }
    }
    let initiator: Vec<(u8, InitiatorFrom)> = m
        .connections
        .iter()
        .zip(&first_send)
        .map(|(c, first)| initiator(c, sockets, first.map(|f| f.2)))
        .collect();
    let direction: Vec<Direction> = m
        .messages
        .iter()
        .map(|msg| {
            if msg.side == initiator[msg.conn as usize].0 {
                Direction::Call
            } else {
                Direction::Return
            }
        })
        .collect();
    let mut groups: HashMap<(u32, Direction), Vec<usize>> = HashMap::new();
    for (i, msg) in m.messages.iter().enumerate() {
        groups.entry((msg.conn, direction[i])).or_default().push(i);
    }
    for v in groups.values_mut() {
        v.sort_by_key(|&i| (starts[i].unwrap_or(i64::MAX), i));
    }
    let mut ordinal = vec![0i64; m.messages.len()];
    for (&(conn, dir), v) in &groups {
        let stream =
            p5_tracedb::domain::Protocol::from(m.connections[conn as usize].proto).is_stream();
        let first_call = groups.get(&(conn, Direction::Call)).and_then(|c| c.first());
        let greetings = match (dir, first_call) {
            (Direction::Return, Some(&c)) if stream => {
                let arrived = spans[c].arrived_from.unwrap_or(i64::MIN);
                v.iter()
                    .take_while(|&&r| spans[r].sent_by.is_some_and(|t| t < arrived))
                    .count()
            }
            _ => 0,
        };
        for (k, &i) in v.iter().enumerate() {
            ordinal[i] = k as i64 - greetings as i64;
        }
    }
    Oriented {
        initiator,
        direction,
        ordinal,
    }
}

/// The initiator's side of one connection (`first`: the side that sent first).
fn initiator(c: &Connection, sockets: &[SocketDesc], first: Option<u8>) -> (u8, InitiatorFrom) {
    let role = |side: usize| c.descs[side].and_then(|d| sockets[d].role);
    if !p5_tracedb::domain::Protocol::from(c.proto).is_stream() {
        return (first.unwrap_or(0), InitiatorFrom::FirstSend);
    }
    for side in 0..2u8 {
        if role(usize::from(side)) == Some(Role::Connect) {
            return (side, InitiatorFrom::Connect);
        }
    }
    for side in 0..2u8 {
        if role(usize::from(side)) == Some(Role::Accept) {
            return (1 - side, InitiatorFrom::Accept);
        }
    }
    (ephemeral_side(&c.ends), InitiatorFrom::Port)
}

/// The side with the higher port (an unnamed Unix socket: the client); side 0 if neither.
fn ephemeral_side(ends: &[String; 2]) -> u8 {
    let port = |s: &str| {
        s.parse::<std::net::SocketAddr>()
            .map(|a| i64::from(a.port()))
            .unwrap_or(-1)
    };
    let (a, b) = (port(&ends[0]), port(&ends[1]));
    if a >= 0 || b >= 0 {
        return u8::from(b > a);
    }
    u8::from(ends[0] != "unix:" && ends[1] == "unix:")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matching::Message;
    use p5_wire::{Endpoint, SocketProto};

    fn desc(process: usize, role: Option<Role>) -> SocketDesc {
        SocketDesc {
            process,
            t: 0,
            fd: 3,
            proto: SocketProto::Tcp,
            local: Endpoint::None,
            peer: Endpoint::None,
            thread: process,
            role,
        }
    }

    fn msg(conn: u32, side: u8) -> Message {
        Message {
            send: Some(0),
            send_last: Some(0),
            send_calls: 1,
            recv_first: None,
            recv_last: None,
            recv_calls: 0,
            bytes: 1,
            proto: SocketProto::Tcp,
            conn,
            side,
        }
    }

    fn conn(proto: SocketProto, a: &str, b: &str, descs: [Option<usize>; 2]) -> Connection {
        Connection {
            proto,
            ends: [a.to_owned(), b.to_owned()],
            descs,
        }
    }

    #[test]
    fn roles_decide_then_ports_and_datagrams_go_by_first_send() {
        let sockets = vec![desc(0, None), desc(1, Some(Role::Accept)), desc(2, None)];
        let m = Matches {
            messages: vec![
                msg(0, 0),
                msg(0, 1),
                msg(0, 0),
                msg(1, 0),
                msg(2, 0),
                msg(2, 1),
            ],
            connections: vec![
                // Side 1 accepted: side 0 initiated although its port is lower.
                conn(
                    SocketProto::Tcp,
                    "10.0.0.1:80",
                    "10.0.0.2:9",
                    [Some(0), Some(1)],
                ),
                // No roles: the higher port initiated.
                conn(
                    SocketProto::Tcp,
                    "10.0.0.1:80",
                    "10.0.0.2:50000",
                    [Some(2), None],
                ),
                // Datagrams: side 1 sent first.
                conn(SocketProto::Udp, "*:5000", "*:6000", [None, None]),
            ],
            ..Matches::default()
        };
        // Message 2 starts before message 0: it is call 0.
        let starts = [Some(50), Some(60), Some(10), Some(5), Some(90), Some(80)];
        let spans: Vec<Span> = starts
            .iter()
            .map(|&t| Span {
                sent_by: t,
                arrived_from: t.map(|t| t + 1),
            })
            .collect();
        let o = orient(&m, &sockets, &starts, &spans);
        assert_eq!(
            o.initiator,
            vec![
                (0, InitiatorFrom::Accept),
                (1, InitiatorFrom::Port),
                (1, InitiatorFrom::FirstSend)
            ]
        );
        use Direction::{Call, Return};
        assert_eq!(o.direction, vec![Call, Return, Call, Return, Return, Call]);
        assert_eq!(o.ordinal, vec![1, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn the_ephemeral_port_is_the_initiator() {
        let e = |a: &str, b: &str| ephemeral_side(&[a.to_owned(), b.to_owned()]);
        assert_eq!(e("127.0.0.1:7000", "127.0.0.1:40000"), 1);
        assert_eq!(e("127.0.0.1:40000", "127.0.0.1:7000"), 0);
        assert_eq!(e("unix:", "unix:/tmp/s"), 0);
        assert_eq!(e("unix:/tmp/s", "unix:"), 1);
    }

    #[test]
    fn a_server_that_speaks_first_numbers_its_greeting_below_zero() {
        // MariaDB: greeting (return), auth (call), OK (return), query (call), result (return).
        let m = Matches {
            messages: vec![msg(0, 1), msg(0, 0), msg(0, 1), msg(0, 0), msg(0, 1)],
            connections: vec![conn(
                SocketProto::Tcp,
                "10.0.0.1:40000",
                "10.0.0.2:3306",
                [None, None],
            )],
            ..Matches::default()
        };
        let starts = [Some(10), Some(20), Some(30), Some(40), Some(50)];
        let spans: Vec<Span> = starts
            .iter()
            .map(|&t| Span {
                sent_by: t,
                arrived_from: t.map(|t| t + 5),
            })
            .collect();
        let o = orient(&m, &[], &starts, &spans);
        assert_eq!(o.ordinal, vec![-1, 0, 0, 1, 1]);
        // A reply sent before its call arrived only as far as the clocks can tell is
        // numbered as before: the bounds must prove it.
        let unsure = [
            Span {
                sent_by: Some(26),
                arrived_from: Some(15),
            },
            Span {
                sent_by: Some(20),
                arrived_from: Some(25),
            },
        ];
        let two = Matches {
            messages: vec![msg(0, 1), msg(0, 0)],
            ..m.clone()
        };
        let o = orient(&two, &[], &[Some(10), Some(20)], &unsure);
        assert_eq!(o.ordinal, vec![0, 0]);
    }
}
