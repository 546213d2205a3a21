//! The frame envelope shared by connections, spool files and store segments:
//!
//! ```text
//! u32 LE  len     number of bytes after the crc field (type + body), 1 ..= MAX_FRAME_LEN
//! u32 LE  crc     crc32c (Castagnoli) of those len bytes
//! u8      type    FrameType
//! ...     body    len - 1 bytes
//! ```
//!
//! A reader that finds a bad length or checksum knows the stream is corrupt (or torn) at that
//! offset; everything before it is intact.

use crate::error::{DecodeError, Result};

/// Size of the `len` + `crc` prefix.
pub const HEADER_LEN: usize = 8;
/// Largest allowed `len` (type byte + body): 8 MiB.
pub const MAX_FRAME_LEN: u32 = 8 << 20;

/// Frame and record types. Values below 0x80 travel on connections; 0x80 and above exist only
/// in the log server's store. Unknown types are an error for a connection reader, but a store
/// reader may skip them (frames are length-prefixed), which is how the format grows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[non_exhaustive]
pub enum FrameType {
    /// Client → server: magic, version, capabilities, process identity.
    Hello = 0x01,
    /// Server → client: accepted capabilities and the server's clock.
    HelloAck = 0x02,
    /// Server → client: this many data frames of this connection are durable.
    Ack = 0x03,
    /// Server → client: why the server closes the connection.
    Error = 0x04,
    /// Data: a new stream (a thread, a host-metric source, ...).
    StreamOpen = 0x10,
    /// Data: a batch of events of one stream.
    Events = 0x11,
    /// Data: the stream ended (its thread exited).
    StreamClose = 0x12,
    /// Data: names, units and scales of metric ids used by `Counter` events of the stream.
    Names = 0x13,
    /// Data: clock samples the sender took while receiving frames from a peer (agent tree).
    ClockSamples = 0x14,
    /// Data: one instrumented file's sensor table (names, kinds, locations).
    Sensors = 0x15,
    /// Control: a clock sample and keep-alive; may echo the last ack's server time.
    Ping = 0x20,
    /// Control: the process is exiting cleanly.
    Goodbye = 0x21,
    /// Control: a steering request or reply between host agents and `hostagent ctl` (JSON).
    Control = 0x30,
    /// Store: a process connected (server time + the Hello body).
    StoreProcess = 0x81,
    /// Store: a data frame as received (server time, process uid, frame).
    StoreData = 0x82,
    /// Store: an offset sample without data (pings, duplicates).
    StoreSample = 0x83,
    /// Store: a connection ended.
    StoreDisconnect = 0x84,
}

impl FrameType {
    /// Maps a type byte to a known type.
    pub fn from_u8(b: u8) -> Option<Self> {
        use FrameType::*;
        Some(match b {
            0x01 => Hello,
            0x02 => HelloAck,
            0x03 => Ack,
            0x04 => Error,
            0x10 => StreamOpen,
            0x11 => Events,
            0x12 => StreamClose,
            0x13 => Names,
            0x14 => ClockSamples,
            0x15 => Sensors,
            0x20 => Ping,
            0x21 => Goodbye,
            0x30 => Control,
            0x81 => StoreProcess,
            0x82 => StoreData,
            0x83 => StoreSample,
            0x84 => StoreDisconnect,
            _ => return None,
        })
    }

    /// True for sequenced data frames (acknowledged, deduplicated, stored).
    pub fn is_data(self) -> bool {
        matches!(
            self,
            Self::StreamOpen
                | Self::Events
                | Self::StreamClose
                | Self::Names
                | Self::ClockSamples
                | Self::Sensors
        )
    }
}

/// A frame split into its type byte and body, borrowing the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawFrame<'a> {
    /// The type byte (may be unknown to this version).
    pub ty: u8,
    /// The body after the type byte.
    pub body: &'a [u8],
}

impl RawFrame<'_> {
    /// The known frame type, if any.
    pub fn frame_type(&self) -> Option<FrameType> {
        FrameType::from_u8(self.ty)
    }

    /// Total encoded size including the envelope.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN + 1 + self.body.len()
    }
}

/// Appends one frame (`len | crc | ty | body`) to `out`.
pub fn encode(out: &mut Vec<u8>, ty: u8, body: &[u8]) {
    let len = (body.len() + 1) as u32;
    debug_assert!(len <= MAX_FRAME_LEN, "frame body too large");
    let mut crc = crc32c::crc32c(&[ty]);
    crc = crc32c::crc32c_append(crc, body);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc.to_le_bytes());
    out.push(ty);
    out.extend_from_slice(body);
}

/// Begins a frame in place: reserves the envelope, writes the type byte and returns the offset
/// to pass to [`finish`] once the body has been appended. Avoids copying large bodies.
pub fn begin(out: &mut Vec<u8>, ty: u8) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0u8; HEADER_LEN]);
    out.push(ty);
    start
}

/// Completes a frame started with [`begin`]: fills in length and checksum.
pub fn finish(out: &mut [u8], start: usize) {
    let len = (out.len() - start - HEADER_LEN) as u32;
    let crc = crc32c::crc32c(&out[start + HEADER_LEN..]);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Recomputes the checksum of a complete encoded frame after its body was patched in place
/// (the runtime stamps the send time `t_p` into a frame at each transmission).
pub fn reseal(frame: &mut [u8]) {
    if frame.len() > HEADER_LEN {
        let crc = crc32c::crc32c(&frame[HEADER_LEN..]);
        frame[4..8].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Parses the 8-byte envelope header and returns the announced `len` and crc, checking
/// `1 ..= max_len` (normally [`MAX_FRAME_LEN`]).
/// Use this on a socket: read 8 bytes, check, then read exactly `len` more.
pub fn parse_header(h: &[u8; HEADER_LEN], max_len: u32) -> Result<(u32, u32)> {
    let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
    let crc = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
    if len == 0 || len > max_len {
        return Err(DecodeError::BadLength {
            len: len as u64,
            max: max_len as u64,
        });
    }
    Ok((len, crc))
}

/// Checks `payload` (type + body, exactly `len` bytes) against `crc` and splits it.
pub fn check<'a>(crc: u32, payload: &'a [u8]) -> Result<RawFrame<'a>> {
    let computed = crc32c::crc32c(payload);
    if computed != crc {
        return Err(DecodeError::Checksum {
            stored: crc,
            computed,
        });
    }
    match payload.split_first() {
        Some((&ty, body)) => Ok(RawFrame { ty, body }),
        None => Err(DecodeError::BadLength { len: 0, max: 0 }),
    }
}

/// Decodes the first frame of `buf`, returning it and the number of bytes it occupied.
/// [`DecodeError::Truncated`] means "need more bytes"; any other error means corruption.
pub fn decode(buf: &[u8]) -> Result<(RawFrame<'_>, usize)> {
    decode_max(buf, MAX_FRAME_LEN)
}

/// Like [`decode`] with another length limit: store records wrap a whole frame and may be up
/// to [`crate::store::MAX_RECORD_LEN`] long.
pub fn decode_max(buf: &[u8], max_len: u32) -> Result<(RawFrame<'_>, usize)> {
    let Some(h) = buf.first_chunk::<HEADER_LEN>() else {
        return Err(DecodeError::Truncated {
            need: HEADER_LEN - buf.len(),
        });
    };
    let (len, crc) = parse_header(h, max_len)?;
    let total = HEADER_LEN + len as usize;
    if buf.len() < total {
        return Err(DecodeError::Truncated {
            need: total - buf.len(),
        });
    }
    let frame = check(crc, &buf[HEADER_LEN..total])?;
    Ok((frame, total))
}

/// Iterates over consecutive frames in a buffer (a spool file, a store segment's records),
/// stopping at the first error, which it yields once together with the offset where it occurred.
#[derive(Debug, Clone)]
pub struct Frames<'a> {
    buf: &'a [u8],
    pos: usize,
    done: bool,
    max_len: u32,
}

impl<'a> Frames<'a> {
    /// Starts at the beginning of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self::with_max(buf, MAX_FRAME_LEN)
    }

    /// Iterates with another length limit (use [`crate::store::MAX_RECORD_LEN`] for store
    /// records).
    pub fn with_max(buf: &'a [u8], max_len: u32) -> Self {
        Self {
            buf,
            pos: 0,
            done: false,
            max_len,
        }
    }

    /// Offset of the next unread byte (after iteration stops: the end of the last good frame).
    pub fn offset(&self) -> usize {
        self.pos
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = std::result::Result<RawFrame<'a>, (usize, DecodeError)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.pos >= self.buf.len() {
            return None;
        }
        match decode_max(&self.buf[self.pos..], self.max_len) {
            Ok((f, n)) => {
                self.pos += n;
                Some(Ok(f))
            }
            Err(e) => {
                self.done = true;
                Some(Err((self.pos, e)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let mut out = Vec::new();
        encode(&mut out, 0x20, b"hello");
        let s = begin(&mut out, 0x11);
        out.extend_from_slice(&[1, 2, 3]);
        finish(&mut out, s);
        let frames: Vec<_> = Frames::new(&out).collect();
        assert_eq!(frames.len(), 2);
        assert_eq!(
            frames[1].clone().unwrap(),
            RawFrame {
                ty: 0x11,
                body: &[1, 2, 3]
            }
        );
        let mut bad = out.clone();
        bad[10] ^= 1;
        assert!(matches!(decode(&bad), Err(DecodeError::Checksum { .. })));
        assert!(matches!(
            decode(&out[..out.len() - 1 - 12]),
            Err(DecodeError::Truncated { .. })
        ));
        let mut it = Frames::new(&out[..out.len() - 1]);
        assert!(it.next().unwrap().is_ok());
        assert!(matches!(
            it.next(),
            Some(Err((14, DecodeError::Truncated { .. })))
        ));
        assert!(it.next().is_none());
    }

    #[test]
    fn length_limits() {
        let mut h = [0u8; 8];
        assert!(parse_header(&h, MAX_FRAME_LEN).is_err());
        h[..4].copy_from_slice(&(MAX_FRAME_LEN + 1).to_le_bytes());
        assert!(parse_header(&h, MAX_FRAME_LEN).is_err());
        h[..4].copy_from_slice(&100u32.to_le_bytes());
        assert!(parse_header(&h, 50).is_err());
        assert!(parse_header(&h, 100).is_ok());
    }
}
