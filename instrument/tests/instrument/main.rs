//! Integration tests of p5-instrument: golden before/after cases per language
//! (`test_data/<lang>/<case>`), the command line, and end-to-end runs of instrumented programs.

mod cli;
mod clients;
mod e2e;
mod golden;
mod pypi;
mod realcode;

use std::path::{Path, PathBuf};

/// The crate's folder.
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// True if `program --version` runs.
pub fn have(program: &str) -> bool {
    std::process::Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The p5 header directory in the source tree.
pub fn include_dir() -> PathBuf {
    crate_dir().join("../runtime/include")
}

/// Reads a file as text or panics with its path (test inputs are ours).
pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The target folder shared by the Rust programs the tests build (beside the tests' own), so
/// only the first build compiles the runtime.
pub fn e2e_target_dir() -> PathBuf {
    std::env::current_exe()
        .unwrap()
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("p5-instrument-e2e"))
        .unwrap()
}
