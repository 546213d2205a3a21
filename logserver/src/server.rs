//! The accept loop, the allow-list, the connection cap and graceful shutdown.
//!
//! A peer the allow-list ([`crate::allow`]) does not admit is closed at once. Each accepted
//! connection joins the memory budget ([`crate::budget`]) and becomes a task
//! ([`crate::conn`]). At `max_connections` a newcomer evicts one idle connection and waits
//! (at most [`crate::admit::ADMIT_WAIT`]) for its slot; if none may be evicted, or too many newcomers are
//! waiting already, it gets an `Error` frame ("too many connections") and is closed. On
//! shutdown (SIGINT/SIGTERM in the binary, any future in the library) the server stops
//! accepting, tells every connection to stop at its next frame boundary, waits until each has
//! seen its queued frames become durable and sent its final ack, then closes the store, whose
//! writers flush and sync whatever is still queued.

use crate::admit::Admission;
use crate::allow::{AllowList, Gate};
use crate::budget::Budget;
use crate::clock::RunClock;
use crate::config::ServerConfig;
use crate::conn::ConnContext;
use crate::datagram::{self, Pingers};
use crate::error::Error;
use crate::receiver::FrameLimits;
use crate::recover::RecoveryReport;
use crate::store::{Store, WriterStats};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// What a server run did, returned when it stops.
#[derive(Debug, Clone, Default)]
pub struct ServeSummary {
    /// Connections accepted.
    pub connections: u64,
    /// Connections refused because of the cap.
    pub refused: u64,
    /// Connections closed at accept because the allow-list does not admit their peer.
    pub refused_peers: u64,
    /// Connections evicted to make room for others (memory or a slot).
    pub evictions: u64,
    /// Per session writer counters.
    pub sessions: Vec<(String, WriterStats)>,
}

/// A bound, recovered, not yet serving log server.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    /// Clock pings over UDP on the listener's address, if that could be bound.
    udp: Option<UdpSocket>,
    addr: SocketAddr,
    store: Arc<Store>,
    clock: Arc<RunClock>,
    config: ServerConfig,
}

impl Server {
    /// Validates the configuration, opens and recovers the store, and binds the listener.
    pub async fn bind(config: ServerConfig) -> Result<Self, Error> {
        let mut config = config.validate()?;
        config.max_connections = crate::admit::fit_fd_limit(config.max_connections);
        let clock = Arc::new(RunClock::start());
        let root = config.store.clone();
        let store_config = config.store_config.clone();
        let c = clock.clone();
        let store = tokio::task::spawn_blocking(move || Store::open(&root, c, store_config))
            .await
            .map_err(|e| Error::io("store recovery task failed", std::io::Error::other(e)))??;
        let listener = TcpListener::bind(&config.listen)
            .await
            .map_err(|e| Error::io(format!("cannot listen on {}", config.listen), e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::io("cannot read the bound address", e))?;
        let allow = config
            .allow
            .get_or_insert_with(|| AllowList::default_for(addr.ip()));
        tracing::info!(%addr, allow = %allow, "peers allowed");
        let udp = match UdpSocket::bind(addr).await {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(%addr, "no clock pings over UDP: cannot bind: {e}");
                None
            }
        };
        Ok(Self {
            listener,
            udp,
            addr,
            store: Arc::new(store),
            clock,
            config,
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// What start-up recovery found and repaired.
    pub fn recovery(&self) -> &RecoveryReport {
        self.store.recovery()
    }

    /// This run's clock and id.
    pub fn clock(&self) -> &RunClock {
        &self.clock
    }

    /// Serves until `shutdown` resolves, then drains and closes (see the module docs).
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> Result<ServeSummary, Error> {
        let (stop_tx, stop_rx) = watch::channel(false);
        let pingers = self.udp.is_some().then(|| Arc::new(Pingers::default()));
        let pinging = self.udp.take().zip(pingers.clone()).map(|(socket, p)| {
            tokio::spawn(datagram::serve(
                socket,
                p,
                self.clock.clone(),
                stop_rx.clone(),
            ))
        });
        let limits = &self.config.limits;
        let ctx = ConnContext {
            store: self.store.clone(),
            clock: self.clock.clone(),
            limits: FrameLimits {
                idle_timeout: limits.idle_timeout,
                frame_timeout: limits.frame_timeout,
                min_frame_rate: limits.min_frame_rate,
                max_frame_len: limits.max_frame_len,
            },
            hello_timeout: limits.hello_timeout,
            read_buffer: limits.read_buffer,
            shutdown: stop_rx,
            pingers,
        };
        let budget = Budget::new(
            self.config.inflight_bytes,
            limits.allowance,
            self.clock.clone(),
        );
        let gate = Gate::new(self.config.allow.clone().unwrap_or_else(AllowList::any));
        let mut admit = Admission::new(ctx, budget, gate, self.config.max_connections);
        let mut tasks = JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                Some(done) = tasks.join_next(), if !tasks.is_empty() => report_task(done),
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, peer)) => admit.accept(stream, peer, &mut tasks),
                    Err(e) => {
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
            }
        }
        tracing::info!(
            connections = tasks.len(),
            "shutting down: draining connections"
        );
        drop(self.listener);
        let _ = stop_tx.send(true);
        while let Some(done) = tasks.join_next().await {
            report_task(done);
        }
        if let Some(task) = pinging {
            let _ = task.await;
        }
        let mut summary = admit.summary();
        drop(admit);
        let store = self.store;
        summary.sessions = tokio::task::spawn_blocking(move || store.close())
            .await
            .map_err(|e| Error::io("store close task failed", std::io::Error::other(e)))?;
        Ok(summary)
    }
}

fn report_task(done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done
        && e.is_panic()
    {
        tracing::error!("connection task panicked: {e}");
    }
}

/// Installs SIGINT and SIGTERM handlers now and returns a future that resolves when either
/// arrives. Install before announcing the address, so that a signal sent right after the
/// announcement still drains the server instead of killing it.
pub fn shutdown_signal() -> Result<impl Future<Output = ()>, Error> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt())
        .map_err(|e| Error::io("cannot install the SIGINT handler", e))?;
    let mut term = signal(SignalKind::terminate())
        .map_err(|e| Error::io("cannot install the SIGTERM handler", e))?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => tracing::info!("SIGINT received"),
            _ = term.recv() => tracing::info!("SIGTERM received"),
        }
    })
}
