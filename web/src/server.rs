//! The HTTP server: binds (loopback unless told otherwise; any other address requires an
//! access token), serves the embedded front end and `/api/v1`, and warms the session indexes
//! in the background so the first Gantt paint does not pay for loading.
//!
//! Access: with a token, every request must carry it as `Authorization: Bearer TOKEN`, as the
//! `p5_token` cookie, or once as `?token=TOKEN` on the page URL (which sets the cookie).
//! Without one (loopback only), the `Host` header must be exactly a loopback name or address
//! with an optional numeric port, and so must the authority of an absolute-form request
//! target (which HTTP says overrides `Host`), which keeps DNS-rebinding pages on other
//! origins out (`Host: 127.0.0.1:8055@evil.example` is refused).
//!
//! State-changing requests (anything but GET, HEAD and OPTIONS) must also be `application/json`
//! and either carry no `Origin` (curl, scripts) or an `Origin` naming exactly this server's
//! `Host`; otherwise they are refused with 403. A page on another origin can send a "simple"
//! cross-site POST (form or `text/plain`) without a preflight, and the browser attaches the
//! token cookie; this check is what keeps it from overwriting `p5.select.toml`.

use crate::api::{self, AppState};
use crate::assets;
use crate::error::{ApiError, StartError};
use crate::index::Cache;
use crate::integrity;
use crate::snapshot::Snapshots;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use p5_tracedb::DbUrl;
use p5_tracedb::read::{self as query, Reader as Db};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// What the server needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// `sqlite:PATH` or `postgres://…`.
    pub db: String,
    /// Where selections are saved, if anywhere.
    pub select_dir: Option<PathBuf>,
    /// Access token.
    pub token: Option<String>,
    /// Where index snapshots go, if anywhere.
    pub cache_dir: Option<PathBuf>,
}

/// Checks that `listen` is allowed with `token`.
pub fn check_listen(listen: &SocketAddr, token: Option<&str>) -> Result<(), StartError> {
    if !listen.ip().is_loopback() && token.is_none_or(str::is_empty) {
        return Err(StartError::NeedsToken(*listen));
    }
    Ok(())
}

/// Opens the database (refusing one that is not a p5 database, and failing within seconds
/// when a server does not answer) and builds the application.
pub async fn app(cfg: &Config) -> Result<(Router, Arc<AppState>), StartError> {
    let url = DbUrl::parse(&cfg.db)?;
    let db = Db::open(&url).await?;
    let checked = integrity::check_at_start(&url);
    if checked && let Some(problems) = integrity::quick_check(&db).await? {
        db.close().await;
        return Err(StartError::Damaged {
            url: url.to_string(),
            problems,
        });
    }
    if let Some(d) = &cfg.select_dir
        && !d.is_dir()
    {
        return Err(StartError::NoSelectDir(d.clone()));
    }
    let snapshots = match &cfg.cache_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|source| StartError::CacheDir {
                path: dir.clone(),
                source,
            })?;
            Some(Snapshots {
                dir: dir.clone(),
                db_key: cfg.db.clone(),
            })
        }
        None => None,
    };
    let state = Arc::new(AppState {
        db,
        cache: Cache::new(snapshots),
        select_dir: cfg.select_dir.clone(),
        damaged: std::sync::OnceLock::new(),
        unchecked: !checked,
    });
    Ok((router(state.clone(), cfg.token.clone()), state))
}

/// The whole application: front end, API, access control.
pub fn router(state: Arc<AppState>, token: Option<String>) -> Router {
    let token = Arc::new(token.filter(|t| !t.is_empty()));
    Router::new()
        .nest("/api/v1", api::router(state))
        .route("/", get(|| async { assets::serve("") }))
        .route(
            "/assets/{file}",
            get(|axum::extract::Path(f): axum::extract::Path<String>| async move {
                assets::serve(&f)
            }),
        )
        .layer(middleware::from_fn_with_state(token, access))
}

/// Loads every session's index in the background: first the previews of the large ones (a
/// fraction of a second each, so any session paints at once), then the indexes, one session
/// after the other.
pub fn warm(state: Arc<AppState>) {
    tokio::spawn(async move {
        index_all(&state).await;
        if state.unchecked {
            check_later(&state).await;
        }
    });
}

/// The start-up indexing of [`warm`].
async fn index_all(state: &AppState) {
    let sessions = match query::sessions(&state.db).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("cannot list the sessions: {e}");
            return;
        }
    };
    for s in &sessions {
        if let Err(e) = state.cache.preload(&state.db, s.id).await {
            tracing::warn!("session {}: {e}", s.name);
        }
    }
    for s in sessions {
        let t = std::time::Instant::now();
        match state.cache.get(&state.db, s.id).await {
            Ok(_) => tracing::info!("session {} indexed in {:?}", s.name, t.elapsed()),
            Err(e) => tracing::warn!("session {}: {e}", s.name),
        }
    }
}

/// The integrity check of a database too large to check before starting.
async fn check_later(state: &AppState) {
    let t = std::time::Instant::now();
    match integrity::quick_check(&state.db).await {
        Ok(None) => tracing::info!("database checked in {:?}: no damage", t.elapsed()),
        Ok(Some(problems)) => {
            let e = ApiError::Damaged(problems.clone());
            tracing::error!("{e}; every request is answered with this from now on");
            let _ = state.damaged.set(problems);
        }
        Err(e) => tracing::warn!("cannot check the database for damage: {e}"),
    }
}

async fn access(State(token): State<Arc<Option<String>>>, req: Request, next: Next) -> Response {
    if let Err(why) = same_origin_write(&req) {
        return forbidden(why);
    }
    let Some(token) = token.as_ref() else {
        if !names_loopback_only(&req) {
            return ApiError::Unauthorized.into_response();
        }
        return next.run(req).await;
    };
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "));
    let cookie = req
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|h| h.to_str().ok())
        .flat_map(|h| h.split(';'))
        .find_map(|c| c.trim().strip_prefix("p5_token="));
    let query = req.uri().query().and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("token="))
            .map(str::to_owned)
    });
    let ok = |t: Option<&str>| t.is_some_and(|t| same(t.as_bytes(), token.as_bytes()));
    if ok(bearer) || ok(cookie) {
        return next.run(req).await;
    }
    if ok(query.as_deref()) {
        let mut resp = next.run(req).await;
        let c = format!("p5_token={token}; HttpOnly; SameSite=Strict; Path=/");
        if let Ok(v) = HeaderValue::from_str(&c) {
            resp.headers_mut().append(header::SET_COOKIE, v);
        }
        return resp;
    }
    ApiError::Unauthorized.into_response()
}

/// Checks a state-changing request: JSON body, and no `Origin` or one matching `Host`.
fn same_origin_write(req: &Request) -> Result<(), &'static str> {
    if matches!(
        *req.method(),
        axum::http::Method::GET | axum::http::Method::HEAD | axum::http::Method::OPTIONS
    ) {
        return Ok(());
    }
    let h = req.headers();
    let text = |name| h.get(name).and_then(|v: &HeaderValue| v.to_str().ok());
    let json = text(header::CONTENT_TYPE)
        .and_then(|t| t.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return Err("state-changing requests must be application/json");
    }
    let Some(origin) = h.get(header::ORIGIN) else {
        return Ok(());
    };
    let host = text(header::HOST).unwrap_or("");
    let authority = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, a)| a.trim_end_matches('/'));
    match authority {
        Some(a) if !host.is_empty() && a.eq_ignore_ascii_case(host) => Ok(()),
        _ => Err("cross-origin request refused"),
    }
}

fn forbidden(why: &str) -> Response {
    (
        axum::http::StatusCode::FORBIDDEN,
        axum::Json(serde_json::json!({ "error": why })),
    )
        .into_response()
}

/// Constant-time comparison.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// True when every host the request names is a loopback one: its `Host` header, and the
/// authority of an absolute-form target (`GET http://evil.example/ HTTP/1.1`, which HTTP
/// says overrides `Host`).
fn names_loopback_only(req: &Request) -> bool {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    loopback_host(host)
        && req
            .uri()
            .authority()
            .is_none_or(|a| loopback_host(a.as_str()))
}

/// True when `host` (a `Host` header or a URI authority) is exactly a loopback name or
/// address with an optional numeric port: `localhost`, `127.0.0.1:8055`, `[::1]:8055`.
/// Anything else is refused, user information (`127.0.0.1:8055@evil.example`) included.
fn loopback_host(host: &str) -> bool {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((name, tail)) => (
                name,
                tail.strip_prefix(':').or(tail.is_empty().then_some("")),
            ),
            None => return false,
        }
    } else {
        match host.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, Some("")),
        }
    };
    let port_ok = port.is_some_and(|p| p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    let ip = || {
        name.parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
    };
    port_ok && (name.eq_ignore_ascii_case("localhost") || ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_loopback_needs_a_token() {
        let any: SocketAddr = "0.0.0.0:8055".parse().unwrap();
        let lo: SocketAddr = "127.0.0.1:8055".parse().unwrap();
        assert!(check_listen(&any, None).is_err());
        assert!(check_listen(&any, Some("")).is_err());
        assert!(check_listen(&any, Some("s3cret")).is_ok());
        assert!(check_listen(&lo, None).is_ok());
    }

    #[test]
    fn loopback_hosts() {
        assert!(loopback_host("localhost:8055"));
        assert!(loopback_host("127.0.0.1:1"));
        assert!(loopback_host("[::1]:8055"));
        assert!(!loopback_host("evil.example:8055"));
        assert!(!loopback_host(""));
        assert!(
            loopback_host("localhost") && loopback_host("[::1]") && loopback_host("127.0.0.1:")
        );
        // User information, stray characters, bare IPv6, non-numeric ports.
        assert!(!loopback_host("127.0.0.1:8055@evil.example"));
        assert!(!loopback_host("localhost@evil.example"));
        assert!(!loopback_host("[::1]:8055@evil.example"));
        assert!(!loopback_host("[::1]x"));
        assert!(!loopback_host("::1"));
        assert!(!loopback_host("127.0.0.1:80:80"));
        assert!(!loopback_host("127.0.0.1:123456"));
        assert!(!loopback_host("127.0.0.1 :80"));
    }
}
