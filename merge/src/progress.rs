//! Progress reporting: the library says where a merge is, a binary draws it (the `p5` binary
//! draws an indicatif bar; tests and other stages pass [`Silent`]).

/// Receives a merge's progress. Positions are bytes of the store: the first pass runs up to
/// the segments' length, the second pass up to twice that.
pub trait Progress: Send + Sync {
    /// A new phase of session `session` (`scanning`, `matching`, `writing`, `events`,
    /// `indexing`, `done`).
    fn phase(&self, session: &str, phase: &str) {
        let _ = (session, phase);
    }
    /// The total (bytes × 2).
    fn length(&self, total: u64) {
        let _ = total;
    }
    /// Bytes done so far.
    fn position(&self, done: u64) {
        let _ = done;
    }
}

/// Reports nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {}
