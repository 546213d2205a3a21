//! `p5 analyze`: runs the analysis library's command with a spinner that appears only when
//! an operation has been running for more than a second.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use p5_analyze::cli::{AnalyzeArgs, Progress};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Runs `p5 analyze …`.
pub fn run(args: &AnalyzeArgs) -> anyhow::Result<()> {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} {pos} [{elapsed}]") {
        bar.set_style(style);
    }
    let done = Arc::new(AtomicBool::new(false));
    let shower = {
        let (bar, done) = (bar.clone(), done.clone());
        std::thread::spawn(move || {
            for _ in 0..10 {
                std::thread::sleep(Duration::from_millis(100));
                if done.load(Ordering::Relaxed) {
                    return;
                }
            }
            bar.set_draw_target(ProgressDrawTarget::stderr());
            bar.enable_steady_tick(Duration::from_millis(100));
        })
    };
    let mut on_progress = |p: Progress| match p {
        Progress::Phase(name, total) => {
            bar.set_message(name);
            bar.set_position(0);
            bar.set_length(total.unwrap_or(0));
        }
        Progress::At(n) => bar.set_position(n),
        Progress::Done => {
            done.store(true, Ordering::Relaxed);
        }
    };
    let result = p5_analyze::cli::run(args, &mut on_progress);
    done.store(true, Ordering::Relaxed);
    let _ = shower.join();
    bar.finish_and_clear();
    Ok(result?)
}
