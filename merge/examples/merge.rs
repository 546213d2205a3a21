//! `cargo run -p p5-merge --example merge -- STORE [--db URL] …`: merges and prints the
//! summaries, without the umbrella binary's progress bar (handy while developing the merge
//! stage).

use clap::Parser;

/// `STORE [--db URL] [--session NAME] [--manifest DIR]...`, as `p5 merge` without `--quiet`.
#[derive(Parser, Debug)]
struct Cli {
    /// Session store directory.
    #[arg(value_name = "STORE")]
    store: std::path::PathBuf,
    /// Database (default: `sqlite:<STORE>/p5.sqlite`).
    #[arg(long, value_name = "URL")]
    db: Option<String>,
    /// Merge only this session.
    #[arg(long, value_name = "NAME")]
    session: Option<String>,
    /// Instrumentation output directory (repeatable).
    #[arg(long = "manifest", value_name = "DIR")]
    manifests: Vec<std::path::PathBuf>,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("P5_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let args = p5_merge::MergeOptions {
        store: cli.store,
        db: cli.db,
        session: cli.session,
        manifests: cli.manifests,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    for s in rt.block_on(p5_merge::merge_store(&args))? {
        print!("{}", p5_merge::render(&s));
    }
    Ok(())
}
