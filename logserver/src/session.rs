//! Session names. A session is a directory of the store, named by the client (`P5_SESSION`
//! in the Hello). The name becomes a path component, so it is validated strictly: 1–64 bytes
//! of `[A-Za-z0-9._-]`, not starting with `.` (no `..`, no hidden files, no separators, so no
//! path traversal). An empty name means [`DEFAULT_SESSION`].

/// The session used when a client does not name one.
pub const DEFAULT_SESSION: &str = "default";
/// Longest session name.
pub const MAX_SESSION_LEN: usize = 64;

/// A rejected session name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid session name {name:?}: {why}")]
pub struct InvalidSession {
    /// The name as given (cut to 100 chars for display).
    pub name: String,
    /// The rule it breaks.
    pub why: &'static str,
}

/// Maps a requested session name to the directory name to use, or rejects it.
pub fn resolve(requested: &str) -> Result<&str, InvalidSession> {
    if requested.is_empty() {
        return Ok(DEFAULT_SESSION);
    }
    let bad = |why| InvalidSession {
        name: requested.chars().take(100).collect(),
        why,
    };
    if requested.len() > MAX_SESSION_LEN {
        return Err(bad("longer than 64 bytes"));
    }
    if requested.starts_with('.') {
        return Err(bad("starts with '.'"));
    }
    if !requested
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err(bad("only A-Z a-z 0-9 . _ - are allowed"));
    }
    Ok(requested)
}

/// True if `name` is a valid session directory name (as [`resolve`] would return it).
pub fn is_valid(name: &str) -> bool {
    !name.is_empty() && resolve(name).is_ok_and(|n| n == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(resolve(""), Ok("default"));
        assert_eq!(resolve("run-1.a_B"), Ok("run-1.a_B"));
        for bad in [
            "..",
            ".x",
            "a/b",
            "../etc",
            "a b",
            "é",
            "a\0",
            &"x".repeat(65),
        ] {
            assert!(resolve(bad).is_err(), "{bad:?} accepted");
        }
        assert!(resolve(&"x".repeat(64)).is_ok());
        assert!(is_valid("default"));
        assert!(!is_valid(""));
        assert!(!is_valid(".lock"));
    }
}
