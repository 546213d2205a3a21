//! A log server running inside another command (`p5 record`, `p5 demo`): bound on a free
//! loopback port, served on the caller's tokio runtime, stopped (and drained) on request.

use crate::config::ServerConfig;
use crate::error::Error;
use crate::server::{ServeSummary, Server};
use std::net::SocketAddr;
use std::path::Path;
use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A log server serving on a runtime's tasks until [`LocalServer::stop`].
#[derive(Debug)]
pub struct LocalServer {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<ServeSummary, Error>>,
}

impl LocalServer {
    /// Opens (recovers) the store at `store`, binds `127.0.0.1:0` and serves on `rt`.
    /// Call from outside the runtime (it blocks on the bind).
    pub fn start(rt: &Handle, store: &Path) -> Result<Self, Error> {
        let config = ServerConfig {
            listen: "127.0.0.1:0".into(),
            store: store.to_path_buf(),
            ..ServerConfig::default()
        };
        let server = rt.block_on(Server::bind(config))?;
        let addr = server.local_addr();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = rt.spawn(server.run(async move {
            let _ = stopped.await;
        }));
        Ok(LocalServer { addr, stop, task })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, drains every connection to the store and waits for it.
    pub fn stop(self, rt: &Handle) -> Result<ServeSummary, Error> {
        let _ = self.stop.send(());
        rt.block_on(self.task)
            .map_err(|e| Error::Invalid(format!("the log server task failed: {e}")))?
    }
}
