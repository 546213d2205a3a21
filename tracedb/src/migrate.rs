//! The migrations of both backends (`migrations/{sqlite,postgres}/NNNN_*.sql`), embedded in
//! the binary and applied with sqlx's migrator on connect.
//!
//! An applied migration is never edited: sqlx checks each applied migration's checksum, so a
//! database merged by an older p5 opens only if the files it applied are byte-identical
//! (`test_data/merged-v0002.sqlite` was written before this crate existed and is opened by
//! the tests). Schema changes come as new files.

use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{AssertSqlSafe, SqlSafeStr};
use std::borrow::Cow;

/// Which database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// SQLite (the default, a file).
    Sqlite,
    /// PostgreSQL.
    Postgres,
}

/// `(version, description, SQL)` of every SQLite migration.
pub const SQLITE: &[(i64, &str, &str)] = &[
    (
        1,
        "schema",
        include_str!("../migrations/sqlite/0001_schema.sql"),
    ),
    (
        2,
        "overview",
        include_str!("../migrations/sqlite/0002_overview.sql"),
    ),
    (
        3,
        "connection",
        include_str!("../migrations/sqlite/0003_connection.sql"),
    ),
    (
        4,
        "analysis",
        include_str!("../migrations/sqlite/0004_analysis.sql"),
    ),
    (
        8,
        "drop_range",
        include_str!("../migrations/sqlite/0008_drop_range.sql"),
    ),
    (
        9,
        "flows",
        include_str!("../migrations/sqlite/0009_flows.sql"),
    ),
    (
        10,
        "sensor_calls",
        include_str!("../migrations/sqlite/0010_sensor_calls.sql"),
    ),
    (
        11,
        "convolution",
        include_str!("../migrations/sqlite/0011_convolution.sql"),
    ),
    (
        12,
        "send_calls",
        include_str!("../migrations/sqlite/0012_send_calls.sql"),
    ),
    (
        13,
        "connect_time",
        include_str!("../migrations/sqlite/0013_connect_time.sql"),
    ),
];

/// `(version, description, SQL)` of every PostgreSQL migration.
pub const POSTGRES: &[(i64, &str, &str)] = &[
    (
        1,
        "schema",
        include_str!("../migrations/postgres/0001_schema.sql"),
    ),
    (
        2,
        "overview",
        include_str!("../migrations/postgres/0002_overview.sql"),
    ),
    (
        3,
        "connection",
        include_str!("../migrations/postgres/0003_connection.sql"),
    ),
    (
        4,
        "analysis",
        include_str!("../migrations/postgres/0004_analysis.sql"),
    ),
    (
        8,
        "drop_range",
        include_str!("../migrations/postgres/0008_drop_range.sql"),
    ),
    (
        9,
        "flows",
        include_str!("../migrations/postgres/0009_flows.sql"),
    ),
    (
        10,
        "sensor_calls",
        include_str!("../migrations/postgres/0010_sensor_calls.sql"),
    ),
    (
        11,
        "convolution",
        include_str!("../migrations/postgres/0011_convolution.sql"),
    ),
    (
        12,
        "send_calls",
        include_str!("../migrations/postgres/0012_send_calls.sql"),
    ),
    (
        13,
        "connect_time",
        include_str!("../migrations/postgres/0013_connect_time.sql"),
    ),
];

/// The migrations of a backend.
pub fn list(backend: Backend) -> &'static [(i64, &'static str, &'static str)] {
    match backend {
        Backend::Sqlite => SQLITE,
        Backend::Postgres => POSTGRES,
    }
}

/// The newest migration version.
pub fn latest() -> i64 {
    SQLITE.last().map_or(0, |m| m.0)
}

/// The embedded migrator of a backend.
pub fn migrator(backend: Backend) -> Migrator {
    let migrations: Vec<Migration> = list(backend)
        .iter()
        .map(|&(version, description, sql)| {
            Migration::new(
                version,
                Cow::Borrowed(description),
                MigrationType::Simple,
                AssertSqlSafe(sql).into_sql_str(),
                false,
            )
        })
        .collect();
    Migrator {
        migrations: Cow::Owned(migrations),
        ..Migrator::DEFAULT
    }
}

/// `(name, CREATE INDEX statement)` of every index the migrations create (for a bulk load:
/// dropped before, created after).
pub fn indexes(backend: Backend) -> Vec<(&'static str, &'static str)> {
    list(backend)
        .iter()
        .flat_map(|m| m.2.lines())
        .filter_map(|l| {
            let rest = l.strip_prefix("CREATE INDEX ")?;
            let name = rest.split_whitespace().next()?;
            Some((name, l.trim_end_matches(';')))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_backends_have_the_same_migrations_and_indexes() {
        assert_eq!(SQLITE.len(), POSTGRES.len());
        for (a, b) in SQLITE.iter().zip(POSTGRES) {
            assert_eq!((a.0, a.1), (b.0, b.1));
        }
        let (s, p) = (indexes(Backend::Sqlite), indexes(Backend::Postgres));
        assert_eq!(s.len(), 22, "{s:?}");
        assert_eq!(
            s.iter().map(|x| x.0).collect::<Vec<_>>(),
            p.iter().map(|x| x.0).collect::<Vec<_>>()
        );
        assert!(
            s.iter()
                .all(|(n, sql)| sql.contains(n) && sql.contains("(session_id"))
        );
    }
}
