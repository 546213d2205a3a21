//! The three floors: a library crate has a pure core and an edge (I/O); the front — argument
//! parsing with clap, printing, progress bars — lives only in binaries. Two checks keep clap
//! out of the libraries:
//!
//! - No library source file names `clap` (the word, anywhere, comments included). Library
//!   source is every `.rs` file under a member's `src/` except `src/main.rs`, `src/bin/**`,
//!   and the modules `src/main.rs` declares (`mod NAME;` → `src/NAME.rs` and `src/NAME/**`)
//!   when `src/lib.rs` does not declare them too. The front crate `cli` (the `p5` binary and
//!   its library of subcommands) is exempt as a whole.
//! - Only crates with a binary (`src/main.rs` or `src/bin/`) list clap in `[dependencies]`:
//!   a crate that is only a library takes plain option structs. Examples, tests and benches
//!   are binaries, so `[dev-dependencies]` may list it.

use std::path::{Path, PathBuf};

/// Crates that are front as a whole.
const FRONT_CRATES: &[&str] = &["cli"];

/// The workspace's members, from the root `Cargo.toml`.
fn members(root: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("a members line");
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The names of the out-of-line modules `text` declares at its top level (`mod NAME;`).
fn declared_modules(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("pub ").unwrap_or(l);
            let name = l.strip_prefix("mod ")?.strip_suffix(';')?;
            Some(name.trim().to_owned())
        })
        .collect()
}

/// The library source files of the crate in `dir` (see the module documentation).
fn library_files(dir: &Path) -> Vec<PathBuf> {
    let src = dir.join("src");
    let read = |name: &str| std::fs::read_to_string(src.join(name)).unwrap_or_default();
    let in_lib = declared_modules(&read("lib.rs"));
    let front: Vec<String> = declared_modules(&read("main.rs"))
        .into_iter()
        .filter(|m| !in_lib.contains(m))
        .collect();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.retain(|f| {
        let rel = f.strip_prefix(&src).expect("under src");
        let first = rel.components().next().expect("a file");
        let first = first.as_os_str().to_string_lossy();
        let stem = first.strip_suffix(".rs").unwrap_or(&first);
        rel != Path::new("main.rs") && first != "bin" && !front.iter().any(|m| m == stem)
    });
    files.sort();
    files
}

/// True if `text` has `word` as a whole word (not inside an identifier).
fn has_word(text: &str, word: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back().is_none_or(|c| !ident(c));
        let after = text[i + word.len()..]
            .chars()
            .next()
            .is_none_or(|c| !ident(c));
        before && after
    })
}

/// The dependency names listed in the `[dependencies]` table of a `Cargo.toml`.
fn dependencies(manifest: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for l in manifest.lines() {
        let l = l.trim();
        if l.starts_with('[') {
            inside = l == "[dependencies]";
        } else if inside && !l.is_empty() && !l.starts_with('#') {
            let name = l.split(['=', '.', ' ']).next().unwrap_or("");
            out.push(name.to_owned());
        }
    }
    out
}

/// True if the crate in `dir` has a binary target.
fn has_binary(dir: &Path) -> bool {
    dir.join("src/main.rs").exists() || dir.join("src/bin").is_dir()
}

/// Everything that breaks the rules, one line each.
fn problems(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for m in members(root) {
        if FRONT_CRATES.contains(&m.as_str()) {
            continue;
        }
        let dir = root.join(&m);
        for f in library_files(&dir) {
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            if has_word(&text, "clap") {
                let rel = f.strip_prefix(root).unwrap_or(&f);
                out.push(format!("{}: library code names clap", rel.display()));
            }
        }
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
        if !has_binary(&dir) && dependencies(&manifest).iter().any(|d| d == "clap") {
            out.push(format!(
                "{m}/Cargo.toml: a library-only crate depends on clap"
            ));
        }
    }
    out
}

#[test]
fn clap_stays_out_of_the_libraries() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let merge = library_files(&root.join("merge"));
    assert!(
        merge.iter().any(|f| f.ends_with("merge/src/lib.rs")),
        "the check no longer finds library files: {merge:?}"
    );
    let p = problems(&root);
    assert!(
        p.is_empty(),
        "front code in libraries:\n  {}",
        p.join("\n  ")
    );
}

#[test]
fn the_check_catches_what_it_should() {
    assert!(has_word("use clap::Parser;", "clap"));
    assert!(has_word("// parsed by clap", "clap"));
    assert!(!has_word("let clapper = 1; let reclap = 2;", "clap"));
    assert_eq!(
        declared_modules("mod cli;\npub mod run;\nmod t {\n}\n"),
        ["cli", "run"]
    );
    let manifest = "[dependencies]\nclap.workspace = true\nserde = \"1\"\n\n[dev-dependencies]\n\
                    tempfile = \"3\"\n";
    assert_eq!(dependencies(manifest), ["clap", "serde"]);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let logserver = library_files(&root.join("logserver"));
    assert!(
        !logserver.iter().any(|f| f.ends_with("src/cli.rs")),
        "a module only main.rs declares is front: {logserver:?}"
    );
    assert!(logserver.iter().any(|f| f.ends_with("src/lib.rs")));
}
