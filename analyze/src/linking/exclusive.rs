//! Exclusivity (ours, `--exclusive true`): a message rarely causes two messages to one
//! receiver, and a return that came back causes one next step, wherever it goes.
//!
//! Step 2 weighs each child's candidates on their own, so under parallelism a parent is
//! everybody's likely cause: a request into a web server is the likely parent of its own
//! database call and of the neighbours' calls 10 ms before and after it. Each round here
//! normalises every child's weights into probabilities (spontaneity included) and, where a
//! parent's probabilities towards the children of one edge (B→C) sum to more than one,
//! scales those weights down by the sum — a Sinkhorn balancing with a cap instead of an
//! equality, since a parent may cause no child on an edge. Children that lose a parent's
//! share move it to their other candidates or to spontaneity in the next normalisation.

use super::gallop::last_at_most;
use super::links::Weighed;

/// Rounds of balancing before the links are classified.
pub const ROUNDS: u32 = 3;

/// Rounds of balancing before each refit of the empirical kernel (the refit and the next
/// round go on from where this one left).
pub const REFIT_ROUNDS: u32 = 2;

/// The links of a [`Weighed`] grouped by (parent, child's receiver), built once.
#[derive(Debug)]
pub struct Balancer {
    /// Link indices, grouped.
    links: Vec<u32>,
    /// Group boundaries in `links`.
    groups: Vec<u32>,
}

impl Balancer {
    /// Groups `w`'s links; `to` gives each message's (aggregated) receiver, `whole` whether
    /// its children are one group whatever their receivers (a return: it causes one next
    /// step).
    pub fn new(w: &Weighed, to: &[u32], whole: &[bool]) -> Balancer {
        let n = w.spont.len();
        // Links by parent (a counting sort, not a sort of triples), then each parent's by
        // group.
        let mut start = vec![0u32; n + 1];
        for &parent in &w.parent {
            start[parent as usize + 1] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut links = vec![0u32; w.parent.len()];
        for l in 0..w.parent.len() {
            let slot = &mut fill[w.parent[l] as usize];
            links[*slot as usize] = l as u32;
            *slot += 1;
        }
        drop(fill);
        // Each parent's links by group, groups of two or more kept, compacted in place. A
        // parent's links are in link order, so their children are found by galloping
        // forward from the previous one's, not by a search of all children each.
        let mut groups = vec![0u32];
        let mut kept = 0;
        let mut keyed: Vec<(u32, u32)> = Vec::new();
        for parent in 0..n {
            let (a, b) = (start[parent] as usize, start[parent + 1] as usize);
            if b - a < 2 {
                continue;
            }
            keyed.clear();
            let mut child = 0;
            for &l in &links[a..b] {
                // The child whose links hold link `l`.
                child = last_at_most(&w.off, l, child);
                let g = if whole[parent] {
                    u32::MAX
                } else {
                    to.get(child).copied().unwrap_or(u32::MAX)
                };
                keyed.push((g, l));
            }
            keyed.sort_unstable();
            let mut x = 0;
            while x < keyed.len() {
                let mut y = x + 1;
                while y < keyed.len() && keyed[y].0 == keyed[x].0 {
                    y += 1;
                }
                // Only groups of two or more can sum to more than one.
                if y - x > 1 {
                    for (slot, &(_, l)) in links[kept..kept + y - x].iter_mut().zip(&keyed[x..y]) {
                        *slot = l;
                    }
                    kept += y - x;
                    groups.push(kept as u32);
                }
                x = y;
            }
        }
        links.truncate(kept);
        links.shrink_to_fit();
        Balancer { links, groups }
    }

    /// Balances `w` for `rounds` rounds.
    pub fn balance(&self, w: &mut Weighed, rounds: u32) {
        let mut p = vec![0f32; w.parent.len()];
        for _ in 0..rounds {
            w.posteriors(&mut p);
            for g in self.groups.windows(2) {
                let run = &self.links[g[0] as usize..g[1] as usize];
                let sum: f64 = run.iter().map(|&l| f64::from(p[l as usize])).sum();
                if sum > 1.0 {
                    for &l in run {
                        w.w[l as usize] = (f64::from(w.w[l as usize]) / sum) as f32;
                    }
                }
            }
        }
    }
}
