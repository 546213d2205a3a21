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
    /// SQLite reports the file damaged ("database disk image is malformed").
    #[error(
        "{url} is damaged ({why}): re-merge the session from its store (p5 merge STORE --db URL) or restore the file from a copy"
    )]
    Damaged {
        /// The URL, without password.
        url: String,
        /// What SQLite said.
        why: String,
    },
    /// A query failed. The driver's error is in the message, not a `source()` as well: sqlx's
    /// own messages already include their causes, so a report that prints the chain (`{:#}`)
    /// would repeat each one ("database disk image is malformed" three times in one line).
    #[error("database: {0}")]
    Db(sqlx::Error),
    /// SQLite refused a bulk insert (prepared statements on the raw handle).
    #[error("sqlite: {0}")]
    Sqlite(String),
    /// Applying the migrations failed (the cause in the message only, as for [`Error::Db`]).
    #[error("applying the schema: {0}")]
    Migrate(sqlx::migrate::MigrateError),
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

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Error {
        Error::Db(e)
    }
}

impl From<sqlx::migrate::MigrateError> for Error {
    fn from(e: sqlx::migrate::MigrateError) -> Error {
        Error::Migrate(e)
    }
}

/// The innermost message of an error chain (sqlx nests I/O errors), for one-line reports.
pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

#[cfg(test)]
mod tests {
    use super::Error;

    /// Every message of an error's chain, as `{:#}` prints it.
    fn chain(e: &(dyn std::error::Error + 'static)) -> String {
        let mut out = e.to_string();
        let mut cur = e.source();
        while let Some(c) = cur {
            out = format!("{out}: {c}");
            cur = c.source();
        }
        out
    }

    #[test]
    fn a_driver_error_is_reported_once() {
        let e = Error::from(sqlx::Error::Io(std::io::Error::other(
            "disk image is malformed",
        )));
        let text = chain(&e);
        assert_eq!(text.matches("malformed").count(), 1, "{text}");
    }
}
