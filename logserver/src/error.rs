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
    /// A directory given as a store holds no store.
    #[error(
        "{} is not a p5 session store: it has no .lock file and no session directory with \
         *.p5seg segments (give the directory of p5-logserver --store or p5 record --store)",
        .0.display()
    )]
    NotAStore(PathBuf),
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

/// Panics if some part of `e`'s chain ([`chain`]) says what another part already said: the
/// sign of a message that includes its cause while the printer prints the cause as well.
/// For tests of every crate that prints errors this way.
pub fn assert_said_once(e: &dyn std::error::Error) {
    let line = chain(e);
    let mut parts = Vec::new();
    let mut cur: Option<&dyn std::error::Error> = Some(e);
    while let Some(c) = cur {
        parts.push(c.to_string());
        cur = c.source();
    }
    for (i, outer) in parts.iter().enumerate() {
        for inner in &parts[i + 1..] {
            assert!(
                !outer.contains(inner.as_str()),
                "{inner:?} is said twice in {line:?}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receiver::FrameError;
    use crate::spool::SpoolError;

    fn io() -> io::Error {
        io::Error::new(io::ErrorKind::ConnectionReset, "connection reset by peer")
    }

    /// Every error of this crate says each thing once when printed with its chain (as the
    /// binaries and `p5` print errors).
    #[test]
    fn no_error_repeats_its_cause() {
        let decode = p5_wire::DecodeError::Invalid {
            field: "len",
            value: 9,
        };
        let errors: Vec<Box<dyn std::error::Error>> = vec![
            Box::new(Error::io("cannot open store /x", io())),
            Box::new(Error::Locked {
                root: "/s".into(),
                lock: "/s/.lock".into(),
            }),
            Box::new(Error::BadSegment {
                path: "/s/a/0.p5seg".into(),
                source: decode.clone(),
            }),
            Box::new(Error::NotAStore("/tmp".into())),
            Box::new(FrameError::Io(io())),
            Box::new(FrameError::Checksum(decode.clone())),
            Box::new(FrameError::Length(decode.clone())),
            Box::new(SpoolError::Io(io())),
            Box::new(SpoolError::Corrupt {
                offset: 8,
                cause: decode,
            }),
        ];
        for e in &errors {
            assert_said_once(e.as_ref());
        }
    }
}
