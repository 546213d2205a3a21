//! Reading runtime spool files: what a process writes locally when it cannot reach a log
//! server. A spool file is a `Hello` frame followed by frames in the ordinary frame envelope
//! (data frames, possibly pings and a goodbye), exactly as they would have been sent; a
//! process that crashed may leave the last frame incomplete.

use crate::receiver::ReceivedFrame;
use p5_wire::DecodeError;
use p5_wire::frame::{self, MAX_FRAME_LEN};
use std::io::{self, BufReader, Read};

/// Why a spool file could not be read further.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    /// The file ends inside a frame (a crashed writer).
    #[error("file ends inside the frame at offset {offset}")]
    Truncated {
        /// Offset of the incomplete frame.
        offset: u64,
    },
    /// Corrupt bytes.
    #[error("corrupt frame at offset {offset}: {cause}")]
    Corrupt {
        /// Offset of the bad frame.
        offset: u64,
        /// The decoder's error (in the message, not a `source`).
        cause: DecodeError,
    },
    /// Reading failed.
    #[error("read failed: {0}")]
    Io(io::Error),
}

impl From<io::Error> for SpoolError {
    fn from(e: io::Error) -> Self {
        SpoolError::Io(e)
    }
}

/// A streaming frame reader over a spool file (one frame in memory at a time).
#[derive(Debug)]
pub struct SpoolReader<R> {
    inner: BufReader<R>,
    offset: u64,
}

impl<R: Read> SpoolReader<R> {
    /// Wraps a reader.
    pub fn new(inner: R) -> Self {
        Self {
            inner: BufReader::with_capacity(256 * 1024, inner),
            offset: 0,
        }
    }

    /// Offset of the next frame.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next frame (with `t_s = 0`), `None` at a clean end of file.
    pub fn next_frame(&mut self) -> Result<Option<ReceivedFrame>, SpoolError> {
        let offset = self.offset;
        let mut h = [0u8; frame::HEADER_LEN];
        match crate::reader::read_up_to(&mut self.inner, &mut h)? {
            0 => return Ok(None),
            n if n < h.len() => return Err(SpoolError::Truncated { offset }),
            _ => {}
        }
        let (len, crc) =
            frame::parse_header(&h, MAX_FRAME_LEN).map_err(|source| SpoolError::Corrupt {
                offset,
                cause: source,
            })?;
        let mut f = ReceivedFrame::with_payload_len(len as usize, 0);
        if crate::reader::read_up_to(&mut self.inner, f.payload_mut())? < len as usize {
            return Err(SpoolError::Truncated { offset });
        }
        frame::check(crc, f.payload()).map_err(|source| SpoolError::Corrupt {
            offset,
            cause: source,
        })?;
        self.offset += (frame::HEADER_LEN + len as usize) as u64;
        Ok(Some(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_frames_and_detects_truncation() {
        let mut b = Vec::new();
        frame::encode(&mut b, 0x21, &1u64.to_le_bytes());
        frame::encode(&mut b, 0x21, &2u64.to_le_bytes());
        let mut r = SpoolReader::new(&b[..]);
        assert_eq!(r.next_frame().unwrap().unwrap().body(), 1u64.to_le_bytes());
        assert_eq!(r.offset(), 17);
        assert!(r.next_frame().unwrap().is_some());
        assert!(r.next_frame().unwrap().is_none());
        let mut r = SpoolReader::new(&b[..b.len() - 1]);
        r.next_frame().unwrap();
        assert!(matches!(
            r.next_frame(),
            Err(SpoolError::Truncated { offset: 17 })
        ));
    }

    proptest! {
        /// Random bytes never panic the spool reader.
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
            let mut r = SpoolReader::new(&bytes[..]);
            for _ in 0..bytes.len() + 1 {
                match r.next_frame() {
                    Ok(Some(f)) => { let _ = p5_wire::data::validate_client_frame(f.ty(), f.body()); }
                    _ => break,
                }
            }
        }
    }
}
