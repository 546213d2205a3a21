use super::*;
use crate::trace::Message;

/// Builds a trace of `(kind, call id, send time, receive time, sending thread, receiving
/// thread)` rows, message `i` with `msg_ref` `i + 1`.
fn trace(rows: &[(Kind, u64, i64, i64, ThreadRef, ThreadRef)]) -> Trace {
    let mut t = Trace::default();
    for (i, &(kind, id, ts, tr, s, r)) in rows.iter().enumerate() {
        let mut m = Message::new(0, 1);
        m.kind = kind;
        m.call_id = id;
        m.t_send = ts;
        m.t_recv = tr;
        m.msg_ref = i as u64 + 1;
        t.messages.push(m);
        t.threads.set(i as u64 + 1, s, r);
    }
    t
}

const C: Kind = Kind::Call;
const R: Kind = Kind::Ret;
const N: ThreadRef = NO_THREAD;

#[test]
fn a_thread_per_request_server_serves_each_request_on_its_thread() {
    // Clients 1 and 2 call threads 10 and 11 of a server, which each call the database
    // (thread 20) while the other is in flight.
    let t = trace(&[
        (C, 1, 0, 1, 1, 10),    // 0: A
        (C, 2, 2, 3, 2, 11),    // 1: B
        (C, 3, 4, 5, 11, 20),   // 2: B's query
        (C, 4, 6, 7, 10, 20),   // 3: A's query
        (R, 3, 8, 9, 20, 11),   // 4
        (R, 4, 10, 11, 20, 10), // 5
        (R, 2, 12, 13, 11, 2),  // 6: B's reply
        (R, 1, 14, 15, 10, 1),  // 7: A's reply
    ]);
    let c = from_threads(&t, &t.threads).unwrap();
    assert_eq!(c.serving[2], 1, "B's query serves B");
    assert_eq!(c.serving[3], 0, "A's query serves A");
    assert_eq!((c.serving[0], c.serving[1]), (ROOT, ROOT));
    assert_eq!(
        (c.cause[6], c.cause[7]),
        (4, 5),
        "each reply after its query's answer"
    );
    assert_eq!(c.counts.free, 0);
    assert_eq!(c.counts.ambiguous, 0);
}

#[test]
fn an_event_loop_goes_back_to_the_request_a_reply_is_for() {
    // One thread (10) interleaves A and B; each needs a backend call.
    let t = trace(&[
        (C, 1, 0, 1, 1, 10),    // 0: A in
        (C, 3, 2, 3, 10, 20),   // 1: A's backend call
        (C, 2, 4, 5, 2, 10),    // 2: B in
        (C, 4, 6, 7, 10, 21),   // 3: B's backend call
        (R, 4, 8, 9, 21, 10),   // 4: B's backend reply
        (C, 5, 10, 11, 10, 22), // 5: B's second call, after its reply
        (R, 3, 12, 13, 20, 10), // 6: A's backend reply
        (R, 1, 14, 15, 10, 1),  // 7: A out
        (R, 5, 16, 17, 22, 10), // 8
        (R, 2, 18, 19, 10, 2),  // 9: B out
    ]);
    let c = from_threads(&t, &t.threads).unwrap();
    assert_eq!((c.serving[1], c.serving[3], c.serving[5]), (0, 2, 2));
    assert_eq!(c.cause[5], 4, "B's second call follows B's first reply");
    assert_eq!(c.cause[7], 6, "A's reply follows A's backend reply");
    assert_eq!(c.cause[9], 8);
    assert_eq!(c.counts.ambiguous, 0);
}

#[test]
fn a_closed_loop_client_starts_every_request() {
    let t = trace(&[
        (C, 1, 0, 1, 1, 10),
        (R, 1, 2, 3, 10, 1),
        (C, 2, 4, 5, 1, 10),
        (R, 2, 6, 7, 10, 1),
    ]);
    let c = from_threads(&t, &t.threads).unwrap();
    assert_eq!((c.cause[0], c.cause[2]), (ROOT, ROOT));
    assert_eq!((c.cause[1], c.cause[3]), (0, 2));
    assert_eq!(c.counts.roots, 2);
}

#[test]
fn untraced_clients_are_left_free_untraced_servers_answer_and_one_read_of_two_is_ambiguous() {
    let t = trace(&[
        (C, 1, 0, 5, 1, 10), // 0 and 1 arrive in one read of thread 10
        (C, 2, 1, 5, 2, 10),
        (C, 3, 6, 7, 10, N), // 2: to an untraced database
        (R, 3, 8, 9, N, 10), // 3: its reply, sent by nobody recorded
        (R, 2, 10, 11, 10, 2),
        (C, 9, 0, 1, N, 10), // 5: from an untraced client
    ]);
    let c = from_threads(&t, &t.threads).unwrap();
    assert!(c.ambiguous[2], "sent after one read completed two requests");
    assert_eq!(c.serving[2], 1, "the later of the two");
    assert_eq!(
        c.cause[3], 2,
        "the untraced database answers the call it got"
    );
    assert_eq!(
        c.cause[5], FREE,
        "nobody recorded says what caused a client's call"
    );
    assert_eq!(c.cause[4], 3, "the reply follows the database's answer");
    assert_eq!(c.counts.free, 1);
}

#[test]
fn traces_without_threads_are_not_placed() {
    let mut t = Trace::default();
    t.messages.push(Message::new(0, 1));
    assert!(from_threads(&t, &t.threads).is_none());
}

#[test]
fn thread_ends_are_kept_by_message_reference() {
    let mut e = ThreadEnds::default();
    e.set(5, 1, 2);
    e.set(7, 3, NO_THREAD);
    assert_eq!(e.of(5), [1, 2]);
    assert_eq!(e.of(6), [NO_THREAD; 2]);
    assert_eq!(e.of(7), [3, NO_THREAD]);
    assert_eq!(e.of(4), [NO_THREAD; 2]);
    e.set(u64::MAX, 9, 9); // far beyond: not kept
    assert_eq!(e.of(u64::MAX), [NO_THREAD; 2]);
}

/// Like [`trace`], each row with its connection.
fn trace_on(rows: &[(Kind, u64, i64, i64, ThreadRef, ThreadRef, u32)]) -> Trace {
    let plain: Vec<_> = rows
        .iter()
        .map(|&(k, id, ts, tr, s, r, _)| (k, id, ts, tr, s, r))
        .collect();
    let mut t = trace(&plain);
    for (m, row) in t.messages.iter_mut().zip(rows) {
        m.conn = row.6;
    }
    t
}

#[test]
fn an_event_loop_writes_a_new_connections_first_call_for_the_request_it_connected_for() {
    // nginx (thread 10) reads A, then B, before either upstream connection is writable; A's
    // connection (7) gets its call first, then B's (8). The last read is B's, yet the first
    // call on connection 7 is A's.
    let t = trace_on(&[
        (C, 1, 0, 1, 1, 10, 1),    // 0: A in
        (C, 2, 2, 3, 2, 10, 2),    // 1: B in
        (C, 3, 4, 5, 10, 20, 7),   // 2: first call on connection 7
        (C, 4, 6, 7, 10, 21, 8),   // 3: first call on connection 8
        (R, 3, 8, 9, 20, 10, 7),   // 4
        (R, 1, 10, 11, 10, 1, 1),  // 5: A out
        (R, 4, 12, 13, 21, 10, 8), // 6
        (R, 2, 14, 15, 10, 2, 2),  // 7: B out
    ]);
    let c = from_threads(&t, &t.threads).unwrap();
    assert_eq!((c.serving[2], c.serving[3]), (0, 1));
    assert_eq!(
        c.counts.by_arrival, 1,
        "two requests waited for the first call"
    );
    assert_eq!(c.counts.ambiguous, 0);
}

#[test]
fn a_call_after_the_request_was_answered_starts_a_path() {
    // Thread 10 answers A, then closes its database session (a call nobody answers).
    let t = trace_on(&[
        (C, 1, 0, 1, 1, 10, 1),  // 0: A in
        (C, 2, 2, 3, 10, 20, 5), // 1: A's query
        (R, 2, 4, 5, 20, 10, 5), // 2
        (R, 1, 6, 7, 10, 1, 1),  // 3: A out
        (C, 3, 8, 9, 10, 20, 5), // 4: the session's teardown
    ]);
    let c = from_threads(&t, &t.threads).unwrap();
    assert_eq!(c.serving[1], 0);
    assert_eq!(c.cause[4], ROOT, "not A's: A was answered");
    assert_eq!(c.counts.ambiguous, 0);
}

#[test]
fn a_greeting_belongs_to_the_request_that_opened_the_connection() {
    // Thread 10 serves A and opens a MariaDB connection (9, untraced server): the greeting
    // (a return no call asked for) arrives first, then authentication and the query.
    let t = trace_on(&[
        (C, 1, 0, 1, 1, 10, 1),   // 0: A in
        (R, 99, 2, 3, N, 10, 9),  // 1: the greeting
        (C, 5, 4, 5, 10, N, 9),   // 2: authentication
        (R, 5, 6, 7, N, 10, 9),   // 3: OK
        (C, 6, 8, 9, 10, N, 9),   // 4: the query
        (R, 6, 10, 11, N, 10, 9), // 5: its result
        (R, 1, 12, 13, 10, 1, 1), // 6: A out
    ]);
    let c = from_threads(&t, &t.threads).unwrap();
    assert_eq!((c.cause[1], c.serving[1]), (0, 0), "the greeting is A's");
    assert_eq!(c.cause[2], 1, "authentication answers the greeting");
    assert_eq!(
        (c.serving[2], c.serving[4]),
        (0, 0),
        "the thread still serves A"
    );
    assert_eq!(c.cause[6], 5);
    assert_eq!(c.counts.free, 0);
}

#[test]
fn a_new_connections_first_call_serves_the_request_it_was_connected_for() {
    // nginx (thread 10) reads A and connects (7) for it, reads B and connects (8) for B;
    // B's connection completes first. By arrival order A would get connection 8's call.
    let mut t = trace_on(&[
        (C, 1, 0, 1, 1, 10, 1),    // 0: A in
        (C, 2, 4, 5, 2, 10, 2),    // 1: B in
        (C, 4, 8, 9, 10, 21, 8),   // 2: first call on connection 8 (B's)
        (C, 3, 10, 11, 10, 20, 7), // 3: first call on connection 7 (A's)
        (R, 4, 12, 13, 21, 10, 8), // 4
        (R, 3, 14, 15, 20, 10, 7), // 5
        (R, 2, 16, 17, 10, 2, 2),  // 6: B out
        (R, 1, 18, 19, 10, 1, 1),  // 7: A out
    ]);
    let before = from_threads(&t, &t.threads).unwrap();
    assert_eq!(
        (before.serving[2], before.serving[3]),
        (0, 1),
        "without the connects, arrival order"
    );
    t.threads.set_connect(7, 10, 2);
    t.threads.set_connect(8, 10, 6);
    let c = from_threads(&t, &t.threads).unwrap();
    assert_eq!((c.serving[2], c.serving[3]), (1, 0));
    assert_eq!(c.counts.by_arrival, 0, "nothing was guessed");
    assert_eq!((c.cause[6], c.cause[7]), (4, 5));
}
