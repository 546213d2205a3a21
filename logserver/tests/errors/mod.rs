//! What the command line says when something is wrong: one line, once, saying what to do,
//! and a non-zero exit.

use crate::{inspect, stream_frames, write_session};
use std::process::Command;

/// Runs `p5-logserver ARGS`; returns (exit success, stdout, stderr).
fn p5_logserver(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_p5-logserver"))
        .args(args)
        .env("P5_LOG", "off")
        .output()
        .expect("run p5-logserver");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The error line of a failed command: exactly one line, and no phrase of it repeated (the
/// sign of a message that includes its cause while the printer prints the cause too).
fn one_error_line(stderr: &str) -> &str {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line: {stderr:?}");
    let line = lines[0];
    let parts: Vec<&str> = line.split(": ").collect();
    for (i, p) in parts.iter().enumerate() {
        assert!(!parts[i + 1..].contains(p), "{p:?} said twice in {line:?}");
    }
    line
}

#[test]
fn inspect_of_a_directory_that_is_not_a_store_fails_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("photos")).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello").unwrap();
    let (ok, stdout, stderr) = p5_logserver(&["inspect", dir.path().to_str().unwrap()]);
    assert!(!ok, "not a store is an error: {stdout}");
    let line = one_error_line(&stderr);
    assert!(line.contains("is not a p5 session store"), "{line}");
    assert!(
        line.contains("--store"),
        "says what to give instead: {line}"
    );

    let (ok, _, stderr) = p5_logserver(&["inspect", "/nonexistent/p5/store"]);
    assert!(!ok);
    let line = one_error_line(&stderr);
    assert_eq!(line.matches("/nonexistent/p5/store").count(), 1, "{line}");
    assert!(line.contains("No such file or directory"), "{line}");
}

#[test]
fn inspect_reads_a_damaged_recovery_log_and_reports_the_damage() {
    let dir = tempfile::tempdir().unwrap();
    let (frames, _) = stream_frames(0, 3, 10);
    write_session(dir.path(), 0xe1, "log", &frames);
    let log = dir.path().join("log/recovery.jsonl");
    let mut bytes =
        br#"{"segment":"00000000.p5seg","offset":64,"removed_bytes":3,"reason":"torn "#.to_vec();
    bytes.extend_from_slice(&[0xff, 0xfe]);
    bytes.extend_from_slice(br#"","server_run_id":1,"repaired_at_wall_ns":2}"#);
    bytes.push(b'\n');
    bytes.extend_from_slice(b"\xc3\x28 not json at all\n");
    std::fs::write(&log, &bytes).unwrap();
    let summary = inspect(dir.path()).expect("a damaged repair log does not fail inspect");
    let s = &summary.sessions[0];
    assert_eq!(s.repairs.len(), 1);
    assert_eq!(s.repairs[0].offset, 64);
    assert_eq!(
        (s.repair_log_lossy_lines, s.repair_log_unreadable_lines),
        (2, 1)
    );
    let (ok, stdout, stderr) = p5_logserver(&["inspect", dir.path().to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("2 line(s) not UTF-8"), "{stdout}");
    assert!(stdout.contains("1 line(s) not a repair"), "{stdout}");
}
