//! Feeds arbitrary bytes to the Project 5 text reader: it may not panic, and what it keeps
//! must write back and read again to the same messages. Run:
//! `cd analyze/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run text`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use p5_analyze::text::{ReadOptions, read, write};
use p5_analyze::trace::Trace;

fn messages(t: &Trace) -> Vec<(i64, i64, String, String, String)> {
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
}

fuzz_target!(|bytes: &[u8]| {
    let t = read(bytes, "fuzz", ReadOptions { keep_order: true });
    let mut out = Vec::new();
    write(&t.trace, &t.layout, &mut out).expect("writing to memory");
    let again = read(&out, "fuzz", ReadOptions::default());
    assert!(again.report.counts.is_empty(), "{}", again.report);
    assert_eq!(messages(&again.trace), messages(&t.trace));
});
