//! `p5 record` as a user meets it (issue 46): a recording holds its own process tree and
//! nothing else; SIGINT/SIGTERM stops the program tree and still merges, a second signal
//! skips the merge and says how to merge later; a program that does not exist or cannot run
//! leaves nothing behind; every error is one line, once, saying what to do.

use p5_tracedb::read;
use std::io::Read as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LOADGEN: &str = env!("CARGO_BIN_EXE_p5-loadgen");

fn p5() -> Command {
    Command::new(env!("CARGO_BIN_EXE_p5"))
}

/// True once process `pid` announces the p5 runtime (`@p5-runtime-PID` in /proc/net/unix).
fn announced(pid: u32) -> bool {
    let name = format!("@p5-runtime-{pid}");
    std::fs::read_to_string("/proc/net/unix").is_ok_and(|t| t.lines().any(|l| l.ends_with(&name)))
}

/// Whether `pid` is still a live (not zombie) process.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

/// Waits for `c` at most `limit` (a guard against a hang, not a timed assertion); kills it
/// and fails if it did not end.
fn wait_bounded(c: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(st) = c.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > deadline {
            let _ = c.kill();
            let _ = c.wait();
            panic!("p5 record did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The merged session's processes and host-metric names, from `db`.
fn session(db: &Path) -> (Vec<read::Process>, Vec<String>) {
    let url = format!("sqlite:{}", db.display());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let db = read::Reader::open(&p5_tracedb::DbUrl::parse(&url).unwrap())
            .await
            .unwrap();
        let s = read::sessions(&db).await.unwrap().remove(0);
        let metrics = read::host_metrics(&db, s.id).await.unwrap();
        (
            read::processes(&db, s.id).await.unwrap(),
            metrics.into_iter().map(|m| m.name).collect(),
        )
    })
}

fn can_trace() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    root && Path::new("/sys/kernel/tracing/events").is_dir()
}

/// Another recording on the same host — a process recording with the p5 runtime for its own
/// session and log server, running all through — is in no part of this session: not as a
/// process, not in the host agent's per-process metrics, not in the OS monitor's
/// scheduling (with `--sched`, where tracefs is available).
#[test]
fn a_recording_holds_its_own_process_tree_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut other = Command::new(LOADGEN)
        .args([
            "--threads",
            "1",
            "--events",
            "80000",
            "--pause-us",
            "250000",
        ])
        .env("P5_SESSION", "someone-else")
        .env("P5_LOGSERVER", "127.0.0.1:9")
        .env("P5_DIR", dir.path().join("other-spool"))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !announced(other.id()) {
        assert!(
            Instant::now() < deadline,
            "the other recording never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut modes = vec![false];
    if can_trace() {
        modes.push(true);
    } else {
        eprintln!("--sched part skipped: needs root and tracefs");
    }
    for sched in modes {
        let store = dir.path().join(format!("store-{sched}"));
        let mut c = p5();
        c.args(["record", "--session", "mine", "--store"])
            .arg(&store);
        if sched {
            c.arg("--sched");
        }
        // Long enough for the agent to take samples (and find processes) many times.
        let o = c
            .args(["--", LOADGEN, "--threads", "1", "--events", "8000"])
            .args(["--pause-us", "150000"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{stderr}");
        assert!(alive(other.id()), "the other recording ran all through");
        let (procs, metrics) = session(&store.join("p5.sqlite"));
        let pid = other.id() as i64;
        assert!(
            procs.iter().all(|p| p.pid != pid),
            "sched={sched}: the other recording's process is in the session: {procs:?}"
        );
        let tag = format!(".{pid}.");
        let theirs: Vec<&String> = metrics.iter().filter(|m| m.contains(&tag)).collect();
        assert!(theirs.is_empty(), "sched={sched}: its metrics: {theirs:?}");
        // The recording's own program is there, with its metrics.
        let mine = procs
            .iter()
            .find(|p| p.program == "p5-loadgen")
            .expect("mine");
        let tag = format!(".{}.", mine.pid);
        assert!(metrics.iter().any(|m| m.contains(&tag)), "{metrics:?}");
    }
    let _ = other.kill();
    let _ = other.wait();
}

/// A program tree — a shell, an instrumented child recording slowly, and a child that
/// ignores SIGINT — started by `p5 record --sched`-less recording and stopped by SIGINT.
fn start_tree(dir: &Path, grace: &str) -> (Child, std::path::PathBuf) {
    let pids = dir.join("pids");
    let script = format!(
        "{LOADGEN} --threads 1 --events 40000000 --pause-us 100000 & echo $! >> {p}; \
         sh -c 'trap \"\" INT TERM; echo $$ >> {p}; while :; do sleep 1; done' & \
         echo $$ >> {p}; wait",
        p = pids.display()
    );
    let child = p5()
        .args([
            "record",
            "--session",
            "stopped",
            "--grace",
            grace,
            "--store",
        ])
        .arg(dir.join("store"))
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Running: the three pids written and the instrumented child recording.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n = std::fs::read_to_string(&pids).map_or(0, |s| s.lines().count());
        let tree = tree_pids(&pids);
        if n == 3 && tree.iter().any(|&p| announced(p)) {
            break;
        }
        assert!(Instant::now() < deadline, "the program tree did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    (child, pids)
}

fn tree_pids(file: &Path) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn output(mut c: Child) -> (std::process::ExitStatus, String, String) {
    let st = wait_bounded(&mut c, Duration::from_secs(120));
    let (mut out, mut err) = (String::new(), String::new());
    c.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    c.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (st, out, err)
}

/// SIGINT to `p5 record`: the signal reaches the program tree, what ignores it is killed
/// after the grace period, what was recorded is merged and summarised, and nothing of the
/// tree is left running.
#[test]
fn sigint_stops_the_program_tree_and_merges() {
    let dir = tempfile::tempdir().unwrap();
    let (child, pids) = start_tree(dir.path(), "1s");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let (_, stdout, stderr) = output(child);
    assert!(
        stderr.contains("SIGINT received: stopping the program"),
        "{stderr}"
    );
    assert!(
        stderr.contains("still running after 1 s: killed"),
        "{stderr}"
    );
    assert!(
        stdout.contains("database: sqlite:"),
        "merged: {stdout}\n{stderr}"
    );
    for p in tree_pids(&pids) {
        assert!(!alive(p), "{p} still runs");
    }
    let (procs, _) = session(&dir.path().join("store/p5.sqlite"));
    assert!(
        procs.iter().any(|p| p.program == "p5-loadgen"),
        "what the program recorded: {procs:?}"
    );
}

/// A second SIGTERM skips the merge, kills the tree at once, and names the command that
/// merges later — which works.
#[test]
fn a_second_signal_skips_the_merge_and_says_how_to_merge() {
    let dir = tempfile::tempdir().unwrap();
    let (child, pids) = start_tree(dir.path(), "60s");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let (_, stdout, stderr) = output(child);
    assert!(stderr.contains("stopping at once"), "{stderr}");
    for p in tree_pids(&pids) {
        assert!(!alive(p), "{p} still runs");
    }
    assert!(!dir.path().join("store/p5.sqlite").exists(), "{stdout}");
    let line = stderr
        .lines()
        .find(|l| l.contains("not merged; merge later with `"))
        .unwrap_or_else(|| panic!("{stderr}"));
    let cmd = line.split('`').nth(1).unwrap();
    let words: Vec<&str> = cmd.split_whitespace().collect();
    assert_eq!(&words[..2], ["p5", "merge"], "{line}");
    let o = p5().args(&words[1..]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (procs, _) = session(&dir.path().join("store/p5.sqlite"));
    assert!(procs.iter().any(|p| p.program == "p5-loadgen"), "{procs:?}");
}

/// `p5 record -- PROGRAM` for a program that does not exist, is not executable or cannot be
/// executed fails with one line saying so and leaves no store behind.
#[test]
fn a_program_that_cannot_run_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad");
    std::fs::write(&bad, "not a program").unwrap();
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&bad, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cases = [
        ("/nonexistent", "/nonexistent"),
        ("no-such-program-p5", "no-such-program-p5"),
        (plain.to_str().unwrap(), "not executable"),
        (bad.to_str().unwrap(), "cannot run"),
    ];
    for (program, says) in cases {
        let o = p5()
            .args(["record", "--", program])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{program}: {stderr}");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("p5: ")).collect();
        assert_eq!(errors.len(), 1, "{program}: {stderr}");
        assert!(errors[0].contains(says), "{program}: {stderr}");
        assert!(
            !dir.path().join("p5-store").exists(),
            "{program} left a store behind: {stderr}"
        );
    }
}

/// Errors are one line, each cause once, with what to do.
#[test]
fn errors_are_one_line_once_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = listener.local_addr().unwrap().to_string();
    drop(listener);
    let cases: [(&[&str], &str); 3] = [
        (
            &["--store", file.to_str().unwrap()],
            "choose another store with --store",
        ),
        (&["--logserver", &closed], "start one (p5 logserver"),
        (&["--grace", "soon"], "give seconds"),
    ];
    for (opts, hint) in cases {
        let o = p5()
            .arg("record")
            .args(opts)
            .args(["--", "true"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{opts:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{opts:?}: {stderr}");
        assert!(stderr.contains(hint), "{opts:?}: {stderr}");
        // No part of the message twice.
        let parts: Vec<&str> = stderr.trim().split(": ").collect();
        for (i, p) in parts.iter().enumerate() {
            assert!(!parts[i + 1..].contains(p), "{p:?} twice: {stderr}");
        }
    }
}

/// Ctrl-C at a terminal: the terminal signals the whole foreground process group, so the
/// program sees its SIGINT once (not again from `p5 record`), the host agent (in a group of
/// its own) outlives it, and the recording is merged. Run in a pseudo-terminal.
#[test]
fn ctrl_c_at_a_terminal_reaches_the_program_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    // The program counts the SIGINTs it gets for a second after the first, then says how many.
    let program = format!(
        "import signal, time\n\
         n = []\n\
         signal.signal(signal.SIGINT, lambda *a: n.append(time.time()))\n\
         open('{d}/ready', 'w').close()\n\
         while not n or time.time() - n[0] < 1.0:\n    time.sleep(0.05)\n\
         open('{d}/count', 'w').write(str(len(n)))\n"
    );
    std::fs::write(dir.path().join("prog.py"), program).unwrap();
    let driver = format!(
        "import os, pty, select, sys, time\n\
         pid, fd = pty.fork()\n\
         if pid == 0:\n    os.execv(sys.argv[1], sys.argv[1:])\n\
         out = b''\n\
         def pump(until):\n    \
             global out\n    \
             while time.time() < until:\n        \
                 if select.select([fd], [], [], 0.1)[0]:\n            \
                     try: out += os.read(fd, 65536)\n            \
                     except OSError: return\n\
         end = time.time() + 60\n\
         while not os.path.exists('{d}/ready') and time.time() < end: pump(time.time() + 0.1)\n\
         os.write(fd, b'\\x03')\n\
         pump(time.time() + 30)\n\
         sys.stdout.write(out.decode(errors='replace'))\n\
         os.waitpid(pid, 0)\n"
    );
    let o = Command::new("python3")
        .args(["-c", &driver, env!("CARGO_BIN_EXE_p5"), "record", "--store"])
        .arg(dir.path().join("store"))
        .args(["--", "python3"])
        .arg(dir.path().join("prog.py"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("the terminal sent it"), "{text}");
    let count = std::fs::read_to_string(dir.path().join("count")).unwrap_or_default();
    assert_eq!(count, "1", "SIGINTs the program got: {text}");
    assert!(text.contains("database: sqlite:"), "merged: {text}");
    assert!(!text.contains("host agent did not stop"), "{text}");
}
