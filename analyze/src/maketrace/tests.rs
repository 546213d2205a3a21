//! Tests of the generator: determinism, the sniffer's drops, and truth that matches the trace.

use super::*;
use crate::text::{ReadOptions, read};
use std::collections::BTreeSet;
use std::path::Path;

fn fixture(name: &str) -> Config {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    Config::parse(&std::fs::read_to_string(&path).unwrap(), &path).unwrap()
}

fn opts(seed: u64) -> Options {
    Options {
        seed,
        duration: Some(5_000_000_000),
        queue: 64,
        ..Options::default()
    }
}

#[test]
fn the_same_seed_gives_the_same_bytes() {
    let cfg = fixture("fig10-multi-tier.toml");
    let a = generate(&cfg, &opts(7));
    let b = generate(&cfg, &opts(7));
    let c = generate(&cfg, &opts(8));
    assert_eq!(a.text(), b.text());
    assert_eq!(
        serde_json::to_string(&a.truth).unwrap(),
        serde_json::to_string(&b.truth).unwrap()
    );
    assert_ne!(a.text(), c.text());
    assert!(a.truth.capture.messages > 500, "{:?}", a.truth.capture);
}

#[test]
fn the_drop_rate_falls_to_zero_as_the_capture_rate_rises() {
    let cfg = fixture("fig10-multi-tier.toml");
    let rates = [20.0, 50.0, 100.0, 200.0, 400.0, 800.0, 1600.0, 1e5];
    let drops: Vec<f64> = rates
        .iter()
        .map(|&r| {
            let mut o = opts(1);
            o.capture_rate = Some(r);
            generate(&cfg, &o).truth.capture.drop_rate
        })
        .collect();
    assert!(drops[0] > 0.1, "{drops:?}");
    assert!(drops.windows(2).all(|w| w[1] <= w[0]), "{drops:?}");
    assert_eq!(*drops.last().unwrap(), 0.0, "{drops:?}");
}

#[test]
fn the_truth_names_the_messages_the_reader_finds() {
    for (record, skew) in [
        (Record::Send, 0),
        (Record::Both, -30_000_000),
        (Record::Both, 30_000_000),
    ] {
        let cfg = fixture("fig18-children-parallel.toml");
        let mut o = opts(3);
        o.record = Some(record);
        o.skew = vec![("C".into(), skew)];
        o.capture_rate = Some(300.0);
        let g = generate(&cfg, &o);
        let t = read(&g.text(), "gen", ReadOptions::default());
        assert!(t.report.counts.is_empty(), "{}", t.report);
        let read_refs: BTreeSet<u64> = t.trace.messages.iter().map(|m| m.msg_ref).collect();
        let truth_refs: BTreeSet<u64> = g.truth.messages.iter().map(|m| m.msg_ref).collect();
        assert_eq!(read_refs, truth_refs, "{record:?} {skew}");
        let in_instances: usize = g
            .truth
            .result
            .instances
            .iter()
            .map(|i| i.messages.len())
            .sum();
        assert_eq!(in_instances, truth_refs.len());
    }
}

#[test]
fn the_fixtures_generate_their_patterns() {
    let cases: [(&str, &[&str]); 5] = [
        ("fig18-children-parallel.toml", &["A>B(C,C)"]),
        ("fig18-children-0-2.toml", &["A>B", "A>B(C,C)"]),
        ("fig18-children-d-cc.toml", &["A>B(C,C)", "A>B(D)"]),
        (
            "fig18-penalty-breaker.toml",
            &["A>B(C,C)", "A>B(D,D)", "A>B(E)"],
        ),
        ("fig10-added-delay.toml", &[]),
    ];
    for (file, want) in cases {
        let g = generate(&fixture(file), &opts(5));
        let got: BTreeSet<&str> = g
            .truth
            .result
            .patterns
            .iter()
            .map(|p| p.signature.as_str())
            .collect();
        for w in want {
            assert!(got.contains(w), "{file}: {got:?}");
        }
        if want.is_empty() {
            assert!(got.contains("CLIENT>WS2(AUTH,AP2(DB))"), "{got:?}");
        }
    }
}

#[test]
fn added_delay_shows_at_ws2() {
    let normal = generate(&fixture("fig10-multi-tier.toml"), &opts(9));
    let added = generate(&fixture("fig10-added-delay.toml"), &opts(9));
    let delay = |g: &Generated| {
        let p = g
            .truth
            .result
            .patterns
            .iter()
            .find(|p| p.signature == "CLIENT>WS2(AUTH,API(DB))")
            .unwrap();
        // Node 3 is API, called by WS2 after AUTH.
        assert_eq!(p.nodes[3].node, "API");
        p.nodes[3].call_delay.as_ref().unwrap().mean_ns
    };
    let extra = delay(&added) - delay(&normal);
    assert!((180e6..220e6).contains(&extra), "{extra}");
}

#[test]
fn a_message_position_is_its_call_tree_node() {
    let g = generate(&fixture("fig18-children-d-cc.toml"), &opts(2));
    for m in &g.truth.messages {
        let p = &g.truth.result.patterns[m.gt_pattern as usize];
        let node = &p.nodes[m.position as usize];
        assert!(m.position > 0);
        assert!(["B", "C", "D"].contains(&node.node.as_str()));
    }
}
