//! Where things live in a store directory:
//!
//! ```text
//! STORE/.lock                         flock()ed by the one process writing the store
//! STORE/<session>/00000000.p5seg      segments, index as (at least) 8 digits
//! STORE/<session>/recovery.jsonl      one JSON line per torn tail repaired at start-up
//! ```
//!
//! Session names never start with `.` ([`crate::session`]), so they cannot collide with
//! `.lock`. Segment indices increase within a session and may have gaps (a segment whose
//! header was torn is removed by recovery).

use crate::error::{Error, io_at};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// File extension of segments.
pub const SEGMENT_EXT: &str = "p5seg";
/// Name of the lock file in the store root.
pub const LOCK_FILE: &str = ".lock";
/// Name of the repair log in a session directory.
pub const RECOVERY_LOG: &str = "recovery.jsonl";

/// The file name of segment `index`.
pub fn segment_file_name(index: u64) -> String {
    format!("{index:08}.{SEGMENT_EXT}")
}

/// The index of a segment file name, or `None` if `name` is not one.
pub fn parse_segment_file_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(SEGMENT_EXT)?.strip_suffix('.')?;
    if stem.len() < 8 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// Makes a directory's entries durable (new files, renames, removals).
pub fn sync_dir(dir: &Path) -> Result<(), Error> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_at("cannot sync directory", dir))
}

/// Exclusive ownership of a store directory for the lifetime of the value (an `flock` on
/// `STORE/.lock`, released by the kernel when the process exits, even on SIGKILL).
#[derive(Debug)]
pub struct StoreLock {
    _file: File,
    path: PathBuf,
}

impl StoreLock {
    /// Takes the lock or fails with [`Error::Locked`] without waiting.
    pub fn acquire(root: &Path) -> Result<Self, Error> {
        let path = root.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_at("cannot open lock file", &path))?;
        // SAFETY: the descriptor is owned by `file`, which outlives this call.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::WouldBlock {
                return Err(Error::Locked {
                    root: root.to_path_buf(),
                    lock: path,
                });
            }
            return Err(Error::io(format!("cannot lock {}", path.display()), e));
        }
        Ok(Self { _file: file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names() {
        assert_eq!(segment_file_name(7), "00000007.p5seg");
        assert_eq!(segment_file_name(123_456_789), "123456789.p5seg");
        assert_eq!(parse_segment_file_name("00000007.p5seg"), Some(7));
        assert_eq!(
            parse_segment_file_name("123456789.p5seg"),
            Some(123_456_789)
        );
        for bad in [
            "7.p5seg",
            "0000000a.p5seg",
            "00000007.seg",
            "00000007p5seg",
            ".p5seg",
        ] {
            assert_eq!(parse_segment_file_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn lock_is_exclusive() {
        let d = tempfile::tempdir().unwrap();
        let a = StoreLock::acquire(d.path()).unwrap();
        assert!(matches!(
            StoreLock::acquire(d.path()),
            Err(Error::Locked { .. })
        ));
        drop(a);
        StoreLock::acquire(d.path()).unwrap();
    }
}
