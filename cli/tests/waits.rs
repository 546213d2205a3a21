//! Waiting is not calculating (issue 14 item 3): a Python and a Java program, instrumented by
//! p5-instrument and recorded with `p5 record`, wait on idle sockets with timeouts — a
//! selector's select and `select.select` in Python, asyncio's event loop sleeping (its
//! selector, which no instrumented call site reaches), a JDK `Selector` in Java — and each
//! wait becomes a `waiting` state in the merged session, as long as its timeout. The Java
//! client's clock pings reach the store as two-way samples (the Python one's: `python_kv`).

mod two_way;

use p5_tracedb::domain::ThreadState;
use p5_tracedb::read;
use p5_wire::hello::RuntimeKind;
use std::path::{Path, PathBuf};
use std::process::Command;

const MS: i64 = 1_000_000;

fn here() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/waits")
}

/// Instruments `file` (from `tests/waits`) into `dir/out`; returns the output directory.
fn instrument(dir: &Path, file: &str) -> PathBuf {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::copy(here().join(file), src.join(file)).unwrap();
    let out = dir.join("out");
    let report = p5_instrument::run(&p5_instrument::Options {
        paths: vec![src],
        out: Some(out.clone()),
        ..p5_instrument::Options::default()
    })
    .unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    out
}

/// Runs `cmd` under `p5 record` into `dir/store`; returns its stdout.
fn record(dir: &Path, cmd: &[&str], env: &[(&str, &Path)]) -> String {
    let mut c = Command::new(env!("CARGO_BIN_EXE_p5"));
    c.args(["record", "--no-agent", "--session", "waits", "--store"])
        .arg(dir.join("store"))
        .arg("--")
        .args(cmd);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout
}

/// The durations of the session's `waiting` states, in ns, and its sensors' names.
fn waiting_spans(dir: &Path) -> (Vec<i64>, Vec<String>) {
    let url = format!("sqlite:{}", dir.join("store/p5.sqlite").display());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let db = read::Reader::open(&p5_tracedb::DbUrl::parse(&url).unwrap())
            .await
            .unwrap();
        let s = read::sessions(&db).await.unwrap().remove(0);
        let names = ThreadState::NAMES;
        let states = read::states(&db, s.id, names).await.unwrap();
        let k = names
            .iter()
            .position(|n| *n == ThreadState::Waiting.name())
            .unwrap();
        let waits = states
            .iter()
            .filter(|r| r.state as usize == k)
            .map(|r| r.t_end - r.t_start)
            .collect();
        let sensors = read::sensors(&db, s.id).await.unwrap();
        (waits, sensors.into_iter().map(|s| s.name).collect())
    })
}

#[test]
fn python_selects_and_asyncio_idle_are_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let out = instrument(dir.path(), "waits.py");
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("../clients/python");
    let script = out.join("waits.py");
    let stdout = record(
        dir.path(),
        &["python3", script.to_str().unwrap()],
        &[("PYTHONPATH", &client)],
    );
    assert!(stdout.contains("ready 0"), "{stdout}");
    let (waits, sensors) = waiting_spans(dir.path());
    // The event loop's waits are under the client's own sensor, which has a name.
    assert!(
        sensors.iter().any(|n| n == "p5:python:selectors.select"),
        "{sensors:?}"
    );
    // The instrumented functions are named by the table the module registered (no manifest).
    for f in ["idle_waits", "pause", "main"] {
        assert!(sensors.iter().any(|n| n == f), "{f}: {sensors:?}");
    }
    // The two instrumented 50 ms selects, and the event loop's 150 ms wait.
    let long = |from: i64| {
        waits
            .iter()
            .filter(|&&d| d >= from && d < 2_000 * MS)
            .count()
    };
    assert!(long(45 * MS) >= 3, "waiting spans (ns): {waits:?}");
    assert!(long(140 * MS) >= 1, "asyncio's idle loop: {waits:?}");
}

#[test]
fn java_selector_selects_are_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let out = instrument(dir.path(), "Waits.java");
    let classes = two_way::compile_java(dir.path(), &[&out.join("Waits.java")]);
    let cp = classes.to_str().unwrap();
    let stdout = record(dir.path(), &["java", "-cp", cp, "Waits"], &[]);
    assert!(stdout.contains("ready 0"), "{stdout}");
    let (waits, sensors) = waiting_spans(dir.path());
    // `main` is named by the table the class registered (no manifest).
    assert!(sensors.iter().any(|n| n == "Waits.main"), "{sensors:?}");
    // Two 50 ms selects on an idle channel, and the selectNow (no time to speak of).
    let long = waits
        .iter()
        .filter(|&&d| (45 * MS..2_000 * MS).contains(&d))
        .count();
    assert_eq!(long, 2, "waiting spans (ns): {waits:?}");
    assert_eq!(waits.len(), 3, "waiting spans (ns): {waits:?}");
    two_way::assert_two_way_samples(&dir.path().join("store"), "waits", RuntimeKind::Java, 1);
}
