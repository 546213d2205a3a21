use super::*;
use crate::matching::{SocketDesc, match_calls};
use p5_wire::{CommOp, Endpoint};

const CLIENT: &str = "10.0.0.1:4000";
const SERVER: &str = "10.0.0.2:80";

fn ep(s: &str) -> Endpoint {
    Endpoint::Inet(s.parse().unwrap())
}

/// Process 0 is the client (fd 3), process 1 the server (fd 7).
fn sockets() -> Vec<SocketDesc> {
    let sock = |process, fd, local, peer| SocketDesc {
        process,
        t: 0,
        fd,
        proto: SocketProto::Tcp,
        local: ep(local),
        peer: ep(peer),
        thread: process,
        role: None,
    };
    vec![sock(0, 3, CLIENT, SERVER), sock(1, 7, SERVER, CLIENT)]
}

/// A call of 5 ns: the client's on fd 3, the server's on fd 7.
fn call(process: usize, t: i64, op: CommOp, bytes: i64) -> Call {
    Call {
        process,
        thread: process,
        t,
        duration: 5,
        op,
        fd: if process == 0 { 3 } else { 7 },
        bytes,
        peer: Endpoint::None,
        sensor: 0,
    }
}

fn coalesced(calls: &[Call]) -> (Matches, u64) {
    let mut m = match_calls(&sockets(), calls);
    let before = m.messages.len() as u64;
    let c = coalesce(&mut m, calls);
    assert_eq!(m.messages.len() as u64, before - c);
    assert_eq!(m.folded, c);
    let counted = m.matched + m.unmatched_sends + m.unmatched_recvs;
    assert_eq!(
        counted,
        m.messages.len() as u64,
        "every message counted once"
    );
    (m, c)
}

/// (first send, last send, send calls, first receive, last receive, receive calls, bytes)
type Shape = (
    Option<usize>,
    Option<usize>,
    u32,
    Option<usize>,
    Option<usize>,
    u32,
    i64,
);

fn shapes(m: &Matches) -> Vec<Shape> {
    m.messages
        .iter()
        .map(|m| {
            let (s, l, n) = (m.send, m.send_last, m.send_calls);
            (s, l, n, m.recv_first, m.recv_last, m.recv_calls, m.bytes)
        })
        .collect()
}

#[test]
fn a_reply_in_two_sends_is_one_message_and_keep_alive_pairs_again() {
    use CommOp::*;
    let calls = vec![
        call(0, 0, Send, 100),   // 0: request 1
        call(1, 10, Recv, 100),  // 1
        call(1, 20, Send, 40),   // 2: reply 1, headers
        call(1, 30, Send, 60),   // 3: reply 1, body
        call(0, 40, Recv, 100),  // 4: both pieces in one read
        call(0, 100, Send, 100), // 5: request 2
        call(1, 110, Recv, 100), // 6
        call(1, 120, Send, 40),  // 7: reply 2, headers
        call(0, 130, Recv, 40),  // 8
        call(1, 140, Send, 60),  // 9: reply 2, body
        call(0, 150, Recv, 60),  // 10
    ];
    let (m, c) = coalesced(&calls);
    assert_eq!(c, 2);
    assert_eq!(
        shapes(&m),
        vec![
            (Some(0), Some(0), 1, Some(1), Some(1), 1, 100),
            (Some(5), Some(5), 1, Some(6), Some(6), 1, 100),
            (Some(2), Some(3), 2, Some(4), Some(4), 1, 100),
            (Some(7), Some(9), 2, Some(8), Some(10), 2, 100),
        ]
    );
    assert_eq!((m.matched, m.unmatched_sends, m.unmatched_recvs), (4, 0, 0));
}

#[test]
fn pipelined_requests_answered_one_by_one_stay_two_calls() {
    use CommOp::*;
    let calls = vec![
        call(0, 0, Send, 50),   // 0: request 1
        call(0, 10, Send, 50),  // 1: request 2, before any reply
        call(1, 20, Recv, 50),  // 2: the server reads request 1 alone
        call(1, 30, Send, 80),  // 3: answers it
        call(1, 40, Recv, 50),  // 4: then reads request 2
        call(1, 50, Send, 80),  // 5
        call(0, 60, Recv, 160), // 6: the client reads both replies at once
    ];
    let (m, c) = coalesced(&calls);
    // The requests: the server sent reply 1 between reading them. The replies: the server
    // read request 2 between sending them.
    assert_eq!(c, 0);
    assert_eq!(m.messages.len(), 4);
}

#[test]
fn a_request_in_two_sends_read_apart_is_one_call() {
    use CommOp::*;
    let calls = vec![
        call(0, 0, Send, 30),  // 0: request line and headers
        call(0, 10, Send, 70), // 1: body
        call(1, 20, Recv, 30), // 2
        call(1, 30, Recv, 70), // 3
        call(1, 40, Send, 10), // 4: reply
        call(0, 50, Recv, 10), // 5
    ];
    let (m, c) = coalesced(&calls);
    assert_eq!(c, 1);
    assert_eq!(
        shapes(&m)[0],
        (Some(0), Some(1), 2, Some(2), Some(3), 2, 100)
    );
}

#[test]
fn a_one_way_stream_keeps_one_message_per_send() {
    use CommOp::*;
    let calls: Vec<Call> = (0..10)
        .flat_map(|i| [call(0, i * 10, Send, 20), call(1, i * 10 + 5, Recv, 20)])
        .collect();
    let (m, c) = coalesced(&calls);
    assert_eq!(c, 0);
    assert_eq!(m.messages.len(), 10);
}

#[test]
fn half_messages_of_an_unrecorded_peer_coalesce_by_the_recorded_end() {
    use CommOp::*;
    // Only the server (process 1) was recorded: its receives and sends are half messages.
    let calls = vec![
        call(1, 0, Recv, 30),  // 0: request, first read
        call(1, 10, Recv, 70), // 1: request, second read
        call(1, 20, Send, 40), // 2: reply headers
        call(1, 30, Send, 60), // 3: reply body
        call(1, 40, Recv, 90), // 4: next request
        call(1, 50, Send, 10), // 5: its reply
    ];
    let (m, c) = coalesced(&calls);
    assert_eq!(c, 2);
    assert_eq!((m.matched, m.unmatched_sends, m.unmatched_recvs), (0, 2, 2));
    let mut got = shapes(&m);
    got.sort();
    assert_eq!(
        got,
        vec![
            (None, None, 0, Some(0), Some(1), 2, 100),
            (None, None, 0, Some(4), Some(4), 1, 90),
            (Some(2), Some(3), 2, None, None, 0, 100),
            (Some(5), Some(5), 1, None, None, 0, 10),
        ]
    );
}

#[test]
fn a_reader_thread_that_saw_the_reply_between_sends_splits_them() {
    use CommOp::*;
    // The client's reader thread is blocked in a receive from t = 5 on; it returns at 25,
    // between the client's two sends: those are two requests, not one.
    let mut long = call(0, 5, Recv, 10);
    long.duration = 20;
    let calls = vec![
        call(0, 0, Send, 50),  // 0
        call(1, 10, Recv, 50), // 1
        call(1, 15, Send, 10), // 2
        long,                  // 3: returns at 25
        call(0, 30, Send, 50), // 4
        call(1, 40, Recv, 50), // 5
    ];
    let (m, c) = coalesced(&calls);
    assert_eq!(c, 0, "{:?}", shapes(&m));
}

#[test]
fn a_thread_talking_to_itself_keeps_one_message_per_send() {
    use CommOp::*;
    // Process 0's thread writes on its end and reads the other, twice, after a reply came
    // the other way (so the connection is two-way).
    // fd 3 and fd 7 are the two ends, both in process 0 (set below).
    let mut calls = vec![
        call(1, 0, Send, 10),  // 0: the other way first (fd 7)
        call(0, 5, Recv, 10),  // 1 (fd 3)
        call(0, 10, Send, 20), // 2: written on fd 3 …
        call(1, 15, Recv, 20), // 3: … and read on fd 7 by the same thread
        call(0, 30, Send, 20), // 4
        call(1, 35, Recv, 20), // 5
    ];
    // Make the receives the sending thread's own: same process and thread as the sends.
    let socks = vec![
        SocketDesc {
            process: 0,
            t: 0,
            fd: 3,
            proto: SocketProto::Tcp,
            local: ep(CLIENT),
            peer: ep(SERVER),
            thread: 0,
            role: None,
        },
        SocketDesc {
            process: 0,
            t: 0,
            fd: 7,
            proto: SocketProto::Tcp,
            local: ep(SERVER),
            peer: ep(CLIENT),
            thread: 0,
            role: None,
        },
    ];
    for c in &mut calls {
        c.process = 0;
        c.thread = 0;
    }
    let mut m = match_calls(&socks, &calls);
    assert_eq!(m.messages.len(), 3);
    assert_eq!(coalesce(&mut m, &calls), 0);
}
