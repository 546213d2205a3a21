//! `p5 merge`: merges with a progress bar on a terminal and prints a summary per session.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use p5_merge::{MergeArgs, Progress};
use std::io::IsTerminal;

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
    let bar = Bar::new(args.quiet);
    let summaries = rt.block_on(p5_merge::merge_store_with(args, &bar));
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
        args.parsed_db_url()?
    );
    Ok(())
}
