//! Linking as a [`job`](crate::job) runs it: its parameters checked, the run, and the lines
//! the front end prints about it.

use super::{Counts, Params, linking_owned};
use crate::job::Analysis;
use crate::pattern::AnalysisResult;
use crate::progress::Progress;
use crate::{Error, Result, Trace};

/// Linking with its parameters.
#[derive(Debug, Clone, Copy, Default)]
pub struct Linking(pub Params);

impl Params {
    /// Refuses parameters outside their ranges (as usage errors naming the option).
    pub fn validate(&self) -> Result<()> {
        if self.window <= 0 {
            return Err(Error::Usage("--window must be positive".into()));
        }
        if !self.spontaneous_y.is_finite() || self.spontaneous_y <= 0.0 {
            return Err(Error::Usage(format!(
                "--spontaneous-y {}: must be positive",
                self.spontaneous_y
            )));
        }
        if !(0.0..=1.0).contains(&self.min_prob) {
            return Err(Error::Usage(format!(
                "--min-prob {}: between 0 and 1",
                self.min_prob
            )));
        }
        if self.max_try_both > 24 {
            return Err(Error::Usage(format!(
                "--max-try-both {}: at most 24 (each one doubles a root's instances)",
                self.max_try_both
            )));
        }
        let (lo, hi) = self.try_both;
        if !(0.0..=1.0).contains(&lo) || !(lo..=1.0).contains(&hi) {
            return Err(Error::Usage(format!(
                "--try-both {lo}..{hi}: LOW..HIGH, 0 ≤ LOW ≤ HIGH ≤ 1"
            )));
        }
        if self.max_messages == 0 || self.fixed_port_peers == 0 {
            return Err(Error::Usage(
                "--max-messages and --fixed-port-peers must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

impl Analysis for Linking {
    type Output = (AnalysisResult, Counts);

    fn run(&self, trace: Trace, progress: &mut dyn FnMut(Progress)) -> Result<Self::Output> {
        self.0.validate()?;
        Ok(linking_owned(trace, &self.0, progress))
    }

    fn result<'o>(&self, out: &'o Self::Output) -> &'o AnalysisResult {
        &out.0
    }

    fn pairs_calls(&self) -> bool {
        true
    }
}

impl Counts {
    /// What the front end prints about a run of input `name` that found `patterns`;
    /// `delays` adds step 1's mean delay of every edge.
    pub fn summary(&self, name: &str, patterns: usize, delays: bool) -> Vec<String> {
        let t = &self.trees;
        let mut lines = vec![format!(
            "{name}: {} messages ({} pieces merged), links: {} probably-true, {} try-both, {} \
             probably-false; {} roots, {} instances ({} roots used up their try-both links, {} \
             branches below --min-prob, {} that could cause no next step), {patterns} patterns",
            self.messages,
            self.coalesced,
            self.true_links,
            self.try_both_links,
            self.false_links,
            t.roots,
            t.instances,
            t.capped,
            t.pruned,
            t.dead_ends,
        )];
        lines.extend(self.threads.map(|t| t.summary(name)));
        if !self.untraced.is_empty() {
            lines.push(format!(
                "untraced (timed by their peers; only A→B→A causality): {}",
                self.untraced.join(", ")
            ));
        }
        if delays {
            lines.push("mean delay before each edge's messages (step 1):".into());
            for e in &self.edges {
                let mean = e
                    .mean_ns
                    .map_or("spontaneous".to_owned(), |d| format!("{:.3} ms", d / 1e6));
                lines.push(format!(
                    "  {} → {}: {} ({} of {} messages had a cause within the window)",
                    e.from, e.to, mean, e.caused, e.messages
                ));
            }
        }
        lines
    }
}
