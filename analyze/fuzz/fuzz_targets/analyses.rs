//! Feeds arbitrary bytes through the Project 5 text reader into the analyses — nesting
//! (with and without a skew window), linking (the paper's weights and ours) and convolution —
//! and writes each result as a table, JSON and DOT: whatever the times, ids and names a
//! trace holds, none may panic. Traces are kept small (≤ 400 messages) so runs stay fast.
//! Run: `cd analyze/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run analyses`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use p5_analyze::output::{Format, write};
use p5_analyze::pattern::AnalysisResult;
use p5_analyze::text::{ReadOptions, read};
use p5_analyze::{convolution, linking, nesting};

fn written(r: &AnalysisResult) {
    for f in [Format::Table, Format::Json, Format::Dot] {
        let mut out = Vec::new();
        write(r, f, Some(20), &mut out).expect("writing to memory");
    }
}

fuzz_target!(|bytes: &[u8]| {
    let t = read(bytes, "fuzz", ReadOptions::default()).trace;
    if t.messages.is_empty() || t.messages.len() > 400 {
        return;
    }
    for window in [0, 10_000_000] {
        let p = nesting::Params {
            window,
            ..Default::default()
        };
        written(&nesting::nesting(&t, &p).0);
    }
    for p in [linking::Params::paper(), linking::Params::ours()] {
        written(&linking::linking(&t, &p, &mut |_| {}).0);
    }
    // Convolution's cost follows the span in quanta (up to 2^24, refused beyond): fuzz it
    // where that is small, so that runs stay fast.
    let times = t.messages.iter().map(|m| m.time());
    let span = times
        .clone()
        .max()
        .unwrap_or(0)
        .saturating_sub(times.min().unwrap_or(0));
    if let Ok(roots) = convolution::roots(&t, &[]) {
        for q in [1_000_000, 1_000_000_000]
            .into_iter()
            .filter(|q| span / q < 1 << 16)
        {
            if let Ok(g) = convolution::convolution(&t, &roots, &convolution::Params::at(q)) {
                written(&g.result);
            }
        }
    }
});
