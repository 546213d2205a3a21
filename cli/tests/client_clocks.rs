//! The Python and Java clients alone on a host: a process that reports a boot id of its own (a
//! mount namespace binds another file over `/proc/sys/kernel/random/boot_id`) is alone in its
//! clock domain, as on a host where nothing else records, so only its own pings give it a
//! two-way clock. The stated bound must hold; the truth is known, for it shares the log
//! server's real clock. Needs root (`mount`, `unshare`).

mod two_way;

use std::path::Path;
use std::process::Command;

/// Records `cmd` under `p5 record` with a boot id of its own, merges, and checks the one
/// process's clock: two-way, and within its bound at its start and 1.5 s in.
fn alone(dir: &Path, cmd: &str, env: &[(&str, &Path)]) {
    // SAFETY: geteuid cannot fail.
    assert!(
        unsafe { libc::geteuid() } == 0,
        "a mount namespace for the boot id needs root"
    );
    let boot = dir.join("boot_id");
    std::fs::write(&boot, "0b1e9c2e-0000-4000-8000-00000000a10e\n").unwrap();
    let script = format!(
        "mount --bind {} /proc/sys/kernel/random/boot_id && exec {cmd}",
        boot.display()
    );
    let store = dir.join("store");
    let mut c = Command::new(env!("CARGO_BIN_EXE_p5"));
    c.args(["record", "--no-agent", "--session", "alone", "--store"])
        .arg(&store)
        .args(["--", "unshare", "-m", "sh", "-c", &script]);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let (server, starts) = two_way::starts(&store, "alone");
    let mut args = p5_merge::MergeOptions::new(&store);
    args.db = Some(format!("sqlite:{}", dir.join("again.sqlite").display()));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let summaries = rt.block_on(p5_merge::merge_store(&args)).expect("merge");
    let clocks = &summaries[0].clocks;
    assert_eq!(clocks.len(), 1, "{clocks:?}");
    let c = &clocks[0];
    assert_eq!(c.fit.method.name(), "two-way", "{c:?}");
    let bound = c.fit.error_bound_ns.expect("a bound") as f64;
    let truth = starts[&c.uid] as f64 - server as f64;
    for t in [0.0, 1.5e9] {
        let err = c.fit.map(t as i64) as f64 - (truth + t);
        println!(
            "{}: at {:.1} s error {err:.0} ns, bound ±{bound} ns ({} + {} samples)",
            c.program,
            t / 1e9,
            c.fit.forward,
            c.fit.backward
        );
        assert!(err.abs() <= bound + 2.0, "error {err} ns, bound {bound} ns");
    }
}

#[test]
fn a_python_process_alone_on_its_host_gets_a_two_way_clock_within_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let prog = dir.path().join("alone.py");
    std::fs::write(
        &prog,
        "import time, p5\nfor i in range(30):\n    p5.enter(1); time.sleep(0.05); p5.exit(1)\n",
    )
    .unwrap();
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("../clients/python");
    alone(
        dir.path(),
        &format!("python3 {}", prog.display()),
        &[("PYTHONPATH", &client)],
    );
}

#[test]
fn a_java_process_alone_on_its_host_gets_a_two_way_clock_within_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let prog = dir.path().join("Alone.java");
    std::fs::write(
        &prog,
        "public class Alone { public static void main(String[] a) throws Exception {\n\
         for (int i = 0; i < 30; i++) { p5.P5.enter(1); Thread.sleep(50); p5.P5.exit(1); } } }\n",
    )
    .unwrap();
    let classes = two_way::compile_java(dir.path(), &[&prog]);
    alone(
        dir.path(),
        &format!("java -cp {} Alone", classes.display()),
        &[],
    );
}
