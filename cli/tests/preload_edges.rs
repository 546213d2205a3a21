//! `p5 record --preload` where unmodified programs used to lose or mislabel what they did
//! (issue 46): thread churn (every thread's ring cost its full size), socketpairs (both ends
//! unnamed, so messages were matched to their sender's own thread), processes that end with
//! `_exit`/`_Exit` (their tail was never flushed), a forked child that `exec`s at once (its
//! events stayed in a spool file nobody imported), and interpreters named after themselves
//! instead of their script (`python -m module` showed as `-m` or `python3`).

use p5_tracedb::read;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds `tests/preload/<name>.c` (plain gcc, no p5) into `dir`.
fn build(dir: &Path, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/preload/{name}.c"));
    let exe = dir.join(name);
    let st = Command::new(std::env::var("CC").unwrap_or_else(|_| "gcc".into()))
        .args(["-O2", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("gcc is needed (scripts/install-deps.sh installs it)");
    assert!(st.success(), "gcc failed for {name}");
    exe
}

/// `p5 record --preload --no-agent` of `cmd` into `dir/store`, with `TMPDIR` in `dir`;
/// returns stdout and stderr (it must succeed).
fn record(dir: &Path, cmd: &[&str]) -> (String, String) {
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_p5"))
        .args(["record", "--preload", "--no-agent", "--session", "edges"])
        .arg("--store")
        .arg(dir.join("store"))
        .arg("--")
        .args(cmd)
        .current_dir(dir)
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stdout}\n{stderr}");
    (stdout, stderr)
}

/// The merged session's processes and messages.
fn merged(dir: &Path) -> (Vec<read::Process>, Vec<read::MatchedMessage>) {
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
        (
            read::processes(&db, s.id).await.unwrap(),
            read::messages(&db, s.id).await.unwrap(),
        )
    })
}

/// The number after `label` in `text`.
fn number_after(text: &str, label: &str) -> Option<u64> {
    let at = text.find(label)? + label.len();
    text[at..]
        .split(|c: char| !c.is_ascii_digit())
        .find(|s| !s.is_empty())?
        .parse()
        .ok()
}

/// Spool files anywhere under `dir`.
fn spool_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "p5spool") {
                out.push(p);
            }
        }
    }
    out
}

/// D9 under the preload: 1,000 short threads, each with a socketpair and two recorded
/// calls, keep the process's peak resident size far below a 16 MiB ring per thread.
#[test]
fn short_threads_under_the_preload_cost_pages_not_rings() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "churn");
    let (stdout, stderr) = record(dir.path(), &[exe.to_str().unwrap(), "1000"]);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("churn "))
        .unwrap_or_else(|| panic!("{stdout}\n{stderr}"));
    eprintln!("{line}");
    let kb = number_after(line, "vmhwm_kb=").unwrap();
    assert!(
        kb < 256 * 1024,
        "peak resident size {} MB: {line}",
        kb / 1024
    );
    assert!(
        stdout.contains("messages: 1000 matched, 0 sends and 0 receives unmatched"),
        "{stdout}"
    );
}

/// D12: messages over a socketpair between two threads are matched to the other thread,
/// one thread's transfers to itself are whole messages, and a forked child's inherited end
/// pairs with its parent's; no message is received before it was sent.
#[test]
fn socketpair_messages_are_matched_between_their_ends() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "pair");
    let (stdout, stderr) = record(dir.path(), &[exe.to_str().unwrap()]);
    assert!(
        stdout.contains("pair: 2000 round trips, 100 local, 50 forked"),
        "{stdout}\n{stderr}"
    );
    let n = 2 * 2000 + 100 + 2 * 50;
    assert!(
        stdout.contains(&format!(
            "messages: {n} matched, 0 sends and 0 receives unmatched"
        )),
        "{stdout}\n{stderr}"
    );
    let (_, messages) = merged(dir.path());
    assert_eq!(messages.len(), n);
    let across = messages
        .iter()
        .filter(|m| m.send_thread != m.recv_thread)
        .count();
    assert_eq!(
        across,
        2 * 2000 + 2 * 50,
        "messages from one thread to another"
    );
    let violations = messages.iter().filter(|m| m.violation).count();
    assert_eq!(violations, 0);
}

/// D14: a process that records 40,002 calls and ends with `_exit` (or `_Exit`) right after
/// keeps all of them.
#[test]
fn exit_without_atexit_keeps_the_tail() {
    for how in ["_exit", "_Exit"] {
        let dir = tempfile::tempdir().unwrap();
        let exe = build(dir.path(), "quick_end");
        let (stdout, stderr) = record(dir.path(), &[exe.to_str().unwrap(), how, "20001"]);
        assert!(
            stdout.contains(&format!("quick_end: 20001 messages, then {how}")),
            "{stdout}\n{stderr}"
        );
        assert!(
            stdout.contains("messages: 20001 matched, 0 sends and 0 receives unmatched"),
            "{how}: {stdout}\n{stderr}"
        );
    }
}

/// D14: a forked child that records and `exec`s at once delivers its events to the log
/// server before the exec — nothing is left in a spool file, under `$TMPDIR/p5` or the
/// store — and they are in the session.
#[test]
fn a_child_that_execs_at_once_delivers_its_events() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "quick_end");
    let (stdout, stderr) = record(dir.path(), &[exe.to_str().unwrap(), "exec"]);
    let child = number_after(&stdout, "quick_end: child ").unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        stdout.contains("messages: 1 matched, 0 sends and 0 receives unmatched"),
        "{stdout}\n{stderr}"
    );
    assert!(
        !stderr.contains("spool file"),
        "nothing had to be imported: {stderr}"
    );
    assert_eq!(spool_files(dir.path()), Vec::<PathBuf>::new());
    let (procs, _) = merged(dir.path());
    assert!(
        procs.iter().any(|p| p.pid == child as i64),
        "the child {child}: {procs:?}"
    );
}

/// Issue 44 item 7: an interpreter is named after what it runs — `python3 -m MODULE` after
/// the module.
#[test]
fn a_python_module_is_named_after_itself() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("p5_named_mod.py"),
        "import socket\na, b = socket.socketpair()\na.sendall(b'ping')\nassert b.recv(4) == b'ping'\n",
    )
    .unwrap();
    let (stdout, stderr) = record(dir.path(), &["python3", "-m", "p5_named_mod"]);
    let (procs, _) = merged(dir.path());
    let names: Vec<&str> = procs.iter().map(|p| p.program.as_str()).collect();
    assert_eq!(names, ["p5_named_mod"], "{procs:?}");
    assert!(stdout.contains("messages: 1 matched"), "{stdout}\n{stderr}");
}
