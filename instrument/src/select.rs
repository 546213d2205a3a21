//! The selection file, `p5.select.toml`: which files and functions get sensors, and which
//! regions get statement-level sensors — the interactive half of the CoSMoS tuning cycle
//! (seed 004 §2.1). The web UI will write this file; keep it small and stable.
//!
//! ```toml
//! # every key is optional
//! files = ["src/**"]                  # file globs (relative paths); default: every file
//! exclude_files = ["src/vendor/**"]
//! functions = ["net_*", "Server::*"]  # function-name globs; default: every function
//! exclude_functions = ["*_fast"]
//! always = ["parse_*"]                # pinned on: recorded on every call, never throttled
//! count_only = ["hash_*"]             # pinned off: calls only counted (C/C++ `P5_SCOPE_COUNT`)
//!
//! [[region]]                          # a region by line range (inclusive)
//! name = "parse loop"
//! file = "src/parse.c"
//! lines = [120, 148]
//! ```
//!
//! Globs use `*` (not across `/` for files), `**` and `?`. A function glob is matched against
//! the qualified name (`Server::handle`, `pkg.Class.method`) and against the bare name.
//! Regions can also be marked in the source with comments, which needs no selection file:
//! `// p5:begin NAME` … `// p5:end` (`# p5:begin NAME` in Python). A region gets a `region`
//! sensor around it and a `statement` sensor before each statement in it; regions are
//! instrumented even inside functions the globs exclude.
//!
//! [`SelectionFile`] is the file's one type, shared with `p5 web` through `p5_wire::selection`:
//! the viewer builds it from the source panel and writes it with [`SelectionFile::to_toml`];
//! [`Selection::load`] reads it back and compiles its globs.

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};
pub use p5_wire::selection::{FILE_NAME, LineRegion, SelectionFile};
use std::path::Path;

/// Errors reading a selection file.
#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    /// The file could not be read.
    #[error("cannot read selection file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The TOML is malformed.
    #[error("bad selection file {path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
}

/// A compiled selection.
#[derive(Debug, Clone)]
pub struct Selection {
    files: Option<GlobSet>,
    exclude_files: GlobSet,
    functions: Option<GlobSet>,
    exclude_functions: GlobSet,
    always: GlobSet,
    count_only: GlobSet,
    /// Regions by line range.
    pub regions: Vec<LineRegion>,
}

/// How a selected function's scope sensor may be throttled at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pin {
    /// Throttled by the runtime when hot and tiny (`P5_SCOPE`).
    Auto,
    /// Always recorded (`P5_SCOPE_ALWAYS`).
    Always,
    /// Only counted (`P5_SCOPE_COUNT`).
    CountOnly,
}

impl Pin {
    /// The C/C++ guard macro.
    pub fn c_macro(self) -> &'static str {
        match self {
            Pin::Auto => "P5_SCOPE",
            Pin::Always => "P5_SCOPE_ALWAYS",
            Pin::CountOnly => "P5_SCOPE_COUNT",
        }
    }
}

impl Default for Selection {
    fn default() -> Self {
        Selection {
            files: None,
            exclude_files: GlobSet::empty(),
            functions: None,
            exclude_functions: GlobSet::empty(),
            always: GlobSet::empty(),
            count_only: GlobSet::empty(),
            regions: Vec::new(),
        }
    }
}

fn set(globs: &[String], path_like: bool, origin: &str) -> Result<GlobSet, SelectError> {
    let mut b = GlobSetBuilder::new();
    for g in globs {
        let glob = if path_like {
            GlobBuilder::new(g).literal_separator(true).build()
        } else {
            Glob::new(g)
        };
        b.add(glob.map_err(|e| SelectError::Parse {
            path: origin.to_owned(),
            message: format!("glob {g:?}: {e}"),
        })?);
    }
    b.build().map_err(|e| SelectError::Parse {
        path: origin.to_owned(),
        message: e.to_string(),
    })
}

impl Selection {
    /// Everything selected, no regions.
    pub fn all() -> Self {
        Self::default()
    }

    /// Reads and compiles a selection file.
    pub fn load(path: &Path) -> Result<Self, SelectError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| SelectError::Read {
            path: origin.clone(),
            source,
        })?;
        Self::parse(&text, &origin)
    }

    /// Compiles a selection from TOML text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, SelectError> {
        let raw = SelectionFile::from_toml(text, origin).map_err(|e| SelectError::Parse {
            path: e.origin,
            message: e.message,
        })?;
        let opt = |v: &[String], p| -> Result<Option<GlobSet>, SelectError> {
            if v.is_empty() {
                Ok(None)
            } else {
                set(v, p, origin).map(Some)
            }
        };
        Ok(Selection {
            files: opt(&raw.files, true)?,
            exclude_files: set(&raw.exclude_files, true, origin)?,
            functions: opt(&raw.functions, false)?,
            exclude_functions: set(&raw.exclude_functions, false, origin)?,
            always: set(&raw.always, false, origin)?,
            count_only: set(&raw.count_only, false, origin)?,
            regions: raw.regions,
        })
    }

    /// Whether functions of file `rel` (relative, `/`-separated) get automatic sensors.
    pub fn file(&self, rel: &str) -> bool {
        self.files.as_ref().is_none_or(|s| s.is_match(rel)) && !self.exclude_files.is_match(rel)
    }

    /// Whether the function with qualified name `qualified` (bare name `bare`) is selected.
    pub fn function(&self, qualified: &str, bare: &str) -> bool {
        let hit = |s: &GlobSet| s.is_match(qualified) || s.is_match(bare);
        self.functions.as_ref().is_none_or(hit) && !hit(&self.exclude_functions)
    }

    /// The function's pinning (`always` wins over `count_only`).
    pub fn pin(&self, qualified: &str, bare: &str) -> Pin {
        let hit = |s: &GlobSet| s.is_match(qualified) || s.is_match(bare);
        if hit(&self.always) {
            Pin::Always
        } else if hit(&self.count_only) {
            Pin::CountOnly
        } else {
            Pin::Auto
        }
    }

    /// Line regions for file `rel`.
    pub fn regions_in<'a>(&'a self, rel: &'a str) -> impl Iterator<Item = &'a LineRegion> + 'a {
        self.regions.iter().filter(move |r| r.file == rel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_file_round_trips_through_toml() {
        let file = SelectionFile {
            files: vec!["src/**".into()],
            exclude_files: vec![],
            functions: vec!["try_word".into(), "a\"b\\c\u{1}".into()],
            exclude_functions: vec!["main".into()],
            always: vec!["parse_*".into()],
            count_only: vec!["hash".into()],
            regions: vec![LineRegion {
                name: "loop \"x\"".into(),
                file: "src/cow.c".into(),
                lines: [10, 20],
            }],
        };
        let text = file.to_toml("a test");
        assert!(text.starts_with("# p5 instrumentation selection, written by a test\n"));
        assert!(text.contains("[[region]]"), "{text}");
        assert_eq!(SelectionFile::from_toml(&text, "t").unwrap(), file);
        let sel = Selection::parse(&text, "t").unwrap();
        assert!(sel.function("try_word", "try_word") && !sel.function("main", "main"));
        assert_eq!(sel.pin("parse_x", "parse_x"), Pin::Always);
        assert_eq!(sel.pin("S::hash", "hash"), Pin::CountOnly);
        assert_eq!(sel.pin("try_word", "try_word"), Pin::Auto);
        assert_eq!(sel.regions, file.regions);
        // The browser's JSON spells the list `regions`.
        let json = r#"{"functions":["f"],"regions":[{"name":"r","file":"f.c","lines":[1,2]}]}"#;
        let from_json: SelectionFile = serde_json::from_str(json).unwrap();
        assert_eq!(from_json.regions.len(), 1);
        assert_eq!(
            SelectionFile::from_toml(&from_json.to_toml("t"), "t").unwrap(),
            from_json
        );
    }

    #[test]
    fn globs_include_and_exclude() {
        let s = Selection::parse(
            r#"
files = ["src/**"]
exclude_files = ["src/vendor/**"]
functions = ["net_*", "Server::*"]
exclude_functions = ["net_fast"]
[[region]]
name = "loop"
file = "src/a.c"
lines = [3, 9]
"#,
            "t",
        )
        .unwrap();
        assert!(s.file("src/a.c"));
        assert!(s.file("src/x/y.c"));
        assert!(!s.file("src/vendor/z.c"));
        assert!(!s.file("main.c"));
        assert!(s.function("net_send", "net_send"));
        assert!(s.function("Server::run", "run"));
        assert!(!s.function("net_fast", "net_fast"));
        assert!(!s.function("main", "main"));
        assert_eq!(s.regions_in("src/a.c").count(), 1);
        assert!(Selection::all().function("x", "x"));
    }

    #[test]
    fn bad_files_are_errors() {
        assert!(Selection::parse("files = 3", "t").is_err());
        assert!(Selection::parse("nonsense = []", "t").is_err());
        assert!(Selection::parse("[[region]]\nname='a'\nfile='b'\nlines=[5,2]", "t").is_err());
        assert!(Selection::parse("functions = ['[']", "t").is_err());
    }
}
