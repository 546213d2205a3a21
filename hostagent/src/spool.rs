//! The spool: frames kept on disk while the parent (or the log server) is away.
//!
//! Format: the runtime's spool format (`docs/wire.md`, "Spool files") — a `Hello` frame
//! followed by data frames in the envelope — so a spool left behind by a killed agent can be
//! loaded with `p5-logserver import`. The file is a FIFO with a read cursor: frames are
//! appended at the end and read back, in order, in chunks when the link returns; once every
//! frame has been read back (and so is held in memory until acknowledged) the file is deleted.
//!
//! Policy: the spool is bounded (`--spool-max`, default 256 MiB). A frame that would grow it
//! past the bound is not written: the agent counts it as dropped (`status` shows it, and the
//! `dropped` field of the next `Events` frame carries it) and takes no sequence number for
//! it, so the stream stays gap-free. At the default rate (every metric of a 2-core VM, ≈ 95
//! values, 10 samples/s) an agent produces about 6.3 KB/s (≈ 6.7 bytes per value), i.e.
//! ≈ 3.8 MB per 10-minute outage; the default bound holds about 11 hours.
//!
//! When the agent is stopped while its upstream is still unreachable, it waits
//! [`crate::uplink::DRAIN_TIMEOUT`] and then leaves every undelivered frame, in order, in its
//! spool file ([`crate::outbox::Outbox::persist_remaining`]) for `p5-logserver import`.

use p5_wire::frame;
use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Most bytes read back per step.
pub const READ_CHUNK: usize = 256 * 1024;
/// Default bound of the spool.
pub const DEFAULT_MAX_BYTES: u64 = 256 << 20;

/// An open spool file.
#[derive(Debug)]
pub struct Spool {
    file: File,
    path: PathBuf,
    /// Bytes in the file.
    len: u64,
    /// Offset of the first frame not yet read back.
    read: u64,
    /// Offset of the first data frame (after the Hello).
    start: u64,
}

impl Spool {
    /// Creates (truncating) the spool at `path` and writes `hello`.
    pub fn create(path: &Path, hello: &[u8]) -> io::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(path)?;
        file.write_all(hello)?;
        let n = hello.len() as u64;
        Ok(Self {
            file,
            path: path.to_owned(),
            len: n,
            read: n,
            start: n,
        })
    }

    /// Bytes of frames not yet read back.
    pub fn pending_bytes(&self) -> u64 {
        self.len - self.read
    }

    /// Bytes of frames in the file (read back or not).
    pub fn data_bytes(&self) -> u64 {
        self.len - self.start
    }

    /// True if every frame was read back.
    pub fn drained(&self) -> bool {
        self.read >= self.len
    }

    /// Appends one encoded frame.
    pub fn append(&mut self, f: &[u8]) -> io::Result<()> {
        self.file.write_all_at(f, self.len)?;
        self.len += f.len() as u64;
        Ok(())
    }

    /// Reads back up to about [`READ_CHUNK`] bytes of whole frames, in order. A damaged
    /// frame (the disk lied) ends the spool: what follows it is skipped and reported.
    pub fn read_back(&mut self) -> io::Result<Vec<Vec<u8>>> {
        let want = (self.len - self.read).min(READ_CHUNK as u64) as usize;
        let mut buf = vec![0u8; want];
        self.file.read_exact_at(&mut buf, self.read)?;
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < buf.len() {
            match frame::decode(&buf[pos..]) {
                Ok((_, n)) => {
                    out.push(buf[pos..pos + n].to_vec());
                    pos += n;
                }
                Err(p5_wire::DecodeError::Truncated { need }) if out.is_empty() => {
                    // One frame larger than the chunk: read exactly it.
                    let mut big = vec![0u8; buf.len() + need];
                    self.file.read_exact_at(&mut big, self.read)?;
                    self.read += big.len() as u64;
                    out.push(big);
                    return Ok(out);
                }
                Err(p5_wire::DecodeError::Truncated { .. }) => break,
                Err(e) => {
                    tracing::error!(path = %self.path.display(), "spool damaged, rest skipped: {e}");
                    self.read = self.len;
                    return Ok(out);
                }
            }
        }
        self.read += pos as u64;
        Ok(out)
    }

    /// Flushes the file to disk.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// Deletes the file.
    pub fn remove(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_of(n: usize, fill: u8) -> Vec<u8> {
        let mut out = Vec::new();
        frame::encode(&mut out, 0x11, &vec![fill; n]);
        out
    }

    #[test]
    fn fifo_in_chunks_and_big_frames() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.p5spool");
        let hello = frame_of(10, 0);
        let mut s = Spool::create(&p, &hello).unwrap();
        let frames: Vec<Vec<u8>> = (0..100).map(|i| frame_of(5000 + i, i as u8)).collect();
        for f in &frames {
            s.append(f).unwrap();
        }
        let big = frame_of(READ_CHUNK * 2, 7);
        s.append(&big).unwrap();
        let mut back = Vec::new();
        while !s.drained() {
            let chunk = s.read_back().unwrap();
            assert!(!chunk.is_empty());
            back.extend(chunk);
        }
        assert_eq!(back.len(), 101);
        assert_eq!(&back[..100], &frames[..]);
        assert_eq!(back[100], big);
        // The file starts with the Hello, like a runtime spool.
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[..hello.len()], &hello[..]);
        s.remove();
        assert!(!p.exists());
    }
}
