//! `p5 analyze` from its command line: the options parsed as the binary parses them and run
//! in process ([`p5`]), on traces the generator writes, captures forged by hand, sessions
//! imported into SQLite and PostgreSQL, simulated programs merged by `p5 merge`, and a real
//! session recorded by `p5 demo`.

#[path = "analyze/cli.rs"]
mod cli;
#[path = "analyze/db.rs"]
mod db;
#[path = "analyze/flows.rs"]
mod flows;
#[path = "analyze/merged.rs"]
mod merged;

use clap::Parser;
use p5_cli::analyze::{AnalyzeArgs, run_with};
use std::path::Path;

#[derive(Parser, Debug)]
struct Top {
    #[command(flatten)]
    args: AnalyzeArgs,
}

/// Runs `p5 analyze WORDS…` in this process.
pub fn p5(words: &[&str]) -> anyhow::Result<()> {
    let mut argv = vec!["analyze"];
    argv.extend_from_slice(words);
    let top = Top::try_parse_from(argv).expect("arguments parse");
    run_with(&top.args, &mut |_| {})
}

/// Whether `p5 analyze WORDS…` is refused, by the parser or when run.
pub fn refused(words: &[&str]) -> bool {
    let mut argv = vec!["analyze"];
    argv.extend_from_slice(words);
    Top::try_parse_from(argv).map_or(true, |t| run_with(&t.args, &mut |_| {}).is_err())
}

/// A fixture of the analysis crate (`analyze/fixtures/NAME`).
pub fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../analyze/fixtures")
        .join(name)
        .display()
        .to_string()
}

/// A path as the `&str` an argument takes.
pub fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temporary path")
}

/// A current-thread runtime for the database reads of the checks.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}
