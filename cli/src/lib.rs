//! The `p5` umbrella command's library: each subcommand is a module with a `run` function so
//! that `main.rs` stays a thin argument parser and tests can call the same code.

pub mod demo;
pub mod runtime_lib;

use anyhow::Context as _;
use std::path::Path;

/// `p5 inspect DIR [--json]`: prints a summary of a session store.
pub fn inspect(dir: &Path, json: bool) -> anyhow::Result<()> {
    let summary = p5_logserver::inspect::inspect(dir)
        .with_context(|| format!("cannot inspect store {}", dir.display()))?;
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &summary)?;
        use std::io::Write as _;
        writeln!(out)?;
    } else {
        p5_logserver::inspect::render_text(&summary, &mut out)?;
    }
    Ok(())
}
