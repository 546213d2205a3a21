//! `p5-logserver import`: loading runtime spool files ([`crate::spool`]) into the store.
//!
//! Imported frames go through the same session writer as live ones, so deduplication is the
//! same: frames that also reached a log server live (or a spool imported twice) are stored once.
//! A spool file has no receipt times, so:
//!
//! - the `StoreProcess` record has `t_s = 0` and `conn_id = `[`IMPORTED_CONN_ID`] (`u64::MAX`),
//!   which marks the process's data as imported;
//! - `StoreData` records have `t_s = 0`, meaning "no receipt time": readers must not use them
//!   as clock samples (the `t_p` in the frames is the spool write time, with no server time to
//!   pair it with);
//! - pings in the file are ignored, and duplicates leave no `StoreSample`;
//! - the import ends each process with a `StoreDisconnect` (`t_s = 0`) whose reason names the
//!   file.
//!
//! Clock offsets for such a process must come from elsewhere (live frames of the same process,
//! or its `start_mono_ns` against the server's CLOCK_MONOTONIC start when both ran on one host).
//! A spool file may hold several `Hello` sections (one per process writing it in turn). A torn
//! or corrupt tail (the process crashed while writing) ends the import of that file; everything
//! before it is imported and the damage is reported.

use crate::clock::RunClock;
use crate::config::StoreConfig;
use crate::error::{Error, io_at};
use crate::recover::RecoveryReport;
use crate::session;
use crate::spool::SpoolReader;
use crate::store::{DataKey, Item, SessionSender, Store, WriterStats};
use p5_wire::data::{DataHeader, validate_client_frame};
use p5_wire::frame::FrameType;
use p5_wire::hello::Hello;
use p5_wire::store as wstore;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `conn_id` of the `StoreProcess` record of an imported process.
pub const IMPORTED_CONN_ID: u64 = u64::MAX;

/// What happened to one spool file.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FileImport {
    /// The file.
    pub path: PathBuf,
    /// Processes (Hello sections) found, as (session, process uid).
    pub processes: Vec<(String, u64)>,
    /// Data frames handed to the store (duplicates included).
    pub data_frames: u64,
    /// Events in those frames.
    pub events: u64,
    /// Frames ignored (pings, goodbyes).
    pub ignored: u64,
    /// Damage that ended the file early; what came before it was imported.
    pub tail: Option<String>,
    /// Why nothing (more) could be imported from this file.
    pub error: Option<String>,
}

/// What an import did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ImportReport {
    /// Per file.
    pub files: Vec<FileImport>,
    /// Per session writer: frames stored, duplicates, bytes.
    pub sessions: Vec<(String, WriterStats)>,
    /// Start-up recovery of the store (an import opens it like a server does).
    pub recovery: RecoveryReport,
}

impl ImportReport {
    /// True if some file could not be imported.
    pub fn has_errors(&self) -> bool {
        self.files.iter().any(|f| f.error.is_some())
    }
}

/// Imports spool files into the store at `root` (which must not be in use by a running
/// server: the store lock is taken). Blocking.
pub fn import_files(
    root: &Path,
    files: &[PathBuf],
    config: StoreConfig,
) -> Result<ImportReport, Error> {
    let store = Store::open(root, Arc::new(RunClock::start()), config)?;
    let recovery = store.recovery().clone();
    // Queue from a plain thread: `blocking_send` must not run on an async runtime's thread,
    // and the caller may be on one.
    let files = std::thread::scope(|s| {
        s.spawn(|| {
            files
                .iter()
                .map(|p| import_one(&store, p))
                .collect::<Vec<_>>()
        })
        .join()
    })
    .map_err(|_| Error::io("import thread failed", std::io::Error::other("panic")))?;
    let sessions = store.close();
    Ok(ImportReport {
        files,
        sessions,
        recovery,
    })
}

fn import_one(store: &Store, path: &Path) -> FileImport {
    let mut out = FileImport {
        path: path.to_path_buf(),
        ..FileImport::default()
    };
    if let Err(e) = import_frames(store, path, &mut out) {
        out.error = Some(crate::error::chain(&e));
    }
    match (&out.error, &out.tail) {
        (Some(e), _) => tracing::error!(file = %path.display(), "import failed: {e}"),
        (None, Some(t)) => tracing::warn!(file = %path.display(), "import stopped early: {t}"),
        (None, None) => tracing::info!(
            file = %path.display(),
            frames = out.data_frames,
            events = out.events,
            "imported"
        ),
    }
    out
}

struct Current {
    sender: SessionSender,
    uid: u64,
}

impl Current {
    fn finish(self, reason: &str) -> Result<(), Error> {
        let mut rec = Vec::new();
        wstore::encode_disconnect(&mut rec, 0, self.uid, reason);
        self.sender.blocking_send(Item::record(rec))
    }
}

fn import_frames(store: &Store, path: &Path, out: &mut FileImport) -> Result<(), Error> {
    let file = std::fs::File::open(path).map_err(io_at("cannot open spool file", path))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let done_reason = format!("imported from spool file {name}");
    let mut reader = SpoolReader::new(file);
    let mut current: Option<Current> = None;
    loop {
        let offset = reader.offset();
        let f = match reader.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                out.tail = Some(e.to_string());
                break;
            }
        };
        let events = match validate_client_frame(f.ty(), f.body()) {
            Ok(n) => n,
            Err(e) => {
                out.tail = Some(format!("invalid frame at offset {offset}: {e}"));
                break;
            }
        };
        match f.frame_type() {
            Some(FrameType::Hello) => {
                let hello = Hello::decode_body(f.body()).map_err(|e| {
                    Error::Invalid(format!("invalid hello at offset {offset}: {e}"))
                })?;
                let session = session::resolve(&hello.identity.session)?.to_owned();
                let sender = store.session(&session)?;
                if let Some(prev) = current.take() {
                    prev.finish(&done_reason)?;
                }
                let mut rec = Vec::new();
                wstore::encode_process(&mut rec, 0, IMPORTED_CONN_ID, f.body());
                sender.blocking_send(Item::record(rec))?;
                let uid = hello.identity.process_uid;
                out.processes.push((session, uid));
                current = Some(Current { sender, uid });
            }
            Some(t) if t.is_data() => {
                let Some(cur) = &current else {
                    return Err(Error::Invalid(
                        "spool file does not start with a hello frame".into(),
                    ));
                };
                let h = DataHeader::peek(f.body()).map_err(|e| {
                    Error::Invalid(format!("invalid data frame at offset {offset}: {e}"))
                })?;
                let key = DataKey {
                    process_uid: cur.uid,
                    stream: h.stream,
                    seq: h.seq,
                    t_s: 0,
                    t_p: h.t_p,
                    timed: false,
                };
                cur.sender.blocking_send(Item::data(f, key, None))?;
                out.data_frames += 1;
                out.events += events as u64;
            }
            Some(FrameType::Ping | FrameType::Goodbye) if current.is_some() => out.ignored += 1,
            _ => {
                out.tail = Some(format!(
                    "unexpected frame type {:#04x} at offset {offset}",
                    f.ty()
                ));
                break;
            }
        }
    }
    match current {
        Some(cur) => cur.finish(&done_reason),
        None => Err(Error::Invalid(match out.tail.take() {
            Some(t) => format!("spool file holds no valid hello frame ({t})"),
            None => "spool file holds no hello frame".into(),
        })),
    }
}
