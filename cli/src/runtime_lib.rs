//! Finding the p5 runtime's static library (`libp5_runtime.a`) and C header for building
//! instrumented C and C++ programs.
//!
//! Search order: `$P5_RUNTIME_LIB` (a file path); the directory of the running `p5`
//! executable (a cargo build puts both in `target/<profile>/`); and, when this binary runs from
//! its source tree, `cargo build -p p5-runtime` for the same profile, then look again.

use anyhow::{Context as _, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The C header, embedded so a copied `p5` binary can still build programs.
pub const HEADER: &str = include_str!("../../runtime/include/p5.h");
/// Link flags a C program needs besides the library itself.
pub const LINK_FLAGS: &[&str] = &["-lpthread", "-ldl", "-lm", "-lrt"];
const LIB_NAME: &str = "libp5_runtime.a";

/// Returns the path of `libp5_runtime.a`, building it if this is a source checkout.
pub fn static_lib() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("P5_RUNTIME_LIB") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        bail!("P5_RUNTIME_LIB={} is not a file", p.display());
    }
    let exe = std::env::current_exe().context("cannot locate the p5 executable")?;
    let exe_dir = exe
        .parent()
        .context("the p5 executable has no directory")?
        .to_path_buf();
    // Test binaries live one level deeper, in target/<profile>/deps.
    let candidates = [exe_dir.join(LIB_NAME), exe_dir.join("..").join(LIB_NAME)];
    if let Some(p) = candidates.iter().find(|p| p.is_file()) {
        return Ok(p.clone());
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    if !workspace.join("Cargo.toml").is_file() {
        bail!(
            "{LIB_NAME} not found next to {} and no source tree to build it from; set P5_RUNTIME_LIB",
            exe.display()
        );
    }
    let release = exe_dir.components().any(|c| c.as_os_str() == "release");
    eprintln!("building {LIB_NAME} (cargo build -p p5-runtime)...");
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(&workspace)
        .args(["build", "-p", "p5-runtime"]);
    if release {
        cmd.arg("--release");
    }
    let status = cmd
        .status()
        .context("cannot run cargo to build the runtime")?;
    if !status.success() {
        bail!("cargo build -p p5-runtime failed ({status})");
    }
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .with_context(|| {
            format!(
                "{LIB_NAME} still missing after the build in {}",
                exe_dir.display()
            )
        })
}

/// Compiles C sources into `out` with the runtime linked in. `include_dir` must hold `p5.h`.
pub fn compile_c(
    sources: &[&Path],
    include_dir: &Path,
    out: &Path,
    lib: &Path,
) -> anyhow::Result<()> {
    let cc = std::env::var_os("CC").unwrap_or_else(|| "gcc".into());
    let status = Command::new(&cc)
        .args(["-O2", "-g", "-pthread", "-Wall"])
        .arg("-I")
        .arg(include_dir)
        .args(sources)
        .arg(lib)
        .args(LINK_FLAGS)
        .arg("-o")
        .arg(out)
        .status()
        .with_context(|| format!("cannot run the C compiler {cc:?} (install gcc)"))?;
    if !status.success() {
        bail!(
            "the C compiler failed ({status}) building {}",
            out.display()
        );
    }
    Ok(())
}
