//! What a reader skipped: bad input is counted and reported with where it was, never a panic.

use std::collections::BTreeMap;
use std::fmt;

/// How many problems a report keeps with their position (the rest are only counted).
pub const KEPT_PROBLEMS: usize = 20;

/// One skipped piece of input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file (as given by the user).
    pub file: String,
    /// Line number (text) or packet number (captures), 1-based.
    pub position: u64,
    /// What kind of problem (a short fixed phrase, also the key of [`ReadReport::counts`]).
    pub kind: &'static str,
    /// Details.
    pub detail: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.position, self.kind)?;
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// Counts of everything a reader skipped or noticed, by kind, with the first
/// [`KEPT_PROBLEMS`] problems kept in full.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadReport {
    /// Problems by kind.
    pub counts: BTreeMap<&'static str, u64>,
    /// The first problems, in input order.
    pub first: Vec<Problem>,
    /// Records read (lines, packets).
    pub records: u64,
}

impl ReadReport {
    /// Counts a problem of `kind` at `file:position`.
    pub fn problem(&mut self, file: &str, position: u64, kind: &'static str, detail: String) {
        *self.counts.entry(kind).or_insert(0) += 1;
        if self.first.len() < KEPT_PROBLEMS {
            self.first.push(Problem {
                file: file.to_owned(),
                position,
                kind,
                detail,
            });
        }
    }

    /// Counts something noticed that is not an error (a capture gap, a retransmission).
    pub fn note(&mut self, kind: &'static str, n: u64) {
        *self.counts.entry(kind).or_insert(0) += n;
    }

    /// How many of `kind`.
    pub fn count(&self, kind: &str) -> u64 {
        self.counts.get(kind).copied().unwrap_or(0)
    }

    /// Adds another report's counts and problems (several files of one input).
    pub fn absorb(&mut self, other: ReadReport) {
        self.records += other.records;
        for (k, n) in other.counts {
            *self.counts.entry(k).or_insert(0) += n;
        }
        let room = KEPT_PROBLEMS.saturating_sub(self.first.len());
        self.first.extend(other.first.into_iter().take(room));
    }
}

impl fmt::Display for ReadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} records read", self.records)?;
        for (k, n) in &self.counts {
            write!(f, ", {n} {k}")?;
        }
        for p in &self.first {
            write!(f, "\n  {p}")?;
        }
        let total: u64 = self.counts.values().sum();
        if total > self.first.len() as u64 && !self.first.is_empty() {
            write!(f, "\n  … (only the first {} are listed)", self.first.len())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_and_counts_all() {
        let mut r = ReadReport::default();
        for i in 0..30 {
            r.problem("t.p5t", i + 1, "garbage line", String::new());
        }
        assert_eq!(r.count("garbage line"), 30);
        assert_eq!(r.first.len(), KEPT_PROBLEMS);
        assert!(r.to_string().contains("t.p5t:1: garbage line"));
    }
}
