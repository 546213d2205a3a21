//! Spool files a recording left behind: what the recorded processes could not deliver to the
//! log server live (it was unreachable for a while, or a process ended before its data was
//! acknowledged and could not wait longer).
//!
//! `p5 record` points the programs' spool directory (`P5_DIR`) at `STORE/.spool`, so the
//! session's spool files are found in one place rather than among everybody's in
//! `$TMPDIR/p5`; after the log server has stopped they are imported into the store — the
//! same path as `p5-logserver import`, deduplicated against what arrived live — and deleted
//! once imported. With `--logserver` the store belongs to that server: the files are listed
//! with the command that imports them there.

use std::path::{Path, PathBuf};

/// The spool directory for the programs of a recording into `store`.
pub fn spool_dir(store: &Path) -> PathBuf {
    std::path::absolute(store)
        .unwrap_or_else(|_| store.to_path_buf())
        .join(".spool")
}

/// The spool files in `dir`, sorted.
pub fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "p5spool"))
        .collect();
    v.sort();
    v
}

/// Imports the spool files in `dir` into the (stopped) log server's `store` and deletes the
/// ones imported whole. Says what it did; nothing if there were none.
pub fn import(store: &Path, dir: &Path) {
    let found = files(dir);
    if found.is_empty() {
        return;
    }
    let config = p5_logserver::StoreConfig::default();
    let report = match p5_logserver::import::import_files(store, &found, config) {
        Ok(r) => r,
        Err(e) => {
            eprintln!(
                "p5 record: {} spool file(s) in {} hold events that never reached the log \
                 server, and importing them failed ({}); try `p5 logserver import --store {} {}/*`",
                found.len(),
                dir.display(),
                crate::record::one_line_text(&e),
                store.display(),
                dir.display()
            );
            return;
        }
    };
    let mut events = 0;
    let mut kept = Vec::new();
    for f in &report.files {
        events += f.events;
        if f.error.is_none() && f.tail.is_none() {
            let _ = std::fs::remove_file(&f.path);
        } else {
            kept.push(f.path.display().to_string());
        }
    }
    eprintln!(
        "p5 record: imported {} spool file(s), {events} events that had not reached the log \
         server live",
        report.files.len()
    );
    if !kept.is_empty() {
        eprintln!(
            "p5 record: kept {} damaged or unreadable spool file(s) for a look: {}",
            kept.len(),
            kept.join(" ")
        );
    }
}

/// Names the spool files in `dir` for a recording into a running log server's store.
pub fn list(dir: &Path) {
    let found = files(dir);
    if found.is_empty() {
        return;
    }
    eprintln!(
        "p5 record: {} spool file(s) in {} hold events that never reached the log server; \
         import them into that server's store while it is stopped: \
         `p5 logserver import --store STORE {}/*`",
        found.len(),
        dir.display(),
        dir.display()
    );
}
