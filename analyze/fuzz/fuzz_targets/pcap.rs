//! Feeds arbitrary bytes to the pcap/pcapng reader: it may refuse them (not a capture) or
//! report what it skipped, but never panic, hang or hold more than a bounded buffer.
//! The input is read three ways: as it is, behind a valid pcap header (so the packet path is
//! reached quickly), and as two captures of one system (the merge and duplicate removal).
//! Run: `cd analyze/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run pcap`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use p5_analyze::pcap::{self, CaptureStream, NodeNaming, PcapOptions};

/// A pcap header (µs timestamps) of link type `linktype`.
fn header(linktype: u32) -> Vec<u8> {
    let mut h = Vec::with_capacity(24);
    h.extend(0xa1b2_c3d4u32.to_le_bytes());
    h.extend(2u16.to_le_bytes());
    h.extend(4u16.to_le_bytes());
    h.extend([0u8; 8]);
    h.extend(65535u32.to_le_bytes());
    h.extend(linktype.to_le_bytes());
    h
}

fuzz_target!(|bytes: &[u8]| {
    let opts = PcapOptions::default();
    let _ = pcap::read_one("raw", bytes, &opts);
    if let Some((&sel, rest)) = bytes.split_first() {
        let linktype = [0, 1, 12, 101, 108, 113, 228, 229, 276][usize::from(sel) % 9];
        let mut h = header(linktype);
        h.extend(rest);
        let ep = PcapOptions {
            node: NodeNaming::Endpoint,
            ..opts
        };
        let _ = pcap::read_one("headed", &h[..], &ep);
        let half = rest.len() / 2;
        let (a, b) = (
            [&header(linktype)[..], &rest[..half]].concat(),
            [&header(1)[..], &rest[half..]].concat(),
        );
        let streams = vec![
            CaptureStream {
                name: "a".into(),
                reader: &a[..],
                offset_ns: 0,
            },
            CaptureStream {
                name: "b".into(),
                reader: &b[..],
                offset_ns: i64::from(sel) * 1000,
            },
        ];
        let _ = pcap::read_streams(streams, &opts);
    }
});
