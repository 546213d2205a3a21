//! Nesting on the multi-tier trace (\[P5\] Fig. 10, 500 s, about 216 k messages) over several
//! seeds, scored against the generator's truth: instance false negatives, the mean latency
//! error, the N ≤ 20 whose top-N rate misses at 2 % (above 1/N) and at 6 % (above 0), and
//! per true pattern among the eight most frequent, its worst node's mean latency and call
//! delay error. The figures ARCHITECTURE.md gives per seed come from here.
//!
//! `cargo run --release -p p5-analyze --example nesting_seeds -- [--seeds 1,2,3,4,5,7,11]
//! [--no-returns] [--gap-passes N] [--smooth SIGMA] [--capture-rate LINES_PER_S] [--no-repair]
//! [--root-below SHARE] [--no-rebalance] [--counts]`
//!
//! `--counts` lists the signatures whose true and inferred counts differ most.
//!
//! `--capture-rate` puts the paper's sniffer in the way (§7.5.5, a 64-line queue): the run
//! then also prints how many messages it dropped and how many calls and returns were left
//! without their partner.

use p5_analyze::maketrace::{self, Config, Options};
use p5_analyze::nesting::{Params, nesting};
use p5_analyze::pattern::AnalysisResult;
use p5_analyze::score::{ScoreOptions, Scores, score};
use p5_analyze::text;
use std::path::Path;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| args.iter().any(|a| a == name);
    // The value after `name`, parsed, or `default`.
    fn value<T: std::str::FromStr>(args: &[String], name: &str, default: T, what: &str) -> T {
        match args
            .iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
        {
            Some(v) => v.parse().unwrap_or_else(|_| panic!("{name}: {what}")),
            None => default,
        }
    }
    let seeds: Vec<u64> = value(&args, "--seeds", "1,2,3,4,5,7,11".to_owned(), "seeds")
        .split(',')
        .map(|s| s.parse().expect("--seeds: numbers, comma-separated"))
        .collect();
    let d = Params::default();
    let p = Params {
        returns: !flag("--no-returns"),
        gap_passes: value(&args, "--gap-passes", d.gap_passes, "a number"),
        smooth: value(&args, "--smooth", d.smooth, "σ in bins"),
        repair: !flag("--no-repair"),
        root_below: value(&args, "--root-below", d.root_below, "a share"),
        rebalance: !flag("--no-rebalance"),
        ..d
    };
    let lines_per_s = value(&args, "--capture-rate", f64::NAN, "lines a second");
    let capture_rate = (!lines_per_s.is_nan()).then_some(lines_per_s);
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fig10-multi-tier.toml");
    let text = std::fs::read_to_string(&fixture).expect("the fixture");
    let cfg = Config::parse(&text, &fixture).expect("the fixture parses");
    for seed in seeds {
        let g = maketrace::generate(
            &cfg,
            &Options {
                seed,
                duration: Some(500_000_000_000),
                queue: 64,
                capture_rate,
                ..Options::default()
            },
        );
        let t = text::read(&g.text(), "t.p5t", Default::default());
        let (r, counts) = nesting(&t.trace, &p);
        if capture_rate.is_some() {
            let c = &g.truth.capture;
            println!(
                "seed {seed}: {} of {} messages dropped ({:.2} %); {} calls and {} returns \
                 unmatched, {} and {} kept",
                c.dropped,
                c.lines,
                100.0 * c.drop_rate,
                counts.unmatched_calls,
                counts.unmatched_rets,
                counts.repaired.calls,
                counts.repaired.rets
            );
        }
        let s = score(&g.truth.result, &r, &ScoreOptions::default());
        let misses = |tol: f64, limit: &dyn Fn(usize) -> f64| -> Vec<usize> {
            (1..=20)
                .filter(|&n| rate(&s, n, tol) > limit(n) + 1e-9)
                .collect()
        };
        println!(
            "seed {seed}: instance false negatives {:.2} %, mean latency error {:.2} %, top-N \
             misses at 2 % {:?}, at 6 % {:?}",
            100.0 * s.instances.false_negatives as f64 / s.instances.truth as f64,
            100.0 * s.mean_latency_rel_error.unwrap_or(f64::NAN),
            misses(0.02, &|n| 1.0 / n as f64),
            misses(0.06, &|_| 0.0),
        );
        if flag("--counts") {
            counts_by_signature(&g.truth.result, &r);
        }
        for pat in g.truth.result.patterns.iter().take(8) {
            let (mut lat, mut call) = (0.0f64, 0.0f64);
            for d in s
                .node_delays
                .iter()
                .filter(|d| d.signature == pat.signature)
            {
                lat = lat.max(d.latency_rel_error.unwrap_or(0.0));
                call = call.max(d.call_delay_rel_error.unwrap_or(0.0));
            }
            println!(
                "  {:<32} worst node: latency {:5.1} %, call delay {:5.1} %",
                pat.signature,
                100.0 * lat,
                100.0 * call
            );
        }
    }
}

/// Per signature whose counts differ, the true and the inferred count (the instance false
/// negatives and positives at the level the score counts), the largest differences first.
fn counts_by_signature(truth: &AnalysisResult, inferred: &AnalysisResult) {
    let mut by: std::collections::BTreeMap<&str, (u64, u64)> = Default::default();
    for p in &truth.patterns {
        by.entry(p.signature.as_str()).or_default().0 += p.count;
    }
    for p in &inferred.patterns {
        by.entry(p.signature.as_str()).or_default().1 += p.count;
    }
    let mut diff: Vec<_> = by.into_iter().filter(|(_, (t, i))| t != i).collect();
    diff.sort_by_key(|(_, (t, i))| std::cmp::Reverse(t.abs_diff(*i)));
    for (sig, (t, i)) in diff.iter().take(40) {
        println!(
            "  {sig:<40} truth {t:>6}, inferred {i:>6} ({:+})",
            *i as i64 - *t as i64
        );
    }
}

fn rate(s: &Scores, n: usize, tolerance: f64) -> f64 {
    s.top_n
        .iter()
        .find(|t| t.n == n && (t.tolerance - tolerance).abs() < 1e-9)
        .map_or(0.0, |t| t.rate)
}
