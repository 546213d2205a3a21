//! The whole path of a binary record: ring-buffer page, decoded record, trace line, event.

use super::*;
use crate::kernel_trace::raw_to_line;
use crate::ringbuf::{Layouts, RawEvent};

/// softirq_entry/exit records as the kernel writes them (format of Linux 6.x).
const SOFTIRQ_ENTRY_FORMAT: &str = "name: softirq_entry\nID: 223\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:unsigned int vec;\toffset:8;\tsize:4;\tsigned:0;\n\nprint fmt: \"vec=%u [action=%s]\", REC->vec\n";
const SOFTIRQ_EXIT_FORMAT: &str = "name: softirq_exit\nID: 222\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:unsigned int vec;\toffset:8;\tsize:4;\tsigned:0;\n";
const IRQ_ENTRY_FORMAT: &str = "name: irq_handler_entry\nID: 225\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int irq;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:__data_loc char[] name;\toffset:12;\tsize:4;\tsigned:0;\n";
const IRQ_EXIT_FORMAT: &str = "name: irq_handler_exit\nID: 224\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int irq;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:int ret;\toffset:12;\tsize:4;\tsigned:1;\n";

/// A ring-buffer page of small records `(delta, record)`.
fn page(recs: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let mut data = Vec::new();
    for (delta, r) in recs {
        assert_eq!(r.len() % 4, 0);
        data.extend_from_slice(&((r.len() as u32 / 4) | (delta << 5)).to_le_bytes());
        data.extend_from_slice(r);
    }
    let mut p = Vec::new();
    p.extend_from_slice(&1_000_000u64.to_le_bytes());
    p.extend_from_slice(&(data.len() as u64).to_le_bytes());
    p.extend_from_slice(&data);
    p.resize(4096, 0);
    p
}

/// A record: common_type, then u32 words from offset 8.
fn rec(id: u16, words: &[u32]) -> Vec<u8> {
    let mut r = vec![0u8; 8];
    r[..2].copy_from_slice(&id.to_le_bytes());
    for w in words {
        r.extend_from_slice(&w.to_le_bytes());
    }
    r
}

#[test]
fn softirq_records_decode_and_pair_around_a_nested_hard_irq() {
    let l = Layouts::from_formats(
        None,
        None,
        Some(IRQ_ENTRY_FORMAT),
        Some(IRQ_EXIT_FORMAT),
        Some(SOFTIRQ_ENTRY_FORMAT),
        Some(SOFTIRQ_EXIT_FORMAT),
    );
    // NET_RX from 1_000_100; the NIC's IRQ 24 interrupts it at +300 for 200 ns; NET_RX
    // ends at +1_000; then TIMER (vector 1, not traced) and NET_TX.
    let p = page(&[
        (100, rec(223, &[3])),
        (300, rec(225, &[24, 0])),
        (200, rec(224, &[24, 1])),
        (500, rec(222, &[3])),
        (50, rec(223, &[1])),
        (50, rec(222, &[1])),
        (100, rec(223, &[2])),
        (40, rec(222, &[2])),
    ]);
    let mut raw = Vec::new();
    let st = crate::ringbuf::decode_page(&p, &l, &mut raw);
    assert_eq!(st.other, 0);
    assert_eq!(
        raw[..2],
        [
            RawEvent::SoftirqEntry {
                ts: 1_000_100,
                vec: 3
            },
            RawEvent::IrqEntry {
                ts: 1_000_400,
                irq: 24
            }
        ]
    );
    assert_eq!(
        raw[3],
        RawEvent::SoftirqExit {
            ts: 1_001_100,
            vec: 3
        }
    );
    let clock = AgentClock {
        start_mono_ns: 1_000_000,
        start_wall_ns: 0,
    };
    let mut c = Converter::new(clock, &[24], &NET_SOFTIRQS);
    let out: Vec<Event> = raw
        .into_iter()
        .filter_map(|e| c.convert(raw_to_line(1, e)))
        .collect();
    assert_eq!(
        out,
        [
            Event::Irq {
                t: 400,
                cpu: 1,
                irq: 24,
                duration: 200,
                handled: 1
            },
            Event::Irq {
                t: 100,
                cpu: 1,
                irq: SOFTIRQ_BASE + NET_RX_SOFTIRQ,
                duration: 1_000,
                handled: 1
            },
            Event::Irq {
                t: 1_300,
                cpu: 1,
                irq: SOFTIRQ_BASE + NET_TX_SOFTIRQ,
                duration: 40,
                handled: 1
            },
        ]
    );
    // Without softirq vectors nothing but the hard IRQ comes out.
    let mut c = Converter::new(clock, &[24], &[]);
    let mut raw = Vec::new();
    crate::ringbuf::decode_page(&p, &l, &mut raw);
    let n = raw
        .into_iter()
        .filter_map(|e| c.convert(raw_to_line(1, e)))
        .count();
    assert_eq!(n, 1);
}
