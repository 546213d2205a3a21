//! `p5`: the umbrella command. Thin: parses arguments and calls library functions.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "p5", version, about = "p5: one synchronized picture of a distributed program")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Build the bundled sample (a multi-threaded TCP client/server in C), record it with a log
    /// server, and print a summary of the recorded session.
    Demo(p5_cli::demo::DemoArgs),
    /// Run a log server in the foreground (the same server as `p5-logserver`, default
    /// options; use `p5-logserver` for all of them).
    Logserver {
        /// Address to listen on.
        #[arg(long, default_value = p5_logserver::config::DEFAULT_LISTEN)]
        listen: String,
        /// Store directory.
        #[arg(long, default_value = p5_logserver::config::DEFAULT_STORE)]
        store: PathBuf,
    },
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
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("P5_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Demo(args) => p5_cli::demo::run(&args),
        Cmd::Inspect { dir, json } => p5_cli::inspect(&dir, json),
        Cmd::Logserver { listen, store } => p5_logserver::run(p5_logserver::ServerConfig {
            listen,
            store,
            ..Default::default()
        })
        .map_err(Into::into),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("p5: {e:#}");
            ExitCode::FAILURE
        }
    }
}
