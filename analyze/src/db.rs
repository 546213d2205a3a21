//! The trace database at the edge: every query and write of `p5 analyze` goes through here
//! (and through `p5_tracedb`), on a small tokio runtime of its own, so that the rest of the
//! crate stays synchronous and pure. What the rows mean is [`crate::session`] (messages)
//! and [`crate::store`] (analysis results).

use crate::cli::Progress;
use crate::node::NodeKey;
use crate::pattern::AnalysisResult;
use crate::session::{ImportSource, Loader, SessionTables, import_rows, message_row};
use crate::store::{self, MessageIds};
use crate::{Error, Result, Trace};
use p5_tracedb::read::{self, Reader, Session};
use p5_tracedb::{Db, DbUrl};

/// Runs `fut` to completion on a fresh current-thread runtime.
pub(crate) fn block_on<T>(fut: impl Future<Output = Result<T>>) -> Result<T> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::Write)?;
    rt.block_on(fut)
}

/// Parses a `--db` value.
pub fn parse_url(url: &str) -> Result<DbUrl> {
    DbUrl::parse(url).map_err(Error::from)
}

/// The session called `name`, or an error listing the sessions there are.
pub(crate) async fn find_session(db: &Reader, url: &DbUrl, name: &str) -> Result<Session> {
    let all = read::sessions(db).await?;
    if let Some(s) = all.iter().find(|s| s.name == name) {
        return Ok(s.clone());
    }
    let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
    Err(Error::Usage(if names.is_empty() {
        format!("{url}: no session {name:?} (the database holds no sessions)")
    } else {
        format!(
            "{url}: no session {name:?} (sessions: {})",
            names.join(", ")
        )
    }))
}

/// What [`load`] read.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// The messages.
    pub trace: Trace,
    /// The session's id.
    pub session_id: i64,
    /// Messages whose sender or receiver is not known at all.
    pub unknown_ends: u64,
}

/// Reads session `name` of `url` as a trace, nodes named by `key`.
pub fn load(
    url: &DbUrl,
    name: &str,
    key: NodeKey,
    progress: &mut dyn FnMut(Progress),
) -> Result<Loaded> {
    block_on(async {
        let db = Reader::open(url).await?;
        let s = find_session(&db, url, name).await?;
        let tables = SessionTables {
            hosts: read::hosts(&db, s.id).await?,
            processes: read::processes(&db, s.id).await?,
            threads: read::threads(&db, s.id).await?,
            connections: read::connections(&db, s.id).await?,
        };
        let total = u64::try_from(s.messages).unwrap_or(0);
        progress(Progress::Phase("reading messages", Some(total)));
        let mut loader = Loader::new(&tables, key, usize::try_from(total).unwrap_or(0));
        drop(tables);
        let mut n = 0u64;
        read::for_each_message_end(&db, s.id, |m| {
            loader.push(&m);
            n += 1;
            if n.is_multiple_of(1 << 16) {
                progress(Progress::At(n));
            }
        })
        .await?;
        db.close().await;
        let unknown_ends = loader.unknown_ends;
        Ok(Loaded {
            trace: loader.finish(),
            session_id: s.id,
            unknown_ends,
        })
    })
}

/// Writes `trace` as session `name` (replacing one of that name); returns its id and, per
/// message `msg_ref`, the message id it got.
pub fn import(
    url: &DbUrl,
    name: &str,
    trace: &Trace,
    source: &ImportSource,
    progress: &mut dyn FnMut(Progress),
) -> Result<(i64, MessageIds)> {
    block_on(async {
        let db = Db::open(url).await?;
        let total = trace.messages.len() as u64;
        progress(Progress::Phase("writing messages", Some(total)));
        let mut on_rows = |n: u64| progress(Progress::At(n));
        let (db, sid) = db
            .import_session(
                name,
                |sid| {
                    let plan = import_rows(trace, sid, source);
                    let places = plan.places;
                    let r = plan.rows;
                    p5_tracedb::import::SessionRows {
                        session: r.session,
                        hosts: r.hosts,
                        processes: r.processes,
                        threads: r.threads,
                        states: r.states,
                        connections: r.connections,
                        messages: trace
                            .messages
                            .iter()
                            .zip(places)
                            .enumerate()
                            .map(move |(i, (m, p))| message_row(trace, sid, i, m, p)),
                    }
                },
                &mut on_rows,
            )
            .await?;
        db.close().await?;
        Ok((sid, MessageIds::of_import(trace)))
    })
}

/// Writes `result` as a new analysis run of session `name`; returns the run id.
pub fn save_result(
    url: &DbUrl,
    name: &str,
    result: &AnalysisResult,
    source: &str,
    ids: &MessageIds,
) -> Result<i64> {
    save_result_with(url, name, (result, source, ids), |_, _, _| {})
}

/// [`save_result`], with `more` adding an algorithm's own rows (session id, run id) to the
/// run's results before they are written in the same transaction.
pub fn save_result_with(
    url: &DbUrl,
    name: &str,
    (result, source, ids): (&AnalysisResult, &str, &MessageIds),
    more: impl FnOnce(i64, i64, &mut p5_tracedb::analysis::RunResults),
) -> Result<i64> {
    block_on(async {
        let reader = Reader::open(url).await?;
        let s = find_session(&reader, url, name).await?;
        reader.close().await;
        let mut db = Db::open(url).await?;
        let run_id = db.next_run_id(s.id).await?;
        let (run, mut rows) = store::result_rows(result, &s, run_id, source, ids);
        more(s.id, run_id, &mut rows);
        db.write_analysis(run, rows).await?;
        db.close().await?;
        Ok(run_id)
    })
}

/// Reads run `run` (the newest when `None`) of session `name` back as a result.
pub fn load_result(url: &DbUrl, name: &str, run: Option<i64>) -> Result<AnalysisResult> {
    block_on(async {
        let db = Reader::open(url).await?;
        let s = find_session(&db, url, name).await?;
        let runs = read::analysis_runs(&db, s.id).await?;
        let chosen = match run {
            Some(id) => runs.iter().find(|r| r.id == id),
            None => runs.last(),
        };
        let Some(r) = chosen.cloned() else {
            let ids: Vec<String> = runs.iter().map(|r| r.id.to_string()).collect();
            return Err(Error::Usage(format!(
                "{url}: session {name:?} has no analysis run{} (runs: {})",
                run.map(|r| format!(" {r}")).unwrap_or_default(),
                if ids.is_empty() {
                    "none".to_owned()
                } else {
                    ids.join(", ")
                }
            )));
        };
        let patterns = read::path_patterns(&db, s.id, r.id).await?;
        let mut nodes = Vec::new();
        for p in &patterns {
            nodes.extend(read::path_nodes(&db, s.id, r.id, p.id).await?);
        }
        let rows = p5_tracedb::analysis::RunResults {
            patterns,
            nodes,
            hist: read::path_node_hist(&db, s.id, r.id).await?,
            instances: read::path_instances(&db, s.id, r.id).await?,
            instance_messages: read::path_instance_messages(&db, s.id, r.id).await?,
            ..Default::default()
        };
        db.close().await;
        store::result_of_rows(&r, rows)
    })
}

/// Where an analysis run is stored, as the command line asks: with `--db` into the session
/// it read (message ids as they are), and with `--save-db URL --save-session NAME` (also)
/// there, its messages mapped to the ids an import of the same input gave them (unless the
/// input was a session already). Taken from the input before the analysis, which may
/// consume its trace (`nesting_owned`, `linking_owned`): for a file's run stored into the
/// session imported from it, the messages' `msg_ref`s in order (8 bytes a message; the ids
/// are mapped when the run is stored).
#[derive(Debug)]
pub struct RunTargets(Vec<Target>);

/// One place a run goes: URL, session, the imported trace's `msg_ref`s (`None`: the
/// message ids are the `msg_ref`s, the input was that session) and the source's name.
type Target = (String, String, Option<Vec<u64>>, String);

impl RunTargets {
    /// The places the command line names for `input`.
    pub fn of(
        input_args: &crate::input::InputArgs,
        input: &crate::input::Input,
        save: (Option<&String>, Option<&String>),
    ) -> Self {
        let mut targets = Vec::new();
        if let (Some(url), Some(session)) = (&input_args.db, &input_args.session) {
            targets.push((url.clone(), session.clone(), None, "sql".to_owned()));
        }
        if let (Some(url), Some(session)) = save {
            let refs = input_args
                .db
                .is_none()
                .then(|| input.trace.messages.iter().map(|m| m.msg_ref).collect());
            targets.push((url.clone(), session.clone(), refs, input.name.clone()));
        }
        RunTargets(targets)
    }

    /// Stores `result` in each place; prints the run number of each.
    pub fn save(self, result: &AnalysisResult) -> Result<()> {
        for (url, session, refs, source) in self.0 {
            let url = parse_url(&url)?;
            let ids = refs.map_or_else(MessageIds::default, MessageIds::of_refs);
            let run = save_result(&url, &session, result, &source, &ids)?;
            eprintln!("stored as analysis run {run} of session {session}");
        }
        Ok(())
    }
}
