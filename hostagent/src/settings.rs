//! What an agent records: the sampling interval, the metric selection and whether it is
//! recording at all. `hostagent ctl set|start|stop` changes these across the tree.
//!
//! *Automatic mode* (no `metrics=` patterns, or `metrics=all`) records every metric;
//! *interactive mode* records the metrics whose names match one of the glob patterns
//! (`cpu.*`, `net.eth0.*`, `proc.*`).

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

/// Default sampling interval while recording.
pub const DEFAULT_INTERVAL_MS: u64 = 100;
/// Shortest accepted interval.
pub const MIN_INTERVAL_MS: u64 = 10;
/// Longest accepted interval.
pub const MAX_INTERVAL_MS: u64 = 3_600_000;

/// Bad settings (from the command line or a control request).
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// Interval out of range.
    #[error("interval must be {MIN_INTERVAL_MS}..={MAX_INTERVAL_MS} ms, not {0} ms")]
    Interval(u64),
    /// A pattern does not parse.
    #[error("bad metric pattern {pattern:?}: {reason}")]
    Pattern {
        /// The pattern.
        pattern: String,
        /// Why.
        reason: String,
    },
}

/// The recording settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// Sampling interval, ms.
    pub interval_ms: u64,
    /// Metric name globs; empty = automatic mode (everything).
    pub metrics: Vec<String>,
    /// False after `stop`: the agent stays in the tree but takes no samples.
    pub recording: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            interval_ms: DEFAULT_INTERVAL_MS,
            metrics: Vec::new(),
            recording: true,
        }
    }
}

impl Settings {
    /// Checks the interval and compiles the patterns.
    pub fn validate(&self) -> Result<Selection, SettingsError> {
        if !(MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(&self.interval_ms) {
            return Err(SettingsError::Interval(self.interval_ms));
        }
        Selection::new(&self.metrics)
    }
}

/// A compiled metric selection.
#[derive(Debug, Clone)]
pub struct Selection {
    set: Option<GlobSet>,
    /// Literal prefixes of the patterns (up to the first glob metacharacter).
    prefixes: Vec<String>,
}

impl Selection {
    /// Everything (automatic mode).
    pub fn all() -> Self {
        Self {
            set: None,
            prefixes: Vec::new(),
        }
    }

    /// Compiles patterns; none (or `all`, `*`) selects everything.
    pub fn new(patterns: &[String]) -> Result<Self, SettingsError> {
        if patterns.is_empty() || patterns.iter().any(|p| p == "all" || p == "*") {
            return Ok(Self::all());
        }
        let mut b = GlobSetBuilder::new();
        for p in patterns {
            let g = Glob::new(p).map_err(|e| SettingsError::Pattern {
                pattern: p.clone(),
                reason: e.kind().to_string(),
            })?;
            b.add(g);
        }
        let set = b.build().map_err(|e| SettingsError::Pattern {
            pattern: patterns.join(","),
            reason: e.to_string(),
        })?;
        let prefixes = patterns
            .iter()
            .map(|p| {
                p.split(['*', '?', '[', '{', '\\'])
                    .next()
                    .unwrap_or("")
                    .to_owned()
            })
            .collect();
        Ok(Self {
            set: Some(set),
            prefixes,
        })
    }

    /// True in automatic mode.
    pub fn is_all(&self) -> bool {
        self.set.is_none()
    }

    /// Whether a metric is recorded.
    pub fn wants(&self, name: &str) -> bool {
        self.set.as_ref().is_none_or(|s| s.is_match(name))
    }

    /// Whether any metric of a group (`cpu`, `net`, ...) could be recorded, to skip reading
    /// files nobody asked for.
    pub fn wants_group(&self, group: &str) -> bool {
        if self.set.is_none() {
            return true;
        }
        let g = format!("{group}.");
        self.prefixes
            .iter()
            .any(|p| p.starts_with(&g) || g.starts_with(p.as_str()))
    }
}

/// Splits a comma-separated pattern list (`cpu.*,mem.*`).
pub fn split_patterns(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn automatic_and_interactive() {
        let all = Settings::default().validate().unwrap();
        assert!(all.is_all() && all.wants("anything"));
        let s = Settings {
            metrics: split_patterns("cpu.*, net.eth0.*"),
            ..Settings::default()
        };
        let sel = s.validate().unwrap();
        assert!(sel.wants("cpu.total.busy"));
        assert!(sel.wants("net.eth0.rx_bytes_total"));
        assert!(!sel.wants("mem.used"));
        assert!(sel.wants_group("cpu") && sel.wants_group("net"));
        assert!(!sel.wants_group("irq"));
    }

    #[test]
    fn bad_settings_are_errors() {
        let s = Settings {
            interval_ms: 1,
            ..Settings::default()
        };
        assert!(matches!(s.validate(), Err(SettingsError::Interval(1))));
        let s = Settings {
            metrics: vec!["cpu.[".into()],
            ..Settings::default()
        };
        assert!(s.validate().unwrap_err().to_string().contains("cpu.["));
    }
}
