//! `p5`: the umbrella command. Thin: parses arguments and calls library functions.

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
    /// Build the bundled sample (a multi-threaded TCP client/server in C), record it with a log
    /// server, and print a summary of the recorded session.
    Demo(p5_cli::demo::DemoArgs),
    /// Run a log server (the same as `p5-logserver`, with the same options and subcommands).
    Logserver(p5_logserver::cli::Cli),
    /// Merge a session store into SQLite (default) or PostgreSQL: clock synchronization with
    /// drift, send/receive matching, intervals and states for the views.
    Merge(p5_merge::MergeArgs),
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
        Cmd::Logserver(_) => "info",
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
        Cmd::Demo(args) => p5_cli::demo::run(&args),
        Cmd::Inspect { dir, json } => p5_logserver::cli::inspect(&dir, json),
        Cmd::Logserver(cli) => p5_logserver::cli::run(cli),
        Cmd::Merge(args) => p5_merge::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if p5_logserver::cli::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("p5: {e:#}");
            ExitCode::FAILURE
        }
    }
}
