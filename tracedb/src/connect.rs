//! Opening a database, failing fast and clearly: a refused or unreachable PostgreSQL is
//! reported once, within [`CONNECT_TIMEOUT`], with its root cause; a SQLite file (or a
//! PostgreSQL schema) that holds something other than a p5 trace database is refused with
//! "not a p5 database" before anything is written to it or read from it.

use crate::error::{Error, root_cause};
use crate::url::DbUrl;
use std::time::Duration;

/// How long connecting (and, for pools, acquiring a connection) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs a connect future under [`CONNECT_TIMEOUT`], turning any failure into one
/// [`Error::Connect`] naming the root cause.
pub(crate) async fn within<T>(
    url: &DbUrl,
    fut: impl Future<Output = Result<T, sqlx::Error>>,
) -> Result<T, Error> {
    match tokio::time::timeout(CONNECT_TIMEOUT, fut).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) if root_cause(&e).contains("not a database") => Err(Error::NotP5 {
            url: url.to_string(),
            why: root_cause(&e),
        }),
        Ok(Err(e)) => Err(Error::Connect {
            url: url.to_string(),
            reason: missing_file(url).unwrap_or_else(|| root_cause(&e)),
        }),
        Err(_) => Err(Error::Connect {
            url: url.to_string(),
            reason: format!("no answer within {} s", CONNECT_TIMEOUT.as_secs()),
        }),
    }
}

/// For a SQLite URL whose file does not exist, what to say instead of SQLite's "unable to
/// open database file".
fn missing_file(url: &DbUrl) -> Option<String> {
    let DbUrl::Sqlite(s) = url else { return None };
    let path = s
        .strip_prefix("sqlite://")
        .or_else(|| s.strip_prefix("sqlite:"))?;
    let path = path.split('?').next().unwrap_or(path);
    (!path.is_empty() && path != ":memory:" && !std::path::Path::new(path).exists()).then(|| {
        format!(
            "no file {path} (p5 record, or p5 merge STORE --db {}, makes the database)",
            url.as_str()
        )
    })
}

/// What a database holds, from its catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Catalogue {
    /// Tables (of the current schema).
    pub tables: i64,
    /// A `session` table exists.
    pub session: bool,
    /// sqlx's `_sqlx_migrations` exists.
    pub migrations: bool,
}

impl Catalogue {
    /// SQLite's catalogue query.
    pub const SQLITE: &'static str = "SELECT COUNT(*), \
        COALESCE(SUM(CASE WHEN name = 'session' THEN 1 ELSE 0 END), 0), \
        COALESCE(SUM(CASE WHEN name = '_sqlx_migrations' THEN 1 ELSE 0 END), 0) \
        FROM sqlite_master WHERE type = 'table'";
    /// PostgreSQL's (tables visible in the search path's first schema).
    pub const POSTGRES: &'static str = "SELECT COUNT(*)::BIGINT, \
        COALESCE(SUM(CASE WHEN table_name = 'session' THEN 1 ELSE 0 END), 0)::BIGINT, \
        COALESCE(SUM(CASE WHEN table_name = '_sqlx_migrations' THEN 1 ELSE 0 END), 0)::BIGINT \
        FROM information_schema.tables WHERE table_schema = current_schema()";

    /// From the query's three counts.
    pub fn from_counts(c: (i64, i64, i64)) -> Catalogue {
        Catalogue {
            tables: c.0,
            session: c.1 > 0,
            migrations: c.2 > 0,
        }
    }

    /// For reading: the database must hold a merged p5 schema.
    pub fn check_readable(&self, url: &DbUrl) -> Result<(), Error> {
        if self.session && self.migrations {
            return Ok(());
        }
        let why = if self.tables == 0 {
            "it is empty: run `p5 merge STORE --db URL` first".to_owned()
        } else {
            "it has no p5 `session` table and no migration record".to_owned()
        };
        Err(Error::NotP5 {
            url: url.to_string(),
            why,
        })
    }

    /// For writing: empty (the schema is created) or a p5 database (migrated).
    pub fn check_writable(&self, url: &DbUrl, backend: crate::Backend) -> Result<(), Error> {
        let foreign = match backend {
            // A SQLite file is ours or someone else's.
            crate::Backend::Sqlite => self.tables > 0 && !self.migrations,
            // A PostgreSQL schema may hold other tables; a `session` we did not make is not.
            crate::Backend::Postgres => self.session && !self.migrations,
        };
        if foreign {
            return Err(Error::NotP5 {
                url: url.to_string(),
                why: format!(
                    "it holds {} tables but no p5 migration record; refusing to write into it",
                    self.tables
                ),
            });
        }
        Ok(())
    }
}

/// Turns the error of a first query on a file into "not a p5 database" when SQLite says
/// the file is no database at all, and into "damaged" when it says the file is malformed.
pub(crate) fn not_a_database(url: &DbUrl, e: sqlx::Error) -> Error {
    let text = root_cause(&e);
    if text.contains("not a database") {
        Error::NotP5 {
            url: url.to_string(),
            why: text,
        }
    } else if text.contains("malformed") {
        Error::Damaged {
            url: url.to_string(),
            why: text,
        }
    } else {
        Error::Db(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_sqlite_file_says_what_makes_one() {
        let url = DbUrl::parse("sqlite:/nonexistent/p5.sqlite").unwrap();
        let why = missing_file(&url).unwrap();
        assert!(why.contains("no file /nonexistent/p5.sqlite"), "{why}");
        assert!(why.contains("p5 merge"), "{why}");
        let here =
            DbUrl::parse(&format!("sqlite:{}/Cargo.toml", env!("CARGO_MANIFEST_DIR"))).unwrap();
        assert_eq!(missing_file(&here), None, "the file exists");
        assert_eq!(
            missing_file(&DbUrl::parse("sqlite::memory:").unwrap()),
            None
        );
    }
}
