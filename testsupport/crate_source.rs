//! Real code from crates.io for the tests and benchmarks that instrument it: included with
//! `#[path]` by `instrument`'s real-code tests, `cli`'s Lua tests and `runtime`'s Lua bench.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The unpacked source of crates.io crate `name` matching `req`, via `cargo metadata` on a
/// throw-away package in `work` that depends on it (cargo downloads it into its registry).
pub fn crate_source(name: &str, req: &str, work: &Path) -> PathBuf {
    let probe = work.join(format!("probe-{name}"));
    std::fs::create_dir_all(probe.join("src")).expect("probe dir");
    std::fs::write(
        probe.join("Cargo.toml"),
        format!(
            "[package]\nname = \"probe\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
             [dependencies]\n{name} = \"{req}\"\n[workspace]\n"
        ),
    )
    .expect("probe manifest");
    std::fs::write(probe.join("src/lib.rs"), "").expect("probe lib");
    let out = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(probe.join("Cargo.toml"))
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata for {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let pkg = meta["packages"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == name))
        .unwrap_or_else(|| panic!("{name} in cargo metadata"));
    Path::new(pkg["manifest_path"].as_str().expect("manifest_path"))
        .parent()
        .expect("crate dir")
        .to_path_buf()
}
