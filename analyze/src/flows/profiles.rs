//! Flow profiles (seed 002 §4.1): fixed-length summaries of what a flow did, as sparse
//! vectors over call paths, and their L1 (Manhattan) distance.
//!
//! * *Coverage*: 1 for every call path the flow was on.
//! * *Composite*: the fraction of the flow's time spent with each path innermost,
//!   concatenated with the fraction of its bytes sent from each path (the communication
//!   profile): two halves, so a flow that differs only in what it sends still differs.

use super::paths::PathId;
use super::rules::{Flows, PathStat};

/// Which profile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProfileKind {
    /// Call-path coverage bits.
    #[default]
    Coverage,
    /// Time fractions and byte fractions per call path.
    Composite,
}

crate::choices!(ProfileKind { "coverage" => ProfileKind::Coverage, "composite" => ProfileKind::Composite });

/// A sparse profile: `(component, value)` sorted by component; a component is a path id
/// times two, plus one for the communication half.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Profile(pub Vec<(u64, f64)>);

impl Profile {
    /// The profile of one flow's path statistics (sorted by path).
    pub fn of(stats: &[PathStat], kind: ProfileKind) -> Profile {
        match kind {
            ProfileKind::Coverage => Profile(
                stats
                    .iter()
                    .map(|s| (u64::from(s.path) << 1, 1.0))
                    .collect(),
            ),
            ProfileKind::Composite => {
                let time: i64 = stats.iter().map(|s| s.time_ns).sum();
                let bytes: i64 = stats.iter().map(|s| s.bytes).sum();
                let mut v = Vec::with_capacity(stats.len() * 2);
                for s in stats {
                    let k = u64::from(s.path) << 1;
                    if time > 0 && s.time_ns > 0 {
                        v.push((k, s.time_ns as f64 / time as f64));
                    }
                    if bytes > 0 && s.bytes > 0 {
                        v.push((k | 1, s.bytes as f64 / bytes as f64));
                    }
                }
                Profile(v)
            }
        }
    }

    /// A coverage profile of a set of paths.
    pub fn coverage(paths: impl IntoIterator<Item = PathId>) -> Profile {
        let mut v: Vec<(u64, f64)> = paths
            .into_iter()
            .map(|p| (u64::from(p) << 1, 1.0))
            .collect();
        v.sort_unstable_by_key(|e| e.0);
        v.dedup_by_key(|e| e.0);
        Profile(v)
    }

    /// Manhattan distance.
    pub fn l1(&self, other: &Profile) -> f64 {
        let (a, b) = (&self.0, &other.0);
        let (mut i, mut j, mut d) = (0, 0, 0.0);
        while i < a.len() && j < b.len() {
            match a[i].0.cmp(&b[j].0) {
                std::cmp::Ordering::Less => {
                    d += a[i].1.abs();
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    d += b[j].1.abs();
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    d += (a[i].1 - b[j].1).abs();
                    i += 1;
                    j += 1;
                }
            }
        }
        d + a[i..].iter().map(|e| e.1.abs()).sum::<f64>()
            + b[j..].iter().map(|e| e.1.abs()).sum::<f64>()
    }
}

/// The profile of every flow, by flow index.
pub fn profiles(flows: &Flows, kind: ProfileKind) -> Vec<Profile> {
    (0..flows.flows.len() as u32)
        .map(|f| Profile::of(flows.paths_of(f), kind))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(path: PathId, time_ns: i64, bytes: i64) -> PathStat {
        PathStat {
            flow: 0,
            path,
            first_t: 0,
            time_ns,
            bytes,
        }
    }

    #[test]
    fn coverage_and_composite_distances() {
        let a = [stat(1, 30, 0), stat(2, 70, 100)];
        let b = [stat(1, 70, 0), stat(3, 30, 100)];
        let (ca, cb) = (
            Profile::of(&a, ProfileKind::Coverage),
            Profile::of(&b, ProfileKind::Coverage),
        );
        assert_eq!(ca.l1(&cb), 2.0);
        assert_eq!(ca.l1(&ca), 0.0);
        let (pa, pb) = (
            Profile::of(&a, ProfileKind::Composite),
            Profile::of(&b, ProfileKind::Composite),
        );
        // Time: |0.3−0.7| + 0.7 + 0.3; bytes: 1 + 1.
        assert!((pa.l1(&pb) - 3.4).abs() < 1e-9, "{}", pa.l1(&pb));
        assert_eq!(pa.l1(&pb), pb.l1(&pa));
        assert_eq!(Profile::coverage([3, 1, 3]).0, vec![(2, 1.0), (6, 1.0)]);
    }
}
