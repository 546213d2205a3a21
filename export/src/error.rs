//! The errors of an export: each is one line saying what went wrong and, where the user can
//! do something, what.

/// A failed export.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database could not be read (a damaged file, a server gone), with what was read.
    #[error("reading {what}: {source}")]
    Db {
        /// What was being read.
        what: String,
        /// The database error.
        source: p5_tracedb::Error,
    },
    /// No session of that name.
    #[error("no session {name:?} in the database (sessions: {known})")]
    NoSession {
        /// The name asked for.
        name: String,
        /// The names there are, comma-separated (or `none`).
        known: String,
    },
    /// The session holds nothing to export.
    #[error(
        "session {0:?} has no events, states or messages: nothing to export (merge its store again?)"
    )]
    Empty(String),
    /// Writing the trace failed.
    #[error("writing the trace: {0}")]
    Io(#[from] std::io::Error),
    /// The writing thread stopped (its error is reported instead when known).
    #[error("writing the trace: the writer stopped")]
    WriterGone,
}

/// Adds what was being read to a database error.
pub(crate) trait Context<T> {
    /// `what` was being read.
    fn reading(self, what: impl FnOnce() -> String) -> Result<T, Error>;
}

impl<T> Context<T> for Result<T, p5_tracedb::Error> {
    fn reading(self, what: impl FnOnce() -> String) -> Result<T, Error> {
        self.map_err(|source| Error::Db {
            what: what(),
            source,
        })
    }
}
