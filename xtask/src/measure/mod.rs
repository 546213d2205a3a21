//! The measurements. Each one runs the project's own benchmark (or a short real run) as a
//! subprocess and reads its printed figures; a failure becomes an `n/a` row with the reason.
//! Every subprocess is kept as a [`Detail`] (command, wall time, output) for the report's
//! detail runs, and each row names the command that measured it.
//!
//! - [`record`]: what recording costs a program — sensors, the flusher, a hot real program
//!   (Lua), the preload library — and the instrumenter;
//! - [`collect`]: the log server's ingest and the host agent's overhead;
//! - [`store`]: merge into SQLite and PostgreSQL, the viewer's queries, the Perfetto export;
//! - [`analysis`]: the trace readers and the analyses of `p5 analyze`;
//! - [`services`]: the analyses of a large recording of a real service.
//!
//! Sizes: `--quick` shrinks the generated inputs (each row's note says what was measured),
//! `--full` uses the benches' own default sizes. Budgets are stated per unit (events/s,
//! bytes per message) where a smaller input is measured, so a quick run still says pass or
//! not met against the same budget.

mod analysis;
mod collect;
mod record;
mod services;
mod store;

use crate::parse;
use crate::report::Row;
use crate::{Ctx, Size};
use std::process::{Command, Stdio};
use std::time::Instant;

/// One subprocess the report ran: the command as a user would type it, how long it took,
/// and its output (stdout), or why it failed.
#[derive(Debug, Clone)]
pub struct Detail {
    pub measurement: &'static str,
    pub command: String,
    pub seconds: f64,
    pub output: Result<String, String>,
}

type Measure = fn(&Ctx) -> Vec<Row>;

/// The measurements by name, in report order.
const ALL: [(&str, Measure); 17] = [
    ("sensor", record::sensor),
    ("flusher", record::flusher),
    ("lua", record::lua),
    ("preload", record::preload),
    ("instrument", record::instrument),
    ("ingest", collect::ingest),
    ("hostagent", collect::hostagent),
    ("merge", store::merge),
    ("web", store::web),
    ("export", store::export),
    ("text", analysis::text),
    ("pcap", analysis::pcap),
    ("nesting", analysis::nesting),
    ("convolution", analysis::convolution),
    ("linking", analysis::linking),
    ("flows", analysis::flows),
    ("services", services::services),
];

/// The names `--only` accepts.
pub fn names() -> impl Iterator<Item = &'static str> {
    ALL.iter().map(|(n, _)| *n)
}

/// Runs the measurements named in `only` (all of them when it is empty). Rows that do not
/// name their command get the last command their measurement ran.
pub fn all(ctx: &Ctx, only: &[String]) -> Vec<Row> {
    let mut rows = Vec::new();
    for (name, run) in ALL {
        if !only.is_empty() && !only.iter().any(|o| o == name) {
            continue;
        }
        let before = ctx.details.borrow().len();
        let mut got = run(ctx);
        let last = ctx.details.borrow()[before..]
            .last()
            .map(|d| d.command.clone());
        for r in &mut got {
            if r.command.is_empty() {
                r.command = last.clone().unwrap_or_default();
            }
        }
        rows.extend(got);
    }
    rows
}

fn step(what: &str) {
    eprintln!("xtask bench-report: {what} ...");
}

/// Runs `cargo ARGS` in the workspace with `envs`, keeping it as a [`Detail`] of
/// `measurement`; returns stdout, or an error with the tail of stderr.
fn cargo(
    ctx: &Ctx,
    measurement: &'static str,
    args: &[&str],
    envs: &[(&str, String)],
) -> Result<String, String> {
    step(&format!("{measurement}: cargo {}", args.join(" ")));
    let command = envs
        .iter()
        .map(|(k, v)| format!("{k}={v} "))
        .chain(std::iter::once(format!("cargo {}", args.join(" "))))
        .collect::<String>();
    let t = Instant::now();
    let output = run_cargo(ctx, args, envs);
    ctx.details.borrow_mut().push(Detail {
        measurement,
        command,
        seconds: t.elapsed().as_secs_f64(),
        output: output.clone(),
    });
    output
}

fn run_cargo(ctx: &Ctx, args: &[&str], envs: &[(&str, String)]) -> Result<String, String> {
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
            parse::failure(&String::from_utf8_lossy(&out.stderr))
        ));
    }
    Ok(stdout)
}

/// The input size for a bench: `quick` or `default`, or the bench's own default (`None`)
/// with `--full`.
fn size(ctx: &Ctx, quick: u64, default: u64) -> Option<String> {
    match ctx.size {
        Size::Quick => Some(quick.to_string()),
        Size::Default => Some(default.to_string()),
        Size::Full => None,
    }
}

/// `[(var, n)]` when a size is set, else nothing.
fn env_of(var: &'static str, n: &Option<String>) -> Vec<(&'static str, String)> {
    n.iter().map(|n| (var, n.clone())).collect()
}

/// Rows that all fail for the same reason.
fn all_na(rows: Vec<Row>, why: &str) -> Vec<Row> {
    rows.into_iter()
        .map(|r| r.measured(Err(why.to_owned())))
        .collect()
}

/// The first line of `out` containing `key`, or an error naming what is missing.
fn line<'a>(out: &'a str, key: &str) -> Result<&'a str, String> {
    out.lines()
        .find(|l| l.contains(key))
        .ok_or_else(|| format!("no {key:?} line in the output"))
}

/// The number right after `key` on the first line holding `key`.
fn after(out: &str, key: &str) -> Result<f64, String> {
    let l = line(out, key)?;
    parse::number_after(l, key).ok_or_else(|| format!("cannot read {:?}", l.trim()))
}

/// The number right before `key` on the first line holding `key`.
fn before(out: &str, key: &str) -> Result<f64, String> {
    let l = line(out, key)?;
    parse::number_before(l, key).ok_or_else(|| format!("cannot read {:?}", l.trim()))
}
