//! Build integration: where the p5 runtime's C header and static library are, for
//! `--cflags` and `--libs`, and the `p5.h` copy written into C/C++ output trees.
//!
//! The header is embedded in the binary. The library is searched as `p5` does it:
//! `$P5_RUNTIME_LIB`, then beside the running executable (a cargo build puts both in
//! `target/<profile>/`) unless, in a source tree, it is older than the runtime's sources;
//! then — when run from the source tree — built with `cargo build -p p5-runtime` and searched
//! again.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The C header `p5.h`.
pub const HEADER: &str = include_str!("../../runtime/include/p5.h");
/// Link flags a C program needs besides the library itself.
pub const LINK_FLAGS: &str = "-lpthread -ldl -lm -lrt";
/// Name of the header directory written into output trees.
pub const INCLUDE_DIR: &str = "p5-include";
const LIB_NAME: &str = "libp5_runtime.a";

/// Errors locating the runtime.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// Nothing found.
    #[error("{0}")]
    NotFound(String),
    /// The C compiler could not be run or failed.
    #[error("{0}")]
    Compile(String),
    /// I/O while preparing the header.
    #[error("cannot write the p5 header to {path}: {source}")]
    Io {
        /// Where.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

fn source_tree() -> Option<PathBuf> {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    ws.join("runtime")
        .join("include")
        .join("p5.h")
        .is_file()
        .then_some(ws)
}

/// The directory holding `p5.h`: the source tree's `runtime/include`, or a copy written
/// beside the executable.
pub fn include_dir() -> Result<PathBuf, RuntimeError> {
    if let Some(ws) = source_tree() {
        let d = ws.join("runtime").join("include");
        return Ok(d.canonicalize().unwrap_or(d));
    }
    let exe = std::env::current_exe().map_err(|e| RuntimeError::NotFound(e.to_string()))?;
    let dir = exe
        .parent()
        .map(|p| p.join(INCLUDE_DIR))
        .unwrap_or_else(|| PathBuf::from(INCLUDE_DIR));
    write_header(&dir)?;
    Ok(dir)
}

/// Writes `p5.h` into `dir` (created if needed).
pub fn write_header(dir: &Path) -> Result<(), RuntimeError> {
    let io = |source| RuntimeError::Io {
        path: dir.display().to_string(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    std::fs::write(dir.join("p5.h"), HEADER).map_err(io)
}

/// The path of `libp5_runtime.a`, building it if this is a source checkout.
pub fn static_lib() -> Result<PathBuf, RuntimeError> {
    if let Some(p) = std::env::var_os("P5_RUNTIME_LIB") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(RuntimeError::NotFound(format!(
                "P5_RUNTIME_LIB={} is not a file",
                p.display()
            )))
        };
    }
    let exe = std::env::current_exe().map_err(|e| RuntimeError::NotFound(e.to_string()))?;
    let exe_dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    // Beside the executable (an install, or `target/<profile>` after a build of the runtime),
    // in `deps/` (where a test or workspace build leaves it: a `p5` run by the tests links
    // that one instead of rebuilding it under another test's link), or one level up (a
    // test executable in `deps/`).
    let candidates = [
        exe_dir.join(LIB_NAME),
        exe_dir.join("deps").join(LIB_NAME),
        exe_dir.join("..").join(LIB_NAME),
    ];
    let find = || candidates.iter().find(|p| p.is_file()).cloned();
    // In a source checkout a library beside the executable may predate the runtime's sources
    // (a pull, a merge): then it is built again.
    let in_tree = source_tree();
    let fresh = |p: &PathBuf| {
        in_tree
            .as_ref()
            .is_none_or(|ws| !older_than_sources(p, &library_sources(ws, "runtime")))
    };
    if let Some(p) = find().filter(fresh) {
        return Ok(p);
    }
    let Some(ws) = in_tree else {
        return Err(RuntimeError::NotFound(format!(
            "{LIB_NAME} not found next to {}; set P5_RUNTIME_LIB",
            exe.display()
        )));
    };
    let release = exe_dir.components().any(|c| c.as_os_str() == "release");
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    let exe_name = exe.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    cmd.current_dir(&ws).args(runtime_build_args(exe_name));
    if release {
        cmd.arg("--release");
    }
    match cmd.status() {
        Ok(s) if s.success() => {}
        Ok(s) => {
            return Err(RuntimeError::NotFound(format!(
                "cargo build -p p5-runtime failed ({s})"
            )));
        }
        Err(e) => {
            return Err(RuntimeError::NotFound(format!(
                "cannot run cargo to build the runtime: {e}"
            )));
        }
    }
    find().ok_or_else(|| {
        RuntimeError::NotFound(format!(
            "{LIB_NAME} still missing after the build in {}",
            exe_dir.display()
        ))
    })
}

/// What a library crate of the workspace (`runtime`, `preload`) is built from: its `src`,
/// `include` and `csrc`, its build script and manifest, and the runtime's, the wire
/// format's and the receive stamps' (`rxstamp`) sources it links — not its tests, benches or documents, whose changes cargo
/// would not rebuild it for.
pub fn library_sources(ws: &Path, krate: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for k in [krate, "runtime", "wire", "rxstamp"] {
        let d = ws.join(k);
        for part in ["src", "include", "csrc", "build.rs", "Cargo.toml"] {
            let p = d.join(part);
            if p.exists() && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// True if one of `paths` (files, or directories walked recursively) was modified after
/// `lib`: a library built from older sources (or no library).
pub fn older_than_sources(lib: &Path, paths: &[PathBuf]) -> bool {
    let Ok(built) = lib.metadata().and_then(|m| m.modified()) else {
        return true;
    };
    let mut stack: Vec<PathBuf> = Vec::new();
    for p in paths {
        match p.metadata() {
            Ok(m) if m.is_dir() => stack.push(p.clone()),
            Ok(m) if m.modified().is_ok_and(|t| t > built) => return true,
            _ => {}
        }
    }
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                if e.file_name() != "target" && e.file_name() != "node_modules" {
                    stack.push(path);
                }
            } else if meta.modified().is_ok_and(|m| m > built) {
                return true;
            }
        }
    }
    false
}

/// The `cargo` arguments that build `libp5_runtime.a` for the executable `exe_name`.
///
/// Built alone (`-p p5-runtime`), the runtime's dependencies get other features than in the
/// executable's own build, and the library's unhashed output (`deps/libp5_runtime.a`) is then
/// rebuilt by every later `cargo run` of the executable — which rebuilds the executable too.
/// Building the runtime together with the package of the running executable gives both the
/// features of that build, so nothing is compiled twice (`p5 demo` after
/// `cargo run --release -p p5-cli`).
pub fn runtime_build_args(exe_name: &str) -> Vec<&'static str> {
    let mut args = vec!["build", "-q", "-p", "p5-runtime"];
    match exe_name {
        "p5" | "p5-loadgen" => args.extend(["-p", "p5-cli"]),
        "p5-instrument" => args.extend(["-p", "p5-instrument"]),
        _ => {}
    }
    args
}

/// Compiles C sources into `out` with the runtime library `lib` linked in (`$CC`, default
/// `gcc`, with `-O2 -g`). `include_dir` must hold `p5.h`.
pub fn compile_c(
    sources: &[&Path],
    include_dir: &Path,
    out: &Path,
    lib: &Path,
) -> Result<(), RuntimeError> {
    let cc = std::env::var_os("CC").unwrap_or_else(|| "gcc".into());
    let status = Command::new(&cc)
        .args(["-O2", "-g", "-pthread", "-Wall"])
        .arg("-I")
        .arg(include_dir)
        .args(sources)
        .arg(lib)
        .args(LINK_FLAGS.split_whitespace())
        .arg("-o")
        .arg(out)
        .status()
        .map_err(|e| {
            RuntimeError::Compile(format!(
                "cannot run the C compiler {cc:?} (install gcc): {e}"
            ))
        })?;
    if !status.success() {
        return Err(RuntimeError::Compile(format!(
            "the C compiler failed ({status}) building {}",
            out.display()
        )));
    }
    Ok(())
}

/// The runtime dependency line for an instrumented crate's `Cargo.toml`.
pub fn cargo_dependency() -> String {
    match source_tree().and_then(|ws| ws.join("runtime").canonicalize().ok()) {
        Some(p) => format!("p5-runtime = {{ path = {:?} }}", p.display().to_string()),
        None => format!("p5-runtime = \"{}\"", env!("CARGO_PKG_VERSION")),
    }
}

/// Adds the runtime to a crate manifest's `[dependencies]` (none if already there or not a
/// package manifest).
pub fn add_cargo_dependency(toml: &str) -> Option<String> {
    if !toml.contains("[package]") || toml.contains("p5-runtime") {
        return None;
    }
    let dep = cargo_dependency();
    let mut out = String::with_capacity(toml.len() + dep.len() + 16);
    let mut done = false;
    for line in toml.split_inclusive('\n') {
        out.push_str(line);
        if !done && line.trim() == "[dependencies]" {
            if !line.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&dep);
            out.push('\n');
            done = true;
        }
    }
    if !done {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("\n[dependencies]\n");
        out.push_str(&dep);
        out.push('\n');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    #[test]
    fn a_library_older_than_a_source_is_stale() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("runtime").join("src");
        std::fs::create_dir_all(&src).unwrap();
        let file = src.join("lib.rs");
        std::fs::write(&file, "// source").unwrap();
        let lib = dir.path().join("libp5_runtime.a");
        std::fs::write(&lib, "!<arch>").unwrap();
        let set = |p: &Path, t: SystemTime| {
            std::fs::File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(t)
                .unwrap()
        };
        let now = SystemTime::now();
        set(&file, now - Duration::from_secs(60));
        set(&lib, now);
        let bench = dir.path().join("runtime").join("benches");
        std::fs::create_dir_all(&bench).unwrap();
        std::fs::write(bench.join("b.rs"), "// a bench").unwrap();
        let roots = library_sources(dir.path(), "runtime");
        assert_eq!(roots, std::slice::from_ref(&src));
        assert!(!older_than_sources(&lib, &roots));
        // A bench or a document edited later does not make the library stale; a source does.
        set(&bench.join("b.rs"), now + Duration::from_secs(60));
        assert!(!older_than_sources(&lib, &roots));
        set(&file, now + Duration::from_secs(60));
        assert!(older_than_sources(&lib, &roots));
        assert!(older_than_sources(&dir.path().join("missing.a"), &roots));
    }
}
