//! `p5 record [options] -- CMD ARGS…`: one command from a program to a merged session.
//!
//! Starts a log server (in-process, unless `--logserver` names a running one) and the local
//! host agent (a `p5 hostagent` child, with the OS monitor when `--sched` is given), runs CMD
//! with the runtime's environment (`P5_LOGSERVER`, `P5_SESSION`), waits for it *and its
//! descendants* (this process becomes a child subreaper, so daemonized children are waited
//! for too), stops the agent and the server (both drain and sync), merges the session into
//! SQLite by default, and prints the summary and the next commands. The exit status is CMD's.
//!
//! `--preload` records programs p5 never saw the source of: CMD runs with `libp5_preload.so`
//! in `LD_PRELOAD` (inherited by every process it starts), whose socket calls are recorded and
//! named after the call ([`crate::preload`]).

use anyhow::Context as _;
use p5_logserver::LocalServer;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

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
    /// The program and its arguments.
    #[arg(trailing_var_arg = true, required = true, value_name = "CMD")]
    pub cmd: Vec<OsString>,
}

/// Runs `p5 record`; returns CMD's exit code.
pub fn run(args: &RecordArgs) -> anyhow::Result<i32> {
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
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;

    // 1. The log server.
    let (addr, server) = match &args.logserver {
        Some(a) => (a.clone(), None),
        None => {
            let server = LocalServer::start(rt.handle(), &args.store)?;
            (server.addr().to_string(), Some(server))
        }
    };
    eprintln!("p5 record: session {session:?}, log server {addr}");

    // 2. The program, with this process as the subreaper of its descendants. With --sched
    // it is held before exec behind a gate until the agent's OS monitor follows its pid, so
    // kernel tracing covers the program from its first instruction, children included.
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes an integer flag and affects only us.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let gated = args.sched && !args.no_agent;
    let started = Instant::now();
    let preload = if args.preload {
        Some(crate::preload::Setup::prepare(&args.store, &args.cmd)?)
    } else {
        None
    };
    let mut env = vec![
        ("P5_LOGSERVER", addr.as_str()),
        ("P5_SESSION", session.as_str()),
    ];
    if let Some(p) = &preload {
        env.push(("LD_PRELOAD", p.ld_preload.as_str()));
    }
    let mut child = crate::gate::Held::spawn(&args.cmd, &env)
        .with_context(|| format!("cannot start {:?}", args.cmd[0]))?;
    if !gated && let Some(e) = child.release() {
        eprintln!("p5 record: cannot start {:?}: {e}", args.cmd[0]);
    }

    // 3. The host agent, watching the program (and, with --sched, its whole process tree).
    let mut agent = if args.no_agent {
        None
    } else {
        let spool_dir = args.store.join(".agent-spool");
        let options = crate::agent::AgentOptions {
            logserver: &addr,
            session: &session,
            interval: &args.interval,
            pids: &[child.id()],
            sched: args.sched,
            spool_dir: &spool_dir,
        };
        match crate::agent::spawn(&options) {
            Ok(a) => Some(a),
            Err(e) => {
                eprintln!("p5 record: no host agent: {e:#}");
                None
            }
        }
    };

    if gated {
        if let Some(a) = agent.as_mut() {
            match crate::agent::wait_ready(a, Duration::from_secs(10)) {
                Some(state) => eprintln!("p5 record: os monitor: {state}"),
                None => eprintln!(
                    "p5 record: the OS monitor did not report ready (within 10 s); running the program anyway"
                ),
            }
        }
        if let Some(e) = child.release() {
            eprintln!("p5 record: cannot start {:?}: {e}", args.cmd[0]);
        }
    }

    // 4. Wait for the program and every descendant it left behind.
    let child_pid = child.id();
    let status = child.wait()?;
    let agent_pid = agent.as_ref().map(|a| a.id());
    wait_descendants(agent_pid);
    let took = started.elapsed();
    eprintln!(
        "p5 record: {} exited ({status}) after {:.2} s",
        program,
        took.as_secs_f64()
    );

    // 5. Stop the agent and the log server; both drain what they hold.
    if let Some(a) = agent.as_mut()
        && !crate::agent::stop(a, Duration::from_secs(15))
    {
        eprintln!("p5 record: the host agent did not stop in time; killed it");
    }
    if let Some(server) = server {
        server.stop(rt.handle())?;
    }

    // 6. Merge.
    let preload = preload.as_ref();
    if args.logserver.is_none() && !args.no_merge {
        if !merge_and_print(&rt, args, &session, preload, child_pid)? {
            return Ok(status.code().unwrap_or(128 + status_signal(&status)));
        }
    } else if args.logserver.is_some() {
        println!(
            "recorded into the running log server's store; merge there with `p5 merge STORE --session {session}`"
        );
    }
    if let Some(p) = preload
        && (args.no_merge || args.logserver.is_some())
    {
        println!(
            "names of the recorded calls: merge with --manifest {}",
            p.manifest.display()
        );
    }
    println!(
        "store: {}   (details: p5 inspect {})",
        args.store.display(),
        args.store.display()
    );
    Ok(status.code().unwrap_or(128 + status_signal(&status)))
}

/// Merges the session (with the preload's call names, if any) and prints its summary; with
/// `--preload`, says whether the started process (`child_pid`) recorded anything. False if
/// nothing at all was recorded under `--preload` (nothing to merge).
fn merge_and_print(
    rt: &tokio::runtime::Runtime,
    args: &RecordArgs,
    session: &str,
    preload: Option<&crate::preload::Setup>,
    child_pid: u32,
) -> anyhow::Result<bool> {
    let mut manifests = args.manifests.clone();
    manifests.extend(preload.map(|p| p.manifest.clone()));
    let merge = p5_merge::MergeArgs {
        db: args.db.clone(),
        session: Some(session.to_owned()),
        manifests,
        quiet: true,
        ..p5_merge::MergeArgs::new(&args.store)
    };
    let db = merge.db_url();
    let summaries = match rt.block_on(p5_merge::merge_store(&merge)) {
        Err(p5_merge::Error::NoSession(_)) if preload.is_some() => Vec::new(),
        r => r?,
    };
    if let Some(p) = preload
        && summaries.is_empty()
    {
        p.report(child_pid, &p5_merge::SessionSummary::default());
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

/// Waits for orphaned descendants reparented to this process (the child subreaper), other
/// than `except` (the host agent).
fn wait_descendants(except: Option<u32>) {
    loop {
        let children = children_of_self();
        let others: Vec<u32> = children
            .into_iter()
            .filter(|&p| Some(p) != except)
            .collect();
        if others.is_empty() {
            return;
        }
        for p in others {
            let mut status = 0;
            // SAFETY: waiting (without blocking) for our own child.
            unsafe { libc::waitpid(p as i32, &mut status, libc::WNOHANG) };
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Children of every thread of this process (`/proc/self/task/*/children`).
fn children_of_self() -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for t in tasks.flatten() {
        if let Ok(s) = std::fs::read_to_string(t.path().join("children")) {
            out.extend(s.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
        }
    }
    out
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
