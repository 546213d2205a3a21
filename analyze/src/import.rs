//! `p5 analyze import`: a text trace or pcap captures become a session of the trace
//! database, so that software that was never instrumented opens in the viewer with its
//! arrows (the rows are [`crate::session::import_rows`]); with a ground truth, maketrace's
//! truth is stored as an analysis run too (`algorithm = "truth"`), its messages mapped to
//! the imported message ids and to the pattern nodes they enter.

use crate::db::Database;
use crate::maketrace::GroundTruth;
use crate::progress::Progress;
use crate::session::ImportSource;
use crate::source::Source;
use crate::store::MessageIds;
use crate::{Error, ReadReport, Result};
use std::path::Path;

/// Options of [`import`].
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// A text trace or captures (not a session).
    pub source: Source,
    /// Session name (default: the input file's name without extension); an existing
    /// session of that name is replaced.
    pub session: Option<String>,
    /// Ground truth of a text trace, stored as an analysis run.
    pub truth: Option<GroundTruth>,
    /// Wall clock of the import (ns since the epoch), the session's `merged_at`.
    pub now_wall_ns: i64,
}

/// What [`import`] wrote.
#[derive(Debug, Clone)]
pub struct Imported {
    /// What the reader skipped.
    pub report: ReadReport,
    /// What was read.
    pub name: String,
    /// The session's name and id.
    pub session: (String, i64),
    /// Nodes and messages written.
    pub nodes: usize,
    /// Messages written.
    pub messages: usize,
    /// The ground truth's run, if one was given.
    pub truth_run: Option<i64>,
}

/// The session name a file gives: its name without extension (and without a capture's
/// `@±offset`).
pub fn default_name(path: &str) -> String {
    let p = Path::new(path.rsplit_once('@').map_or(path, |(p, _)| p));
    p.file_stem()
        .map_or_else(|| "import".to_owned(), |s| s.to_string_lossy().into_owned())
}

/// Reads a ground truth maketrace wrote.
pub fn read_truth(path: &Path) -> Result<GroundTruth> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_slice(&bytes).map_err(|cause| Error::Json {
        path: path.into(),
        cause,
    })
}

/// Writes the input of `o` into `db` as a session.
pub fn import(
    db: &mut Database,
    o: ImportOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<Imported> {
    let (store, first) = match &o.source {
        Source::Trace(p) => (format!("trace:{}", p.display()), p.display().to_string()),
        Source::Pcap { files, .. } => {
            let names: Vec<String> = files.iter().map(|f| f.path.display().to_string()).collect();
            (
                format!("pcap:{}", names.join(",")),
                names.first().cloned().unwrap_or_default(),
            )
        }
        Source::Session { .. } => {
            return Err(Error::Usage(
                "import reads a text trace or captures, not a session".into(),
            ));
        }
    };
    if o.truth.is_some() && !matches!(o.source, Source::Trace(_)) {
        return Err(Error::Usage(
            "--truth needs the --trace maketrace wrote it for".into(),
        ));
    }
    progress(Progress::Phase("reading", None));
    let mut t = o.source.read(None, false, progress)?;
    t.trace.sort();
    let name = o.session.unwrap_or_else(|| default_name(&first));
    let source = ImportSource {
        store: store.clone(),
        now_wall_ns: o.now_wall_ns,
    };
    let (sid, mut ids) = db.import(&name, &t.trace, &source, progress)?;
    let truth_run = match o.truth {
        Some(gt) => {
            ids.positions = truth_positions(&gt, &ids);
            Some(db.save_result(&name, (&gt.result, &store, &ids), |_, _, _| {})?)
        }
        None => None,
    };
    Ok(Imported {
        report: t.report,
        name: t.name,
        session: (name, sid),
        nodes: t.trace.nodes.len(),
        messages: t.trace.messages.len(),
        truth_run,
    })
}

fn truth_positions(gt: &GroundTruth, ids: &MessageIds) -> std::collections::HashMap<u64, u32> {
    gt.messages
        .iter()
        .filter(|m| ids.ids.contains_key(&m.msg_ref))
        .map(|m| (m.msg_ref, m.position))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_names_come_from_file_names() {
        assert_eq!(default_name("dir/fig10.p5t"), "fig10");
        assert_eq!(default_name("a.pcap@+2ms"), "a");
        assert_eq!(default_name(""), "import");
    }
}
