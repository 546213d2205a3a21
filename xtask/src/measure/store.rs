//! Storing and viewing:
//!
//! - merge: `cargo bench -p p5-merge --bench merge` with `P5_BENCH_EVENTS` reduced (SQLite,
//!   and PostgreSQL when `$P5_TEST_PG_URL` or the local server is reachable), and the
//!   communication-heavy session (`P5_BENCH_COMM`);
//! - web: `cargo bench -p p5-web --bench query` with `P5_BENCH_EVENTS` reduced (skipped by
//!   `--quick`: generating its session database dominates the first run);
//! - export: `cargo bench -p p5-export --bench export` (`p5 export perfetto`'s library).

use super::{after, all_na, cargo, env_of, line, size};
use crate::report::{Better, Row};
use crate::{Ctx, Size, parse};

pub fn merge(ctx: &Ctx) -> Vec<Row> {
    let rows = vec![
        Row::new("merge into SQLite", 1.5, "M ev/s", Better::Higher),
        Row::new(
            "merge into SQLite, communication-heavy",
            0.75,
            "M ev/s",
            Better::Higher,
        ),
        Row::new("merge into PostgreSQL", 0.75, "M ev/s", Better::Higher),
    ];
    let n = size(ctx, 1_000_000, 3_000_000);
    let comm = size(ctx, 1_000_000, 3_000_000);
    let mut env = env_of("P5_BENCH_EVENTS", &n);
    env.extend(env_of("P5_BENCH_COMM", &comm));
    let args = ["bench", "-p", "p5-merge", "--bench", "merge"];
    let out = match cargo(ctx, "merge", &args, &env) {
        Ok(o) => o,
        Err(e) => return all_na(rows, &e),
    };
    // "sqlite 1M   1000000 events in 0.52 s =  1.92 M events/s, …"
    let read = |backend: &str, comm: bool| -> Result<f64, String> {
        let l = out
            .lines()
            .find(|l| {
                l.split_whitespace().next() == Some(backend) && l.contains("comm-heavy") == comm
            })
            .ok_or_else(|| {
                line(&out, &format!("{backend} skipped"))
                    .map_or_else(|e| e, |l| l.trim().to_owned())
            })?;
        parse::number_after(l, "s = ").ok_or_else(|| format!("cannot read {l:?}"))
    };
    let sessions = |n: &Option<String>, dflt: &str| {
        format!("{}-event synthetic session", n.as_deref().unwrap_or(dflt))
    };
    let [sqlite, heavy, pg] = rows.try_into().expect("three rows");
    vec![
        sqlite
            .measured(read("sqlite", false))
            .note(sessions(&n, "1,000,000 / 3,000,000 / 10,000,000")),
        heavy
            .measured(read("sqlite", true))
            .note(sessions(&comm, "3000000")),
        pg.measured(read("postgres", false))
            .note(sessions(&n, "1,000,000 / 3,000,000 / 10,000,000")),
    ]
}

pub fn web(ctx: &Ctx) -> Vec<Row> {
    let rows = vec![
        Row::new(
            "web first paint, never indexed",
            1000.0,
            "ms",
            Better::Lower,
        ),
        Row::new(
            "web first paint, index in memory",
            1000.0,
            "ms",
            Better::Lower,
        ),
        Row::new(
            "web first paint, restart from cache file",
            1000.0,
            "ms",
            Better::Lower,
        ),
        Row::new("web pan/zoom query, p95", 50.0, "ms", Better::Lower),
        Row::new("web pan/zoom query, max", 50.0, "ms", Better::Lower),
    ];
    if ctx.size == Size::Quick {
        return all_na(rows, "skipped by --quick")
            .into_iter()
            .map(|r| r.command("cargo bench -p p5-web --bench query"))
            .collect();
    }
    // The bench keeps its generated database in the temp directory, named by size; generating
    // one takes minutes, so a 10 M-event one left by an earlier run is reused as it is.
    let full = std::env::temp_dir().join("p5-web-bench-v1-10000000.db");
    let n = if full.is_file() {
        None
    } else {
        size(ctx, 1_000_000, 2_000_000)
    };
    let args = ["bench", "-p", "p5-web", "--bench", "query"];
    let out = match cargo(ctx, "web", &args, &env_of("P5_BENCH_EVENTS", &n)) {
        Ok(o) => o,
        Err(e) => return all_na(rows, &e),
    };
    let after_paren = |key: &str| {
        line(&out, key).and_then(|l| {
            l.split("): ")
                .nth(1)
                .and_then(|r| parse::duration_ms(r.split_whitespace().next()?))
                .ok_or_else(|| format!("cannot read {:?}", l.trim()))
        })
    };
    let cached = line(&out, "restart with --cache-dir").and_then(|l| {
        l.rsplit("metrics): ")
            .next()
            .and_then(|r| parse::duration_ms(r.split_whitespace().next()?))
            .ok_or_else(|| format!("cannot read {:?}", l.trim()))
    });
    let pan = line(&out, "pan/zoom");
    let dur = |key: &str| {
        pan.clone()
            .and_then(|l| parse::duration_after(l, key).ok_or_else(|| format!("no {key:?}")))
    };
    let note = format!("{}-event session", n.as_deref().unwrap_or("10000000"));
    let [cold, memory, restart, p95, max] = rows.try_into().expect("five rows");
    vec![
        cold.measured(after_paren("cold first paint"))
            .note(format!("{note}; answered from the merge's overview table")),
        memory
            .measured(after_paren("first paint ("))
            .note(note.clone()),
        restart.measured(cached).note(note.clone()),
        p95.measured(dur("p95 ")).note(note.clone()),
        max.measured(dur("max ")).note(note),
    ]
}

pub fn export(ctx: &Ctx) -> Vec<Row> {
    let rows = vec![
        Row::new("Perfetto export speed", 2.0, "M ev/s", Better::Higher),
        Row::new("Perfetto export size", 4.0, "B/event", Better::Lower),
    ];
    let n = size(ctx, 1_000_000, 2_000_000);
    let args = ["bench", "-p", "p5-export", "--bench", "export"];
    let out = match cargo(ctx, "export", &args, &env_of("P5_BENCH_EVENTS", &n)) {
        Ok(o) => o,
        Err(e) => return all_na(rows, &e),
    };
    let l = line(&out, "export, deflate 1");
    let note = format!(
        "{} events, deflate level 1 (the default); budget: 10 M events ≤ 5 s",
        n.as_deref().unwrap_or("10000000")
    );
    let rss = l
        .clone()
        .and_then(|l| after(l, "peak RSS "))
        .map_or(String::new(), |m| {
            format!("; peak RSS {m:.0} MiB (memory bounded: the open slices of one track)")
        });
    let [speed, bytes] = rows.try_into().expect("two rows");
    vec![
        speed
            .measured(
                l.clone()
                    .and_then(|l| super::before(l, "session events/s"))
                    .map(|v| v / 1e6),
            )
            .note(format!("{note}{rss}")),
        bytes
            .measured(
                l.clone()
                    .and_then(|l| super::before(l, "bytes/session event")),
            )
            .note("the file's size per session event"),
    ]
}
