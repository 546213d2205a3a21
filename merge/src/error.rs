//! Errors of the merge library. Damage in the input is not an error (it becomes a
//! diagnostic row); these are the failures that stop a merge.

use std::path::PathBuf;

/// A failed merge.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the store failed (I/O, not damage).
    #[error("reading the store: {0}")]
    Store(#[from] p5_logserver::Error),
    /// The database failed.
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    /// Applying the schema failed.
    #[error("applying the schema: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A `--db` value that is neither `sqlite:` nor `postgres://`.
    #[error("unsupported database url {0:?} (use sqlite:PATH or postgres://…)")]
    Url(String),
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
    /// The database task is gone.
    #[error("the database writer stopped")]
    WriterStopped,
    /// The database task panicked or was cancelled.
    #[error("database writer task: {0}")]
    Task(String),
    /// The named session is not in the store.
    #[error("no session {0:?} in the store")]
    NoSession(String),
}
