//! One outgoing stream of the agent's own process: it numbers frames (`StreamOpen` = seq 0,
//! then 1, 2, …) and encodes them in the frame envelope. `t_p` is left 0 here; the uplink
//! stamps it at each (re)transmission.
//!
//! Stream ids of an agent: [`METRICS_STREAM`] (host metrics: `Names`, `Events` with `Counter`
//! events, `ClockSamples` of the hops below) and [`OSMON_STREAM`] (OS monitor).

use p5_wire::StreamKind;
use p5_wire::data::{self, ClockSamples, DataHeader, Name, Names, StreamClose, StreamOpen};
use p5_wire::event::EventEncoder;
use p5_wire::frame::{self, FrameType};

/// The host-metrics stream id.
pub const METRICS_STREAM: u32 = 1;
/// The OS-monitor stream id (the next ids if the monitor changes mode while running).
pub const OSMON_STREAM: u32 = 2;

/// Sequence numbering and encoding for one stream.
#[derive(Debug)]
pub struct StreamWriter {
    id: u32,
    next_seq: u64,
}

fn enveloped(ty: FrameType, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(frame::HEADER_LEN + 1 + body.len());
    frame::encode(&mut out, ty as u8, body);
    out
}

impl StreamWriter {
    /// A stream that has not been opened yet.
    pub fn new(id: u32) -> Self {
        Self { id, next_seq: 0 }
    }

    /// True once `open` was called.
    pub fn is_open(&self) -> bool {
        self.next_seq > 0
    }

    fn header(&mut self) -> DataHeader {
        let h = DataHeader {
            stream: self.id,
            seq: self.next_seq,
            t_p: 0,
        };
        self.next_seq += 1;
        h
    }

    /// Takes back the sequence number of the last frame made (it was not queued).
    pub fn rollback(&mut self) {
        self.next_seq = self.next_seq.saturating_sub(1);
    }

    /// The `StreamOpen` frame (seq 0).
    pub fn open(&mut self, kind: StreamKind, name: &str) -> Vec<u8> {
        self.next_seq = 0;
        let o = StreamOpen {
            header: self.header(),
            kind_raw: kind as u8,
            tid: 0,
            name: name.to_owned(),
        };
        enveloped(FrameType::StreamOpen, &o.encode_body())
    }

    /// A `Names` frame.
    pub fn names(&mut self, names: Vec<Name>) -> Vec<u8> {
        let n = Names {
            header: self.header(),
            names,
        };
        enveloped(FrameType::Names, &n.encode_body())
    }

    /// An `Events` frame.
    pub fn events(&mut self, dropped: u64, batch: &EventEncoder) -> Vec<u8> {
        let mut out = Vec::with_capacity(batch.encoded_len() + 48);
        let h = self.header();
        data::encode_events(&mut out, h, dropped, batch);
        out
    }

    /// A `ClockSamples` frame.
    pub fn clock_samples(&mut self, peer: u64, samples: Vec<(u64, u64)>) -> Vec<u8> {
        let c = ClockSamples {
            header: self.header(),
            peer_process_uid: peer,
            samples,
        };
        enveloped(FrameType::ClockSamples, &c.encode_body())
    }

    /// The `StreamClose` frame.
    pub fn close(&mut self, t_end: u64, dropped: u64) -> Vec<u8> {
        let c = StreamClose {
            header: self.header(),
            t_end,
            dropped,
        };
        enveloped(FrameType::StreamClose, &c.encode_body())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p5_wire::data::validate_client_frame;

    #[test]
    fn frames_are_numbered_and_valid() {
        let mut w = StreamWriter::new(METRICS_STREAM);
        let mut enc = EventEncoder::new();
        enc.push(&p5_wire::Event::Counter {
            t: 5,
            sensor: 7,
            value: -3,
        });
        let frames = [
            w.open(StreamKind::HostMetrics, "host metrics"),
            w.names(vec![Name {
                id: 7,
                name: "x".into(),
                unit: "count".into(),
                scale_exp: 0,
            }]),
            w.events(0, &enc),
            w.clock_samples(9, vec![(1, 2)]),
            w.close(10, 0),
        ];
        for (i, f) in frames.iter().enumerate() {
            let (raw, n) = frame::decode(f).unwrap();
            assert_eq!(n, f.len());
            validate_client_frame(raw.ty, raw.body).unwrap();
            assert_eq!(DataHeader::peek(raw.body).unwrap().seq, i as u64);
        }
    }
}
