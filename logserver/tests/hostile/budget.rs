//! The in-flight memory budget under attack: peers that claim large frames, or really send
//! most of one and stop, or trickle it, must not keep a good client from being served.

use super::attack::{self, Kind, settle};
use super::good::{GOOD_EVENTS_PER_ROUND, GOOD_ROUNDS, run_good_client, stored_events};
use crate::{InProc, config};
use std::time::Duration;

/// A server whose shared budget a few attackers can fill: 32 MiB, four 8 MiB frames.
fn small_budget_server(dir: &std::path::Path) -> InProc {
    let mut cfg = config(dir);
    cfg.inflight_bytes = 32 << 20;
    InProc::start(cfg)
}

/// D8: six connections each send a Hello and all but one byte of an 8 MiB frame, two more
/// trickle the last bytes of theirs; together they hold more than the whole shared budget.
#[test]
fn slow_senders_holding_real_bytes_do_not_starve_a_good_client() {
    let dir = tempfile::tempdir().unwrap();
    let server = small_budget_server(dir.path());
    let addr = server.addr.to_string();
    let partial = attack::start(&addr, Kind::PartialFrame, 6, "attack");
    let trickle = attack::start(&addr, Kind::Trickle, 2, "attack");
    settle(&[&partial, &trickle], 8);
    let report = run_good_client(&addr, "good", dir.path());
    drop((partial, trickle));
    server.stop();
    report.assert_served("beside slow senders");
    let all = GOOD_ROUNDS * GOOD_EVENTS_PER_ROUND;
    assert_eq!(
        stored_events(dir.path(), "good"),
        all,
        "every event durable"
    );
}

/// D2: 32 connections send a header claiming 8 MiB after a Hello, 32 more before any
/// Hello, and then nothing.
#[test]
fn lying_frame_headers_do_not_starve_a_good_client() {
    let dir = tempfile::tempdir().unwrap();
    let server = small_budget_server(dir.path());
    let addr = server.addr.to_string();
    let after = attack::start(&addr, Kind::LyingHeader { hello: true }, 32, "attack");
    let before = attack::start(&addr, Kind::LyingHeader { hello: false }, 32, "attack");
    settle(&[&after, &before], 64);
    let report = run_good_client(&addr, "good", dir.path());
    drop((after, before));
    server.stop();
    report.assert_served("beside lying headers");
    let all = GOOD_ROUNDS * GOOD_EVENTS_PER_ROUND;
    assert_eq!(
        stored_events(dir.path(), "good"),
        all,
        "every event durable"
    );
}

/// A guard below the attackers' own frame timeout (30 s): a server that serves the client
/// only once the attackers time out fails here.
const BELOW_FRAME_TIMEOUT: Duration = Duration::from_secs(20);

/// The shared pool goes back from stalled holders to a client that needs it: five partial
/// 8 MiB frames hold the whole pool, then a client sends a 3 MiB frame (more than its own
/// allowance) and is acknowledged; the stalled holders were evicted for it.
#[test]
fn stalled_holders_give_the_shared_pool_back_to_a_large_frame() {
    let dir = tempfile::tempdir().unwrap();
    let server = small_budget_server(dir.path());
    let addr = server.addr.to_string();
    let partial = attack::start(&addr, Kind::PartialFrame, 5, "attack");
    settle(&[&partial], 5);
    let (mut p, _) = crate::Peer::hello(server.addr, 0x1a46e, "large");
    p.s.set_read_timeout(Some(BELOW_FRAME_TIMEOUT)).unwrap();
    let (big, events) = crate::events_frame(0, 1, 800_000, 10);
    assert!(big.len() > 3 << 20, "{} bytes", big.len());
    p.send(&crate::open_frame(0, 1));
    p.send(&big);
    p.wait_ack(2);
    p.goodbye(2);
    drop(partial);
    let summary = server.stop();
    assert!(summary.evictions >= 1, "{summary:?}");
    let s = crate::stored(dir.path());
    assert_eq!(s.events[&(0x1a46e, 0)], events);
}

/// A frame must arrive at the minimum rate: one that trickles after its first megabyte is
/// closed after 5 s + 2 MiB / (1 MiB/s), long before the 30 s frame timeout.
#[test]
fn a_trickling_frame_is_cut_at_the_minimum_rate() {
    let dir = tempfile::tempdir().unwrap();
    let server = InProc::start(config(dir.path()));
    let (mut p, _) = crate::Peer::hello(server.addr, 0x7c1e, "trickle");
    p.s.set_read_timeout(Some(BELOW_FRAME_TIMEOUT)).unwrap();
    let len: u32 = 2 << 20;
    let mut start = Vec::new();
    start.extend_from_slice(&len.to_le_bytes());
    start.extend_from_slice(&0u32.to_le_bytes());
    start.resize(8 + (1 << 20), 0x42);
    p.send(&start);
    let mut w = p.s.try_clone().unwrap();
    let trickler = std::thread::spawn(move || {
        while std::io::Write::write_all(&mut w, &[0x42]).is_ok() {
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let closed = p.expect_closed();
    trickler.join().unwrap();
    server.stop();
    let error = closed.error.unwrap_or_default();
    assert!(
        error.contains("frame of 2097152 bytes not completed within 7s"),
        "{error}"
    );
}
