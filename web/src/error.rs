//! API errors and their JSON form: `{"error": "<lowercase message>"}` with 400 for malformed
//! parameters, 404 for unknown sessions, sensors and files, 401 without the access token and
//! 500 (with the cause logged, not sent) for database failures.

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
    #[error("{0}")]
    Db(#[from] p5_tracedb::Error),
    /// Writing a file the server owns failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

impl ApiError {
    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::Db(_) | ApiError::Io(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let message = if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!("{self}");
            "internal error (see the server log)".to_owned()
        } else {
            self.to_string()
        };
        (status, Json(serde_json::json!({ "error": message }))).into_response()
    }
}
