//! The measurements. Each one runs the project's own benchmark (or a short real run) as a
//! subprocess and reads its printed figures; a failure becomes an `n/a` row with the reason.
//!
//! - demo: the bundled `samples/pingpong` C program, built once against `libp5_runtime.a`,
//!   run recording into a real `p5 logserver` and with `P5_DISABLE=1` (sensors cost one load,
//!   nothing is recorded); best of a few runs each.
//! - sensor: `cargo bench -p p5-runtime --bench sensor` with a criterion filter matching
//!   nothing, so only its summary (plain timing loops against `rdtsc`) runs.
//! - ingest: `cargo bench -p p5-logserver --bench ingest` with `P5_BENCH_EVENTS` reduced.
//! - merge: `cargo bench -p p5-merge --bench merge` with `P5_BENCH_EVENTS` reduced (SQLite,
//!   and PostgreSQL when `$P5_TEST_PG_URL` or the local server is reachable).
//! - web: `cargo bench -p p5-web --bench query` with `P5_BENCH_EVENTS` reduced (skipped by
//!   `--quick`: generating its session database dominates the first run).

use crate::parse;
use crate::report::{Better, Row};
use crate::{Ctx, Size};
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The measurements by name, in report order.
pub const NAMES: [&str; 5] = ["demo", "sensor", "ingest", "merge", "web"];

/// Runs the measurements named in `only` (all of them when it is empty).
pub fn all(ctx: &Ctx, only: &[String]) -> Vec<Row> {
    let runs: [fn(&Ctx) -> Vec<Row>; 5] = [demo, sensor, ingest, merge, web];
    NAMES
        .iter()
        .zip(runs)
        .filter(|(name, _)| only.is_empty() || only.iter().any(|o| o == *name))
        .flat_map(|(_, run)| run(ctx))
        .collect()
}

fn step(what: &str) {
    eprintln!("xtask bench-report: {what} ...");
}

/// Runs `cargo ARGS` in the workspace with `envs`; returns stdout, or an error with the tail.
fn cargo(ctx: &Ctx, args: &[&str], envs: &[(&str, String)]) -> Result<String, String> {
    let mut c = Command::new(&ctx.cargo);
    c.current_dir(&ctx.root)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in envs {
        c.env(k, v);
    }
    let out = c
        .output()
        .map_err(|e| format!("cannot run {}: {e}", ctx.cargo.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!(
            "`cargo {}` failed ({}): {}",
            args.join(" "),
            out.status,
            parse::tail(&String::from_utf8_lossy(&out.stderr), 3)
        ));
    }
    Ok(stdout)
}

fn events(ctx: &Ctx, quick: u64, default: u64) -> Option<String> {
    match ctx.size {
        Size::Quick => Some(quick.to_string()),
        Size::Default => Some(default.to_string()),
        Size::Full => None,
    }
}

fn bench_env(n: Option<String>) -> Vec<(&'static str, String)> {
    n.map(|n| vec![("P5_BENCH_EVENTS", n)]).unwrap_or_default()
}

/// Rows that all fail for the same reason.
fn all_na(rows: Vec<Row>, why: &str) -> Vec<Row> {
    rows.into_iter()
        .map(|r| r.measured(Err(why.to_owned())))
        .collect()
}

// ---------------------------------------------------------------------------------- demo

fn demo(ctx: &Ctx) -> Vec<Row> {
    step("demo pingpong, instrumented vs P5_DISABLE=1");
    let row = Row::new("demo pingpong run time", 1.10, "×", Better::Lower);
    match demo_ratio(ctx) {
        Ok((ratio, on, off)) => vec![row.measured(Ok(ratio)).note(format!(
            "recorded {:.0} ms vs P5_DISABLE=1 {:.0} ms (best of runs; informal budget)",
            on.as_secs_f64() * 1e3,
            off.as_secs_f64() * 1e3
        ))],
        Err(e) => vec![row.measured(Err(e))],
    }
}

fn target_dir(ctx: &Ctx) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| ctx.root.join("target"))
}

/// A `p5 logserver` child; killed on drop.
struct LogServer(std::process::Child, String);

impl LogServer {
    fn start(p5: &Path, store: &Path) -> Result<LogServer, String> {
        let mut child = Command::new(p5)
            .args(["logserver", "--listen", "127.0.0.1:0", "--store"])
            .arg(store)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start p5 logserver: {e}"))?;
        let mut line = String::new();
        let out = child.stdout.take().ok_or("no stdout")?;
        BufReader::new(out)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .ok_or_else(|| format!("p5 logserver said {line:?}"))?
            .to_owned();
        Ok(LogServer(child, addr))
    }
}

impl Drop for LogServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One pingpong run (server and client); its wall time.
fn pingpong(bin: &Path, env: &[(&str, &str)], threads: u32, n: u32) -> Result<Duration, String> {
    let t = Instant::now();
    let mut server = Command::new(bin);
    server
        .args(["server", "0", &threads.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in env {
        server.env(k, v);
    }
    let mut server = server.spawn().map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(server.stdout.take().ok_or("no stdout")?)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    let port = line
        .trim()
        .rsplit(':')
        .next()
        .filter(|p| p.parse::<u16>().is_ok())
        .ok_or_else(|| format!("pingpong server said {line:?}"))?
        .to_owned();
    let mut client = Command::new(bin);
    client
        .args([
            "client",
            "127.0.0.1",
            &port,
            &threads.to_string(),
            &n.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in env {
        client.env(k, v);
    }
    let cs = client.status().map_err(|e| e.to_string())?;
    let ss = server.wait().map_err(|e| e.to_string())?;
    if !cs.success() || !ss.success() {
        return Err(format!("pingpong failed: client {cs}, server {ss}"));
    }
    Ok(t.elapsed())
}

fn demo_ratio(ctx: &Ctx) -> Result<(f64, Duration, Duration), String> {
    cargo(
        ctx,
        &["build", "--release", "-p", "p5-cli", "-p", "p5-runtime"],
        &[],
    )?;
    let release = target_dir(ctx).join("release");
    let p5 = release.join("p5");
    let lib = release.join("libp5_runtime.a");
    if !lib.is_file() {
        return Err(format!("{} missing after the build", lib.display()));
    }
    let tmp = std::env::temp_dir().join(format!("p5-bench-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
    let result = (|| {
        let bin = tmp.join("pingpong");
        let st = Command::new(std::env::var_os("CC").unwrap_or_else(|| "gcc".into()))
            .args(["-O2", "-pthread", "-I"])
            .arg(ctx.root.join("runtime/include"))
            .arg(ctx.root.join("samples/pingpong/pingpong.c"))
            .arg(&lib)
            .args(["-lpthread", "-ldl", "-lm", "-lrt", "-o"])
            .arg(&bin)
            .status()
            .map_err(|e| format!("cannot run gcc: {e}"))?;
        if !st.success() {
            return Err(format!("gcc failed ({st})"));
        }
        let server = LogServer::start(&p5, &tmp.join("store"))?;
        let (threads, n, runs) = match ctx.size {
            // Long enough (≈ 0.3 s and ≈ 1 s) that start-up and the exit flush do not dominate.
            Size::Quick => (4, 10_000, 3),
            _ => (4, 40_000, 3),
        };
        let spool = tmp.join("spool").display().to_string();
        let on_env = [
            ("P5_LOGSERVER", server.1.as_str()),
            ("P5_SESSION", "bench"),
            ("P5_DIR", spool.as_str()),
        ];
        let off_env = [("P5_DISABLE", "1")];
        let (mut on, mut off) = (Duration::MAX, Duration::MAX);
        // Alternate, so machine noise hits both alike; the best run of each counts.
        for _ in 0..runs {
            off = off.min(pingpong(&bin, &off_env, threads, n)?);
            on = on.min(pingpong(&bin, &on_env, threads, n)?);
        }
        Ok((on.as_secs_f64() / off.as_secs_f64(), on, off))
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    result
}

// -------------------------------------------------------------------------------- sensor

fn sensor(ctx: &Ctx) -> Vec<Row> {
    step("sensor cost (cargo bench -p p5-runtime --bench sensor, summary only)");
    let rows = vec![
        Row::new("sensor enter+exit, Rust", 1.3, "× rdtsc", Better::Lower),
        Row::new("sensor enter+exit, C ABI", 1.3, "× rdtsc", Better::Lower),
        Row::new("disabled sensor, Rust", 1.0, "ns", Better::Lower),
        Row::new("wire size, realistic trace", 8.0, "B/event", Better::Lower),
    ];
    let out = match cargo(
        ctx,
        &[
            "bench",
            "-p",
            "p5-runtime",
            "--bench",
            "sensor",
            "--",
            "p5-xtask-summary-only",
        ],
        &[],
    ) {
        Ok(o) => o,
        Err(e) => return all_na(rows, &e),
    };
    let rdtsc = parse::number_after(&out, "rdtsc ");
    let ratio = |key: &str| -> Result<f64, String> {
        let l = out
            .lines()
            .find(|l| l.contains(key))
            .ok_or_else(|| format!("no {key:?} line in the sensor summary"))?;
        parse::number_after(l, "= ").ok_or_else(|| format!("cannot read {l:?}"))
    };
    let pair = |key: &str| parse::number_after(&out, key);
    let note = |key: &str| match (pair(key), rdtsc) {
        (Some(p), Some(r)) => format!("{p:.2} ns per pair, rdtsc {r:.2} ns (same run)"),
        _ => String::new(),
    };
    let mut it = rows.into_iter();
    let mut next = || it.next().expect("four rows");
    vec![
        next()
            .measured(ratio("rust enter+exit pair"))
            .note(note("rust enter+exit pair")),
        next()
            .measured(ratio("C ABI enter+exit pair"))
            .note(note("C ABI enter+exit pair")),
        next()
            .measured(
                parse::number_after(&out, "disabled rust sensor")
                    .ok_or_else(|| "no disabled-sensor line".to_owned()),
            )
            .note("one relaxed load"),
        next()
            .measured(
                out.lines()
                    .find(|l| l.contains("realistic trace"))
                    .and_then(|l| parse::number_after(l, "= "))
                    .ok_or_else(|| "no realistic-trace line".to_owned()),
            )
            .note("runtime's realistic synthetic trace"),
    ]
}

// -------------------------------------------------------------------------------- ingest

fn ingest(ctx: &Ctx) -> Vec<Row> {
    step("log-server ingest (cargo bench -p p5-logserver --bench ingest)");
    let clients = [1, 8, 64];
    let rows: Vec<Row> = clients
        .iter()
        .map(|c| {
            Row::new(
                format!("ingest, {c} client(s), per server CPU-s"),
                20.0,
                "M ev/s",
                Better::Higher,
            )
        })
        .collect();
    let n = events(ctx, 8 << 20, 32 << 20);
    let out = match cargo(
        ctx,
        &["bench", "-p", "p5-logserver", "--bench", "ingest"],
        &bench_env(n),
    ) {
        Ok(o) => o,
        Err(e) => return all_na(rows, &e),
    };
    rows.into_iter()
        .zip(clients)
        .map(|(r, c)| match parse::table_row(&out, &c.to_string()) {
            // clients events B/event wall-s Mevents/s MB/s Mev/server-s baseline/s ratio
            Some(cols) if cols.len() >= 9 => {
                let server = cols[6].parse::<f64>().map_err(|e| e.to_string());
                r.measured(server).note(format!(
                    "wall {} M ev/s; {}× a plain TCP→file copy",
                    cols[4], cols[8]
                ))
            }
            _ => r.measured(Err(format!(
                "no {c}-client row in: {}",
                parse::tail(&out, 2)
            ))),
        })
        .collect()
}

// --------------------------------------------------------------------------------- merge

fn merge(ctx: &Ctx) -> Vec<Row> {
    step("merge (cargo bench -p p5-merge --bench merge)");
    let rows = vec![
        Row::new("merge into SQLite", 1.0, "M ev/s", Better::Higher),
        Row::new("merge into PostgreSQL", 0.5, "M ev/s", Better::Higher),
    ];
    let n = events(ctx, 1_000_000, 3_000_000);
    let size = n.clone().unwrap_or_else(|| "10000000".into());
    let out = match cargo(
        ctx,
        &["bench", "-p", "p5-merge", "--bench", "merge"],
        &bench_env(n),
    ) {
        Ok(o) => o,
        Err(e) => return all_na(rows, &e),
    };
    let read = |label: &str| -> Result<f64, String> {
        let l = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(label))
            .ok_or_else(|| format!("no {label} line"))?;
        if l.contains("skipped") {
            return Err(l.trim().to_owned());
        }
        parse::number_after(l, "s = ").ok_or_else(|| format!("cannot read {l:?}"))
    };
    let mut it = rows.into_iter();
    let mut next = || it.next().expect("two rows");
    let note = format!("{size}-event synthetic session");
    vec![
        next().measured(read("sqlite")).note(note.clone()),
        next().measured(read("postgres")).note(note),
    ]
}

// ----------------------------------------------------------------------------------- web

fn web(ctx: &Ctx) -> Vec<Row> {
    let rows = vec![
        Row::new(
            "web first paint (index in memory)",
            1000.0,
            "ms",
            Better::Lower,
        ),
        Row::new(
            "web first paint (from cache file)",
            1000.0,
            "ms",
            Better::Lower,
        ),
        Row::new(
            "web index build from SQL (cold)",
            1000.0,
            "ms",
            Better::Lower,
        ),
        Row::new("web pan/zoom query, p95", 50.0, "ms", Better::Lower),
        Row::new("web pan/zoom query, max", 50.0, "ms", Better::Lower),
    ];
    if ctx.size == Size::Quick {
        return all_na(rows, "skipped by --quick");
    }
    step("web queries (cargo bench -p p5-web --bench query)");
    // The bench keeps its generated database in the temp directory, named by size; generating
    // one takes minutes, so a 10 M-event one left by an earlier run is reused as it is.
    let full = std::env::temp_dir().join("p5-web-bench-v1-10000000.db");
    let n = if full.is_file() {
        None
    } else {
        events(ctx, 1_000_000, 2_000_000)
    };
    let size = n.clone().unwrap_or_else(|| "10000000".into());
    let out = match cargo(
        ctx,
        &["bench", "-p", "p5-web", "--bench", "query"],
        &bench_env(n),
    ) {
        Ok(o) => o,
        Err(e) => return all_na(rows, &e),
    };
    let first = out
        .lines()
        .find(|l| l.starts_with("first paint"))
        .and_then(|l| parse::duration_ms(l.split("): ").nth(1)?.split_whitespace().next()?));
    let cached = out
        .lines()
        .find(|l| l.starts_with("restart with --cache-dir"))
        .and_then(|l| {
            parse::duration_ms(l.rsplit("metrics): ").next()?.split_whitespace().next()?)
        });
    let pan = out.lines().find(|l| l.starts_with("pan/zoom"));
    let na = |v: Option<f64>, what: &str| v.ok_or_else(|| format!("no {what} in the output"));
    let note = format!("{size}-event session");
    let mut it = rows.into_iter();
    let mut next = || it.next().expect("five rows");
    vec![
        next()
            .measured(na(first, "first-paint line"))
            .note(note.clone()),
        next()
            .measured(na(cached, "cache-dir line"))
            .note(note.clone()),
        next()
            .measured(na(
                parse::duration_after(&out, "index built in "),
                "index-build line",
            ))
            .note(format!("{note}; once per session, in the background")),
        next()
            .measured(na(
                pan.and_then(|l| parse::duration_after(l, "p95 ")),
                "pan/zoom p95",
            ))
            .note(note.clone()),
        next()
            .measured(na(
                pan.and_then(|l| parse::duration_after(l, "max ")),
                "pan/zoom max",
            ))
            .note(note),
    ]
}
