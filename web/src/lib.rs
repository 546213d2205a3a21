//! `p5 web`: the trace viewer. An axum server reads a merged session from SQLite or
//! PostgreSQL (the schema of `p5 merge`) and serves a versioned JSON API (`/api/v1`) and an
//! embedded canvas front end: per-process Gantt rows with states, nested function intervals,
//! message arrows, CPU scheduling and IRQs, host load charts on the same axis, animation with
//! a time cursor, statistics, and click-back from any bar to its source line, from where the
//! next instrumentation selection (`p5.select.toml`) is written (CoSMoS §2.4, §4).
//!
//! Entry point: [`run`] with [`WebOptions`] (what the `p5 web` subcommand parses). Tests and benchmarks use
//! [`server::app`] and [`index::SessionIndex`] directly.

pub mod api;
pub mod assets;
pub mod compare;
pub mod error;
pub mod flows;
pub mod index;
pub mod instance;
pub mod integrity;
pub mod lod;
pub mod paths;
pub mod selection;
pub mod serve;
pub mod server;
pub mod snapshot;
pub mod stats;

use std::net::SocketAddr;
use std::path::PathBuf;

/// The address the viewer listens on unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8055";

/// What [`run`] serves and how (the options of `p5 web`; its command line lives in the `p5`
/// binary).
#[derive(Debug, Clone)]
pub struct WebOptions {
    /// Trace database: `sqlite:PATH` or `postgres://USER@HOST/DB`.
    pub db: String,
    /// Address to listen on; anything but loopback requires a token.
    pub listen: SocketAddr,
    /// Access token required on every request (Bearer header, cookie, or `?token=` once).
    pub token: Option<String>,
    /// Directory where "save selection" writes `p5.select.toml` (off when `None`).
    pub select_dir: Option<PathBuf>,
    /// Directory for session index snapshots (created if missing); `None`: the default,
    /// `$XDG_CACHE_HOME/p5/web` or `~/.cache/p5/web`.
    pub cache_dir: Option<PathBuf>,
    /// Keep no index snapshots (`cache_dir` is then ignored).
    pub no_cache: bool,
}

impl Default for WebOptions {
    /// No database, [`DEFAULT_LISTEN`], no token, no selections, the default snapshot
    /// directory.
    fn default() -> Self {
        WebOptions {
            db: String::new(),
            listen: DEFAULT_LISTEN.parse().expect("a socket address"),
            token: None,
            select_dir: None,
            cache_dir: None,
            no_cache: false,
        }
    }
}

/// The default snapshot directory: `$XDG_CACHE_HOME/p5/web`, else `$HOME/.cache/p5/web`.
fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("p5").join("web"))
}

/// Runs the server until Ctrl-C. Once it listens, `listening` gets the viewer's address
/// (`http://ADDR/`, with `?token=TOKEN` when there is one).
pub fn run(opts: &WebOptions, listening: impl FnOnce(&str)) -> Result<(), error::StartError> {
    server::check_listen(&opts.listen, opts.token.as_deref())?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let cfg = server::Config {
            db: opts.db.clone(),
            select_dir: opts.select_dir.clone(),
            token: opts.token.clone(),
            cache_dir: if opts.no_cache {
                None
            } else {
                opts.cache_dir.clone().or_else(default_cache_dir)
            },
        };
        let (app, state) = server::app(&cfg).await?;
        let listener = serve::bind(opts.listen).map_err(|source| error::StartError::Listen {
            addr: opts.listen,
            source,
        })?;
        let addr = listener.local_addr()?;
        server::warm(state);
        match &opts.token {
            Some(t) => listening(&format!("http://{addr}/?token={t}")),
            None => listening(&format!("http://{addr}/")),
        }
        serve::serve(listener, app, serve::Limits::default(), async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_default_to_loopback() {
        let o = WebOptions::default();
        assert_eq!(o.listen.to_string(), "127.0.0.1:8055");
        assert!(o.token.is_none() && o.select_dir.is_none() && !o.no_cache);
    }

    #[test]
    fn run_refuses_an_open_address_without_a_token() {
        let o = WebOptions {
            db: "sqlite:t.db".into(),
            listen: "0.0.0.0:1".parse().unwrap(),
            ..WebOptions::default()
        };
        let e = run(&o, |_| {}).unwrap_err().to_string();
        assert!(e.contains("needs an access token"), "{e}");
    }
}
