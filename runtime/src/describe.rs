//! Sensor tables the instrumented files registered, sent once per process.
//!
//! Every file `p5-instrument` rewrote carries its sensor table (`p5_wire::sensors`) as a
//! string constant and registers it at start-up: C and C++ from a constructor
//! (`p5_describe`), Rust from an `.init_array` entry ([`describe`]). Registering only stores
//! the pointer — it may run before `main`, before the runtime exists, in a program that never
//! records — and the flusher parses and sends what is new at each drain as `Sensors` frames
//! on their own stream ([`p5_wire::data::SENSORS_STREAM`]), if the log server accepted the
//! `SENSORS` capability. A forked child's flusher starts from the first table again, since the
//! child is a new process to the server.

use p5_wire::data::{DataHeader, SENSORS_STREAM, Sensors};
use p5_wire::frame::{self, FrameType};
use p5_wire::sensors::Table;
use std::collections::HashSet;
use std::collections::hash_map::DefaultHasher;
use std::hash::{BuildHasher as _, BuildHasherDefault};
use std::sync::Mutex;

/// A table part is cut near this size (a frame may hold 8 MiB).
const PART_BYTES: usize = 1 << 20;

/// The registered tables, in registration order (a header's table comes once from every file
/// that includes it; the flusher sends each text once).
static TABLES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

/// Registers one file's sensor table (its text; see `p5_wire::sensors`). Only stores the
/// pointer, so it is cheap and safe before `main`; the same table registered twice is sent once.
pub fn describe(table: &'static str) {
    TABLES.lock().unwrap_or_else(|e| e.into_inner()).push(table);
}

/// The flusher's side: which tables went out, and the stream's next sequence number.
#[derive(Debug)]
pub struct Sender {
    sent: usize,
    /// Hashes of the texts sent.
    seen: HashSet<u64>,
    next_seq: u64,
    /// Tables that did not parse (not sent).
    pub bad: u64,
}

impl Default for Sender {
    fn default() -> Self {
        Sender {
            sent: 0,
            seen: HashSet::new(),
            next_seq: 1,
            bad: 0,
        }
    }
}

impl Sender {
    /// Frames for the tables registered since the last call (each table in parts of about
    /// 1 MiB, every part a `Sensors` frame).
    pub fn new_frames(&mut self) -> Vec<Vec<u8>> {
        let fresh: Vec<&'static str> = {
            let t = TABLES.lock().unwrap_or_else(|e| e.into_inner());
            t.get(self.sent..).map(<[_]>::to_vec).unwrap_or_default()
        };
        self.sent += fresh.len();
        let mut out = Vec::new();
        for text in fresh {
            let hasher = BuildHasherDefault::<DefaultHasher>::default();
            if !self.seen.insert(hasher.hash_one(text)) {
                continue;
            }
            let Ok(table) = Table::parse(text) else {
                self.bad += 1;
                continue;
            };
            let parts = if text.len() <= PART_BYTES {
                vec![text.to_owned()]
            } else {
                table.parts(PART_BYTES)
            };
            for part in parts {
                let body = Sensors {
                    header: DataHeader {
                        stream: SENSORS_STREAM,
                        seq: self.next_seq,
                        t_p: 0,
                    },
                    table: part,
                };
                let mut f = Vec::with_capacity(body.table.len() + 48);
                frame::encode(&mut f, FrameType::Sensors as u8, &body.encode_body());
                out.push(f);
                self.next_seq += 1;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p5_wire::RawFrame;

    const T1: &str =
        "p5-sensors\t1\t/out\ta.c\tc\tab\n00000000000004d2\tfunction\t3\t1\t9\t2\tmain\tmain\n";
    const BAD: &str = "not a table";

    #[test]
    fn tables_go_out_once_and_bad_ones_are_counted() {
        describe(T1);
        describe(T1);
        describe(BAD);
        let mut s = Sender::default();
        let frames = s.new_frames();
        assert!(s.new_frames().is_empty(), "sent again");
        assert_eq!(s.bad, 1);
        let ours: Vec<_> = frames
            .iter()
            .filter_map(|f| {
                let raw = p5_wire::frame::decode(f).ok()?.0;
                let RawFrame { ty, body } = raw;
                assert_eq!(ty, FrameType::Sensors as u8);
                let (h, t) = Sensors::parse(body).ok()?;
                assert_eq!(h.stream, SENSORS_STREAM);
                Some((h.seq, t))
            })
            .filter(|(_, t)| t.file == "a.c")
            .collect();
        assert_eq!(ours.len(), 1);
        assert_eq!(ours[0].1.sensors[0].name, "main");
        // A new sender (a forked child's flusher) sends everything again.
        assert!(!Sender::default().new_frames().is_empty());
    }
}
