//! `p5 analyze linking` (issue 18) against ground truth: asymmetric forwarding and delayed
//! write-back side by side with nesting (\[P5\] §5.3.1: nesting fails on both), a pattern of
//! 0.1 % frequency, an untraced node, a thousand ephemeral-port clients, node delays under
//! per-host clock offsets, the multi-tier system of \[P5\] Fig. 10 (paper mode and ours side
//! by side; the figures are in ARCHITECTURE.md). A real loopback capture of a forwarding
//! system is in `tests/pcap/loopback.rs`.

use p5_analyze::linking::{Params, linking, linking_owned, links};
use p5_analyze::maketrace::{self, Config, Generated, Options, Record};
use p5_analyze::nesting::{self, nesting};
use p5_analyze::pattern::{AnalysisResult, NodeKind};
use p5_analyze::score::{RankBy, ScoreOptions, Scores, score};
use p5_analyze::text;
use p5_analyze::trace::{CallId, Kind, Message, Time, Trace};
use std::path::Path;

const S: i64 = 1_000_000_000;
const MS: i64 = 1_000_000;

fn fixture(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(format!("{name}.toml"));
    std::fs::read_to_string(p).unwrap()
}

fn generate(cfg_text: &str, opts: Options) -> Generated {
    let cfg = Config::parse(cfg_text, Path::new("test.toml")).unwrap();
    maketrace::generate(&cfg, &opts)
}

fn opts(seconds: i64) -> Options {
    Options {
        seed: 7,
        duration: Some(seconds * S),
        queue: 64,
        client_endpoints: true,
        ..Options::default()
    }
}

fn read(g: &Generated) -> Trace {
    let t = text::read(&g.text(), "t.p5t", Default::default());
    assert!(t.report.counts.is_empty(), "{}", t.report);
    t.trace
}

fn scored(g: &Generated, r: &AnalysisResult) -> Scores {
    let o = ScoreOptions {
        rank_by: RankBy::Expectation,
        ..ScoreOptions::default()
    };
    score(&g.truth.result, r, &o)
}

/// Ours (empirical kernel, exclusive children, refits) and the paper's weights (the
/// default): the accuracy tests hold for both.
fn modes() -> [(&'static str, Params); 2] {
    [("ours", Params::ours()), ("paper", Params::paper())]
}

fn signatures(r: &AnalysisResult) -> Vec<&str> {
    r.patterns.iter().map(|p| p.signature.as_str()).collect()
}

/// The first patterns as `signature count expectation`, for messages.
fn top(r: &AnalysisResult) -> String {
    r.patterns
        .iter()
        .take(8)
        .map(|p| format!("{} {} {:.2}", p.signature, p.count, p.expectation))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A trace built by hand: `runs` repetitions, 2.5 s apart (beyond the 2 s window), of
/// `(src, dst, kind, call id, send offset ms, receive offset ms)`.
fn repeated(runs: usize, steps: &[(&str, &str, Kind, CallId, f64, f64)]) -> Trace {
    let mut t = Trace::default();
    for r in 0..runs {
        let base = r as Time * 2_500 * MS;
        // A little jitter so that delays are not all equal.
        let jitter = (r % 7) as Time * 100_000;
        for (k, &(a, b, kind, id, send, recv)) in steps.iter().enumerate() {
            let (src, dst) = (t.nodes.intern(a), t.nodes.intern(b));
            let mut m = Message::new(src, dst);
            m.kind = kind;
            m.call_id = id + 10 * r as CallId;
            m.t_send = base + (send * MS as f64) as Time + jitter;
            m.t_recv = base + (recv * MS as f64) as Time + jitter;
            m.msg_ref = (r * steps.len() + k) as u64 + 1;
            t.messages.push(m);
        }
    }
    t.sort();
    t
}

/// A→B→C and C answers A directly: linking finds the whole path in every run; nesting, which
/// needs each return to answer its own call, cannot.
#[test]
fn asymmetric_forwarding_is_recovered_where_nesting_fails() {
    let t = repeated(
        200,
        &[
            ("A", "B", Kind::Call, 1, 0.0, 0.2),
            ("B", "C", Kind::Call, 2, 3.0, 3.2),
            ("C", "A", Kind::Ret, 1, 7.0, 7.2),
        ],
    );
    for (mode, p) in modes() {
        let (r, _) = linking(&t, &p, &mut |_| {});
        assert_eq!(signatures(&r), ["A>B(C(A))"], "{mode}: {}", top(&r));
        assert_eq!(r.patterns[0].count, 200, "{mode}");
        // Two links, each a single candidate: with the paper's weights about one mean
        // delay back, e^−1 / (e^−1 + e^−4) ≈ 0.95 each.
        assert!(r.patterns[0].expectation > 175.0, "{mode}: {}", top(&r));
    }
    let (n, _) = nesting(&t, &nesting::Params::default());
    assert!(
        !signatures(&n).iter().any(|s| s.contains("C(A)")),
        "nesting: {:?}",
        signatures(&n)
    );
}

/// B answers A at once and writes back to C 20 ms later, caused by A's call: linking
/// puts the write-back in A's path; nesting, whose children must lie within the parent's
/// call and return, makes it a root of its own.
#[test]
fn delayed_write_back_is_recovered_where_nesting_fails() {
    let t = repeated(
        200,
        &[
            ("A", "B", Kind::Call, 1, 0.0, 0.2),
            ("B", "A", Kind::Ret, 1, 1.0, 1.2),
            ("B", "C", Kind::Call, 2, 20.0, 20.2),
            ("C", "B", Kind::Ret, 2, 25.0, 25.2),
        ],
    );
    for (mode, p) in modes() {
        let (r, _) = linking(&t, &p, &mut |_| {});
        assert_eq!(signatures(&r)[0], "A>B(C)", "{mode}: {}", top(&r));
        assert!(r.patterns[0].expectation > 165.0, "{mode}: {}", top(&r));
        // B's delay before the write-back, on B's clock: 20 ms after A's call arrived.
        let c = r.patterns[0].nodes[2].call_delay.as_ref().unwrap();
        assert!((c.mean_ns - 19.8e6).abs() < 0.01e6, "{mode}: {c:?}");
    }
    let (n, _) = nesting(&t, &nesting::Params::default());
    assert_eq!(signatures(&n).len(), 2, "nesting: {:?}", signatures(&n));
    assert!(
        signatures(&n).contains(&"B>C"),
        "nesting: {:?}",
        signatures(&n)
    );
}

/// One run in a thousand takes another path: it is found.
#[test]
fn a_pattern_of_one_in_a_thousand_is_found() {
    let cfg = r#"
duration = "120s"
[[tracelet]]
parallel = 1
think = ["5ms", "10ms"]
call_delay = ["1ms", "0.2ms"]
ret_delay = ["0.5ms", "0.1ms"]
[[tracelet.variant]]
weight = 999
tree = "CLIENT>WEB(DB)"
[[tracelet.variant]]
weight = 1
tree = "CLIENT>WEB(CACHE,DB)"
"#;
    let g = generate(cfg, opts(120));
    let truth = &g.truth.result.patterns;
    let rare = truth
        .iter()
        .find(|p| p.signature == "CLIENT>WEB(CACHE,DB)")
        .unwrap();
    let total: u64 = truth.iter().map(|p| p.count).sum();
    assert!(
        rare.count >= 5 && rare.count * 500 < total,
        "{} of {total}",
        rare.count
    );
    let t = read(&g);
    for (mode, p) in modes() {
        let (r, _) = linking(&t, &p, &mut |_| {});
        let found = r
            .patterns
            .iter()
            .find(|p| p.signature == rare.signature)
            .unwrap_or_else(|| panic!("{mode}: the rare pattern is not found: {}", top(&r)));
        let rank = r
            .patterns
            .iter()
            .position(|p| p.signature == rare.signature);
        eprintln!(
            "{mode}: rare: {} true, {} found, expectation {:.2}, rank {rank:?} of {}",
            rare.count,
            found.count,
            found.expectation,
            r.patterns.len()
        );
        // Every rare run is a whole instance; its links are less certain than the common
        // ones' (the edge's mean delay, or its kernel, is the common runs').
        assert_eq!(found.count, rare.count, "{mode}");
        assert!(
            found.expectation >= 0.4 * rare.count as f64,
            "{mode}: {} of {}",
            found.expectation,
            rare.count
        );
        assert_eq!(r.patterns[0].signature, "CLIENT>WEB(DB)", "{mode}");
    }
}

/// B stamps nothing (only A's and D's times are known): its answers are linked only to the
/// calls of the node they go back to, never across.
#[test]
fn an_untraced_node_links_only_back_to_its_caller() {
    let mut t = Trace::default();
    let (a, d, b) = (
        t.nodes.intern("A"),
        t.nodes.intern("D"),
        t.nodes.intern("B"),
    );
    for r in 0..300 {
        // Runs further apart than the window: a reply into A does not cause A's next call.
        let base = r as Time * 2_500 * MS;
        for (k, (client, off)) in [(a, 0), (d, 2 * MS)].into_iter().enumerate() {
            // client → B: only the send is known; B → client: only the receive.
            let mut call = Message::new(client, b);
            call.t_send = base + off;
            call.kind = Kind::Call;
            call.msg_ref = (4 * r + 2 * k) as u64 + 1;
            let mut ret = Message::new(b, client);
            ret.t_recv = base + off + 5 * MS;
            ret.kind = Kind::Ret;
            ret.msg_ref = (4 * r + 2 * k) as u64 + 2;
            t.messages.extend([call, ret]);
        }
    }
    t.sort();
    for (mode, p) in modes() {
        let (r, counts) = linking(&t, &p, &mut |_| {});
        assert_eq!(counts.untraced, ["B"], "{mode}");
        let mut sigs = signatures(&r);
        sigs.sort();
        assert_eq!(sigs, ["A>B", "D>B"], "{mode}: {}", top(&r));
        assert_eq!(r.patterns[0].nodes[1].kind, NodeKind::Untraced, "{mode}");
        // Latency on the caller's clock: 5 ms.
        let l = r.patterns[0].nodes[1].latency.as_ref().unwrap();
        assert_eq!((l.min_ns, l.max_ns), (5 * MS, 5 * MS), "{mode}");
    }
}

/// A thousand clients on ephemeral ports, each calling the server once over its own
/// connection, the server calling its database over a new connection each time (nodes are
/// hosts, as `--node host` names a capture's): one CLIENT pattern.
#[test]
fn a_thousand_ephemeral_clients_make_one_client_tree() {
    use p5_analyze::trace::{Conn, Proto};
    let mut t = Trace::default();
    let server = t.nodes.intern("10.0.0.1");
    let db = t.nodes.intern("10.0.0.2");
    let conn = |t: &mut Trace, a, a_ep: String, b, b_ep: &str| {
        t.conns.push(Conn {
            proto: Proto::Tcp,
            initiator: a,
            acceptor: b,
            initiator_ep: a_ep.parse().ok(),
            acceptor_ep: b_ep.parse().ok(),
            conn_ref: t.conns.len() as u64,
        });
        (t.conns.len() - 1) as u32
    };
    let msg = |t: &mut Trace, s, d, c, kind, at: Time| {
        let mut m = Message::new(s, d);
        (m.kind, m.t_send, m.t_recv, m.conn) = (kind, at, at + 100_000, c);
        m.msg_ref = t.messages.len() as u64 + 1;
        t.messages.push(m);
    };
    for i in 0..1000 {
        let ip = format!("10.1.{}.{}", i / 250, i % 250 + 1);
        let c = t.nodes.intern(&ip);
        let front = conn(
            &mut t,
            c,
            format!("{ip}:{}", 30000 + i),
            server,
            "10.0.0.1:80",
        );
        let back = conn(
            &mut t,
            server,
            format!("10.0.0.1:{}", 40000 + i),
            db,
            "10.0.0.2:5432",
        );
        let base = i as Time * 20 * MS;
        msg(&mut t, c, server, front, Kind::Call, base);
        msg(&mut t, server, db, back, Kind::Call, base + MS);
        msg(&mut t, db, server, back, Kind::Ret, base + 3 * MS);
        msg(&mut t, server, c, front, Kind::Ret, base + 4 * MS);
    }
    t.sort();
    for (mode, p) in modes() {
        let (r, counts) = linking(&t, &p, &mut |_| {});
        assert_eq!(counts.clients, 1000, "{mode}: {counts:?}");
        assert_eq!(signatures(&r), ["CLIENT>10.0.0.1(10.0.0.2)"], "{mode}");
        assert_eq!(r.patterns[0].count, 1000, "{mode}");
    }
}

/// Both ends of every message known: shifting one host's clock changes no link, no pattern
/// and no node delay (call delays and latencies are each read on one node's clock); only
/// network delays move.
#[test]
fn node_delays_are_identical_under_clock_offsets() {
    let cfg = fixture("fig10-multi-tier").replace("parallel = 36", "parallel = 3");
    let base = Options {
        record: Some(Record::Both),
        ..opts(60)
    };
    let skewed = Options {
        skew: vec![("WS2".into(), 30 * MS), ("DB".into(), -7 * MS)],
        ..base.clone()
    };
    for p in [Params::paper(), Params::ours()] {
        let (a, _) = linking(&read(&generate(&cfg, base.clone())), &p, &mut |_| {});
        let (b, _) = linking(&read(&generate(&cfg, skewed.clone())), &p, &mut |_| {});
        assert_eq!(a.patterns.len(), b.patterns.len());
        for (x, y) in a.patterns.iter().zip(&b.patterns) {
            assert_eq!((&x.signature, x.count), (&y.signature, y.count));
            assert_eq!(x.expectation.to_bits(), y.expectation.to_bits());
            for (n, m) in x.nodes.iter().zip(&y.nodes) {
                assert_eq!(n.call_delay, m.call_delay, "{} {}", x.signature, n.node);
                assert_eq!(n.latency, m.latency, "{} {}", x.signature, n.node);
                // Network delays have the estimated pairwise offsets taken off, and the
                // estimates move with the clocks exactly.
                assert_eq!(n.net_delay, m.net_delay, "{} {}", x.signature, n.node);
            }
        }
        // y's clock minus x's, as estimated.
        let offset = |r: &AnalysisResult, x: &str, y: &str| {
            let o = r.params["clock_offsets"]
                .as_array()
                .unwrap()
                .iter()
                .find(|o| (o["a"] == x && o["b"] == y) || (o["a"] == y && o["b"] == x))
                .unwrap();
            let v = o["b_minus_a_ns"].as_i64().unwrap();
            if o["a"] == x { v } else { -v }
        };
        assert_eq!(
            offset(&b, "AUTH", "WS2") - offset(&a, "AUTH", "WS2"),
            30 * MS
        );
        assert_eq!(offset(&b, "API", "DB") - offset(&a, "API", "DB"), -7 * MS);
    }
}

/// The spontaneous weight is e^−4 at y = 4: a message whose only candidate arrived one mean
/// delay before it is linked with e^−1 / (e^−1 + e^−4).
#[test]
fn the_spontaneous_weight_is_e_to_the_minus_y() {
    let t = repeated(
        50,
        &[
            ("A", "B", Kind::Msg, 1, 0.0, 0.0),
            ("B", "C", Kind::Msg, 2, 10.0, 10.0),
        ],
    );
    // Remove the jitter's effect: every gap is exactly 10 ms.
    let roles = links::Roles::of(&t, true, |_| false);
    let l = links::link(&t, &Params::paper(), &[0, 1, 2], &roles, None);
    let kid = l.kids(0)[0];
    let want = (-1f64).exp() / ((-1f64).exp() + (-4f64).exp());
    assert!(
        (f64::from(kid.p) - want).abs() < 1e-6,
        "{} vs {want}",
        kid.p
    );
    assert!((f64::from(l.root_p[0]) - 1.0).abs() < 1e-9);
    assert_eq!(l.root_p[1], 0.0, "B→C is not a root");
}

/// A closed-loop client, as `p5 demo`'s black-box one: each request leaves 0.5 ms after
/// the reply to the one before, `client>front(auth(db),catalog(db))`. The reply is the
/// newest message into the client, one mean delay back, so WAP5's weights make it the next
/// request's cause (e^−1 against spontaneity's e^−4) and the requests chain. The client is
/// only ever answered, never called: its requests start paths (`client_roots`, on by
/// default), and every request is one instance of the one true pattern.
#[test]
fn a_closed_loop_clients_requests_are_roots() {
    let mut t = Trace::default();
    let mut at: Time = 1_000 * MS;
    let steps: [(&str, &str, Kind, f64); 10] = [
        ("client", "front", Kind::Call, 0.2),
        ("front", "auth", Kind::Call, 0.3),
        ("auth", "db", Kind::Call, 0.4),
        ("db", "auth", Kind::Ret, 0.5),
        ("auth", "front", Kind::Ret, 0.3),
        ("front", "catalog", Kind::Call, 0.3),
        ("catalog", "db", Kind::Call, 0.4),
        ("db", "catalog", Kind::Ret, 0.5),
        ("catalog", "front", Kind::Ret, 0.3),
        ("front", "client", Kind::Ret, 0.3),
    ];
    for r in 0..200u64 {
        let jitter = (r % 5) as Time * 20_000;
        for (k, &(a, b, kind, delay)) in steps.iter().enumerate() {
            let (src, dst) = (t.nodes.intern(a), t.nodes.intern(b));
            let mut m = Message::new(src, dst);
            m.kind = kind;
            // The node's delay before it sends, then 0.1 ms on the wire.
            at += (delay * MS as f64) as Time + jitter;
            m.t_send = at;
            at += 100_000;
            m.t_recv = at;
            m.call_id = r * 10 + k as u64;
            m.msg_ref = r * 10 + k as u64 + 1;
            t.messages.push(m);
        }
        at += 500_000; // the client's next request: 0.5 ms after the reply
    }
    for (mode, p) in modes() {
        let (r, c) = linking(&t, &p, &mut |_| {});
        eprintln!(
            "{mode}: client roots: {} roots, {} patterns: {}",
            c.trees.roots,
            r.patterns.len(),
            top(&r)
        );
        assert_eq!(c.trees.roots, 200, "{mode}: {}", top(&r));
        assert_eq!(
            signatures(&r)[0],
            "client>front(auth(db),catalog(db))",
            "{mode}: {}",
            top(&r)
        );
        assert_eq!(r.patterns[0].count, 200, "{mode}: {}", top(&r));
        assert!(
            r.patterns[0].expectation > 0.5 * 200.0,
            "{mode}: {}",
            top(&r)
        );
    }
    // The paper's rule alone chains the requests through the replies.
    let chained = Params {
        client_roots: false,
        ..Params::paper()
    };
    let (r, c) = linking(&t, &chained, &mut |_| {});
    eprintln!(
        "chained: {} roots, {} patterns: {}",
        c.trees.roots,
        r.patterns.len(),
        top(&r)
    );
    assert!(c.trees.roots < 100, "{} roots: {}", c.trees.roots, top(&r));
    assert!(
        r.patterns
            .first()
            .is_none_or(|p| p.signature != "client>front(auth(db),catalog(db))" || p.count < 100),
        "{}",
        top(&r)
    );
}

/// \[P5\] Fig. 10 at 36 clients, 100 s: WAP5's exponential weights lose the paths
/// (parallelism makes the newest message the wrong parent, ARCHITECTURE.md): 0.03 % of the
/// expectation lands on true patterns; ours puts about 9 % there at 100 s (at 500 s ours
/// meets the top-N target: `multi_tier_top_n_with_ours`). The figures are guarded, so a
/// change that makes either worse fails.
#[test]
fn multi_tier_paper_and_ours() {
    let g = generate(&fixture("fig10-multi-tier"), opts(100));
    let t = read(&g);
    let ours = Params::ours();
    let found = |p: &Params| {
        let (r, _) = linking(&t, p, &mut |_| {});
        let s = scored(&g, &r);
        let rates: Vec<String> = s
            .top_n
            .iter()
            .filter(|t| t.n <= 8 && (t.tolerance - 0.02).abs() < 1e-9)
            .map(|t| format!("{:.2}", t.rate))
            .collect();
        eprintln!(
            "{:?}: top-1..8 false-negative rates {}",
            p.kernel,
            rates.join(" ")
        );
        let full: f64 = r
            .patterns
            .iter()
            .filter(|p| {
                g.truth
                    .result
                    .patterns
                    .iter()
                    .any(|q| q.signature == p.signature)
            })
            .map(|p| p.expectation)
            .sum();
        full / g.truth.result.instances.len() as f64
    };
    let (paper, mine) = (found(&Params::paper()), found(&ours));
    eprintln!("share of instances expected on true patterns: paper {paper:.3}, ours {mine:.3}");
    assert!(
        mine > 10.0 * paper && mine > 0.05,
        "paper {paper}, ours {mine}"
    );
}

/// \[P5\] Fig. 10 at its own 500 s (36 clients), ours (`--kernel empirical --exclusive true
/// --refits 5`), ranked by expectation: the eight true patterns are the eight first, so
/// the top-N false-negative rate is 0 for every N from 8 to 20, and at most one pattern is
/// omitted below that at 2 % and 6 % tolerance (FN(N) ≤ 1/N met). Without the call/return rules of step 3 (a call or a return into a server causes
/// one next step; a client's reply ends only the client's own path) the fragments
/// `CLIENT>WS1(AUTH)` and `CLIENT>WS1` ranked above the true patterns (4 omitted at N = 8).
#[test]
fn multi_tier_top_n_with_ours() {
    let g = generate(&fixture("fig10-multi-tier"), opts(500));
    let t = read(&g);
    let (r, c) = linking(&t, &Params::ours(), &mut |_| {});
    eprintln!("{:?}", c.trees);
    let o = ScoreOptions {
        rank_by: RankBy::Expectation,
        top: (1..=20).collect(),
        ..ScoreOptions::default()
    };
    let s = score(&g.truth.result, &r, &o);
    for tol in [0.0, 0.02, 0.06] {
        let omitted: Vec<String> = s
            .top_n
            .iter()
            .filter(|t| (t.tolerance - tol).abs() < 1e-9)
            .map(|t| t.omitted.to_string())
            .collect();
        eprintln!("omitted at {tol}, N = 1..20: {}", omitted.join(" "));
    }
    let mut truth: Vec<&str> = g
        .truth
        .result
        .patterns
        .iter()
        .map(|p| p.signature.as_str())
        .collect();
    let mut top8: Vec<&str> = signatures(&r).into_iter().take(8).collect();
    truth.sort_unstable();
    top8.sort_unstable();
    assert_eq!(top8, truth, "{}", top(&r));
    // The issue's target, FN(N) ≤ 1/N: at most one omitted at every N, at 2 % and 6 %
    // (with 256 candidates per child instead of 32, two at N = 6 at 2 %: the four (DB,DB)
    // variants, within 6 % of each other, came in another order).
    for t in s.top_n.iter().filter(|t| t.tolerance > 0.0) {
        assert!(
            t.omitted <= 1,
            "N = {} at {}: {} omitted; {}",
            t.n,
            t.tolerance,
            t.omitted,
            top(&r)
        );
    }
}

/// A reply written in three pieces on its connection is one message (\[WAP5\] §2.3): the
/// pattern has one return, and the pieces are counted as merged.
#[test]
fn fat_messages_on_a_connection_are_merged_first() {
    use p5_analyze::trace::{Conn, Proto};
    let mut t = Trace::default();
    let (a, b) = (t.nodes.intern("A"), t.nodes.intern("B"));
    t.conns.push(Conn {
        proto: Proto::Tcp,
        initiator: a,
        acceptor: b,
        initiator_ep: None,
        acceptor_ep: None,
        conn_ref: 1,
    });
    for r in 0..50 {
        let base = r as Time * 2_500 * MS;
        let mut call = Message::new(a, b);
        (call.kind, call.conn, call.t_send, call.t_recv) = (Kind::Call, 0, base, base + MS);
        t.messages.push(call);
        for piece in 0..3 {
            let mut m = Message::new(b, a);
            (m.kind, m.conn) = (Kind::Ret, 0);
            m.t_send = base + 5 * MS + piece * 100_000;
            m.t_recv = m.t_send + MS;
            t.messages.push(m);
        }
    }
    for (i, m) in t.messages.iter_mut().enumerate() {
        m.msg_ref = i as u64 + 1;
    }
    for (mode, p) in modes() {
        let (r, counts) = linking(&t, &p, &mut |_| {});
        assert_eq!(counts.coalesced, 100, "{mode}");
        assert_eq!(signatures(&r), ["A>B"], "{mode}: {}", top(&r));
        assert_eq!(r.patterns[0].count, 50, "{mode}");
        // The latency runs to the last piece's arrival: 5.2 + 1 ms.
        let l = r.patterns[0].nodes[1].latency.as_ref().unwrap();
        assert_eq!(l.max_ns, 6_200_000, "{mode}");
        // A trace given up merges in place, to the same result; the borrowed one is intact.
        let (owned, owned_counts) = linking_owned(t.clone(), &p, &mut |_| {});
        assert_eq!((owned, owned_counts), (r, counts), "{mode}");
        assert_eq!(t.messages.len(), 200);
    }
    let (r, _) = linking(
        &t,
        &Params {
            coalesce: false,
            ..Params::default()
        },
        &mut |_| {},
    );
    assert_ne!(signatures(&r), ["A>B"], "without merging the pieces differ");
}
