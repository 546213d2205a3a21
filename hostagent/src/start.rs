//! [`run`] starts an agent's threads — uplink, listener, OS monitor — and runs the sampling
//! loop on the calling thread, as [`AgentOptions`] say (the options of `hostagent`; its command
//! line lives in the binary). What the binaries print on stdout for scripts to wait for goes
//! through an [`Announce`] callback.

use crate::agent::{self, Shared};
use crate::clock::AgentClock;
use crate::ctl;
use crate::osmon::{self, OsmonConfig};
use crate::outbox::Outbox;
use crate::sample::{ProcessFilter, ProcessFinder, Sampler};
use crate::settings::{Settings, split_patterns};
use crate::{identity, signal, spool};
use p5_logserver::allow::{AllowList, Gate};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The default log server address.
pub const DEFAULT_LOGSERVER: &str = "127.0.0.1:28725";

/// The default sampling interval.
pub const DEFAULT_INTERVAL: &str = "100ms";

/// Options of an agent (see `hostagent --help` for each).
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// Session name sent in the Hello (the log server's session directory).
    pub session: String,
    /// The log server (used by the top agent, i.e. without `parent`).
    pub logserver: String,
    /// Join this parent agent instead of talking to the log server.
    pub parent: Option<String>,
    /// Accept child agents and `ctl` on this address (port 0 picks one; the bound address is
    /// announced).
    pub listen: Option<String>,
    /// Sampling interval (`100`, `100ms`, `1s`).
    pub interval: String,
    /// Record only metrics matching these globs (comma-separated; `None`: everything).
    pub metrics: Option<String>,
    /// Start with recording stopped.
    pub stopped: bool,
    /// Monitored processes by id.
    pub pids: Vec<u32>,
    /// Monitored processes by name (comm, glob).
    pub processes: Vec<String>,
    /// Monitor only the listed processes, not every process recording with the p5 runtime.
    pub only_listed: bool,
    /// Run the OS monitor.
    pub sched: bool,
    /// OS monitor mode: `auto` (tracefs where possible, else /proc) or `proc`.
    pub sched_mode: String,
    /// IRQ lines for the OS monitor (empty: the NIC's).
    pub irqs: Vec<u32>,
    /// Do not trace the network softirqs.
    pub no_net_softirqs: bool,
    /// Directory for the spool file used while upstream is unreachable (`None`: the temporary
    /// directory's `p5-hostagent`).
    pub spool_dir: Option<PathBuf>,
    /// Bound of the spool, MiB.
    pub spool_max_mib: u64,
    /// Peers allowed to connect to `listen` (`None`: loopback, plus local networks when not
    /// listening on loopback).
    pub allow: Option<AllowList>,
    /// Most concurrent connections on `listen`.
    pub max_connections: usize,
}

impl Default for AgentOptions {
    /// What `hostagent` without options does.
    fn default() -> Self {
        AgentOptions {
            session: String::new(),
            logserver: DEFAULT_LOGSERVER.to_owned(),
            parent: None,
            listen: None,
            interval: DEFAULT_INTERVAL.to_owned(),
            metrics: None,
            stopped: false,
            pids: Vec::new(),
            processes: Vec::new(),
            only_listed: false,
            sched: false,
            sched_mode: "auto".to_owned(),
            irqs: Vec::new(),
            no_net_softirqs: false,
            spool_dir: None,
            spool_max_mib: spool::DEFAULT_MAX_BYTES >> 20,
            allow: None,
            max_connections: crate::tree::MAX_CONNECTIONS,
        }
    }
}

/// What a running agent announces to whoever started it.
#[derive(Debug, Clone, Copy)]
pub enum Announce<'a> {
    /// The listener is bound to this address (before anything connects to it).
    Listening(SocketAddr),
    /// The OS monitor records (tracing is on for the monitored processes, or /proc sampling
    /// runs), in this state; announced once, from the OS monitor's thread.
    OsMonitorReady(&'a str),
}

/// A callback for [`Announce`]ments; an error on [`Announce::Listening`] stops the agent.
pub type Announcer = dyn Fn(Announce<'_>) -> std::io::Result<()> + Send + Sync;

/// An agent that could not start or stopped on an error. The message says what failed; the
/// cause is the `source`.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A bad sampling interval.
    #[error(transparent)]
    Ctl(#[from] ctl::CtlError),
    /// Bad settings.
    #[error(transparent)]
    Settings(#[from] crate::settings::SettingsError),
    /// The listen address.
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
    /// Announcing or starting a thread failed.
    #[error("i/o")]
    Io(#[from] std::io::Error),
}

/// Runs an agent until SIGINT/SIGTERM, telling `announce` what the agent's starter may wait
/// for.
pub fn run(a: AgentOptions, announce: Arc<Announcer>) -> Result<(), RunError> {
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
        let listener = TcpListener::bind(l).map_err(|source| RunError::Listen {
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
        announce(Announce::Listening(addr))?;
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
            return Err(RunError::SchedWithoutProcesses);
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
        let t = std::thread::Builder::new()
            .name("p5ha-osmon".into())
            .spawn(move || {
                let ready = std::sync::Once::new();
                let st = |s: String| {
                    if !s.starts_with("waiting") {
                        ready.call_once(|| {
                            let _ = announce(Announce::OsMonitorReady(&s));
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
    let sampler = Sampler::new(filter).map_err(RunError::Sampler)?;
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
        return Err(RunError::UplinkPanicked);
    }
    Ok(())
}
