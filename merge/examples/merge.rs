//! `cargo run -p p5-merge --example merge -- STORE [--db URL] …`: the `p5 merge` command
//! without the umbrella binary (handy while developing the merge stage).

use clap::Parser;

#[derive(Parser, Debug)]
struct Cli {
    #[command(flatten)]
    args: p5_merge::MergeArgs,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("P5_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    p5_merge::run(&Cli::parse().args)
}
