//! The pcap reader on captures written by the tests themselves (every link type, both formats,
//! retransmissions, gaps, two sniffers, bad input) and on real captures made with tcpdump on
//! loopback of a small multi-tier HTTP system (see `pcap/loopback.rs`; `pcap/convolution.rs`
//! analyses one with convolution) and of a relay whose
//! worker answers the client by another path (`pcap/forwarding.rs`, linking).

#[path = "pcap/convolution.rs"]
mod convolution;
use p5_analyze::testing::forge;
#[path = "pcap/forwarding.rs"]
mod forwarding;
#[path = "pcap/loopback.rs"]
mod loopback;

use forge::{ACK, Conv, FIN, RST, SYN, Writer, frame, tcp_ip, udp_ip};
use p5_analyze::pcap::{self, CaptureStream, NodeNaming, PcapError, PcapOptions};
use p5_analyze::trace::NO_CALL_ID;
use p5_analyze::{Kind, Proto, ReadReport, Trace};
use proptest::prelude::*;

const T0: i64 = 1_700_000_000_123_456_789;

fn read(bytes: &[u8]) -> (Trace, ReadReport) {
    pcap::read_one("t.pcap", bytes, &PcapOptions::default()).expect("a capture")
}

fn read_endpoints(bytes: &[u8]) -> (Trace, ReadReport) {
    let opts = PcapOptions {
        node: NodeNaming::Endpoint,
        ..PcapOptions::default()
    };
    pcap::read_one("t.pcap", bytes, &opts).expect("a capture")
}

/// (kind, src name, dst name, call id, bytes) of every message.
fn summary(t: &Trace) -> Vec<(Kind, String, String, u64, u32)> {
    t.messages
        .iter()
        .map(|m| {
            let (s, d) = (t.nodes.name(m.src), t.nodes.name(m.dst));
            (m.kind, s.to_owned(), d.to_owned(), m.call_id, m.bytes)
        })
        .collect()
}

fn one_rpc(client: &str, server: &str) -> Conv {
    let mut c = Conv::new(client, server, [1000, 5000], T0);
    c.handshake();
    c.rpcs(1, 300, 2000);
    c.close();
    c
}

#[test]
fn every_link_type_ipv4_and_ipv6() {
    let cases = [
        (1, false),
        (1, true),
        (113, false),
        (276, false),
        (0, false),
        (108, false),
    ];
    let raw = [(101, false), (12, false), (14, false)];
    for (v6, (client, server)) in [
        (false, ("10.0.0.1:40000", "10.0.0.2:80")),
        (true, ("[fd00::1]:40000", "[fd00::2]:80")),
    ] {
        let conv = one_rpc(client, server);
        let ip_type = if v6 { 229 } else { 228 };
        for (linktype, vlan) in cases.iter().chain(&raw).chain(&[(ip_type, false)]) {
            let mut w = Writer::pcap(*linktype, false);
            for (t, p) in &conv.pkts {
                w.packet(*t, &frame(*linktype, p, *vlan));
            }
            let (trace, report) = read(&w.buf);
            let what = format!("link type {linktype} vlan {vlan} v6 {v6}: {report}");
            assert_eq!(report.records, conv.pkts.len() as u64, "{what}");
            assert!(report.first.is_empty(), "{what}");
            let (c, s) = (conv.ends[0].ip().to_string(), conv.ends[1].ip().to_string());
            let s0 = summary(&trace);
            assert_eq!(s0.len(), 2, "{what}");
            assert_eq!(
                s0[0],
                (Kind::Call, c.clone(), s.clone(), s0[0].3, 300),
                "{what}"
            );
            assert_eq!(s0[1], (Kind::Ret, s, c, s0[0].3, 2000), "{what}");
            assert_eq!(trace.conns.len(), 1);
            assert_eq!(trace.conns[0].proto, Proto::Tcp);
            assert_eq!(trace.conns[0].initiator_ep, Some(conv.ends[0]));
        }
    }
}

#[test]
fn message_times_are_first_and_last_packet_of_the_run() {
    let mut c = Conv::new("10.0.0.1:40000", "10.0.0.2:80", [1, 2], T0);
    c.handshake(); // packets at T0, +10, +20 µs
    c.send(0, 3000, 1448); // 3 packets: +30, +40, +50
    c.send(1, 10, 1448); // +60
    let (trace, _) = read(&c.pcap(1, true));
    let m = &trace.messages;
    assert_eq!((m[0].t_send, m[0].t_recv), (T0 + 30_000, T0 + 50_000));
    assert_eq!((m[1].t_send, m[1].t_recv), (T0 + 60_000, T0 + 60_000));
    assert_eq!(m[0].msg_ref, 4, "the run's first packet");
    assert_eq!(m[0].bytes, 3000);
}

#[test]
fn nanosecond_pcap_and_microsecond_pcap() {
    let c = one_rpc("10.0.0.1:40000", "10.0.0.2:80");
    let (ns, _) = read(&c.pcap(1, true));
    let (us, _) = read(&c.pcap(1, false));
    let first_data = c.pkts[3].0;
    assert_eq!(ns.messages[0].t_send, first_data);
    assert_eq!(us.messages[0].t_send, first_data / 1000 * 1000);
    assert_ne!(first_data % 1000, 0, "the test needs sub-µs digits");
}

#[test]
fn pcapng_with_tsresol_and_tsoffset() {
    let c = one_rpc("[fd00::1]:40000", "[fd00::2]:80");
    let first_data = c.pkts[3].0;
    for (resol, offset, want) in [
        (Some(9), None, first_data),
        (None, None, first_data / 1000 * 1000),
        (Some(9), Some(1_600_000_000), first_data),
        // 2^-30 s units: the reader's ns value is the floor of units × 10⁹ / 2³⁰.
        (Some(0x80 | 30), None, {
            let units = (first_data as u128 * (1 << 30) / 1_000_000_000) as u64;
            (u128::from(units) * 1_000_000_000 / (1 << 30)) as i64
        }),
    ] {
        let mut w = Writer::pcapng(276, resol, offset);
        for (t, p) in &c.pkts {
            w.packet(*t, &frame(276, p, false));
        }
        let (trace, report) = read(&w.buf);
        assert!(report.first.is_empty(), "{report}");
        assert_eq!(trace.messages.len(), 2, "{resol:?} {offset:?}");
        assert_eq!(trace.messages[0].t_send, want, "{resol:?} {offset:?}");
        assert_eq!(trace.nodes.name(trace.messages[0].src), "fd00::1");
    }
}

#[test]
fn keep_alive_three_rpcs_give_three_call_pairs_with_unique_ids() {
    let mut a = Conv::new("10.0.0.1:40000", "10.0.0.2:80", [7, 9], T0);
    a.handshake();
    a.rpcs(3, 200, 700);
    // Idle: the client probes with the byte before its next sequence number, twice.
    for _ in 0..2 {
        let probe = a.seq[0] - 1;
        a.raw(0, probe, ACK, b"x");
        a.ack(1);
    }
    a.close();
    let mut b = Conv::new("10.0.0.1:40001", "10.0.0.3:80", [7, 9], T0 + 5);
    b.handshake();
    b.rpcs(3, 100, 100);
    let mut w = Writer::pcap(1, true);
    let mut all: Vec<_> = a.pkts.iter().chain(&b.pkts).collect();
    all.sort_by_key(|(t, _)| *t);
    for (t, p) in all {
        w.packet(*t, &frame(1, p, false));
    }
    let (trace, report) = read(&w.buf);
    assert_eq!(report.count("keep-alive probes"), 2, "{report}");
    assert_eq!(report.count("retransmitted segments"), 0, "{report}");
    assert_eq!(trace.messages.len(), 12);
    let mut ids = std::collections::BTreeMap::new();
    for m in &trace.messages {
        ids.entry((m.conn, m.call_id))
            .or_insert_with(Vec::new)
            .push(m.kind);
    }
    assert_eq!(ids.len(), 6, "{ids:?}");
    assert!(
        ids.values().all(|k| k == &[Kind::Call, Kind::Ret]),
        "{ids:?}"
    );
    let unique: std::collections::BTreeSet<_> = trace.messages.iter().map(|m| m.call_id).collect();
    assert_eq!(unique.len(), 6, "call ids are unique across connections");
    let on_a: Vec<_> = trace
        .messages
        .iter()
        .filter(|m| m.conn == 0)
        .map(|m| m.bytes)
        .collect();
    assert_eq!(on_a, [200, 700, 200, 700, 200, 700]);
}

#[test]
fn retransmission_is_counted_once() {
    let mut c = Conv::new("10.0.0.1:40000", "10.0.0.2:80", [1, 2], T0);
    c.handshake();
    let seq = c.send(0, 100, 1448);
    c.raw(0, seq, ACK, &[b'x'; 100]); // the same 100 bytes again
    c.send(1, 50, 1448);
    let again = c.seq[1] - 50;
    c.raw(1, again, ACK, &[b'y'; 50]); // the reply, again
    let (trace, report) = read(&c.pcap(1, false));
    assert_eq!(
        summary(&trace).iter().map(|s| s.4).collect::<Vec<_>>(),
        [100, 50]
    );
    assert_eq!(report.count("retransmitted segments"), 2, "{report}");
    assert_eq!(
        trace.messages[1].t_recv,
        c.pkts.last().unwrap().0 / 1000 * 1000
    );
}

#[test]
fn capture_gap_is_counted_and_spanned() {
    let mut c = Conv::new("10.0.0.1:40000", "10.0.0.2:80", [1, 2], T0);
    c.handshake();
    c.send(0, 3000, 1000);
    c.pkts.remove(4); // the middle segment was not captured
    c.send(1, 10, 1448);
    let (trace, report) = read(&c.pcap(1, false));
    assert_eq!(report.count("capture gaps"), 1, "{report}");
    assert_eq!(report.count("out-of-order segments"), 0);
    assert_eq!(trace.messages[0].bytes, 3000);
}

#[test]
fn out_of_order_segment_fills_its_hole() {
    let mut c = Conv::new("10.0.0.1:40000", "10.0.0.2:80", [1, 2], T0);
    c.handshake();
    c.send(0, 3000, 1000);
    let late = c.pkts.remove(4);
    c.pkts.insert(5, late);
    for (i, p) in c.pkts.iter_mut().enumerate() {
        p.0 = T0 + i as i64 * 1000;
    }
    c.t = T0 + 10_000;
    c.send(1, 10, 1448);
    let (trace, report) = read(&c.pcap(1, false));
    assert_eq!(report.count("capture gaps"), 0, "{report}");
    assert_eq!(report.count("out-of-order segments"), 1);
    assert_eq!(report.count("retransmitted segments"), 0);
    assert_eq!(trace.messages[0].bytes, 3000);
}

#[test]
fn two_sniffers_give_one_message_with_two_timestamps() {
    let c = one_rpc("10.0.0.1:40000", "10.0.0.2:80");
    // Sniffer A sits at the client, B at the server: B sees client packets 40 µs later and
    // server packets 40 µs earlier. B's clock is 1 s fast: its offset corrects it.
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let client_ip = c.ends[0].ip();
    for (t, p) in &c.pkts {
        let from_client = p[12..16]
            == match client_ip {
                std::net::IpAddr::V4(v) => v.octets(),
                _ => unreachable!(),
            };
        let (ta, tb) = if from_client {
            (*t, t + 40_000)
        } else {
            (t + 40_000, *t)
        };
        a.push((ta, frame(1, p, false)));
        b.push((tb + 1_000_000_000, frame(113, p, false)));
    }
    // Each sniffer writes in its own time order.
    let write = |mut pkts: Vec<(i64, Vec<u8>)>, linktype| {
        pkts.sort_by_key(|p| p.0);
        let mut w = Writer::pcap(linktype, true);
        for (t, f) in pkts {
            w.packet(t, &f);
        }
        w.buf
    };
    let (a, b) = (write(a, 1), write(b, 113));
    let opts = PcapOptions::default();
    let streams = vec![
        CaptureStream {
            name: "a.pcap".into(),
            reader: &a[..],
            offset_ns: 0,
        },
        CaptureStream {
            name: "b.pcap".into(),
            reader: &b[..],
            offset_ns: -1_000_000_000,
        },
    ];
    let (trace, report) = pcap::read_streams(streams, &opts).unwrap();
    assert_eq!(
        report.count("duplicate packets"),
        c.pkts.len() as u64,
        "{report}"
    );
    assert_eq!(report.count("retransmitted segments"), 0, "{report}");
    let m = &trace.messages;
    assert_eq!(m.len(), 2);
    // The request is one packet, the reply two.
    let (req, resp, resp_end) = (c.pkts[3].0, c.pkts[4].0, c.pkts[5].0);
    assert_eq!(
        (m[0].kind, m[0].t_send, m[0].t_recv),
        (Kind::Call, req, req + 40_000)
    );
    assert_eq!(
        (m[1].kind, m[1].t_send, m[1].t_recv),
        (Kind::Ret, resp, resp_end + 40_000)
    );
    assert_eq!(m[0].call_id, m[1].call_id);
}

#[test]
fn truncated_file_reports_the_packet_and_keeps_what_came_before() {
    let c = one_rpc("10.0.0.1:40000", "10.0.0.2:80");
    let mut bytes = c.pcap(1, false);
    let whole = read(&bytes).0;
    bytes.truncate(bytes.len() - 30); // the last packet (an ACK of 54 bytes + 16) cut short
    let (trace, report) = read(&bytes);
    assert_eq!(report.count("truncated packet"), 1, "{report}");
    let p = &report.first[0];
    assert_eq!(
        (p.file.as_str(), p.position),
        ("t.pcap", c.pkts.len() as u64)
    );
    assert_eq!(report.records, c.pkts.len() as u64 - 1);
    assert_eq!(summary(&trace), summary(&whole));
}

#[test]
fn unknown_link_type_and_non_ip_frames_are_reported() {
    let c = one_rpc("10.0.0.1:40000", "10.0.0.2:80");
    let (_, report) = read(&c.pcap(147, false));
    assert_eq!(report.count("unknown link type"), c.pkts.len() as u64);
    assert_eq!(report.first[0].position, 1);
    assert!(
        report
            .to_string()
            .contains("t.pcap:1: unknown link type: link type 147"),
        "{report}"
    );

    let mut w = Writer::pcap(1, false);
    let mut arp = vec![0xffu8; 12];
    arp.extend([0x08, 0x06]);
    arp.extend([0u8; 28]);
    w.packet(T0, &arp);
    for (t, p) in &c.pkts {
        w.packet(*t, &frame(1, p, false));
    }
    w.packet(T0 + 1, &[0u8; 10]);
    let (trace, report) = read(&w.buf);
    assert_eq!(report.count("non-ip frame"), 1);
    assert_eq!(report.count("malformed packet"), 1);
    assert_eq!(report.first[1].position, c.pkts.len() as u64 + 2);
    assert_eq!(report.count("timestamp out of order"), 1, "{report}");
    assert_eq!(trace.messages.len(), 2);
}

#[test]
fn not_a_capture_is_an_error() {
    for bytes in [
        &b""[..],
        b"hello, world, this is not a capture at all",
        &[0xd4, 0xc3],
    ] {
        let e = pcap::read_one("x", bytes, &PcapOptions::default()).unwrap_err();
        assert!(matches!(e, PcapError::NotACapture { .. }), "{e}");
    }
    let e = pcap::read(
        &[pcap::CaptureFile {
            path: "/nonexistent/x.pcap".into(),
            offset_ns: 0,
        }],
        &PcapOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("/nonexistent/x.pcap"), "{e}");
}

#[test]
fn port_reuse_after_close_is_a_new_connection() {
    let mut c = Conv::new("10.0.0.1:40000", "10.0.0.2:80", [1, 2], T0);
    c.handshake();
    c.rpcs(1, 10, 20);
    c.close();
    c.ack(1); // a trailing ACK: no new connection
    c.seq = [90_000, 70_000];
    c.handshake();
    c.rpcs(2, 10, 20);
    c.raw(1, c.seq[1], RST | ACK, &[]);
    let (trace, _) = read(&c.pcap(1, false));
    assert_eq!(trace.conns.len(), 2);
    let conns: Vec<_> = trace.messages.iter().map(|m| m.conn).collect();
    assert_eq!(conns, [0, 0, 1, 1, 1, 1]);
}

#[test]
fn without_a_handshake_the_higher_port_initiates() {
    let mut c = Conv::new("10.0.0.9:80", "10.0.0.1:51000", [1, 2], T0);
    // The capture starts mid-connection, with the server (port 80) answering.
    c.send(0, 100, 1448);
    c.send(1, 30, 1448);
    c.send(0, 100, 1448);
    let (trace, _) = read(&c.pcap(1, false));
    assert_eq!(trace.conns[0].initiator_ep, Some(c.ends[1]));
    let s = summary(&trace);
    assert_eq!((s[0].0, s[1].0, s[2].0), (Kind::Ret, Kind::Call, Kind::Ret));
    assert_eq!(s[1].3, s[2].3, "the call and the return after it pair");
    assert_ne!(s[0].3, s[1].3, "the orphan return has an id of its own");
}

#[test]
fn udp_datagrams_and_endpoint_names() {
    let (a, b): (std::net::SocketAddr, std::net::SocketAddr) =
        ("[::1]:5353".parse().unwrap(), "[::2]:53".parse().unwrap());
    let mut w = Writer::pcap(101, false);
    w.packet(T0, &udp_ip(a, b, b"query"));
    w.packet(T0 + 1000, &udp_ip(b, a, b"answer!"));
    w.packet(T0 + 2000, &tcp_ip(a, b, 5, 0, FIN, &[])); // a stray FIN opens nothing
    let (trace, report) = read_endpoints(&w.buf);
    assert_eq!(report.records, 3);
    let s = summary(&trace);
    assert_eq!(
        s,
        [
            (
                Kind::Msg,
                "[::1]:5353".into(),
                "[::2]:53".into(),
                NO_CALL_ID,
                5
            ),
            (
                Kind::Msg,
                "[::2]:53".into(),
                "[::1]:5353".into(),
                NO_CALL_ID,
                7
            ),
        ]
    );
    assert_eq!(trace.conns.len(), 1);
    assert_eq!(
        (trace.conns[0].proto, trace.conns[0].initiator_ep),
        (Proto::Udp, Some(a))
    );
}

#[test]
fn syn_with_data_and_rst_mid_run() {
    let mut c = Conv::new("10.0.0.1:40000", "10.0.0.2:80", [100, 200], T0);
    c.raw(0, 100, SYN, b"early"); // TCP fast open: data on the SYN
    c.seq[0] = 106;
    c.raw(1, 200, SYN | ACK, &[]);
    c.seq[1] = 201;
    c.send(0, 5, 1448);
    c.raw(1, c.seq[1], RST, &[]);
    c.send(1, 5, 1448); // after the reset: nothing
    let (trace, _) = read(&c.pcap(1, false));
    let s = summary(&trace);
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!(s[0].4, 10);
    assert_eq!(trace.conns.len(), 1, "data after a reset opens nothing");
}

#[test]
fn pcapng_interfaces_each_with_its_link_type() {
    // `tcpdump -i any` style: one interface per link type; packets alternate between them.
    let c = one_rpc("10.0.0.1:40000", "10.0.0.2:80");
    let mut w = Writer::pcapng(1, None, None);
    w.interface(276);
    for (i, (t, p)) in c.pkts.iter().enumerate() {
        let (if_id, linktype) = if i % 2 == 0 { (0, 1) } else { (1, 276) };
        w.packet_on(if_id, *t, &frame(linktype, p, false));
    }
    w.packet_on(5, T0, &frame(1, &c.pkts[0].1, false));
    w.simple_packet(&frame(1, &c.pkts[0].1, false));
    let (trace, report) = read(&w.buf);
    assert_eq!(
        summary(&trace).iter().map(|s| s.4).collect::<Vec<_>>(),
        [300, 2000]
    );
    assert_eq!(report.records, c.pkts.len() as u64 + 2);
    assert_eq!(report.count("unknown interface"), 1, "{report}");
    assert_eq!(report.count("packet without timestamp"), 1);
    assert_eq!(report.first[0].position, c.pkts.len() as u64 + 1);
}

#[test]
fn fragments_and_other_protocols_are_counted() {
    let (a, b) = ("10.0.0.1:1".parse().unwrap(), "10.0.0.2:2".parse().unwrap());
    let mut frag = udp_ip(a, b, &[0; 40]);
    frag[6] |= 0x20; // more fragments
    let mut icmp = udp_ip(a, b, &[0; 8]);
    icmp[9] = 1; // protocol ICMP
    let mut w = Writer::pcap(101, false);
    w.packet(T0, &frag);
    w.packet(T0 + 1, &icmp);
    w.packet(T0 + 2, &udp_ip(a, b, b"whole"));
    let (trace, report) = read(&w.buf);
    assert_eq!(report.count("ip fragments"), 1, "{report}");
    assert_eq!(report.count("other ip protocols"), 1);
    assert_eq!(trace.messages.len(), 1);
    assert!(report.first.is_empty());
}

proptest! {
    // P5_PCAP_CASES=20000 for a longer run (release: `cargo test --release`).
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("P5_PCAP_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
    ))]

    /// Random bytes after a valid header, and random mutations of a valid capture, never panic.
    #[test]
    fn garbage_never_panics(
        seed in proptest::collection::vec(any::<u8>(), 0..600),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..24),
        ng in any::<bool>(),
        cut in any::<usize>(),
    ) {
        let c = one_rpc("10.0.0.1:40000", "10.0.0.2:80");
        let mut bytes = if ng {
            let mut w = Writer::pcapng(1, Some(9), None);
            for (t, p) in &c.pkts { w.packet(*t, &frame(1, p, true)); }
            w.buf
        } else {
            c.pcap(0, true)
        };
        for (at, x) in &flips {
            let i = at % bytes.len();
            bytes[i] ^= x;
        }
        bytes.truncate(bytes.len() - cut % 64);
        bytes.extend(&seed);
        let _ = pcap::read_one("m", &bytes[..], &PcapOptions::default());
        let _ = pcap::read_one("r", &seed[..], &PcapOptions::default());
        let mut h = Writer::pcap(1, false).buf;
        h.extend(&seed);
        let _ = pcap::read_one("h", &h[..], &PcapOptions::default());
    }
}

/// `p5 analyze convert --pcap` writes a capture as a Project 5 text trace: one CALL and one
/// RET line per RPC (both ends of each: `*_SENT` and `*_RCVD`), nodes named by `--node`, a
/// second capture's `@+OFFSET` applied, and `--node program` refused.
#[test]
fn convert_writes_a_capture_as_a_text_trace() {
    use p5_analyze::node::NodeKey;
    use p5_analyze::parse::parse_capture;
    use p5_analyze::source::Source;
    // `p5 analyze convert --pcap CAP [--node KEY] -o OUT`, as the front runs it.
    let p5 = |cap: &str, node: Option<NodeKey>, out: &std::path::Path| {
        let source = Source::pcap(vec![parse_capture(cap)?], node)?;
        let t = source.read(None, true, &mut |_| {})?;
        p5_analyze::text::write_file(&t.trace, &t.layout, out)
    };
    let mut a = Conv::new("10.0.0.1:40000", "10.0.0.2:80", [7, 9], T0);
    a.handshake();
    a.rpcs(3, 200, 700);
    a.close();
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("a.pcap");
    std::fs::write(&cap, a.pcap(1, true)).unwrap();
    let out = dir.path().join("a.p5t");
    let cap_s = cap.to_str().unwrap();
    p5(cap_s, None, &out).unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    let count = |op: &str| {
        text.lines()
            .filter(|l| l.split('\t').nth(1) == Some(op))
            .count()
    };
    assert_eq!((count("CALL_SENT"), count("RET_SENT")), (3, 3), "{text}");
    assert!(
        text.lines()
            .all(|l| l.contains("10.0.0.1\t10.0.0.2") || l.contains("10.0.0.2\t10.0.0.1")),
        "{text}"
    );
    // Endpoints, and a clock offset on the capture.
    let shifted = format!("{cap_s}@+1s");
    p5(&shifted, Some(NodeKey::Endpoint), &out).unwrap();
    let text2 = std::fs::read_to_string(&out).unwrap();
    assert!(text2.contains("10.0.0.1:40000\t10.0.0.2:80"), "{text2}");
    let first = |t: &str| -> String { t.lines().next().unwrap().split('.').next().unwrap().into() };
    let (s1, s2): (i64, i64) = (
        first(&text).parse().unwrap(),
        first(&text2).parse().unwrap(),
    );
    assert_eq!(
        s2 - s1,
        1,
        "a one-second offset moves every time by one second"
    );
    let err = p5(cap_s, Some(NodeKey::Program), &out).unwrap_err();
    assert!(err.to_string().contains("hosts and endpoints"), "{err}");
}
