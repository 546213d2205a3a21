//! The command line of `p5-logserver`, the binary's front: it parses the options into a
//! [`ServerConfig`] and prints what the library returns. Not part of the library: `main.rs`
//! declares it, and the `p5` umbrella command includes this same file (`p5 logserver ...`
//! offers the same options without copying them), so it names the library only by its
//! crate name.

use clap::{Args, Parser, Subcommand};
use p5_logserver::allow::AllowList;
use p5_logserver::config::{self, ConnLimits, ServerConfig, StoreConfig};
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

/// The p5 log server: receives event frames from instrumented processes and keeps them,
/// exactly once and durably, in an append-only session store.
#[derive(Debug, Parser)]
#[command(
    name = "p5-logserver",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(flatten)]
    pub serve: ServeArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Options of the server (no subcommand).
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on; the default port 28725 = 0x7035 = 'p5'. Port 0 picks a free port;
    /// the first line on stdout is `listening on ADDR`.
    #[arg(long, default_value = config::DEFAULT_LISTEN)]
    pub listen: String,
    /// Store directory.
    #[arg(long, default_value = config::DEFAULT_STORE)]
    pub store: PathBuf,
    /// Close connections that send nothing for this long (e.g. 500ms, 30s, 10m).
    #[arg(long, default_value = "10m", value_parser = config::parse_duration)]
    pub idle_timeout: Duration,
    /// A new connection must send its Hello within this time.
    #[arg(long, default_value = "10s", value_parser = config::parse_duration)]
    pub hello_timeout: Duration,
    /// A frame must complete within this time of its first byte (slow-loris guard).
    #[arg(long, default_value = "30s", value_parser = config::parse_duration)]
    pub frame_timeout: Duration,
    /// A frame must arrive at least this fast, bytes per second (plus 5 s of grace): a
    /// trickling sender cannot hold memory for the whole frame timeout (0: no minimum).
    #[arg(long, default_value = "1M", value_parser = config::parse_size)]
    pub min_frame_rate: u64,
    /// Most concurrent connections; at the cap a newcomer evicts an idle connection, else it
    /// is refused.
    #[arg(long, default_value_t = 1024)]
    pub max_connections: usize,
    /// Peers allowed to connect: addresses and networks (10.1.0.0/16), `loopback`, `local`
    /// (this host's own networks) or `any`, comma-separated. Default: `loopback` when
    /// listening on a loopback address, else `loopback,local`. See docs/security.md.
    #[arg(long)]
    pub allow: Option<AllowList>,
    /// Bytes of received, not yet durable frames held in memory, server-wide (e.g. 256M).
    #[arg(long, default_value = "256M", value_parser = config::parse_size)]
    pub inflight: u64,
    /// Start a new segment once one would grow past this size.
    #[arg(long, default_value = "256M", value_parser = config::parse_size)]
    pub segment_size: u64,
    /// Group commit: sync after at most this many queued bytes.
    #[arg(long, default_value = "16M", value_parser = config::parse_size)]
    pub commit_bytes: u64,
    /// Group commit: wait this long before each sync for more records to join.
    #[arg(long, default_value = "0ms", value_parser = config::parse_duration)]
    pub commit_delay: Duration,
    /// Async worker threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Summarize a store: sessions, processes, streams, sensors, clock samples, repairs.
    Inspect {
        /// Store directory.
        dir: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Import runtime spool files (a Hello frame followed by data frames) into a store.
    Import {
        /// Store directory (must not be in use by a running server).
        #[arg(long)]
        store: PathBuf,
        /// Spool files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

/// A failed command. The message says what failed; the cause is the `source` (so a binary's
/// `{:#}` prints the whole chain once).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The server stopped on an error.
    #[error("log server on store {} failed", store.display())]
    Serve {
        /// The store.
        store: PathBuf,
        /// Why.
        #[source]
        source: p5_logserver::Error,
    },
    /// A store could not be inspected (the error names the directory or file).
    #[error(transparent)]
    Inspect(p5_logserver::Error),
    /// Spool files could not be imported.
    #[error("cannot import into {}", store.display())]
    Import {
        /// The store.
        store: PathBuf,
        /// Why.
        #[source]
        source: p5_logserver::Error,
    },
    /// Some files of an import failed (each is reported in the output).
    #[error("some files could not be imported")]
    ImportFailed,
    /// Writing JSON output failed.
    #[error("cannot write JSON")]
    Json(#[source] serde_json::Error),
    /// Writing output failed.
    #[error("cannot write output")]
    Output(#[from] std::io::Error),
}

/// Runs what the command line asks for.
pub fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        None => serve(cli.serve),
        Some(Command::Inspect { dir, json }) => inspect(&dir, json),
        Some(Command::Import { store, files }) => import(&store, &files),
    }
}

/// True if the error (or any of its causes) is a closed pipe (`p5-logserver inspect STORE |
/// head` is not an error).
pub fn is_broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(c) = cur {
        let pipe = c
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<serde_json::Error>()
                .and_then(|j| j.io_error_kind())
                .is_some_and(|k| k == std::io::ErrorKind::BrokenPipe);
        if pipe {
            return true;
        }
        cur = c.source();
    }
    false
}

impl ServeArgs {
    /// The server's configuration.
    pub fn config(self) -> ServerConfig {
        let a = self;
        ServerConfig {
            listen: a.listen,
            store: a.store,
            limits: ConnLimits {
                hello_timeout: a.hello_timeout,
                idle_timeout: a.idle_timeout,
                frame_timeout: a.frame_timeout,
                min_frame_rate: a.min_frame_rate,
                ..ConnLimits::default()
            },
            max_connections: a.max_connections,
            allow: a.allow,
            inflight_bytes: usize::try_from(a.inflight).unwrap_or(usize::MAX),
            worker_threads: a.threads,
            store_config: StoreConfig {
                segment_max_bytes: a.segment_size,
                commit_max_bytes: usize::try_from(a.commit_bytes).unwrap_or(usize::MAX),
                commit_delay: a.commit_delay,
                ..StoreConfig::default()
            },
        }
    }
}

/// Serves until SIGINT or SIGTERM.
pub fn serve(a: ServeArgs) -> Result<(), CliError> {
    let config = a.config();
    let store = config.store.clone();
    p5_logserver::run(config, print_listening).map_err(|source| CliError::Serve { store, source })
}

/// Prints `listening on ADDR` as the first line on stdout (what scripts and `p5 record` wait
/// for).
pub fn print_listening(addr: std::net::SocketAddr) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "listening on {addr}").and_then(|()| out.flush()) {
        tracing::warn!("cannot print the listening address: {e}");
    }
}

/// Prints a summary of a store, as text or JSON.
pub fn inspect(dir: &std::path::Path, json: bool) -> Result<(), CliError> {
    let summary = p5_logserver::inspect::inspect(dir).map_err(CliError::Inspect)?;
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &summary).map_err(CliError::Json)?;
        writeln!(out)?;
    } else {
        p5_logserver::inspect::render_text(&summary, &mut out)?;
    }
    Ok(())
}

/// Imports spool files into a store.
pub fn import(store: &std::path::Path, files: &[PathBuf]) -> Result<(), CliError> {
    let report = p5_logserver::import::import_files(store, files, StoreConfig::default()).map_err(
        |source| CliError::Import {
            store: store.to_path_buf(),
            source,
        },
    )?;
    let mut out = std::io::stdout().lock();
    for f in &report.files {
        let status = match (&f.error, &f.tail) {
            (Some(e), _) => format!("FAILED: {e}"),
            (None, Some(t)) => format!("stopped early: {t}"),
            (None, None) => "ok".into(),
        };
        writeln!(
            out,
            "{}: {} process(es), {} data frames, {} events: {status}",
            f.path.display(),
            f.processes.len(),
            f.data_frames,
            f.events
        )?;
    }
    for (session, s) in &report.sessions {
        writeln!(
            out,
            "session {session}: {} frames stored, {} duplicates skipped",
            s.frames, s.duplicates
        )?;
    }
    if report.has_errors() {
        return Err(CliError::ImportFailed);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use p5_logserver::Error;

    /// The command's errors say each thing once when printed with their chain.
    #[test]
    fn no_error_repeats_its_cause() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let errors: Vec<Box<dyn std::error::Error>> = vec![
            Box::new(CliError::Inspect(Error::io("cannot open store /x", io()))),
            Box::new(CliError::Serve {
                store: "/x".into(),
                source: Error::io("cannot listen on 1.2.3.4:5", io()),
            }),
        ];
        for e in &errors {
            p5_logserver::error::assert_said_once(e.as_ref());
        }
    }
}
