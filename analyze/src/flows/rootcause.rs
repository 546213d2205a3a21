//! Root cause (seed 002 §4.2): the call paths present on the anomalous side and absent from
//! every normal flow (Δa), and the converse (Δn), reduced and ranked.
//!
//! 1. *Prefix pruning*: a path whose proper prefix is itself in Δ is dropped (if main→A
//!    never ran normally, neither could main→A→B).
//! 2. *Leaf merging*: paths that differ only in their last call become one, their parent
//!    with the leaves listed — main→\[A,D\] (Fig. 4).
//! 3. Two rankings, both kept: by first occurrence (earlier differences are likelier
//!    causes) and by length (shorter paths first; ties by first occurrence).

use super::paths::{NO_PATH, PathId, PathTable};
use crate::hash::{FxHashMap, FxHashSet};

/// Which side a difference is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// Only in the anomalous flows (Δa).
    Anomalous,
    /// Only in the normal flows (Δn).
    Normal,
}

impl Side {
    /// `anomalous` or `normal`.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Anomalous => "anomalous",
            Side::Normal => "normal",
        }
    }
}

/// One reduced difference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// Its side.
    pub side: Side,
    /// The path, or the common parent of merged leaves.
    pub path: PathId,
    /// The merged last calls (empty when not merged).
    pub leaves: Vec<PathId>,
    /// First occurrence on its side.
    pub first_t: i64,
    /// Calls in the path (a merged path counts its leaves' level).
    pub len: u32,
    /// Rank by first occurrence within its side, 1 = earliest.
    pub rank_time: u32,
    /// Rank by length within its side, 1 = shortest.
    pub rank_len: u32,
}

impl Difference {
    /// `prog: main→[A,D]` or `prog: main→A→B`.
    pub fn render(&self, t: &PathTable) -> String {
        if self.leaves.is_empty() {
            return t.render(self.path);
        }
        let leaves: Vec<&str> = self.leaves.iter().map(|&l| t.leaf(l)).collect();
        let calls = t.calls(self.path);
        let sep = if calls.is_empty() { "" } else { "→" };
        format!(
            "{}: {calls}{sep}[{}]",
            t.program_of(self.path),
            leaves.join(",")
        )
    }
}

/// What [`diff`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diff {
    /// Paths only in the anomalous flows, before the reductions.
    pub raw_anomalous: usize,
    /// Paths only in the normal flows, before the reductions.
    pub raw_normal: usize,
    /// The reduced differences: Δ''a then Δ''n, each by first occurrence.
    pub differences: Vec<Difference>,
}

/// Paths of a side with their first occurrence.
pub type Coverage = FxHashMap<PathId, i64>;

/// Union of several coverages (earliest first occurrence).
pub fn union<'a>(sides: impl IntoIterator<Item = &'a Coverage>) -> Coverage {
    let mut out = Coverage::default();
    for c in sides {
        for (&p, &t) in c {
            let e = out.entry(p).or_insert(t);
            *e = (*e).min(t);
        }
    }
    out
}

/// Δa = anomalous ∖ normal and Δn = normal ∖ anomalous, pruned, merged and ranked.
pub fn diff(anomalous: &Coverage, normal: &Coverage, paths: &PathTable) -> Diff {
    let only = |a: &Coverage, b: &Coverage| -> Coverage {
        a.iter()
            .filter(|(p, _)| !b.contains_key(p))
            .map(|(&p, &t)| (p, t))
            .collect()
    };
    let da = only(anomalous, normal);
    let dn = only(normal, anomalous);
    let mut differences = reduce(&da, Side::Anomalous, paths);
    differences.extend(reduce(&dn, Side::Normal, paths));
    Diff {
        raw_anomalous: da.len(),
        raw_normal: dn.len(),
        differences,
    }
}

/// Prefix pruning, leaf merging and both rankings of one side.
fn reduce(delta: &Coverage, side: Side, paths: &PathTable) -> Vec<Difference> {
    let set: FxHashSet<PathId> = delta.keys().copied().collect();
    let has_prefix = |p: PathId| {
        let mut q = paths.parent(p);
        while q != NO_PATH {
            if set.contains(&q) {
                return true;
            }
            q = paths.parent(q);
        }
        false
    };
    let kept: Vec<(PathId, i64)> = delta
        .iter()
        .filter(|(p, _)| !has_prefix(**p))
        .map(|(&p, &t)| (p, t))
        .collect();
    // Siblings under one parent (a program's top-level calls included) merge.
    let mut by_parent: FxHashMap<PathId, Vec<(PathId, i64)>> = FxHashMap::default();
    let mut out = Vec::new();
    for (p, t) in kept {
        let parent = paths.parent(p);
        if parent == NO_PATH {
            out.push(single(side, p, t, paths));
        } else {
            by_parent.entry(parent).or_default().push((p, t));
        }
    }
    for (parent, mut kids) in by_parent {
        if kids.len() == 1 {
            out.push(single(side, kids[0].0, kids[0].1, paths));
            continue;
        }
        kids.sort_unstable_by(|a, b| a.1.cmp(&b.1).then(paths.leaf(a.0).cmp(paths.leaf(b.0))));
        out.push(Difference {
            side,
            path: parent,
            first_t: kids[0].1,
            len: paths.len(parent) + 1,
            leaves: kids.into_iter().map(|k| k.0).collect(),
            rank_time: 0,
            rank_len: 0,
        });
    }
    // Deterministic order: first occurrence, then text.
    let text: FxHashMap<PathId, String> = out.iter().map(|d| (d.path, d.render(paths))).collect();
    out.sort_by(|a, b| {
        a.first_t
            .cmp(&b.first_t)
            .then(text[&a.path].cmp(&text[&b.path]))
    });
    for (i, d) in out.iter_mut().enumerate() {
        d.rank_time = i as u32 + 1;
    }
    let mut by_len: Vec<usize> = (0..out.len()).collect();
    by_len.sort_by_key(|&i| (out[i].len, out[i].rank_time));
    for (r, i) in by_len.into_iter().enumerate() {
        out[i].rank_len = r as u32 + 1;
    }
    out
}

fn single(side: Side, p: PathId, t: i64, paths: &PathTable) -> Difference {
    Difference {
        side,
        path: p,
        leaves: Vec::new(),
        first_t: t,
        len: paths.len(p),
        rank_time: 0,
        rank_len: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cov(t: &mut PathTable, paths: &[(&[&str], i64)]) -> Coverage {
        paths
            .iter()
            .map(|(p, ts)| (t.path("job", p), *ts))
            .collect()
    }

    /// Fig. 4: main called A and D only in the anomalous run, A called B and C.
    #[test]
    fn fig4_reduces_to_main_a_d() {
        let mut t = PathTable::default();
        let normal = cov(&mut t, &[(&["main"], 0), (&["main", "E"], 5)]);
        let anomalous = cov(
            &mut t,
            &[
                (&["main"], 0),
                (&["main", "A"], 1),
                (&["main", "A", "B"], 2),
                (&["main", "A", "C"], 3),
                (&["main", "D"], 4),
                (&["main", "E"], 5),
            ],
        );
        let d = diff(&anomalous, &normal, &t);
        assert_eq!((d.raw_anomalous, d.raw_normal), (4, 0));
        assert_eq!(d.differences.len(), 1);
        let x = &d.differences[0];
        assert_eq!(x.render(&t), "job: main→[A,D]");
        assert_eq!((x.side, x.len, x.first_t), (Side::Anomalous, 2, 1));
        // The converse side, and both rankings.
        let d = diff(&normal, &anomalous, &t);
        assert_eq!(d.differences[0].side, Side::Normal);
        // Prefix-closed coverages, as flows give them.
        let mut t2 = PathTable::default();
        let mut closed = |paths: &[(&[&str], i64)]| {
            let mut c = Coverage::default();
            for (p, ts) in paths {
                for k in 1..=p.len() {
                    let id = t2.path("job", &p[..k]);
                    let e = c.entry(id).or_insert(*ts);
                    *e = (*e).min(*ts);
                }
            }
            c
        };
        let a = closed(&[(&["main", "X", "Y", "Z"], 1), (&["main", "Q"], 9)]);
        let n = closed(&[(&["main", "X", "Y"], 0)]);
        let d = diff(&a, &n, &t2);
        let r: Vec<(String, u32, u32)> = d
            .differences
            .iter()
            .map(|x| (x.render(&t2), x.rank_time, x.rank_len))
            .collect();
        assert_eq!(
            r,
            [
                ("job: main→X→Y→Z".to_owned(), 1, 2),
                ("job: main→Q".to_owned(), 2, 1)
            ]
        );
    }
}
