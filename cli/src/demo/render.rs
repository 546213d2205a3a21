//! The findings rendered: one block of text per session, the §4.2 stream comparison, and the
//! JSON form.

use super::SCENARIOS;
use super::findings::{Finding, ThreadStates, ms};
use p5_tracedb::domain::ThreadState;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The §4.2 point in one place: the same messages cost very different numbers of TCP
/// segments (and so receive softirqs) with Nagle's algorithm, with `TCP_NODELAY`, and with
/// a small MSS that splits every message. `None` unless the three stream sessions ran.
pub(super) fn stream_comparison(
    findings: &[Finding],
    notes: &BTreeMap<&str, String>,
) -> Option<String> {
    const RUNS: [&str; 3] = ["nagle-on", "nagle-off", "small-mss"];
    // The client's last line: "client mss: 2000 messages of 200 bytes, 6000 segments sent, mss 76".
    let number_before = |line: &str, word: &str| -> Option<u64> {
        let words: Vec<&str> = line.split([' ', ',']).filter(|w| !w.is_empty()).collect();
        let i = words.iter().position(|w| *w == word)?;
        words.get(i.checked_sub(1)?)?.parse().ok()
    };
    let mut rows = Vec::new();
    for run in RUNS {
        let note = notes.get(run)?;
        let messages = number_before(note, "messages")?;
        let segments = number_before(note, "segments")?;
        let f = findings.iter().find(|f| f.name == run)?;
        rows.push((run, messages, segments, f.net_softirqs.0));
    }
    let mut o = String::from(
        "
§4.2 compared (the same messages, three socket setups):
",
    );
    for (run, messages, segments, net_rx) in &rows {
        let _ = writeln!(
            o,
            "  {run:<10} {segments:>7} TCP segments for {messages} messages = {:>5.2} per message, {net_rx:>6} NET_RX softirqs",
            *segments as f64 / (*messages).max(1) as f64
        );
    }
    let (on, off, mss) = (rows[0].2.max(1), rows[1].2.max(1), rows[2].2);
    let _ = writeln!(
        o,
        "  Nagle's algorithm packs small writes ({:.1}x fewer segments than TCP_NODELAY); a small \
         MSS splits each message ({:.1}x more segments than TCP_NODELAY, {:.1}x more than Nagle).",
        off as f64 / on as f64,
        mss as f64 / off as f64,
        mss as f64 / on as f64
    );
    Some(o)
}

pub(super) fn render_finding(o: &mut String, f: &Finding, note: &str) {
    let about = SCENARIOS
        .iter()
        .find(|(n, _)| *n == f.name)
        .map_or("", |(_, d)| *d);
    let _ = writeln!(o);
    let _ = writeln!(o, "session {:<14} {about}", f.name);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for p in &f.programs {
        *counts.entry(p.as_str()).or_insert(0) += 1;
    }
    let procs: Vec<String> = counts
        .iter()
        .map(|(p, n)| {
            if *n > 1 {
                format!("{n} x {p}")
            } else {
                (*p).to_owned()
            }
        })
        .collect();
    let _ = writeln!(
        o,
        "  {} over {:.0} ms; {} messages matched, {} received before sent; host: {} metric series, {} sched rows, {} irq rows",
        procs.join(", "),
        ms(f.span_ns),
        f.matched,
        f.violations,
        f.metrics,
        f.sched_rows,
        f.irq_rows
    );
    if !note.is_empty() {
        let _ = writeln!(o, "  program: {note}");
    }
    if let Some((p50, p99)) = f.latency_ns {
        let _ = writeln!(
            o,
            "  message latency (send start -> receive end): median {:.3} ms, p99 {:.3} ms",
            ms(p50),
            ms(p99)
        );
    }
    match f.name.as_str() {
        "cascade" => {
            for t in &f.threads {
                let _ = writeln!(
                    o,
                    "  {:<8} pid {:<7} calculating {:>5.1} %  sending {:>5.1} %  receiving {:>5.1} %",
                    t.role,
                    t.pid,
                    100.0 * t.share(ThreadState::Calculating.name()),
                    100.0 * t.share(ThreadState::Sending.name()),
                    100.0 * t.share(ThreadState::Receiving.name())
                );
            }
            for func in [
                "request_page",
                "parse_request",
                "lookup_prices",
                "render_page",
            ] {
                if let Some((ns, n)) = f.functions.get(func) {
                    let _ = writeln!(
                        o,
                        "  {func:<14} {n:>6} calls, mean {:.3} ms",
                        ms(*ns) / (*n).max(1) as f64
                    );
                }
            }
        }
        n if n.starts_with("cracker") => render_cracker(o, f),
        _ => {
            if let Some((ns, n)) = f.functions.get("handle_events") {
                let _ = writeln!(
                    o,
                    "  server reads (handle_events): {n}, mean {:.3} ms each",
                    ms(*ns) / (*n).max(1) as f64
                );
            }
            let (rx, tx) = f.net_softirqs;
            let nic = f.irq_rows - rx - tx;
            if f.irq_rows > 0 {
                let _ = writeln!(
                    o,
                    "  beneath it (IRQ row): network softirqs, the kernel's loopback packet work: {rx} \
                     NET_RX ({:.2} per message), {tx} NET_TX (p5's own uploads to the log server \
                     included){}",
                    rx as f64 / f.matched.max(1) as f64,
                    if nic > 0 {
                        format!("; {nic} NIC interrupts")
                    } else {
                        String::new()
                    }
                );
            }
        }
    }
}

/// The cracker sessions' lines: each worker's busy share, the master's threads, compute.
pub(super) fn render_cracker(o: &mut String, f: &Finding) {
    let busy = |prog: &str| -> Vec<&ThreadStates> {
        f.threads
            .iter()
            .filter(|t| t.program == prog && t.total() > 0)
            .collect()
    };
    let mut cows = busy("cow");
    cows.sort_by(|a, b| a.role.cmp(&b.role).then(a.thread.cmp(&b.thread)));
    let _ = writeln!(
        o,
        "  cow workers: busy = calculating / (calculating + waiting for a job); shares of each worker's time"
    );
    for t in &cows {
        let _ = writeln!(
            o,
            "    cow pid {:<7} {:<11} busy {:>5.1} %   calculating {:>5.1} %  waiting (receiving) {:>5.1} %  sending {:>5.1} %",
            t.pid,
            t.role,
            100.0 * t.busy(),
            100.0 * t.share(ThreadState::Calculating.name()),
            100.0 * t.share(ThreadState::Receiving.name()),
            100.0 * t.share(ThreadState::Sending.name())
        );
    }
    let mean = |v: &dyn Fn(&ThreadStates) -> f64| {
        cows.iter().map(|t| v(t)).sum::<f64>() / cows.len().max(1) as f64
    };
    let _ = writeln!(
        o,
        "    mean                    busy {:>5.1} %   calculating {:>5.1} %  waiting (receiving) {:>5.1} %",
        100.0 * mean(&|t| t.busy()),
        100.0 * mean(&|t| t.share(ThreadState::Calculating.name())),
        100.0 * mean(&|t| t.share(ThreadState::Receiving.name()))
    );
    for cpw in busy("cpw") {
        let _ = writeln!(
            o,
            "  cpw thread {:<4} calculating {:>5.1} %, receiving {:>5.1} %",
            cpw.thread,
            100.0 * cpw.share(ThreadState::Calculating.name()),
            100.0 * cpw.share(ThreadState::Receiving.name())
        );
    }
    let salt = f.functions.get("set_salt").copied().unwrap_or_default();
    let enc = f.functions.get("encrypt_word").copied().unwrap_or_default();
    let _ = writeln!(
        o,
        "  compute: set_salt {} calls {:.0} ms, encrypt_word {} calls {:.0} ms",
        salt.1,
        ms(salt.0),
        enc.1,
        ms(enc.0)
    );
}

pub(super) fn findings_json(fs: &[Finding]) -> serde_json::Value {
    let v: Vec<serde_json::Value> = fs
        .iter()
        .map(|f| {
            serde_json::json!({
                "name": f.name,
                "programs": f.programs,
                "span_ns": f.span_ns,
                "matched": f.matched,
                "violations": f.violations,
                "latency_p50_ns": f.latency_ns.map(|l| l.0),
                "latency_p99_ns": f.latency_ns.map(|l| l.1),
                "sched_rows": f.sched_rows,
                "irq_rows": f.irq_rows,
                "net_rx_softirqs": f.net_softirqs.0,
                "net_tx_softirqs": f.net_softirqs.1,
                "metrics": f.metrics,
                "threads": f.threads.iter().map(|t| serde_json::json!({
                    "program": t.program,
                    "role": t.role,
                    "pid": t.pid,
                    "thread": t.thread,
                    "ns": t.ns,
                })).collect::<Vec<_>>(),
                "functions": f.functions.iter().map(|(k, (ns, n))| (k.clone(), serde_json::json!({"ns": ns, "calls": n}))).collect::<serde_json::Map<_, _>>(),
            })
        })
        .collect();
    serde_json::json!({ "sessions": v })
}
