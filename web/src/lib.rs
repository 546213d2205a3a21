//! `p5 web`: the trace viewer. An axum server reads a merged session from SQLite or
//! PostgreSQL (the schema of `p5 merge`) and serves a versioned JSON API (`/api/v1`) and an
//! embedded canvas front end: per-process Gantt rows with states, nested function intervals,
//! message arrows, CPU scheduling and IRQs, host load charts on the same axis, animation with
//! a time cursor, statistics, and click-back from any bar to its source line, from where the
//! next instrumentation selection (`p5.select.toml`) is written (CoSMoS §2.4, §4).
//!
//! Entry point: [`run`] with [`WebArgs`] (the `p5 web` subcommand). Tests and benchmarks use
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

use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Arguments of `p5 web`.
#[derive(Debug, Clone, Args)]
pub struct WebArgs {
    /// Trace database: `sqlite:PATH` or `postgres://USER@HOST/DB`.
    #[arg(long)]
    pub db: String,
    /// Address to listen on; anything but loopback requires --token.
    #[arg(long, default_value = "127.0.0.1:8055")]
    pub listen: SocketAddr,
    /// Access token required on every request (Bearer header, cookie, or `?token=` once).
    #[arg(long)]
    pub token: Option<String>,
    /// Directory where "save selection" writes `p5.select.toml` (off when absent).
    #[arg(long)]
    pub select_dir: Option<PathBuf>,
    /// Directory for session index snapshots, which make later starts fast on big sessions
    /// (created if missing) [default: $XDG_CACHE_HOME/p5/web or ~/.cache/p5/web].
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Keep no index snapshots.
    #[arg(long, conflicts_with = "cache_dir")]
    pub no_cache: bool,
}

/// The default snapshot directory: `$XDG_CACHE_HOME/p5/web`, else `$HOME/.cache/p5/web`.
fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("p5").join("web"))
}

/// Runs the server until Ctrl-C.
pub fn run(args: &WebArgs) -> Result<(), error::StartError> {
    server::check_listen(&args.listen, args.token.as_deref())?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let cfg = server::Config {
            db: args.db.clone(),
            select_dir: args.select_dir.clone(),
            token: args.token.clone(),
            cache_dir: if args.no_cache {
                None
            } else {
                args.cache_dir.clone().or_else(default_cache_dir)
            },
        };
        let (app, state) = server::app(&cfg).await?;
        let listener = serve::bind(args.listen).map_err(|source| error::StartError::Listen {
            addr: args.listen,
            source,
        })?;
        let addr = listener.local_addr()?;
        server::warm(state);
        match &args.token {
            Some(t) => eprintln!("p5 web: http://{addr}/?token={t}"),
            None => eprintln!("p5 web: http://{addr}/"),
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
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        web: WebArgs,
    }

    #[test]
    fn arguments_default_to_loopback() {
        let c = Cli::try_parse_from(["p5", "--db", "sqlite:t.db"]).unwrap();
        assert_eq!(c.web.listen.to_string(), "127.0.0.1:8055");
        assert!(c.web.token.is_none() && c.web.select_dir.is_none() && !c.web.no_cache);
        assert!(Cli::try_parse_from(["p5"]).is_err(), "--db is required");
        assert!(
            Cli::try_parse_from(["p5", "--db", "x", "--no-cache", "--cache-dir", "d"]).is_err()
        );
    }

    #[test]
    fn run_refuses_an_open_address_without_a_token() {
        let c =
            Cli::try_parse_from(["p5", "--db", "sqlite:t.db", "--listen", "0.0.0.0:1"]).unwrap();
        let e = run(&c.web).unwrap_err().to_string();
        assert!(e.contains("needs an access token"), "{e}");
    }
}
