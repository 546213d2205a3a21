//! `p5 web`: its command line, which becomes [`p5_web::WebOptions`], and the line on stderr
//! that gives the viewer's address.

use clap::Args;
use p5_web::WebOptions;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Arguments of `p5 web`.
#[derive(Debug, Clone, Args)]
pub struct WebArgs {
    /// Trace database: `sqlite:PATH` or `postgres://USER@HOST/DB`.
    #[arg(long)]
    pub db: String,
    /// Address to listen on; anything but loopback requires --token.
    #[arg(long, default_value = p5_web::DEFAULT_LISTEN)]
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

impl WebArgs {
    /// The viewer's options.
    pub fn options(&self) -> WebOptions {
        WebOptions {
            db: self.db.clone(),
            listen: self.listen,
            token: self.token.clone(),
            select_dir: self.select_dir.clone(),
            cache_dir: self.cache_dir.clone(),
            no_cache: self.no_cache,
        }
    }
}

/// Serves `opts` until Ctrl-C, printing `p5 web: URL` on stderr once it listens.
pub fn serve(opts: &WebOptions) -> Result<(), p5_web::error::StartError> {
    p5_web::run(opts, |url| eprintln!("p5 web: {url}"))
}

/// Runs `p5 web`.
pub fn run(args: &WebArgs) -> anyhow::Result<()> {
    Ok(serve(&args.options())?)
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
