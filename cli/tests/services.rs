//! A real multi-tier service, nobody's code here, recorded by `p5 record --preload` as it is
//! and analysed per request: nginx (Debian's) as reverse proxy on 127.0.0.2 in front of two
//! Python `ThreadingHTTPServer` backends (127.0.0.3/4) that answer in two sends and call
//! redis-server (127.0.0.5) through redis-py's pooled keep-alive connections and through a
//! new connection per call, PostgreSQL (127.0.0.1:5432, not recorded) through psycopg and
//! MariaDB (127.0.0.1:3306, not recorded) through PyMySQL; closed-loop `http.client` threads
//! on keep-alive connections drive it. In one variant two tiers are instrumented instead of
//! preloaded — the client is a C program (`services/client.c`) and the second backend the
//! same Python code, both rewritten by p5-instrument and recording through p5's runtimes
//! with `P5_PRELOAD=0` — so one session holds preloaded, instrumented C and instrumented
//! Python processes talking to each other.
//!
//! Ground truth comes from the tiers' own logs (`services/truth.rs`): the request id travels
//! in `X-Request-Id`, and each tier logs the thread and the interval it spent on each
//! request. Every request's path is scored: the share whose messages are exactly one
//! instance's, for nesting and linking as `p5 analyze` runs them by default on a recorded
//! session (causality from the recorded threads). Traffic only on 127.0.0.0/8; the stack
//! stops itself after its requests. `P5_KEEP=1` keeps the directory.

#[path = "services/stack.rs"]
mod stack;
#[path = "services/truth.rs"]
mod truth;

use stack::{Outcome, Setup, preloaded, run};

/// The number before `label` in `text` (`… 3 ambiguous, …`).
fn number_before(text: &str, label: &str) -> Option<u64> {
    let at = text.find(label)?;
    let head = text[..at].trim_end();
    let start = head
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    head[start..].parse().ok()
}

/// Checks one outcome against the targets: every request logged by both tiers and claimed,
/// every message between recorded processes matched, the requests really in flight, nothing
/// ambiguous, ≥ 99 % exact by both algorithms, none without an instance, pattern counts per
/// request kind within 2 % of the client's log.
fn check(o: &Outcome, clients: usize) {
    let t = &o.truth;
    let report = || {
        let mut s = format!(
            "requests {}, in flight {:.2}, messages attributed {}, outside {} ({} to peers not \
             recorded), unclaimed {}, unmatched between recorded {}\n{}\n",
            t.requests.len(),
            t.in_flight,
            t.of.len(),
            t.outside,
            t.outside_to_unrecorded,
            t.unclaimed,
            o.unmatched_between_recorded,
            o.recorded
        );
        for (a, sc, printed) in &o.scores {
            s += &format!(
                "{a}: exact {}/{} ({:.2} %), Jaccard {:.3}, without instance {}, kinds {:?}, \
                 wrong {:?}\n{printed}\n",
                sc.exact,
                sc.requests,
                100.0 * sc.exact_share(),
                sc.mean_jaccard,
                sc.without_instance,
                sc.kinds,
                sc.wrong
            );
        }
        s
    };
    eprintln!("{}", report());
    assert_eq!(t.without_backend, 0, "{}", report());
    assert_eq!(t.outside - t.outside_to_unrecorded, 0, "{}", report());
    assert_eq!(t.unclaimed, 0, "{}", report());
    assert_eq!(o.unmatched_between_recorded, 0, "{}", report());
    if clients > 1 {
        assert!(t.in_flight > 0.6 * clients as f64, "{}", report());
    }
    for (a, sc, printed) in &o.scores {
        assert_eq!(
            number_before(printed, " ambiguous"),
            Some(0),
            "{a}\n{}",
            report()
        );
        assert!(sc.exact_share() >= 0.99, "{a}\n{}", report());
        assert_eq!(sc.without_instance, 0, "{a}\n{}", report());
        for (kind, &(requests, instances)) in &sc.kinds {
            let off = requests.abs_diff(instances) as f64 / requests.max(1) as f64;
            assert!(
                off <= 0.02,
                "{a} {kind}: {instances} for {requests}\n{}",
                report()
            );
        }
    }
}

#[test]
fn one_client_keep_alive_upstreams() {
    check(&run(preloaded(1, 60, true)), 1);
}

#[test]
fn four_clients_fresh_upstream_connections() {
    check(&run(preloaded(4, 120, false)), 4);
}

#[test]
fn eight_clients_in_flight_keep_alive_upstreams() {
    check(&run(preloaded(8, 240, true)), 8);
}

#[test]
fn eight_clients_in_flight_fresh_upstream_connections() {
    check(&run(preloaded(8, 240, false)), 8);
}

/// An instrumented C client and an instrumented Python backend among the preloaded nginx,
/// backend and redis.
#[test]
fn eight_clients_instrumented_c_client_and_python_backend() {
    let setup = Setup {
        instrumented: true,
        ..preloaded(8, 240, true)
    };
    check(&run(setup), 8);
}

/// 16 in flight, the targets of 8.
#[test]
fn sixteen_clients_in_flight_keep_alive_upstreams() {
    check(&run(preloaded(16, 480, true)), 16);
}
