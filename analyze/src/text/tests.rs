//! Tests of the text format: exact times, pairing, bad lines, byte-exact round trips.

use super::*;
use proptest::prelude::*;

fn keep() -> ReadOptions {
    ReadOptions { keep_order: true }
}

fn round_trip(bytes: &[u8]) -> Vec<u8> {
    let t = read(bytes, "t.p5t", keep());
    let mut out = Vec::new();
    write(&t.trace, &t.layout, &mut out).unwrap();
    out
}

#[test]
fn times_are_exact_to_the_nanosecond() {
    assert_eq!(
        parse_time(b"1047680084.482205"),
        Ok((1_047_680_084_482_205_000, 6))
    );
    assert_eq!(parse_time(b"0.000000001"), Ok((1, 9)));
    assert_eq!(parse_time(b"-1.5"), Ok((-1_500_000_000, 1)));
    assert_eq!(parse_time(b"12"), Ok((12_000_000_000, 0)));
    assert!(parse_time(b"1.0000000001").is_err());
    assert!(parse_time(b"99999999999999999999").is_err());
    assert!(parse_time(b"1.").is_err());
    assert!(parse_time(b"-0").is_err());
    assert!(parse_time(b"1e3").is_err());
    let mut s = Vec::new();
    format_time(1_047_680_084_482_205_000, 6, &mut s);
    assert_eq!(s, b"1047680084.482205");
}

#[test]
fn the_papers_example_pairs_nothing_and_keeps_ids() {
    let f = b"timestamp\toperation\tsender\trcvr\tID\n\
1047680084.482205\tCALL_SENT\tnodeA\tnodeB\tid37\n\
1047680084.483575\tRET_SENT\tnodeB\tnodeA\tid37\n";
    let t = read(f, "p.p5t", ReadOptions::default());
    assert_eq!(t.report.count("garbage line"), 0);
    assert!(t.report.counts.is_empty(), "{}", t.report);
    let m = &t.trace.messages;
    assert_eq!(m.len(), 2);
    assert_eq!((m[0].kind, m[1].kind), (Kind::Call, Kind::Ret));
    assert_eq!(m[0].call_id, m[1].call_id);
    assert_eq!(t.trace.call_id_name(m[0].call_id), "id37");
    assert_eq!(t.trace.nodes.name(m[1].src), "nodeB");
    assert_eq!(m[1].recv(), None);
    assert_eq!((m[0].msg_ref, m[1].msg_ref), (2, 3));
    assert_eq!(round_trip(f), f.to_vec());
}

#[test]
fn sent_and_received_lines_pair_first_in_first_out() {
    let f = b"1.0\tMSG_SENT\ta\tb\n2.0\tMSG_SENT\ta\tb\n3.0\tMSG_RCVD\ta\tb\n4.0\tMSG_RCVD\ta\tb\n5.0\tMSG_RCVD\ta\tb\n";
    let t = read(f, "f", ReadOptions::default());
    let m = &t.trace.messages;
    assert_eq!(m.len(), 3);
    assert_eq!(
        (m[0].send(), m[0].recv()),
        (Some(1_000_000_000), Some(3_000_000_000))
    );
    assert_eq!(
        (m[1].send(), m[1].recv()),
        (Some(2_000_000_000), Some(4_000_000_000))
    );
    assert_eq!(
        (m[2].send(), m[2].recv(), m[2].msg_ref),
        (None, Some(5_000_000_000), 5)
    );
    assert_eq!(round_trip(f), f.to_vec());
}

#[test]
fn a_receive_stamped_before_its_send_pairs_when_it_has_an_id() {
    let f = b"1.0\tCALL_RCVD\ta\tb\tx\n1.5\tCALL_RCVD\ta\tb\n2.0\tCALL_SENT\ta\tb\tx\n2.5\tCALL_SENT\ta\tb\n";
    let t = read(f, "f", keep());
    let m = &t.trace.messages;
    assert_eq!(m.len(), 3, "{m:?}");
    let paired = m.iter().find(|m| m.call().is_some()).unwrap();
    assert_eq!(
        (paired.send(), paired.recv(), paired.msg_ref),
        (Some(2_000_000_000), Some(1_000_000_000), 1)
    );
    assert!(m.windows(2).all(|w| w[0].time() <= w[1].time()));
    assert_eq!(round_trip(f), f.to_vec());
}

#[test]
fn bad_lines_are_counted_with_their_line_and_skipped() {
    let f = b"1.0\tCALL_SENT\ta\tb\t1\ngarbage\n0.5\tCALL_SENT\ta\tb\t2\n2.0\tCALL_PUT\ta\tb\t3\n\n3.0\tCALL_SENT\ta\t\t4\n4.x\tRET_SENT\tb\ta\t1\n5.0\tRET_SENT\tb\ta\t1\textra\n6.0\tRET_SENT\tb\ta\t1";
    let t = read(f, "bad.p5t", ReadOptions::default());
    assert_eq!(t.trace.messages.len(), 2);
    let r = &t.report;
    assert_eq!(r.count("wrong number of fields"), 2);
    assert_eq!(r.count("timestamp out of order"), 1);
    assert_eq!(r.count("unknown operation"), 1);
    assert_eq!(r.count("empty line"), 1);
    assert_eq!(r.count("empty field"), 1);
    assert_eq!(r.count("bad timestamp"), 1);
    assert_eq!(r.first[0].position, 2);
    assert_eq!(r.first[1].position, 3);
    assert!(r.to_string().contains("bad.p5t:3: timestamp out of order"));
    assert!(!t.layout.final_newline);
}

#[test]
fn numeric_ids_are_the_call_ids_until_a_name_appears() {
    let f = b"1\tCALL_SENT\ta\tb\t5\n2\tCALL_SENT\ta\tb\t6\n3\tRET_SENT\tb\ta\t5\n";
    let t = read(f, "n", keep());
    assert!(t.trace.call_id_names.is_empty());
    assert_eq!(t.trace.messages[2].call_id, 5);
    assert_eq!(round_trip(f), f.to_vec());
    let mut g = f.to_vec();
    g.extend_from_slice(b"4\tCALL_RCVD\ta\tb\tid9\n5\tCALL_RCVD\ta\tb\t6\n6\tRET_RCVD\tb\ta\t05\n");
    let t = read(&g, "n", keep());
    assert_eq!(t.trace.call_id_names, ["5", "6", "id9", "05"]);
    let m = &t.trace.messages;
    assert_eq!(m.len(), 5, "{m:?}");
    assert_eq!(
        (m[1].call_id, m[1].recv()),
        (1, Some(5_000_000_000)),
        "6 pairs across the switch"
    );
    assert_eq!(t.trace.call_id_name(m[2].call_id), "5");
    assert_eq!(round_trip(&g), g);
}

#[test]
fn a_message_costs_at_most_64_bytes_with_numeric_ids() {
    // The memory budget, for the two shapes: one line or two lines per message.
    for both in [false, true] {
        let mut f = String::new();
        for i in 0..10_000u64 {
            f.push_str(&format!(
                "{i}.000001\tCALL_SENT\tclient{}\tserver\t{i}\n",
                i % 7
            ));
            if both {
                f.push_str(&format!(
                    "{i}.000002\tCALL_RCVD\tclient{}\tserver\t{i}\n",
                    i % 7
                ));
            }
        }
        let t = read(f.as_bytes(), "m", ReadOptions::default());
        let m = &t.trace.messages;
        assert_eq!(m.len(), 10_000);
        let bytes = m.capacity() * std::mem::size_of::<Message>()
            + t.trace.call_id_names.capacity() * std::mem::size_of::<String>();
        assert!(
            bytes / m.len() <= 64,
            "{both}: {} bytes per message",
            bytes / m.len()
        );
    }
}

#[test]
fn ties_keep_their_line_order() {
    // The receive of message 1 shares a time with the send of message 2 but comes after it.
    let f = b"1\tCALL_SENT\ta\tb\tp\n5\tCALL_SENT\tb\tc\tq\n5\tCALL_RCVD\ta\tb\tp\n";
    assert_eq!(round_trip(f), f.to_vec());
    let crlf = b"timestamp\top\r\n1.25\tMSG_SENT\ta\tb\r\n1.50\tMSG_RCVD\ta\tb\r\n";
    assert_eq!(round_trip(crlf), crlf.to_vec());
}

#[test]
fn a_fresh_layout_writes_the_fewest_digits_exactly() {
    let mut tr = Trace::default();
    let (a, b) = (tr.nodes.intern("a"), tr.nodes.intern("b"));
    let mut m = Message::new(a, b);
    m.t_send = 1_000_000_001;
    m.t_recv = 2_500_000_000;
    m.kind = Kind::Call;
    m.call_id = 7;
    tr.messages.push(m);
    let mut out = Vec::new();
    write(&tr, &Layout::fresh(0), &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "1.000000001\tCALL_SENT\ta\tb\t7\n2.500000000\tCALL_RCVD\ta\tb\t7\n"
    );
}

/// What the fuzz target checks: what the reader keeps writes back and reads again to the
/// same messages, without a problem.
fn rewrite_reads_the_same(f: &[u8]) -> Result<(), TestCaseError> {
    let t = read(f, "p", keep());
    let mut out = Vec::new();
    write(&t.trace, &t.layout, &mut out).unwrap();
    let again = read(&out, "p", ReadOptions::default());
    prop_assert!(again.report.counts.is_empty(), "{}", again.report);
    let view = |t: &Trace| -> Vec<(Time, Time, String, String, String)> {
        t.messages
            .iter()
            .map(|m| {
                (
                    m.t_send,
                    m.t_recv,
                    t.nodes.name(m.src).to_owned(),
                    t.nodes.name(m.dst).to_owned(),
                    format!("{:?} {}", m.kind, t.call_id_name(m.call_id)),
                )
            })
            .collect()
    };
    prop_assert_eq!(view(&again.trace), view(&t.trace));
    Ok(())
}

/// A valid line set: non-decreasing times at one precision.
fn valid_file() -> impl Strategy<Value = Vec<u8>> {
    let line = (
        0u64..5,
        0usize..6,
        0usize..4,
        0usize..4,
        prop::option::of(0usize..7),
    );
    (
        0u8..=9,
        -3i64..20,
        prop::collection::vec(line, 0..60),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(p, start, lines, header, crlf, final_nl)| {
            let ops = [
                "CALL_SENT",
                "RET_SENT",
                "MSG_SENT",
                "CALL_RCVD",
                "RET_RCVD",
                "MSG_RCVD",
            ];
            let names = ["a", "b", "web.1", "db@host"];
            let unit = 10i64.pow(9 - u32::from(p));
            let mut t = start * 1_000_000_007 / unit * unit;
            let eol = if crlf { "\r\n" } else { "\n" };
            let mut rows = Vec::new();
            if header {
                rows.push("timestamp\toperation\tsender\trcvr\tID".to_string());
            }
            for (step, op, s, d, id) in lines {
                t += step as i64 * unit * 3;
                if t == 0 && start < 0 {
                    t += unit;
                }
                let mut ts = Vec::new();
                format_time(t, p, &mut ts);
                let mut row = format!(
                    "{}\t{}\t{}\t{}",
                    String::from_utf8(ts).unwrap(),
                    ops[op],
                    names[s],
                    names[d]
                );
                if let Some(id) = id {
                    let ids = ["id0", "id1", "0", "17", "007", "18446744073709551615", "x"];
                    row.push('\t');
                    row.push_str(ids[id]);
                }
                rows.push(row);
            }
            let mut s = rows.join(eol);
            if final_nl && !rows.is_empty() {
                s.push_str(eol);
            }
            s.into_bytes()
        })
}

proptest! {
    #[test]
    fn any_valid_file_round_trips_byte_exact(f in valid_file()) {
        let t = read(&f, "p", keep());
        prop_assert!(t.report.counts.is_empty(), "{}", t.report);
        prop_assert_eq!(String::from_utf8(round_trip(&f)).unwrap(), String::from_utf8(f).unwrap());
    }

    #[test]
    fn any_bytes_read_without_panic(f in prop::collection::vec(any::<u8>(), 0..400)) {
        rewrite_reads_the_same(&f)?;
    }

    #[test]
    fn near_valid_lines_rewrite_to_the_same_messages(
        parts in prop::collection::vec(
            prop::sample::select(vec![
                "1", "2.5", "-3.25", "0", "07", "1.", "9.123456789", "\t", "\n", "\r\n",
                "CALL_SENT", "RET_RCVD", "MSG_SENT", "CALL_RCVD", "a", "b", "id1", "timestamp", "",
            ]),
            0..80,
        )
    ) {
        let f: String = parts.concat();
        rewrite_reads_the_same(f.as_bytes())?;
    }

    #[test]
    fn any_time_formats_and_parses_back(t in any::<i64>(), p in 0u8..=9) {
        prop_assume!(t != i64::MIN);
        let unit = 10i64.pow(9 - u32::from(p));
        let t = t / unit * unit;
        prop_assume!(t != 0 || p > 0);
        let mut s = Vec::new();
        format_time(t, p, &mut s);
        prop_assert_eq!(parse_time(&s), Ok((t, p)));
    }
}

#[test]
fn lines_wait_for_their_other_half_only_if_that_side_is_in_the_trace() {
    let one_side = b"1.0\tCALL_SENT\tA\tB\t1\n2.0\tRET_SENT\tB\tA\t1\n3.0\tMSG_SENT\tA\tB\n";
    let mut r = Reader::new(&Scan::of(one_side), "t.p5t", ReadOptions::default());
    Lines::default().piece(one_side, &mut r);
    assert!(r.pending.is_empty(), "nothing could answer them");
    assert_eq!(r.finish().trace.messages.len(), 3);
    // With the other side in the trace, a line waits for it, and pairs when it comes.
    let both = b"1.0\tCALL_SENT\tA\tB\t1\n1.5\tRET_SENT\tB\tA\t1\n2.0\tCALL_RCVD\tA\tB\t1\n";
    let mut r = Reader::new(&Scan::of(both), "t.p5t", ReadOptions::default());
    Lines::default().piece(both, &mut r);
    assert_eq!(r.pending.len(), 1, "the return's arrival may still come");
    let t = r.finish().trace;
    assert_eq!(t.messages.len(), 2);
    assert_eq!(
        (t.messages[0].t_send, t.messages[0].t_recv),
        (1_000_000_000, 2_000_000_000)
    );
}

#[test]
fn a_file_read_in_pieces_reads_as_in_memory() {
    // Every piece size, so that lines, `\r\n` and the words `_SENT` / `_RCVD` span pieces;
    // with and without a final newline, and a line too long to keep.
    let long = format!("1.5\tCALL_SENT\t{}\tB\t9\n", "A".repeat(MAX_LINE));
    for text in [
        "timestamp\top\ts\tr\tid\r\n1.0\tCALL_SENT\tA\tB\t1\r\n2.0\tCALL_RCVD\tA\tB\t1\r\n"
            .to_owned(),
        "1.0\tCALL_SENT\tA\tB\t1\n\n3.0\tRET_SENT\tB\tA\t1".to_owned(),
        format!("1.0\tCALL_SENT\tA\tB\t1\n{long}2.0\tRET_RCVD\tB\tA\t1\n"),
        String::new(),
        "\n".to_owned(),
    ] {
        let bytes = text.as_bytes();
        let whole = read(bytes, "t.p5t", keep());
        for size in [1, 2, 3, 5, 7, 64, 4096] {
            let scan = {
                let mut s = Scan::default();
                bytes.chunks(size).for_each(|p| s.piece(p));
                s
            };
            assert_eq!((scan.sent, scan.rcvd, scan.lines), {
                let s = Scan::of(bytes);
                (s.sent, s.rcvd, s.lines)
            });
            let mut r = Reader::new(&scan, "t.p5t", keep());
            let mut lines = Lines::default();
            bytes.chunks(size).for_each(|p| lines.piece(p, &mut r));
            assert!(lines.carry.len() <= MAX_LINE + 1);
            lines.end(&mut r);
            let pieces = r.finish();
            assert_eq!(pieces.trace, whole.trace, "{size}-byte pieces of {text:?}");
            assert_eq!(pieces.layout, whole.layout);
            assert_eq!(pieces.report, whole.report);
        }
    }
    let t = read(long.as_bytes(), "t.p5t", keep());
    assert_eq!(t.report.counts.get("line too long"), Some(&1));
    // From a file too, and from something that is not a regular file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.p5t");
    let text = "1.0\tCALL_SENT\tA\tB\t1\n2.0\tCALL_RCVD\tA\tB\t1\n";
    std::fs::write(&path, text).unwrap();
    let file = read_file(&path, keep()).unwrap();
    assert_eq!(file.trace, read(text.as_bytes(), "t.p5t", keep()).trace);
    assert_eq!(file.trace.messages.len(), 1);
    assert!(read_file(dir.path(), keep()).is_err());
}
