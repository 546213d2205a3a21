//! pcap reading throughput (budget: ≥ 1 M packets/s) on a generated capture of ≥ 1 M packets of
//! keep-alive RPC traffic (64 connections, round robin; each RPC a request, a reply and an ACK),
//! against a baseline of only iterating pcap-parser's blocks over the same bytes; and the same
//! capture read as two sniffers' files (the merge and duplicate removal).
//!
//! Run: `cargo bench -p p5-analyze --bench pcap`. Criterion's `thrpt` line is packets/s (the
//! middle value is the median).

use p5_analyze::testing::forge;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use forge::{Conv, Writer, frame};
use p5_analyze::pcap::{self, CaptureStream, PcapOptions};
use std::hint::black_box;

const CONNS: usize = 64;
const PACKETS: usize = 1_050_000;

/// The capture and its packet count.
fn capture() -> (Vec<u8>, usize) {
    let mut convs: Vec<Conv> = (0..CONNS)
        .map(|i| {
            let client = format!("10.0.{}.{}:{}", i / 200, 1 + i % 200, 40000 + i);
            let server = format!("10.1.0.{}:8080", 1 + i % 8);
            Conv::new(&client, &server, [i as u32 * 7919, i as u32 * 104_729], 0)
        })
        .collect();
    let mut w = Writer::pcap(1, true);
    let mut t = 1_700_000_000_000_000_000i64;
    let mut n = 0;
    let emit = |c: &mut Conv, w: &mut Writer, n: &mut usize| {
        for (ts, p) in c.pkts.drain(..) {
            w.packet(ts, &frame(1, &p, false));
            *n += 1;
        }
    };
    for c in &mut convs {
        c.t = t;
        c.handshake();
        t = c.t;
        emit(c, &mut w, &mut n);
    }
    while n < PACKETS {
        for c in &mut convs {
            c.t = t;
            c.rpcs(1, 80, 240);
            t = c.t;
            emit(c, &mut w, &mut n);
        }
    }
    (w.buf, n)
}

fn bench(c: &mut Criterion) {
    let (bytes, packets) = capture();
    let (trace, report) = pcap::read_one("bench", &bytes[..], &PcapOptions::default()).unwrap();
    assert_eq!(report.records as usize, packets);
    assert!(report.first.is_empty(), "{report}");
    println!(
        "capture: {packets} packets, {} MB, {} messages on {} connections",
        bytes.len() >> 20,
        trace.messages.len(),
        trace.conns.len()
    );
    let mut g = c.benchmark_group("pcap");
    g.sample_size(10);
    g.throughput(Throughput::Elements(packets as u64));
    g.bench_function("pcap-parser blocks only (baseline)", |b| {
        b.iter(|| {
            let mut r = pcap_parser::create_reader(256 << 10, &bytes[..]).unwrap();
            let mut blocks = 0u64;
            loop {
                match r.next() {
                    Ok((n, _)) => {
                        blocks += 1;
                        r.consume(n);
                    }
                    Err(pcap_parser::PcapError::Incomplete(_)) => r.refill().unwrap(),
                    Err(_) => break,
                }
            }
            black_box(blocks)
        })
    });
    g.bench_function("p5 pcap::read_one (trace built)", |b| {
        b.iter(|| {
            let (t, _) = pcap::read_one("bench", &bytes[..], &PcapOptions::default()).unwrap();
            black_box(t.messages.len())
        })
    });
    // Two sniffers that saw the same traffic: twice the packets, every second one a duplicate.
    g.throughput(Throughput::Elements(2 * packets as u64));
    g.bench_function(
        "p5 pcap::read_streams, two captures (duplicates removed)",
        |b| {
            b.iter(|| {
                let streams = ["a", "b"]
                    .iter()
                    .enumerate()
                    .map(|(i, name)| CaptureStream {
                        name: (*name).to_owned(),
                        reader: &bytes[..],
                        offset_ns: i as i64 * 20_000,
                    })
                    .collect();
                let (t, r) = pcap::read_streams(streams, &PcapOptions::default()).unwrap();
                assert_eq!(r.count("duplicate packets") as usize, packets);
                black_box(t.messages.len())
            })
        },
    );
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
