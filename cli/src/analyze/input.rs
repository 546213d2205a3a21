//! The inputs every analysis reads, as options: `--trace FILE` (a Project 5 text trace),
//! `--pcap FILE[@±OFFSET]...` (captures of one system, merged) or `--db URL --session NAME`
//! (a merged p5 session, or one `p5 analyze import` wrote), with `--node` naming the nodes;
//! and where a run of a file's analysis is also stored (`--save-db URL --save-session NAME`).

use super::choice;
use p5_analyze::db::Database;
use p5_analyze::job::{Job, Target};
use p5_analyze::node::NodeKey;
use p5_analyze::parse::parse_capture;
use p5_analyze::source::Source;
use p5_analyze::{ReadReport, Result};
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
    #[arg(long, value_parser = choice::<NodeKey>())]
    pub node: Option<NodeKey>,
}

/// `--save-db URL --save-session NAME`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SaveArgs {
    /// Also store the run in this trace database, as a run of `--save-session` (a session
    /// imported from the same trace or capture; with `--db` input the run is stored there
    /// anyway).
    #[arg(long, value_name = "URL", requires = "save_session")]
    pub save_db: Option<String>,
    /// The session of `--save-db` to store the run in.
    #[arg(long, value_name = "NAME", requires = "save_db")]
    pub save_session: Option<String>,
}

impl InputArgs {
    /// The source the options name.
    pub fn source(&self) -> Result<Source> {
        if let Some(name) = &self.session {
            return Ok(Source::Session {
                name: name.clone(),
                key: self.node.unwrap_or_default(),
            });
        }
        if let Some(path) = &self.trace {
            return Source::trace(path.clone(), self.node);
        }
        let files = self
            .pcap
            .iter()
            .map(|s| parse_capture(s))
            .collect::<Result<Vec<_>>>()?;
        Source::pcap(files, self.node)
    }

    /// The database of `--db`, opened.
    pub fn database(&self) -> Result<Option<Database>> {
        self.db.as_deref().map(Database::open).transpose()
    }
}

/// The databases a job reads from and stores into, opened once.
#[derive(Debug)]
pub struct Opened {
    source: Source,
    db: Option<Database>,
    save: Option<(Database, String)>,
}

impl Opened {
    /// Opens what `input` and `save` name.
    pub fn new(input: &InputArgs, save: &SaveArgs) -> Result<Opened> {
        let save = match (&save.save_db, &save.save_session) {
            (Some(url), Some(session)) => Some((Database::open(url)?, session.clone())),
            _ => None,
        };
        Ok(Opened {
            source: input.source()?,
            db: input.database()?,
            save,
        })
    }

    /// The job over them.
    pub fn job(&mut self) -> Job<'_> {
        Job {
            source: self.source.clone(),
            db: self.db.as_mut(),
            save: self.save.as_mut().map(|(db, session)| Target {
                db,
                session: session.clone(),
            }),
        }
    }
}

/// Prints what a reader skipped, if anything.
pub fn print_report(name: &str, report: &ReadReport) {
    if !report.counts.is_empty() {
        eprintln!("{name}: {report}");
    }
}

/// Prints where a run was stored.
pub fn print_stored(stored: &[(String, i64)]) {
    for (session, run) in stored {
        eprintln!("stored as analysis run {run} of session {session}");
    }
}
