//! Admitting accepted connections: the allow-list, the connection cap and its evictions.
//!
//! A peer the allow-list does not admit is dropped at once (closed without a byte read or
//! written). A connection that finds a free slot is served at once. At the cap, the
//! newcomer asks the budget to evict one connection ([`Budget::evict_for_slot`]) and waits at
//! most [`ADMIT_WAIT`] for a slot (the evicted connection gives its slot back within
//! moments: it closes without lingering); while newcomers wait, later ones queue behind
//! them rather than take a freed slot first. If nothing may be evicted, or
//! [`MAX_ADMISSIONS`] newcomers are already waiting, the newcomer is refused: an `Error`
//! frame ("too many connections") from a short task, or, past [`MAX_POLITE_REFUSALS`] at
//! once (a connection flood), a plain close.

use crate::allow::Gate;
use crate::budget::Budget;
use crate::conn::{self, ConnContext};
use crate::rxstamp::StampedRead;
use crate::server::ServeSummary;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

/// Most refused connections answered with an `Error` frame at the same time.
pub const MAX_POLITE_REFUSALS: usize = 64;
/// Most newcomers waiting at the same time for the slot of a connection evicted for them.
pub const MAX_ADMISSIONS: usize = 64;
/// Longest a newcomer waits for the slot of the connection evicted for it.
pub const ADMIT_WAIT: Duration = Duration::from_secs(2);

/// The accept loop's side of admission.
#[derive(Debug)]
pub(crate) struct Admission {
    ctx: ConnContext,
    budget: Arc<Budget>,
    gate: Gate,
    slots: Arc<Semaphore>,
    waiting: Arc<Semaphore>,
    refusals: Arc<Semaphore>,
    next_id: u64,
    counts: Arc<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    connections: AtomicU64,
    refused: AtomicU64,
}

impl Admission {
    pub fn new(ctx: ConnContext, budget: Arc<Budget>, gate: Gate, max_connections: usize) -> Self {
        Self {
            ctx,
            budget,
            gate,
            slots: Arc::new(Semaphore::new(max_connections)),
            waiting: Arc::new(Semaphore::new(MAX_ADMISSIONS)),
            refusals: Arc::new(Semaphore::new(MAX_POLITE_REFUSALS)),
            next_id: 0,
            counts: Arc::default(),
        }
    }

    /// The counters so far.
    pub fn summary(&self) -> ServeSummary {
        ServeSummary {
            connections: self.counts.connections.load(Relaxed),
            refused: self.counts.refused.load(Relaxed),
            refused_peers: self.gate.refused(),
            evictions: self.budget.evictions(),
            sessions: Vec::new(),
        }
    }

    /// Admits, queues or refuses one accepted connection (see the module docs).
    pub fn accept(&mut self, stream: TcpStream, peer: SocketAddr, tasks: &mut JoinSet<()>) {
        if !self.gate.admits(peer.ip()) {
            if let Some(n) = self.gate.refuse() {
                tracing::warn!(
                    %peer,
                    refused = n,
                    "connection refused: peer not in the allow-list ({}); see --allow",
                    self.gate.list()
                );
            }
            return;
        }
        let queue_empty = self.waiting.available_permits() == MAX_ADMISSIONS;
        let slot = if queue_empty {
            self.slots.clone().try_acquire_owned().ok()
        } else {
            None
        };
        let mut wait = None;
        if slot.is_none() {
            match self.waiting.clone().try_acquire_owned() {
                Ok(w) if self.budget.evict_for_slot() => wait = Some(w),
                _ => return self.refuse(stream, peer),
            }
        }
        self.next_id += 1;
        let conn_id = self.next_id;
        let (ctx, budget, counts) = (self.ctx.clone(), self.budget.clone(), self.counts.clone());
        let (slots, refusals) = (self.slots.clone(), self.refusals.clone());
        tasks.spawn(async move {
            let slot = match slot {
                Some(s) => s,
                None => {
                    let got = tokio::time::timeout(ADMIT_WAIT, slots.acquire_owned()).await;
                    drop(wait);
                    match got {
                        Ok(Ok(s)) => s,
                        _ => {
                            counts.refused.fetch_add(1, Relaxed);
                            tracing::warn!(%peer, "connection refused: too many connections");
                            return refuse_politely(stream, refusals.try_acquire_owned().ok())
                                .await;
                        }
                    }
                }
            };
            counts.connections.fetch_add(1, Relaxed);
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(%peer, "cannot set TCP_NODELAY: {e}");
            }
            let member = budget.join(conn_id, peer.ip());
            let (rd, wr) = stream.into_split();
            let receipt = Arc::new(AtomicU64::new(0));
            let rd = StampedRead::new(rd, ctx.clock.clone(), receipt.clone());
            conn::serve(rd, wr, peer, conn_id, ctx, Some(receipt), member).await;
            drop(slot);
        });
    }

    fn refuse(&self, stream: TcpStream, peer: SocketAddr) {
        self.counts.refused.fetch_add(1, Relaxed);
        tracing::warn!(%peer, "connection refused: too many connections");
        if let Ok(permit) = self.refusals.clone().try_acquire_owned() {
            tokio::spawn(refuse_politely(stream, Some(permit)));
        }
    }
}

/// Answers a refused connection with an `Error` frame if `permit` allows, else just closes it.
async fn refuse_politely(stream: TcpStream, permit: Option<OwnedSemaphorePermit>) {
    if permit.is_some() {
        conn::refuse_busy(stream).await;
    }
}

/// Descriptors kept free of connections: store files, the listener, the UDP socket, logs.
const SPARE_FDS: u64 = 64;

/// Raises this process's soft limit on open descriptors to its hard limit (a server needs
/// one per connection, and at the limit `accept` fails before the connection cap is reached,
/// so no eviction can make room) and returns the soft limit now in force.
pub fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write only the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        if lim.rlim_cur < lim.rlim_max {
            let want = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
    }
    lim.rlim_cur
}

/// `max_connections`, lowered if needed to fit within the soft descriptor limit.
pub fn fit_fd_limit(max_connections: usize) -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return max_connections;
    }
    let room = usize::try_from(lim.rlim_cur.saturating_sub(SPARE_FDS).max(8)).unwrap_or(usize::MAX);
    if room < max_connections {
        tracing::warn!(
            max_connections,
            open_files_limit = lim.rlim_cur,
            "connection cap lowered to {room} to fit the open-files limit (raise it with ulimit -n)"
        );
    }
    max_connections.min(room)
}
