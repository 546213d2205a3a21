//! Finding the files to instrument: the source root, every file under the given paths with
//! its root-relative path, skipping version-control and build-output folders and the output
//! directory itself (when it lies inside the input).

use std::path::{Path, PathBuf};

/// One input file.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Absolute path.
    pub abs: PathBuf,
    /// Path relative to the root, `/`-separated.
    pub rel: String,
}

/// Errors walking the inputs.
#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    /// A path does not exist or cannot be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// No paths given.
    #[error("no input paths")]
    Empty,
}

const SKIP_DIRS: &[&str] = &[".git", ".hg", ".svn", ".p5-instrument"];

fn canon(p: &Path) -> Result<PathBuf, WalkError> {
    p.canonicalize().map_err(|source| WalkError::Io {
        path: p.display().to_string(),
        source,
    })
}

/// The root all `paths` are reported relative to: a single folder itself, otherwise the
/// deepest folder containing every path.
pub fn root(paths: &[PathBuf]) -> Result<PathBuf, WalkError> {
    let mut dirs = Vec::new();
    for p in paths {
        let c = canon(p)?;
        dirs.push(if c.is_dir() {
            c
        } else {
            c.parent().map(Path::to_path_buf).unwrap_or(c)
        });
    }
    let mut root = dirs.first().cloned().ok_or(WalkError::Empty)?;
    for d in &dirs[1..] {
        while !d.starts_with(&root) {
            if !root.pop() {
                break;
            }
        }
    }
    Ok(root)
}

fn rel_of(root: &Path, abs: &Path) -> String {
    abs.strip_prefix(root)
        .unwrap_or(abs)
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Every file under `paths`, sorted by relative path; `exclude` (e.g. the output directory)
/// is skipped.
pub fn files(
    root: &Path,
    paths: &[PathBuf],
    exclude: Option<&Path>,
) -> Result<Vec<Entry>, WalkError> {
    let mut out = Vec::new();
    for p in paths {
        let c = canon(p)?;
        let walker = walkdir::WalkDir::new(&c)
            .follow_links(false)
            .into_iter()
            .filter_entry(|e| {
                let skip_name = e.depth() > 0
                    && e.file_type().is_dir()
                    && (SKIP_DIRS.iter().any(|s| e.file_name() == *s)
                        || e.path().join("CACHEDIR.TAG").is_file());
                let excluded = exclude.is_some_and(|x| e.path() == x);
                !skip_name && !excluded
            });
        for e in walker {
            let e = e.map_err(|err| WalkError::Io {
                path: c.display().to_string(),
                source: err.into(),
            })?;
            if e.file_type().is_file() {
                out.push(Entry {
                    rel: rel_of(root, e.path()),
                    abs: e.path().to_path_buf(),
                });
            }
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    out.dedup_by(|a, b| a.rel == b.rel);
    Ok(out)
}
