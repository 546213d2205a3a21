//! The command line (`hostagent …` and `hostagent ctl …`) and [`run`], which starts an agent's
//! threads: uplink, listener, OS monitor, and the sampling loop on the calling thread.

use crate::agent::{self, Shared};
use crate::clock::AgentClock;
use crate::ctl;
use crate::osmon::{self, OsmonConfig};
use crate::outbox::Outbox;
use crate::sample::{ProcessFilter, ProcessFinder, Sampler};
use crate::settings::{Settings, split_patterns};
use crate::{identity, signal, spool};
use clap::{Args, Parser, Subcommand};
use p5_logserver::allow::{AllowList, Gate};
use std::io::Write as _;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The default log server address.
pub const DEFAULT_LOGSERVER: &str = "127.0.0.1:28725";

/// `hostagent`: host metrics and kernel events for p5, delivered through an agent tree.
#[derive(Debug, Parser)]
#[command(name = "hostagent", version, args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// Run an agent with these options.
    #[command(flatten)]
    pub agent: AgentArgs,
    /// Or steer a running tree.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Steer the agent tree: `status`, `start`, `stop`, `set interval=MS metrics=GLOB,…`.
    Ctl {
        /// The agent to talk to (its --listen address; the top agent steers the whole tree).
        #[arg(long, default_value = "127.0.0.1:28726")]
        agent: String,
        /// Print the reply as JSON.
        #[arg(long)]
        json: bool,
        /// The command words.
        #[arg(required = true, num_args = 1..)]
        words: Vec<String>,
    },
}

/// Options of an agent.
#[derive(Debug, Clone, Args)]
pub struct AgentArgs {
    /// Session name sent in the Hello (the log server's session directory).
    #[arg(long, default_value = "")]
    pub session: String,
    /// The log server (used by the top agent, i.e. without --parent).
    #[arg(long, default_value = DEFAULT_LOGSERVER)]
    pub logserver: String,
    /// Join this parent agent instead of talking to the log server.
    #[arg(long)]
    pub parent: Option<String>,
    /// Accept child agents and `ctl` on this address (port 0 picks one; the bound address
    /// is printed as `listening on ADDR`). Conventionally port 28726, which is what
    /// `hostagent ctl` and children assume when not told otherwise.
    #[arg(long)]
    pub listen: Option<String>,
    /// Sampling interval (`100`, `100ms`, `1s`).
    #[arg(long, default_value = "100ms")]
    pub interval: String,
    /// Record only metrics matching these globs (comma-separated; default: everything).
    #[arg(long)]
    pub metrics: Option<String>,
    /// Start with recording stopped (until `ctl start`).
    #[arg(long)]
    pub stopped: bool,
    /// Monitor this process (CPU, RSS, OS monitor — which follows the threads and processes
    /// it starts too); repeatable.
    #[arg(long = "pid")]
    pub pids: Vec<u32>,
    /// Monitor processes with this name (comm, glob); repeatable.
    #[arg(long = "process")]
    pub processes: Vec<String>,
    /// Monitor only the processes given by --pid/--process; by default every process that
    /// records with the p5 runtime is monitored too (found by its `@p5-runtime-PID` socket).
    #[arg(long)]
    pub only_listed: bool,
    /// Enable the OS monitor (tracefs as root, /proc sampling otherwise). It follows each
    /// monitored process and every thread and process it starts (instrumented or not) from
    /// within milliseconds of the process's announcement, and stops after the last one ends.
    #[arg(long)]
    pub sched: bool,
    /// Print `os monitor ready: STATE` on stdout once the OS monitor records (tracing is on
    /// for the monitored processes, or /proc sampling runs). `p5 record` waits for it before
    /// letting the program run.
    #[arg(long)]
    pub print_ready: bool,
    /// OS monitor mode: `auto` (tracefs where possible, else /proc) or `proc` (always the
    /// lower-fidelity /proc sampling).
    #[arg(long, default_value = "auto", value_parser = ["auto", "proc"])]
    pub sched_mode: String,
    /// IRQ lines for the OS monitor (default: the NIC's); repeatable.
    #[arg(long = "irq")]
    pub irqs: Vec<u32>,
    /// Do not trace the network softirqs (NET_RX, NET_TX). By default the OS monitor records
    /// them beside the IRQ lines, numbered 0x10000 + vector (65538 NET_TX, 65539 NET_RX): on
    /// loopback, where no NIC interrupt fires, that is where packets are sent and received.
    #[arg(long)]
    pub no_net_softirqs: bool,
    /// Directory for the spool file used while upstream is unreachable.
    #[arg(long)]
    pub spool_dir: Option<PathBuf>,
    /// Bound of the spool, MiB.
    #[arg(long, default_value_t = spool::DEFAULT_MAX_BYTES >> 20)]
    pub spool_max_mib: u64,
    /// Peers allowed to connect to --listen: addresses and networks (10.1.0.0/16),
    /// `loopback`, `local` (this host's own networks) or `any`, comma-separated. Default:
    /// `loopback` when listening on a loopback address, else `loopback,local`. See
    /// docs/security.md.
    #[arg(long)]
    pub allow: Option<AllowList>,
    /// Most concurrent connections on --listen; at the cap a newcomer evicts an idle
    /// connection, else it is refused.
    #[arg(long, default_value_t = crate::tree::MAX_CONNECTIONS)]
    pub max_connections: usize,
}

/// A failed command. The message says what failed; the cause is the `source`.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A control request or reply.
    #[error(transparent)]
    Ctl(#[from] ctl::CtlError),
    /// Bad settings.
    #[error(transparent)]
    Settings(#[from] crate::settings::SettingsError),
    /// Agents of the tree did not answer a control request.
    #[error("{0} agent(s) did not answer")]
    Unanswered(usize),
    /// The `--listen` address.
    #[error("cannot listen on {addr}")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `--sched --only-listed` without processes.
    #[error("--sched with --only-listed needs monitored processes (--pid or --process)")]
    SchedWithoutProcesses,
    /// The system sampler.
    #[error("cannot start the system sampler")]
    Sampler(#[source] sysinfo::Error),
    /// The uplink thread panicked.
    #[error("the uplink thread panicked")]
    UplinkPanicked,
    /// Writing JSON output failed.
    #[error("cannot write JSON")]
    Json(#[from] serde_json::Error),
    /// Output or starting a thread failed.
    #[error("i/o")]
    Io(#[from] std::io::Error),
}

/// Runs `ctl`.
pub fn run_ctl(agent: &str, json: bool, words: &[String]) -> Result<(), CliError> {
    let req = ctl::parse_command(words)?;
    let rep = ctl::send(agent, &req)?;
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&rep)?)?;
    } else {
        write!(out, "{}", ctl::render(&rep))?;
    }
    if !rep.unanswered.is_empty() {
        return Err(CliError::Unanswered(rep.unanswered.len()));
    }
    Ok(())
}

/// Runs an agent until SIGINT/SIGTERM.
pub fn run(a: AgentArgs) -> Result<(), CliError> {
    let interval = ctl::parse_interval(&a.interval)?;
    let settings = Settings {
        interval_ms: interval,
        metrics: a.metrics.as_deref().map(split_patterns).unwrap_or_default(),
        recording: !a.stopped,
    };
    settings.validate()?;
    signal::install();
    let clock = AgentClock::start();
    let id = identity::agent_identity(&clock, &a.session);
    let hello = identity::hello_frame(&id);
    let spool_dir = a
        .spool_dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("p5-hostagent"));
    let session = if a.session.is_empty() {
        "default"
    } else {
        &a.session
    };
    let spool_path = spool_dir.join(format!(
        "{session}-{}-{:016x}.p5spool",
        id.pid, id.process_uid
    ));
    let outbox = Outbox::new(hello.clone(), spool_path, a.spool_max_mib << 20);
    let (upstream, is_agent) = match &a.parent {
        Some(p) => (p.clone(), true),
        None => (a.logserver.clone(), false),
    };
    let shared = Arc::new(Shared::new(
        clock, id, upstream, is_agent, settings, outbox, hello,
    ));
    if let Some(l) = &a.listen {
        let listener = TcpListener::bind(l).map_err(|source| CliError::Listen {
            addr: l.to_string(),
            source,
        })?;
        let addr = listener.local_addr()?;
        p5_logserver::admit::raise_fd_limit();
        let allow = a
            .allow
            .clone()
            .unwrap_or_else(|| AllowList::default_for(addr.ip()));
        tracing::info!(%addr, allow = %allow, "peers allowed");
        let admission = crate::tree::Admission {
            gate: Gate::new(allow),
            max_connections: p5_logserver::admit::fit_fd_limit(a.max_connections),
        };
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on {addr}")?;
        out.flush()?;
        let sh = shared.clone();
        std::thread::Builder::new()
            .name("p5ha-listen".into())
            .spawn(move || crate::tree::serve(sh, listener, admission))?;
    }
    let sh = shared.clone();
    let uplink = std::thread::Builder::new()
        .name("p5ha-uplink".into())
        .spawn(move || crate::uplink::run(&sh))?;
    let filter = ProcessFilter {
        pids: a.pids.clone(),
        names: a.processes.clone(),
        instrumented: !a.only_listed,
    };
    let (osmon_rx, osmon_thread) = if a.sched {
        if filter.is_empty() {
            return Err(CliError::SchedWithoutProcesses);
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let cfg = OsmonConfig {
            clock,
            finder: ProcessFinder::new(filter.clone())
                .scan_instrumented_every(Duration::from_millis(100)),
            irqs: (!a.irqs.is_empty()).then(|| a.irqs.clone()),
            net_softirqs: !a.no_net_softirqs,
            interval: Duration::from_millis(interval),
            force_proc: a.sched_mode == "proc",
        };
        let sh = shared.clone();
        let print_ready = a.print_ready;
        let t = std::thread::Builder::new()
            .name("p5ha-osmon".into())
            .spawn(move || {
                let ready = std::sync::Once::new();
                let st = |s: String| {
                    if print_ready && !s.starts_with("waiting") {
                        ready.call_once(|| {
                            let mut out = std::io::stdout().lock();
                            let _ = writeln!(out, "os monitor ready: {s}");
                            let _ = out.flush();
                        });
                    }
                    *agent::lock(&sh.sched_state) = s;
                };
                let rec = || sh.settings().recording;
                osmon::run(cfg, tx, &sh.stop, &rec, &st);
            })?;
        (Some(rx), Some(t))
    } else {
        (None, None)
    };
    let sampler = Sampler::new(filter).map_err(CliError::Sampler)?;
    tracing::info!(upstream = %shared.upstream, "host agent started");
    let stop_osmon = || {
        shared.stop.store(true, Ordering::Release);
        // Joined so the trace instance is removed and the last events are queued.
        if let Some(t) = osmon_thread
            && t.join().is_err()
        {
            tracing::error!("the os monitor thread panicked");
        }
    };
    agent::sampling_loop(stop_osmon, &shared, sampler, osmon_rx);
    if uplink.join().is_err() {
        return Err(CliError::UplinkPanicked);
    }
    Ok(())
}
