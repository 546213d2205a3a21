//! The accept loop: HTTP/1.1 with a header-read timeout (a client that opens a connection and
//! sends no complete request header in time is dropped, idle keep-alive connections included)
//! and a cap on open connections below the process's descriptor limit, so idle or slow
//! sockets cannot take every descriptor and stop all service (issue 12, D6). A connection over
//! the cap waits in the kernel's accept queue until one closes; the timeout guarantees one does.

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

/// Limits of the accept loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Time a connection has to send a complete request header, counted from when the server
    /// starts waiting for one (a new connection, or an idle keep-alive connection).
    pub header_timeout: Duration,
    /// Most connections served at once.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: Duration::from_secs(10),
            max_connections: connection_cap(),
        }
    }
}

/// Half of the descriptors the process may open (at least 8, at most 4096): the rest stay for
/// the database, the cache files and the accept itself.
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
    usize::try_from(soft / 2).unwrap_or(4096).clamp(8, 4096)
}

/// Serves `app` on `listener` until `shutdown` completes, then lets open connections finish
/// their current request.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    // Out of descriptors or a connection reset before accept: wait, go on.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let service = TowerToHyperService::new(app.clone());
        let mut stop = stop_rx.clone();
        let timeout = limits.header_timeout;
        tokio::spawn(async move {
            let _permit = permit;
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(timeout)
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            let stopped = tokio::select! {
                _ = conn.as_mut() => false,
                r = stop.wait_for(|s| *s) => r.is_ok(),
            };
            if stopped {
                conn.as_mut().graceful_shutdown();
                let _ = conn.await;
            }
        });
    }
    let _ = stop_tx.send(true);
    // Wait (boundedly) for the connections to finish their requests.
    let all = u32::try_from(limits.max_connections.max(1)).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(Duration::from_secs(5), slots.acquire_many(all)).await;
}
