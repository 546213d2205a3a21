//! The p5 log server: instrumented processes, host agents and OS monitors connect over TCP,
//! say `Hello`, and stream sequenced data frames; the server keeps every frame exactly once,
//! durably, in an append-only *session store* and records, for every frame and ping, the pair
//! (server-relative receipt time `t_s`, sender-relative send time `t_p`) from which `p5 merge`
//! later estimates each process's clock offset and drift (CoSMoS §3: the log server records
//! `t_s − t_p` per buffer).
//!
//! Data flow: [`server`] accepts connections, [`admit`] checks each against the allow-list
//! ([`allow`]) and the connection cap and hands it to a [`conn`] task, which reads and
//! validates frames ([`receiver`]) with memory from the [`budget`] and queues store records
//! to one writer thread per session ([`store`]); the writer deduplicates ([`dedup`]), appends, `fdatasync`s a whole group of
//! records at once and only then lets connections acknowledge them. At start-up [`recover`]
//! repairs torn segment tails and rebuilds the deduplication state. The reading side
//! ([`reader`]) is a streaming API over sessions, segments and records that `p5 merge` reuses;
//! [`inspect`] summarizes a store with it, and [`import`] loads runtime spool files
//! ([`spool`]) through the same writer. The on-disk layout is specified in `docs/store.md`.
//!
//! Times: every `t_s` is nanoseconds since this server run started ([`clock::RunClock`],
//! CLOCK_MONOTONIC based); each segment header carries the run's CLOCK_MONOTONIC and wall-clock
//! start so several runs can be put on one time base.

pub mod admit;
pub mod allow;
pub mod budget;
pub mod clock;
pub mod config;
pub mod conn;
pub mod datagram;
pub mod dedup;
pub mod error;
pub mod import;
pub mod inspect;
pub mod layout;
pub mod local;
pub mod reader;
pub mod receiver;
pub mod recover;
pub mod rxstamp;
pub mod server;
pub mod session;
pub mod spool;
pub mod store;

pub use config::{ConnLimits, ServerConfig, StoreConfig};
pub use error::Error;
pub use local::LocalServer;
pub use server::Server;

/// Runs the log server until SIGINT or SIGTERM: raises the open-files limit to its hard limit,
/// opens (and recovers) the store, binds, tells `listening` the bound address (the binaries
/// print `listening on ADDR` as the first line on stdout), serves, then drains every
/// connection's queued frames, flushes and syncs the store, and returns.
pub fn run(
    config: ServerConfig,
    listening: impl FnOnce(std::net::SocketAddr),
) -> Result<(), Error> {
    admit::raise_fd_limit();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all().thread_name("p5ls-rt");
    if let Some(n) = config.worker_threads {
        builder.worker_threads(n.max(1));
    }
    let runtime = builder
        .build()
        .map_err(|e| Error::io("cannot start the async runtime", e))?;
    runtime.block_on(async move {
        let server = Server::bind(config).await?;
        let shutdown = server::shutdown_signal()?;
        let addr = server.local_addr();
        listening(addr);
        tracing::info!(%addr, "listening");
        let summary = server.run(shutdown).await?;
        tracing::info!(
            connections = summary.connections,
            "log server stopped: store flushed and synced"
        );
        Ok(())
    })
}
