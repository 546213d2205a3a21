//! The pcap / pcapng reader: packet captures of a system become a [`Trace`].
//!
//! ```text
//! capture (file or Read) ─capture─▶ frames ─link─▶ IP packets ─packet─▶ segments
//!   several captures ─merge─▶ one time-ordered stream, duplicates removed
//!   ─flows (tcp, udp)─▶ messages: TCP payload runs (call / return), UDP datagrams
//! ```
//!
//! - [`capture`] reads one file through pcap-parser's streaming reader (pcap with µs or ns
//!   timestamps, pcapng with `if_tsresol` and `if_tsoffset`), holding a bounded buffer.
//! - [`link`] strips Ethernet (with VLAN tags), Linux cooked SLL and SLL2, loopback NULL and
//!   LOOP, and raw IP; [`packet`] slices IPv4/IPv6 and TCP/UDP (etherparse).
//! - [`merge`] interleaves several captures by time after each one's clock offset and drops a
//!   packet seen by two sniffers, keeping both times on its message.
//! - [`flows`] and [`tcp`] turn segments into messages: a TCP request is the payload run from
//!   the connection's initiator, its reply the following run back; call ids pair them;
//!   retransmissions, reordering and capture gaps are handled by sequence range.
//!
//! References back to the input: a message's `msg_ref` is the packet number (1-based) of its
//! run's first packet, plus the capture's index × 2⁴⁰ when several captures were read; a
//! connection's `conn_ref` is its 1-based number in order of appearance.
//!
//! Bad input is never a panic: everything skipped is counted in the [`ReadReport`] with its
//! file and packet number. Only an input that cannot be opened or is not a capture at all is an
//! error. Memory is the flow table (per-connection state) and the messages produced.

pub mod capture;
pub mod flows;
pub mod link;
pub mod merge;
pub mod packet;
pub mod tcp;

use crate::report::ReadReport;
use crate::trace::{Time, Trace};
use std::io::Read;
use std::path::PathBuf;

/// How captured endpoints are named as nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodeNaming {
    /// The IP address as text (`10.0.0.1`, `::1`): one node per host.
    #[default]
    Host,
    /// `ip:port` (`10.0.0.1:80`, `[::1]:80`): one node per endpoint.
    Endpoint,
}

/// Reader options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcapOptions {
    /// Node naming.
    pub node: NodeNaming,
    /// How far apart (ns, after offsets) two captures' sightings of one packet may be and still
    /// count as the same packet. Default 1 s.
    pub dup_window_ns: Time,
}

impl Default for PcapOptions {
    fn default() -> Self {
        PcapOptions {
            node: NodeNaming::Host,
            dup_window_ns: 1_000_000_000,
        }
    }
}

/// A capture file and the offset added to its timestamps (its sniffer's clock error, negated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureFile {
    /// The file.
    pub path: PathBuf,
    /// Nanoseconds added to each of its timestamps.
    pub offset_ns: i64,
}

/// A capture read from any byte stream (tests, fuzzing, pipes).
#[derive(Debug)]
pub struct CaptureStream<R> {
    /// Its name in the report.
    pub name: String,
    /// The bytes.
    pub reader: R,
    /// Nanoseconds added to each of its timestamps.
    pub offset_ns: i64,
}

/// Why captures could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    /// The file could not be opened.
    #[error("cannot open capture {path}: {source}")]
    Open {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The input does not start with a pcap or pcapng header.
    #[error("{file}: not a pcap or pcapng capture ({detail})")]
    NotACapture {
        /// The input's name.
        file: String,
        /// What was wrong.
        detail: String,
    },
}

/// Reads capture files of one system into one trace.
pub fn read(files: &[CaptureFile], opts: &PcapOptions) -> Result<(Trace, ReadReport), PcapError> {
    let mut streams = Vec::with_capacity(files.len());
    for f in files {
        let path = f.path.display().to_string();
        let file = std::fs::File::open(&f.path).map_err(|source| PcapError::Open {
            path: path.clone(),
            source,
        })?;
        streams.push(CaptureStream {
            name: path,
            reader: file,
            offset_ns: f.offset_ns,
        });
    }
    read_streams(streams, opts)
}

/// Reads captures from byte streams into one trace (the streaming entry point).
pub fn read_streams<R: Read + Send>(
    streams: Vec<CaptureStream<R>>,
    opts: &PcapOptions,
) -> Result<(Trace, ReadReport), PcapError> {
    let mut captures = Vec::with_capacity(streams.len());
    for (i, s) in streams.into_iter().enumerate() {
        let index = u32::try_from(i).unwrap_or(u32::MAX);
        captures.push(capture::Capture::open(
            &s.name,
            s.reader,
            index,
            s.offset_ns,
        )?);
    }
    let mut report = ReadReport::default();
    let mut flows = flows::Flows::new(opts.node);
    merge::run(&mut captures, opts.dup_window_ns, &mut flows, &mut report);
    let trace = flows.finish(&mut report);
    Ok((trace, report))
}

/// Reads one capture from `reader`, named `name` in the report.
pub fn read_one(
    name: &str,
    reader: impl Read + Send,
    opts: &PcapOptions,
) -> Result<(Trace, ReadReport), PcapError> {
    read_streams(
        vec![CaptureStream {
            name: name.to_owned(),
            reader,
            offset_ns: 0,
        }],
        opts,
    )
}
