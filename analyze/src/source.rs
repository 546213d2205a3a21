//! Where an analysis reads its messages: a Project 5 text trace, pcap/pcapng captures of one
//! system (merged, duplicates removed), or a session of the trace database (merged by `p5
//! merge` or written by `p5 analyze import`), with the [`NodeKey`] that names its nodes.

use crate::db::Database;
use crate::node::NodeKey;
use crate::pcap::{self, CaptureFile, NodeNaming, PcapOptions};
use crate::progress::Progress;
use crate::text::{self, Layout, ReadOptions};
use crate::{Error, ReadReport, Result, Trace};
use std::path::PathBuf;

/// An input of the analyses.
#[derive(Debug, Clone)]
pub enum Source {
    /// A Project 5 text trace (`timestamp operation sender receiver id`); its nodes are its
    /// names.
    Trace(PathBuf),
    /// Captures of one system, each with its clock offset.
    Pcap {
        /// The files.
        files: Vec<CaptureFile>,
        /// Hosts or endpoints as nodes.
        naming: NodeNaming,
    },
    /// A session of the trace database the job is given.
    Session {
        /// Its name.
        name: String,
        /// How its message ends become nodes.
        key: NodeKey,
    },
}

/// A trace read from a [`Source`].
#[derive(Debug, Clone, Default)]
pub struct Input {
    /// The messages.
    pub trace: Trace,
    /// What was skipped.
    pub report: ReadReport,
    /// How a text input was laid out (a fresh layout for other inputs).
    pub layout: Layout,
    /// What was read, for messages (`trace.p5t`, `3 captures`, `session run1`).
    pub name: String,
}

impl Source {
    /// The source of the command line's `--node` for captures: `host` (the default) or
    /// `endpoint`; other keys name parts a capture does not know.
    pub fn pcap(files: Vec<CaptureFile>, node: Option<NodeKey>) -> Result<Source> {
        let naming = match node {
            None | Some(NodeKey::Host) => NodeNaming::Host,
            Some(NodeKey::Endpoint) => NodeNaming::Endpoint,
            Some(k) => {
                return Err(Error::Usage(format!(
                    "--node {k}: a capture knows hosts and endpoints only (use host or endpoint)"
                )));
            }
        };
        Ok(Source::Pcap { files, naming })
    }

    /// The source of a text trace; `--node` does not apply to it.
    pub fn trace(path: PathBuf, node: Option<NodeKey>) -> Result<Source> {
        if matches!(node, Some(k) if k != NodeKey::ProgramAtHost) {
            return Err(Error::Usage(
                "--node applies to captures and sessions; a text trace's nodes are its names"
                    .into(),
            ));
        }
        Ok(Source::Trace(path))
    }

    /// Whether it is a session of the database.
    pub fn session(&self) -> Option<&str> {
        match self {
            Source::Session { name, .. } => Some(name),
            _ => None,
        }
    }

    /// Reads it; a session is read through `db`. `keep_order` keeps a text trace's line
    /// order for writing it back.
    pub fn read(
        &self,
        db: Option<&mut Database>,
        keep_order: bool,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Input> {
        match self {
            Source::Session { name, key } => {
                let db = db.ok_or_else(|| {
                    Error::Usage(format!("session {name:?}: give the database (--db URL)"))
                })?;
                let loaded = db.load_trace(name, *key, progress)?;
                let mut report = ReadReport {
                    records: loaded.trace.messages.len() as u64,
                    ..ReadReport::default()
                };
                if loaded.unknown_ends > 0 {
                    report.note("message end of no known process", loaded.unknown_ends);
                }
                Ok(Input {
                    trace: loaded.trace,
                    report,
                    layout: Layout::fresh(9),
                    name: format!("session {name}"),
                })
            }
            Source::Trace(path) => {
                let t = text::read_file(path, ReadOptions { keep_order })?;
                Ok(Input {
                    trace: t.trace,
                    report: t.report,
                    layout: t.layout,
                    name: path.display().to_string(),
                })
            }
            Source::Pcap { files, naming } => {
                let opts = PcapOptions {
                    node: *naming,
                    ..PcapOptions::default()
                };
                let (trace, report) =
                    pcap::read(files, &opts).map_err(|e| Error::Usage(e.to_string()))?;
                let name = match files.as_slice() {
                    [one] => one.path.display().to_string(),
                    many => format!("{} captures", many.len()),
                };
                Ok(Input {
                    trace,
                    report,
                    layout: Layout::fresh(9),
                    name,
                })
            }
        }
    }
}
