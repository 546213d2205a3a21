//! The local host agent as a child process (`p5 hostagent …`), for `p5 record` and `p5 demo`:
//! started beside the recorded programs, stopped with SIGTERM so it flushes, closes its streams
//! and waits for the log server's acknowledgements.
//!
//! Given processes to watch it watches only those and what they start (`--only-listed`): by
//! itself an agent also monitors every process on the host that records with the p5 runtime,
//! which put other users' recordings into a session. For `p5 record` it runs in a process
//! group of its own, so a Ctrl-C at the terminal reaches the program but not the agent,
//! which is stopped after the program (and can record how it ended), and it is told to end
//! if `p5 record` dies.

use anyhow::Context as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How to start the agent.
#[derive(Debug, Clone, Copy)]
pub struct AgentOptions<'a> {
    /// The log server (HOST:PORT).
    pub logserver: &'a str,
    /// Session name for the agent's Hello.
    pub session: &'a str,
    /// Sampling interval, e.g. `100ms`.
    pub interval: &'a str,
    /// Processes to monitor (with every process they start). None: every process on the
    /// host that records with the p5 runtime, found by the agent itself.
    pub pids: &'a [u32],
    /// Record kernel scheduling and interrupts (OS monitor).
    pub sched: bool,
    /// Directory for the agent's spool while the log server is unreachable.
    pub spool_dir: &'a Path,
}

/// Starts `p5 hostagent` with these options (this same executable), quiet but for errors.
pub fn spawn(o: &AgentOptions<'_>) -> anyhow::Result<Child> {
    spawn_with(o, false)
}

/// [`spawn`]; with `tied`, the agent runs in a process group of its own (a Ctrl-C at the
/// terminal does not reach it) and gets SIGTERM when the calling thread ends (this process
/// killed), so it never outlives the recording. `tied` only from a thread that lives as
/// long as the recording (the main thread).
pub fn spawn_with(o: &AgentOptions<'_>, tied: bool) -> anyhow::Result<Child> {
    use std::os::unix::process::CommandExt as _;
    let exe = std::env::current_exe().context("cannot locate the p5 executable")?;
    let mut cmd = Command::new(exe);
    cmd.args([
        "hostagent",
        "--logserver",
        o.logserver,
        "--session",
        o.session,
    ])
    .args(["--interval", o.interval])
    .arg("--spool-dir")
    .arg(o.spool_dir)
    .env("P5_LOG", "error")
    .stdin(Stdio::null())
    .stdout(Stdio::null());
    for pid in o.pids {
        cmd.args(["--pid", &pid.to_string()]);
    }
    if !o.pids.is_empty() {
        cmd.arg("--only-listed");
    }
    if tied {
        cmd.process_group(0);
        // SAFETY: prctl is async-signal-safe and touches only the child being started.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0);
                Ok(())
            });
        }
    }
    if o.sched {
        // The agent says when its OS monitor records; see `wait_ready`.
        cmd.args(["--sched", "--print-ready"])
            .stdout(Stdio::piped());
    }
    cmd.spawn().context("cannot start the host agent")
}

/// Waits until an agent started with `sched` says its OS monitor records (tracing is on for
/// the monitored processes, or /proc sampling runs), at most `limit`. Returns the monitor's
/// state, or None (no such line in time, or the agent ended). The agent's stdout is read to
/// its end by a thread.
pub fn wait_ready(c: &mut Child, limit: Duration) -> Option<String> {
    use std::io::BufRead as _;
    let out = c.stdout.take()?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("p5-agent-stdout".into())
        .spawn(move || {
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { return };
                if let Some(state) = line.strip_prefix("os monitor ready: ") {
                    let _ = tx.send(state.to_owned());
                }
            }
        })
        .ok()?;
    rx.recv_timeout(limit).ok()
}

/// Waits until agent `c` catches SIGTERM (its handler is installed early in its start, so
/// [`stop`] then gets a clean shutdown that flushes what it sampled), at most `limit`.
/// Returns false if it did not in time or ended.
pub fn wait_started(c: &Child, limit: Duration) -> bool {
    let status = format!("/proc/{}/status", c.id());
    let deadline = Instant::now() + limit;
    loop {
        let Ok(text) = std::fs::read_to_string(&status) else {
            return false;
        };
        let caught = text
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .unwrap_or(0);
        if caught & (1 << (libc::SIGTERM - 1)) != 0 {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// SIGTERM, then wait up to `limit`, then SIGKILL. Returns false if it had to be killed.
pub fn stop(c: &mut Child, limit: Duration) -> bool {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = c.try_wait() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = c.kill();
    let _ = c.wait();
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn started_means_catching_sigterm() {
        let mut trapping = Command::new("sh")
            .args(["-c", "trap 'exit 0' TERM; while :; do sleep 0.05; done"])
            .spawn()
            .unwrap();
        assert!(wait_started(&trapping, Duration::from_secs(10)));
        assert!(stop(&mut trapping, Duration::from_secs(10)), "a clean stop");
        let mut plain = Command::new("sleep").arg("10").spawn().unwrap();
        assert!(!wait_started(&plain, Duration::from_millis(200)));
        let _ = plain.kill();
        let _ = plain.wait();
        assert!(!wait_started(&plain, Duration::from_secs(1)), "it ended");
    }
}
