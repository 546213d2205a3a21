//! `xtask`: project automation that is not part of the product.
//!
//! `cargo run -p p5-xtask --release -- bench-report [--quick] [--full]` runs the project's key
//! measurements in a few minutes and prints one table of figures against their budgets
//! (`design.md`, ARCHITECTURE.md's performance table) as ratios with pass/fail. A measurement
//! that cannot run prints `n/a` and the reason; the report never aborts half-way.

mod measure;
mod parse;
mod report;

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: cargo run -p p5-xtask --release -- bench-report [--quick] [--full]

  bench-report   run the key measurements and print them against their budgets
    --quick      smaller inputs, and skip the web query benchmark (the slowest part)
    --full       the benches' default sizes (10 M-event sessions; tens of minutes)
    --only A,B   only these measurements: demo, sensor, ingest, merge, web";

/// How big the measurements are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    Quick,
    Default,
    Full,
}

/// What every measurement needs to know.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The workspace root.
    pub root: PathBuf,
    /// `cargo`.
    pub cargo: PathBuf,
    pub size: Size,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut size = Size::Default;
    let mut command = None;
    let mut only: Vec<String> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--only" => {
                let Some(list) = it.next() else {
                    eprintln!("--only needs a list\n{USAGE}");
                    return ExitCode::from(2);
                };
                for name in list.split(',').filter(|n| !n.is_empty()) {
                    if !measure::NAMES.contains(&name) {
                        eprintln!("unknown measurement {name:?}\n{USAGE}");
                        return ExitCode::from(2);
                    }
                    only.push(name.to_owned());
                }
            }
            "--quick" => size = Size::Quick,
            "--full" => size = Size::Full,
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            c if command.is_none() && !c.starts_with('-') => command = Some(c.to_owned()),
            other => {
                eprintln!("unknown argument {other:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    match command.as_deref() {
        Some("bench-report") => {
            let ctx = Ctx {
                root: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."),
                cargo: std::env::var_os("CARGO")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| "cargo".into()),
                size,
            };
            let started = std::time::Instant::now();
            let rows = measure::all(&ctx, &only);
            print!("{}", report::render(&rows));
            println!(
                "({} figures, {} passed, {} failed, {} n/a; {:.0} s)",
                rows.len(),
                rows.iter()
                    .filter(|r| r.verdict() == report::Verdict::Pass)
                    .count(),
                rows.iter()
                    .filter(|r| r.verdict() == report::Verdict::Fail)
                    .count(),
                rows.iter()
                    .filter(|r| r.verdict() == report::Verdict::NotAvailable)
                    .count(),
                started.elapsed().as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}
