//! Accuracy per request: what a user of the paths sees. A same-shape swap between two
//! concurrent requests leaves every pattern count right and both requests wrong, so the
//! pattern scores alone hide it.
//!
//! Each true request (a ground-truth instance, or a set of messages a test knows belong to
//! one request) is compared with the inferred instance that holds its first message — the
//! most probable one when several do (linking's alternatives):
//!
//! - **exact**: that instance holds exactly the request's messages;
//! - **Jaccard**: |request ∩ instance| / |request ∪ instance| (0 without an instance),
//!   averaged over the requests;
//! - **without an instance**: none of the request's messages is in any inferred instance.
//!
//! The *expected* exact share is the mean over requests of the summed probability of the
//! inferred instances that hold its first message and are exact: what a calibrated linking
//! run predicts of itself.

use crate::pattern::AnalysisResult;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

/// Per-request accuracy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestLevel {
    /// True requests.
    pub requests: u64,
    /// Of those, assembled exactly.
    pub exact: u64,
    /// `exact / requests` (1 when there are none).
    pub exact_share: f64,
    /// Mean Jaccard index of each request's message set with its instance's.
    pub mean_jaccard: f64,
    /// Requests none of whose messages is in an inferred instance.
    pub without_instance: u64,
    /// Mean over requests of the probability the inferred instances give being exact.
    pub expected_exact_share: f64,
}

/// Scores the requests `truth` (each a list of `msg_ref`s, its first message first) against
/// the instances of `inferred`.
pub fn score_requests(truth: &[Vec<u64>], inferred: &AnalysisResult) -> RequestLevel {
    let mut holding: HashMap<u64, Vec<u32>> = HashMap::new();
    for (k, inst) in inferred.instances.iter().enumerate() {
        for &m in &inst.messages {
            holding.entry(m).or_default().push(k as u32);
        }
    }
    let sets: Vec<HashSet<u64>> = inferred
        .instances
        .iter()
        .map(|i| i.messages.iter().copied().collect())
        .collect();
    let mut out = RequestLevel {
        requests: truth.len() as u64,
        ..RequestLevel::default()
    };
    let (mut jaccard, mut expected) = (0.0, 0.0);
    for req in truth {
        let want: HashSet<u64> = req.iter().copied().collect();
        if !req.iter().any(|m| holding.contains_key(m)) {
            out.without_instance += 1;
            continue;
        }
        let Some(first) = req.first() else { continue };
        let cands = holding.get(first).map_or(&[][..], Vec::as_slice);
        let best = cands.iter().copied().max_by(|&a, &b| {
            let (pa, pb) = (
                inferred.instances[a as usize].prob,
                inferred.instances[b as usize].prob,
            );
            pa.total_cmp(&pb).then(b.cmp(&a))
        });
        let is_exact = |k: u32| sets[k as usize] == want;
        if let Some(k) = best {
            let got = &sets[k as usize];
            let inter = got.intersection(&want).count() as f64;
            let union = got.union(&want).count() as f64;
            jaccard += if union > 0.0 { inter / union } else { 1.0 };
            out.exact += u64::from(is_exact(k));
        }
        expected += cands
            .iter()
            .filter(|&&k| is_exact(k))
            .map(|&k| inferred.instances[k as usize].prob.clamp(0.0, 1.0))
            .sum::<f64>()
            .min(1.0);
    }
    let n = truth.len().max(1) as f64;
    out.exact_share = if truth.is_empty() {
        1.0
    } else {
        out.exact as f64 / n
    };
    out.mean_jaccard = if truth.is_empty() { 1.0 } else { jaccard / n };
    out.expected_exact_share = if truth.is_empty() { 1.0 } else { expected / n };
    out
}

/// The requests of a ground truth: each true instance's messages.
pub fn truth_requests(truth: &AnalysisResult) -> Vec<Vec<u64>> {
    truth.instances.iter().map(|i| i.messages.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::Instance;

    fn inst(messages: &[u64], prob: f64) -> Instance {
        Instance {
            prob,
            messages: messages.to_vec(),
            ..Instance::default()
        }
    }

    #[test]
    fn a_swap_of_two_leaf_calls_makes_both_requests_wrong() {
        let truth = vec![vec![1, 2, 3, 4], vec![5, 6, 7, 8]];
        let right = AnalysisResult {
            instances: vec![inst(&[1, 2, 3, 4], 1.0), inst(&[5, 6, 7, 8], 1.0)],
            ..AnalysisResult::default()
        };
        let s = score_requests(&truth, &right);
        assert_eq!((s.exact, s.exact_share, s.mean_jaccard), (2, 1.0, 1.0));
        // The leaf calls 2–3 and 6–7 swapped: the same shapes, both requests wrong.
        let swapped = AnalysisResult {
            instances: vec![inst(&[1, 6, 7, 4], 1.0), inst(&[5, 2, 3, 8], 1.0)],
            ..AnalysisResult::default()
        };
        let s = score_requests(&truth, &swapped);
        assert_eq!((s.exact, s.without_instance), (0, 0));
        assert!(
            (s.mean_jaccard - 2.0 / 6.0).abs() < 1e-9,
            "{}",
            s.mean_jaccard
        );
    }

    #[test]
    fn lost_requests_and_alternatives_count() {
        let truth = vec![vec![1, 2], vec![3, 4]];
        let r = AnalysisResult {
            instances: vec![inst(&[1, 2], 0.7), inst(&[1], 0.3)],
            ..AnalysisResult::default()
        };
        let s = score_requests(&truth, &r);
        assert_eq!((s.exact, s.without_instance), (1, 1));
        assert!((s.expected_exact_share - 0.35).abs() < 1e-9);
    }
}
