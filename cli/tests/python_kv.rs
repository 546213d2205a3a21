//! A Python key-value server and client, instrumented by p5-instrument and recorded with
//! `p5 record`: every request and every reply is a matched message (issue 14 item 1). The
//! server's connection is accepted inside `socketserver`, which the runtime never sees, and
//! the client's comes from `socket.create_connection`: the runtime describes each socket the
//! first time a recorded call uses it. Both processes ping the log server and echo its answers:
//! two-way clock samples, consistent with one another (alone on a host: `client_clocks`).

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
