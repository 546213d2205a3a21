//! Bulk integer reads from SQLite on the connection's own handle.
//!
//! sqlx's SQLite driver runs every statement on a worker thread and hands each row over a
//! channel as an owned value: about 5 µs per row, so two million messages took ten seconds
//! to read. For the one bulk read (`p5 analyze` loading a session's messages), [`scan_i64`]
//! locks a pooled connection (`SqliteConnection::lock_handle`: the worker waits) and steps a
//! prepared statement on the very same `sqlite3` handle, reading integer columns in place —
//! the mirror of the bulk write path (`write::prepared`). Same connection, same read-only
//! open, same `libsqlite3-sys`.

use crate::error::Error;
use libsqlite3_sys as ffi;
use sqlx::SqlitePool;
use std::ffi::{CStr, c_int};
use std::ptr::NonNull;

/// A prepared statement, finalized on drop.
struct Stmt(NonNull<ffi::sqlite3_stmt>);

impl Drop for Stmt {
    fn drop(&mut self) {
        // SAFETY: prepared by `scan_i64`, finalized once.
        unsafe {
            ffi::sqlite3_finalize(self.0.as_ptr());
        }
    }
}

/// The connection's last error, as [`Error::Sqlite`].
fn error(db: NonNull<ffi::sqlite3>, what: &str) -> Error {
    // SAFETY: `db` is open; the message is copied before any other call on the handle.
    let msg = unsafe { CStr::from_ptr(ffi::sqlite3_errmsg(db.as_ptr())) };
    Error::Sqlite(format!("{what}: {}", msg.to_string_lossy()))
}

/// Runs `sql` with the integer parameters `params` and calls `each` with every row's first
/// `N` columns as integers (`None` for NULL; SQLite converts other types as
/// `sqlite3_column_int64` does). Returns the number of rows.
pub async fn scan_i64<const N: usize>(
    pool: &SqlitePool,
    sql: &str,
    params: &[i64],
    mut each: impl FnMut(&[Option<i64>; N]),
) -> Result<u64, Error> {
    let mut conn = pool.acquire().await?;
    let mut locked = conn.lock_handle().await?;
    let db = locked.as_raw_handle();
    let mut raw = std::ptr::null_mut();
    // SAFETY: `db` is open and ours while `locked` lives; the SQL text is valid for its length.
    let rc = unsafe {
        ffi::sqlite3_prepare_v2(
            db.as_ptr(),
            sql.as_ptr().cast(),
            c_int::try_from(sql.len()).map_err(|_| Error::Sqlite("query too long".into()))?,
            &mut raw,
            std::ptr::null_mut(),
        )
    };
    let Some(stmt) = NonNull::new(raw).filter(|_| rc == ffi::SQLITE_OK) else {
        return Err(error(db, "preparing a read"));
    };
    let stmt = Stmt(stmt);
    let s = stmt.0.as_ptr();
    // SAFETY: `s` is a live statement.
    let cols = unsafe { ffi::sqlite3_column_count(s) };
    if usize::try_from(cols).ok() != Some(N) {
        return Err(Error::Sqlite(format!(
            "read returns {cols} columns, not {N}"
        )));
    }
    for (i, p) in params.iter().enumerate() {
        // SAFETY: `s` is live; parameter indexes are 1-based and checked by SQLite.
        if unsafe { ffi::sqlite3_bind_int64(s, i as c_int + 1, *p) } != ffi::SQLITE_OK {
            return Err(error(db, "binding a read parameter"));
        }
    }
    let mut row = [None; N];
    let mut n = 0u64;
    loop {
        // SAFETY: `s` is live and bound; the handle is not used by anyone else meanwhile.
        match unsafe { ffi::sqlite3_step(s) } {
            ffi::SQLITE_ROW => {}
            ffi::SQLITE_DONE => break,
            _ => return Err(error(db, "reading rows")),
        }
        for (c, v) in row.iter_mut().enumerate() {
            let c = c as c_int;
            // SAFETY: `s` has a current row with `N` columns.
            *v = unsafe {
                (ffi::sqlite3_column_type(s, c) != ffi::SQLITE_NULL)
                    .then(|| ffi::sqlite3_column_int64(s, c))
            };
        }
        each(&row);
        n += 1;
    }
    drop(stmt);
    drop(locked);
    Ok(n)
}
