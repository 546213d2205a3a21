//! Integration tests of the wire format: round trips, decoder totality, and the shared test
//! vectors in `test_vectors/vectors.json` that every runtime implementation must reproduce.

use p5_wire::data::{self, Ack, DataHeader, Ping, StreamClose, StreamOpen};
use p5_wire::event::decode_all;
use p5_wire::frame::{self, FrameType, Frames};
use p5_wire::store::{self, SampleSource, SegmentHeader, StoreRecord};
use p5_wire::{Caps, CommOp, Endpoint, Event, EventEncoder, EventsFrame, Hello, Identity};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::net::SocketAddr;

fn endpoint() -> impl Strategy<Value = Endpoint> {
    prop_oneof![
        Just(Endpoint::None),
        any::<([u8; 4], u16)>().prop_map(|(a, p)| Endpoint::Inet(SocketAddr::from((a, p)))),
        any::<([u8; 16], u16)>().prop_map(|(a, p)| Endpoint::Inet(SocketAddr::from((a, p)))),
        proptest::collection::vec(any::<u8>(), 0..108).prop_map(Endpoint::Unix),
    ]
}

fn event() -> impl Strategy<Value = Event> {
    let sensor = prop_oneof![0u64..20, any::<u64>()];
    let t = any::<u64>();
    prop_oneof![
        (t, sensor.clone()).prop_map(|(t, sensor)| Event::Enter { t, sensor }),
        (t, sensor.clone()).prop_map(|(t, sensor)| Event::Exit { t, sensor }),
        (t, sensor.clone()).prop_map(|(t, sensor)| Event::Mark { t, sensor }),
        (t, sensor.clone(), any::<i64>()).prop_map(|(t, sensor, value)| Event::Counter {
            t,
            sensor,
            value
        }),
        (
            t,
            sensor.clone(),
            1u8..=13,
            any::<i64>(),
            any::<u64>(),
            any::<i64>(),
            endpoint()
        )
            .prop_map(|(t, sensor, op, fd, duration, result, peer)| Event::Comm {
                t,
                sensor,
                op: CommOp::from_u8(op).unwrap(),
                fd,
                duration,
                result,
                peer
            }),
        (t, any::<(u32, u32, u8, u32)>()).prop_map(|(t, (cpu, prev_tid, prev_state, next_tid))| {
            Event::Switch {
                t,
                cpu,
                prev_tid,
                prev_state,
                next_tid,
            }
        }),
        (t, any::<(u32, u32)>()).prop_map(|(t, (cpu, tid))| Event::Wakeup { t, cpu, tid }),
        (t, sensor.clone(), any::<(u64, u64, u64, u64, u8)>()).prop_map(
            |(t, sensor, (calls, timed, timed_ns, recorded, pinned))| Event::Calls {
                t,
                sensor,
                calls,
                timed,
                timed_ns,
                recorded,
                pinned,
            }
        ),
        (t, any::<(u32, u32)>(), "[a-z/:. -]{0,15}")
            .prop_map(|(t, (tid, pid), comm)| Event::Task { t, tid, pid, comm }),
        (t, any::<(u32, u32, u64, u8)>()).prop_map(|(t, (cpu, irq, duration, handled))| {
            Event::Irq {
                t,
                cpu,
                irq,
                duration,
                handled,
            }
        }),
        (t, sensor, any::<i64>(), 0u8..5, endpoint(), endpoint()).prop_map(
            |(t, sensor, fd, proto, local, peer)| Event::Socket {
                t,
                sensor,
                fd,
                proto: p5_wire::SocketProto::from_u8(proto),
                local,
                peer
            }
        ),
    ]
}

fn identity() -> impl Strategy<Value = Identity> {
    (
        any::<(u64, u32, u32, i64, u64, u8, u8)>(),
        proptest::collection::vec(".{0,20}", 5),
        proptest::collection::vec(".{0,10}", 0..5),
    )
        .prop_map(
            |((uid, pid, ppid, wall, mono, clock, rt), s, argv)| Identity {
                process_uid: uid,
                pid,
                ppid,
                start_wall_ns: wall,
                start_mono_ns: mono,
                clock,
                runtime: rt,
                host_id: s[0].clone(),
                boot_id: s[1].clone(),
                hostname: s[2].clone(),
                program: s[3].clone(),
                session: s[4].clone(),
                argv,
            },
        )
}

fn events_frame(header: DataHeader, dropped: u64, events: &[Event]) -> Vec<u8> {
    let mut enc = EventEncoder::new();
    for e in events {
        enc.push(e);
    }
    let mut out = Vec::new();
    data::encode_events(&mut out, header, dropped, &enc);
    out
}

proptest! {
    #[test]
    fn events_round_trip(events in proptest::collection::vec(event(), 0..200),
                         stream in any::<u32>(), seq in 1u64.., dropped in any::<u64>()) {
        let header = DataHeader { stream, seq, t_p: 7 };
        let bytes = events_frame(header, dropped, &events);
        let (f, n) = frame::decode(&bytes).unwrap();
        prop_assert_eq!(n, bytes.len());
        prop_assert_eq!(f.frame_type(), Some(FrameType::Events));
        let ev = EventsFrame::parse(f.body).unwrap();
        prop_assert_eq!(ev.header, header);
        prop_assert_eq!(ev.dropped, dropped);
        prop_assert_eq!(ev.validate().unwrap() as usize, events.len());
        prop_assert_eq!(decode_all(ev.batch).unwrap(), events);
        prop_assert_eq!(data::validate_client_frame(f.ty, f.body).unwrap() as usize, ev.validate().unwrap() as usize);
    }

    #[test]
    fn send_time_stamp_keeps_frame_valid(events in proptest::collection::vec(event(), 1..20), t_p in any::<u64>()) {
        let mut bytes = events_frame(DataHeader { stream: 3, seq: 9, t_p: 0 }, 0, &events);
        data::stamp_send_time(&mut bytes, t_p);
        let (f, _) = frame::decode(&bytes).unwrap();
        prop_assert_eq!(DataHeader::peek(f.body).unwrap().t_p, t_p);
    }

    #[test]
    fn hello_round_trip(id in identity(), caps in any::<u64>(), version in 1u16..) {
        let h = Hello { version, caps: Caps(caps), identity: id };
        let body = h.encode_body();
        prop_assert_eq!(Hello::decode_body(&body).unwrap(), h);
    }

    #[test]
    fn decoders_are_total_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = frame::decode(&bytes);
        for f in Frames::new(&bytes) { let _ = f; }
        for ty in [0x01u8, 0x10, 0x11, 0x12, 0x13, 0x14, 0x20, 0x21, 0x30, 0x7f] {
            let _ = data::validate_client_frame(ty, &bytes);
        }
        for ty in 0x80u8..0x86 {
            let _ = StoreRecord::decode(ty, &bytes);
        }
        if let Ok(d) = p5_wire::EventDecoder::new(&bytes) { for e in d { let _ = e; } }
        let _ = p5_wire::HelloAck::decode_body(&bytes);
        let _ = SegmentHeader::decode(&bytes);
    }

    #[test]
    fn decoders_are_total_on_mutated_frames(events in proptest::collection::vec(event(), 1..30),
                                            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
                                            cut in any::<usize>()) {
        let bytes = events_frame(DataHeader { stream: 1, seq: 1, t_p: 1 }, 0, &events);
        // Corrupt the body and reseal the checksum so the corruption reaches the event decoder.
        let mut m = bytes.clone();
        for (i, v) in flips { let i = frame::HEADER_LEN + 1 + i % (m.len() - frame::HEADER_LEN - 1); m[i] ^= v; }
        frame::reseal(&mut m);
        if let Ok((f, _)) = frame::decode(&m) { let _ = data::validate_client_frame(f.ty, f.body); }
        let cut = cut % bytes.len();
        prop_assert!(frame::decode(&bytes[..cut]).is_err());
    }
}

#[test]
fn realistic_trace_is_under_eight_bytes_per_event() {
    // Nested calls: depth ≤ 4, 40 distinct functions, gaps of 50 ns .. 20 µs, a comm call
    // every 50 events. Deterministic LCG so the number is stable.
    let mut x: u64 = 0x1234_5678;
    let mut rnd = |m: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % m
    };
    let mut enc = EventEncoder::new();
    let mut t = 1_000_000u64;
    let mut stack = Vec::new();
    let mut n = 0u64;
    while n < 100_000 {
        t += 50 + rnd(20_000);
        if stack.len() < 4 && (stack.is_empty() || rnd(2) == 0) {
            let s = 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(1 + rnd(40));
            stack.push(s);
            enc.enter(t, s);
        } else {
            enc.exit(t, stack.pop().unwrap());
        }
        n += 1;
        if n.is_multiple_of(50) {
            enc.push(&Event::Comm {
                t,
                sensor: 77,
                op: CommOp::Send,
                fd: 5,
                duration: 3_000,
                result: 512,
                peer: Endpoint::None,
            });
            n += 1;
        }
    }
    let mut out = Vec::new();
    data::encode_events(
        &mut out,
        DataHeader {
            stream: 1,
            seq: 1,
            t_p: t,
        },
        0,
        &enc,
    );
    let per_event = out.len() as f64 / n as f64;
    println!("realistic trace: {per_event:.2} bytes/event");
    assert!(per_event <= 8.0, "{per_event} bytes per event");
}

/// Builds the named test vectors: (name, description of the input, encoded bytes).
fn vectors() -> Vec<(String, Value, Vec<u8>)> {
    let mut v = Vec::new();
    let identity = Identity {
        process_uid: 0x0123_4567_89ab_cdef,
        pid: 4242,
        ppid: 1,
        start_wall_ns: 1_700_000_000_000_000_000,
        start_mono_ns: 5_000_000_000,
        clock: 1,
        runtime: 2,
        host_id: "0123456789abcdef0123456789abcdef".into(),
        boot_id: "b00t".into(),
        hostname: "node1".into(),
        program: "server".into(),
        session: "demo".into(),
        argv: vec!["./server".into(), "--port".into(), "9000".into()],
    };
    let hello = Hello {
        version: 1,
        caps: VECTOR_CAPS,
        identity: identity.clone(),
    };
    let mut b = Vec::new();
    frame::encode(&mut b, FrameType::Hello as u8, &hello.encode_body());
    v.push((
        "hello".into(),
        json!({"frame": "hello", "version": 1, "caps": VECTOR_CAPS.0, "process_uid": identity.process_uid,
               "pid": 4242, "ppid": 1, "start_wall_ns": identity.start_wall_ns, "start_mono_ns": identity.start_mono_ns,
               "clock": 1, "runtime": 2, "host_id": identity.host_id, "boot_id": "b00t", "hostname": "node1",
               "program": "server", "session": "demo", "argv": identity.argv}),
        b,
    ));

    let open = StreamOpen {
        header: DataHeader {
            stream: 1,
            seq: 0,
            t_p: 1_500,
        },
        kind_raw: 1,
        tid: 4243,
        name: "main".into(),
    };
    let mut b = Vec::new();
    frame::encode(&mut b, FrameType::StreamOpen as u8, &open.encode_body());
    v.push((
        "stream_open".into(),
        json!({"frame": "stream_open", "stream": 1, "seq": 0, "t_p": 1500, "kind": 1, "tid": 4243, "name": "main"}),
        b,
    ));

    let events = vec![
        Event::Enter {
            t: 1_000,
            sensor: 0xaaaa_bbbb_cccc_dddd,
        },
        Event::Enter {
            t: 1_040,
            sensor: 0x1111,
        },
        Event::Comm {
            t: 1_100,
            sensor: 0x2222,
            op: CommOp::Send,
            fd: 3,
            duration: 2_500,
            result: 64,
            peer: Endpoint::None,
        },
        Event::Exit {
            t: 4_000,
            sensor: 0x1111,
        },
        Event::Mark {
            t: 4_000,
            sensor: 0x3333,
        },
        Event::Counter {
            t: 3_990,
            sensor: 0x4444,
            value: -5,
        },
        Event::Exit {
            t: 10_000,
            sensor: 0xaaaa_bbbb_cccc_dddd,
        },
        Event::Socket {
            t: 10_500,
            sensor: 0x2222,
            fd: 3,
            proto: p5_wire::SocketProto::Tcp,
            local: Endpoint::Inet("10.0.0.1:40000".parse().unwrap()),
            peer: Endpoint::Inet("[::1]:9000".parse().unwrap()),
        },
        Event::Comm {
            t: 11_000,
            sensor: 0x5555,
            op: CommOp::RecvFrom,
            fd: 4,
            duration: 100,
            result: -11,
            peer: Endpoint::Unix(b"/tmp/sock".to_vec()),
        },
    ];
    let b = events_frame(
        DataHeader {
            stream: 1,
            seq: 1,
            t_p: 12_000,
        },
        2,
        &events,
    );
    v.push((
        "events".into(),
        json!({"frame": "events", "stream": 1, "seq": 1, "t_p": 12000, "dropped": 2,
               "events": events.iter().map(event_json).collect::<Vec<_>>()}),
        b,
    ));

    // More than 15 sensors: slot escape.
    let many: Vec<Event> = (0..17u64)
        .map(|i| Event::Enter {
            t: 100 * i,
            sensor: 1000 + i,
        })
        .collect();
    let b = events_frame(
        DataHeader {
            stream: 2,
            seq: 5,
            t_p: 2_000,
        },
        0,
        &many,
    );
    v.push((
        "events_slot_escape".into(),
        json!({"frame": "events", "stream": 2, "seq": 5, "t_p": 2000, "dropped": 0,
               "events": many.iter().map(event_json).collect::<Vec<_>>()}),
        b,
    ));

    let close = StreamClose {
        header: DataHeader {
            stream: 1,
            seq: 2,
            t_p: 20_000,
        },
        t_end: 19_000,
        dropped: 2,
    };
    let mut b = Vec::new();
    frame::encode(&mut b, FrameType::StreamClose as u8, &close.encode_body());
    v.push((
        "stream_close".into(),
        json!({"frame": "stream_close", "stream": 1, "seq": 2, "t_p": 20000, "t_end": 19000, "dropped": 2}),
        b,
    ));

    let ping = Ping {
        t_p: 30_000,
        echo_t_s: 99_000,
        echo_t_p: 29_000,
    };
    let mut b = Vec::new();
    frame::encode(&mut b, FrameType::Ping as u8, &ping.encode_body());
    v.push((
        "ping".into(),
        json!({"frame": "ping", "t_p": 30000, "echo_t_s": 99000, "echo_t_p": 29000}),
        b,
    ));

    let mut b = Vec::new();
    frame::encode(&mut b, FrameType::Goodbye as u8, &40_000u64.to_le_bytes());
    v.push((
        "goodbye".into(),
        json!({"frame": "goodbye", "t_p": 40000}),
        b,
    ));

    let ack = Ack {
        count: 3,
        t_s: 123_456,
    };
    let mut b = Vec::new();
    frame::encode(&mut b, FrameType::Ack as u8, &ack.encode_body());
    v.push((
        "ack".into(),
        json!({"frame": "ack", "count": 3, "t_s": 123456}),
        b,
    ));

    let os = vec![
        Event::Switch {
            t: 5_000,
            cpu: 1,
            prev_tid: 4243,
            prev_state: b'S',
            next_tid: 0,
        },
        Event::Wakeup {
            t: 6_000,
            cpu: 1,
            tid: 4243,
        },
        Event::Irq {
            t: 6_100,
            cpu: 0,
            irq: 24,
            duration: 1_800,
            handled: 1,
        },
        Event::Counter {
            t: 7_000,
            sensor: 0xc0,
            value: 4_250,
        },
    ];
    let b = events_frame(
        DataHeader {
            stream: 3,
            seq: 1,
            t_p: 8_000,
        },
        0,
        &os,
    );
    v.push((
        "events_os_monitor".into(),
        json!({"frame": "events", "stream": 3, "seq": 1, "t_p": 8000, "dropped": 0,
               "events": os.iter().map(event_json).collect::<Vec<_>>()}),
        b,
    ));

    let names = data::Names {
        header: DataHeader {
            stream: 3,
            seq: 2,
            t_p: 9_000,
        },
        names: vec![data::Name {
            id: 0xc0,
            name: "cpu.total.busy".into(),
            unit: "%".into(),
            scale_exp: -2,
        }],
    };
    let mut b = Vec::new();
    frame::encode(&mut b, FrameType::Names as u8, &names.encode_body());
    v.push((
        "names".into(),
        json!({"frame": "names", "stream": 3, "seq": 2, "t_p": 9000,
               "names": [{"id": 0xc0, "name": "cpu.total.busy", "unit": "%", "scale_exp": -2}]}),
        b,
    ));

    let cs = data::ClockSamples {
        header: DataHeader {
            stream: 4,
            seq: 1,
            t_p: 10_000,
        },
        peer_process_uid: 0xfeed,
        samples: vec![(9_500, 1_200), (9_900, 1_650)],
    };
    let mut b = Vec::new();
    frame::encode(&mut b, FrameType::ClockSamples as u8, &cs.encode_body());
    v.push((
        "clock_samples".into(),
        json!({"frame": "clock_samples", "stream": 4, "seq": 1, "t_p": 10000,
               "peer_process_uid": 0xfeed, "samples": [[9500, 1200], [9900, 1650]]}),
        b,
    ));

    let mut b = Vec::new();
    frame::encode(&mut b, FrameType::Control as u8, &{
        let mut body = Vec::new();
        p5_wire::codec::put_str(&mut body, r#"{"op":"status"}"#);
        body
    });
    v.push((
        "control".into(),
        json!({"frame": "control", "json": r#"{"op":"status"}"#}),
        b,
    ));

    let ha = p5_wire::HelloAck {
        version: 1,
        caps: VECTOR_CAPS,
        server_run_id: 77,
        t_s: 5,
    };
    let mut b = Vec::new();
    frame::encode(&mut b, FrameType::HelloAck as u8, &ha.encode_body());
    // A sensor table as an instrumented file embeds it (the text, sent as is).
    let table = "p5-sensors\t1\t/home/u/out\tsrc/m\u{e4}in.c\tc\t".to_owned()
        + &"0f".repeat(32)
        + "\n00000000000004d2\tfunction\t3\t1\t9\t2\tmain\tmain\n"
        + "a1b2c3d4e5f60718\tcall\t5\t5\t5\t20\tmain\tprintf\\t\n";
    let sensors = data::Sensors {
        header: DataHeader {
            stream: data::SENSORS_STREAM,
            seq: 1,
            t_p: 1500,
        },
        table: table.clone(),
    };
    let mut sb = Vec::new();
    frame::encode(&mut sb, FrameType::Sensors as u8, &sensors.encode_body());
    v.push((
        "sensors".into(),
        json!({"frame": "sensors", "stream": data::SENSORS_STREAM, "seq": 1, "t_p": 1500,
               "table": table}),
        sb,
    ));
    v.push((
        "hello_ack".into(),
        json!({"frame": "hello_ack", "version": 1, "caps": VECTOR_CAPS.0, "server_run_id": 77, "t_s": 5}),
        b,
    ));
    v
}

fn event_json(e: &Event) -> Value {
    match e {
        Event::Enter { t, sensor } => json!({"kind": "enter", "t": t, "sensor": sensor}),
        Event::Exit { t, sensor } => json!({"kind": "exit", "t": t, "sensor": sensor}),
        Event::Mark { t, sensor } => json!({"kind": "mark", "t": t, "sensor": sensor}),
        Event::Counter { t, sensor, value } => {
            json!({"kind": "counter", "t": t, "sensor": sensor, "value": value})
        }
        Event::Comm {
            t,
            sensor,
            op,
            fd,
            duration,
            result,
            peer,
        } => json!({
            "kind": "comm", "t": t, "sensor": sensor, "op": op.name(), "fd": fd,
            "duration": duration, "result": result, "peer": peer.to_string()}),
        Event::Socket {
            t,
            sensor,
            fd,
            proto,
            local,
            peer,
        } => json!({
            "kind": "socket", "t": t, "sensor": sensor, "fd": fd, "proto": *proto as u8,
            "local": local.to_string(), "peer": peer.to_string()}),
        Event::Switch {
            t,
            cpu,
            prev_tid,
            prev_state,
            next_tid,
        } => json!({
            "kind": "switch", "t": t, "sensor": 0, "cpu": cpu, "prev_tid": prev_tid,
            "prev_state": prev_state, "next_tid": next_tid}),
        Event::Wakeup { t, cpu, tid } => {
            json!({"kind": "wakeup", "t": t, "sensor": 0, "cpu": cpu, "tid": tid})
        }
        Event::Irq {
            t,
            cpu,
            irq,
            duration,
            handled,
        } => json!({
            "kind": "irq", "t": t, "sensor": 0, "cpu": cpu, "irq": irq, "duration": duration,
            "handled": handled}),
        other => panic!("test vector for an event kind the test does not know: {other:?}"),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The capability flags the hello vectors carry: fixed, so that a new flag does not change
/// the bytes every runtime's tests compare with (bits 0–6; `CALLS`, bit 7, came later).
const VECTOR_CAPS: Caps = Caps(0b111_1111);

/// The vectors file must match what this implementation encodes (run with `P5_BLESS=1` to
/// rewrite it after an intended, additive change), and every vector must decode.
#[test]
fn test_vectors_match() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("test_vectors/vectors.json");
    let built: Vec<Value> = vectors()
        .into_iter()
        .map(|(name, input, bytes)| json!({"name": name, "input": input, "hex": hex(&bytes)}))
        .collect();
    let text = serde_json::to_string_pretty(&json!({
        "description": "p5 wire test vectors: each `hex` is the exact encoding (frame envelope included) of `input`. Sensor ids and times are decimal u64. See docs/wire.md.",
        "vectors": built,
    }))
    .unwrap()
        + "\n";
    if std::env::var_os("P5_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let stored = std::fs::read_to_string(&path).expect("test_vectors/vectors.json exists");
    assert_eq!(
        stored, text,
        "encoding changed: vectors.json differs (P5_BLESS=1 to rewrite)"
    );
    for (name, _, bytes) in vectors() {
        let (f, n) = frame::decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(n, bytes.len(), "{name}");
        if f.ty < 0x02 || (0x10..0x30).contains(&f.ty) {
            data::validate_client_frame(f.ty, f.body).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}

#[test]
fn huge_argv_still_fits_in_a_frame() {
    let identity = Identity {
        argv: vec!["x".repeat(60_000); 4000],
        ..Identity::default()
    };
    let body = Hello {
        version: 1,
        caps: Caps::ALL,
        identity,
    }
    .encode_body();
    assert!(
        body.len() < frame::MAX_FRAME_LEN as usize,
        "{} bytes",
        body.len()
    );
    let back = Hello::decode_body(&body).unwrap();
    assert!(!back.identity.argv.is_empty() && back.identity.argv.len() < 4000);
}

#[test]
fn store_records_round_trip() {
    let seg = SegmentHeader {
        version: 1,
        server_run_id: 9,
        server_start_mono_ns: 10,
        server_start_wall_ns: -3,
        segment_index: 2,
        server_boot_id: [7; 16],
    };
    let (back, off) = SegmentHeader::decode(&seg.encode()).unwrap();
    assert_eq!((back, off), (seg, store::SEGMENT_HEADER_LEN));
    let hello = Hello {
        version: 1,
        caps: Caps::ALL,
        identity: Identity::default(),
    };
    let mut out = Vec::new();
    store::encode_process(&mut out, 5, 1, &hello.encode_body());
    store::encode_data(&mut out, 6, 7, 0x12, b"abc");
    store::encode_sample(
        &mut out,
        8,
        7,
        Ping {
            t_p: 1,
            echo_t_s: 2,
            echo_t_p: 3,
        },
        SampleSource::Ping,
    );
    store::encode_disconnect(&mut out, 9, 7, "eof");
    let recs: Vec<_> = Frames::new(&out)
        .map(|f| {
            let f = f.unwrap();
            StoreRecord::decode(f.ty, f.body).unwrap()
        })
        .collect();
    assert_eq!(
        recs[0],
        StoreRecord::Process {
            t_s: 5,
            conn_id: 1,
            hello
        }
    );
    assert_eq!(
        recs[1],
        StoreRecord::Data {
            t_s: 6,
            process_uid: 7,
            ty: 0x12,
            body: b"abc"
        }
    );
    assert_eq!(
        recs[2],
        StoreRecord::Sample {
            t_s: 8,
            process_uid: 7,
            t_p: 1,
            echo_t_s: 2,
            echo_t_p: 3,
            source: 1
        }
    );
    assert_eq!(
        recs[3],
        StoreRecord::Disconnect {
            t_s: 9,
            process_uid: 7,
            reason: "eof".into()
        }
    );
}

#[test]
fn runtime_sensor_ids_are_the_hashes_of_their_names() {
    let fnv = |b: &[u8]| {
        b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &c| {
            (h ^ u64::from(c)).wrapping_mul(0x0100_0000_01b3)
        })
    };
    assert!(!p5_wire::RUNTIME_SENSORS.is_empty());
    for (id, name) in p5_wire::RUNTIME_SENSORS {
        assert_eq!(*id, fnv(name.as_bytes()), "{name}");
    }
}
