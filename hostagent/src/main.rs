//! `hostagent`: parses the command line ([`cli`]) and runs an agent or `hostagent ctl`.

mod cli;

use clap::Parser as _;
use cli::{Cli, Command};

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let res = match cli.command {
        Some(Command::Ctl { agent, json, words }) => cli::run_ctl(&agent, json, &words),
        None => cli::run(cli.agent),
    };
    match res {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            let mut line = e.to_string();
            let mut cause = std::error::Error::source(&e);
            while let Some(c) = cause {
                line.push_str(&format!(": {c}"));
                cause = c.source();
            }
            eprintln!("hostagent: {line}");
            std::process::ExitCode::FAILURE
        }
    }
}
