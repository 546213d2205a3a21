//! The inputs every analysis reads, as command-line options: `--trace FILE` (a Project 5 text
//! trace), `--pcap FILE[@±OFFSET]...` (captures of one system, merged) or `--db URL
//! --session NAME` (a merged p5 session, or one `p5 analyze import` wrote), with `--node`
//! naming the nodes.

use crate::maketrace::config::parse_duration;
use crate::node::NodeKey;
use crate::pcap::{self, CaptureFile, NodeNaming, PcapOptions};
use crate::text::{self, Layout, ReadOptions};
use crate::{Error, ReadReport, Result, Trace};
use std::path::PathBuf;

/// `--trace FILE | --pcap FILE... | --db URL --session NAME` with `--node`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct InputArgs {
    /// Project 5 text trace to read (`timestamp operation sender receiver id`).
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["pcap", "db"],
        required_unless_present_any = ["pcap", "db"]
    )]
    pub trace: Option<PathBuf>,
    /// pcap or pcapng captures of one system, merged with duplicates removed (repeatable).
    /// `FILE@+1.5ms` adds an offset to one capture's clock.
    #[arg(long, value_name = "FILE[@±OFFSET]", num_args = 1.., conflicts_with = "db")]
    pub pcap: Vec<String>,
    /// Trace database holding the session to read (`sqlite:PATH` or `postgres://…`).
    #[arg(long, value_name = "URL", requires = "session")]
    pub db: Option<String>,
    /// The session to read from `--db`.
    #[arg(long, value_name = "NAME", requires = "db")]
    pub session: Option<String>,
    /// How message ends become nodes: sessions `host`, `program`, `program@host` (the
    /// default), `process`, `thread` or `endpoint`; captures `host` (IP address, the default)
    /// or `endpoint` (address and port); text traces use the names as written.
    #[arg(long, value_enum)]
    pub node: Option<NodeKey>,
}

/// A trace read from the command line's input.
#[derive(Debug, Clone, Default)]
pub struct Input {
    /// The messages.
    pub trace: Trace,
    /// What was skipped.
    pub report: ReadReport,
    /// How a text input was laid out (a fresh layout for other inputs).
    pub layout: Layout,
    /// What was read, for messages (`trace.p5t`, `3 captures`).
    pub name: String,
}

impl InputArgs {
    /// Reads the input. `keep_order` keeps a text trace's line order for writing it back.
    pub fn read(&self, keep_order: bool) -> Result<Input> {
        self.read_with_progress(keep_order, &mut |_| {})
    }

    /// [`InputArgs::read`], reporting the progress of long reads (a session's messages).
    pub fn read_with_progress(
        &self,
        keep_order: bool,
        progress: &mut dyn FnMut(crate::cli::Progress),
    ) -> Result<Input> {
        if let (Some(url), Some(session)) = (&self.db, &self.session) {
            let url = crate::db::parse_url(url)?;
            let key = self.node.unwrap_or_default();
            let loaded = crate::db::load(&url, session, key, progress)?;
            let mut report = ReadReport {
                records: loaded.trace.messages.len() as u64,
                ..ReadReport::default()
            };
            if loaded.unknown_ends > 0 {
                report.note("message end of no known process", loaded.unknown_ends);
            }
            return Ok(Input {
                trace: loaded.trace,
                report,
                layout: Layout::fresh(9),
                name: format!("session {session}"),
            });
        }
        if let Some(path) = &self.trace {
            if matches!(self.node, Some(k) if k != NodeKey::ProgramAtHost) {
                return Err(Error::Usage(
                    "--node applies to captures and sessions; a text trace's nodes are its names"
                        .into(),
                ));
            }
            let t = text::read_file(path, ReadOptions { keep_order })?;
            return Ok(Input {
                trace: t.trace,
                report: t.report,
                layout: t.layout,
                name: path.display().to_string(),
            });
        }
        let files = self
            .pcap
            .iter()
            .map(|s| capture_file(s))
            .collect::<Result<Vec<_>>>()?;
        let node = match self.node {
            None | Some(NodeKey::Host) => NodeNaming::Host,
            Some(NodeKey::Endpoint) => NodeNaming::Endpoint,
            Some(k) => {
                return Err(Error::Usage(format!(
                    "--node {k}: a capture knows hosts and endpoints only (use host or endpoint)"
                )));
            }
        };
        let opts = PcapOptions {
            node,
            ..PcapOptions::default()
        };
        let (trace, report) = pcap::read(&files, &opts).map_err(|e| Error::Usage(e.to_string()))?;
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

/// Parses `FILE` or `FILE@±OFFSET` (an offset needs its sign: `cap.pcap@+2ms`).
fn capture_file(s: &str) -> Result<CaptureFile> {
    if let Some((path, off)) = s.rsplit_once('@')
        && (off.starts_with('+') || off.starts_with('-'))
    {
        let offset_ns =
            parse_duration(off).map_err(|e| Error::Usage(format!("--pcap {s}: {e}")))?;
        return Ok(CaptureFile {
            path: PathBuf::from(path),
            offset_ns,
        });
    }
    Ok(CaptureFile {
        path: PathBuf::from(s),
        offset_ns: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_offsets_need_a_sign() {
        let f = capture_file("a.pcap@+1.5ms").unwrap();
        assert_eq!((f.path, f.offset_ns), (PathBuf::from("a.pcap"), 1_500_000));
        assert_eq!(capture_file("b@-2us").unwrap().offset_ns, -2_000);
        // An `@` in a file name without a signed offset after it is part of the name.
        assert_eq!(
            capture_file("x@y.pcap").unwrap().path,
            PathBuf::from("x@y.pcap")
        );
        assert!(capture_file("a.pcap@+zz").is_err());
    }
}
