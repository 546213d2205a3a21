//! `p5 analyze …`: the front of the analysis library — its options (clap), what it prints
//! and the spinner it draws. Each subcommand turns its options into the library's plain
//! option structs, opens each `--db` once ([`p5_analyze::db::Database`]) and hands both
//! down; the library returns what it found and this module prints it.
//!
//! Subcommands: `maketrace` (ground-truth generator), `score` (accuracy against ground
//! truth), `convert` (text trace normalisation and export), `import` (a trace or capture
//! into the trace database), `show` (a result as a table, JSON or DOT), `nesting` and
//! `convolution` (Project 5's algorithms), `linking` (WAP5's), `flows` and `diff`
//! (self-propelled instrumentation's).

mod files;
mod flows;
mod input;
mod paths;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use p5_analyze::Progress;
use p5_analyze::choice::Choice;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub use files::{ConvertArgs, ImportArgs, MaketraceArgs, ScoreArgs, ShowArgs};
pub use flows::{DiffArgs, FlowsArgs, FlowsCmd, RuleArgs};
pub use input::InputArgs;
pub use paths::{ConvolutionArgs, LinkingArgs, NestingArgs};

/// `p5 analyze`.
#[derive(Debug, clap::Args)]
pub struct AnalyzeArgs {
    /// The subcommand.
    #[command(subcommand)]
    pub cmd: AnalyzeCmd,
}

/// The subcommands of `p5 analyze`.
#[derive(Debug, clap::Subcommand)]
pub enum AnalyzeCmd {
    /// Generate a Project 5 text trace and its ground truth from tracelets (Project 5 paper §7.1.1).
    Maketrace(MaketraceArgs),
    /// Score an analysis result against ground truth (Project 5 paper §7.5.1).
    Score(ScoreArgs),
    /// Read a text trace and write it back normalised (optionally coalesced, aggregated).
    Convert(ConvertArgs),
    /// Print an analysis result or ground truth (JSON, or a run in the trace database) as a
    /// table, JSON or DOT.
    Show(ShowArgs),
    /// Write a text trace or pcap captures into the trace database as a session (the viewer
    /// then shows it), optionally with its ground truth as an analysis run.
    Import(ImportArgs),
    /// Causal paths from the timing of calls and returns (Project 5 nesting, its paper §5.1).
    Nesting(NestingArgs),
    /// Causal paths and delays of free-form messages by cross-correlating their timing
    /// (Project 5 convolution, its paper §5.2).
    Convolution(ConvolutionArgs),
    /// Probabilistic causal trees of free-form messages, calls and returns alike (WAP5
    /// message linking, its paper §5).
    Linking(LinkingArgs),
    /// Flows, suspect scores and root-cause differences (self-propelled instrumentation):
    /// `flows` and `diff`.
    #[command(flatten)]
    Flows(FlowsCmd),
}

/// A clap value parser for an enum the library names ([`Choice`]): the help lists its names.
pub fn choice<T: Choice + Clone + Send + Sync>() -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(T::names())
        .map(|s| T::from_name(&s).expect("clap offered only these names"))
}

/// Runs `p5 analyze …` with `progress` (the spinner for the binary).
pub fn run_with(args: &AnalyzeArgs, progress: &mut dyn FnMut(Progress)) -> anyhow::Result<()> {
    let r = match &args.cmd {
        AnalyzeCmd::Maketrace(a) => files::maketrace(a, progress),
        AnalyzeCmd::Score(a) => files::score(a),
        AnalyzeCmd::Convert(a) => files::convert(a, progress),
        AnalyzeCmd::Show(a) => files::show(a),
        AnalyzeCmd::Import(a) => files::import(a, progress),
        AnalyzeCmd::Nesting(a) => paths::nesting(a, progress),
        AnalyzeCmd::Convolution(a) => paths::convolution(a, progress),
        AnalyzeCmd::Linking(a) => paths::linking(a, progress),
        AnalyzeCmd::Flows(a) => flows::run(a, progress),
    };
    progress(Progress::Done);
    r
}

/// Runs `p5 analyze …` with a spinner that appears only when an operation has been running
/// for more than a second.
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
    let result = run_with(args, &mut on_progress);
    done.store(true, Ordering::Relaxed);
    let _ = shower.join();
    bar.finish_and_clear();
    result
}
