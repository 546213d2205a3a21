//! The log server's session store: segment files of checksummed records.
//!
//! A session is a directory; each segment file starts with a fixed header and continues with
//! records in the frame envelope of [`crate::frame`] (types 0x81..). One segment belongs to one
//! log-server run, whose relative clock (`t_s`) all its records use; the header carries that
//! run's CLOCK_MONOTONIC start so runs on the same host can be put on one time base.
//!
//! ```text
//! SegmentHeader (64 bytes): magic "P5SEGMT\0" | u32 version | u32 header_len (64)
//!                           | u64 server_run_id | u64 server_start_mono_ns
//!                           | i64 server_start_wall_ns | u64 segment_index
//!                           | [16] server_boot_id   (absent in 48-byte headers: zero)
//! StoreProcess:    u64 t_s | u64 conn_id | Hello body
//! StoreData:       u64 t_s | u64 process_uid | u8 frame type | frame body (as received)
//! StoreSample:     u64 t_s | u64 process_uid | u64 t_p | u64 echo_t_s | u64 echo_t_p | u8 source
//! StoreDisconnect: u64 t_s | u64 process_uid | str reason
//! ```

use crate::codec::{Reader, put_str};
use crate::error::{DecodeError, Result};
use crate::frame::{self, FrameType};
use crate::hello::Hello;

/// First bytes of every segment file.
pub const SEGMENT_MAGIC: &[u8; 8] = b"P5SEGMT\0";
/// Segment format version written by this implementation.
pub const SEGMENT_VERSION: u32 = 1;
/// Size of [`SegmentHeader`] as written by this version.
pub const SEGMENT_HEADER_LEN: usize = 64;
/// Smallest header a reader accepts (version 1 as first written, without the boot id).
pub const MIN_SEGMENT_HEADER_LEN: usize = 48;
/// Largest segment header a reader accepts (later versions may write longer ones).
pub const MAX_SEGMENT_HEADER_LEN: usize = 64 * 1024;
/// Largest store record: a `StoreData` record wraps a whole received frame (up to
/// `MAX_FRAME_LEN`) and adds `t_s`, `process_uid` and the frame type byte (17 bytes).
pub const MAX_RECORD_LEN: u32 = frame::MAX_FRAME_LEN + 17;

/// The header at the start of each segment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Format version.
    pub version: u32,
    /// Random id of the log-server run that wrote the segment.
    pub server_run_id: u64,
    /// CLOCK_MONOTONIC at that run's start, ns (t_s = 0).
    pub server_start_mono_ns: u64,
    /// Wall clock at that run's start, ns since the epoch (label only).
    pub server_start_wall_ns: i64,
    /// Position of the segment within the session (0, 1, ...).
    pub segment_index: u64,
    /// Boot id of the server's host (the UUID's 16 bytes; zero if unknown). A process whose
    /// handshake carries the same boot id shares the server's CLOCK_MONOTONIC, so its times
    /// map onto the server's exactly.
    pub server_boot_id: [u8; 16],
}

/// Parses a boot id (`/proc/sys/kernel/random/boot_id`, a UUID with or without dashes) into
/// its 16 bytes; `None` if it is not 32 hex digits.
pub fn parse_boot_id(s: &str) -> Option<[u8; 16]> {
    let hex: Vec<u8> = s.trim().bytes().filter(|&b| b != b'-').collect();
    if hex.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        let text = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

impl SegmentHeader {
    /// Encodes the 64-byte header.
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_LEN] {
        let mut b = [0u8; SEGMENT_HEADER_LEN];
        b[..8].copy_from_slice(SEGMENT_MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&(SEGMENT_HEADER_LEN as u32).to_le_bytes());
        b[16..24].copy_from_slice(&self.server_run_id.to_le_bytes());
        b[24..32].copy_from_slice(&self.server_start_mono_ns.to_le_bytes());
        b[32..40].copy_from_slice(&self.server_start_wall_ns.to_le_bytes());
        b[40..48].copy_from_slice(&self.segment_index.to_le_bytes());
        b[48..64].copy_from_slice(&self.server_boot_id);
        b
    }

    /// Decodes a header; returns it and the offset where records start.
    pub fn decode(buf: &[u8]) -> Result<(Self, usize)> {
        let mut r = Reader::new(buf);
        let magic = r.take(8)?;
        if magic != SEGMENT_MAGIC {
            return Err(DecodeError::BadMagic {
                found: magic.to_vec(),
            });
        }
        let version = r.u32()?;
        let header_len = r.u32()?;
        if version == 0
            || (header_len as usize) < MIN_SEGMENT_HEADER_LEN
            || header_len as usize > MAX_SEGMENT_HEADER_LEN
        {
            return Err(DecodeError::Invalid {
                field: "segment header",
                value: header_len as u64,
            });
        }
        let h = SegmentHeader {
            version,
            server_run_id: r.u64()?,
            server_start_mono_ns: r.u64()?,
            server_start_wall_ns: r.i64()?,
            segment_index: r.u64()?,
            server_boot_id: [0; 16],
        };
        let mut h = h;
        if header_len as usize >= SEGMENT_HEADER_LEN {
            h.server_boot_id = r.array()?;
        }
        if buf.len() < header_len as usize {
            return Err(DecodeError::Truncated {
                need: header_len as usize - buf.len(),
            });
        }
        Ok((h, header_len as usize))
    }
}

/// Where a [`StoreRecord::Sample`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum SampleSource {
    /// A ping frame.
    Ping = 1,
    /// A data frame that was a duplicate (its data is stored already, its timing is new).
    Duplicate = 2,
}

/// A decoded store record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreRecord<'a> {
    /// A process connected.
    Process {
        /// Server time of the Hello.
        t_s: u64,
        /// Connection number within the server run.
        conn_id: u64,
        /// The Hello.
        hello: Hello,
    },
    /// A data frame.
    Data {
        /// Server time of receipt.
        t_s: u64,
        /// Sending process.
        process_uid: u64,
        /// Frame type byte.
        ty: u8,
        /// Frame body as received.
        body: &'a [u8],
    },
    /// An offset sample without data.
    Sample {
        /// Server time of receipt.
        t_s: u64,
        /// Sending process.
        process_uid: u64,
        /// Sender time at send.
        t_p: u64,
        /// Echoed server time of an ack (0 if none).
        echo_t_s: u64,
        /// Client time at which that ack arrived.
        echo_t_p: u64,
        /// Source byte (`SampleSource`).
        source: u8,
    },
    /// A connection ended.
    Disconnect {
        /// Server time.
        t_s: u64,
        /// The process.
        process_uid: u64,
        /// Why.
        reason: String,
    },
    /// A record type this version does not know (skipped by readers).
    Unknown {
        /// Its type byte.
        ty: u8,
    },
}

/// Appends a `StoreProcess` record.
pub fn encode_process(out: &mut Vec<u8>, t_s: u64, conn_id: u64, hello_body: &[u8]) {
    let s = frame::begin(out, FrameType::StoreProcess as u8);
    out.extend_from_slice(&t_s.to_le_bytes());
    out.extend_from_slice(&conn_id.to_le_bytes());
    out.extend_from_slice(hello_body);
    frame::finish(out, s);
}

/// Appends a `StoreData` record wrapping a received frame.
pub fn encode_data(out: &mut Vec<u8>, t_s: u64, process_uid: u64, ty: u8, body: &[u8]) {
    let s = frame::begin(out, FrameType::StoreData as u8);
    out.extend_from_slice(&t_s.to_le_bytes());
    out.extend_from_slice(&process_uid.to_le_bytes());
    out.push(ty);
    out.extend_from_slice(body);
    frame::finish(out, s);
}

/// Appends a `StoreSample` record.
pub fn encode_sample(
    out: &mut Vec<u8>,
    t_s: u64,
    process_uid: u64,
    ping: crate::data::Ping,
    source: SampleSource,
) {
    let s = frame::begin(out, FrameType::StoreSample as u8);
    for v in [t_s, process_uid, ping.t_p, ping.echo_t_s, ping.echo_t_p] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.push(source as u8);
    frame::finish(out, s);
}

/// Appends a `StoreDisconnect` record.
pub fn encode_disconnect(out: &mut Vec<u8>, t_s: u64, process_uid: u64, reason: &str) {
    let s = frame::begin(out, FrameType::StoreDisconnect as u8);
    out.extend_from_slice(&t_s.to_le_bytes());
    out.extend_from_slice(&process_uid.to_le_bytes());
    put_str(out, reason);
    frame::finish(out, s);
}

impl<'a> StoreRecord<'a> {
    /// Decodes the body of a store record of type `ty`.
    pub fn decode(ty: u8, body: &'a [u8]) -> Result<Self> {
        let mut r = Reader::new(body);
        Ok(match FrameType::from_u8(ty) {
            Some(FrameType::StoreProcess) => StoreRecord::Process {
                t_s: r.u64()?,
                conn_id: r.u64()?,
                hello: Hello::decode_body(r.rest())?,
            },
            Some(FrameType::StoreData) => StoreRecord::Data {
                t_s: r.u64()?,
                process_uid: r.u64()?,
                ty: r.u8()?,
                body: r.rest(),
            },
            Some(FrameType::StoreSample) => StoreRecord::Sample {
                t_s: r.u64()?,
                process_uid: r.u64()?,
                t_p: r.u64()?,
                echo_t_s: r.u64()?,
                echo_t_p: r.u64()?,
                source: r.u8()?,
            },
            Some(FrameType::StoreDisconnect) => StoreRecord::Disconnect {
                t_s: r.u64()?,
                process_uid: r.u64()?,
                reason: r.str("reason")?,
            },
            _ => StoreRecord::Unknown { ty },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_ids_parse_with_or_without_dashes() {
        let b = parse_boot_id("3d1219c7-c4c5-404a-aa1f-6d2a48adfda4\n").unwrap();
        assert_eq!(b[0], 0x3d);
        assert_eq!(b[15], 0xa4);
        assert_eq!(parse_boot_id("3d1219c7c4c5404aaa1f6d2a48adfda4"), Some(b));
        assert_eq!(parse_boot_id("not a uuid"), None);
        assert_eq!(parse_boot_id("3d1219c7-c4c5-404a-aa1f-6d2a48adfdzz"), None);
    }

    #[test]
    fn short_version_one_headers_still_decode() {
        let h = SegmentHeader {
            version: 1,
            server_run_id: 1,
            server_start_mono_ns: 2,
            server_start_wall_ns: 3,
            segment_index: 4,
            server_boot_id: [9; 16],
        };
        let mut old = h.encode()[..MIN_SEGMENT_HEADER_LEN].to_vec();
        old[12..16].copy_from_slice(&(MIN_SEGMENT_HEADER_LEN as u32).to_le_bytes());
        let (back, start) = SegmentHeader::decode(&old).unwrap();
        assert_eq!(start, MIN_SEGMENT_HEADER_LEN);
        assert_eq!(back.server_boot_id, [0; 16]);
        assert_eq!(back.segment_index, 4);
    }
}
