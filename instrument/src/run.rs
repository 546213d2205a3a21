//! The whole command: walk the inputs, instrument each source file, write the output tree
//! (or rewrite in place with a backup, or only list), and write the manifest.
//!
//! Output layouts:
//! - `-o OUTDIR`: OUTDIR mirrors the source root — instrumented sources, every other file
//!   copied unchanged so the tree still builds — plus `p5-manifest.json`, `sources/`, and for
//!   C/C++ trees `p5-include/p5.h`. A copied `Cargo.toml` of a package with instrumented Rust
//!   files gets the runtime dependency.
//! - `--in-place`: sources are rewritten where they are; originals go to
//!   `ROOT/.p5-instrument/backup/` (kept from the first run, so repeating is harmless), the
//!   manifest and sources to `ROOT/.p5-instrument/`. `--undo` restores the backups and removes
//!   that folder.
//! - `--dry-run`: nothing is written; the report lists the sensors.

use crate::describe;
use crate::lang::Lang;
use crate::manifest::Builder;
use crate::runtime::{self, RuntimeError};
use crate::select::{SelectError, Selection};
use crate::sensor::{Problem, Sensor};
use crate::unit::{Modes, instrument};
use crate::walk::{self, WalkError};
use std::path::{Path, PathBuf};

/// What to do.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Files and folders to instrument.
    pub paths: Vec<PathBuf>,
    /// Output directory.
    pub out: Option<PathBuf>,
    /// Rewrite in place (with a backup).
    pub in_place: bool,
    /// Restore the in-place backup.
    pub undo: bool,
    /// Only list the sensors.
    pub dry_run: bool,
    /// Modes.
    pub modes: Modes,
    /// Selection file.
    pub select: Option<PathBuf>,
    /// Show a progress bar on large trees.
    pub progress: bool,
}

/// What happened.
#[derive(Debug, Default)]
pub struct Report {
    /// The source root.
    pub root: PathBuf,
    /// Source files parsed.
    pub sources: usize,
    /// Source files whose text changed.
    pub changed: usize,
    /// Other files copied.
    pub copied: usize,
    /// Files restored by `--undo`.
    pub restored: usize,
    /// Sensors per file (relative path), inserted or found.
    pub sensors: Vec<(String, Lang, Sensor)>,
    /// Problems per file.
    pub problems: Vec<(String, Problem)>,
    /// Where the manifest went.
    pub manifest: Option<PathBuf>,
    /// Rust files left without a sensor table (their crate forbids unsafe code).
    pub untabled: usize,
}

/// Errors of a run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Bad arguments.
    #[error("{0}")]
    Usage(String),
    /// Walking the inputs failed.
    #[error(transparent)]
    Walk(#[from] WalkError),
    /// The selection file is bad.
    #[error(transparent)]
    Select(#[from] SelectError),
    /// The runtime could not be located.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// Reading or writing a file failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// Which file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

fn io<'p>(action: &'static str, path: &'p Path) -> impl FnOnce(std::io::Error) -> RunError + 'p {
    move |source| RunError::Io {
        action,
        path: path.display().to_string(),
        source,
    }
}

const STATE_DIR: &str = ".p5-instrument";

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), RunError> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(io("cannot create", d))?;
    }
    std::fs::write(path, bytes).map_err(io("cannot write", path))
}

/// Runs the instrumenter.
pub fn run(opts: &Options) -> Result<Report, RunError> {
    if opts.paths.is_empty() {
        return Err(RunError::Usage("no input paths given".into()));
    }
    let targets = [opts.out.is_some(), opts.in_place, opts.dry_run]
        .iter()
        .filter(|&&b| b)
        .count();
    if opts.undo && (opts.out.is_some() || opts.dry_run) {
        return Err(RunError::Usage("--undo goes with --in-place only".into()));
    }
    if targets != 1 && !opts.undo {
        return Err(RunError::Usage(
            "say where the output goes: -o OUTDIR, --in-place or --dry-run (exactly one)".into(),
        ));
    }
    let root = walk::root(&opts.paths)?;
    if opts.undo {
        return undo(&root);
    }
    let selection = match &opts.select {
        Some(p) => Selection::load(p)?,
        None => Selection::all(),
    };
    let out = match &opts.out {
        Some(o) => Some(output_dir(o, &root)?),
        None => None,
    };
    let entries = walk::files(&root, &opts.paths, out.as_deref())?;
    let bar = if opts.progress && entries.len() > 200 {
        let b = indicatif::ProgressBar::new(entries.len() as u64);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} files {elapsed_precise} {wide_msg}",
        ) {
            b.set_style(style);
        }
        Some(b)
    } else {
        None
    };
    let mut pass = Pass {
        report: Report {
            root: root.clone(),
            ..Report::default()
        },
        manifest: Builder::new(),
        // The tables say where the manifest and `sources/` go.
        tables: Tables::new(match (&out, opts.in_place) {
            (Some(o), _) => Some(o.display().to_string()),
            (None, true) => Some(root.join(STATE_DIR).display().to_string()),
            _ => None,
        }),
        target: Target {
            out: out.clone(),
            in_place: opts.in_place,
            backup: root.join(STATE_DIR).join("backup"),
        },
        c_family: false,
        rust_sensors: false,
    };
    let mut cargo_tomls = Vec::new();
    let cpp_tree = entries
        .iter()
        .any(|e| Lang::from_path(&e.abs) == Some(Lang::Cpp));
    for e in &entries {
        if let Some(b) = &bar {
            b.inc(1);
            b.set_message(e.rel.clone());
        }
        let lang = Lang::from_path_in(&e.abs, cpp_tree);
        let Some(lang) = lang else {
            if let Some(o) = &out {
                if e.rel.rsplit('/').next() == Some("Cargo.toml") {
                    cargo_tomls.push(e.clone());
                } else {
                    let dst = o.join(&e.rel);
                    if let Some(d) = dst.parent() {
                        std::fs::create_dir_all(d).map_err(io("cannot create", d))?;
                    }
                    std::fs::copy(&e.abs, &dst).map_err(io("cannot copy", &e.abs))?;
                    pass.report.copied += 1;
                }
            }
            continue;
        };
        let bytes = std::fs::read(&e.abs).map_err(io("cannot read", &e.abs))?;
        let Ok(src) = String::from_utf8(bytes.clone()) else {
            pass.report.problems.push((
                e.rel.clone(),
                Problem {
                    line: 1,
                    column: 1,
                    message: "not UTF-8; copied unchanged".into(),
                },
            ));
            if let Some(o) = &out {
                write_file(&o.join(&e.rel), &bytes)?;
                pass.report.copied += 1;
            }
            continue;
        };
        pass.source(e, lang, src, opts, &selection)?;
    }
    let Pass {
        mut report,
        manifest,
        tables,
        target,
        c_family,
        rust_sensors,
    } = pass;
    report.untabled = tables.unsafe_forbidden;
    for (file, own) in tables.deferred() {
        emit(&target, &file, &own)?;
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if let Some(o) = &out {
        for t in cargo_tomls {
            let text = std::fs::read_to_string(&t.abs).map_err(io("cannot read", &t.abs))?;
            let text = if rust_sensors {
                runtime::add_cargo_dependency(&text).unwrap_or(text)
            } else {
                text
            };
            write_file(&o.join(&t.rel), text.as_bytes())?;
            report.copied += 1;
        }
        if c_family {
            runtime::write_header(&o.join(runtime::INCLUDE_DIR))?;
        }
        report.manifest = Some(
            manifest
                .write(o, &root)
                .map_err(io("cannot write manifest in", o))?,
        );
    } else if opts.in_place {
        let dir = root.join(STATE_DIR);
        report.manifest = Some(
            manifest
                .write(&dir, &root)
                .map_err(io("cannot write manifest in", &dir))?,
        );
    }
    Ok(report)
}

/// Creates and resolves `-o OUTDIR`, which must not hold the sources.
fn output_dir(o: &Path, root: &Path) -> Result<PathBuf, RunError> {
    std::fs::create_dir_all(o).map_err(io("cannot create", o))?;
    let o = o.canonicalize().map_err(io("cannot resolve", o))?;
    if o == root || root.starts_with(&o) {
        return Err(RunError::Usage(format!(
            "the output directory {} must not contain the sources",
            o.display()
        )));
    }
    Ok(o)
}

/// What a run has gathered so far.
struct Pass {
    report: Report,
    manifest: Builder,
    tables: Tables,
    target: Target,
    c_family: bool,
    rust_sensors: bool,
}

impl Pass {
    /// Instruments one source file and writes it (or keeps it for its headers' tables).
    fn source(
        &mut self,
        e: &walk::Entry,
        lang: Lang,
        src: String,
        opts: &Options,
        selection: &Selection,
    ) -> Result<(), RunError> {
        self.report.sources += 1;
        // An earlier run's sensor-table registration is not part of the program.
        let src = describe::strip(lang, &src).into_owned();
        // Rewritten in place before: the backup holds what the user wrote (and click-back
        // shows). If the file is still what instrumenting the backup gives, the sensors are
        // those of the backup, with its columns.
        let backup = self.target.backup.join(&e.rel);
        let original = match opts.in_place && backup.is_file() {
            true => std::fs::read_to_string(&backup).map_err(io("cannot read", &backup))?,
            false => src.clone(),
        };
        let mut outcome = instrument(lang, &e.rel, &src, opts.modes, selection);
        if original != src {
            let first = instrument(lang, &e.rel, &original, opts.modes, selection);
            if first.text == outcome.text {
                outcome = first;
            }
        }
        if outcome.text != src {
            self.report.changed += 1;
            self.c_family |= matches!(lang, Lang::C | Lang::Cpp);
            self.rust_sensors |= lang == Lang::Rust;
        }
        let sha = self.manifest.add(&e.rel, lang, &original, &outcome.sensors);
        for p in &outcome.problems {
            self.manifest.problem(&e.rel, p);
        }
        let table = self.tables.table(&e.rel, lang, &sha, &outcome.sensors);
        self.report
            .problems
            .extend(outcome.problems.into_iter().map(|p| (e.rel.clone(), p)));
        self.report.sensors.extend(
            outcome
                .sensors
                .into_iter()
                .map(|s| (e.rel.clone(), lang, s)),
        );
        let file = Output {
            rel: e.rel.clone(),
            abs: e.abs.clone(),
            lang,
            src,
            text: outcome.text,
        };
        if let Some(file) = self.tables.take(file, table) {
            emit(&self.target, &file, &[])?;
        }
        Ok(())
    }
}

/// Where instrumented files go.
struct Target {
    out: Option<PathBuf>,
    in_place: bool,
    backup: PathBuf,
}

/// One instrumented file before it is written.
struct Output {
    rel: String,
    abs: PathBuf,
    lang: Lang,
    /// The text read (without an earlier run's registration).
    src: String,
    /// The instrumented text.
    text: String,
}

/// Writes `file` with `tables` registered (to the output tree, or in place with a backup).
fn emit(target: &Target, file: &Output, tables: &[String]) -> Result<(), RunError> {
    let text = describe::embed(file.lang, &file.text, tables, &file.rel)
        .unwrap_or_else(|| file.text.clone());
    if let Some(o) = &target.out {
        write_file(&o.join(&file.rel), text.as_bytes())
    } else if target.in_place && text != file.src {
        let b = target.backup.join(&file.rel);
        if !b.exists() {
            write_file(&b, file.src.as_bytes())?;
        }
        write_file(&file.abs, text.as_bytes())
    } else {
        Ok(())
    }
}

/// The sensor tables of a run (`describe`): C and C++ sources wait for the end, so the
/// tables of the headers they include can go in with theirs.
struct Tables {
    root: Option<String>,
    /// Header tables by file name.
    headers: std::collections::HashMap<String, Vec<String>>,
    deferred: Vec<(Output, Vec<String>)>,
    /// Rust files left without a table: their crate forbids unsafe code.
    unsafe_forbidden: usize,
    /// Whether each crate directory seen forbids unsafe code (its root is read once).
    forbidding: std::collections::HashMap<PathBuf, bool>,
}

impl Tables {
    fn new(root: Option<String>) -> Self {
        Tables {
            root,
            headers: Default::default(),
            deferred: Vec::new(),
            unsafe_forbidden: 0,
            forbidding: Default::default(),
        }
    }

    /// The table of one file (`None` when nothing is written or it has no sensors).
    fn table(&self, rel: &str, lang: Lang, sha: &str, sensors: &[Sensor]) -> Option<String> {
        let root = self.root.as_ref()?;
        if sensors.is_empty() {
            return None;
        }
        let ws = sensors
            .iter()
            .map(|s| crate::manifest::wire_sensor(rel, lang, s))
            .collect();
        Some(describe::table(root, rel, lang, sha, ws))
    }

    /// Takes a file and its table: returns the file if it can be written now with that table
    /// (after registering it in the file's text), or keeps it for [`Tables::deferred`].
    fn take(&mut self, mut file: Output, table: Option<String>) -> Option<Output> {
        let c = matches!(file.lang, Lang::C | Lang::Cpp);
        if c && describe::is_header(&file.rel) {
            if let Some(t) = table {
                let name = file.rel.rsplit('/').next().unwrap_or(&file.rel).to_owned();
                self.headers.entry(name).or_default().push(t);
            }
            return Some(file);
        }
        if c && self.root.is_some() {
            self.deferred.push((file, table.into_iter().collect()));
            return None;
        }
        if let Some(t) = table {
            if file.lang == Lang::Rust && self.forbids_unsafe(&file.abs) {
                self.unsafe_forbidden += 1;
                return Some(file);
            }
            file.text =
                describe::embed(file.lang, &file.text, &[t], &file.rel).unwrap_or(file.text);
        }
        Some(file)
    }

    /// [`describe::forbids_unsafe`], reading each crate's root once.
    fn forbids_unsafe(&mut self, file: &Path) -> bool {
        let Some(dir) = describe::crate_dir(file) else {
            return false;
        };
        *self
            .forbidding
            .entry(dir)
            .or_insert_with_key(|d| describe::crate_forbids_unsafe(d))
    }

    /// The C and C++ sources with their own tables and those of the headers they include.
    fn deferred(self) -> Vec<(Output, Vec<String>)> {
        let headers = self.headers;
        self.deferred
            .into_iter()
            .map(|(file, mut own)| {
                for h in describe::quoted_includes(&file.text) {
                    for t in headers.get(h).into_iter().flatten() {
                        if !own.contains(t) {
                            own.push(t.clone());
                        }
                    }
                }
                (file, own)
            })
            .collect()
    }
}

fn undo(root: &Path) -> Result<Report, RunError> {
    let state = root.join(STATE_DIR);
    let backup = state.join("backup");
    if !backup.is_dir() {
        return Err(RunError::Usage(format!(
            "nothing to undo: no backup in {}",
            backup.display()
        )));
    }
    let mut report = Report {
        root: root.to_path_buf(),
        ..Report::default()
    };
    for e in walkdir::WalkDir::new(&backup) {
        let e = e.map_err(|err| RunError::Io {
            action: "cannot walk",
            path: backup.display().to_string(),
            source: err.into(),
        })?;
        if !e.file_type().is_file() {
            continue;
        }
        let rel = e.path().strip_prefix(&backup).unwrap_or(e.path());
        let dst = root.join(rel);
        std::fs::copy(e.path(), &dst).map_err(io("cannot restore", &dst))?;
        report.restored += 1;
    }
    std::fs::remove_dir_all(&state).map_err(io("cannot remove", &state))?;
    Ok(report)
}
