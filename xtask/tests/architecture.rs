//! `ARCHITECTURE.md` stays a map: at most 300 lines, every repository path it names in
//! backticks exists, and nothing in it is dated — no calendar dates, issue numbers or load
//! averages (measured figures live in `docs/performance.md`, history in git).

use std::path::Path;

const MAX_LINES: usize = 300;

/// Backticked spans of `text` that name a repository path: a `/` inside, no spaces, not
/// absolute or relative to outside the repository, no globs, braces, placeholders or Rust
/// paths.
fn named_paths(text: &str) -> Vec<&str> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            s.contains('/')
                && !s.contains(char::is_whitespace)
                && !s.starts_with(['/', '.', '#', '-', '$', '~'])
                && !s.contains("::")
                && !s.contains("://")
                && !s.contains(['*', '{', '<', '@', '=', '[', '(', ':'])
        })
        .collect()
}

/// Everything that breaks the rules, one line each.
fn problems(text: &str, root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let lines = text.lines().count();
    if lines > MAX_LINES {
        out.push(format!("{lines} lines, more than {MAX_LINES}"));
    }
    for p in named_paths(text) {
        if !root.join(p).exists() {
            out.push(format!("`{p}` does not exist"));
        }
    }
    for (n, l) in text.lines().enumerate() {
        let lower = l.to_lowercase();
        let dated = l.as_bytes().windows(10).any(|w| {
            w[..4].iter().all(u8::is_ascii_digit)
                && w[4] == b'-'
                && w[5..7].iter().all(u8::is_ascii_digit)
                && w[7] == b'-'
                && w[8..].iter().all(u8::is_ascii_digit)
        });
        let issue = lower
            .match_indices("issue ")
            .any(|(i, m)| lower[i + m.len()..].starts_with(|c: char| c.is_ascii_digit()));
        if dated || issue || lower.contains("load average") {
            out.push(format!("line {}: dated or historical: {l}", n + 1));
        }
    }
    out
}

#[test]
fn architecture_is_a_map_whose_paths_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    assert!(
        named_paths(&text).len() > 20,
        "ARCHITECTURE.md names almost no paths: is the check still reading it?"
    );
    let p = problems(&text, &root);
    assert!(p.is_empty(), "ARCHITECTURE.md:\n  {}", p.join("\n  "));
}

#[test]
fn the_check_catches_what_it_should() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let good = "`xtask/` and `xtask/src/main.rs`, `p5 export perfetto`, `a::b/c`, `../x/y`";
    assert_eq!(named_paths(good), ["xtask/", "xtask/src/main.rs"]);
    assert!(problems(good, &root).is_empty());
    let bad = "`xtask/src/gone.rs`\nmeasured 2026-11-28, issue 43, load average 3\n";
    let p = problems(bad, &root);
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(p[0].contains("gone.rs"), "{p:?}");
    let long = "line\n".repeat(MAX_LINES + 1);
    assert_eq!(problems(&long, &root).len(), 1);
}
