//! Starting a recording: the log server, the program and the host agent, in the order that
//! lets the OS monitor see the program from its first instruction (with `--sched` the
//! program is forked and held before `exec` until the agent follows its pid). A program that
//! cannot be executed after all (`execve` fails) ends the recording before it began: the
//! agent and the server are stopped and a store made for it is removed.

use super::stop::{self, Stopping};
use super::{RecordArgs, leftovers, one_line, one_line_text};
use crate::gate::Held;
use anyhow::Context as _;
use p5_logserver::LocalServer;
use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

/// What runs once a recording has started.
#[derive(Debug)]
pub struct Launched {
    /// The in-process log server (none with `--logserver`).
    pub server: Option<LocalServer>,
    /// The program (released).
    pub child: Held,
    /// The host agent, if one runs.
    pub agent: Option<Child>,
    /// What `--preload` set up.
    pub preload: Option<crate::preload::Setup>,
    /// Where the programs spool what they cannot deliver (`P5_DIR`).
    pub spool_dir: PathBuf,
}

/// Starts the log server, the program (this process its subreaper) and the host agent.
pub fn launch(
    args: &RecordArgs,
    session: &str,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<Launched> {
    let new_store = !args.store.exists();
    let (addr, server) = match &args.logserver {
        Some(a) => (a.clone(), None),
        None => {
            let server = LocalServer::start(rt.handle(), &args.store).map_err(|e| {
                anyhow::anyhow!("{}; choose another store with --store", one_line_text(&e))
            })?;
            (server.addr().to_string(), Some(server))
        }
    };
    eprintln!("p5 record: session {session:?}, log server {addr}");
    let (child, preload) = match spawn(args, session, &addr) {
        Ok(started) => started,
        Err(e) => {
            // Nothing ran: a store made for this recording goes again.
            if let Some(server) = server {
                let _ = server.stop(rt.handle());
            }
            if new_store {
                let _ = std::fs::remove_dir_all(&args.store);
            }
            return Err(e);
        }
    };
    let mut run = Launched {
        server,
        child,
        agent: None,
        preload,
        spool_dir: leftovers::spool_dir(&args.store),
    };
    let gated = args.sched && !args.no_agent;
    if !gated && let Some(e) = run.child.release() {
        return Err(abandon(run, args, rt, new_store, &e));
    }
    run.agent = agent(args, session, &addr, run.child.id());
    if gated {
        if let Some(a) = run.agent.as_mut() {
            match crate::agent::wait_ready(a, Duration::from_secs(10)) {
                Some(state) => eprintln!("p5 record: os monitor: {state}"),
                None => eprintln!(
                    "p5 record: the OS monitor did not report ready (within 10 s); running the \
                     program anyway"
                ),
            }
        }
        if stop::count() > 0 {
            run.child.kill_held();
        } else if let Some(e) = run.child.release() {
            return Err(abandon(run, args, rt, new_store, &e));
        }
    }
    Ok(run)
}

/// Forks the program (held) with the runtime's environment, after `--preload`'s set-up.
fn spawn(
    args: &RecordArgs,
    session: &str,
    addr: &str,
) -> anyhow::Result<(Held, Option<crate::preload::Setup>)> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes an integer flag and affects only us.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let spool_dir = leftovers::spool_dir(&args.store).display().to_string();
    let preload = if args.preload {
        Some(crate::preload::Setup::prepare(&args.store, &args.cmd)?)
    } else {
        None
    };
    let mut env = vec![
        ("P5_LOGSERVER", addr),
        ("P5_SESSION", session),
        ("P5_DIR", spool_dir.as_str()),
    ];
    if let Some(p) = &preload {
        env.push(("LD_PRELOAD", p.ld_preload.as_str()));
    }
    let child =
        Held::spawn(&args.cmd, &env).with_context(|| format!("cannot start {:?}", args.cmd[0]))?;
    Ok((child, preload))
}

/// The host agent watching the program's process tree (none if it cannot start: said so).
fn agent(args: &RecordArgs, session: &str, addr: &str, pid: u32) -> Option<Child> {
    if args.no_agent {
        return None;
    }
    let spool_dir = args.store.join(".agent-spool");
    let options = crate::agent::AgentOptions {
        logserver: addr,
        session,
        interval: &args.interval,
        pids: &[pid],
        sched: args.sched,
        spool_dir: &spool_dir,
    };
    match crate::agent::spawn_with(&options, true) {
        Ok(a) => Some(a),
        Err(e) => {
            eprintln!("p5 record: no host agent: {}", one_line(&e));
            None
        }
    }
}

/// The program could not be executed: stops what was started, removes a store made for it,
/// and says why (with what to do).
fn abandon(
    mut run: Launched,
    args: &RecordArgs,
    rt: &tokio::runtime::Runtime,
    new_store: bool,
    e: &std::io::Error,
) -> anyhow::Error {
    if let Some(a) = run.agent.as_mut() {
        crate::agent::stop(a, Duration::from_secs(15));
    }
    let _ = run.child.try_wait();
    if let Some(server) = run.server.take() {
        let _ = server.stop(rt.handle());
    }
    if new_store {
        let _ = std::fs::remove_dir_all(&args.store);
    }
    let hint = match e.raw_os_error() {
        Some(libc::ENOEXEC) => " (not a program for this machine, or a script without a #! line)",
        Some(libc::EACCES) => " (check its permissions)",
        _ => "",
    };
    anyhow::anyhow!("cannot run {:?}: {e}{hint}", args.cmd[0])
}

/// Waits until the program and every descendant have ended, reaping orphans, acting on
/// SIGINT/SIGTERM ([`super::stop`]); returns the program's status.
pub fn wait_tree(
    child: &mut crate::gate::Held,
    agent: Option<u32>,
    stopping: &mut Stopping,
) -> anyhow::Result<std::process::ExitStatus> {
    let mut status = None;
    loop {
        stopping.poll();
        if status.is_none() {
            status = child.try_wait()?;
        }
        let others: Vec<u32> = super::stop::children_of(std::process::id())
            .into_iter()
            .filter(|&p| Some(p) != agent && p != child.id())
            .collect();
        for &p in &others {
            let mut st = 0;
            // SAFETY: waiting (without blocking) for our own child.
            unsafe { libc::waitpid(p as i32, &mut st, libc::WNOHANG) };
        }
        if let Some(s) = status
            && others.is_empty()
        {
            return Ok(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
