//! One capture file, read as a stream of [`Segment`]s.
//!
//! pcap-parser's streaming reader holds a bounded buffer (256 KiB, grown for a block that
//! does not fit up to 16 MiB; a longer claimed length is garbage), never the whole file. Both formats are read:
//!
//! - **pcap**: microsecond or nanosecond timestamps by the file's magic number; one link type.
//! - **pcapng**: any number of sections and interfaces, each interface with its own link
//!   type, `if_tsresol` (a power of 10 or 2; microseconds when absent) and `if_tsoffset`
//!   (seconds added to every timestamp). Enhanced packet blocks are read; simple packet blocks
//!   carry no timestamp and are skipped (counted).
//!
//! Timestamps become nanoseconds plus the capture's offset. Everything skipped is reported with
//! the file and 1-based packet number: unknown link types, non-IP frames, malformed packets,
//! timestamps earlier than the packet before (kept, in file order), and a truncated last packet
//! or unreadable block (the file ends there; everything before is kept).

use super::PcapError;
use super::link::{self, LinkSkip};
use super::packet::{self, PacketSkip, Segment};
use crate::report::ReadReport;
use crate::trace::Time;
use pcap_parser::pcapng::Block;
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{PcapBlockOwned, PcapError as ParseError};
use std::io::Read;

const START_BUFFER: usize = 256 << 10;
/// The largest block read (a claimed length beyond it is garbage: snap lengths are ≤ 256 KiB).
const MAX_BLOCK: usize = 16 << 20;

/// An interface of a pcapng section.
#[derive(Debug, Clone, Copy)]
struct Iface {
    linktype: i32,
    /// Timestamp units per second.
    resol: u64,
    /// Seconds added to every timestamp.
    offset_s: i64,
}

/// Per-file state apart from the parser (so a block borrowed from the parser can be handled).
#[derive(Debug)]
struct State {
    name: String,
    file: u32,
    offset_ns: i64,
    /// The pcap header's link type and whether its timestamps are nanoseconds.
    legacy: Option<(i32, bool)>,
    ifaces: Vec<Iface>,
    number: u64,
    last_ts: Time,
}

/// A capture being read.
pub struct Capture<'r> {
    parser: Box<dyn PcapReaderIterator + Send + 'r>,
    st: State,
    buffer: usize,
    done: bool,
}

impl std::fmt::Debug for Capture<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("st", &self.st)
            .finish_non_exhaustive()
    }
}

/// What one step of the parser gave.
enum Step {
    Block(usize, Option<Segment>),
    Eof,
    Refill,
    Truncated,
    Grow,
    Bad(String),
}

impl<'r> Capture<'r> {
    /// Opens the capture `reader` named `name` (index `file` among the inputs), whose
    /// timestamps are shifted by `offset_ns`.
    pub fn open(
        name: &str,
        reader: impl Read + Send + 'r,
        file: u32,
        offset_ns: i64,
    ) -> Result<Self, PcapError> {
        let parser = pcap_parser::create_reader(START_BUFFER, reader).map_err(|e| {
            let detail = match e {
                ParseError::Eof => "empty file".to_owned(),
                ParseError::Incomplete(_) => "file shorter than a capture header".to_owned(),
                ParseError::HeaderNotRecognized => "unknown magic number".to_owned(),
                ParseError::ReadError => "read error".to_owned(),
                other => describe(&other),
            };
            PcapError::NotACapture {
                file: name.to_owned(),
                detail,
            }
        })?;
        Ok(Capture {
            parser,
            st: State {
                name: name.to_owned(),
                file,
                offset_ns,
                legacy: None,
                ifaces: Vec::new(),
                number: 0,
                last_ts: Time::MIN,
            },
            buffer: START_BUFFER,
            done: false,
        })
    }

    /// The next TCP or UDP segment, or `None` at the end of the file (or where it stopped
    /// being readable). Skipped packets are reported in `report`.
    pub fn next_segment(&mut self, report: &mut ReadReport) -> Option<Segment> {
        while !self.done {
            let step = match self.parser.next() {
                Ok((n, block)) => Step::Block(n, self.st.block(block, report)),
                Err(ParseError::Eof) => Step::Eof,
                Err(ParseError::Incomplete(_)) => Step::Refill,
                Err(ParseError::UnexpectedEof) => Step::Truncated,
                Err(ParseError::BufferTooSmall) => Step::Grow,
                Err(e) => Step::Bad(describe(&e)),
            };
            match step {
                Step::Block(n, seg) => {
                    self.parser.consume(n);
                    if seg.is_some() {
                        return seg;
                    }
                }
                Step::Eof => self.done = true,
                Step::Refill => {
                    if self.parser.refill().is_err() {
                        self.stop(report, "read error", String::new());
                    }
                }
                Step::Truncated => {
                    let detail = format!("{} bytes left at the end", self.parser.data().len());
                    self.stop(report, "truncated packet", detail);
                }
                Step::Grow => self.grow(report),
                Step::Bad(detail) => self.stop(report, "unreadable capture", detail),
            }
        }
        None
    }

    /// Makes room for a block that does not fit the buffer, unless its length is garbage.
    fn grow(&mut self, report: &mut ReadReport) {
        // The block's length field: a pcap record's captured length, a pcapng block's total
        // length. Either byte order: a true length is small in its own.
        let at = if self.st.legacy.is_some() { 8 } else { 4 };
        let claimed = self.parser.data().get(at..at + 4).map_or(0, |b| {
            let b = [b[0], b[1], b[2], b[3]];
            u32::from_le_bytes(b).min(u32::from_be_bytes(b)) as usize
        });
        // Room for the claimed block; a buffer already that large means the claim was not
        // what the parser wanted.
        let want = (claimed + 64).next_power_of_two();
        if claimed > MAX_BLOCK || want <= self.buffer || !self.parser.grow(want) {
            let detail = format!("a block of {claimed} bytes");
            self.stop(report, "unreadable capture", detail);
        } else {
            self.buffer = want;
        }
    }

    fn stop(&mut self, report: &mut ReadReport, kind: &'static str, detail: String) {
        report.problem(&self.st.name, self.st.number + 1, kind, detail);
        self.done = true;
    }
}

/// Timestamp units per second of an `if_tsresol` byte: 10^r, or 2^(r & 0x7f) when the top bit
/// is set; 0 when it does not fit 64 bits. (pcap-parser 0.17's `ts_resolution` refuses every
/// power-of-two resolution: it checks the byte against 63 before removing the top bit.)
fn resolution(r: u8) -> u64 {
    if r & 0x80 == 0 {
        10u64.checked_pow(u32::from(r)).unwrap_or(0)
    } else {
        1u64.checked_shl(u32::from(r & 0x7f)).unwrap_or(0)
    }
}

fn describe(e: &ParseError<&[u8]>) -> String {
    match e {
        ParseError::NomError(_, kind) => format!("parse error ({kind:?})"),
        ParseError::OwnedNomError(_, kind) => format!("parse error ({kind:?})"),
        other => format!("{other:?}"),
    }
}

impl State {
    fn block(&mut self, block: PcapBlockOwned<'_>, report: &mut ReadReport) -> Option<Segment> {
        match block {
            PcapBlockOwned::LegacyHeader(h) => {
                self.legacy = Some((h.network.0, h.is_nanosecond_precision()));
                None
            }
            PcapBlockOwned::Legacy(b) => {
                let (linktype, nanos) = self.legacy.unwrap_or((1, false));
                let frac = i64::from(b.ts_usec) * if nanos { 1 } else { 1000 };
                let ts = i64::from(b.ts_sec) * 1_000_000_000 + frac;
                self.packet(linktype, ts, b.data, report)
            }
            PcapBlockOwned::NG(Block::SectionHeader(_)) => {
                self.ifaces.clear();
                None
            }
            PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                self.ifaces.push(Iface {
                    linktype: idb.linktype.0,
                    resol: resolution(idb.if_tsresol),
                    offset_s: idb.if_tsoffset,
                });
                None
            }
            PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                let iface = self.ifaces.get(epb.if_id as usize).copied();
                let Some(iface) = iface.filter(|i| i.resol > 0) else {
                    self.number += 1;
                    report.records += 1;
                    let detail = format!("interface {} is not described", epb.if_id);
                    report.problem(&self.name, self.number, "unknown interface", detail);
                    return None;
                };
                let units = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
                let ns = u128::from(units) * 1_000_000_000 / u128::from(iface.resol);
                let ts = i64::try_from(ns)
                    .unwrap_or(i64::MAX)
                    .saturating_add(iface.offset_s.saturating_mul(1_000_000_000));
                self.packet(iface.linktype, ts, epb.data, report)
            }
            PcapBlockOwned::NG(Block::SimplePacket(_)) => {
                self.number += 1;
                report.records += 1;
                let detail = "a simple packet block has no timestamp".to_owned();
                report.problem(&self.name, self.number, "packet without timestamp", detail);
                None
            }
            PcapBlockOwned::NG(_) => None,
        }
    }

    /// One captured frame of `linktype` at `ts` (before the file's offset).
    fn packet(
        &mut self,
        linktype: i32,
        ts: Time,
        frame: &[u8],
        report: &mut ReadReport,
    ) -> Option<Segment> {
        self.number += 1;
        report.records += 1;
        let ts = ts.saturating_add(self.offset_ns);
        if ts < self.last_ts {
            let detail = format!("{} ns before the packet before", self.last_ts - ts);
            report.problem(&self.name, self.number, "timestamp out of order", detail);
        }
        self.last_ts = self.last_ts.max(ts);
        let (version, ip) = match link::ip_of(linktype, frame) {
            Ok(x) => x,
            Err(LinkSkip::UnknownLinkType) => {
                let detail = format!("link type {linktype}");
                report.problem(&self.name, self.number, "unknown link type", detail);
                return None;
            }
            Err(LinkSkip::NotIp) => {
                report.problem(&self.name, self.number, "non-ip frame", String::new());
                return None;
            }
            Err(LinkSkip::Short) => {
                let detail = "shorter than its link header".to_owned();
                report.problem(&self.name, self.number, "malformed packet", detail);
                return None;
            }
        };
        match packet::decode(version, ip) {
            Ok(mut seg) => {
                seg.ts = ts;
                seg.file = self.file;
                seg.number = self.number;
                Some(seg)
            }
            Err(PacketSkip::Malformed(why)) => {
                report.problem(&self.name, self.number, "malformed packet", why.to_owned());
                None
            }
            Err(PacketSkip::Fragment) => {
                report.note("ip fragments", 1);
                None
            }
            Err(PacketSkip::OtherProtocol) => {
                report.note("other ip protocols", 1);
                None
            }
        }
    }
}
