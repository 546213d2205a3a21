//! `p5-instrument`: inserts p5 sensors into C, C++, Rust, Python and Java sources.

use anyhow::Context as _;
use clap::Parser;
use p5_instrument::{Modes, Options, runtime};
use std::path::PathBuf;

/// Insert p5 sensors into source code; writes an instrumented copy plus a sensor manifest.
#[derive(Debug, Parser)]
#[command(name = "p5-instrument", version)]
struct Cli {
    /// Files and folders to instrument.
    paths: Vec<PathBuf>,
    /// Write the instrumented tree here (the originals are never touched).
    #[arg(
        short = 'o',
        long = "out",
        value_name = "OUTDIR",
        conflicts_with = "in_place"
    )]
    out: Option<PathBuf>,
    /// Rewrite the files where they are, keeping a backup in .p5-instrument/.
    #[arg(long)]
    in_place: bool,
    /// With --in-place: restore the backup.
    #[arg(long, requires = "in_place")]
    undo: bool,
    /// List the sensors that would be inserted; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Enter/exit sensors on every function body.
    #[arg(long)]
    functions: bool,
    /// A sensor around every call site.
    #[arg(long)]
    calls: bool,
    /// Route communication calls through the runtime's recording wrappers.
    #[arg(long)]
    comm: bool,
    /// Selection file (file and function globs, regions); see the README.
    #[arg(long, value_name = "p5.select.toml")]
    select: Option<PathBuf>,
    /// Print the C/C++ compiler flags an instrumented build needs.
    #[arg(long)]
    cflags: bool,
    /// Print the linker arguments an instrumented C/C++ build needs.
    #[arg(long)]
    libs: bool,
    /// List every problem (default: a count per kind; the manifest always lists them).
    #[arg(short, long)]
    verbose: bool,
    /// No progress bar, no summary.
    #[arg(short, long)]
    quiet: bool,
}

/// Problems counted by kind (the message up to its first `:` or `;`, names left out).
fn problem_kinds(problems: &[(String, p5_instrument::sensor::Problem)]) -> Vec<(String, usize)> {
    let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
    for (_, p) in problems {
        let m = &p.message;
        let kind = if let Some(rest) = m.strip_prefix("function ") {
            // `function NAME not instrumented: why` → `function not instrumented: why`
            rest.split_once(' ')
                .map_or(m.clone(), |(_, r)| format!("function {r}"))
        } else {
            m.split(['(', ';']).next().unwrap_or(m).trim().to_owned()
        };
        *kinds.entry(kind).or_default() += 1;
    }
    let mut v: Vec<_> = kinds.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if cli.cflags || cli.libs {
        let mut parts = Vec::new();
        if cli.cflags {
            parts.push(format!("-I{}", runtime::include_dir()?.display()));
        }
        if cli.libs {
            parts.push(format!(
                "{} {}",
                runtime::static_lib()?.display(),
                runtime::LINK_FLAGS
            ));
        }
        println!("{}", parts.join(" "));
        if cli.paths.is_empty() {
            return Ok(());
        }
    }
    let any = cli.functions || cli.calls || cli.comm;
    let modes = if any {
        Modes {
            functions: cli.functions,
            calls: cli.calls,
            comm: cli.comm,
        }
    } else {
        Modes::default()
    };
    let opts = Options {
        paths: cli.paths,
        out: cli.out,
        in_place: cli.in_place,
        undo: cli.undo,
        dry_run: cli.dry_run,
        modes,
        select: cli.select,
        progress: !cli.quiet,
    };
    let report = p5_instrument::run(&opts).context("p5-instrument failed")?;
    if cli.verbose {
        for (file, p) in &report.problems {
            eprintln!("{file}:{}:{}: {}", p.line, p.column, p.message);
        }
    } else if !cli.quiet && !report.problems.is_empty() {
        for (kind, n) in problem_kinds(&report.problems) {
            eprintln!("{n:>6}  {kind}");
        }
        eprintln!("(--verbose lists each problem; so does the manifest's \"problems\")");
    }
    if opts.dry_run {
        for (file, lang, s) in &report.sensors {
            println!(
                "{file}:{}:{}\t{}\t{}\t{}\t{}\t{}",
                s.span.line,
                s.span.column,
                lang.name(),
                s.kind.name(),
                p5_wire::manifest::format_id(s.id),
                s.function,
                if s.inserted { "new" } else { "present" }
            );
        }
    }
    if !cli.quiet {
        if opts.undo {
            eprintln!(
                "restored {} files under {}",
                report.restored,
                report.root.display()
            );
        } else {
            eprintln!(
                "{} sensors in {} source files ({} changed, {} other files copied, {} problems){}",
                report.sensors.len(),
                report.sources,
                report.changed,
                report.copied,
                report.problems.len(),
                report
                    .manifest
                    .as_ref()
                    .map(|m| format!("; manifest {}", m.display()))
                    .unwrap_or_default()
            );
            if report.untabled > 0 {
                eprintln!(
                    "note: {} Rust files carry no sensor table: their crate forbids unsafe code \
                     (#![forbid(unsafe_code)]), so they cannot register it at start-up; \
                     merge with --manifest {} to name their sensors",
                    report.untabled,
                    report
                        .manifest
                        .as_ref()
                        .and_then(|m| m.parent())
                        .map_or_else(|| "DIR".into(), |d| d.display().to_string())
                );
            }
        }
    }
    Ok(())
}
