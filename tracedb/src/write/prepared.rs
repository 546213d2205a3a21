//! SQLite bulk load through prepared statements on the connection's own handle.
//!
//! sqlx runs SQLite on a worker thread and turns every bound value into an owned argument
//! that crosses a channel, which caps multi-row `VALUES` batches at well under SQLite's own
//! speed. For the bulk rows the [`Writer`](super::Writer) therefore locks sqlx's connection
//! (`SqliteConnection::lock_handle`: the worker waits) and drives the very same `sqlite3`
//! handle from a blocking thread: one prepared `INSERT … VALUES (…),…` of [`ROWS`] rows per
//! table, reused for every full chunk, and a one-row statement for the tail; values are bound
//! in place (`SQLITE_STATIC`: they outlive the step). Same connection, same transaction and the
//! same `libsqlite3-sys` as sqlx (one copy of SQLite is linked), so atomicity and crash safety
//! are exactly those of the sqlx path.

use crate::error::Error;
use crate::schema::{Table, Value};
use libsqlite3_sys as ffi;
use std::collections::HashMap;
use std::ffi::{CStr, c_int};
use std::ptr::NonNull;

/// Rows per multi-row statement (fewer if the table is wide: at most
/// [`super::sqlite::MAX_PARAMS`] parameters).
pub const ROWS: usize = 64;

/// One prepared statement, finalized on drop.
#[derive(Debug)]
struct Stmt(NonNull<ffi::sqlite3_stmt>);

impl Drop for Stmt {
    fn drop(&mut self) {
        // SAFETY: the statement was prepared by `Statements::prepare` and is finalized once.
        unsafe {
            ffi::sqlite3_finalize(self.0.as_ptr());
        }
    }
}

/// Prepared inserts per (table, rows), on a handle nobody else uses meanwhile.
#[derive(Debug)]
pub struct Statements {
    db: NonNull<ffi::sqlite3>,
    cache: HashMap<(&'static str, usize), Stmt>,
}

impl Statements {
    /// Wraps an open handle.
    ///
    /// # Safety
    /// `db` must be an open connection that nothing else uses until this value is dropped
    /// (the caller holds sqlx's `LockedSqliteHandle` for that long).
    pub unsafe fn new(db: NonNull<ffi::sqlite3>) -> Self {
        Statements {
            db,
            cache: HashMap::new(),
        }
    }

    /// The connection's last error message.
    fn error(&self, what: &str) -> Error {
        // SAFETY: `db` is open (see `new`); the message is copied before any other call.
        let msg = unsafe { CStr::from_ptr(ffi::sqlite3_errmsg(self.db.as_ptr())) };
        Error::Sqlite(format!("{what}: {}", msg.to_string_lossy()))
    }

    /// The statement inserting `rows` rows into `table`, prepared on first use.
    fn prepare(&mut self, table: &Table, rows: usize) -> Result<NonNull<ffi::sqlite3_stmt>, Error> {
        if let Some(s) = self.cache.get(&(table.name, rows)) {
            return Ok(s.0);
        }
        let one = format!("({})", vec!["?"; table.columns.len()].join(","));
        let mut sql = format!(
            "INSERT INTO {} ({}) VALUES ",
            table.name,
            table.column_list()
        );
        sql.push_str(&vec![one; rows].join(","));
        let mut stmt = std::ptr::null_mut();
        // SAFETY: `db` is open; the SQL text is valid for the given length; `stmt` is written.
        let rc = unsafe {
            ffi::sqlite3_prepare_v2(
                self.db.as_ptr(),
                sql.as_ptr().cast(),
                sql.len() as c_int,
                &mut stmt,
                std::ptr::null_mut(),
            )
        };
        let Some(stmt) = NonNull::new(stmt).filter(|_| rc == ffi::SQLITE_OK) else {
            return Err(self.error(&format!("preparing an insert into {}", table.name)));
        };
        self.cache.insert((table.name, rows), Stmt(stmt));
        Ok(stmt)
    }

    /// Inserts rows (flattened, `table.columns.len()` values each).
    pub fn insert(&mut self, table: &Table, values: &[Value]) -> Result<(), Error> {
        let cols = table.columns.len();
        let per = ROWS.min(super::sqlite::MAX_PARAMS / cols).max(1);
        let mut chunks = values.chunks_exact(per * cols);
        for chunk in chunks.by_ref() {
            let stmt = self.prepare(table, per)?;
            self.run(table, stmt, chunk)?;
        }
        for row in chunks.remainder().chunks_exact(cols) {
            let stmt = self.prepare(table, 1)?;
            self.run(table, stmt, row)?;
        }
        Ok(())
    }

    /// Binds `values` to `stmt` (one per parameter), steps it once and resets it.
    fn run(
        &self,
        table: &Table,
        stmt: NonNull<ffi::sqlite3_stmt>,
        values: &[Value],
    ) -> Result<(), Error> {
        let s = stmt.as_ptr();
        for (i, v) in values.iter().enumerate() {
            let i = i as c_int + 1;
            // SAFETY: `s` is a live statement with `values.len()` parameters; text is bound
            // SQLITE_STATIC and `values` outlives the step below (the bindings are cleared
            // by the next bind or never read again after the reset).
            let rc = unsafe {
                match v {
                    Value::Null => ffi::sqlite3_bind_null(s, i),
                    Value::Int(x) => ffi::sqlite3_bind_int64(s, i, *x),
                    Value::Real(x) => ffi::sqlite3_bind_double(s, i, *x),
                    Value::Text(t) => bind_text(s, i, t),
                    Value::Static(t) => bind_text(s, i, t),
                }
            };
            if rc != ffi::SQLITE_OK {
                return Err(self.error(&format!("binding a value for {}", table.name)));
            }
        }
        // SAFETY: `s` is live and fully bound.
        let rc = unsafe { ffi::sqlite3_step(s) };
        // SAFETY: as above; the reset's own code repeats the step's error, checked below.
        unsafe {
            ffi::sqlite3_reset(s);
        }
        if rc != ffi::SQLITE_DONE {
            return Err(self.error(&format!("inserting into {}", table.name)));
        }
        Ok(())
    }
}

/// Binds `t` without copying.
///
/// # Safety
/// `s` is a live statement with parameter `i`; `t` outlives the next step of `s`.
unsafe fn bind_text(s: *mut ffi::sqlite3_stmt, i: c_int, t: &str) -> c_int {
    // SAFETY: see above; SQLITE_STATIC (no destructor) as `t` outlives the step.
    unsafe { ffi::sqlite3_bind_text(s, i, t.as_ptr().cast(), t.len() as c_int, None) }
}
