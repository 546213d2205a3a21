//! The scenarios: their problem sizes, the environment each records in, and how each runs its
//! programs (servers that say `listening on HOST:PORT` first, clients run to completion).

use super::blackbox;
use super::steps::Exes;
use anyhow::{Context as _, bail};
use std::io::{BufRead as _, BufReader, Read as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Problem sizes of one run.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sizes {
    pub(super) cascade_requests: u32,
    pub(super) cascade_work: u32,
    pub(super) stream_messages: u32,
    pub(super) stream_size: u32,
    pub(super) stream_burst: u32,
    pub(super) stream_gap_us: u32,
    pub(super) stream_redraw: u32,
    pub(super) cracker_workers: u32,
    pub(super) cracker_slow: u32,
    pub(super) cracker_words: u32,
    pub(super) cracker_accounts: u32,
    pub(super) cracker_cost: u32,
    pub(super) blackbox_requests: u32,
    pub(super) blackbox_gap_us: u32,
    pub(super) blackbox_delay_us: u32,
}

pub(super) const NORMAL: Sizes = Sizes {
    cascade_requests: 2000,
    cascade_work: 20,
    stream_messages: 20_000,
    stream_size: 200,
    stream_burst: 5,
    stream_gap_us: 300,
    stream_redraw: 1000,
    cracker_workers: 4,
    cracker_slow: 3,
    cracker_words: 500,
    cracker_accounts: 24,
    cracker_cost: 40,
    blackbox_requests: 200,
    blackbox_gap_us: 500,
    blackbox_delay_us: 5000,
};

pub(super) const QUICK: Sizes = Sizes {
    cascade_requests: 150,
    cascade_work: 5,
    stream_messages: 2000,
    stream_size: 200,
    stream_burst: 5,
    stream_gap_us: 300,
    stream_redraw: 1000,
    cracker_workers: 4,
    cracker_slow: 3,
    cracker_words: 200,
    cracker_accounts: 12,
    cracker_cost: 16,
    blackbox_requests: 200,
    blackbox_gap_us: 500,
    blackbox_delay_us: 5000,
};

/// Where and under which session a scenario records.
#[derive(Debug)]
pub(super) struct Env<'a> {
    pub(super) logserver: &'a str,
    pub(super) session: &'a str,
    pub(super) work: &'a Path,
}

impl Env<'_> {
    /// `exe` started under the name `name` (argv[0]: the program name in the views).
    pub(super) fn command(&self, exe: &Path, name: &str) -> Command {
        use std::os::unix::process::CommandExt as _;
        let mut c = Command::new(exe);
        c.arg0(name);
        c.env("P5_LOGSERVER", self.logserver)
            .env("P5_SESSION", self.session)
            .env_remove("P5_DISABLE")
            .env_remove("P5_DIR")
            .current_dir(self.work)
            .stdin(Stdio::null());
        c
    }
}

/// Runs one scenario to completion; returns a one-line note of what the programs printed.
pub(super) fn run_scenario(
    name: &str,
    exes: &Exes,
    env: &Env<'_>,
    s: &Sizes,
) -> anyhow::Result<String> {
    std::fs::create_dir_all(env.work)?;
    match name {
        "cascade" => {
            let mut db = AppServer::start(env.command(&exes.cascade, "db").args(["db", "0"]))?;
            let mut shop = AppServer::start(env.command(&exes.cascade, "shop").args([
                "shop",
                "0",
                &db.port.to_string(),
            ]))?;
            let client = env
                .command(&exes.cascade, "client")
                .args(["client", &shop.port.to_string()])
                .args([s.cascade_requests.to_string(), s.cascade_work.to_string()])
                .output()
                .context("cannot run the cascade client")?;
            shop.finish("shop")?;
            db.finish("db")?;
            check(&client, "cascade client")?;
            Ok(last_line(&client.stdout))
        }
        "nagle-on" | "nagle-off" | "small-mss" => {
            let mode = match name {
                "nagle-on" => "nagle",
                "nagle-off" => "nodelay",
                _ => "mss",
            };
            let mut server = AppServer::start(env.command(&exes.stream, "stream-server").args([
                "server".to_owned(),
                "0".to_owned(),
                s.stream_redraw.to_string(),
            ]))?;
            let client = env
                .command(&exes.stream, "stream-client")
                .args(["client", &server.port.to_string()])
                .args([
                    s.stream_messages.to_string(),
                    s.stream_size.to_string(),
                    s.stream_burst.to_string(),
                    s.stream_gap_us.to_string(),
                ])
                .arg(mode)
                .output()
                .context("cannot run the stream client")?;
            server.finish("stream server")?;
            check(&client, "stream client")?;
            Ok(last_line(&client.stdout))
        }
        blackbox::BASE | blackbox::DELAYED => exes
            .service
            .as_ref()
            .context("the black-box service was not built")?
            .run(env, s, name == blackbox::DELAYED),
        _ => {
            let mode = name.trim_start_matches("cracker-");
            let out = env
                .command(&exes.cpw, &exes.cpw.to_string_lossy())
                .arg(mode)
                .args(
                    [
                        s.cracker_workers,
                        s.cracker_slow,
                        s.cracker_words,
                        s.cracker_accounts,
                        s.cracker_cost,
                    ]
                    .map(|v| v.to_string()),
                )
                .output()
                .context("cannot run cpw")?;
            check(&out, "cpw")?;
            Ok(last_line(&out.stdout))
        }
    }
}

pub(super) fn check(out: &std::process::Output, what: &str) -> anyhow::Result<()> {
    if !out.status.success() {
        bail!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

pub(super) fn last_line(b: &[u8]) -> String {
    String::from_utf8_lossy(b)
        .lines()
        .last()
        .unwrap_or("")
        .trim()
        .to_owned()
}

/// A server process of a scenario that printed `listening on HOST:PORT` first.
pub(super) struct AppServer {
    pub(super) child: Child,
    pub(super) port: u16,
}

impl AppServer {
    pub(super) fn start(cmd: &mut Command) -> anyhow::Result<AppServer> {
        let mut child = cmd
            .stdout(Stdio::piped())
            .spawn()
            .context("cannot start a server")?;
        let out = child.stdout.take().context("no stdout from the server")?;
        let mut reader = BufReader::new(out);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        // Keep draining so later output never blocks the server.
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = reader.read_to_end(&mut sink);
        });
        let port = line.trim().rsplit(':').next().and_then(|p| p.parse().ok());
        match port {
            Some(port) => Ok(AppServer { child, port }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                bail!("unexpected first line from a server: {line:?}")
            }
        }
    }

    pub(super) fn finish(&mut self, what: &str) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(s) = self.child.try_wait()? {
                if !s.success() {
                    bail!("{what} failed ({s})");
                }
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                bail!("{what} did not exit within a minute");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for AppServer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub(super) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
