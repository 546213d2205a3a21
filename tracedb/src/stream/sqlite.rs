//! A SQLite cursor read ahead on a thread of its own.
//!
//! The thread opens the database read-only (without SQLite's mutex: the connection is the
//! thread's alone), prepares and binds the query and steps it, copying each row into a
//! [`Batch`] of up to [`BATCH`] rows — integers in place, texts into one arena per batch —
//! and sends full batches over a channel of [`AHEAD`]; the consumer hands empty batches back
//! for reuse. So SQLite's B-tree walks run on one core while the cursor's consumer encodes
//! on another, and a cursor holds at most `AHEAD + 2` batches whatever the table's size.
//! When the cursor is dropped early, the thread notices at its next hand-over and closes
//! its connection. An error (opening, preparing, a damaged page) is handed over in place of
//! the next batch, once.

use crate::error::Error;
use libsqlite3_sys as ffi;
use std::borrow::Cow;
use std::ffi::{CStr, CString, c_int};
use std::path::Path;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender};

/// Rows per batch.
pub const BATCH: usize = 1024;
/// Batches read ahead.
pub const AHEAD: usize = 2;

/// An owned read-only SQLite connection, closed on drop.
#[derive(Debug)]
pub struct RawDb(NonNull<ffi::sqlite3>);

impl Drop for RawDb {
    fn drop(&mut self) {
        // SAFETY: the handle is open and its statements are finalized (`Stmt` borrows it).
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

    /// Opens `path` read-only, for one thread.
    pub fn open(path: &Path) -> Result<RawDb, Error> {
        let c = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| Error::Sqlite(format!("{}: a NUL in the path", path.display())))?;
        let mut raw = std::ptr::null_mut();
        let flags = ffi::SQLITE_OPEN_READONLY | ffi::SQLITE_OPEN_NOMUTEX;
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

    /// Prepares `sql` and binds the integer parameters.
    fn prepare(&self, sql: &str, params: &[i64]) -> Result<Stmt<'_>, Error> {
        let mut raw = std::ptr::null_mut();
        let len = c_int::try_from(sql.len()).map_err(|_| Error::Sqlite("query too long".into()))?;
        // SAFETY: the handle is open; the text is valid for `len` bytes.
        let rc = unsafe {
            ffi::sqlite3_prepare_v2(
                self.0.as_ptr(),
                sql.as_ptr().cast(),
                len,
                &mut raw,
                std::ptr::null_mut(),
            )
        };
        let Some(s) = NonNull::new(raw).filter(|_| rc == ffi::SQLITE_OK) else {
            return Err(self.error("preparing a read"));
        };
        let stmt = Stmt { s, db: self };
        for (i, p) in params.iter().enumerate() {
            // SAFETY: the statement is live; SQLite checks the 1-based index.
            if unsafe { ffi::sqlite3_bind_int64(s.as_ptr(), i as c_int + 1, *p) } != ffi::SQLITE_OK
            {
                return Err(self.error("binding a read parameter"));
            }
        }
        Ok(stmt)
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

/// A prepared statement, finalized on drop (before its connection closes: it borrows it).
struct Stmt<'db> {
    s: NonNull<ffi::sqlite3_stmt>,
    db: &'db RawDb,
}

impl Drop for Stmt<'_> {
    fn drop(&mut self) {
        // SAFETY: prepared by `RawDb::prepare`, finalized once.
        unsafe {
            ffi::sqlite3_finalize(self.s.as_ptr());
        }
    }
}

/// One column of a row.
#[derive(Debug, Clone, Copy)]
enum Cell {
    Null,
    Int(i64),
    /// Start and length in the batch's text arena.
    Text(u32, u32),
}

/// Rows copied out of SQLite.
#[derive(Debug, Default)]
pub struct Batch {
    cols: usize,
    rows: usize,
    cells: Vec<Cell>,
    text: String,
}

impl Batch {
    fn clear(&mut self) {
        self.rows = 0;
        self.cells.clear();
        self.text.clear();
    }

    fn cell(&self, row: usize, col: usize) -> Cell {
        if col >= self.cols {
            return Cell::Null;
        }
        self.cells
            .get(row * self.cols + col)
            .copied()
            .unwrap_or(Cell::Null)
    }

    /// An integer column (a text column is parsed; `None` if NULL or not a number).
    pub fn int(&self, row: usize, col: usize) -> Option<i64> {
        match self.cell(row, col) {
            Cell::Null => None,
            Cell::Int(v) => Some(v),
            Cell::Text(s, n) => self
                .text
                .get(s as usize..(s + n) as usize)?
                .trim()
                .parse()
                .ok(),
        }
    }

    /// A text column (an integer column is printed).
    pub fn text(&self, row: usize, col: usize) -> Option<Cow<'_, str>> {
        match self.cell(row, col) {
            Cell::Null => None,
            Cell::Int(v) => Some(Cow::Owned(v.to_string())),
            Cell::Text(s, n) => self
                .text
                .get(s as usize..(s + n) as usize)
                .map(Cow::Borrowed),
        }
    }

    /// Copies the statement's current row.
    fn push(&mut self, s: NonNull<ffi::sqlite3_stmt>) {
        for c in 0..self.cols as c_int {
            // SAFETY: the statement has a current row with `cols` columns; a text pointer
            // is valid for `sqlite3_column_bytes` bytes until the next step.
            let cell = unsafe {
                match ffi::sqlite3_column_type(s.as_ptr(), c) {
                    ffi::SQLITE_NULL => Cell::Null,
                    ffi::SQLITE_TEXT | ffi::SQLITE_BLOB => {
                        let p = ffi::sqlite3_column_text(s.as_ptr(), c);
                        let n = ffi::sqlite3_column_bytes(s.as_ptr(), c).max(0) as usize;
                        let bytes = if p.is_null() {
                            &[][..]
                        } else {
                            std::slice::from_raw_parts(p, n)
                        };
                        let start = self.text.len();
                        self.text.push_str(&String::from_utf8_lossy(bytes));
                        Cell::Text(start as u32, (self.text.len() - start) as u32)
                    }
                    _ => Cell::Int(ffi::sqlite3_column_int64(s.as_ptr(), c)),
                }
            };
            self.cells.push(cell);
        }
        self.rows += 1;
    }
}

/// The consumer's side of a read-ahead cursor.
#[derive(Debug)]
pub struct Prefetch {
    rx: Receiver<Result<Batch, Error>>,
    back: SyncSender<Batch>,
    batch: Batch,
    pos: usize,
    done: bool,
}

impl Prefetch {
    /// Starts the reader thread for `sql` on the database at `path`.
    pub fn start(path: Arc<Path>, sql: &'static str, params: Vec<i64>) -> Prefetch {
        let (tx, rx) = std::sync::mpsc::sync_channel(AHEAD);
        let (back, spare) = std::sync::mpsc::sync_channel(AHEAD + 2);
        let spawned = std::thread::Builder::new()
            .name("p5-tracedb-read".into())
            .spawn(move || {
                if let Err(e) = read(&path, sql, &params, &tx, &spare) {
                    let _ = tx.send(Err(e));
                }
            });
        let (rx, done) = match spawned {
            Ok(_) => (rx, false),
            Err(e) => {
                let (tx, rx) = std::sync::mpsc::sync_channel(1);
                let _ = tx.send(Err(Error::Sqlite(format!("starting a reader thread: {e}"))));
                (rx, false)
            }
        };
        Prefetch {
            rx,
            back,
            batch: Batch::default(),
            pos: 0,
            done,
        }
    }

    /// The next row: its batch and index.
    pub fn next(&mut self) -> Result<Option<(&Batch, usize)>, Error> {
        if self.pos >= self.batch.rows {
            if self.done {
                return Ok(None);
            }
            match self.rx.recv() {
                Ok(Ok(b)) => {
                    let old = std::mem::replace(&mut self.batch, b);
                    let _ = self.back.try_send(old);
                    self.pos = 0;
                }
                Ok(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                Err(_) => {
                    self.done = true;
                    return Ok(None);
                }
            }
            if self.batch.rows == 0 {
                self.done = true;
                return Ok(None);
            }
        }
        self.pos += 1;
        Ok(Some((&self.batch, self.pos - 1)))
    }
}

/// The reader thread: steps the query and hands over full batches until the end (an empty
/// batch) or until the consumer is gone.
fn read(
    path: &Path,
    sql: &str,
    params: &[i64],
    tx: &SyncSender<Result<Batch, Error>>,
    spare: &Receiver<Batch>,
) -> Result<(), Error> {
    let db = RawDb::open(path)?;
    // 32 MiB of page cache for the index walk; no mmap (memory stays bounded).
    db.exec("PRAGMA cache_size = -32768")?;
    let stmt = db.prepare(sql, params)?;
    // SAFETY: the statement is live.
    let cols = unsafe { ffi::sqlite3_column_count(stmt.s.as_ptr()) }.max(0) as usize;
    let fresh = |spare: &Receiver<Batch>| {
        let mut b = spare.try_recv().unwrap_or_default();
        b.clear();
        b.cols = cols;
        b
    };
    let mut batch = fresh(spare);
    loop {
        // SAFETY: the statement is live and bound; only this thread uses the connection.
        match unsafe { ffi::sqlite3_step(stmt.s.as_ptr()) } {
            ffi::SQLITE_ROW => {
                batch.push(stmt.s);
                if batch.rows == BATCH
                    && (tx.send(Ok(std::mem::replace(&mut batch, fresh(spare))))).is_err()
                {
                    return Ok(());
                }
            }
            ffi::SQLITE_DONE => {
                let last = batch.rows > 0;
                if last && tx.send(Ok(batch)).is_err() {
                    return Ok(());
                }
                // The end: an empty batch.
                let _ = tx.send(Ok(fresh(spare)));
                return Ok(());
            }
            _ => return Err(stmt.db.error("reading rows")),
        }
    }
}
