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

use super::links::Weighed;

/// Rounds of balancing per call.
pub const ROUNDS: u32 = 3;

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
        let mut by_parent: Vec<(u32, u32, u32)> = Vec::with_capacity(w.parent.len());
        for (i, &to) in to.iter().enumerate().take(n) {
            for l in w.off[i] as usize..w.off[i + 1] as usize {
                let parent = w.parent[l];
                let group = if whole[parent as usize] { u32::MAX } else { to };
                by_parent.push((parent, group, l as u32));
            }
        }
        by_parent.sort_unstable();
        let mut groups = vec![0u32];
        let mut links = Vec::with_capacity(by_parent.len());
        for run in by_parent.chunk_by(|a, b| a.0 == b.0 && a.1 == b.1) {
            links.extend(run.iter().map(|x| x.2));
            // Only groups of two or more can sum to more than one.
            if run.len() > 1 {
                groups.push(links.len() as u32);
            } else {
                links.pop();
            }
        }
        Balancer { links, groups }
    }

    /// Balances `w` for `rounds` rounds.
    pub fn balance(&self, w: &mut Weighed, rounds: u32) {
        let mut p = vec![0f64; w.parent.len()];
        for _ in 0..rounds {
            w.posteriors(&mut p);
            for g in self.groups.windows(2) {
                let run = &self.links[g[0] as usize..g[1] as usize];
                let sum: f64 = run.iter().map(|&l| p[l as usize]).sum();
                if sum > 1.0 {
                    for &l in run {
                        w.w[l as usize] /= sum;
                    }
                }
            }
        }
    }
}
