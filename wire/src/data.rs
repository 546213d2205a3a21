//! Data frames (sequenced, acknowledged, deduplicated, stored) and control frames.
//!
//! Every data frame body begins with the same 20-byte header; the sender patches `t_p` (its
//! relative time at the moment of transmission) into offset 12 each time it (re)sends a frame,
//! and reseals the checksum with [`crate::frame::reseal`].
//!
//! ```text
//! DataHeader:  u32 stream | u64 seq | u64 t_p
//! StreamOpen:  DataHeader | u8 kind | u64 tid | str name                      (seq 0)
//! Events:      DataHeader | u64 dropped | u64 base | u32 count | varint n
//!              | n × u64 sensor | events (see `event`)                          (seq ≥ 1)
//! StreamClose: DataHeader | u64 t_end | u64 dropped                             (last seq)
//! Names:       DataHeader | varint n | n × (u64 id | str name | str unit | ivarint scale_exp)
//! ClockSamples: DataHeader | u64 peer_process_uid | varint n | n × (u64 t_recv | u64 t_send)
//! Sensors:     DataHeader | UTF-8 sensor table to the end of the body (see `sensors`)
//! Control:     str json      (not sequenced; agents and `hostagent ctl`)
//! Ping:        u64 t_p | u64 echo_t_s | u64 echo_t_p    (echo: server time of the last
//!              ack and the client time it arrived, 0/0 if none)
//! Goodbye:     u64 t_p
//! Ack:         u64 count (data frames of this connection durable so far) | u64 t_s
//! Error:       str message
//! ```
//!
//! `dropped` counts the stream's events lost to a full buffer so far (cumulative).

use crate::codec::{Reader, put_str};
use crate::error::{DecodeError, Result};
use crate::event::EventDecoder;
use crate::frame::{self, FrameType};

/// Size of [`DataHeader`] on the wire.
pub const DATA_HEADER_LEN: usize = 20;
/// Offset of `t_p` inside a data frame's body.
pub const T_P_OFFSET: usize = 12;

/// The header every data frame starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DataHeader {
    /// Stream id, unique within the sending process.
    pub stream: u32,
    /// Sequence number within the stream: 0 for `StreamOpen`, then 1, 2, ...
    pub seq: u64,
    /// Sender-relative time at transmission, ns.
    pub t_p: u64,
}

impl DataHeader {
    /// Appends the encoding.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.stream.to_le_bytes());
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&self.t_p.to_le_bytes());
    }

    /// Decodes the header at the start of a data frame body.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self> {
        Ok(Self {
            stream: r.u32()?,
            seq: r.u64()?,
            t_p: r.u64()?,
        })
    }

    /// Reads just the header of a data body.
    pub fn peek(body: &[u8]) -> Result<Self> {
        Self::decode(&mut Reader::new(body))
    }
}

/// Patches `t_p` into an encoded data frame (envelope included) and reseals its checksum.
pub fn stamp_send_time(encoded_frame: &mut [u8], t_p: u64) {
    let at = frame::HEADER_LEN + 1 + T_P_OFFSET;
    if let Some(dst) = encoded_frame.get_mut(at..at + 8) {
        dst.copy_from_slice(&t_p.to_le_bytes());
        frame::reseal(encoded_frame);
    }
}

/// What a stream carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum StreamKind {
    /// Events of one application thread.
    Thread = 1,
    /// Host metrics from a host agent.
    HostMetrics = 2,
    /// Kernel events from an OS monitor.
    OsMonitor = 3,
}

/// Body of a `StreamOpen` frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamOpen {
    /// Header (seq 0).
    pub header: DataHeader,
    /// What the stream carries (unknown values are kept as raw bytes by `kind_raw`).
    pub kind_raw: u8,
    /// OS thread id (gettid), or 0.
    pub tid: u64,
    /// Thread or source name.
    pub name: String,
}

impl StreamOpen {
    /// Encodes the body.
    pub fn encode_body(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(40 + self.name.len());
        self.header.encode(&mut out);
        out.push(self.kind_raw);
        out.extend_from_slice(&self.tid.to_le_bytes());
        put_str(&mut out, &self.name);
        out
    }

    /// Decodes a body; trailing bytes are allowed (additive evolution).
    pub fn decode_body(body: &[u8]) -> Result<Self> {
        let mut r = Reader::new(body);
        Ok(Self {
            header: DataHeader::decode(&mut r)?,
            kind_raw: r.u8()?,
            tid: r.u64()?,
            name: r.str("stream name")?,
        })
    }
}

/// A decoded view of an `Events` frame body.
#[derive(Debug, Clone)]
pub struct EventsFrame<'a> {
    /// Header.
    pub header: DataHeader,
    /// Cumulative count of this stream's events lost to full buffers.
    pub dropped: u64,
    /// The batch (`base | count | table | events`).
    pub batch: &'a [u8],
}

impl<'a> EventsFrame<'a> {
    /// Splits a body into header, dropped counter and batch (the batch is decoded lazily).
    pub fn parse(body: &'a [u8]) -> Result<Self> {
        let mut r = Reader::new(body);
        let header = DataHeader::decode(&mut r)?;
        let dropped = r.u64()?;
        Ok(Self {
            header,
            dropped,
            batch: r.rest(),
        })
    }

    /// An iterator over the events.
    pub fn events(&self) -> Result<EventDecoder<'a>> {
        EventDecoder::new(self.batch)
    }

    /// Walks every event once to prove the frame decodes, returning the event count.
    pub fn validate(&self) -> Result<u32> {
        let mut n = 0;
        for e in self.events()? {
            e?;
            n += 1;
        }
        Ok(n)
    }
}

/// Appends a complete `Events` frame (envelope included) for `batch`.
pub fn encode_events(
    out: &mut Vec<u8>,
    header: DataHeader,
    dropped: u64,
    batch: &crate::event::EventEncoder,
) {
    let start = frame::begin(out, FrameType::Events as u8);
    header.encode(out);
    out.extend_from_slice(&dropped.to_le_bytes());
    batch.write_to(out);
    frame::finish(out, start);
}

/// Body of a `StreamClose` frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamClose {
    /// Header.
    pub header: DataHeader,
    /// Time the stream ended (thread exit), sender-relative ns.
    pub t_end: u64,
    /// Final cumulative drop count.
    pub dropped: u64,
}

impl StreamClose {
    /// Encodes the body.
    pub fn encode_body(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(36);
        self.header.encode(&mut out);
        out.extend_from_slice(&self.t_end.to_le_bytes());
        out.extend_from_slice(&self.dropped.to_le_bytes());
        out
    }

    /// Decodes a body.
    pub fn decode_body(body: &[u8]) -> Result<Self> {
        let mut r = Reader::new(body);
        Ok(Self {
            header: DataHeader::decode(&mut r)?,
            t_end: r.u64()?,
            dropped: r.u64()?,
        })
    }
}

/// One entry of a `Names` frame: what a metric id (used as the sensor of `Counter` events)
/// means. The quantity is `value × 10^scale_exp` in `unit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Name {
    /// The id used in events.
    pub id: u64,
    /// Dotted name, e.g. `cpu.total.busy`, `net.eth0.rx_bytes`, `irq.24`.
    pub name: String,
    /// Unit, e.g. `%`, `bytes`, `pages`, `count`.
    pub unit: String,
    /// Decimal exponent applied to values.
    pub scale_exp: i32,
}

/// Body of a `Names` frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// Header.
    pub header: DataHeader,
    /// Entries.
    pub names: Vec<Name>,
}

impl Names {
    /// Encodes the body.
    pub fn encode_body(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32 + self.names.len() * 32);
        self.header.encode(&mut out);
        crate::codec::put_varint(&mut out, self.names.len() as u64);
        for n in &self.names {
            out.extend_from_slice(&n.id.to_le_bytes());
            put_str(&mut out, &n.name);
            put_str(&mut out, &n.unit);
            crate::codec::put_ivarint(&mut out, n.scale_exp as i64);
        }
        out
    }

    /// Decodes a body.
    pub fn decode_body(body: &[u8]) -> Result<Self> {
        let mut r = Reader::new(body);
        let header = DataHeader::decode(&mut r)?;
        let n = r.varint()?;
        // Each entry takes at least 11 bytes.
        if n > (r.remaining() / 11) as u64 {
            return Err(DecodeError::Invalid {
                field: "names count",
                value: n,
            });
        }
        let mut names = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let id = r.u64()?;
            let name = r.str("metric name")?;
            let unit = r.str("metric unit")?;
            let e = r.ivarint()?;
            let scale_exp = i32::try_from(e).map_err(|_| DecodeError::Invalid {
                field: "scale_exp",
                value: e as u64,
            })?;
            names.push(Name {
                id,
                name,
                unit,
                scale_exp,
            });
        }
        Ok(Self { header, names })
    }
}

/// The stream a runtime sends its `Sensors` frames on (their own sequence, from 1; no
/// `StreamOpen`): apart from every thread's stream, which count up from 1.
pub const SENSORS_STREAM: u32 = u32::MAX - 1;

/// Body of a `Sensors` frame: one instrumented file's sensor table (or a part of it), as the
/// text [`crate::sensors::Table`] reads. Sent once per process and file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sensors {
    /// Header.
    pub header: DataHeader,
    /// The table's text.
    pub table: String,
}

impl Sensors {
    /// Encodes the body.
    pub fn encode_body(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(DATA_HEADER_LEN + self.table.len());
        self.header.encode(&mut out);
        out.extend_from_slice(self.table.as_bytes());
        out
    }

    /// Decodes a body (the table's text is checked to be UTF-8, not parsed).
    pub fn decode_body(body: &[u8]) -> Result<Self> {
        let mut r = Reader::new(body);
        let header = DataHeader::decode(&mut r)?;
        let table = std::str::from_utf8(r.rest())
            .map_err(|_| DecodeError::Utf8 {
                field: "sensor table",
            })?
            .to_owned();
        Ok(Self { header, table })
    }

    /// Decodes a body and parses its table.
    pub fn parse(body: &[u8]) -> Result<(DataHeader, crate::sensors::Table)> {
        let s = Self::decode_body(body)?;
        let t = crate::sensors::Table::parse(&s.table).map_err(|e| DecodeError::Invalid {
            field: "sensor table",
            value: match e {
                crate::sensors::TableError::Line { line, .. } => line as u64,
                _ => 1,
            },
        })?;
        Ok((s.header, t))
    }
}

/// Body of a `ClockSamples` frame: pairs `(t_recv, t_send)` the sender recorded while
/// receiving frames from a peer (a child agent): `t_recv` on the sender's clock, `t_send` on
/// the peer's. Composed along the agent tree by the merge stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClockSamples {
    /// Header.
    pub header: DataHeader,
    /// The peer whose send times these are.
    pub peer_process_uid: u64,
    /// `(t_recv, t_send)` pairs.
    pub samples: Vec<(u64, u64)>,
}

impl ClockSamples {
    /// Encodes the body.
    pub fn encode_body(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(40 + self.samples.len() * 16);
        self.header.encode(&mut out);
        out.extend_from_slice(&self.peer_process_uid.to_le_bytes());
        crate::codec::put_varint(&mut out, self.samples.len() as u64);
        for (r, s) in &self.samples {
            out.extend_from_slice(&r.to_le_bytes());
            out.extend_from_slice(&s.to_le_bytes());
        }
        out
    }

    /// Decodes a body.
    pub fn decode_body(body: &[u8]) -> Result<Self> {
        let mut r = Reader::new(body);
        let header = DataHeader::decode(&mut r)?;
        let peer_process_uid = r.u64()?;
        let n = r.varint()?;
        if n > (r.remaining() / 16) as u64 {
            return Err(DecodeError::Invalid {
                field: "clock sample count",
                value: n,
            });
        }
        let mut samples = Vec::with_capacity(n as usize);
        for _ in 0..n {
            samples.push((r.u64()?, r.u64()?));
        }
        Ok(Self {
            header,
            peer_process_uid,
            samples,
        })
    }
}

/// Body of a `Ping` frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ping {
    /// Sender-relative time at send.
    pub t_p: u64,
    /// Server time carried by the last ack the client received (0 if none).
    pub echo_t_s: u64,
    /// Client time at which that ack arrived.
    pub echo_t_p: u64,
}

impl Ping {
    /// Encodes the body.
    pub fn encode_body(&self) -> [u8; 24] {
        let mut b = [0u8; 24];
        b[..8].copy_from_slice(&self.t_p.to_le_bytes());
        b[8..16].copy_from_slice(&self.echo_t_s.to_le_bytes());
        b[16..].copy_from_slice(&self.echo_t_p.to_le_bytes());
        b
    }

    /// Decodes a body.
    pub fn decode_body(body: &[u8]) -> Result<Self> {
        let mut r = Reader::new(body);
        Ok(Self {
            t_p: r.u64()?,
            echo_t_s: r.u64()?,
            echo_t_p: r.u64()?,
        })
    }
}

/// Body of an `Ack` frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    /// Data frames of this connection that are durable, counted from the connection's start.
    pub count: u64,
    /// Server-relative time at send.
    pub t_s: u64,
}

impl Ack {
    /// Encodes the body.
    pub fn encode_body(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.count.to_le_bytes());
        b[8..].copy_from_slice(&self.t_s.to_le_bytes());
        b
    }

    /// Decodes a body.
    pub fn decode_body(body: &[u8]) -> Result<Self> {
        let mut r = Reader::new(body);
        Ok(Self {
            count: r.u64()?,
            t_s: r.u64()?,
        })
    }
}

/// A stream opens with sequence number 0 and only its `StreamOpen` carries it.
fn check_seq(h: DataHeader, open: bool) -> Result<()> {
    if (h.seq == 0) != open {
        return Err(DecodeError::Invalid {
            field: "sequence number",
            value: h.seq,
        });
    }
    Ok(())
}

/// Validates any client → server frame body by type, so a server can reject bad input at the
/// door. Returns the number of events for `Events` frames, else 0.
pub fn validate_client_frame(ty: u8, body: &[u8]) -> Result<u32> {
    match FrameType::from_u8(ty) {
        Some(FrameType::Hello) => crate::hello::Hello::decode_body(body).map(|_| 0),
        Some(FrameType::StreamOpen) => {
            let o = StreamOpen::decode_body(body)?;
            check_seq(o.header, true).map(|_| 0)
        }
        Some(FrameType::Events) => {
            let f = EventsFrame::parse(body)?;
            check_seq(f.header, false)?;
            f.validate()
        }
        Some(FrameType::StreamClose) => {
            let c = StreamClose::decode_body(body)?;
            check_seq(c.header, false).map(|_| 0)
        }
        Some(FrameType::Names) => {
            let n = Names::decode_body(body)?;
            check_seq(n.header, false).map(|_| 0)
        }
        Some(FrameType::ClockSamples) => {
            let c = ClockSamples::decode_body(body)?;
            check_seq(c.header, false).map(|_| 0)
        }
        Some(FrameType::Sensors) => {
            let (h, _) = Sensors::parse(body)?;
            check_seq(h, false).map(|_| 0)
        }
        Some(FrameType::Control) => Reader::new(body).str("control").map(|_| 0),
        Some(FrameType::Ping) => Ping::decode_body(body).map(|_| 0),
        Some(FrameType::Goodbye) => Reader::new(body).u64().map(|_| 0),
        _ => Err(DecodeError::Invalid {
            field: "client frame type",
            value: ty as u64,
        }),
    }
}
