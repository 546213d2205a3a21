//! The accept loop, built so that idle, slow or hostile connections cannot stop a real client
//! from being answered (issue 12 D6, issue 46 D6/D10), the way hardened HTTP servers do it:
//!
//! - **Always accept.** A server that stops accepting at its connection cap leaves new
//!   clients in the kernel's queue behind the attacker's, and once that queue is full their
//!   SYNs are dropped (retried after 1, 3, 7, 15 s). So every connection is accepted at once
//!   (deferred: the kernel hands one over once its request is there, see [`bind`]) and
//!   entered into the [`table`]; when that puts the table over [`Limits::max_connections`]
//!   (derived from `RLIMIT_NOFILE` at start, leaving descriptors for the database and files:
//!   see [`connection_cap`]), or its peer over [`Limits::max_per_peer`], one connection is
//!   evicted: the idle ones first, then the slow ones, from the peer holding the most (busy
//!   ones last; see [`table`] for the order).
//!   When only connections with requests in progress, or not yet read from, could go, the
//!   server is overloaded rather than attacked by idle sockets: the loop stops accepting for
//!   up to [`OVERLOAD_WAIT`] while connections end by themselves, so newcomers queue in the
//!   kernel instead of cancelling work (or each other) on arrival.
//!   An evicted connection holds its descriptor until its task drops it, so the loop waits
//!   while [`MAX_CLOSING`] of them are pending (a flood would otherwise overrun the limit).
//!   This host is one peer (every loopback address), exempt from the per-peer limit since a
//!   local attacker and the real user cannot be told apart by address; there the order of
//!   eviction is what keeps the user served: their new connection is the newest, spared
//!   from the moment its request begins to arrive (*reading*, see [`conn`]), and busy once
//!   the application has it.
//! - **Deadlines.** A request header must arrive within [`Limits::header_timeout`] (hyper's
//!   header timer; idle keep-alive connections too); a request body, and the reading of an
//!   answer, within a grace period plus one second per [`Limits::min_rate`] bytes (a reaper
//!   checks every [`REAP_EVERY`]). Hyper's buffers are bounded by [`MAX_BUF`], and a peer that
//!   pipelines requests without reading the answers gets `Connection: close` after
//!   [`Limits::max_pipelined`] ([`track`]).
//! - **Accept errors.** Out of descriptors (`EMFILE`, `ENFILE`) or memory, the loop closes
//!   up to an eighth of the connections (at least one), of those waiting on their peers, to
//!   free descriptors for the queue and pauses 1 ms; when nothing can be freed it backs off
//!   (5 ms doubling to 200 ms) instead of spinning; it warns once per [`WARN_EVERY`] with the
//!   number of failures. Errors of a single connection (reset or aborted before it was
//!   accepted) are skipped.

pub mod conn;
pub mod table;
pub mod track;

use axum::Router;
use conn::Peer;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};
use table::Table;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Largest read or write buffer of a connection (hyper's `max_buf_size`; request headers
/// larger than this are refused with 431).
pub const MAX_BUF: usize = 64 * 1024;
/// Descriptors kept out of [`connection_cap`] for the database pool (up to 8 connections of
/// 3 files each), the index snapshots, the listener, the runtime and [`MAX_CLOSING`].
pub const RESERVED_FDS: u64 = 64;
/// Most evicted connections whose descriptors are not yet closed before the loop waits.
pub const MAX_CLOSING: usize = 16;
/// How often deadlines are checked.
pub const REAP_EVERY: Duration = Duration::from_millis(500);
/// Longest the accept loop waits for room before it evicts work in progress.
pub const OVERLOAD_WAIT: Duration = Duration::from_secs(1);
/// Accept failures are reported at most once per this.
pub const WARN_EVERY: Duration = Duration::from_secs(10);

/// Limits of the accept loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Time a connection has to send a complete request header, counted from when the server
    /// starts waiting for one (a new connection, or an idle keep-alive connection).
    pub header_timeout: Duration,
    /// Most connections open at once; beyond, one is evicted ([`table`]).
    pub max_connections: usize,
    /// Most connections from one peer other than this host; beyond, its own are evicted.
    pub max_per_peer: usize,
    /// Grace period for a request body, beyond which it must arrive at `min_rate`.
    pub body_timeout: Duration,
    /// Grace period for the peer to read an answer, beyond which it must read at `min_rate`.
    pub write_timeout: Duration,
    /// Slowest a request body may arrive, or an answer be read, after its grace (bytes/s).
    pub min_rate: u64,
    /// Most requests answered in a row while the peer reads none of the answers.
    pub max_pipelined: u32,
}

impl Default for Limits {
    fn default() -> Self {
        let cap = connection_cap();
        Limits {
            header_timeout: Duration::from_secs(10),
            max_connections: cap,
            max_per_peer: (cap / 4).max(8),
            body_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
            min_rate: 16 * 1024,
            max_pipelined: 16,
        }
    }
}

/// The connection cap for this process: [`cap_for`] its soft `RLIMIT_NOFILE`.
pub fn connection_cap() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass and reads nothing else.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur
    } else {
        1024
    };
    cap_for(soft)
}

/// The connection cap under a descriptor limit of `soft`: all but [`RESERVED_FDS`], at least
/// 8 and at most 1024 (a viewer serves a handful of people; 1024 connections with full
/// buffers are 128 MiB).
pub fn cap_for(soft: u64) -> usize {
    usize::try_from(soft.saturating_sub(RESERVED_FDS)).map_or(1024, |n| n.clamp(8, 1024))
}

/// Longest queue of connections the kernel keeps for the accept loop (it caps this at
/// `net.core.somaxconn`).
pub const BACKLOG: u32 = 4096;

/// Seconds the kernel holds a connection that has sent nothing before handing it to accept
/// (`TCP_DEFER_ACCEPT`, nginx's `listen … deferred`).
pub const DEFER_ACCEPT_S: libc::c_int = 2;

/// Binds `addr` with a [`BACKLOG`]-long accept queue (std's `bind` asks for 128) and deferred
/// accept: the kernel hands over a connection once its first bytes (the request) are there, or
/// after [`DEFER_ACCEPT_S`], so silent sockets hold no descriptor meanwhile and a real client's
/// connection has its request ready when it is first read.
pub fn bind(addr: std::net::SocketAddr) -> io::Result<TcpListener> {
    use std::os::fd::AsRawFd;
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    let listener = socket.listen(BACKLOG)?;
    let secs = DEFER_ACCEPT_S;
    // SAFETY: setsockopt reads `secs` (a c_int, as TCP_DEFER_ACCEPT takes) on our own socket.
    let rc = unsafe {
        libc::setsockopt(
            listener.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            (&raw const secs).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        tracing::warn!("cannot defer accepts: {}", io::Error::last_os_error());
    }
    Ok(listener)
}

/// Serves `app` on `listener` until `shutdown` completes, then lets open connections finish
/// their current request (for at most 5 s).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) {
    let table = Arc::new(Table::new(limits.max_connections, limits.max_per_peer));
    let (stop_tx, stop_rx) = watch::channel(false);
    let reaper = tokio::spawn(reap(table.clone(), limits));
    let mut trouble = Trouble::default();
    tokio::pin!(shutdown);
    loop {
        // Evicted connections hold their descriptors until their tasks drop them: under a
        // flood, let them go before accepting more.
        while table.closing() >= MAX_CLOSING {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let accepted = tokio::select! {
            r = listener.accept() => r,
            () = &mut shutdown => break,
        };
        match accepted {
            Ok((stream, addr)) => {
                trouble.ok();
                match admit(&table, Peer::of(addr.ip())).await {
                    Some(conn) => {
                        tracing::trace!("connection {} from {addr}", conn.id);
                        let entry = Entry(table.clone(), conn.clone());
                        let task = connection(stream, conn, app.clone(), limits, stop_rx.clone());
                        tokio::spawn(async move {
                            let _entry = entry;
                            task.await;
                        });
                    }
                    None => refuse(&stream),
                }
            }
            Err(e) if single_connection(&e) => tracing::debug!("accept: {e}"),
            Err(e) => {
                let freed = if out_of_resources(&e) {
                    table.evict_idle((table.len() / 8).max(1))
                } else {
                    0
                };
                let pause = trouble.failed(&e, freed);
                tokio::time::sleep(pause).await;
            }
        }
    }
    reaper.abort();
    let _ = stop_tx.send(true);
    let end = Instant::now() + Duration::from_secs(5);
    while !table.is_empty() && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Enters a connection into the table. When making room would take a connection whose
/// request is being worked on or that has not been read from yet, the server is overloaded:
/// the loop stops accepting (newcomers wait in the kernel's queue) until room is made by
/// connections ending, for at most [`OVERLOAD_WAIT`], then takes the oldest of those.
async fn admit(table: &Table, peer: Peer) -> Option<Arc<conn::Conn>> {
    let start = Instant::now();
    loop {
        let force = start.elapsed() >= OVERLOAD_WAIT;
        if let Some(c) = table.admit(peer, force) {
            if start.elapsed() > Duration::from_millis(10) {
                tracing::debug!(
                    "overloaded: connection {} waited {:?}",
                    c.id,
                    start.elapsed()
                );
            }
            return Some(c);
        }
        if force {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// A connection's place in the table, given up when its task ends, even by a panic (else
/// it would count against the cap, and once evicted as closing, for good).
struct Entry(Arc<Table>, Arc<conn::Conn>);

impl Drop for Entry {
    fn drop(&mut self) {
        self.0.remove(&self.1);
    }
}

/// Serves one connection until it ends, is evicted, or the server stops.
async fn connection(
    stream: TcpStream,
    conn: Arc<conn::Conn>,
    app: Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) {
    let io = TokioIo::new(track::Tracked::new(stream, conn.clone()));
    let service = track::Service::new(app, conn.clone(), limits.max_pipelined);
    let http = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_BUF)
        .keep_alive(true)
        .serve_connection(io, service);
    tokio::pin!(http);
    let stopped = tokio::select! {
        r = http.as_mut() => { tracing::trace!("connection {} ended: {r:?}", conn.id); false },
        () = conn.kill.notified() => false,
        r = stop.wait_for(|s| *s) => r.is_ok(),
    };
    if stopped {
        http.as_mut().graceful_shutdown();
        tokio::select! {
            _ = http.as_mut() => {}
            () = conn.kill.notified() => {}
        }
    }
}

/// Checks the deadlines of every connection, every [`REAP_EVERY`].
async fn reap(table: Arc<Table>, limits: Limits) {
    let mut tick = tokio::time::interval(REAP_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        table.reap(&limits);
    }
}

/// Turns away a connection that cannot be served (every other one is busy): a 503 if the
/// socket takes it at once, then close.
fn refuse(stream: &TcpStream) {
    const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
        content-length: 42\r\nretry-after: 1\r\nconnection: close\r\n\r\n\
        {\"error\":\"server busy: try again shortly\"}";
    let _ = stream.try_write(BUSY);
}

/// True for accept errors that concern one connection only (it was reset or aborted before
/// it was accepted): the next accept may succeed at once.
fn single_connection(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ECONNABORTED | libc::ECONNRESET | libc::EPROTO | libc::EPERM)
    )
}

/// True for accept errors that closing a connection can cure.
fn out_of_resources(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// Accept failures in a row: the back-off and the rate-limited warning.
#[derive(Debug, Default)]
struct Trouble {
    failures: u32,
    unreported: u64,
    warned: Option<Instant>,
}

impl Trouble {
    fn ok(&mut self) {
        self.failures = 0;
    }

    /// Records a failure after which `freed` connections were closed; the pause before the
    /// next accept: 1 ms when descriptors were freed (the queue drains at once), else 5 ms
    /// doubling to 200 ms.
    fn failed(&mut self, e: &io::Error, freed: usize) -> Duration {
        self.failures = self.failures.saturating_add(1);
        self.unreported += 1;
        if self.warned.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
            tracing::warn!(
                "accepting connections fails ({e}; {} time(s) since the last report); {}",
                self.unreported,
                if freed > 0 {
                    "closing the longest idle connections"
                } else {
                    "retrying"
                }
            );
            self.unreported = 0;
            self.warned = Some(Instant::now());
        }
        if freed > 0 {
            return Duration::from_millis(1);
        }
        let shift = self.failures.saturating_sub(1).min(6);
        Duration::from_millis(5 << shift).min(Duration::from_millis(200))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_descriptors_for_the_database() {
        assert_eq!(cap_for(300), 236);
        assert_eq!(cap_for(1024), 960);
        assert_eq!(cap_for(1 << 20), 1024);
        assert_eq!(cap_for(40), 8);
        assert!(connection_cap() >= 8);
    }

    #[test]
    fn accept_failures_back_off_without_spinning() {
        let mut t = Trouble::default();
        let e = io::Error::from_raw_os_error(libc::EMFILE);
        let pauses: Vec<_> = (0..9).map(|_| t.failed(&e, 0).as_millis()).collect();
        assert_eq!(pauses, [5, 10, 20, 40, 80, 160, 200, 200, 200]);
        assert_eq!(t.failed(&e, 3), Duration::from_millis(1));
        t.ok();
        assert_eq!(t.failed(&e, 0), Duration::from_millis(5));
        assert!(!single_connection(&e));
        assert!(single_connection(&io::Error::from_raw_os_error(
            libc::ECONNABORTED
        )));
    }
}
