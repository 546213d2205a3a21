//! API errors and their JSON form: `{"error": "<lowercase message>"}` with 400 for malformed
//! parameters, 413 for a body over [`crate::api::MAX_BODY`], 404 for unknown sessions, sensors and files, 401 without the access token and
//! 500 for failures, which say in one line what went wrong and what to do ("database damaged:
//! database disk image is malformed; re-merge the session …", "database unavailable: …"),
//! never a bare "internal error"; the same line goes to the server log.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;
use std::path::PathBuf;

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// An open address without a token.
    #[error("listening on non-loopback address {0} needs an access token (--token)")]
    NeedsToken(SocketAddr),
    /// The database: a bad URL, unreachable, or not a p5 database.
    #[error(transparent)]
    Db(#[from] p5_tracedb::Error),
    /// A SQLite file that fails `PRAGMA quick_check`.
    #[error("{url} is damaged ({problems}): {REMERGE}")]
    Damaged {
        /// The URL, without password.
        url: String,
        /// What the check found.
        problems: String,
    },
    /// `--select-dir` is missing.
    #[error("selection directory {} does not exist", .0.display())]
    NoSelectDir(PathBuf),
    /// The snapshot directory could not be created.
    #[error("cannot create cache directory {}: {source}", path.display())]
    CacheDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Binding the address failed.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Running the server failed.
    #[error("serving: {0}")]
    Io(#[from] std::io::Error),
}

/// An error answering an API request.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A malformed request parameter.
    #[error("{0}")]
    BadRequest(String),
    /// An unknown session, sensor or resource.
    #[error("{0}")]
    NotFound(String),
    /// Missing or wrong access token.
    #[error("access token required")]
    Unauthorized,
    /// A feature that the server was started without (e.g. saving selections).
    #[error("{0}")]
    Conflict(String),
    /// The database failed.
    #[error("{}", describe(.0))]
    Db(#[from] p5_tracedb::Error),
    /// The database failed its integrity check after the server started.
    #[error("database damaged: {0}; {REMERGE}")]
    Damaged(String),
    /// Writing a file the server owns failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// Work the server does for a request failed (a task that panicked or was cancelled).
    #[error("{0}")]
    Internal(String),
    /// A request axum refused before the handler (a body too large or not UTF-8).
    #[error("{1}")]
    Rejected(StatusCode, String),
}

/// What to do about a damaged database.
pub const REMERGE: &str = "re-merge the session from its store (p5 merge STORE --db URL) or \
    restore the file from a copy";

/// A database failure in one line, saying what it means: damage, an unreachable server, or
/// the driver's message.
fn describe(e: &p5_tracedb::Error) -> String {
    let p5_tracedb::Error::Db(d) = e else {
        return format!("database error: {e}");
    };
    if let Some(damage) = crate::integrity::damage(d) {
        return format!("database damaged: {damage}; {REMERGE}");
    }
    match d {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
            format!("database unavailable: {d}; check that it is reachable and try again")
        }
        sqlx::Error::Database(db) => format!("database error: {}", db.message()),
        _ => format!("database error: {d}"),
    }
}

impl ApiError {
    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::Rejected(status, _) => *status,
            ApiError::Db(_) | ApiError::Damaged(_) | ApiError::Io(_) | ApiError::Internal(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let message = self.to_string();
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!("{message}");
        }
        (status, Json(serde_json::json!({ "error": message }))).into_response()
    }
}
