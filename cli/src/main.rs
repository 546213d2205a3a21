//! `p5`: the umbrella command. Thin: parses arguments and calls library functions.

// The command lines of `hostagent` and `p5-logserver`, shared with those binaries: front code
// that lives with each binary, included here rather than exported by the libraries.
#[path = "../../hostagent/src/cli.rs"]
mod hostagent_cli;
#[path = "../../logserver/src/cli.rs"]
mod logserver_cli;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "p5",
    version,
    about = "p5: one synchronized picture of a distributed program"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run the three CoSMoS case studies (cascaded client/server, small TCP messages with and
    /// without Nagle, the password cracker): instrument, build, record, merge, and serve the
    /// web view.
    Demo(p5_cli::demo::DemoArgs),
    /// Record a program: start a log server and the host agent, run CMD with the runtime's
    /// environment, wait for it and its children, merge into SQLite, print a summary.
    Record(p5_cli::record::RecordArgs),
    /// Run a host agent or steer an agent tree (the same as `hostagent`).
    Hostagent(hostagent_cli::Cli),
    /// Run a log server (the same as `p5-logserver`, with the same options and subcommands).
    Logserver(logserver_cli::Cli),
    /// Merge a session store into SQLite (default) or PostgreSQL: clock synchronization with
    /// drift, send/receive matching, intervals and states for the views.
    Merge(p5_cli::merge::MergeArgs),
    /// Serve the trace viewer (Gantt, messages, scheduling, host load, statistics,
    /// click-back to source) for a merged database.
    Web(p5_cli::web::WebArgs),
    /// Causal paths from message traces: Project 5 nesting (nesting), the ground-truth
    /// generator (maketrace), accuracy scores (score), import, show and convert.
    Analyze(p5_cli::analyze::AnalyzeArgs),
    /// Export a merged session to another tool's format: `p5 export perfetto --db URL
    /// --session NAME -o FILE.pftrace` for Perfetto's UI and trace processor.
    Export(p5_cli::export::ExportArgs),
    /// Summarize a session store (sessions, processes, streams, events per sensor, offsets).
    Inspect {
        /// Store directory.
        dir: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The log server reports connections at info level; the other commands only warnings.
    let level = match cli.cmd {
        Cmd::Logserver(_) | Cmd::Hostagent(_) | Cmd::Web(_) => "info",
        _ => "warn",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("P5_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level)),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.cmd {
        Cmd::Record(args) => match p5_cli::record::run(&args) {
            Ok(code) => return ExitCode::from(u8::try_from(code).unwrap_or(1)),
            Err(e) => Err(e),
        },
        Cmd::Hostagent(cli) => match cli.command {
            Some(hostagent_cli::Command::Ctl { agent, json, words }) => {
                hostagent_cli::run_ctl(&agent, json, &words).map_err(Into::into)
            }
            None => hostagent_cli::run(cli.agent).map_err(Into::into),
        },
        Cmd::Demo(args) => p5_cli::demo::run(&args),
        Cmd::Inspect { dir, json } => logserver_cli::inspect(&dir, json).map_err(Into::into),
        Cmd::Logserver(cli) => logserver_cli::run(cli).map_err(Into::into),
        Cmd::Merge(args) => p5_cli::merge::run(&args),
        Cmd::Web(args) => p5_cli::web::run(&args),
        Cmd::Analyze(args) => p5_cli::analyze::run(&args),
        Cmd::Export(args) => p5_cli::export::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if logserver_cli::is_broken_pipe(e.as_ref()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("p5: {e:#}");
            ExitCode::FAILURE
        }
    }
}
