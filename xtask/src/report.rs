//! The report table: one row per figure, measured against its budget or baseline.

use std::fmt::Write as _;

/// Which way a figure is good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    /// Smaller is better: pass when `measured ≤ budget`.
    Lower,
    /// Larger is better: pass when `measured ≥ budget`.
    Higher,
}

/// One figure.
#[derive(Debug, Clone)]
pub struct Row {
    pub figure: String,
    /// The measured value, or why there is none.
    pub measured: Result<f64, String>,
    pub budget: f64,
    pub unit: &'static str,
    pub better: Better,
    /// What was measured (input size, the figures beside the one compared) and any note.
    pub note: String,
    /// The command that measured it, as a user would type it.
    pub command: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail,
    NotAvailable,
}

impl Row {
    pub fn new(figure: impl Into<String>, budget: f64, unit: &'static str, better: Better) -> Row {
        Row {
            figure: figure.into(),
            measured: Err("not measured".into()),
            budget,
            unit,
            better,
            note: String::new(),
            command: String::new(),
        }
    }

    pub fn command(mut self, c: impl Into<String>) -> Row {
        self.command = c.into();
        self
    }

    pub fn measured(mut self, v: Result<f64, String>) -> Row {
        self.measured = v;
        self
    }

    pub fn note(mut self, n: impl Into<String>) -> Row {
        self.note = n.into();
        self
    }

    /// `≤ 1.30 × rdtsc`.
    pub fn budget_text(&self) -> String {
        let dir = match self.better {
            Better::Lower => "≤",
            Better::Higher => "≥",
        };
        format!("{dir} {} {}", num(self.budget), self.unit)
    }

    /// Measured ÷ budget.
    pub fn ratio(&self) -> Option<f64> {
        let m = *self.measured.as_ref().ok()?;
        (self.budget != 0.0).then(|| m / self.budget)
    }

    pub fn verdict(&self) -> Verdict {
        match (&self.measured, self.better) {
            (Err(_), _) => Verdict::NotAvailable,
            (Ok(m), Better::Lower) if *m <= self.budget => Verdict::Pass,
            (Ok(m), Better::Higher) if *m >= self.budget => Verdict::Pass,
            _ => Verdict::Fail,
        }
    }
}

pub fn num(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Renders the rows as a fixed-width table, reasons for `n/a` rows below it.
pub fn render(rows: &[Row]) -> String {
    let mut o = String::new();
    let w = rows
        .iter()
        .map(|r| r.figure.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let _ = writeln!(
        o,
        "\n{:<w$}  {:>16}  {:>18}  {:>7}  {:<4}  baseline / note",
        "figure", "measured", "budget", "ratio", "ok"
    );
    let _ = writeln!(o, "{}", "-".repeat(w + 16 + 18 + 7 + 4 + 26));
    let mut reasons = Vec::new();
    for r in rows {
        let measured = match &r.measured {
            Ok(v) => format!("{} {}", num(*v), r.unit),
            Err(why) => {
                reasons.push(format!("{}: {why}", r.figure));
                "n/a".to_owned()
            }
        };
        let budget = r.budget_text();
        let ratio = r.ratio().map_or("-".to_owned(), |x| format!("{x:.2}×"));
        let ok = match r.verdict() {
            Verdict::Pass => "pass",
            Verdict::Fail => "FAIL",
            Verdict::NotAvailable => "n/a",
        };
        let _ = writeln!(
            o,
            "{:<w$}  {:>16}  {:>18}  {:>7}  {:<4}  {}",
            r.figure, measured, budget, ratio, ok, r.note
        );
    }
    if !reasons.is_empty() {
        let _ = writeln!(o, "\nnot available:");
        for r in reasons {
            let _ = writeln!(o, "  {r}");
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_follow_the_direction_and_missing_values_are_na() {
        let lower = Row::new("x", 1.3, "×", Better::Lower);
        assert_eq!(lower.clone().measured(Ok(1.0)).verdict(), Verdict::Pass);
        assert_eq!(lower.clone().measured(Ok(1.4)).verdict(), Verdict::Fail);
        let higher = Row::new("y", 20.0, "M/s", Better::Higher);
        assert_eq!(higher.clone().measured(Ok(25.0)).verdict(), Verdict::Pass);
        assert_eq!(higher.clone().measured(Ok(5.0)).verdict(), Verdict::Fail);
        let na = higher.measured(Err("no gcc".into()));
        assert_eq!(na.verdict(), Verdict::NotAvailable);
        let t = render(&[na, lower.measured(Ok(1.04))]);
        assert!(
            t.contains("n/a") && t.contains("no gcc") && t.contains("0.80×"),
            "{t}"
        );
    }
}
