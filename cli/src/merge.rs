//! `p5 merge`: its command line, which becomes [`p5_merge::MergeOptions`]; merges with a
//! progress bar on a terminal and prints a summary per session.

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use p5_merge::{MergeOptions, Progress};
use std::io::IsTerminal;
use std::path::PathBuf;

/// `p5 merge STORE [--db URL] [--session NAME] [--manifest DIR]...`
#[derive(Debug, Clone, Args)]
pub struct MergeArgs {
    /// Session store directory (written by `p5 logserver`).
    #[arg(value_name = "STORE")]
    pub store: PathBuf,
    /// Database: `sqlite:PATH` (created if missing) or `postgres://user@host/db`.
    /// Default: `sqlite:<STORE>/p5.sqlite`.
    #[arg(long, value_name = "URL")]
    pub db: Option<String>,
    /// Merge only this session (default: every session in the store).
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    /// Instrumentation output directory holding `p5-manifest.json` and `sources/`
    /// (repeatable): gives sensors their source locations and text.
    #[arg(long = "manifest", value_name = "DIR")]
    pub manifests: Vec<PathBuf>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

impl MergeArgs {
    /// The merge's options (everything but `--quiet`, which is this front's).
    pub fn options(&self) -> MergeOptions {
        MergeOptions {
            store: self.store.clone(),
            db: self.db.clone(),
            session: self.session.clone(),
            manifests: self.manifests.clone(),
        }
    }
}

/// The merge's progress drawn as an indicatif bar.
#[derive(Debug)]
pub struct Bar(pub ProgressBar);

impl Bar {
    /// A bar on stderr, hidden when `quiet` or when stderr is not a terminal.
    pub fn new(quiet: bool) -> Bar {
        if quiet || !std::io::stderr().is_terminal() {
            return Bar(ProgressBar::hidden());
        }
        let b = ProgressBar::with_draw_target(Some(1), ProgressDrawTarget::stderr());
        b.set_style(
            ProgressStyle::with_template("{msg:30} [{bar:40}] {bytes}/{total_bytes} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        Bar(b)
    }
}

impl Progress for Bar {
    fn phase(&self, session: &str, phase: &str) {
        self.0.set_message(format!("{session}: {phase}"));
    }
    fn length(&self, total: u64) {
        self.0.set_length(total);
    }
    fn position(&self, done: u64) {
        self.0.set_position(done);
    }
}

/// Merges and prints a summary per session.
pub fn run(args: &MergeArgs) -> anyhow::Result<()> {
    // Two workers: the merge builds rows while the database task writes the previous batch.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let started = std::time::Instant::now();
    let opts = args.options();
    let bar = Bar::new(args.quiet);
    let summaries = rt.block_on(p5_merge::merge_store_with(&opts, &bar));
    bar.0.finish_and_clear();
    let summaries = summaries?;
    let elapsed = started.elapsed().as_secs_f64();
    let events: u64 = summaries.iter().map(|s| s.events).sum();
    for s in &summaries {
        print!("{}", p5_merge::render(s));
    }
    println!(
        "merged {} session(s), {} events in {:.2} s ({:.0} events/s) into {}",
        summaries.len(),
        events,
        elapsed,
        events as f64 / elapsed.max(1e-9),
        opts.parsed_db_url()?
    );
    Ok(())
}
