//! `p5 analyze nesting` against ground truth from `maketrace` (issue 17 part 1): the four
//! pathological cases of \[P5\] Fig. 18, the multi-tier system of Fig. 10 (top-N rates, node
//! delays), the added delay of §7.2, dropped messages (§7.5.5), results that do not move
//! when a host's clock is offset (both ends of every message known, as in p5's own
//! sessions), and the skew window with smoothing (§7.5.6). Sizes are cut down from the paper's
//! so the tests stay quick in a debug build; `cargo bench -p p5-analyze --bench nesting` runs
//! the full sizes.

use p5_analyze::maketrace::{self, Config, Generated, Options, Record};
use p5_analyze::nesting::{Params, nesting};
use p5_analyze::pattern::AnalysisResult;
use p5_analyze::score::{ScoreOptions, Scores, score};
use p5_analyze::text;
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

/// The generated trace as the text reader gives it back, nested with `p`, scored.
fn run(g: &Generated, p: &Params) -> (AnalysisResult, Scores) {
    let t = text::read(&g.text(), "t.p5t", Default::default());
    assert!(t.report.counts.is_empty(), "{}", t.report);
    let (r, _) = nesting(&t.trace, p);
    let s = score(&g.truth.result, &r, &ScoreOptions::default());
    (r, s)
}

fn top_rate(s: &Scores, n: usize, tolerance: f64) -> f64 {
    s.top_n
        .iter()
        .find(|t| t.n == n && (t.tolerance - tolerance).abs() < 1e-9)
        .map(|t| t.rate)
        .unwrap()
}

fn opts(seconds: i64) -> Options {
    Options {
        seed: 7,
        duration: Some(seconds * S),
        queue: 64,
        ..Options::default()
    }
}

/// Fig. 18 at low delay variance and parallelism: every true pattern is found, with no
/// false negative at 2 % tolerance.
#[test]
fn the_four_pathological_cases_at_low_variance_and_parallelism() {
    for name in [
        "fig18-children-0-2",
        "fig18-children-d-cc",
        "fig18-children-parallel",
        "fig18-penalty-breaker",
    ] {
        let cfg = fixture(name).replace("parallel = 4", "parallel = 1");
        let g = generate(&cfg, opts(60));
        let (_, s) = run(&g, &Params::default());
        assert_eq!(s.patterns.false_negatives, 0, "{name}: {s:?}");
        for n in 1..=s.patterns.truth as usize {
            assert_eq!(top_rate(&s, n, 0.02), 0.0, "{name}: top-{n}");
        }
    }
}

/// The seeds the multi-tier acceptance runs on: one seed can be lucky (with the paper's
/// call delays alone, seed 7 met every criterion here while seeds 2–4 missed top-N at 2 %).
const SEEDS: [u64; 7] = [1, 2, 3, 4, 5, 7, 11];

/// The multi-tier trace (Fig. 10, 500 s, about 216 k messages) on every seed of [`SEEDS`]:
/// top-N omitted ≤ 1/N at 2 % tolerance and none at 6 % for every N ≤ 20 — though the four
/// two-DB patterns (ranks 5–8) have true counts within 6–8 % of each other (before the
/// gap passes, seeds 3 and 7 missed one of them at 6 %); on these eight patterns, mean and
/// median node latency and call delay within 5 % (seed 11's `CLIENT>WS1(AUTH,API(DB,DB))`
/// comes closest: its second DB call delay is off by 4.9 %; without the default smoothing
/// 5.5 %: ARCHITECTURE.md).
#[test]
fn multi_tier_top_n_and_node_delays() {
    let cfg = fixture("fig10-multi-tier");
    for seed in SEEDS {
        let g = generate(&cfg, Options { seed, ..opts(500) });
        assert!(g.truth.messages.len() > 200_000);
        let (r, s) = run(&g, &Params::default());
        let mut truth: Vec<u64> = g.truth.result.patterns.iter().map(|p| p.count).collect();
        truth.sort_unstable_by(|a, b| b.cmp(a));
        assert!(
            truth[7] as f64 >= 0.9 * truth[4] as f64,
            "seed {seed}: the two-DB patterns are not near ties: {truth:?}"
        );
        for n in 1..=20 {
            assert!(
                top_rate(&s, n, 0.02) <= 1.0 / n as f64 + 1e-9,
                "seed {seed}: top-{n} at 2 %"
            );
            assert_eq!(top_rate(&s, n, 0.06), 0.0, "seed {seed}: top-{n} at 6 %");
        }
        // The four frequent patterns and the four two-DB ones (ranks 5–8).
        let mut by_count: Vec<_> = g.truth.result.patterns.iter().collect();
        by_count.sort_by_key(|p| std::cmp::Reverse(p.count));
        let common: Vec<&str> = by_count[..8].iter().map(|p| p.signature.as_str()).collect();
        for d in s
            .node_delays
            .iter()
            .filter(|d| common.contains(&d.signature.as_str()))
        {
            for (what, e) in [
                ("mean latency", d.latency_rel_error),
                ("mean call delay", d.call_delay_rel_error),
                ("median latency", d.latency_p50_rel_error),
                ("median call delay", d.call_delay_p50_rel_error),
            ] {
                let e = e.unwrap_or(0.0);
                assert!(
                    e < 0.05,
                    "seed {seed}: {} {}: {what} off by {e}",
                    d.signature,
                    d.node
                );
            }
        }
        let mean = s.mean_latency_rel_error.unwrap();
        assert!(mean < 0.05, "seed {seed}: mean latency error {mean}");
        println!(
            "seed {seed}: instance false negatives {:.1} %, mean latency error {:.2} %",
            100.0 * s.instances.false_negatives as f64 / s.instances.truth as f64,
            100.0 * mean
        );
        if seed == 7 {
            exactly_found_instances_are_unbiased(&g, &r);
        }
    }
}

/// The paper's scoring (call delays alone, one pass) on the same trace against ours: the
/// return gaps are what bring the frequent patterns' mean latencies within 5 %, and the gap
/// passes (local and return gaps keyed by the sibling before) with smoothing what cut
/// instance false negatives sevenfold and bring the two-DB patterns' node latencies within
/// 5 %; rebalancing the numbers of children that are rare for a kind of parent (on by
/// default) cuts them by nearly two thirds again. Leaving the children whose best parent is
/// too unlikely roots (`root_below` 0.005, off by default) helped the greedy assignment
/// alone (6.3 → 6.0 %), not the rebalanced one.
#[test]
fn return_and_local_gaps_beat_call_delays_alone() {
    let g = generate(&fixture("fig10-multi-tier"), opts(500));
    let measure = |p: &Params| {
        let (r, s) = run(&g, p);
        let worst = |sigs: &[&str]| {
            s.node_delays
                .iter()
                .filter(|d| sigs.contains(&d.signature.as_str()))
                .filter_map(|d| d.latency_rel_error)
                .fold(0.0, f64::max)
        };
        let sigs: Vec<&str> = r.patterns.iter().map(|p| p.signature.as_str()).collect();
        let two_db: Vec<&str> = sigs
            .iter()
            .copied()
            .filter(|s| s.contains("(DB,DB)") && s.matches("AUTH").count() == 1)
            .collect();
        let fns = s.instances.false_negatives as f64 / s.instances.truth as f64;
        (worst(&sigs[..4]), worst(&two_db), fns)
    };
    let paper = measure(&Params {
        returns: false,
        gap_passes: 0,
        smooth: 0.0,
        repair: false,
        rebalance: false,
        ..Params::default()
    });
    let returns = measure(&Params {
        gap_passes: 0,
        smooth: 0.0,
        rebalance: false,
        ..Params::default()
    });
    let ours = measure(&Params::default());
    let unlikely_roots = measure(&Params {
        root_below: 0.005,
        ..Params::default()
    });
    let greedy = measure(&Params {
        rebalance: false,
        ..Params::default()
    });
    for (name, (common, two_db, fns)) in [
        ("paper", paper),
        ("returns", returns),
        ("ours", ours),
        ("ours, unlikely children roots", unlikely_roots),
        ("ours, not rebalanced", greedy),
    ] {
        println!(
            "{name}: worst frequent-pattern latency error {:.1} %, two-DB patterns {:.1} %, \
             instance false negatives {:.1} %",
            100.0 * common,
            100.0 * two_db,
            100.0 * fns
        );
    }
    assert!(paper.0 > 0.05 && returns.0 < 0.05 && ours.0 < 0.05);
    assert!(returns.2 < paper.2 - 0.05 && ours.2 < returns.2 - 0.1);
    assert!(ours.1 < 0.05 && returns.1 > 0.1, "two-DB patterns");
    // Unlikely children left roots: a little better than the greedy assignment alone
    // (6.3 → 6.0 %), no better once the counts are rebalanced.
    assert!(unlikely_roots.2 <= ours.2 + 0.002, "root_below");
    // Rebalancing the numbers of children that are rare for a kind of parent (a request
    // without its application call, an application call with three DB calls): 6.3 → 2.4 %.
    assert!(
        ours.2 < greedy.2 - 0.015,
        "rebalance: {greedy:?} → {ours:?}"
    );
}

/// Where the two-DB patterns' latency error comes from: not from which instances nesting
/// finds — the true instances it assembles exactly have the API latency of all of them,
/// within 5 % — but from the wrongly assembled ones that share their signature (a one-DB
/// call that adopted another's DB call), most of the pattern's instances.
fn exactly_found_instances_are_unbiased(g: &Generated, r: &AnalysisResult) {
    use std::collections::{HashMap, HashSet};
    let t = text::read(&g.text(), "t.p5t", Default::default()).trace;
    let by_ref: HashMap<u64, &p5_analyze::Message> =
        t.messages.iter().map(|m| (m.msg_ref, m)).collect();
    let sig = "CLIENT>WS1(AUTH,API(DB,DB))";
    let sorted = |v: &[u64]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v
    };
    let found: HashSet<Vec<u64>> = r
        .instances
        .iter()
        .filter(|i| r.patterns[i.pattern as usize].signature == sig)
        .map(|i| sorted(&i.messages))
        .collect();
    let truth = &g.truth.result;
    let pi = truth
        .patterns
        .iter()
        .position(|p| p.signature == sig)
        .unwrap() as u32;
    let (ws, api) = (t.nodes.get("WS1").unwrap(), t.nodes.get("API").unwrap());
    let (mut all, mut exact) = (Vec::new(), Vec::new());
    for inst in truth.instances.iter().filter(|i| i.pattern == pi) {
        let at = |s, d| {
            inst.messages
                .iter()
                .map(|x| by_ref[x])
                .find(|m| (m.src, m.dst) == (s, d))
        };
        let lat = (at(api, ws).unwrap().time() - at(ws, api).unwrap().time()) as f64;
        all.push(lat);
        if found.contains(&sorted(&inst.messages)) {
            exact.push(lat);
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let inferred = r.patterns.iter().find(|p| p.signature == sig).unwrap();
    let api_node = inferred.nodes.iter().position(|n| n.node == "API").unwrap();
    let inferred_mean = inferred.nodes[api_node].latency.as_ref().unwrap().mean_ns;
    let (m_all, m_exact) = (mean(&all), mean(&exact));
    let n_inferred = inferred.count as usize;
    assert!(exact.len() >= 50, "{} exactly found", exact.len());
    assert!(
        (m_exact - m_all).abs() / m_all < 0.05,
        "exactly found: {m_exact} against {m_all}"
    );
    println!(
        "{sig} API latency: all {all} instances {m_all:.0} ns, the {} found exactly {m_exact:.0} \
         ns, the pattern's {n_inferred} {inferred_mean:.0} ns",
        exact.len(),
        all = all.len()
    );
}

/// §7.2: 200 ms added at WS2 shows as WS2's latency growing by 200 ms (±10 %).
#[test]
fn an_added_delay_lands_on_its_node() {
    let latency = |cfg: &str| {
        let g = generate(cfg, opts(200));
        let (r, _) = run(&g, &Params::default());
        let p = r
            .patterns
            .iter()
            .find(|p| p.signature == "CLIENT>WS2(AUTH,API(DB))")
            .expect("the WS2 pattern is found");
        p.nodes[1].latency.as_ref().unwrap().mean_ns
    };
    let before = latency(&fixture("fig10-multi-tier"));
    let after = latency(&fixture("fig10-added-delay"));
    let grew = (after - before) / MS as f64;
    assert!((180.0..=220.0).contains(&grew), "WS2 grew by {grew} ms");
}

/// Which true instances `r` assembled exactly (the same messages), in the truth's order.
fn exact_hits(g: &Generated, r: &AnalysisResult) -> Vec<bool> {
    let sorted = |v: &[u64]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v
    };
    let found: std::collections::HashSet<Vec<u64>> =
        r.instances.iter().map(|i| sorted(&i.messages)).collect();
    g.truth
        .result
        .instances
        .iter()
        .map(|i| found.contains(&sorted(&i.messages)))
        .collect()
}

/// §7.5.5: a sniffer that drops under 1 % of the messages (0.45–0.47 % here). A true
/// instance that lost a message is found only if nesting keeps the pair that lost a half
/// ([`Params::repair`]); one that lost a whole pair cannot keep its signature. Measured (100
/// s, seeds 1 / 3 / 7, 2.5–2.7 % of the instances touched): instance false negatives rise by
/// 0.93 / 0.76 / 0.37 points with the lost halves estimated (1.07 / 1.39 / 0.82 before a
/// repaired pair held children by its loose ends and an unknown delay scored a quarter of
/// the typical value), 3.68 / 3.54 / 2.70 without. Asserted: with repair the rise is at most
/// 1 point (issue 17's bound for ≤ 1 % dropped) and at most half of what it is without;
/// among the untouched instances, those not assembled exactly rise by at most 1.5 points
/// (the children of a pair that lost both halves look for other parents and find some in
/// untouched instances). The bounds are ours, set after measuring.
#[test]
fn few_dropped_messages_cost_little() {
    let cfg = fixture("fig10-multi-tier");
    for seed in [1, 3, 7] {
        let go = |rate: Option<f64>, repair: bool| {
            let g = generate(
                &cfg,
                Options {
                    capture_rate: rate,
                    seed,
                    ..opts(100)
                },
            );
            let (r, s) = run(
                &g,
                &Params {
                    repair,
                    ..Params::default()
                },
            );
            let sizes: Vec<usize> = g
                .truth
                .result
                .instances
                .iter()
                .map(|i| i.messages.len())
                .collect();
            let fns = s.instances.false_negatives as f64 / s.instances.truth as f64;
            (g.truth.capture.drop_rate, fns, exact_hits(&g, &r), sizes)
        };
        let (_, clean, clean_hits, full) = go(None, true);
        // A peak rate just under the trace's bursts: a few drops.
        let (dropped, lossy, lossy_hits, sizes) = go(Some(450.0), true);
        let (_, plain, _, _) = go(Some(450.0), false);
        assert!(dropped > 0.0 && dropped < 0.01, "drop rate {dropped}");
        assert_eq!(full.len(), sizes.len(), "the same runs");
        let untouched: Vec<usize> = (0..full.len()).filter(|&i| sizes[i] == full[i]).collect();
        let touched = 1.0 - untouched.len() as f64 / full.len() as f64;
        let missed = |h: &[bool]| {
            untouched.iter().filter(|&&i| !h[i]).count() as f64 / untouched.len() as f64
        };
        let (rest_clean, rest_lossy) = (missed(&clean_hits), missed(&lossy_hits));
        println!(
            "seed {seed}: {:.2} % dropped, {:.2} % of the instances touched: instance false \
             negatives {:.2} → {:.2} % ({:.2} % without repair); untouched instances not \
             assembled exactly {:.2} → {:.2} %",
            100.0 * dropped,
            100.0 * touched,
            100.0 * clean,
            100.0 * lossy,
            100.0 * plain,
            100.0 * rest_clean,
            100.0 * rest_lossy
        );
        assert!(rest_lossy - rest_clean <= 0.015, "seed {seed}: untouched");
        assert!(lossy - clean <= 0.01, "seed {seed}: overall");
        assert!(
            lossy - clean <= 0.5 * (plain - clean),
            "seed {seed}: repair saves too little"
        );
    }
}

/// §7.5.5 at 1 % dropped, the bound (500 s, seed 3, 440 lines/s: 1.03 % of the
/// messages dropped in bursts, 0.70 % of the instances lost a whole pair). Measured: instance
/// false negatives 2.10 → 2.72 % (+0.62 points; before the counts were rebalanced 5.63 →
/// 6.88 %, +1.25; +1.92 when an unknown delay scored the typical value, +2.77 when a
/// repaired pair also held children only within its estimated ends, about +7 without
/// repair). Asserted: the bound, at most 1 point.
#[test]
fn one_percent_dropped_costs_at_most_a_point() {
    let cfg = fixture("fig10-multi-tier");
    let fns = |rate: Option<f64>| {
        let g = generate(
            &cfg,
            Options {
                capture_rate: rate,
                seed: 3,
                ..opts(500)
            },
        );
        let (_, s) = run(&g, &Params::default());
        let f = s.instances.false_negatives as f64 / s.instances.truth as f64;
        (g.truth.capture.drop_rate, f)
    };
    let (_, clean) = fns(None);
    let (dropped, lossy) = fns(Some(440.0));
    println!(
        "{:.2} % dropped: instance false negatives {:.2} → {:.2} %",
        100.0 * dropped,
        100.0 * clean,
        100.0 * lossy
    );
    assert!((0.009..0.011).contains(&dropped), "drop rate {dropped}");
    assert!(lossy - clean <= 0.01, "{clean} → {lossy}");
}

/// §7.5.6: WS2's clock fast by 0–60 ms in a single-timestamp trace. The 30 ms window (used
/// only for children no parent holds on the times as they are) with smoothing is never worse
/// than no compensation, and clearly better at 20 and 40 ms (at 60 ms, twice the window,
/// only smoothing helps). AUTH's return (AUTH stamps it) then seems to leave before WS2's
/// call to it (WS2 stamps it, fast; AUTH answers in about 10 ms), yet it still answers that
/// call by its id (`nesting::pairs::find_pairs`): without that, 58.38 / 60.60 / 68.84 % plain
/// and 7.63 / 32.76 / 68.74 % compensated at 20 / 40 / 60 ms, against 14.47 / 24.42 / 57.40
/// and 7.63 / 15.66 / 45.86 % with it, and 5.49 / 17.43 / 54.33 and 2.79 / 12.89 / 44.55 %
/// with the counts rebalanced (6.48 and 2.62 % at no skew); asserted: compensated at least
/// a point better at 20 and 40 ms, at most 20 % plain at 20 ms and compensated at 40 ms,
/// 50 % compensated at 60.
#[test]
fn a_skew_window_with_smoothing_rescues_skewed_children() {
    let cfg = fixture("fig10-multi-tier");
    let compensated = Params {
        window: 30 * MS,
        smooth: 2.0,
        ..Params::default()
    };
    for skew in [0, 20, 40, 60] {
        let g = generate(
            &cfg,
            Options {
                skew: vec![("WS2".into(), skew * MS)],
                ..opts(100)
            },
        );
        let fn_rate = |p: &Params| {
            let (_, s) = run(&g, p);
            s.instances.false_negatives as f64 / s.instances.truth as f64
        };
        let plain = Params {
            smooth: 0.0,
            ..Params::default()
        };
        let (plain, comp) = (fn_rate(&plain), fn_rate(&compensated));
        // The pairs a skewed clock reversed are counted (the CLI prints them).
        let t = text::read(&g.text(), "t.p5t", Default::default()).trace;
        let reversed = nesting(&t, &Params::default()).1.reversed;
        println!("WS2 fast by {skew} ms: {reversed} pairs reversed");
        assert_eq!(
            reversed > 0,
            skew > 0,
            "skew {skew} ms: {reversed} reversed"
        );
        println!(
            "WS2 fast by {skew} ms: instance false negatives {:.2} % plain, {:.2} % with the \
             window and smoothing",
            100.0 * plain,
            100.0 * comp
        );
        assert!(comp <= plain, "skew {skew} ms: {comp} against {plain}");
        if skew == 20 || skew == 40 {
            assert!(
                comp < plain - 0.01,
                "skew {skew} ms: {comp} against {plain}"
            );
        }
        let (plain_max, comp_max) = match skew {
            20 => (0.2, 0.2),
            40 => (1.0, 0.2),
            _ => (1.0, 0.5),
        };
        assert!(
            plain <= plain_max && comp <= comp_max,
            "skew {skew} ms: {plain} plain, {comp} compensated"
        );
    }
}

/// Both ends of every message known (p5's sessions): offsetting every time one host stamps
/// changes neither the patterns nor their node latencies and call delays.
#[test]
fn node_delays_do_not_move_with_a_hosts_clock() {
    let g = generate(
        &fixture("fig10-multi-tier"),
        Options {
            record: Some(Record::Both),
            ..opts(60)
        },
    );
    let t = text::read(&g.text(), "t.p5t", Default::default()).trace;
    assert!(
        t.messages
            .iter()
            .all(|m| m.send().is_some() && m.recv().is_some())
    );
    let mut shifted = t.clone();
    let ws2 = shifted.nodes.get("WS2").unwrap();
    for m in &mut shifted.messages {
        if m.src == ws2 {
            m.t_send += 3 * S + 123;
        }
        if m.dst == ws2 {
            m.t_recv += 3 * S + 123;
        }
    }
    shifted.sort();
    let view = |r: &AnalysisResult| {
        r.patterns
            .iter()
            .map(|p| {
                let nodes: Vec<_> = p
                    .nodes
                    .iter()
                    .map(|n| (n.node.clone(), n.latency.clone(), n.call_delay.clone()))
                    .collect();
                (p.signature.clone(), p.count, nodes)
            })
            .collect::<Vec<_>>()
    };
    let (a, _) = nesting(&t, &Params::default());
    let (b, _) = nesting(&shifted, &Params::default());
    assert!(a.patterns.len() >= 8);
    let (va, vb) = (view(&a), view(&b));
    let counts =
        |v: &[(String, u64, Vec<_>)]| v.iter().map(|x| (x.0.clone(), x.1)).collect::<Vec<_>>();
    assert_eq!(counts(&va), counts(&vb), "patterns and counts");
    for (x, y) in va.iter().zip(&vb) {
        assert!(x == y, "node delays of {} moved", x.0);
    }
}
