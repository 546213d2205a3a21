//! `p5 analyze convolution` (issue 17 part 2) on generated traces: a forwarding relay whose
//! messages leave at once or after 10 s or 15 s (\[P5\] §7.4: found at a fine enough quantum,
//! all delays 0 at a coarse one, no false edge with the 100-message filter), and 200 ms added
//! at WS2 (§7.2: the change lands on WS2's edge to the application servers).

use p5_analyze::convolution::graph::{Edge, Flows};
use p5_analyze::convolution::signal::{Correlator, indicator};
use p5_analyze::convolution::spikes::spikes;
use p5_analyze::convolution::{Params, convolution, roots};
use p5_analyze::maketrace::{self, Config, Options};
use p5_analyze::text;
use p5_analyze::trace::Trace;
use std::path::Path;

const S: i64 = 1_000_000_000;
const MS: i64 = 1_000_000;

/// E-mail-like forwarding: sparse messages, most relayed at once, some after 10 s or 15 s.
const FORWARDING: &str = r#"
duration = "50000s"

[[tracelet]]
name = "forwarding"
parallel = 8
think = ["0s", "400s"]

[[tracelet.variant]]
weight = 8
steps = [ { msg = "CLIENT>RELAY" }, { msg = "RELAY>MAILBOX", delay = ["50ms", "10ms"] } ]

[[tracelet.variant]]
weight = 1
steps = [ { msg = "CLIENT>RELAY" }, { msg = "RELAY>MAILBOX", delay = ["10s", "100ms"] } ]

[[tracelet.variant]]
weight = 1
steps = [ { msg = "CLIENT>RELAY" }, { msg = "RELAY>MAILBOX", delay = ["15s", "100ms"] } ]
"#;

fn trace(cfg: &str, seconds: Option<i64>) -> Trace {
    let cfg = Config::parse(cfg, Path::new("t.toml")).unwrap();
    let g = maketrace::generate(
        &cfg,
        &Options {
            seed: 3,
            duration: seconds.map(|s| s * S),
            queue: 64,
            ..Options::default()
        },
    );
    text::read(&g.text(), "t.p5t", Default::default()).trace
}

fn delays(edges: &[Edge], from: &str, to: &str) -> Vec<i64> {
    let mut d: Vec<i64> = edges
        .iter()
        .filter(|e| e.from == from && e.to == to)
        .filter_map(|e| e.delay_ns)
        .collect();
    d.sort_unstable();
    d
}

#[test]
fn forwarding_delays_by_quantum() {
    let t = trace(FORWARDING, None);
    let r = roots(&t, &[]).unwrap();
    assert_eq!(r, [t.nodes.get("CLIENT").unwrap()]);
    let run = |q: i64| convolution(&t, &r, &Params::at(q)).unwrap().edges;
    // 2.5 s: the relay's three delays, each its own edge; nothing else.
    assert_eq!(
        delays(&run(2_500 * MS), "RELAY", "MAILBOX"),
        [0, 10 * S, 15 * S]
    );
    // 5 s: 10 s and 15 s are neighbouring quanta with no valley between; at half the
    // quantum there is one, and they are two spikes (\[P5\] §7.4 finds both at 5 s).
    assert_eq!(delays(&run(5 * S), "RELAY", "MAILBOX"), [0, 10 * S, 15 * S]);
    // 10 s: 10 s and 15 s share a quantum's neighbourhood with 0; still told apart from it.
    assert_eq!(delays(&run(10 * S), "RELAY", "MAILBOX"), [0, 10 * S]);
    // 30 s: every delay reads 0.
    assert_eq!(delays(&run(30 * S), "RELAY", "MAILBOX"), [0]);
    // Without the 100-message filter noise shows up; with it, no edge but the true ones.
    let all = convolution(
        &t,
        &r,
        &Params {
            min_messages: 0,
            ..Params::at(2_500 * MS)
        },
    )
    .unwrap();
    assert!(all.edges.len() >= 4);
    // The linear paths are the shared pattern output, one per delay.
    let g = convolution(&t, &r, &Params::at(2_500 * MS)).unwrap();
    let mut sigs: Vec<&str> = g
        .result
        .patterns
        .iter()
        .map(|p| p.signature.as_str())
        .collect();
    sigs.dedup();
    assert_eq!(sigs, ["CLIENT>RELAY(MAILBOX)"]);
    assert_eq!(g.result.patterns.len(), 3);
}

/// One delay of 12.5 s fills two neighbouring quanta at μ = 5 s just as 10 s and 15 s do; at
/// half the quantum it is one spike, and it stays one delay.
#[test]
fn one_delay_across_two_quanta_stays_one() {
    let cfg = FORWARDING
        .replace("[\"10s\", \"100ms\"]", "[\"12500ms\", \"100ms\"]")
        .replace("[\"15s\", \"100ms\"]", "[\"12500ms\", \"100ms\"]")
        .replace("weight = 1", "weight = 3");
    let t = trace(&cfg, None);
    let r = roots(&t, &[]).unwrap();
    // The case the split looks at: a cluster of two points at spike height.
    let f = Flows::of(&t, 5 * S);
    let n = |s: &str| t.nodes.get(s).unwrap();
    let s = |a, b| indicator(f.times(n(a), n(b)), f.t0, 5 * S, f.len);
    let c = Correlator::new(f.len).lagged(&s("CLIENT", "RELAY"), &s("RELAY", "MAILBOX"));
    assert!(spikes(&c, 4.0, 3.0).iter().any(|s| s.peaks == 2));
    let g = convolution(&t, &r, &Params::at(5 * S)).unwrap();
    let d = delays(&g.edges, "RELAY", "MAILBOX");
    assert_eq!(d.len(), 2, "{d:?}");
    assert_eq!(d[0], 0);
    assert!([10 * S, 15 * S].contains(&d[1]), "{d:?}");
}

#[test]
fn an_added_delay_shows_on_its_edge() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let edge_delay = |file: &str, from: &str, to: &str| {
        let cfg = std::fs::read_to_string(dir.join(file)).unwrap();
        let t = trace(&cfg, Some(200));
        let root = [t.nodes.get("CLIENT").unwrap()];
        let g = convolution(&t, &root, &Params::at(10 * MS)).unwrap();
        // The edge with the most messages between the two, under CLIENT → WS2.
        g.edges
            .iter()
            .enumerate()
            .filter(|(_, e)| e.from == from && e.to == to)
            .filter(|(_, e)| {
                e.parent.is_some_and(|p| {
                    g.edges[p as usize].to == "WS2" && g.edges[p as usize].parent.is_none()
                })
            })
            .max_by_key(|(_, e)| e.messages)
            .map(|(_, e)| e.delay_ns.unwrap())
            .unwrap_or_else(|| panic!("{file}: no {from} → {to} edge under WS2"))
    };
    let grew = |to: &str| {
        edge_delay("fig10-added-delay.toml", "WS2", to)
            - edge_delay("fig10-multi-tier.toml", "WS2", to)
    };
    // 200 ms between WS2's calls to AUTH and to API or AP2: those edges grow by it.
    for app in ["API", "AP2"] {
        let g = grew(app);
        assert!(
            (180 * MS..=220 * MS).contains(&g),
            "WS2 → {app} grew {g} ns"
        );
    }
    assert!(grew("AUTH").abs() <= 20 * MS, "WS2 → AUTH moved");
}

/// Times from both ends of the range, or a quantum far too fine: a clear error, no panic.
#[test]
fn an_impossible_span_is_an_error() {
    let text = "-9000000000.0\tMSG_SENT\tA\tB\t1\n9000000000.0\tMSG_SENT\tA\tB\t2\n";
    let t = text::read(text.as_bytes(), "t.p5t", Default::default()).trace;
    let r = roots(&t, &[]).unwrap();
    let e = convolution(&t, &r, &Params::at(1)).unwrap_err();
    assert!(e.to_string().contains("quanta"), "{e}");
    let e = convolution(&t, &r, &Params::at(0)).unwrap_err();
    assert!(e.to_string().contains("positive"), "{e}");
}
