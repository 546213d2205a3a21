//! Anomaly detection (seed 002 §4.1): the suspect score of a flow is its distance to
//! common or known-normal behaviour. The paper defers the formula to spTracer; ours
//! (analysis.md §1.4): without references, the L1 distance to its k-th nearest other flow
//! (k = 1: a flow unlike every other one scores high, a flow with a twin scores low); with
//! known-normal references (flows named with `--normal`, or every flow of a reference
//! session), the distance to the nearest reference (0 for a flow named normal itself).
//!
//! Identical profiles are scored once (the 2,000 flows of a request loop are a handful of
//! distinct profiles under coverage).

use super::profiles::Profile;
use crate::hash::FxHashMap;

/// A flow's score and rank.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Suspect {
    /// The score.
    pub score: f64,
    /// 1 = most suspect (ties by flow order).
    pub rank: u32,
}

/// References for scoring.
#[derive(Debug, Clone, Copy)]
pub enum Reference<'a> {
    /// Distance to the k-th nearest other flow.
    Nearest(usize),
    /// Known-normal flows of the same set (indexes).
    Normal(&'a [usize]),
    /// Known-normal profiles from elsewhere (a reference session).
    External(&'a [Profile]),
}

fn key(p: &Profile) -> Vec<(u64, u64)> {
    p.0.iter().map(|&(k, v)| (k, v.to_bits())).collect()
}

/// Scores every profile against `reference`; returns one [`Suspect`] per profile.
pub fn suspects(profiles: &[Profile], reference: Reference<'_>) -> Vec<Suspect> {
    // Distinct profiles and how many flows share each.
    let mut distinct: Vec<usize> = Vec::new();
    let mut of: Vec<usize> = Vec::with_capacity(profiles.len());
    let mut seen: FxHashMap<Vec<(u64, u64)>, usize> = FxHashMap::default();
    for p in profiles {
        let next = distinct.len();
        let d = *seen.entry(key(p)).or_insert(next);
        if d == next {
            distinct.push(of.len());
        }
        of.push(d);
    }
    let mut weight = vec![0usize; distinct.len()];
    for &d in &of {
        weight[d] += 1;
    }
    let scores: Vec<f64> = match reference {
        Reference::Nearest(k) => {
            let k = k.max(1);
            (0..distinct.len())
                .map(|a| {
                    // Distances to the other flows: a twin is at 0.
                    let mut ds: Vec<f64> = vec![0.0; weight[a] - 1];
                    for b in 0..distinct.len() {
                        if a != b {
                            let d = profiles[distinct[a]].l1(&profiles[distinct[b]]);
                            ds.extend(std::iter::repeat_n(d, weight[b].min(k)));
                        }
                    }
                    ds.sort_unstable_by(f64::total_cmp);
                    ds.get(k - 1).or(ds.last()).copied().unwrap_or(0.0)
                })
                .collect()
        }
        Reference::Normal(normal) => {
            return rank(
                (0..profiles.len())
                    .map(|i| {
                        if normal.contains(&i) {
                            return 0.0;
                        }
                        normal
                            .iter()
                            .filter(|&&j| j < profiles.len())
                            .map(|&j| profiles[i].l1(&profiles[j]))
                            .fold(None, |m: Option<f64>, d| Some(m.map_or(d, |m| m.min(d))))
                            .unwrap_or(0.0)
                    })
                    .collect(),
            );
        }
        Reference::External(refs) => (0..distinct.len())
            .map(|a| {
                refs.iter()
                    .map(|r| profiles[distinct[a]].l1(r))
                    .fold(None, |m: Option<f64>, d| Some(m.map_or(d, |m| m.min(d))))
                    .unwrap_or(0.0)
            })
            .collect(),
    };
    rank(of.iter().map(|&d| scores[d]).collect())
}

fn rank(scores: Vec<f64>) -> Vec<Suspect> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    let mut out = vec![
        Suspect {
            score: 0.0,
            rank: 0
        };
        scores.len()
    ];
    for (r, &i) in order.iter().enumerate() {
        out[i] = Suspect {
            score: scores[i],
            rank: r as u32 + 1,
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cov(paths: &[u32]) -> Profile {
        Profile::coverage(paths.iter().copied())
    }

    #[test]
    fn nearest_and_known_normal_scores() {
        let base = [1, 2, 3];
        let ps = vec![
            cov(&[1, 2, 3, 10, 11, 12]), // first job: initialisation
            cov(&base),
            cov(&[1, 2, 3, 20]), // faulty
            cov(&base),
            cov(&[1, 2, 3, 30, 31, 32]), // last job: clean-up
        ];
        let s = suspects(&ps, Reference::Nearest(1));
        assert_eq!(s[0].score, 3.0);
        assert_eq!(s[2].score, 1.0);
        assert_eq!(s[1].score, 0.0);
        assert_eq!((s[0].rank, s[4].rank, s[2].rank), (1, 2, 3));
        let refs = vec![ps[0].clone(), ps[1].clone(), ps[4].clone()];
        let s = suspects(&ps, Reference::External(&refs));
        assert_eq!(s[2].rank, 1);
        assert_eq!(s[2].score, 1.0);
        assert_eq!(s[0].score, 0.0);
        let s = suspects(&ps, Reference::Normal(&[0, 1, 3, 4]));
        assert_eq!(s[2].rank, 1);
        assert_eq!(s[0].score, 0.0, "a known-normal flow is not suspect");
        // k = 2: flow 1's nearest is its twin, flow 3 (0), the second flow 2 (1).
        let s = suspects(&ps, Reference::Nearest(2));
        assert_eq!(s[1].score, 1.0);
    }
}
