//! What `libp5_preload.so` costs a program: the same C program (`calls.c`: send+recv pairs
//! on a socketpair, write/read on /dev/null and /dev/zero, in alternating batches of 1000)
//! run bare and with the preload, once each; prints nanoseconds per call in each kind's
//! fastest batch (the machine is shared: the minimum filters out other processes' turns) and
//! the difference against the budgets (≤ 1 µs per interposed socket call, ≤ 50 ns per
//! non-socket read/write). The preloaded run records in `P5_DISCARD` mode (rings drained,
//! nothing kept), so the number is the interposer and the runtime's recording path, not
//! delivery.
//!
//! Two more runs say where the cost comes from: the preload with `P5_DISABLE=1` (the
//! interposer's own path: no runtime, no thread), and the bare program with one idle thread
//! (`idle_thread.c`) sharing its descriptor table: the kernel then counts references on every
//! file a system call uses (about 45 ns per read here). The runtime's flusher takes a table of
//! its own (`p5_runtime::fdtable`), so a recording single-threaded program keeps the fast path.
//!
//! `cargo bench -p p5-preload --bench cost` (`P5_BENCH_CALLS=N`, default 200000 per kind).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    // `cargo test --benches` runs bench binaries without `--bench`: keep that quick.
    if !std::env::args().any(|a| a == "--bench") {
        println!("cost: run with `cargo bench -p p5-preload --bench cost`");
        return;
    }
    let n: u64 = std::env::var("P5_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let lib = library();
    let dir = tempfile_dir();
    let exe = dir.join("calls");
    let idle = dir.join("libidle.so");
    gcc(&["-O2", "-o"], &exe, "calls.c");
    gcc(&["-O2", "-shared", "-fPIC", "-o"], &idle, "idle_thread.c");
    let bare = run(&exe, n, &[], &dir);
    let pre = run(&exe, n, &[("LD_PRELOAD", &lib)], &dir);
    let off = run(
        &exe,
        n,
        &[("LD_PRELOAD", &lib), ("P5_DISABLE", Path::new("1"))],
        &dir,
    );
    let threaded = run(&exe, n, &[("LD_PRELOAD", &idle)], &dir);
    println!("preload cost, {n} calls of each kind, one run each (ns per call, fastest batch):");
    for (what, i, budget) in [
        ("socket send/recv", 0, 1000.0),
        ("file read/write", 1, 50.0),
    ] {
        let added = pre[i] - bare[i];
        let verdict = if added <= budget { "met" } else { "NOT MET" };
        println!(
            "  {what:<18} bare {:>7.1}  preloaded {:>7.1}  added {:>6.1}  (budget {budget}: {verdict})",
            bare[i], pre[i], added
        );
        println!(
            "  {:<18} interposer alone (P5_DISABLE=1) +{:.1}; bare with an idle thread +{:.1}; \
             preloaded vs that +{:.1}",
            "",
            off[i] - bare[i],
            threaded[i] - bare[i],
            pre[i] - threaded[i]
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn gcc(flags: &[&str], out: &Path, src: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("benches")
        .join(src);
    let st = Command::new("gcc")
        .args(flags)
        .arg(out)
        .arg(&src)
        .arg("-lpthread")
        .status()
        .expect("gcc");
    assert!(st.success(), "gcc failed on {}", src.display());
}

/// Runs the program once; returns (ns per socket call, ns per file call).
fn run(exe: &Path, n: u64, env: &[(&str, &Path)], dir: &Path) -> [f64; 2] {
    let mut c = Command::new(exe);
    c.arg(n.to_string())
        .env("P5_DISCARD", "1")
        .env("P5_DIR", dir)
        .env_remove("P5_LOGSERVER")
        .env_remove("LD_PRELOAD");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("run calls");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let get = |key: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {text}"))
    };
    [get("socket "), get("file ")]
}

/// `libp5_preload.so` of this profile, built (or found up to date) by cargo.
fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("bench path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .to_path_buf();
    // Always asked for: a library left from an older build would be measured otherwise.
    let release = profile_dir.ends_with("release");
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.args(["build", "-q", "-p", "p5-preload"]);
    if release {
        c.arg("--release");
    }
    assert!(c.status().expect("cargo").success(), "cargo build failed");
    profile_dir.join("libp5_preload.so")
}

fn tempfile_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("p5-preload-cost-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}
