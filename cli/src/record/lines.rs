//! The lines `p5 record` prints for the user: errors on one line, each cause once, and the
//! `p5 merge` command that merges a recording later.
//!
//! An error's causes are joined with `: `, leaving out a cause whose text the line already
//! holds: several libraries' errors repeat their source's message in their own
//! (`cannot open store /x: cannot open store /x: No such file…`).

use super::RecordArgs;
use std::path::Path;

/// The `p5 merge` command that merges this recording (for a merge skipped or left to do).
pub fn merge_command(
    args: &RecordArgs,
    session: &str,
    preload: Option<&crate::preload::Setup>,
) -> String {
    let mut cmd = format!(
        "p5 merge {} --session {}",
        shell_word(&args.store),
        shell_word(Path::new(session))
    );
    let manifests = args.manifests.iter().chain(preload.map(|p| &p.manifest));
    for m in manifests {
        cmd += &format!(" --manifest {}", shell_word(m));
    }
    if let Some(db) = &args.db {
        cmd += &format!(" --db {}", shell_word(Path::new(db)));
    }
    cmd
}

/// `p` as one shell word (single-quoted if it needs quoting).
pub fn shell_word(p: &Path) -> String {
    let s = p.display().to_string();
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@+,".contains(c));
    if plain {
        s
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// An error and its causes on one line, each cause once: a cause whose text the line
/// already holds is left out, and one that repeats the message before it (`cannot open
/// store /x: No such file` after `cannot open store /x`) takes its place.
pub fn one_line(e: &anyhow::Error) -> String {
    join(e.chain().map(|c| c.to_string()))
}

/// [`one_line`] for any error.
pub fn one_line_text(e: &(dyn std::error::Error + 'static)) -> String {
    join(std::iter::successors(Some(e), |c| c.source()).map(|c| c.to_string()))
}

fn join(texts: impl Iterator<Item = String>) -> String {
    let mut parts: Vec<String> = Vec::new();
    for t in texts {
        let t = t.replace('\n', " ");
        if t.is_empty() || parts.iter().any(|p| p.contains(&t)) {
            continue;
        }
        match parts.last_mut() {
            Some(last) if t.contains(last.as_str()) => *last = t,
            _ => parts.push(t),
        }
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error whose message repeats its source's, as some libraries' do.
    #[derive(Debug)]
    struct Repeats(std::io::Error);

    impl std::fmt::Display for Repeats {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "cannot open store /x: {}", self.0)
        }
    }

    impl std::error::Error for Repeats {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    /// A cause already in the line is left out; distinct causes are kept, in order.
    #[test]
    fn each_cause_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let e = anyhow::Error::new(Repeats(io)).context("cannot open store /x");
        assert_eq!(one_line(&e), "cannot open store /x: No such file");
        let e = anyhow::anyhow!("disk full").context("cannot write\nthe file");
        assert_eq!(one_line(&e), "cannot write the file: disk full");
    }

    #[test]
    fn shell_words_are_quoted_when_needed() {
        assert_eq!(
            shell_word(Path::new("p5-store/x.sqlite")),
            "p5-store/x.sqlite"
        );
        assert_eq!(shell_word(Path::new("my store")), "'my store'");
        assert_eq!(shell_word(Path::new("it's")), "'it'\\''s'");
        assert_eq!(shell_word(Path::new("")), "''");
    }
}
