//! `p5 record [options] -- CMD ARGS…`: one command from a program to a merged session.
//!
//! Checks that CMD exists (and that `--logserver` answers) before it creates anything, then
//! starts a log server (in-process, unless `--logserver` names a running one) and the local
//! host agent (a `p5 hostagent` child watching CMD's process tree and nothing else, with the
//! OS monitor when `--sched` is given), runs CMD with the runtime's environment
//! (`P5_LOGSERVER`, `P5_SESSION`, and `P5_DIR` = `STORE/.spool` for what cannot be delivered
//! live, `record::leftovers`), waits for it *and its descendants* (this process becomes a child
//! subreaper, so daemonized children are waited for too), stops the agent and the server
//! (both drain and sync), imports the spool files left, merges the session into SQLite by
//! default, and prints the summary and the next commands. The exit status is CMD's.
//!
//! SIGINT or SIGTERM stops the program tree and still merges what was recorded; a second one
//! skips the merge and prints the `p5 merge` command for later (`record::stop`). Every error is one
//! line, each cause once, saying what to do ([`one_line`]).
//!
//! `--preload` records programs p5 never saw the source of: CMD runs with `libp5_preload.so`
//! in `LD_PRELOAD` (inherited by every process it starts), whose socket calls are recorded and
//! named after the call ([`crate::preload`]).

use anyhow::Context as _;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

mod checks;
mod launch;
mod leftovers;
pub mod lines;
mod stop;

pub use lines::{one_line, one_line_text};

/// Options of `p5 record`.
#[derive(clap::Args, Debug, Clone)]
pub struct RecordArgs {
    /// Session name (default: the program's name and the start time).
    #[arg(long)]
    pub session: Option<String>,
    /// Store directory of the log server started here.
    #[arg(long, default_value = "p5-store")]
    pub store: PathBuf,
    /// Use this running log server (HOST:PORT) instead of starting one; its store then holds
    /// the session, and `p5 merge` has to be run there.
    #[arg(long)]
    pub logserver: Option<String>,
    /// Do not start a host agent (e.g. when an agent tree already runs on the hosts).
    #[arg(long)]
    pub no_agent: bool,
    /// Record kernel scheduling, NIC interrupts and network softirqs for the program and every
    /// process and thread it starts, instrumented or not (OS monitor; tracing is on before the
    /// program runs; full fidelity needs root and tracefs, otherwise /proc sampling of the
    /// program's process tree).
    #[arg(long)]
    pub sched: bool,
    /// Host-agent sampling interval.
    #[arg(long, default_value = "100ms")]
    pub interval: String,
    /// Database for the merge: `sqlite:PATH` or `postgres://…` (default: `sqlite:<store>/p5.sqlite`).
    #[arg(long)]
    pub db: Option<String>,
    /// Instrumentation output directories (`p5-manifest.json`) for source locations.
    #[arg(long = "manifest", value_name = "DIR")]
    pub manifests: Vec<PathBuf>,
    /// Record only; do not merge.
    #[arg(long)]
    pub no_merge: bool,
    /// Record unmodified programs: preload `libp5_preload.so`, which records the socket calls,
    /// waits and descriptors of CMD and every process it starts (dynamically linked programs
    /// that call libc; not static binaries, not Go).
    #[arg(long)]
    pub preload: bool,
    /// After SIGINT or SIGTERM, how long the program tree has to end (the signal is
    /// forwarded to it) before it is killed; a second signal kills it at once and skips the
    /// merge.
    #[arg(long, default_value = "5s", value_name = "SECONDS")]
    pub grace: String,
    /// The program and its arguments.
    #[arg(trailing_var_arg = true, required = true, value_name = "CMD")]
    pub cmd: Vec<OsString>,
}

/// Runs `p5 record`; returns CMD's exit code. An error is one line (each cause once).
pub fn run(args: &RecordArgs) -> anyhow::Result<i32> {
    run_checked(args).map_err(|e| anyhow::anyhow!(one_line(&e)))
}

fn run_checked(args: &RecordArgs) -> anyhow::Result<i32> {
    // Nothing is created before the program is known to exist.
    checks::program(&args.cmd[0])?;
    if let Some(a) = &args.logserver {
        checks::logserver(a)?;
    }
    let grace = checks::grace(&args.grace)?;
    let program = args
        .cmd
        .first()
        .map(|c| {
            PathBuf::from(c)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .unwrap_or_default();
    let session = match &args.session {
        Some(s) => s.clone(),
        None => default_session(&program),
    };
    stop::install();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;

    // 1–3. The log server, the program (held until the OS monitor follows it, with
    // --sched) and the host agent.
    let started = Instant::now();
    let mut run = launch::launch(args, &session, &rt)?;

    // 4. Wait for the program and every descendant it left behind (and act on signals).
    let child_pid = run.child.id();
    let agent_pid = run.agent.as_ref().map(|a| a.id());
    let mut stopping = stop::Stopping::new(grace, agent_pid);
    let status = launch::wait_tree(&mut run.child, agent_pid, &mut stopping)?;
    eprintln!(
        "p5 record: {program} exited ({status}) after {:.2} s",
        started.elapsed().as_secs_f64()
    );

    // 5. Stop the agent and the log server; both drain what they hold. Then what the
    // programs spooled instead of delivering goes into the store too.
    if let Some(a) = run.agent.as_mut()
        && !crate::agent::stop(a, Duration::from_secs(15))
    {
        eprintln!("p5 record: the host agent did not stop in time; killed it");
    }
    if let Some(server) = run.server.take() {
        server.stop(rt.handle())?;
        leftovers::import(&args.store, &run.spool_dir);
    } else {
        leftovers::list(&run.spool_dir);
    }

    // 6. Merge.
    let code = status.code().unwrap_or(128 + status_signal(&status));
    let preload = run.preload.as_ref();
    let later = lines::merge_command(args, &session, preload);
    if args.logserver.is_some() {
        let store = lines::shell_word(&args.store);
        println!(
            "recorded into the running log server's store; merge there with `{}`",
            later.replacen(&store, "STORE", 1)
        );
    } else if args.no_merge {
        println!("not merged (--no-merge); merge with `{later}`");
    } else if stopping.skip_merge() {
        eprintln!("p5 record: not merged; merge later with `{later}`");
        return Ok(code);
    } else if !merge_and_print(&rt, args, &session, preload, child_pid)? {
        return Ok(code);
    }
    println!(
        "store: {}   (details: p5 inspect {})",
        args.store.display(),
        args.store.display()
    );
    Ok(code)
}

/// Merges the session (with the preload's call names, if any) and prints its summary; with
/// `--preload`, says whether the started process (`child_pid`) recorded anything. False if
/// nothing at all was recorded (nothing to merge). A signal during the merge ends the
/// process with the command that merges later ([`stop::merging`]).
fn merge_and_print(
    rt: &tokio::runtime::Runtime,
    args: &RecordArgs,
    session: &str,
    preload: Option<&crate::preload::Setup>,
    child_pid: u32,
) -> anyhow::Result<bool> {
    let mut manifests = args.manifests.clone();
    manifests.extend(preload.map(|p| p.manifest.clone()));
    let merge = p5_merge::MergeOptions {
        db: args.db.clone(),
        session: Some(session.to_owned()),
        manifests,
        ..p5_merge::MergeOptions::new(&args.store)
    };
    let db = merge.db_url();
    let later = lines::merge_command(args, session, preload);
    stop::merging(Some(format!("merge later with `{later}`")));
    let merged = rt.block_on(p5_merge::merge_store(&merge));
    stop::merging(None);
    let summaries = match merged {
        Err(p5_merge::Error::NoSession(_)) => Vec::new(),
        Err(e) => anyhow::bail!(
            "the merge failed: {}; the recording is kept in {}: merge it with `{later}` once \
             that is fixed",
            one_line_text(&e),
            args.store.display()
        ),
        Ok(s) => s,
    };
    if summaries.is_empty() {
        match preload {
            Some(p) => p.report(child_pid, &p5_merge::SessionSummary::default()),
            None => eprintln!(
                "p5 record: nothing reached the log server: is the program instrumented \
                 (p5-instrument)? An unmodified program is recorded with --preload"
            ),
        }
        eprintln!("p5 record: nothing was recorded, so there is nothing to merge");
        return Ok(false);
    }
    for s in summaries {
        print!("{}", p5_merge::render(&s));
        if let Some(p) = preload {
            p.report(child_pid, &s);
        }
    }
    println!("database: {db}");
    println!("view it:  p5 web --db {db}");
    Ok(true)
}

fn status_signal(status: &std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt as _;
    status.signal().unwrap_or(0)
}

/// `<program>-<local date>_<time>` (`lua-2026-11-24_09-30-05`) with only characters the log
/// server accepts in a session name.
fn default_session(program: &str) -> String {
    let when = chrono::Local::now().format("%Y-%m-%d_%H-%M-%S");
    let clean: String = program
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let clean = if clean.is_empty() {
        "run".to_owned()
    } else {
        clean
    };
    format!("{clean}-{when}")
}

#[cfg(test)]
mod tests {
    use super::default_session;

    /// The default session name is the program and the local date and time, readable and
    /// accepted by the log server whatever the program is called.
    #[test]
    fn default_session_names_are_readable_and_valid() {
        let today = chrono::Local::now().format("%Y-%m-%d").to_string();
        for program in ["lua", "my server.py", "", "ünïcode/../x"] {
            let name = default_session(program);
            assert!(p5_logserver::session::is_valid(&name), "{name}");
            let (prog, when) = name.split_at(name.len() - "2026-11-24_09-30-05".len());
            assert!(prog.ends_with('-'), "{name}");
            assert!(when.starts_with(&today[..7]), "{name}");
            let parsed = chrono::NaiveDateTime::parse_from_str(when, "%Y-%m-%d_%H-%M-%S");
            assert!(parsed.is_ok(), "{name}");
        }
        assert!(default_session("lua").starts_with("lua-"));
        assert!(default_session("").starts_with("run-"));
    }
}
