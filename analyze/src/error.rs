//! The library's error type. Bad *records* inside an input are not errors — readers skip
//! them and count them in a [`crate::ReadReport`]; an [`Error`] is what stops a command: a
//! file that cannot be opened, a configuration that does not parse, a result file that is
//! not JSON.

use std::path::PathBuf;

/// What stopped an analysis command.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file failed. (The cause is in the message, not a `source`: the
    /// umbrella binary prints the chain, which would say it twice.)
    #[error("{}: {cause}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        cause: std::io::Error,
    },
    /// Writing to standard output or another stream failed.
    #[error("writing output: {0}")]
    Write(#[from] std::io::Error),
    /// A JSON file (a result, a ground truth) did not parse.
    #[error("{}: not a p5 analyze result: {cause}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The cause (in the message, as for [`Error::Io`]).
        cause: serde_json::Error,
    },
    /// A generator configuration is not valid.
    #[error("{}: {message}", path.display())]
    Config {
        /// The configuration file (empty for an inline configuration).
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The trace database refused or failed (its message names the URL and the cause; its
    /// own, so a report that prints the chain says it once).
    #[error(transparent)]
    Db(#[from] p5_tracedb::Error),
    /// A command-line value is not valid.
    #[error("{0}")]
    Usage(String),
    /// The input holds nothing the analysis can use (no messages; calls without a return).
    #[error("{0}")]
    Empty(String),
}

impl Error {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            cause: source,
        }
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_error_is_said_once_in_the_chain() {
        let e = Error::from(p5_tracedb::Error::Connect {
            url: "sqlite:x".into(),
            reason: "unable to open database file".into(),
        });
        let mut chain = e.to_string();
        let mut at: Option<&dyn std::error::Error> = std::error::Error::source(&e);
        while let Some(s) = at {
            chain += &format!(": {s}");
            at = s.source();
        }
        assert_eq!(chain.matches("cannot connect").count(), 1, "{chain}");
    }
}
