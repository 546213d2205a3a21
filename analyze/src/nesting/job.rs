//! Nesting as a [`job`](crate::job) runs it: its parameters checked, the run, and the lines
//! the front end prints about it.

use super::{Counts, Params, nesting_owned};
use crate::job::Analysis;
use crate::pattern::AnalysisResult;
use crate::progress::Progress;
use crate::{Error, Result, Trace};

/// Nesting with its parameters.
#[derive(Debug, Clone, Copy, Default)]
pub struct Nesting(pub Params);

impl Params {
    /// Refuses parameters outside their ranges (as usage errors naming the option).
    pub fn validate(&self) -> Result<()> {
        let p = &self.penalties;
        for (name, v) in [
            ("overlap", p.overlap),
            ("same", p.same),
            ("generic", p.generic),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(Error::Usage(format!("--{name} {v}: must be 0 or more")));
            }
        }
        if !self.root_below.is_finite() || !(0.0..=1.0).contains(&self.root_below) {
            return Err(Error::Usage(format!(
                "--root-below {}: a share from 0 to 1",
                self.root_below
            )));
        }
        if !self.smooth.is_finite() || !(0.0..=100.0).contains(&self.smooth) {
            return Err(Error::Usage(format!(
                "--smooth {}: 0 to 100 bins",
                self.smooth
            )));
        }
        if self.window < 0 {
            return Err(Error::Usage("--skew-window must not be negative".into()));
        }
        Ok(())
    }
}

impl Analysis for Nesting {
    type Output = (AnalysisResult, Counts);

    fn run(&self, trace: Trace, progress: &mut dyn FnMut(Progress)) -> Result<Self::Output> {
        self.0.validate()?;
        progress(Progress::Phase("nesting", None));
        Ok(nesting_owned(trace, &self.0))
    }

    fn result<'o>(&self, out: &'o Self::Output) -> &'o AnalysisResult {
        &out.0
    }

    fn pairs_calls(&self) -> bool {
        true
    }
}

impl Counts {
    /// What the front end prints about a run of input `name` that found `patterns`.
    pub fn summary(&self, name: &str, patterns: usize) -> Vec<String> {
        let mut lines = Vec::new();
        lines.extend(self.threads.map(|t| t.summary(name)));
        if self.reversed > 0 {
            lines.push(format!(
                "{name}: {} returns seemed to leave before their call arrived (by more than \
                 the skew window): paired by call id; the clocks that stamped them disagree \
                 (see --skew-window)",
                self.reversed
            ));
        }
        lines.push(format!(
            "{name}: {} call pairs ({} nested, {} roots), {} calls and {} returns unmatched \
             ({} and {} kept, their lost half estimated), {} children moved where their \
             parent's number of children was rare, {patterns} patterns",
            self.pairs,
            self.nested,
            self.pairs - self.nested,
            self.unmatched_calls,
            self.unmatched_rets,
            self.repaired.calls,
            self.repaired.rets,
            self.rebalanced,
        ));
        lines
    }
}
