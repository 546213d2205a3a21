//! What recording costs a program, and the instrumenter's speed:
//!
//! - sensor: `cargo bench -p p5-runtime --bench sensor` with a criterion filter matching
//!   nothing, so only its summary (plain timing loops against `rdtsc`) runs;
//! - flusher: `--bench flusher`, one producer at full speed, `P5_FULL=wait` (nothing lost);
//! - lua: `--bench lua`, the inlined C guard's microbenchmark and an instrumented Lua 5.4
//!   against the same build without p5 (needs gcc and the `lua-src` crate);
//! - preload: `cargo bench -p p5-preload --bench cost`, ns added per interposed call;
//! - instrument: `cargo bench -p p5-instrument --bench throughput`, a generated 250 k-line C
//!   file and the real SQLite amalgamation when cargo's registry holds it.

use super::{after, all_na, before, cargo, env_of, line, size};
use crate::report::{Better, Row};
use crate::{Ctx, Size, parse};

pub fn sensor(ctx: &Ctx) -> Vec<Row> {
    let rows = vec![
        Row::new("sensor enter+exit, Rust", 1.3, "× rdtsc", Better::Lower),
        Row::new("sensor enter+exit, C ABI", 1.3, "× rdtsc", Better::Lower),
        Row::new("disabled sensor, Rust", 1.0, "ns", Better::Lower),
        Row::new("wire size, realistic trace", 8.0, "B/event", Better::Lower),
    ];
    let args = [
        "bench",
        "-p",
        "p5-runtime",
        "--bench",
        "sensor",
        "--",
        "p5-xtask-summary-only",
    ];
    let out = match cargo(ctx, "sensor", &args, &[]) {
        Ok(o) => o,
        Err(e) => return all_na(rows, &e),
    };
    let rdtsc = parse::number_after(&out, "rdtsc ");
    let note = |key: &str| match (parse::number_after(&out, key), rdtsc) {
        (Some(p), Some(r)) => format!("{p:.2} ns per pair, rdtsc {r:.2} ns (same run)"),
        _ => String::new(),
    };
    let [rust, c, off, wire] = rows.try_into().expect("four rows");
    let rust_key = "rust enter+exit pair";
    let c_key = "C ABI enter+exit pair";
    vec![
        rust.measured(line(&out, rust_key).and_then(|l| after(l, "= ")))
            .note(note(rust_key)),
        c.measured(line(&out, c_key).and_then(|l| after(l, "= ")))
            .note(note(c_key)),
        off.measured(after(&out, "disabled rust sensor"))
            .note("one relaxed load"),
        wire.measured(line(&out, "realistic trace").and_then(|l| after(l, "= ")))
            .note("the runtime's realistic synthetic trace"),
    ]
}

pub fn flusher(ctx: &Ctx) -> Vec<Row> {
    let row = Row::new(
        "flusher against one hot producer",
        30.0,
        "M ev per flusher CPU-s",
        Better::Higher,
    );
    let n = size(ctx, 5_000_000, 20_000_000);
    let args = ["bench", "-p", "p5-runtime", "--bench", "flusher"];
    let out = match cargo(ctx, "flusher", &args, &env_of("P5_BENCH_EVENTS", &n)) {
        Ok(o) => o,
        Err(e) => return vec![row.measured(Err(e))],
    };
    let wait = line(&out, "P5_FULL=wait");
    vec![
        row.measured(
            wait.clone()
                .and_then(|l| before(l, "M events per flusher CPU-s")),
        )
        .note(
            match wait.clone().and_then(|l| before(l, "M events/s wall")) {
                Ok(w) => format!("P5_FULL=wait (nothing dropped), {w:.1} M events/s wall"),
                Err(_) => "P5_FULL=wait".into(),
            },
        ),
    ]
}

pub fn lua(ctx: &Ctx) -> Vec<Row> {
    let rows = vec![
        Row::new(
            "C scope guard inlined, per event",
            1.3,
            "× rdtsc",
            Better::Lower,
        ),
        Row::new(
            "hot real program: Lua 5.4, default",
            3.0,
            "× plain",
            Better::Lower,
        ),
    ];
    let runs = match ctx.size {
        Size::Quick => 3,
        _ => 7,
    };
    let args = ["bench", "-p", "p5-runtime", "--bench", "lua"];
    let env = [("P5_BENCH_RUNS", runs.to_string())];
    let out = match cargo(ctx, "lua", &args, &env) {
        Ok(o) => o,
        Err(e) => return all_na(rows, &e),
    };
    let [guard, hot] = rows.try_into().expect("two rows");
    // c guards (default): bare call B ns; rdtsc R ns; recorded guard pair P ns; …
    let g = line(&out, "c guards").and_then(|l| {
        let (b, r, p) = (
            after(l, "bare call ")?,
            after(l, "rdtsc ")?,
            after(l, "recorded guard pair ")?,
        );
        Ok((
            (p - b) / 2.0 / r,
            format!("pair {p:.1} ns with a {b:.1} ns bare call, rdtsc {r:.1} ns"),
        ))
    });
    let lua_default = out
        .lines()
        .find(|l| {
            let mut w = l.split_whitespace();
            w.next() == Some("lua") && w.next() == Some("default")
        })
        .ok_or_else(|| "no `lua default` line".to_owned());
    vec![
        match g {
            Ok((v, n)) => guard.measured(Ok(v)).note(n),
            Err(e) => guard.measured(Err(e)),
        },
        hot.measured(lua_default.clone().and_then(|l| after(l, "ratio ")))
            .note(format!(
                "best of {runs} interleaved runs; events dropped: {}",
                lua_default
                    .ok()
                    .and_then(|l| l.split("dropped ").nth(1))
                    .unwrap_or("?")
                    .trim()
            )),
    ]
}

pub fn preload(ctx: &Ctx) -> Vec<Row> {
    let rows = vec![
        Row::new(
            "preload, interposed socket call",
            1000.0,
            "ns added",
            Better::Lower,
        ),
        Row::new(
            "preload, non-socket read/write",
            50.0,
            "ns added",
            Better::Lower,
        ),
    ];
    let n = size(ctx, 100_000, 200_000);
    let args = ["bench", "-p", "p5-preload", "--bench", "cost"];
    let out = match cargo(ctx, "preload", &args, &env_of("P5_BENCH_CALLS", &n)) {
        Ok(o) => o,
        Err(e) => return all_na(rows, &e),
    };
    let [sock, file] = rows.try_into().expect("two rows");
    let read = |key: &str| line(&out, key).and_then(|l| after(l, "added "));
    let note = |key: &str| {
        line(&out, key)
            .ok()
            .and_then(|l| {
                Some(format!(
                    "bare {:.0} ns per call",
                    parse::number_after(l, "bare ")?
                ))
            })
            .unwrap_or_default()
    };
    vec![
        sock.measured(read("socket send/recv"))
            .note(note("socket send/recv")),
        file.measured(read("file read/write"))
            .note(note("file read/write")),
    ]
}

pub fn instrument(ctx: &Ctx) -> Vec<Row> {
    let rows = vec![
        Row::new(
            "instrumenter, generated 250 k-line C file",
            1000.0,
            "ms",
            Better::Lower,
        ),
        Row::new(
            "instrumenter, sqlite3.c",
            1000.0,
            "ms per 250 k lines",
            Better::Lower,
        ),
    ];
    let args = ["bench", "-p", "p5-instrument", "--bench", "throughput"];
    let out = match cargo(ctx, "instrument", &args, &[]) {
        Ok(o) => o,
        Err(e) => return all_na(rows, &e),
    };
    // "input NAME: L lines, …" then "  functions + comm (default)  median X ms wall, …".
    let mut found: Vec<(String, f64, f64)> = Vec::new();
    let mut input: Option<(String, f64)> = None;
    for l in out.lines() {
        if let Some(rest) = l.strip_prefix("input ") {
            let name = rest.split(':').next().unwrap_or("").to_owned();
            input = parse::number_after(rest, ": ").map(|n| (name, n));
        } else if l.contains("functions + comm (default)")
            && let (Some((name, lines)), Some(ms)) = (&input, parse::number_after(l, "median "))
        {
            found.push((name.clone(), *lines, ms));
        }
    }
    let [generated, sqlite] = rows.try_into().expect("two rows");
    let pick = |row: Row, want: &str| match found.iter().find(|(n, _, _)| n.contains(want)) {
        Some((name, lines, ms)) => row.measured(Ok(ms * 250_000.0 / lines)).note(format!(
            "{name}: {lines:.0} lines in {ms:.0} ms (median of 5), default modes"
        )),
        None => row.measured(Err(format!("no {want:?} input in the output"))),
    };
    vec![pick(generated, "generated"), pick(sqlite, "sqlite3")]
}
