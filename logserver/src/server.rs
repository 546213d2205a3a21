//! The accept loop, the connection cap and graceful shutdown.
//!
//! Each accepted connection becomes a task ([`crate::conn`]); past `max_connections` a new
//! connection gets an `Error` frame ("too many connections") and is closed. On
//! shutdown (SIGINT/SIGTERM in the binary, any future in the library) the server stops
//! accepting, tells every connection to stop at its next frame boundary, waits until each has
//! seen its queued frames become durable and sent its final ack, then closes the store, whose
//! writers flush and sync whatever is still queued.

use crate::clock::RunClock;
use crate::config::ServerConfig;
use crate::conn::{self, ConnContext};
use crate::datagram::{self, Pingers};
use crate::error::Error;
use crate::receiver::FrameLimits;
use crate::recover::RecoveryReport;
use crate::rxstamp::StampedRead;
use crate::store::{Store, WriterStats};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

/// Most refused connections answered with an `Error` frame at the same time.
const MAX_POLITE_REFUSALS: usize = 64;

/// What a server run did, returned when it stops.
#[derive(Debug, Clone, Default)]
pub struct ServeSummary {
    /// Connections accepted.
    pub connections: u64,
    /// Connections refused because of the cap.
    pub refused: u64,
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
        let config = config.validate()?;
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
                max_frame_len: limits.max_frame_len,
            },
            hello_timeout: limits.hello_timeout,
            read_buffer: limits.read_buffer,
            budget: Arc::new(Semaphore::new(self.config.inflight_bytes)),
            shutdown: stop_rx,
            pingers,
        };
        let slots = Arc::new(Semaphore::new(self.config.max_connections));
        // Refusals past the cap get a polite `Error` frame from a short task; past this many at
        // once (a connection flood) they are simply closed.
        let refusals = Arc::new(Semaphore::new(MAX_POLITE_REFUSALS));
        let mut tasks = JoinSet::new();
        let mut summary = ServeSummary::default();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                Some(done) = tasks.join_next(), if !tasks.is_empty() => report_task(done),
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let Ok(slot) = slots.clone().try_acquire_owned() else {
                            summary.refused += 1;
                            tracing::warn!(%peer, "connection refused: too many connections");
                            if let Ok(permit) = refusals.clone().try_acquire_owned() {
                                tokio::spawn(async move {
                                    conn::refuse_busy(stream).await;
                                    drop(permit);
                                });
                            }
                            continue;
                        };
                        if let Err(e) = stream.set_nodelay(true) {
                            tracing::debug!(%peer, "cannot set TCP_NODELAY: {e}");
                        }
                        summary.connections += 1;
                        let conn_id = summary.connections;
                        let ctx = ctx.clone();
                        let (rd, wr) = stream.into_split();
                        let receipt = Arc::new(AtomicU64::new(0));
                        let rd = StampedRead::new(rd, ctx.clock.clone(), receipt.clone());
                        tasks.spawn(async move {
                            conn::serve(rd, wr, peer, conn_id, ctx, Some(receipt)).await;
                            drop(slot);
                        });
                    }
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
        drop(ctx);
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
