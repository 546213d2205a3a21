//! Streaming reads: the rows of one thread's (host's, metric's) table in time order, pulled
//! one at a time, for exports that must never hold a session in memory (`p5 export`).
//!
//! A [`Stream`] is synchronous and is meant for a thread that may block — a command's main
//! thread, or `tokio::task::spawn_blocking` in a server — never an async task: a PostgreSQL
//! cursor blocks on the runtime given to [`Stream::open`] for each batch. Several cursors
//! may be open at once (an export merges a thread's states with the messages it sent and
//! received), each with its own statement.
//!
//! - **SQLite**: each cursor has a reader thread with a read-only connection of its own to
//!   the database file, which steps a prepared statement and hands the rows over in batches
//!   (the [`Reader`]'s pool hands them over one by one from sqlx's worker, ~5 µs a row, see
//!   [`raw_rows`]): SQLite's work overlaps with the reader's on another core, and memory is
//!   a few batches per cursor (module `stream::sqlite`). The connection is the thread's alone, so it is
//!   opened without SQLite's mutex (which cost a fifth of an export's time, taken for every
//!   column read). Each query walks the
//!   `(session_id, thread_id, t_start)` style index of its table with no sort: rows of equal
//!   key come in table order, which is the order merge wrote them (states, on-CPU stretches
//!   and messages in time order; calls at their exit, inner first — the exporter reorders
//!   those among equal starts).
//! - **PostgreSQL**: each cursor is a server-side cursor (`DECLARE … NO SCROLL CURSOR`) in a
//!   read-only transaction on a pooled connection of its own, fetched [`PG_BATCH`] rows at a
//!   time, so memory is one batch per cursor whatever the session's size. The cursors of one
//!   export do not share a snapshot: a session merged again while it is exported may mix.
//!
//! The queries are static texts with `$n` placeholders and integer parameters only (a
//! PostgreSQL cursor gets them as literals: `DECLARE` takes no bound parameters).
//!
//! [`raw_rows`]: crate::raw_rows

use crate::error::Error;
use crate::read::Reader;
use sqlx::Row as _;
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgRow;
use std::borrow::Cow;
use std::sync::Arc;
use tokio::runtime::Handle;

mod sqlite;

/// Rows a PostgreSQL cursor fetches at a time.
pub const PG_BATCH: usize = 4096;

/// Opens cursors over one database.
#[derive(Debug, Clone)]
pub struct Stream {
    backend: Backend,
}

#[derive(Debug, Clone)]
enum Backend {
    Sqlite(Arc<std::path::Path>),
    Postgres { pool: sqlx::PgPool, rt: Handle },
}

impl Stream {
    /// A stream over the database `reader` reads. `rt` runs PostgreSQL's fetches (the
    /// stream's methods must then be called outside that runtime's tasks).
    pub fn open(reader: &Reader, rt: &Handle) -> Result<Stream, Error> {
        let backend = match reader {
            Reader::Sqlite(pool) => {
                let path = pool.connect_options().get_filename().to_owned();
                // Fail now, not at the first query, if the file cannot be opened.
                sqlite::RawDb::open(&path)?;
                Backend::Sqlite(Arc::from(path))
            }
            Reader::Postgres(pool) => Backend::Postgres {
                pool: pool.clone(),
                rt: rt.clone(),
            },
        };
        Ok(Stream { backend })
    }

    /// Opens a cursor on `sql` with the integer parameters `params` (`$1`, `$2`, …).
    /// `pg_ties` is appended on PostgreSQL to `sql`'s final `ORDER BY`: its index scans (or
    /// sorts) give no order among equal keys, where SQLite's give table order.
    fn cursor(&self, sql: &'static str, pg_ties: &str, params: &[i64]) -> Result<Cursor, Error> {
        match &self.backend {
            Backend::Sqlite(path) => Ok(Cursor(Inner::Sqlite(sqlite::Prefetch::start(
                path.clone(),
                sql,
                params.to_vec(),
            )))),
            Backend::Postgres { pool, rt } => {
                let mut text = format!("{sql}{pg_ties}");
                // Highest first, so `$1` does not match the start of `$10`.
                for (i, p) in params.iter().enumerate().rev() {
                    text = text.replace(&format!("${}", i + 1), &p.to_string());
                }
                let _in = rt.enter();
                let mut conn = rt.block_on(pool.acquire())?;
                let declare = format!("BEGIN READ ONLY; DECLARE c NO SCROLL CURSOR FOR {text}");
                let begun =
                    rt.block_on(sqlx::raw_sql(sqlx::AssertSqlSafe(declare)).execute(&mut *conn));
                if let Err(e) = begun {
                    conn.close_on_drop();
                    return Err(e.into());
                }
                Ok(Cursor(Inner::Postgres {
                    conn: Some(conn),
                    rt: rt.clone(),
                    rows: Vec::new(),
                    pos: 0,
                    done: false,
                }))
            }
        }
    }

    /// The session's time base: `base_mono_ns` (CLOCK_MONOTONIC of the base run's start).
    pub fn session_base(&self, sid: i64) -> Result<Cursor, Error> {
        const Q: &str = "SELECT base_mono_ns FROM session WHERE id = $1";
        self.cursor(Q, "", &[sid])
    }

    /// A thread's intervals by start (equal starts in no particular order: SQLite gives
    /// table order, inner calls first as merge writes them at their exits): `t_start`,
    /// `t_end`, `sensor_id`, `depth`.
    pub fn intervals(&self, sid: i64, thread: i64) -> Result<Cursor, Error> {
        const Q: &str = "SELECT t_start, t_end, sensor_id, depth FROM interval \
             WHERE session_id = $1 AND thread_id = $2 ORDER BY t_start";
        self.cursor(Q, ", depth", &[sid, thread])
    }

    /// A thread's states by start: `t_start`, `t_end`, `state` (text), `op` (text or NULL),
    /// `fd`, `result`.
    pub fn states(&self, sid: i64, thread: i64) -> Result<Cursor, Error> {
        const Q: &str = "SELECT t_start, t_end, state, op, fd, result FROM state \
             WHERE session_id = $1 AND thread_id = $2 ORDER BY t_start";
        self.cursor(Q, ", t_end", &[sid, thread])
    }

    /// The matched messages (both ends known) a thread sent, by send start: `id`, `send_t`.
    pub fn sends(&self, sid: i64, thread: i64) -> Result<Cursor, Error> {
        const Q: &str = "SELECT id, send_t FROM message WHERE session_id = $1 \
             AND send_thread_id = $2 AND send_t IS NOT NULL AND recv_thread_id IS NOT NULL \
             AND COALESCE(recv_end, recv_t) IS NOT NULL ORDER BY send_t";
        self.cursor(Q, ", id", &[sid, thread])
    }

    /// The matched messages a thread received completely, by the end of the receive that
    /// completed them: `id`, `recv_end`.
    pub fn receives(&self, sid: i64, thread: i64) -> Result<Cursor, Error> {
        const Q: &str = "SELECT id, recv_end FROM message WHERE session_id = $1 \
             AND recv_thread_id = $2 AND recv_end IS NOT NULL AND send_thread_id IS NOT NULL \
             AND send_t IS NOT NULL ORDER BY recv_end";
        self.cursor(Q, ", id", &[sid, thread])
    }

    /// The matched messages a thread received in part only (`recv_end` NULL), by the start
    /// of the first receive: `id`, `recv_t` (few rows; not indexed, so sorted).
    pub fn partial_receives(&self, sid: i64, thread: i64) -> Result<Cursor, Error> {
        const Q: &str = "SELECT id, recv_t FROM message WHERE session_id = $1 \
             AND recv_thread_id = $2 AND recv_end IS NULL AND recv_t IS NOT NULL \
             AND send_thread_id IS NOT NULL AND send_t IS NOT NULL ORDER BY recv_t, id";
        self.cursor(Q, "", &[sid, thread])
    }

    /// A thread's marks by time: `t`, `sensor_id`.
    pub fn marks(&self, sid: i64, thread: i64) -> Result<Cursor, Error> {
        const Q: &str = "SELECT t, sensor_id FROM mark WHERE session_id = $1 AND thread_id = $2 \
             ORDER BY t";
        self.cursor(Q, ", sensor_id", &[sid, thread])
    }

    /// When a recorded thread had a CPU, by start: `t_start`, `t_end`, `cpu`.
    pub fn sched_of_thread(&self, sid: i64, thread: i64) -> Result<Cursor, Error> {
        const Q: &str = "SELECT t_start, t_end, cpu FROM sched WHERE session_id = $1 \
             AND thread_id = $2 ORDER BY t_start";
        self.cursor(Q, ", t_end", &[sid, thread])
    }

    /// The on-CPU stretches of a host's threads that no recorded thread is, by CPU and
    /// start: `cpu`, `t_start`, `t_end`, `tid`.
    pub fn sched_unattributed(&self, sid: i64, host: i64) -> Result<Cursor, Error> {
        const Q: &str = "SELECT cpu, t_start, t_end, tid FROM sched WHERE session_id = $1 \
             AND host_id = $2 AND thread_id IS NULL ORDER BY cpu, t_start";
        self.cursor(Q, ", t_end", &[sid, host])
    }

    /// A host's interrupts by entry, longer first at equal entries: `cpu`, `t`, `duration`,
    /// `irq`, `handled`.
    pub fn irqs(&self, sid: i64, host: i64) -> Result<Cursor, Error> {
        const Q: &str = "SELECT cpu, t, duration, irq, handled FROM irq WHERE session_id = $1 \
             AND host_id = $2 ORDER BY t, duration DESC";
        self.cursor(Q, "", &[sid, host])
    }

    /// Every metric of a session: `id`, `process_id`, `host_id`, `kind` (text), `name`
    /// (text), `unit` (text), `scale_exp`.
    pub fn metrics(&self, sid: i64) -> Result<Cursor, Error> {
        const Q: &str = "SELECT id, process_id, host_id, kind, name, unit, scale_exp FROM metric \
             WHERE session_id = $1 ORDER BY id";
        self.cursor(Q, "", &[sid])
    }

    /// A metric's samples by time: `t`, `value`.
    pub fn metric_samples(&self, sid: i64, metric: i64) -> Result<Cursor, Error> {
        const Q: &str = "SELECT t, value FROM metric_sample WHERE session_id = $1 \
             AND metric_id = $2 ORDER BY t";
        self.cursor(Q, ", value", &[sid, metric])
    }
}

/// Rows of one query, pulled in order ([`Cursor::next`]).
#[derive(Debug)]
pub struct Cursor(Inner);

#[derive(Debug)]
enum Inner {
    Sqlite(sqlite::Prefetch),
    Postgres {
        conn: Option<PoolConnection<sqlx::Postgres>>,
        rt: Handle,
        rows: Vec<PgRow>,
        pos: usize,
        done: bool,
    },
}

impl Drop for Inner {
    fn drop(&mut self) {
        match self {
            // Its reader thread stops at its next hand-over.
            Inner::Sqlite(_) => {}
            Inner::Postgres { conn, done, rt, .. } => {
                // A cursor left before its end is in an open transaction: close the
                // connection rather than hand it back to the pool. Either way the pool
                // needs the runtime's context.
                let _in = rt.enter();
                if let (Some(c), false) = (conn.as_mut(), *done) {
                    c.close_on_drop();
                }
                drop(conn.take());
            }
        }
    }
}

impl Cursor {
    /// The next row, `None` after the last.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Row<'_>>, Error> {
        match &mut self.0 {
            Inner::Sqlite(p) => Ok(p.next()?.map(|(b, i)| Row(RowInner::Batch(b, i)))),
            Inner::Postgres {
                conn,
                rt,
                rows,
                pos,
                done,
            } => {
                if *pos >= rows.len() && !*done {
                    let Some(c) = conn.as_mut() else {
                        return Ok(None);
                    };
                    let fetch = format!("FETCH {PG_BATCH} FROM c");
                    *rows = rt.block_on(
                        // Not cached: every cursor is `c`, with its own columns.
                        sqlx::query(sqlx::AssertSqlSafe(fetch))
                            .persistent(false)
                            .fetch_all(&mut **c),
                    )?;
                    *pos = 0;
                    if rows.len() < PG_BATCH {
                        rt.block_on(sqlx::raw_sql("CLOSE c; COMMIT").execute(&mut **c))?;
                        *done = true;
                        let _in = rt.enter();
                        *conn = None;
                    }
                }
                let Some(r) = rows.get(*pos) else {
                    return Ok(None);
                };
                *pos += 1;
                Ok(Some(Row(RowInner::Postgres(r))))
            }
        }
    }
}

/// One row of a [`Cursor`], valid until its next call.
#[derive(Debug)]
pub struct Row<'a>(RowInner<'a>);

#[derive(Debug)]
enum RowInner<'a> {
    Batch(&'a sqlite::Batch, usize),
    Postgres(&'a PgRow),
}

impl Row<'_> {
    /// An integer column (`None` for NULL).
    pub fn int(&self, i: usize) -> Result<Option<i64>, Error> {
        match &self.0 {
            RowInner::Batch(b, row) => Ok(b.int(*row, i)),
            RowInner::Postgres(r) => Ok(r.try_get::<Option<i64>, _>(i)?),
        }
    }

    /// An integer column that NULL reads as 0.
    pub fn i64(&self, i: usize) -> Result<i64, Error> {
        Ok(self.int(i)?.unwrap_or(0))
    }

    /// A text column (`None` for NULL); bytes that are not UTF-8 are replaced.
    pub fn text(&self, i: usize) -> Result<Option<Cow<'_, str>>, Error> {
        match &self.0 {
            RowInner::Batch(b, row) => Ok(b.text(*row, i)),
            RowInner::Postgres(r) => Ok(r.try_get::<Option<&str>, _>(i)?.map(Cow::Borrowed)),
        }
    }
}
