//! What `hostagent` says when something is wrong: one line, once, saying what to do.

use crate::refusing_addr;
use std::process::Command;

#[test]
fn an_unreachable_agent_is_one_line_that_says_what_to_check() {
    let (_hold, addr) = refusing_addr();
    let out = Command::new(env!("CARGO_BIN_EXE_hostagent"))
        .args(["ctl", "--agent", &addr, "status"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert_eq!(
        lines[0].matches("Connection refused").count(),
        1,
        "{stderr}"
    );
    assert!(
        lines[0].contains(&format!("is `hostagent --listen {addr}` running?")),
        "{stderr}"
    );
}
