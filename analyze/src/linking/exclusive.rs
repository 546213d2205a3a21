//! Exclusivity (ours, `--exclusive N`): a message rarely causes two messages on one edge.
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

/// Rounds of balancing.
pub const ROUNDS: u32 = 5;

/// Balances `w` for `rounds` rounds; `to` gives each message's (aggregated) receiver.
pub fn balance(w: &mut Weighed, to: &[u32], rounds: u32) {
    let n = w.spont.len();
    let links = w.parent.len();
    // The links by parent: (parent, child edge, link), sorted.
    let mut by_parent: Vec<(u32, u32, u32)> = Vec::with_capacity(links);
    for (i, &to) in to.iter().enumerate().take(n) {
        for l in w.off[i] as usize..w.off[i + 1] as usize {
            by_parent.push((w.parent[l], to, l as u32));
        }
    }
    by_parent.sort_unstable();
    let mut p = vec![0f64; links];
    for _ in 0..rounds {
        for i in 0..n {
            let r = w.off[i] as usize..w.off[i + 1] as usize;
            let total = w.spont[i] + w.w[r.clone()].iter().sum::<f64>();
            for l in r {
                p[l] = w.w[l] / total;
            }
        }
        for run in by_parent.chunk_by(|a, b| a.0 == b.0 && a.1 == b.1) {
            let sum: f64 = run.iter().map(|&(_, _, l)| p[l as usize]).sum();
            if sum > 1.0 {
                for &(_, _, l) in run {
                    w.w[l as usize] /= sum;
                }
            }
        }
    }
}
