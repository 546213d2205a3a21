//! `p5-logserver`: the p5 log server binary. Parses the command line ([`cli`]) and calls the
//! library.

mod cli;

use clap::Parser as _;
use cli::{Cli, is_broken_pipe, run};
use std::io::{IsTerminal as _, Write as _};
use std::process::ExitCode;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("P5_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // The error and its causes, one line.
            let mut line = e.to_string();
            let mut cause = std::error::Error::source(&e);
            while let Some(c) = cause {
                line.push_str(&format!(": {c}"));
                cause = c.source();
            }
            let _ = writeln!(std::io::stderr(), "p5-logserver: error: {line}");
            ExitCode::FAILURE
        }
    }
}
