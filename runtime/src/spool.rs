//! The spool file: frames that could not (yet) reach a log server, in the same framing as the
//! connection, so `p5-logserver import` reads it like a recorded connection.
//!
//! ```text
//! <dir>/<session or "default">-<pid>-<process_uid as 16 hex digits>.p5spool
//! Hello frame | data frames (StreamOpen, Events, StreamClose) in production order | [Goodbye]
//! ```
//!
//! In server mode the spool is a queue with two cursors: `acked` (everything before it is
//! durable at the server) and `sent` (everything before it has been queued on the current
//! connection). While a spool exists every new frame is appended to it, which keeps each
//! stream's frames in order; replay reads it back in bounded chunks. Once the whole file is
//! acknowledged it is deleted. In local-file mode it is simply the output file and is kept.

use p5_wire::DecodeError;
use p5_wire::frame;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Most bytes read from the spool per replay step.
pub const REPLAY_CHUNK: usize = 256 * 1024;

/// File name for a process's spool.
pub fn file_name(session: &str, pid: u32, uid: u64) -> String {
    let session: String = session
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    let session = if session.is_empty() || session.starts_with('.') {
        format!("default{session}")
    } else {
        session
    };
    format!("{session}-{pid}-{uid:016x}.p5spool")
}

/// An open spool file.
#[derive(Debug)]
pub struct Spool {
    file: File,
    path: PathBuf,
    /// File length (everything appended so far).
    pub len: u64,
    /// Offset after the last frame the server acknowledged.
    pub acked: u64,
    /// Offset after the last frame queued on the current connection.
    pub sent: u64,
}

impl Spool {
    /// Creates (or truncates) the spool at `path` and writes the Hello frame.
    pub fn create(path: &Path, hello: &[u8]) -> io::Result<Spool> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        file.write_all(hello)?;
        let len = hello.len() as u64;
        Ok(Spool {
            file,
            path: path.to_path_buf(),
            len,
            acked: len,
            sent: len,
        })
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The descriptor (a forked child closes its inherited copy).
    pub fn raw_fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.file.as_raw_fd()
    }

    /// Appends one encoded frame; on failure the file is cut back so no torn frame remains.
    pub fn append(&mut self, frame: &[u8]) -> io::Result<u64> {
        match self.file.write_all_at(frame, self.len) {
            Ok(()) => {
                self.len += frame.len() as u64;
                Ok(self.len)
            }
            Err(e) => {
                let _ = self.file.set_len(self.len);
                Err(e)
            }
        }
    }

    /// True when every byte has been queued on the current connection.
    pub fn fully_sent(&self) -> bool {
        self.sent >= self.len
    }

    /// Reads the frames after `sent` (at least one whole frame if any, about
    /// [`REPLAY_CHUNK`] bytes at most otherwise) and advances `sent` past them. Each frame is
    /// returned with the offset just after it. A corrupt tail is skipped (and reported).
    pub fn next_frames(&mut self) -> io::Result<Vec<(Vec<u8>, u64)>> {
        let mut out = Vec::new();
        if self.fully_sent() {
            return Ok(out);
        }
        let avail = (self.len - self.sent) as usize;
        let mut buf = vec![0u8; avail.min(REPLAY_CHUNK)];
        self.file.read_exact_at(&mut buf, self.sent)?;
        if let Some(h) = buf.first_chunk::<{ frame::HEADER_LEN }>()
            && let Ok((len, _)) = frame::parse_header(h, frame::MAX_FRAME_LEN)
        {
            let need = frame::HEADER_LEN + len as usize;
            if need > buf.len() && need <= avail {
                buf.resize(need, 0);
                self.file.read_exact_at(&mut buf, self.sent)?;
            }
        }
        let mut pos = 0;
        while pos < buf.len() {
            match frame::decode(&buf[pos..]) {
                Ok((_, n)) => {
                    out.push((buf[pos..pos + n].to_vec(), self.sent + (pos + n) as u64));
                    pos += n;
                }
                Err(DecodeError::Truncated { .. }) if !out.is_empty() => break,
                Err(e) => {
                    // Only a bug or outside tampering gets here; skip the damaged rest.
                    self.sent = self.len;
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("spool {} corrupt: {e}", self.path.display()),
                    ));
                }
            }
        }
        self.sent += pos as u64;
        Ok(out)
    }

    /// Flushes file data to stable storage.
    pub fn sync(&self) {
        let _ = self.file.sync_data();
    }

    /// Deletes the file.
    pub fn remove(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p5_wire::frame::Frames;

    fn tmp(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("p5-spool-test-{}-{name}", std::process::id()))
    }

    #[test]
    fn names_are_safe() {
        assert_eq!(file_name("", 7, 0xab), "default-7-00000000000000ab.p5spool");
        assert_eq!(file_name("a/b c", 1, 1), "a_b_c-1-0000000000000001.p5spool");
        assert_eq!(
            file_name("..", 1, 1),
            "default..-1-0000000000000001.p5spool"
        );
    }

    #[test]
    fn append_and_replay_in_chunks() {
        let path = tmp("replay");
        let mut hello = Vec::new();
        frame::encode(&mut hello, 0x01, b"hello");
        let mut s = Spool::create(&path, &hello).unwrap();
        let mut frames = Vec::new();
        for i in 0..40u32 {
            let mut f = Vec::new();
            frame::encode(&mut f, 0x11, &vec![i as u8; 20_000 + i as usize]);
            s.append(&f).unwrap();
            frames.push(f);
        }
        let mut got = Vec::new();
        loop {
            let batch = s.next_frames().unwrap();
            if batch.is_empty() {
                break;
            }
            assert!(batch.iter().map(|(f, _)| f.len()).sum::<usize>() <= REPLAY_CHUNK);
            got.extend(batch);
        }
        assert!(s.fully_sent());
        assert_eq!(got.len(), 40);
        for (i, (f, end)) in got.iter().enumerate() {
            assert_eq!(f, &frames[i]);
            assert_eq!(
                *end,
                (hello.len() + frames[..=i].iter().map(Vec::len).sum::<usize>()) as u64
            );
        }
        // Rewind (a reconnect) replays from the acknowledged offset.
        s.acked = got[9].1;
        s.sent = s.acked;
        assert_eq!(s.next_frames().unwrap()[0].0, frames[10]);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(Frames::new(&bytes).count(), 41);
        s.remove();
        assert!(!path.exists());
    }

    #[test]
    fn oversized_frame_is_read_whole() {
        let path = tmp("big");
        let mut s = Spool::create(&path, &[]).unwrap();
        let mut f = Vec::new();
        frame::encode(&mut f, 0x11, &vec![7u8; REPLAY_CHUNK * 2]);
        s.append(&f).unwrap();
        let got = s.next_frames().unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, f);
        s.remove();
    }
}
