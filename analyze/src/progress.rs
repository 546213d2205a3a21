//! What a long operation reports to whoever draws progress.
//!
//! The library never draws: readers, algorithms and the database edge call a
//! `&mut dyn FnMut(Progress)` the front end passes down (the `p5` binary turns it into a
//! spinner; tests pass `&mut |_| {}`).

/// One progress report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// A phase begins, with its total if known.
    Phase(&'static str, Option<u64>),
    /// Position within the phase.
    At(u64),
    /// The operation is over.
    Done,
}

/// A progress callback that ignores every report.
pub fn ignore(_: Progress) {}
