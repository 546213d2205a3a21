//! The SQL schema: migrations per backend and the column lists the writers fill.
//!
//! One set of migrations per backend (`migrations/sqlite`, `migrations/postgres`), embedded in
//! the binary and applied with sqlx's migrator; `docs/schema.md` documents every column.
//! Every table has a `session_id`; ids are per session, so re-merging a session deletes its
//! rows and writes them again. Times are integer nanoseconds on the session's time base;
//! 64-bit sensor ids and process uids are stored as signed 64-bit integers (the same bits).

use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{AssertSqlSafe, SqlSafeStr};
use std::borrow::Cow;

/// A table the merge writes rows into, with its columns in insert order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Table {
    /// Table name.
    pub name: &'static str,
    /// Columns, `session_id` first.
    pub columns: &'static [&'static str],
}

macro_rules! tables {
    ($($konst:ident = $name:literal [$($col:literal),* $(,)?];)*) => {
        $(
            #[doc = concat!("The `", $name, "` table.")]
            pub const $konst: Table = Table { name: $name, columns: &[$($col),*] };
        )*
        /// Every table holding per-session rows, in deletion order.
        pub const ALL: &[Table] = &[$($konst),*];
    };
}

tables! {
    HOST = "host" ["session_id", "id", "boot_id", "machine_id", "hostname"];
    PROCESS = "process" ["session_id", "id", "host_id", "uid", "pid", "ppid", "program", "argv",
        "runtime", "clock", "start_wall_ns", "start_mono_ns", "t_start", "t_end"];
    THREAD = "thread" ["session_id", "id", "process_id", "stream", "kind", "tid", "name",
        "t_start", "t_end", "events", "dropped"];
    SOURCE_FILE = "source_file" ["session_id", "id", "path", "language", "sha256", "lines", "text"];
    SENSOR = "sensor" ["session_id", "id", "hex", "kind", "language", "file", "source_file_id",
        "function", "name", "line", "col", "end_line", "end_col"];
    INTERVAL = "interval" ["session_id", "id", "parent_id", "thread_id", "sensor_id", "t_start", "t_end",
        "depth", "self_ns", "complete"];
    STATE = "state" ["session_id", "thread_id", "t_start", "t_end", "state", "op", "fd", "result"];
    MARK = "mark" ["session_id", "thread_id", "sensor_id", "t"];
    MESSAGE = "message" ["session_id", "id", "proto", "bytes", "send_process_id",
        "send_thread_id", "send_sensor_id", "send_t", "send_end", "recv_process_id",
        "recv_thread_id", "recv_sensor_id", "recv_t", "recv_end", "recv_calls", "violation"];
    SCHED = "sched" ["session_id", "host_id", "cpu", "tid", "thread_id", "t_start", "t_end",
        "end_state"];
    IRQ = "irq" ["session_id", "host_id", "cpu", "irq", "t", "duration", "handled"];
    METRIC = "metric" ["session_id", "id", "process_id", "host_id", "kind", "key", "name", "unit",
        "scale_exp"];
    METRIC_SAMPLE = "metric_sample" ["session_id", "metric_id", "thread_id", "t", "value"];
    CLOCK_ESTIMATE = "clock_estimate" ["session_id", "process_id", "domain", "method", "offset_ns",
        "drift_ppm", "forward_samples", "backward_samples", "error_bound_ns", "cosmos_min_ns",
        "tighten_ns"];
    DIAGNOSTIC = "diagnostic" ["session_id", "id", "severity", "kind", "process_id", "count",
        "message"];
    OVERVIEW = "overview" ["session_id", "thread_id", "host_id", "lane", "t_start", "t_end",
        "category", "state", "spans", "covered"];
}

/// The `session` table's columns (written once per merge, by the backends).
pub const SESSION_COLUMNS: &[&str] = &[
    "id",
    "name",
    "store",
    "merged_at_wall_ns",
    "base_run_id",
    "base_mono_ns",
    "base_wall_ns",
    "t_min",
    "t_max",
    "events",
    "processes",
    "threads",
    "messages",
    "matched",
    "violations",
    "diagnostics",
];

/// A column value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// A 64-bit integer.
    Int(i64),
    /// A double.
    Real(f64),
    /// Text.
    Text(String),
    /// Text known at compile time (state names, protocols): no allocation per row.
    Static(&'static str),
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Value::Int(v as i64)
    }
}

impl From<u64> for Value {
    /// The same 64 bits, as a signed integer (ids and uids above 2^63 become negative).
    fn from(v: u64) -> Self {
        Value::Int(v as i64)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Real(v)
    }
}

impl From<&'static str> for Value {
    fn from(v: &'static str) -> Self {
        Value::Static(v)
    }
}

impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// Which database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// SQLite (the default, a file).
    Sqlite,
    /// PostgreSQL.
    Postgres,
}

const SQLITE_MIGRATIONS: &[(i64, &str, &str)] = &[
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
];
const POSTGRES_MIGRATIONS: &[(i64, &str, &str)] = &[
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
];

/// `(name, CREATE INDEX statement)` of every index the migrations create (for a bulk load:
/// dropped before, created after).
pub fn indexes(backend: Backend) -> Vec<(&'static str, &'static str)> {
    let list = match backend {
        Backend::Sqlite => SQLITE_MIGRATIONS,
        Backend::Postgres => POSTGRES_MIGRATIONS,
    };
    list.iter()
        .flat_map(|m| m.2.lines())
        .filter_map(|l| {
            let rest = l.strip_prefix("CREATE INDEX ")?;
            let name = rest.split_whitespace().next()?;
            Some((name, l.trim_end_matches(';')))
        })
        .collect()
}

/// The embedded migrator of a backend (the SQL files are compiled into the binary).
pub fn migrator(backend: Backend) -> Migrator {
    let list = match backend {
        Backend::Sqlite => SQLITE_MIGRATIONS,
        Backend::Postgres => POSTGRES_MIGRATIONS,
    };
    let migrations: Vec<Migration> = list
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_and_column_is_in_both_migrations() {
        for list in [SQLITE_MIGRATIONS, POSTGRES_MIGRATIONS] {
            let sql: String = list.iter().map(|m| m.2).collect();
            for t in ALL {
                let head = format!("CREATE TABLE {} (", t.name);
                let at = sql
                    .find(&head)
                    .unwrap_or_else(|| panic!("{} missing", t.name));
                let body = &sql[at..at + sql[at..].find(");").unwrap()];
                for c in t.columns {
                    assert!(
                        body.contains(&format!("\n    {c} ")),
                        "{}.{c} missing",
                        t.name
                    );
                }
            }
            for c in SESSION_COLUMNS {
                assert!(sql.contains(&format!("\n    {c} ")), "session.{c} missing");
            }
        }
        for b in [Backend::Sqlite, Backend::Postgres] {
            let ix = indexes(b);
            assert_eq!(ix.len(), 11, "{ix:?}");
            assert!(
                ix.iter()
                    .all(|(n, sql)| sql.contains(n) && sql.contains("(session_id"))
            );
        }
    }
}
