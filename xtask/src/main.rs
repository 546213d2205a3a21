//! `xtask`: project automation that is not part of the product.
//!
//! `cargo run -p p5-xtask --release -- bench-report [--quick | --full] [--only A,B]
//! [--out FILE]` runs the project's key measurements (each one a benchmark of the crate it
//! measures, run as a subprocess) and prints one table of figures against their budgets
//! (design.md) with pass or not met. A measurement that cannot run gives `n/a` and the
//! reason; the report never aborts half-way. A run of every measurement also writes
//! `docs/performance.md` ([`markdown`]): the machine and its load, one row per budget, the
//! detail runs below — so the figures are regenerated, never narrated.
//!
//! The library-free crate also holds the tests that keep `ARCHITECTURE.md` a map
//! (`tests/architecture.rs`).

mod machine;
mod markdown;
mod measure;
mod parse;
mod report;

use std::cell::RefCell;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: cargo run -p p5-xtask --release -- bench-report [--quick | --full] [--only A,B] [--out FILE]

  bench-report   run the key measurements and print them against their budgets; a run of
                 every measurement writes docs/performance.md
    --quick      smaller inputs, and skip the web query benchmark (the slowest part)
    --full       the benches' default sizes (10 M-event sessions; tens of minutes)
    --only A,B   only these measurements (nothing written unless --out is given)
    --out FILE   write the page here instead of docs/performance.md";

/// How big the measurements are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    Quick,
    Default,
    Full,
}

/// What every measurement needs to know, and what they ran.
#[derive(Debug)]
pub struct Ctx {
    /// The workspace root.
    pub root: PathBuf,
    /// `cargo`.
    pub cargo: PathBuf,
    pub size: Size,
    /// Every subprocess run so far, for the detail runs.
    pub details: RefCell<Vec<measure::Detail>>,
}

#[derive(Debug, Default)]
struct Args {
    command: Option<String>,
    size: Option<Size>,
    only: Vec<String>,
    out: Option<PathBuf>,
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut a = Args::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--only" => {
                let list = it.next().ok_or("--only needs a list")?;
                for name in list.split(',').filter(|n| !n.is_empty()) {
                    if !measure::names().any(|n| n == name) {
                        let known: Vec<_> = measure::names().collect();
                        return Err(format!(
                            "unknown measurement {name:?} (known: {})",
                            known.join(", ")
                        ));
                    }
                    a.only.push(name.to_owned());
                }
            }
            "--out" => a.out = Some(it.next().ok_or("--out needs a file")?.into()),
            "--quick" => a.size = Some(Size::Quick),
            "--full" => a.size = Some(Size::Full),
            c if a.command.is_none() && !c.starts_with('-') => a.command = Some(c.to_owned()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(a)
}

fn main() -> ExitCode {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    if raw.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let args = match parse_args(&raw) {
        Ok(a) if a.command.as_deref() == Some("bench-report") => a,
        Ok(_) => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("{e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let ctx = Ctx {
        root: std::fs::canonicalize(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."))
            .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")),
        cargo: std::env::var_os("CARGO")
            .map(PathBuf::from)
            .unwrap_or_else(|| "cargo".into()),
        size: args.size.unwrap_or(Size::Default),
        details: RefCell::new(Vec::new()),
    };
    let load_before = machine::load();
    // The commit and the time the measuring started at.
    let machine = machine::Machine::now(&ctx.root);
    let started = std::time::Instant::now();
    let rows = measure::all(&ctx, &args.only);
    let seconds = started.elapsed().as_secs_f64();
    print!("{}", report::render(&rows));
    let count = |v| rows.iter().filter(|r| r.verdict() == v).count();
    println!(
        "({} figures, {} passed, {} not met, {} n/a; {seconds:.0} s)",
        rows.len(),
        count(report::Verdict::Pass),
        count(report::Verdict::Fail),
        count(report::Verdict::NotAvailable),
    );
    let out = match (&args.out, args.only.is_empty()) {
        (Some(p), _) => Some(p.clone()),
        (None, true) => Some(ctx.root.join("docs/performance.md")),
        (None, false) => None,
    };
    if let Some(path) = out {
        let run = markdown::Run {
            machine,
            size: ctx.size,
            load_before,
            load_after: machine::load(),
            seconds,
        };
        let page = markdown::render(&rows, &ctx.details.borrow(), &run);
        if let Err(e) = std::fs::write(&path, page) {
            eprintln!("cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", path.display());
    }
    ExitCode::SUCCESS
}
