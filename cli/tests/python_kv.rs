//! A Python key-value server and client, instrumented by p5-instrument and recorded with
//! `p5 record`: every request and every reply is a matched message (issue 14 item 1). The
//! server's connection is accepted inside `socketserver`, which the runtime never sees, and
//! the client's comes from `socket.create_connection`: the runtime describes each socket the
//! first time a recorded call uses it. Both processes ping the log server and echo its answers:
//! two-way clock samples, consistent with one another; alone on a host of its own (a boot id of
//! its own, in a mount namespace) a Python process gets a two-way clock within its bound.

mod two_way;

use p5_wire::hello::RuntimeKind;
use std::path::Path;
use std::process::Command;

const REQUESTS: usize = 50;

#[test]
fn a_recorded_python_key_value_pair_matches_every_request_and_reply() {
    let have_python = Command::new("python3").arg("--version").output().is_ok();
    assert!(
        have_python,
        "python3 is needed (scripts/install-deps.sh installs it)"
    );
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python_kv");
    for f in ["server.py", "client.py"] {
        std::fs::copy(here.join(f), src.join(f)).unwrap();
    }
    let out = dir.path().join("out");
    let report = p5_instrument::run(&p5_instrument::Options {
        paths: vec![src.clone()],
        out: Some(out.clone()),
        ..p5_instrument::Options::default()
    })
    .unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let port_file = dir.path().join("port");
    let script = format!(
        "python3 {server} {port} & python3 {client} {port} {REQUESTS}; wait",
        server = out.join("server.py").display(),
        client = out.join("client.py").display(),
        port = port_file.display(),
    );
    let store = dir.path().join("store");
    let python_client = Path::new(env!("CARGO_MANIFEST_DIR")).join("../clients/python");
    let o = Command::new(env!("CARGO_BIN_EXE_p5"))
        .args(["record", "--no-agent", "--session", "kv", "--store"])
        .arg(&store)
        .args(["--", "sh", "-c", &script])
        .env("PYTHONPATH", &python_client)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    let n = 2 * REQUESTS;
    assert!(
        stdout.contains(&format!("requests {n} answered {n}")),
        "the client's own account: {stdout}"
    );
    // Each request and each reply: one message, matched end to end.
    assert!(
        stdout.contains(&format!(
            "messages: {} matched, 0 sends and 0 receives unmatched\n",
            2 * n
        )),
        "{stdout}"
    );
    assert!(stdout.contains("connections: 1\n"), "{stdout}");
    two_way::assert_two_way_samples(&store, "kv", RuntimeKind::Python, 2);
}

/// A Python process that reports a boot id of its own is alone in its clock domain, as on a
/// host where nothing else records: its pings alone give it a two-way clock, whose stated
/// bound holds (the truth is known: it shares the log server's real clock).
#[test]
fn a_python_process_alone_on_its_host_gets_a_two_way_clock_within_its_bound() {
    // SAFETY: geteuid cannot fail.
    assert!(
        unsafe { libc::geteuid() } == 0,
        "a mount namespace for the boot id needs root"
    );
    let dir = tempfile::tempdir().unwrap();
    let prog = dir.path().join("alone.py");
    std::fs::write(
        &prog,
        "import time, p5\nfor i in range(30):\n    p5.enter(1); time.sleep(0.05); p5.exit(1)\n",
    )
    .unwrap();
    let boot = dir.path().join("boot_id");
    std::fs::write(&boot, "0b1e9c2e-0000-4000-8000-00000000a10e\n").unwrap();
    let script = format!(
        "mount --bind {} /proc/sys/kernel/random/boot_id && exec python3 {}",
        boot.display(),
        prog.display()
    );
    let store = dir.path().join("store");
    let o = Command::new(env!("CARGO_BIN_EXE_p5"))
        .args(["record", "--no-agent", "--session", "alone", "--store"])
        .arg(&store)
        .args(["--", "unshare", "-m", "sh", "-c", &script])
        .env(
            "PYTHONPATH",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../clients/python"),
        )
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let (server, starts) = two_way::starts(&store, "alone");
    let mut args = p5_merge::MergeArgs::new(&store);
    args.db = Some(format!(
        "sqlite:{}",
        dir.path().join("again.sqlite").display()
    ));
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
        println!("at {:.1} s: error {err:.0} ns, bound ±{bound} ns", t / 1e9);
        assert!(err.abs() <= bound + 2.0, "error {err} ns, bound {bound} ns");
    }
}
