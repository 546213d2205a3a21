//! The errors of the trace database: a bad URL, a server that cannot be reached, a file that
//! is not a p5 database, and the driver's errors.

/// A failed database operation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A URL that is neither `sqlite:` nor `postgres://`.
    #[error("unsupported database url {0:?} (use {forms})", forms = crate::url::FORMS)]
    Url(String),
    /// The database could not be reached or opened (reported once, with the root cause).
    #[error("cannot connect to {url}: {reason}")]
    Connect {
        /// The URL, without password.
        url: String,
        /// The root cause.
        reason: String,
    },
    /// The file or schema holds no p5 trace database.
    #[error("{url} is not a p5 database ({why})")]
    NotP5 {
        /// The URL, without password.
        url: String,
        /// What is missing.
        why: String,
    },
    /// A query failed.
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    /// SQLite refused a bulk insert (prepared statements on the raw handle).
    #[error("sqlite: {0}")]
    Sqlite(String),
    /// Applying the migrations failed.
    #[error("applying the schema: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A stored value this version does not know (e.g. a `path_node.kind`).
    #[error("{table}.{column} holds {value:?}, which this version of p5 does not know")]
    Invalid {
        /// Table.
        table: &'static str,
        /// Column.
        column: &'static str,
        /// The value.
        value: String,
    },
    /// The database task is gone.
    #[error("the database writer stopped")]
    WriterStopped,
    /// The database task panicked or was cancelled.
    #[error("database writer task: {0}")]
    Task(String),
}

/// The innermost message of an error chain (sqlx nests I/O errors), for one-line reports.
pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}
