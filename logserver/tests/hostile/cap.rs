//! The connection cap under attack: idle sockets that fill it, and a mix of every attack
//! coming and going, must not keep a good client out.

use super::attack::{self, Kind, settle, settle_at};
use super::good::{GOOD_EVENTS_PER_ROUND, GOOD_ROUNDS, run_good_client, stored_events};
use crate::{InProc, config};

/// D6/D8: idle connections (most without a Hello, some after one) take every slot of the
/// connection cap, and come back as soon as they are closed.
#[test]
fn idle_sockets_filling_the_connection_cap_do_not_lock_out_a_good_client() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.max_connections = 64;
    let server = InProc::start(cfg);
    let addr = server.addr.to_string();
    let attacks = attack::mix(
        &addr,
        &[
            (Kind::Idle { hello: false }, 56),
            (Kind::Idle { hello: true }, 8),
        ],
        "attack",
    );
    settle_at(server.addr.port(), 64);
    let report = run_good_client(&addr, "good", dir.path());
    drop(attacks);
    server.stop();
    report.assert_served("with the connection cap full of idle sockets");
    let all = GOOD_ROUNDS * GOOD_EVENTS_PER_ROUND;
    assert_eq!(
        stored_events(dir.path(), "good"),
        all,
        "every event durable"
    );
}

/// Every attack at once, coming and going, against a small budget and a small cap.
#[test]
fn a_mix_of_attackers_coming_and_going_does_not_starve_a_good_client() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.max_connections = 96;
    cfg.inflight_bytes = 32 << 20;
    let server = InProc::start(cfg);
    let addr = server.addr.to_string();
    let attacks = attack::mix(
        &addr,
        &[
            (Kind::LyingHeader { hello: true }, 8),
            (Kind::LyingHeader { hello: false }, 8),
            (Kind::PartialFrame, 5),
            (Kind::Trickle, 2),
            (Kind::Idle { hello: false }, 64),
            (Kind::Idle { hello: true }, 8),
            (Kind::Garbage, 8),
        ],
        "attack",
    );
    settle(&attacks.iter().collect::<Vec<_>>(), 103);
    let report = run_good_client(&addr, "good", dir.path());
    drop(attacks);
    server.stop();
    report.assert_served("beside every attack at once");
    let all = GOOD_ROUNDS * GOOD_EVENTS_PER_ROUND;
    assert_eq!(
        stored_events(dir.path(), "good"),
        all,
        "every event durable"
    );
}
