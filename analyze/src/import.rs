//! `p5 analyze import`: a text trace or pcap captures become a session of the trace
//! database, so that software that was never instrumented opens in the viewer with its
//! arrows (the rows are [`crate::session::import_rows`]); `--truth` adds maketrace's ground
//! truth as an analysis run (`algorithm = "truth"`), its messages mapped to the imported
//! message ids and to the pattern nodes they enter.

use crate::cli::{ImportArgs, Progress};
use crate::input::InputArgs;
use crate::maketrace::GroundTruth;
use crate::session::ImportSource;
use crate::store::MessageIds;
use crate::{Error, Result};
use std::path::Path;

/// The default session name: the file name without its extension.
fn default_name(path: &str) -> String {
    let p = Path::new(path.rsplit_once('@').map_or(path, |(p, _)| p));
    p.file_stem()
        .map_or_else(|| "import".to_owned(), |s| s.to_string_lossy().into_owned())
}

fn read_truth(path: &Path) -> Result<GroundTruth> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_slice(&bytes).map_err(|cause| Error::Json {
        path: path.into(),
        cause,
    })
}

fn now_wall_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Runs `p5 analyze import`.
pub fn run(a: &ImportArgs, progress: &mut dyn FnMut(Progress)) -> Result<()> {
    let url = crate::db::parse_url(&a.db)?;
    if a.truth.is_some() && a.trace.is_none() {
        return Err(Error::Usage(
            "--truth needs the --trace maketrace wrote it for".into(),
        ));
    }
    // Read the ground truth first: a bad file should not leave a half-finished import.
    let truth = a.truth.as_deref().map(read_truth).transpose()?;
    let input = InputArgs {
        trace: a.trace.clone(),
        pcap: a.pcap.clone(),
        node: a.node,
        ..InputArgs::default()
    };
    progress(Progress::Phase("reading", None));
    let mut t = input.read_with_progress(false, progress)?;
    if !t.report.counts.is_empty() {
        eprintln!("{}: {}", t.name, t.report);
    }
    t.trace.sort();
    let (store, first) = match &a.trace {
        Some(p) => (format!("trace:{}", p.display()), p.display().to_string()),
        None => (
            format!("pcap:{}", a.pcap.join(",")),
            a.pcap.first().cloned().unwrap_or_default(),
        ),
    };
    let name = a.session.clone().unwrap_or_else(|| default_name(&first));
    let source = ImportSource {
        store: store.clone(),
        now_wall_ns: now_wall_ns(),
    };
    let (sid, mut ids) = crate::db::import(&url, &name, &t.trace, &source, progress)?;
    eprintln!(
        "{url}: session {name:?} (id {sid}): {} nodes, {} messages",
        t.trace.nodes.len(),
        t.trace.messages.len()
    );
    if let Some(gt) = truth {
        ids.positions = truth_positions(&gt, &ids);
        let run = crate::db::save_result(&url, &name, &gt.result, &store, &ids)?;
        eprintln!("ground truth saved as analysis run {run}");
    }
    Ok(())
}

/// The pattern node each ground-truth message enters, by `msg_ref`; a truth message that
/// the trace does not hold is left out.
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
