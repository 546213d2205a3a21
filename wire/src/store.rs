//! The log server's session store: segment files of checksummed records.
//!
//! A session is a directory; each segment file starts with a fixed header and continues with
//! records in the frame envelope of [`crate::frame`] (types 0x81..). One segment belongs to one
//! log-server run, whose relative clock (`t_s`) all its records use; the header carries that
//! run's CLOCK_MONOTONIC start so runs on the same host can be put on one time base.
//!
//! ```text
//! SegmentHeader (48 bytes): magic "P5SEGMT\0" | u32 version | u32 header_len (48)
//!                           | u64 server_run_id | u64 server_start_mono_ns
//!                           | i64 server_start_wall_ns | u64 segment_index
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
pub const SEGMENT_HEADER_LEN: usize = 48;
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
}

impl SegmentHeader {
    /// Encodes the 48-byte header.
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_LEN] {
        let mut b = [0u8; SEGMENT_HEADER_LEN];
        b[..8].copy_from_slice(SEGMENT_MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&(SEGMENT_HEADER_LEN as u32).to_le_bytes());
        b[16..24].copy_from_slice(&self.server_run_id.to_le_bytes());
        b[24..32].copy_from_slice(&self.server_start_mono_ns.to_le_bytes());
        b[32..40].copy_from_slice(&self.server_start_wall_ns.to_le_bytes());
        b[40..48].copy_from_slice(&self.segment_index.to_le_bytes());
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
            || (header_len as usize) < SEGMENT_HEADER_LEN
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
        };
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
