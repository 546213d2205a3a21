//! The write side: open (creating and migrating), replace a session, and write typed rows in
//! bulk.
//!
//! [`Writer`] buffers rows per table and hands full batches to a task that owns the
//! connection: for SQLite a blocking thread that locks sqlx's connection and inserts through
//! prepared multi-row statements on its raw handle ([`prepared`]; sqlx's per-value binding
//! was the bottleneck), for PostgreSQL a task streaming `COPY … FROM STDIN`. Small tables go
//! through sqlx ([`Db::insert`]: multi-row `VALUES` of up to [`sqlite::MAX_PARAMS`] bound
//! parameters). A whole merge is one transaction: a failed merge leaves the previous contents.
//!
//! Bulk loads: when the session is alone in the database, the indexes of the [`BULK`] tables
//! are dropped before the load and built after it ([`Db::indexes`]); the other tables keep
//! theirs (a bulk load writes few rows into them, and dropping and rebuilding an index costs
//! milliseconds even on an empty table). On PostgreSQL the merge's transaction commits without
//! waiting for the WAL flush (`synchronous_commit` off: still atomic), and one backend does the
//! COPY and the index builds, which then set the pace. A whole session stays one transaction,
//! so several COPY connections are not possible: the dropped indexes, and on a re-merge the
//! truncation, lock the tables until commit.

pub mod postgres;
pub mod prepared;
pub mod sqlite;

use crate::connect::{Catalogue, not_a_database, within};
use crate::error::Error;
use crate::migrate::{self, Backend};
use crate::schema::{self, Row, SESSION, Table, Value};
use crate::url::DbUrl;
use sqlx::{PgConnection, SqliteConnection};
use std::collections::HashMap;

/// A connection for writing to either backend.
#[derive(Debug)]
pub enum Db {
    /// SQLite.
    Sqlite(SqliteConnection),
    /// PostgreSQL.
    Postgres(PgConnection),
}

impl Db {
    /// Opens the database for writing (a SQLite file is created if missing), refuses one that
    /// holds something else, and applies the migrations.
    pub async fn open(url: &DbUrl) -> Result<Db, Error> {
        let mut db = match url {
            DbUrl::Sqlite(u) => Db::Sqlite(within(url, sqlite::connect(u)).await?),
            DbUrl::Postgres(u) => Db::Postgres(within(url, postgres::connect(u)).await?),
        };
        let cat = db.catalogue().await.map_err(|e| not_a_database(url, e))?;
        cat.check_writable(url, db.backend())?;
        db.migrate().await?;
        Ok(db)
    }

    async fn catalogue(&mut self) -> Result<Catalogue, sqlx::Error> {
        let counts: (i64, i64, i64) = match self {
            Db::Sqlite(c) => sqlx::query_as(Catalogue::SQLITE).fetch_one(c).await?,
            Db::Postgres(c) => sqlx::query_as(Catalogue::POSTGRES).fetch_one(c).await?,
        };
        Ok(Catalogue::from_counts(counts))
    }

    /// Which backend.
    pub fn backend(&self) -> Backend {
        match self {
            Db::Sqlite(_) => Backend::Sqlite,
            Db::Postgres(_) => Backend::Postgres,
        }
    }

    /// Applies the embedded migrations.
    pub async fn migrate(&mut self) -> Result<(), Error> {
        let m = migrate::migrator(self.backend());
        match self {
            Db::Sqlite(c) => m.run(&mut *c).await?,
            Db::Postgres(c) => m.run(&mut *c).await?,
        }
        Ok(())
    }

    /// Runs a statement without results.
    async fn execute(&mut self, sql: &'static str) -> Result<(), Error> {
        match self {
            Db::Sqlite(c) => {
                sqlx::raw_sql(sql).execute(c).await?;
            }
            Db::Postgres(c) => {
                sqlx::raw_sql(sql).execute(c).await?;
            }
        }
        Ok(())
    }

    /// Starts a transaction. On PostgreSQL its commit does not wait for the WAL flush (the
    /// transaction stays atomic; a server crash right after it may lose it, never half of it)
    /// and index builds may use more memory.
    pub async fn begin(&mut self) -> Result<(), Error> {
        match self.backend() {
            Backend::Sqlite => self.execute("BEGIN").await,
            Backend::Postgres => {
                self.execute(
                    "BEGIN; SET LOCAL synchronous_commit TO OFF; \
                     SET LOCAL maintenance_work_mem TO '256MB'",
                )
                .await
            }
        }
    }

    /// Commits it.
    pub async fn commit(&mut self) -> Result<(), Error> {
        self.execute("COMMIT").await
    }

    /// Rolls it back.
    pub async fn rollback(&mut self) -> Result<(), Error> {
        self.execute("ROLLBACK").await
    }

    /// Deletes every row of session `name` — in every table keyed by session, the analysis
    /// tables included — and returns the id to write it under (its old id, or one above the
    /// largest). `alone`: no other session is in the database, so whole tables are emptied
    /// (much faster than deleting row by row).
    pub async fn replace_session(&mut self, name: &str, alone: bool) -> Result<i64, Error> {
        if self.backend() == Backend::Postgres {
            // Serialize concurrent merges into one database (ids are max + 1); a no-op after
            // `alone` in the same transaction.
            self.execute("LOCK TABLE session IN EXCLUSIVE MODE").await?;
        }
        let old = self
            .fetch_id("SELECT id FROM session WHERE name = $1", Some(name))
            .await?;
        let Some(id) = old else {
            let next = "SELECT COALESCE(MAX(id), 0) + 1 FROM session";
            return Ok(self.fetch_id(next, None).await?.unwrap_or(1));
        };
        self.delete_session(id, alone).await?;
        Ok(id)
    }

    /// Deletes the rows of session `id` in every table (`alone`: empty whole tables).
    pub async fn delete_session(&mut self, id: i64, alone: bool) -> Result<(), Error> {
        let empty = match self.backend() {
            Backend::Sqlite => "DELETE FROM",
            Backend::Postgres => "TRUNCATE",
        };
        for t in schema::PER_SESSION {
            if alone {
                self.run(format!("{empty} {}", t.name), None).await?;
            } else {
                let sql = format!("DELETE FROM {} WHERE session_id = $1", t.name);
                self.run(sql, Some(id)).await?;
            }
        }
        self.run("DELETE FROM session WHERE id = $1".into(), Some(id))
            .await
    }

    /// Runs a statement built from schema names, binding `id` to `$1` if given.
    async fn run(&mut self, sql: String, id: Option<i64>) -> Result<(), Error> {
        let q = sqlx::AssertSqlSafe(sql);
        match self {
            Db::Sqlite(c) => {
                let mut q = sqlx::query(q);
                if let Some(id) = id {
                    q = q.bind(id);
                }
                q.execute(c).await?;
            }
            Db::Postgres(c) => {
                let mut q = sqlx::query(q);
                if let Some(id) = id {
                    q = q.bind(id);
                }
                q.execute(c).await?;
            }
        }
        Ok(())
    }

    /// The first column (an integer) of the first row, if any, binding `name` to `$1` if
    /// given.
    async fn fetch_id(
        &mut self,
        sql: &'static str,
        name: Option<&str>,
    ) -> Result<Option<i64>, Error> {
        use sqlx::Row as _;
        Ok(match self {
            Db::Sqlite(c) => {
                let mut q = sqlx::query(sql);
                if let Some(n) = name {
                    q = q.bind(n);
                }
                q.fetch_optional(c).await?.map(|r| r.get(0))
            }
            Db::Postgres(c) => {
                let mut q = sqlx::query(sql);
                if let Some(n) = name {
                    q = q.bind(n);
                }
                q.fetch_optional(c).await?.map(|r| r.get(0))
            }
        })
    }

    /// The id of session `name`, if merged.
    pub async fn session_id(&mut self, name: &str) -> Result<Option<i64>, Error> {
        self.fetch_id("SELECT id FROM session WHERE name = $1", Some(name))
            .await
    }

    /// True if no session other than `name` is in the database (a bulk load may then drop
    /// the indexes and build them afterwards, which is much faster than maintaining them).
    pub async fn alone(&mut self, name: &str) -> Result<bool, Error> {
        if self.backend() == Backend::Postgres {
            // Serialize concurrent merges into one database from here to the commit.
            self.execute("LOCK TABLE session IN EXCLUSIVE MODE").await?;
        }
        let others = "SELECT COUNT(*) FROM session WHERE name <> $1";
        Ok(self.fetch_id(others, Some(name)).await? == Some(0))
    }

    /// Drops (`create = false`) or creates the indexes of the tables a merge loads in bulk
    /// ([`BULK`]; the others keep theirs: a bulk load writes few or no rows into them, and
    /// every index dropped and built again costs a few milliseconds even on an empty table).
    pub async fn indexes(&mut self, create: bool) -> Result<(), Error> {
        for (name, sql) in migrate::indexes(self.backend()) {
            if !BULK.contains(&index_table(sql)) {
                continue;
            }
            let t = std::time::Instant::now();
            let stmt = if create {
                sql.to_owned()
            } else {
                format!("DROP INDEX IF EXISTS {name}")
            };
            match self {
                Db::Sqlite(c) => {
                    sqlx::raw_sql(sqlx::AssertSqlSafe(stmt)).execute(c).await?;
                }
                Db::Postgres(c) => {
                    sqlx::raw_sql(sqlx::AssertSqlSafe(stmt)).execute(c).await?;
                }
            }
            let ms = t.elapsed().as_millis() as u64;
            tracing::debug!(index = name, create, ms, "bulk index");
        }
        Ok(())
    }

    /// Writes `values` (flattened, `table.columns.len()` values per row).
    async fn insert_values(&mut self, table: Table, values: Vec<Value>) -> Result<(), Error> {
        if values.is_empty() {
            return Ok(());
        }
        match self {
            Db::Sqlite(c) => sqlite::insert(c, table, values).await,
            Db::Postgres(c) => postgres::insert(c, table, values).await,
        }
    }

    /// Writes typed rows of one table (small tables; bulk rows go through a [`Writer`]).
    pub async fn insert<R: Row>(&mut self, rows: impl IntoIterator<Item = R>) -> Result<(), Error> {
        let mut values = Vec::new();
        for r in rows {
            r.push_values(&mut values);
        }
        self.insert_values(R::TABLE, values).await
    }

    /// Writes the `session` row.
    pub async fn insert_session(&mut self, row: schema::Session) -> Result<(), Error> {
        debug_assert_eq!(<schema::Session as Row>::TABLE, SESSION);
        self.insert([row]).await
    }

    /// Closes the connection (a SQLite file is left in WAL mode: a file created by this
    /// connection was loaded with a rollback journal, see [`sqlite`]).
    pub async fn close(self) -> Result<(), Error> {
        use sqlx::Connection;
        match self {
            Db::Sqlite(mut c) => {
                // Fails only if a reader already has the new file open; it then simply keeps
                // its rollback journal, which is just as valid.
                if let Err(e) = sqlx::raw_sql("PRAGMA journal_mode=WAL")
                    .execute(&mut c)
                    .await
                {
                    tracing::debug!("leaving the rollback journal: {e}");
                }
                c.close().await?
            }
            Db::Postgres(c) => c.close().await?,
        }
        Ok(())
    }
}

/// The tables a merge or an import writes in bulk (rows in proportion to events or
/// messages): their indexes are dropped while a session alone in the database is loaded and
/// built after it ([`Db::indexes`]).
pub const BULK: &[&str] = &[
    "interval",
    "state",
    "mark",
    "message",
    "sched",
    "irq",
    "metric_sample",
    "overview",
];

/// The table a `CREATE INDEX name ON table (…)` statement indexes.
fn index_table(sql: &str) -> &str {
    sql.split_once(" ON ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or("")
}

/// A batch on its way to the database task.
type Batch = (Table, Vec<Value>);

/// The SQLite side of a [`Writer`] (on a blocking thread): locks sqlx's connection and inserts
/// every batch through prepared statements on its handle until the channel closes.
fn sqlite_load(
    conn: &mut SqliteConnection,
    mut rx: tokio::sync::mpsc::Receiver<Batch>,
    rt: &tokio::runtime::Handle,
) -> Result<(), Error> {
    let mut locked = rt.block_on(conn.lock_handle())?;
    // SAFETY: `locked` keeps sqlx's worker off the handle until `statements` (declared after
    // it, so dropped first) is gone.
    let mut statements = unsafe { prepared::Statements::new(locked.as_raw_handle()) };
    let (mut busy, mut idle) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
    let mut t = std::time::Instant::now();
    while let Some((table, values)) = rx.blocking_recv() {
        idle += t.elapsed();
        t = std::time::Instant::now();
        statements.insert(&table, &values)?;
        busy += t.elapsed();
        t = std::time::Instant::now();
    }
    tracing::debug!(
        busy_ms = busy.as_millis() as u64,
        idle_ms = idle.as_millis() as u64,
        "bulk insert thread"
    );
    Ok(())
}

/// Rows per table waiting for a batch. Full batches go to a separate task that owns the
/// connection, so building rows overlaps with the database's work (SQLite's worker thread or
/// the PostgreSQL server); at most [`IN_FLIGHT`] batches wait in between, bounding memory.
#[derive(Debug)]
pub struct Writer {
    tx: Option<tokio::sync::mpsc::Sender<Batch>>,
    task: Option<tokio::task::JoinHandle<(Db, Result<(), Error>)>>,
    buffers: Vec<Buffer>,
    /// Index in `buffers` of the table written last (rows come in runs of one table).
    last: usize,
    batch_values: usize,
}

/// Rows of one table waiting for a batch, and how many were written.
#[derive(Debug)]
struct Buffer {
    table: Table,
    values: Vec<Value>,
    rows: u64,
}

/// Batches queued for the database task.
pub const IN_FLIGHT: usize = 4;

impl Writer {
    /// Starts the database task for `db` (call inside a tokio runtime).
    pub fn new(db: Db) -> Self {
        let batch_values = match db.backend() {
            Backend::Sqlite => sqlite::MAX_PARAMS,
            Backend::Postgres => postgres::BATCH_VALUES,
        };
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Batch>(IN_FLIGHT);
        let task = match db {
            Db::Sqlite(conn) => {
                let rt = tokio::runtime::Handle::current();
                tokio::task::spawn_blocking(move || {
                    let mut conn = conn;
                    let result = sqlite_load(&mut conn, rx, &rt);
                    (Db::Sqlite(conn), result)
                })
            }
            db => tokio::spawn(async move {
                let mut db = db;
                while let Some((table, rows)) = rx.recv().await {
                    if let Err(e) = db.insert_values(table, rows).await {
                        return (db, Err(e));
                    }
                }
                (db, Ok(()))
            }),
        };
        Writer {
            tx: Some(tx),
            task: Some(task),
            buffers: Vec::new(),
            last: 0,
            batch_values,
        }
    }

    async fn send(&mut self, table: Table, rows: Vec<Value>) -> Result<(), Error> {
        if rows.is_empty() {
            return Ok(());
        }
        let sent = match &self.tx {
            Some(tx) => tx.send((table, rows)).await.is_ok(),
            None => false,
        };
        if sent {
            Ok(())
        } else {
            // The task stopped on an error: report that error.
            self.tx = None;
            match self.task.take() {
                Some(task) => match task.await {
                    Ok((_, Err(e))) => Err(e),
                    Ok((_, Ok(()))) => Err(Error::WriterStopped),
                    Err(e) => Err(Error::Task(e.to_string())),
                },
                None => Err(Error::WriterStopped),
            }
        }
    }

    /// The buffer of `table` (a pointer comparison for the table written last; tables are
    /// few, so no hashing per row).
    fn buffer(&mut self, table: Table) -> usize {
        let same =
            |b: &Buffer| std::ptr::eq(b.table.name, table.name) || b.table.name == table.name;
        if self.buffers.get(self.last).is_some_and(same) {
            return self.last;
        }
        let i = match self.buffers.iter().position(same) {
            Some(i) => i,
            None => {
                let cols = table.columns.len();
                let cap = (self.batch_values / cols) * cols;
                self.buffers.push(Buffer {
                    table,
                    values: Vec::with_capacity(cap),
                    rows: 0,
                });
                self.buffers.len() - 1
            }
        };
        self.last = i;
        i
    }

    /// Adds one row; queues a batch when its table's buffer is full.
    pub async fn row<R: Row>(&mut self, row: R) -> Result<(), Error> {
        let table = R::TABLE;
        let cols = table.columns.len();
        let cap = (self.batch_values / cols) * cols;
        let i = self.buffer(table);
        let b = &mut self.buffers[i];
        row.push_values(&mut b.values);
        b.rows += 1;
        if b.values.len() + cols > cap {
            let rows = std::mem::replace(&mut b.values, Vec::with_capacity(cap));
            self.send(table, rows).await?;
        }
        Ok(())
    }

    /// Queues everything buffered (tables in name order).
    pub async fn flush(&mut self) -> Result<(), Error> {
        let mut order: Vec<usize> = (0..self.buffers.len()).collect();
        order.sort_unstable_by_key(|&i| self.buffers[i].table.name);
        for i in order {
            let rows = std::mem::take(&mut self.buffers[i].values);
            let table = self.buffers[i].table;
            self.send(table, rows).await?;
        }
        Ok(())
    }

    /// Rows written per table so far.
    pub fn counts(&self) -> HashMap<&'static str, u64> {
        self.buffers
            .iter()
            .map(|b| (b.table.name, b.rows))
            .collect()
    }

    /// Writes what is left, waits for the database task and returns the connection.
    pub async fn finish(mut self) -> Result<Db, Error> {
        self.flush().await?;
        self.tx = None;
        let task = self.task.take().ok_or(Error::WriterStopped)?;
        let (db, result) = task.await.map_err(|e| Error::Task(e.to_string()))?;
        result?;
        Ok(db)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every index names a table of the schema, and every bulk table has an index to drop
    /// (a renamed table would otherwise silently keep its index through a bulk load).
    #[test]
    fn bulk_indexes_name_schema_tables() {
        for backend in [Backend::Sqlite, Backend::Postgres] {
            let all = migrate::indexes(backend);
            for (name, sql) in &all {
                let t = index_table(sql);
                assert!(
                    schema::all().any(|s| s.name == t),
                    "{name}: table {t:?} not in the schema"
                );
            }
            for b in BULK {
                assert!(
                    all.iter().any(|(_, sql)| index_table(sql) == *b),
                    "bulk table {b} has no index"
                );
            }
        }
    }
}
