//! Streaming reads: the rows of one thread's (host's, metric's) table in time order, pulled
//! one at a time, for exports that must never hold a session in memory (`p5 export`).
//!
//! A [`Stream`] is synchronous and is meant for a thread that may block — a command's main
//! thread, or `tokio::task::spawn_blocking` in a server — never an async task: a PostgreSQL
//! cursor blocks on the runtime given to [`Stream::open`] for each batch. Several cursors
//! may be open at once (an export merges a thread's states with the messages it sent and
//! received), each with its own statement.
//!
//! - **SQLite**: the stream opens its own read-only connection to the database file (the
//!   [`Reader`]'s pool hands rows over from a worker thread, ~5 µs a row, see [`raw_rows`]),
//!   in serialized mode (so cursors may move between threads), and steps prepared statements
//!   on it, reading columns in place. Each query walks the `(session_id, thread_id, t_start)`
//!   style index of its table; ties are put in order by SQLite's sorter, which spills to disk.
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
use libsqlite3_sys as ffi;
use sqlx::Row as _;
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgRow;
use std::borrow::Cow;
use std::ffi::{CStr, CString, c_int};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::Arc;
use tokio::runtime::Handle;

/// Rows a PostgreSQL cursor fetches at a time.
pub const PG_BATCH: usize = 4096;

/// Opens cursors over one database.
#[derive(Debug, Clone)]
pub struct Stream {
    backend: Backend,
}

#[derive(Debug, Clone)]
enum Backend {
    Sqlite(Arc<RawDb>),
    Postgres { pool: sqlx::PgPool, rt: Handle },
}

/// An owned read-only SQLite connection, closed on drop.
#[derive(Debug)]
struct RawDb(NonNull<ffi::sqlite3>);

// SAFETY: opened with SQLITE_OPEN_FULLMUTEX: SQLite serializes every call on the handle.
unsafe impl Send for RawDb {}
// SAFETY: as above.
unsafe impl Sync for RawDb {}

impl Drop for RawDb {
    fn drop(&mut self) {
        // SAFETY: the handle is open; every statement holds an `Arc` to this value, so they
        // are all finalized before it is closed.
        unsafe {
            ffi::sqlite3_close(self.0.as_ptr());
        }
    }
}

impl RawDb {
    fn error(&self, what: &str) -> Error {
        // SAFETY: the handle is open; the message is copied at once.
        let msg = unsafe { CStr::from_ptr(ffi::sqlite3_errmsg(self.0.as_ptr())) };
        Error::Sqlite(format!("{what}: {}", msg.to_string_lossy()))
    }

    fn open(path: &std::path::Path) -> Result<RawDb, Error> {
        let c = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| Error::Sqlite(format!("{}: a NUL in the path", path.display())))?;
        let mut raw = std::ptr::null_mut();
        let flags = ffi::SQLITE_OPEN_READONLY | ffi::SQLITE_OPEN_FULLMUTEX;
        // SAFETY: `c` is a valid C string; `raw` receives the handle (also on failure).
        let rc = unsafe { ffi::sqlite3_open_v2(c.as_ptr(), &mut raw, flags, std::ptr::null()) };
        let db = NonNull::new(raw).map(RawDb);
        match (rc, db) {
            (ffi::SQLITE_OK, Some(db)) => {
                // SAFETY: the handle is open.
                unsafe { ffi::sqlite3_busy_timeout(db.0.as_ptr(), 5000) };
                Ok(db)
            }
            (_, Some(db)) => Err(db.error(&format!("opening {}", path.display()))),
            (_, None) => Err(Error::Sqlite(format!(
                "opening {}: out of memory",
                path.display()
            ))),
        }
    }

    /// Runs a statement without results (a pragma).
    fn exec(&self, sql: &str) -> Result<(), Error> {
        let c = CString::new(sql).map_err(|_| Error::Sqlite("a NUL in a statement".into()))?;
        // SAFETY: the handle is open and `c` a valid C string.
        let rc = unsafe {
            ffi::sqlite3_exec(
                self.0.as_ptr(),
                c.as_ptr(),
                None,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        if rc == ffi::SQLITE_OK {
            Ok(())
        } else {
            Err(self.error(sql))
        }
    }
}

impl Stream {
    /// A stream over the database `reader` reads. `rt` runs PostgreSQL's fetches (the
    /// stream's methods must then be called outside that runtime's tasks).
    pub fn open(reader: &Reader, rt: &Handle) -> Result<Stream, Error> {
        let backend = match reader {
            Reader::Sqlite(pool) => {
                let db = RawDb::open(pool.connect_options().get_filename())?;
                // 64 MiB of page cache for the index walks; no mmap (memory stays bounded).
                db.exec("PRAGMA cache_size = -65536")?;
                Backend::Sqlite(Arc::new(db))
            }
            Reader::Postgres(pool) => Backend::Postgres {
                pool: pool.clone(),
                rt: rt.clone(),
            },
        };
        Ok(Stream { backend })
    }

    /// Opens a cursor on `sql` with the integer parameters `params` (`$1`, `$2`, …).
    fn cursor(&self, sql: &'static str, params: &[i64]) -> Result<Cursor, Error> {
        match &self.backend {
            Backend::Sqlite(db) => sqlite_cursor(db, sql, params),
            Backend::Postgres { pool, rt } => {
                let mut text = sql.to_owned();
                // Highest first, so `$1` does not match the start of `$10`.
                for (i, p) in params.iter().enumerate().rev() {
                    text = text.replace(&format!("${}", i + 1), &p.to_string());
                }
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
        self.cursor(Q, &[sid])
    }

    /// A thread's intervals by start, outer before inner at equal starts: `t_start`,
    /// `t_end`, `sensor_id`, `depth`.
    pub fn intervals(&self, sid: i64, thread: i64) -> Result<Cursor, Error> {
        const Q: &str = "SELECT t_start, t_end, sensor_id, depth FROM interval \
             WHERE session_id = $1 AND thread_id = $2 ORDER BY t_start, depth";
        self.cursor(Q, &[sid, thread])
    }

    /// A thread's states by start: `t_start`, `t_end`, `state` (text), `op` (text or NULL),
    /// `fd`, `result`.
    pub fn states(&self, sid: i64, thread: i64) -> Result<Cursor, Error> {
        const Q: &str = "SELECT t_start, t_end, state, op, fd, result FROM state \
             WHERE session_id = $1 AND thread_id = $2 ORDER BY t_start, t_end";
        self.cursor(Q, &[sid, thread])
    }

    /// The matched messages (both ends known) a thread sent, by send start: `id`, `send_t`.
    pub fn sends(&self, sid: i64, thread: i64) -> Result<Cursor, Error> {
        const Q: &str = "SELECT id, send_t FROM message WHERE session_id = $1 \
             AND send_thread_id = $2 AND send_t IS NOT NULL AND recv_thread_id IS NOT NULL \
             AND COALESCE(recv_end, recv_t) IS NOT NULL ORDER BY send_t, id";
        self.cursor(Q, &[sid, thread])
    }

    /// The matched messages a thread received, by the end of the receive that completed
    /// them (its start if none did): `id`, that time.
    pub fn receives(&self, sid: i64, thread: i64) -> Result<Cursor, Error> {
        const Q: &str = "SELECT id, COALESCE(recv_end, recv_t) AS t FROM message \
             WHERE session_id = $1 AND recv_thread_id = $2 AND send_thread_id IS NOT NULL \
             AND send_t IS NOT NULL AND COALESCE(recv_end, recv_t) IS NOT NULL ORDER BY t, id";
        self.cursor(Q, &[sid, thread])
    }

    /// A thread's marks by time: `t`, `sensor_id`.
    pub fn marks(&self, sid: i64, thread: i64) -> Result<Cursor, Error> {
        const Q: &str = "SELECT t, sensor_id FROM mark WHERE session_id = $1 AND thread_id = $2 \
             ORDER BY t";
        self.cursor(Q, &[sid, thread])
    }

    /// When a recorded thread had a CPU, by start: `t_start`, `t_end`, `cpu`.
    pub fn sched_of_thread(&self, sid: i64, thread: i64) -> Result<Cursor, Error> {
        const Q: &str = "SELECT t_start, t_end, cpu FROM sched WHERE session_id = $1 \
             AND thread_id = $2 ORDER BY t_start, t_end";
        self.cursor(Q, &[sid, thread])
    }

    /// The on-CPU stretches of a host's threads that no recorded thread is, by CPU and
    /// start: `cpu`, `t_start`, `t_end`, `tid`.
    pub fn sched_unattributed(&self, sid: i64, host: i64) -> Result<Cursor, Error> {
        const Q: &str = "SELECT cpu, t_start, t_end, tid FROM sched WHERE session_id = $1 \
             AND host_id = $2 AND thread_id IS NULL ORDER BY cpu, t_start, t_end";
        self.cursor(Q, &[sid, host])
    }

    /// A host's interrupts by entry, longer first at equal entries: `cpu`, `t`, `duration`,
    /// `irq`, `handled`.
    pub fn irqs(&self, sid: i64, host: i64) -> Result<Cursor, Error> {
        const Q: &str = "SELECT cpu, t, duration, irq, handled FROM irq WHERE session_id = $1 \
             AND host_id = $2 ORDER BY t, duration DESC";
        self.cursor(Q, &[sid, host])
    }

    /// Every metric of a session: `id`, `process_id`, `host_id`, `kind` (text), `name`
    /// (text), `unit` (text), `scale_exp`.
    pub fn metrics(&self, sid: i64) -> Result<Cursor, Error> {
        const Q: &str = "SELECT id, process_id, host_id, kind, name, unit, scale_exp FROM metric \
             WHERE session_id = $1 ORDER BY id";
        self.cursor(Q, &[sid])
    }

    /// A metric's samples by time: `t`, `value`.
    pub fn metric_samples(&self, sid: i64, metric: i64) -> Result<Cursor, Error> {
        const Q: &str = "SELECT t, value FROM metric_sample WHERE session_id = $1 \
             AND metric_id = $2 ORDER BY t";
        self.cursor(Q, &[sid, metric])
    }
}

fn sqlite_cursor(db: &Arc<RawDb>, sql: &'static str, params: &[i64]) -> Result<Cursor, Error> {
    let mut raw = std::ptr::null_mut();
    let len = c_int::try_from(sql.len()).map_err(|_| Error::Sqlite("query too long".into()))?;
    // SAFETY: the handle is open; the text is valid for `len` bytes.
    let rc = unsafe {
        ffi::sqlite3_prepare_v2(
            db.0.as_ptr(),
            sql.as_ptr().cast(),
            len,
            &mut raw,
            std::ptr::null_mut(),
        )
    };
    let Some(stmt) = NonNull::new(raw).filter(|_| rc == ffi::SQLITE_OK) else {
        return Err(db.error("preparing a read"));
    };
    let cursor = Cursor(Inner::Sqlite {
        db: db.clone(),
        stmt,
        done: false,
    });
    for (i, p) in params.iter().enumerate() {
        // SAFETY: the statement is live; SQLite checks the 1-based index.
        if unsafe { ffi::sqlite3_bind_int64(stmt.as_ptr(), i as c_int + 1, *p) } != ffi::SQLITE_OK {
            return Err(db.error("binding a read parameter"));
        }
    }
    Ok(cursor)
}

/// Rows of one query, pulled in order ([`Cursor::next`]).
#[derive(Debug)]
pub struct Cursor(Inner);

#[derive(Debug)]
enum Inner {
    Sqlite {
        db: Arc<RawDb>,
        stmt: NonNull<ffi::sqlite3_stmt>,
        done: bool,
    },
    Postgres {
        conn: Option<PoolConnection<sqlx::Postgres>>,
        rt: Handle,
        rows: Vec<PgRow>,
        pos: usize,
        done: bool,
    },
}

// SAFETY: the statement belongs to a serialized-mode connection (see `RawDb`) and is used
// only through `&mut Cursor`.
unsafe impl Send for Inner {}

impl Drop for Inner {
    fn drop(&mut self) {
        match self {
            Inner::Sqlite { stmt, .. } => {
                // SAFETY: prepared by `sqlite_cursor`, finalized once, before its connection
                // (held by `db`) can be closed.
                unsafe {
                    ffi::sqlite3_finalize(stmt.as_ptr());
                }
            }
            Inner::Postgres { conn, done, .. } => {
                // A cursor left before its end is in an open transaction: close the
                // connection rather than hand it back to the pool.
                if let (Some(c), false) = (conn.as_mut(), *done) {
                    c.close_on_drop();
                }
            }
        }
    }
}

impl Cursor {
    /// The next row, `None` after the last.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Row<'_>>, Error> {
        match &mut self.0 {
            Inner::Sqlite { db, stmt, done } => {
                if *done {
                    return Ok(None);
                }
                // SAFETY: the statement is live and bound; `&mut self` keeps others off it.
                match unsafe { ffi::sqlite3_step(stmt.as_ptr()) } {
                    ffi::SQLITE_ROW => Ok(Some(Row(RowInner::Sqlite(*stmt, PhantomData)))),
                    ffi::SQLITE_DONE => {
                        *done = true;
                        Ok(None)
                    }
                    _ => {
                        *done = true;
                        Err(db.error("reading rows"))
                    }
                }
            }
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
                    *rows =
                        rt.block_on(sqlx::query(sqlx::AssertSqlSafe(fetch)).fetch_all(&mut **c))?;
                    *pos = 0;
                    if rows.len() < PG_BATCH {
                        rt.block_on(sqlx::raw_sql("CLOSE c; COMMIT").execute(&mut **c))?;
                        *done = true;
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
    Sqlite(NonNull<ffi::sqlite3_stmt>, PhantomData<&'a ()>),
    Postgres(&'a PgRow),
}

impl Row<'_> {
    /// An integer column (`None` for NULL).
    pub fn int(&self, i: usize) -> Result<Option<i64>, Error> {
        match &self.0 {
            RowInner::Sqlite(s, _) => {
                let c = i as c_int;
                // SAFETY: the statement has a current row (the borrow of the cursor).
                Ok(unsafe {
                    (ffi::sqlite3_column_type(s.as_ptr(), c) != ffi::SQLITE_NULL)
                        .then(|| ffi::sqlite3_column_int64(s.as_ptr(), c))
                })
            }
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
            RowInner::Sqlite(s, _) => {
                let c = i as c_int;
                // SAFETY: as in `int`; the text stays valid until the next step, which the
                // borrow of the cursor excludes.
                unsafe {
                    let p = ffi::sqlite3_column_text(s.as_ptr(), c);
                    if p.is_null() {
                        return Ok(None);
                    }
                    let n = ffi::sqlite3_column_bytes(s.as_ptr(), c).max(0) as usize;
                    Ok(Some(String::from_utf8_lossy(std::slice::from_raw_parts(
                        p, n,
                    ))))
                }
            }
            RowInner::Postgres(r) => Ok(r.try_get::<Option<&str>, _>(i)?.map(Cow::Borrowed)),
        }
    }
}
