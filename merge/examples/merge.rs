//! `cargo run -p p5-merge --example merge -- STORE [--db URL] …`: merges and prints the
//! summaries, without the umbrella binary's progress bar (handy while developing the merge
//! stage).

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
    let args = Cli::parse().args;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    for s in rt.block_on(p5_merge::merge_store(&args))? {
        print!("{}", p5_merge::render(&s));
    }
    Ok(())
}
