//! SQLite: one connection, multi-row `INSERT` batches with bound parameters (small tables;
//! bulk rows go through [`super::prepared`]).
//!
//! Journal: an existing database is written in WAL mode (readers keep reading during a
//! merge). A database file created by this connection is loaded with a rollback journal
//! instead and switched to WAL by [`Db::close`](super::Db::close): in WAL mode every page of a
//! bulk load is written twice (to the WAL, then by the checkpoint into the file), while a
//! rollback journal of a new file holds almost nothing, so the pages are written once. Both
//! journals are crash-safe and a failed merge rolls back either way; nothing else can be
//! reading a file that did not exist. A new file is also written without `fsync`
//! (`synchronous=OFF`): a crashed process loses nothing, and what a power loss could damage is
//! a file that holds only what the store it was merged from still holds.

use crate::error::Error;
use crate::schema::{Table, Value};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::{AssertSqlSafe, ConnectOptions, SqliteConnection};
use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

/// Most bound parameters per statement SQLite accepts (`SQLITE_MAX_VARIABLE_NUMBER`, 32,766).
pub const MAX_PARAMS: usize = 32_766;

/// Opens (creating) the database file with bulk-load pragmas (a new file: rollback journal
/// until [`Db::close`](super::Db::close) switches it to WAL).
pub async fn connect(url: &str) -> Result<SqliteConnection, sqlx::Error> {
    let opts = SqliteConnectOptions::from_str(url)?;
    let fresh = !opts.get_filename().exists();
    let (journal, sync) = if fresh {
        (SqliteJournalMode::Delete, SqliteSynchronous::Off)
    } else {
        (SqliteJournalMode::Wal, SqliteSynchronous::Normal)
    };
    let opts = opts
        .create_if_missing(true)
        .journal_mode(journal)
        .synchronous(sync)
        .pragma("cache_size", "-65536")
        .busy_timeout(std::time::Duration::from_secs(30));
    opts.connect().await
}

/// `INSERT INTO table (cols) VALUES (?, …), …` texts, cached per (table, rows) so sqlx's
/// statement cache sees the same text for every full batch.
type StatementCache = HashMap<(String, usize), Arc<str>>;

fn statement(table: &Table, rows: usize) -> Arc<str> {
    static CACHE: Mutex<Option<StatementCache>> = Mutex::new(None);
    let key = (table.name.to_owned(), rows);
    let mut guard = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let cache = guard.get_or_insert_with(HashMap::new);
    if let Some(s) = cache.get(&key) {
        return s.clone();
    }
    let one = format!("({})", vec!["?"; table.columns.len()].join(","));
    let mut sql = format!(
        "INSERT INTO {} ({}) VALUES ",
        table.name,
        table.column_list()
    );
    for i in 0..rows {
        if i > 0 {
            sql.push(',');
        }
        sql.push_str(&one);
    }
    let s: Arc<str> = sql.into();
    if cache.len() < 256 {
        cache.insert(key, s.clone());
    }
    s
}

/// Inserts rows (flattened) in statements of at most [`MAX_PARAMS`] parameters.
pub async fn insert(
    c: &mut SqliteConnection,
    table: Table,
    values: Vec<Value>,
) -> Result<(), Error> {
    let cols = table.columns.len();
    let per = (MAX_PARAMS / cols).max(1);
    let mut it = values.into_iter();
    let total = it.len() / cols;
    let mut done = 0;
    while done < total {
        let n = per.min(total - done);
        let sql = statement(&table, n);
        let mut q = sqlx::query(AssertSqlSafe(sql));
        for v in it.by_ref().take(n * cols) {
            q = match v {
                Value::Null => q.bind(None::<i64>),
                Value::Int(i) => q.bind(i),
                Value::Real(f) => q.bind(f),
                Value::Text(s) => q.bind(s),
                Value::Static(s) => q.bind(s),
            };
        }
        q.execute(&mut *c).await?;
        done += n;
    }
    Ok(())
}
