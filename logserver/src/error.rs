//! The library's error type. Errors carry their context ("cannot open segment …") in the
//! message and the cause as `source`, so `anyhow`'s `{:#}` prints the whole chain.

use std::io;
use std::path::PathBuf;

/// Anything that can go wrong opening, writing or reading a store, or running the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O operation failed.
    #[error("{context}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Another process (a running log server or import) holds the store's lock.
    #[error("store {} is in use by another process (lock file {})", .root.display(), .lock.display())]
    Locked {
        /// The store directory.
        root: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// A segment file's header is missing or invalid.
    #[error("{}: not a valid p5 segment", .path.display())]
    BadSegment {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: p5_wire::DecodeError,
    },
    /// A session name from a `Hello` or the command line is not allowed.
    #[error(transparent)]
    Session(#[from] crate::session::InvalidSession),
    /// The session's writer failed earlier (disk full, I/O error) and accepts nothing more.
    #[error("session {session}: store writer failed: {reason}")]
    WriterFailed {
        /// The session.
        session: String,
        /// The first error the writer hit.
        reason: String,
    },
    /// An input file (spool file) is not what it should be.
    #[error("{0}")]
    Invalid(String),
    /// The store is shutting down.
    #[error("store is closed")]
    Closed,
    /// A configuration value is out of range.
    #[error("invalid configuration: {0}")]
    Config(String),
}

impl Error {
    /// Wraps an I/O error with context.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

/// `map_err` helper: `.map_err(io_at("cannot read", &path))`.
pub(crate) fn io_at<'a>(
    what: &'a str,
    path: &'a std::path::Path,
) -> impl FnOnce(io::Error) -> Error + 'a {
    move |e| Error::io(format!("{what} {}", path.display()), e)
}

/// An error and all its causes, joined with `": "`.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
