//! Where packets go: framed into a `Trace` byte stream, cut into chunks, deflated into
//! `compressed_packets` on a thread of its own and written out.
//!
//! The encoder (the reading thread) fills a chunk of framed packets; a full chunk goes over a
//! channel of [`IN_FLIGHT`] chunks to the writer thread, which deflates it (zlib format, as
//! Perfetto's tracing service writes and its trace processor reads `compressed_packets`)
//! and writes one outer packet. So reading and compressing overlap on two cores and memory
//! is a few chunks whatever the session's size. A chunk is cut at [`CHUNK`] bytes of framed
//! packets and no packet is larger than a few KiB (names are bounded), so even data that
//! does not compress stays under the 512 KB Perfetto asks of a compressed packet.
//! Without compression the chunks are written as they are: a plain packet stream.

use crate::error::Error;
use crate::proto::TracePacket;
use flate2::{Compress, Compression, FlushCompress};
use std::io::Write;
use std::sync::mpsc::{Receiver, SyncSender};

/// Framed packets per chunk, at most (cut at the first packet past it).
pub const CHUNK: usize = 256 * 1024;
/// Chunks between the encoder and the writer thread.
pub const IN_FLIGHT: usize = 4;

/// The encoder's side.
#[derive(Debug)]
pub struct Sink {
    raw: Vec<u8>,
    tx: Option<SyncSender<Vec<u8>>>,
    free: Receiver<Vec<u8>>,
    /// Packets written.
    pub packets: u64,
    /// Bytes of framed packets before compression.
    pub raw_bytes: u64,
}

/// The writer thread's result: bytes written.
pub type Written = Result<u64, std::io::Error>;

impl Sink {
    /// Starts the writer thread in `scope`, writing to `out`; `level`: deflate level 1–9, or
    /// `None` for no compression.
    pub fn start<'scope, 'env, W: Write + Send + 'env>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        out: &'env mut W,
        level: Option<u32>,
    ) -> (Sink, std::thread::ScopedJoinHandle<'scope, Written>) {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(IN_FLIGHT);
        let (free_tx, free) = std::sync::mpsc::sync_channel::<Vec<u8>>(IN_FLIGHT + 2);
        let handle = scope.spawn(move || write_chunks(rx, free_tx, out, level));
        let sink = Sink {
            raw: Vec::with_capacity(CHUNK + 64 * 1024),
            tx: Some(tx),
            free,
            packets: 0,
            raw_bytes: 0,
        };
        (sink, handle)
    }

    /// Appends one packet (framed as `Trace.packet`), handing the chunk over when full.
    pub fn packet(&mut self, p: &TracePacket) -> Result<(), Error> {
        let before = self.raw.len();
        prost::encoding::message::encode(1, p, &mut self.raw);
        self.raw_bytes += (self.raw.len() - before) as u64;
        self.packets += 1;
        if self.raw.len() >= CHUNK {
            self.hand_over()?;
        }
        Ok(())
    }

    /// Appends one framed packet written by `write` (see `Sequence::event`).
    pub fn raw(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> Result<(), Error> {
        let before = self.raw.len();
        write(&mut self.raw);
        self.raw_bytes += (self.raw.len() - before) as u64;
        self.packets += 1;
        if self.raw.len() >= CHUNK {
            self.hand_over()?;
        }
        Ok(())
    }

    /// A sink without a writer thread (tests): chunks go to `tx`.
    #[cfg(test)]
    pub fn detached(tx: SyncSender<Vec<u8>>, free: Receiver<Vec<u8>>) -> Sink {
        Sink {
            raw: Vec::new(),
            tx: Some(tx),
            free,
            packets: 0,
            raw_bytes: 0,
        }
    }

    /// The packets not handed over yet (tests).
    #[cfg(test)]
    pub fn pending(&self) -> &[u8] {
        &self.raw
    }

    fn hand_over(&mut self) -> Result<(), Error> {
        let next = self
            .free
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(CHUNK + 64 * 1024));
        let full = std::mem::replace(&mut self.raw, next);
        let sent = self.tx.as_ref().is_some_and(|tx| tx.send(full).is_ok());
        // The writer thread stopped: its error is reported by `finish`.
        if sent { Ok(()) } else { Err(Error::WriterGone) }
    }

    /// Hands over the last chunk and lets the writer thread finish.
    pub fn finish(mut self) -> Result<(), Error> {
        if !self.raw.is_empty() {
            self.hand_over()?;
        }
        self.tx = None;
        Ok(())
    }
}

/// The writer thread: deflates (or copies) every chunk and writes it; returns the bytes
/// written.
fn write_chunks<W: Write>(
    rx: Receiver<Vec<u8>>,
    free: SyncSender<Vec<u8>>,
    out: &mut W,
    level: Option<u32>,
) -> Written {
    let mut written = 0u64;
    let mut z = level.map(|l| Compress::new(Compression::new(l.clamp(1, 9)), true));
    let mut deflated = Vec::with_capacity(CHUNK + 1024);
    let mut framed = Vec::with_capacity(CHUNK + 1024);
    while let Ok(mut chunk) = rx.recv() {
        match z.as_mut() {
            None => {
                out.write_all(&chunk)?;
                written += chunk.len() as u64;
            }
            Some(z) => {
                deflated.clear();
                // Deflate's worst case is a few bytes per 16 KiB block over the input.
                deflated.reserve(chunk.len() + chunk.len() / 64 + 64);
                z.reset();
                let status = z
                    .compress_vec(&chunk, &mut deflated, FlushCompress::Finish)
                    .map_err(std::io::Error::other)?;
                if status != flate2::Status::StreamEnd {
                    return Err(std::io::Error::other("deflate did not finish a chunk"));
                }
                framed.clear();
                let outer = TracePacket {
                    compressed_packets: Some(std::mem::take(&mut deflated)),
                    ..Default::default()
                };
                prost::encoding::message::encode(1, &outer, &mut framed);
                deflated = outer.compressed_packets.unwrap_or_default();
                out.write_all(&framed)?;
                written += framed.len() as u64;
            }
        }
        chunk.clear();
        let _ = free.try_send(chunk);
    }
    out.flush()?;
    Ok(written)
}
