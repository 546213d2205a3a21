//! [`DbUrl`]: the one parser of database URLs. `sqlite:PATH` (also `sqlite://PATH`, and
//! sqlx's `?mode=…` options) or `postgres://…` / `postgresql://…`; anything else is an error
//! that names the accepted forms.

use crate::error::Error;
use std::fmt;
use std::str::FromStr;

/// The accepted forms, for error messages.
pub const FORMS: &str = "sqlite:PATH or postgres://USER@HOST[:PORT]/DB";

/// A parsed database URL.
#[derive(Clone, PartialEq, Eq)]
pub enum DbUrl {
    /// A SQLite file: the URL as given (`sqlite:PATH`), passed to sqlx unchanged.
    Sqlite(String),
    /// A PostgreSQL server: the URL as given.
    Postgres(String),
}

impl DbUrl {
    /// Parses a URL.
    pub fn parse(url: &str) -> Result<DbUrl, Error> {
        let url = url.trim();
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            if url.len() <= "postgresql://".len() && !url.contains('@') && url.ends_with("//") {
                return Err(Error::Url(url.to_owned()));
            }
            Ok(DbUrl::Postgres(url.to_owned()))
        } else if let Some(path) = url.strip_prefix("sqlite:") {
            let path = path.trim_start_matches("//");
            let file = path.split('?').next().unwrap_or("");
            if file.is_empty() {
                return Err(Error::Url(url.to_owned()));
            }
            Ok(DbUrl::Sqlite(url.to_owned()))
        } else {
            Err(Error::Url(redact(url)))
        }
    }

    /// A SQLite URL for a file path.
    pub fn sqlite_file(path: &std::path::Path) -> DbUrl {
        DbUrl::Sqlite(format!("sqlite:{}", path.display()))
    }

    /// The URL as given (with any password: for connecting, not for printing).
    pub fn as_str(&self) -> &str {
        match self {
            DbUrl::Sqlite(s) | DbUrl::Postgres(s) => s,
        }
    }

    /// True for PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        matches!(self, DbUrl::Postgres(_))
    }
}

impl FromStr for DbUrl {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        DbUrl::parse(s)
    }
}

/// Displays the URL without its password.
impl fmt::Display for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redact(self.as_str()))
    }
}

impl fmt::Debug for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DbUrl({})", redact(self.as_str()))
    }
}

/// The URL with the password of `scheme://user:password@host` replaced by `***`.
pub fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_owned();
    };
    let rest = &url[scheme_end + 3..];
    let Some(at) = rest.find('@') else {
        return url.to_owned();
    };
    match rest[..at].find(':') {
        Some(colon) => format!(
            "{}{}:***{}",
            &url[..scheme_end + 3],
            &rest[..colon],
            &rest[at..]
        ),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_and_refused_forms() {
        assert!(matches!(
            DbUrl::parse("sqlite:/tmp/x.db"),
            Ok(DbUrl::Sqlite(_))
        ));
        assert!(matches!(
            DbUrl::parse("sqlite://x.db?mode=ro"),
            Ok(DbUrl::Sqlite(_))
        ));
        assert!(matches!(
            DbUrl::parse("postgres://u@h/db"),
            Ok(DbUrl::Postgres(_))
        ));
        assert!(matches!(
            DbUrl::parse("postgresql://h/db"),
            Ok(DbUrl::Postgres(_))
        ));
        for bad in ["mysql://u@h/db", "x.db", "", "sqlite:", "http://h"] {
            let e = DbUrl::parse(bad).unwrap_err().to_string();
            assert!(
                e.contains("sqlite:PATH") && e.contains("postgres://"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn passwords_are_not_displayed() {
        let u = DbUrl::parse("postgres://me:secret@h:5432/db").unwrap();
        assert_eq!(u.to_string(), "postgres://me:***@h:5432/db");
        assert!(!format!("{u:?}").contains("secret"));
        let e = DbUrl::parse("mysql://me:secret@h/db")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("secret"), "{e}");
    }
}
