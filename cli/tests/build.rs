//! The README's main command must not rebuild what is already built (issue 14 item 8).
//!
//! `p5 demo` in a source checkout builds `libp5_runtime.a` when it is not beside the binary
//! (`p5_instrument::runtime::static_lib`). Built as `-p p5-runtime` alone, the runtime's
//! dependencies got other features than in `p5`'s own build, the library's unhashed output
//! was overwritten, and every later `cargo run -p p5-cli` recompiled the runtime, the host
//! agent and `p5`. Here: after the build `p5` runs for the runtime, `cargo build -p p5-cli`
//! compiles nothing of p5.

use std::path::PathBuf;
use std::process::Command;

/// `target/<profile>` of this test run.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(|p| p.parent()).unwrap().to_path_buf()
}

fn cargo(args: &[&str]) -> std::process::Output {
    let profile = profile_dir();
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(args)
        .env("CARGO_TARGET_DIR", profile.parent().unwrap())
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if profile.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    cmd.output().expect("run cargo")
}

#[test]
fn building_the_runtime_for_p5_leaves_p5_fresh() {
    let args = p5_instrument::runtime::runtime_build_args("p5");
    let out = cargo(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = cargo(&["build", "-p", "p5-cli", "--message-format=json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut rebuilt = Vec::new();
    let mut seen = 0;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["reason"] != "compiler-artifact" {
            continue;
        }
        let name = v["target"]["name"].as_str().unwrap_or_default().to_owned();
        seen += 1;
        if v["fresh"] != true {
            rebuilt.push(name);
        }
    }
    assert!(seen > 10, "cargo reported {seen} artifacts");
    assert!(
        rebuilt.is_empty(),
        "rebuilt after the runtime's build: {rebuilt:?}"
    );
}
