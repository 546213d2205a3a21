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
/// already holds (a message that repeats its source's) is left out.
pub fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line += ": ";
        }
        line += &text;
    }
    line.replace('\n', " ")
}

/// [`one_line`] for any error.
pub fn one_line_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut line = String::new();
    let mut cur = Some(e);
    while let Some(c) = cur {
        let text = c.to_string();
        if !text.is_empty() && !line.contains(&text) {
            if !line.is_empty() {
                line += ": ";
            }
            line += &text;
        }
        cur = c.source();
    }
    line.replace('\n', " ")
}
