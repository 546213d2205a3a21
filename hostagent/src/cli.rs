//! The command line of `hostagent` (`hostagent …` and `hostagent ctl …`), the binary's front:
//! it parses the options into [`AgentOptions`], runs the agent or a control request, and
//! prints what scripts wait for and what `ctl` answers. Not part of the library: `main.rs`
//! declares it, and the `p5` umbrella command includes this same file (`p5 hostagent ...`
//! offers the same options without copying them), so it names the library only by its crate
//! name.

use clap::{Args, Parser, Subcommand};
use p5_hostagent::ctl;
use p5_hostagent::start::{AgentOptions, Announce, DEFAULT_INTERVAL, DEFAULT_LOGSERVER, RunError};
use p5_logserver::allow::AllowList;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

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
    #[arg(long, default_value = DEFAULT_INTERVAL)]
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
    #[arg(long, default_value_t = p5_hostagent::spool::DEFAULT_MAX_BYTES >> 20)]
    pub spool_max_mib: u64,
    /// Peers allowed to connect to --listen: addresses and networks (10.1.0.0/16),
    /// `loopback`, `local` (this host's own networks) or `any`, comma-separated. Default:
    /// `loopback` when listening on a loopback address, else `loopback,local`. See
    /// docs/security.md.
    #[arg(long)]
    pub allow: Option<AllowList>,
    /// Most concurrent connections on --listen; at the cap a newcomer evicts an idle
    /// connection, else it is refused.
    #[arg(long, default_value_t = p5_hostagent::tree::MAX_CONNECTIONS)]
    pub max_connections: usize,
}

impl AgentArgs {
    /// The agent's options (everything but `--print-ready`, which is this front's).
    pub fn options(&self) -> AgentOptions {
        AgentOptions {
            session: self.session.clone(),
            logserver: self.logserver.clone(),
            parent: self.parent.clone(),
            listen: self.listen.clone(),
            interval: self.interval.clone(),
            metrics: self.metrics.clone(),
            stopped: self.stopped,
            pids: self.pids.clone(),
            processes: self.processes.clone(),
            only_listed: self.only_listed,
            sched: self.sched,
            sched_mode: self.sched_mode.clone(),
            irqs: self.irqs.clone(),
            no_net_softirqs: self.no_net_softirqs,
            spool_dir: self.spool_dir.clone(),
            spool_max_mib: self.spool_max_mib,
            allow: self.allow.clone(),
            max_connections: self.max_connections,
        }
    }
}

/// A failed command. The message says what failed; the cause is the `source`.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The agent.
    #[error(transparent)]
    Run(#[from] RunError),
    /// A control request or reply.
    #[error(transparent)]
    Ctl(#[from] ctl::CtlError),
    /// Agents of the tree did not answer a control request.
    #[error("{0} agent(s) did not answer")]
    Unanswered(usize),
    /// Writing JSON output failed.
    #[error("cannot write JSON")]
    Json(#[from] serde_json::Error),
    /// Output failed.
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

/// Runs an agent until SIGINT/SIGTERM, printing `listening on ADDR` on stdout once the
/// listener is bound and, with `--print-ready`, `os monitor ready: STATE` once the OS monitor
/// records.
pub fn run(a: AgentArgs) -> Result<(), CliError> {
    let print_ready = a.print_ready;
    let announce = move |what: Announce<'_>| -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        match what {
            Announce::Listening(addr) => writeln!(out, "listening on {addr}")?,
            Announce::OsMonitorReady(s) if print_ready => writeln!(out, "os monitor ready: {s}")?,
            Announce::OsMonitorReady(_) => return Ok(()),
        }
        out.flush()
    };
    Ok(p5_hostagent::start::run(a.options(), Arc::new(announce))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command's errors say each thing once when printed with their chain.
    #[test]
    fn no_error_repeats_its_cause() {
        let io = || std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let errors: Vec<Box<dyn std::error::Error>> = vec![
            Box::new(CliError::Ctl(ctl::CtlError::Connect {
                addr: "h:1".into(),
                cause: io(),
            })),
            Box::new(CliError::Run(RunError::Listen {
                addr: "h:1".into(),
                source: io(),
            })),
        ];
        for e in &errors {
            p5_logserver::error::assert_said_once(e.as_ref());
        }
    }

    /// The options are the command line's, defaults included.
    #[test]
    fn the_defaults_are_the_options_defaults() {
        let c = Cli::try_parse_from(["hostagent"]).unwrap();
        let (a, d) = (c.agent.options(), AgentOptions::default());
        assert_eq!(format!("{a:?}"), format!("{d:?}"));
    }
}
