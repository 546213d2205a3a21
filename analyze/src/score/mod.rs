//! Accuracy of an analysis against ground truth (\[P5\] §7.5.1; analysis.md §3).
//!
//! Patterns are compared by signature.
//!
//! | level | false negatives | false positives |
//! |---|---|---|
//! | pattern | true signatures not inferred | inferred signatures not true |
//! | instance | Σ max(0, c_true − c_inf) | Σ max(0, c_inf − c_true) |
//! | message | a true message not placed in any inferred instance of its true pattern | (the same count) |
//!
//! Counts are the patterns' `count` fields. **Top-N:** FN(N) = |topN(true) ∖ topN(inferred)|
//! / N, both ranked by count (or by expectation, for linking), ties by signature. With a
//! tolerance τ, an omitted true pattern is forgiven when its inferred rank value is within τ
//! of the N-th inferred pattern's ("within 2 % of making the top N"); a pattern that was not
//! inferred at all is never forgiven. Tolerance 0 is always reported.
//!
//! **Per-node delay error:** for every pattern in both, each call-tree node's mean latency
//! and mean call delay, inferred − true, absolute and relative to the truth; and the
//! relative error of their medians. The mean takes in every instance the analysis assembled
//! wrongly (on the multi-tier trace, an application call that lost one of its two DB calls
//! to another joins the one-DB pattern with twice its latency), the median much less.

pub mod requests;

use crate::pattern::{AnalysisResult, Pattern, Stats};
pub use requests::{RequestLevel, score_requests, truth_requests};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::io::{self, Write};

/// What to rank patterns by for the top-N rate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RankBy {
    /// Instance count (nesting, convolution).
    #[default]
    Count,
    /// Expectation, Σ probability (linking).
    Expectation,
}

crate::choices!(RankBy { "count" => RankBy::Count, "expectation" => RankBy::Expectation });

/// Options of [`score`].
#[derive(Debug, Clone)]
pub struct ScoreOptions {
    /// The N of the top-N rate, e.g. 1..=40.
    pub top: Vec<usize>,
    /// Tolerances besides 0, e.g. 0.02 and 0.06.
    pub tolerances: Vec<f64>,
    /// Ranking.
    pub rank_by: RankBy,
}

impl Default for ScoreOptions {
    fn default() -> Self {
        ScoreOptions {
            top: (1..=40).collect(),
            tolerances: vec![0.02, 0.06],
            rank_by: RankBy::Count,
        }
    }
}

/// False negatives and positives at one level.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Level {
    /// How many are true.
    pub truth: u64,
    /// How many were inferred.
    pub inferred: u64,
    /// False negatives.
    pub false_negatives: u64,
    /// False positives.
    pub false_positives: u64,
}

/// Messages placed in an inferred instance of their true pattern.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageLevel {
    /// Messages in true instances.
    pub total: u64,
    /// Of those, not placed in an inferred instance of their true pattern.
    pub misplaced: u64,
}

/// The top-N false-negative rate at one N and tolerance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopN {
    /// N.
    pub n: usize,
    /// Tolerance.
    pub tolerance: f64,
    /// Omitted true patterns (after forgiving near ties).
    pub omitted: usize,
    /// omitted / N.
    pub rate: f64,
}

/// The delay error of one node of one pattern.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeDelay {
    /// The pattern's signature.
    pub signature: String,
    /// The node's index in the pattern's call tree.
    pub index: usize,
    /// Node name.
    pub node: String,
    /// True mean latency (ns).
    pub true_latency_ns: Option<f64>,
    /// Inferred − true mean latency (ns).
    pub latency_error_ns: Option<f64>,
    /// |error| / true latency.
    pub latency_rel_error: Option<f64>,
    /// True mean call delay (ns).
    pub true_call_delay_ns: Option<f64>,
    /// Inferred − true mean call delay (ns).
    pub call_delay_error_ns: Option<f64>,
    /// |error| / true call delay.
    pub call_delay_rel_error: Option<f64>,
    /// |inferred − true median latency| / true median.
    #[serde(default)]
    pub latency_p50_rel_error: Option<f64>,
    /// |inferred − true median call delay| / true median.
    #[serde(default)]
    pub call_delay_p50_rel_error: Option<f64>,
}

/// Every score of an analysis against its truth.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Scores {
    /// Pattern level.
    pub patterns: Level,
    /// Instance level.
    pub instances: Level,
    /// Message level.
    pub messages: MessageLevel,
    /// Request level: each true instance against the inferred one holding its first
    /// message ([`requests`]).
    #[serde(default)]
    pub requests: RequestLevel,
    /// Top-N rates, by tolerance then N.
    pub top_n: Vec<TopN>,
    /// Per-node delay errors of the patterns found.
    pub node_delays: Vec<NodeDelay>,
    /// Mean relative latency error over [`Scores::node_delays`] (`None` if none compared).
    pub mean_latency_rel_error: Option<f64>,
}

fn rank_value(p: &Pattern, by: RankBy) -> f64 {
    match by {
        RankBy::Count => p.count as f64,
        RankBy::Expectation => p.expectation,
    }
}

fn ranked(r: &AnalysisResult, by: RankBy) -> Vec<(&str, f64)> {
    let mut v: Vec<(&str, f64)> = r
        .patterns
        .iter()
        .map(|p| (p.signature.as_str(), rank_value(p, by)))
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    v
}

fn counts(r: &AnalysisResult) -> HashMap<&str, u64> {
    let mut m = HashMap::new();
    for p in &r.patterns {
        *m.entry(p.signature.as_str()).or_insert(0) += p.count;
    }
    m
}

/// Scores `inferred` against `truth`.
pub fn score(truth: &AnalysisResult, inferred: &AnalysisResult, opts: &ScoreOptions) -> Scores {
    let (ct, ci) = (counts(truth), counts(inferred));
    let mut s = Scores::default();
    s.patterns.truth = ct.len() as u64;
    s.patterns.inferred = ci.len() as u64;
    s.patterns.false_negatives = ct.keys().filter(|k| !ci.contains_key(*k)).count() as u64;
    s.patterns.false_positives = ci.keys().filter(|k| !ct.contains_key(*k)).count() as u64;
    s.instances.truth = ct.values().sum();
    s.instances.inferred = ci.values().sum();
    for (sig, &c) in &ct {
        s.instances.false_negatives += c.saturating_sub(ci.get(sig).copied().unwrap_or(0));
    }
    for (sig, &c) in &ci {
        s.instances.false_positives += c.saturating_sub(ct.get(sig).copied().unwrap_or(0));
    }
    s.messages = message_level(truth, inferred);
    s.requests = score_requests(&truth_requests(truth), inferred);
    s.top_n = top_n(truth, inferred, opts);
    s.node_delays = node_delays(truth, inferred);
    let rel: Vec<f64> = s
        .node_delays
        .iter()
        .filter_map(|d| d.latency_rel_error)
        .collect();
    s.mean_latency_rel_error =
        (!rel.is_empty()).then(|| rel.iter().sum::<f64>() / rel.len() as f64);
    s
}

fn message_level(truth: &AnalysisResult, inferred: &AnalysisResult) -> MessageLevel {
    let mut placed: HashMap<u64, Vec<&str>> = HashMap::new();
    for inst in &inferred.instances {
        let Some(p) = inferred.patterns.get(inst.pattern as usize) else {
            continue;
        };
        for &m in &inst.messages {
            placed.entry(m).or_default().push(p.signature.as_str());
        }
    }
    let mut out = MessageLevel::default();
    for inst in &truth.instances {
        let Some(p) = truth.patterns.get(inst.pattern as usize) else {
            continue;
        };
        for m in &inst.messages {
            out.total += 1;
            let ok = placed
                .get(m)
                .is_some_and(|sigs| sigs.contains(&p.signature.as_str()));
            out.misplaced += u64::from(!ok);
        }
    }
    out
}

fn top_n(truth: &AnalysisResult, inferred: &AnalysisResult, opts: &ScoreOptions) -> Vec<TopN> {
    let rt = ranked(truth, opts.rank_by);
    let ri = ranked(inferred, opts.rank_by);
    let value: HashMap<&str, f64> = ri.iter().copied().collect();
    let mut tolerances = vec![0.0];
    tolerances.extend(opts.tolerances.iter().copied().filter(|&t| t > 0.0));
    let mut out = Vec::new();
    for &tol in &tolerances {
        for &n in &opts.top {
            if n == 0 {
                continue;
            }
            let top_inf: HashSet<&str> = ri.iter().take(n).map(|p| p.0).collect();
            let nth = ri.get(n - 1).map_or(0.0, |p| p.1);
            let omitted = rt
                .iter()
                .take(n)
                .filter(|(sig, _)| !top_inf.contains(sig))
                .filter(|(sig, _)| match value.get(sig) {
                    Some(&v) => v < (1.0 - tol) * nth,
                    None => true,
                })
                .count();
            out.push(TopN {
                n,
                tolerance: tol,
                omitted,
                rate: omitted as f64 / n as f64,
            });
        }
    }
    out
}

fn mean_of(s: &Option<Stats>) -> Option<f64> {
    s.as_ref().map(|s| s.mean_ns)
}

fn p50_of(s: &Option<Stats>) -> Option<f64> {
    s.as_ref().map(|s| s.p50_ns as f64)
}

fn errors(t: Option<f64>, i: Option<f64>) -> (Option<f64>, Option<f64>) {
    match (t, i) {
        (Some(t), Some(i)) => (
            Some(i - t),
            (t.abs() > 0.0).then(|| (i - t).abs() / t.abs()),
        ),
        _ => (None, None),
    }
}

fn node_delays(truth: &AnalysisResult, inferred: &AnalysisResult) -> Vec<NodeDelay> {
    let by_sig: HashMap<&str, &Pattern> = inferred
        .patterns
        .iter()
        .map(|p| (p.signature.as_str(), p))
        .collect();
    let mut out = Vec::new();
    for t in &truth.patterns {
        let Some(i) = by_sig.get(t.signature.as_str()) else {
            continue;
        };
        for (j, (tn, inn)) in t.nodes.iter().zip(&i.nodes).enumerate().skip(1) {
            let (tl, il) = (mean_of(&tn.latency), mean_of(&inn.latency));
            let (tc, ic) = (mean_of(&tn.call_delay), mean_of(&inn.call_delay));
            let (le, lr) = errors(tl, il);
            let (ce, cr) = errors(tc, ic);
            let (_, lm) = errors(p50_of(&tn.latency), p50_of(&inn.latency));
            let (_, cm) = errors(p50_of(&tn.call_delay), p50_of(&inn.call_delay));
            if le.is_none() && ce.is_none() {
                continue;
            }
            out.push(NodeDelay {
                signature: t.signature.clone(),
                index: j,
                node: tn.node.clone(),
                true_latency_ns: tl,
                latency_error_ns: le,
                latency_rel_error: lr,
                true_call_delay_ns: tc,
                call_delay_error_ns: ce,
                call_delay_rel_error: cr,
                latency_p50_rel_error: lm,
                call_delay_p50_rel_error: cm,
            });
        }
    }
    out
}

fn pct(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_owned(), |x| format!("{:.2}%", x * 100.0))
}

/// Writes the scores as a readable report.
pub fn write_table<W: Write>(s: &Scores, mut w: W) -> io::Result<()> {
    writeln!(
        w,
        "{:<10} {:>10} {:>10} {:>10} {:>10}",
        "level", "true", "inferred", "false_neg", "false_pos"
    )?;
    for (name, l) in [("pattern", &s.patterns), ("instance", &s.instances)] {
        writeln!(
            w,
            "{:<10} {:>10} {:>10} {:>10} {:>10}",
            name, l.truth, l.inferred, l.false_negatives, l.false_positives
        )?;
    }
    writeln!(
        w,
        "message: {} of {} not placed in an inferred instance of their true pattern",
        s.messages.misplaced, s.messages.total
    )?;
    let r = &s.requests;
    writeln!(
        w,
        "request: {} of {} exact ({:.2} %, expected {:.2} %), mean Jaccard {:.4}, {} without an instance",
        r.exact,
        r.requests,
        r.exact_share * 100.0,
        r.expected_exact_share * 100.0,
        r.mean_jaccard,
        r.without_instance
    )?;
    let mut tols: Vec<f64> = s.top_n.iter().map(|t| t.tolerance).collect();
    tols.dedup();
    for tol in tols {
        let row: Vec<String> = s
            .top_n
            .iter()
            .filter(|t| t.tolerance == tol)
            .map(|t| format!("{}:{}", t.n, t.omitted))
            .collect();
        writeln!(
            w,
            "top-N omitted at {:.0}% tolerance (N:omitted): {}",
            tol * 100.0,
            row.join(" ")
        )?;
    }
    writeln!(
        w,
        "per-node delay error, mean relative latency error {}",
        pct(s.mean_latency_rel_error)
    )?;
    // A delay's relative and absolute error and the median's relative error, or a dash
    // where the node has no such delay (the root's callee has no call delay).
    let err = |rel: Option<f64>, ns: Option<f64>, p50: Option<f64>| match ns {
        Some(e) => format!("{} ({e:+.0} ns; median {})", pct(rel), pct(p50)),
        None => "-".to_owned(),
    };
    for d in &s.node_delays {
        writeln!(
            w,
            "  {} #{} {}: latency {}, call delay {}",
            d.signature,
            d.index,
            d.node,
            err(
                d.latency_rel_error,
                d.latency_error_ns,
                d.latency_p50_rel_error
            ),
            err(
                d.call_delay_rel_error,
                d.call_delay_error_ns,
                d.call_delay_p50_rel_error
            ),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::Instance;

    fn result(pats: &[(&str, u64, &[&[u64]])]) -> AnalysisResult {
        let mut r = AnalysisResult::default();
        for (i, (sig, count, insts)) in pats.iter().enumerate() {
            r.patterns.push(Pattern {
                signature: (*sig).into(),
                count: *count,
                expectation: *count as f64,
                ..Pattern::default()
            });
            for m in *insts {
                r.instances.push(Instance {
                    pattern: i as u32,
                    prob: 1.0,
                    messages: m.to_vec(),
                    ..Instance::default()
                });
            }
        }
        r
    }

    #[test]
    fn node_delays_compare_means_and_medians() {
        use crate::pattern::PatternNode;
        let with = |mean: f64, p50: i64| {
            let mut r = result(&[("A>B", 10, &[])]);
            let st = Stats {
                n: 10,
                mean_ns: mean,
                p50_ns: p50,
                ..Stats::default()
            };
            r.patterns[0].nodes = vec![
                PatternNode::default(),
                PatternNode {
                    parent: Some(0),
                    latency: Some(st.clone()),
                    call_delay: Some(st),
                    ..PatternNode::default()
                },
            ];
            r
        };
        // A wrong instance's long tail moves the mean by half, the median by 1 %.
        let s = score(
            &with(100.0, 100),
            &with(150.0, 101),
            &ScoreOptions::default(),
        );
        let d = &s.node_delays[0];
        assert_eq!(d.latency_rel_error, Some(0.5));
        assert_eq!(d.latency_p50_rel_error, Some(0.01));
        assert_eq!(d.call_delay_p50_rel_error, Some(0.01));
        // The report: both errors of each delay, and a dash for a delay the node lacks.
        let mut lacking = with(150.0, 101);
        lacking.patterns[0].nodes[1].call_delay = None;
        let mut out = Vec::new();
        let s = score(&with(100.0, 100), &lacking, &ScoreOptions::default());
        write_table(&s, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("  A>B #1 : latency 50.00% (+50 ns; median 1.00%), call delay -\n"),
            "{text}"
        );
    }

    #[test]
    fn top_n_forgives_near_ties_only_within_the_tolerance() {
        let truth = result(&[("A>B", 100, &[]), ("A>C", 99, &[]), ("A>D", 50, &[])]);
        let inferred = result(&[("A>B", 100, &[]), ("A>D", 99, &[]), ("A>C", 98, &[])]);
        let opts = ScoreOptions {
            top: vec![1, 2, 3],
            tolerances: vec![0.02],
            rank_by: RankBy::Count,
        };
        let s = score(&truth, &inferred, &opts);
        let at = |n, tol| {
            s.top_n
                .iter()
                .find(|t| t.n == n && t.tolerance == tol)
                .unwrap()
                .omitted
        };
        assert_eq!((at(1, 0.0), at(2, 0.0), at(3, 0.0)), (0, 1, 0));
        assert_eq!(at(2, 0.02), 0);
        let missing = result(&[("A>B", 100, &[])]);
        let s = score(&truth, &missing, &opts);
        assert_eq!(
            s.top_n
                .iter()
                .find(|t| t.n == 2 && t.tolerance > 0.0)
                .unwrap()
                .omitted,
            1
        );
    }
}
