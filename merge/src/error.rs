//! Errors of the merge library. Damage in the input is not an error (it becomes a
//! diagnostic row); these are the failures that stop a merge.

use std::path::PathBuf;

/// A failed merge.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the store failed (I/O, not damage).
    #[error("reading the store: {0}")]
    Store(#[from] p5_logserver::Error),
    /// The database failed (connecting, migrating, writing).
    #[error(transparent)]
    Db(#[from] p5_tracedb::Error),
    /// A manifest directory could not be read.
    #[error("reading manifest {path}: {source}")]
    Manifest {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A manifest file is not valid JSON of the expected shape.
    #[error("parsing manifest {path}: {source}")]
    ManifestJson {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
    /// The named session is not in the store.
    #[error("no session {0:?} in the store")]
    NoSession(String),
    /// The directory holds no session.
    #[error(
        "{0} holds no p5 session (a session store has one directory of `*.p5seg` segments per \
         session, as written by `p5 logserver` or `p5 record`)"
    )]
    NoStore(PathBuf),
}
