//! The trace database at the edge: one [`Database`] handle per `--db` URL, opened once by the
//! front end and passed down. It owns a small tokio runtime and at most one read pool and one
//! write connection, each opened on first use and kept until the handle is dropped, so that
//! the rest of the crate stays synchronous and pure. What the rows mean is
//! [`crate::session`] (messages) and [`crate::store`] (analysis results); every analysis run is
//! written by [`Database::save_run`].

use crate::flows::model::Events;
use crate::node::NodeKey;
use crate::pattern::AnalysisResult;
use crate::progress::Progress;
use crate::session::{ImportSource, Loader, SessionTables, import_rows, message_row};
use crate::store::{self, MessageIds};
use crate::{Error, Result, Trace};
use p5_tracedb::analysis::{FlowResults, RunResults};
use p5_tracedb::read::{self, Reader, Session};
use p5_tracedb::schema::AnalysisRun;
use p5_tracedb::{Db, DbUrl};

/// An open trace database.
#[derive(Debug)]
pub struct Database {
    url: DbUrl,
    rt: tokio::runtime::Runtime,
    reader: Option<Reader>,
    writer: Option<Db>,
}

/// What [`Database::load_trace`] read.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// The messages.
    pub trace: Trace,
    /// The session's id.
    pub session_id: i64,
    /// Messages whose sender or receiver is not known at all.
    pub unknown_ends: u64,
}

/// The rows of one analysis run besides its `analysis_run` row.
#[derive(Debug)]
pub enum RunRows {
    /// Path patterns, nodes, instances (nesting, convolution, linking, truth).
    Paths(RunResults),
    /// Flows and root-cause differences.
    Flows(FlowResults),
}

impl Database {
    /// A handle on `url` (`sqlite:PATH` or `postgres://…`); connects on first use.
    pub fn open(url: &str) -> Result<Database> {
        let url = DbUrl::parse(url)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(Error::Write)?;
        Ok(Database {
            url,
            rt,
            reader: None,
            writer: None,
        })
    }

    /// The URL it was opened with.
    pub fn url(&self) -> &DbUrl {
        &self.url
    }

    fn reader(&mut self) -> Result<&Reader> {
        if self.reader.is_none() {
            self.reader = Some(self.rt.block_on(Reader::open(&self.url))?);
        }
        Ok(self.reader.as_ref().expect("opened above"))
    }

    /// Runs `f` with the read pool on the handle's runtime.
    fn read<T>(&mut self, f: impl AsyncFnOnce(&Reader, &DbUrl) -> Result<T>) -> Result<T> {
        self.reader()?;
        let Database {
            url, rt, reader, ..
        } = self;
        let db = reader.as_ref().expect("opened above");
        rt.block_on(f(db, url))
    }

    /// Runs `f` with the write connection (the database created and migrated if needed).
    fn write<T>(&mut self, f: impl AsyncFnOnce(&mut Db) -> Result<T>) -> Result<T> {
        if self.writer.is_none() {
            self.writer = Some(self.rt.block_on(Db::open(&self.url))?);
        }
        let Database { rt, writer, .. } = self;
        rt.block_on(f(writer.as_mut().expect("opened above")))
    }

    /// The session called `name`, or an error listing the sessions there are.
    pub fn session(&mut self, name: &str) -> Result<Session> {
        self.read(async |db, url| find_session(db, url, name).await)
    }

    /// Reads session `name` as a trace, nodes named by `key`.
    pub fn load_trace(
        &mut self,
        name: &str,
        key: NodeKey,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Loaded> {
        self.read(async |db, url| {
            let s = find_session(db, url, name).await?;
            let tables = SessionTables {
                hosts: read::hosts(db, s.id).await?,
                processes: read::processes(db, s.id).await?,
                threads: read::threads(db, s.id).await?,
                connections: read::connections(db, s.id).await?,
            };
            let total = u64::try_from(s.messages).unwrap_or(0);
            progress(Progress::Phase("reading messages", Some(total)));
            let mut loader = Loader::new(&tables, key, usize::try_from(total).unwrap_or(0));
            drop(tables);
            let mut n = 0u64;
            read::for_each_message_end(db, s.id, |m| {
                loader.push(&m);
                n += 1;
                if n.is_multiple_of(1 << 16) {
                    progress(Progress::At(n));
                }
            })
            .await?;
            let unknown_ends = loader.unknown_ends;
            Ok(Loaded {
                trace: loader.finish(),
                session_id: s.id,
                unknown_ends,
            })
        })
    }

    /// Reads the events the flow analysis needs of each session in `names`.
    pub fn flow_events(&mut self, names: &[&str]) -> Result<Vec<(Session, Events)>> {
        self.read(async |db, url| {
            let mut out = Vec::with_capacity(names.len());
            for name in names {
                let s = find_session(db, url, name).await?;
                let ev = crate::flows::load::read_events(db, &s).await?;
                out.push((s, ev));
            }
            Ok(out)
        })
    }

    /// Writes `trace` as session `name` (replacing one of that name); returns its id and, per
    /// message `msg_ref`, the message id it got.
    pub fn import(
        &mut self,
        name: &str,
        trace: &Trace,
        source: &ImportSource,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(i64, MessageIds)> {
        let total = trace.messages.len() as u64;
        progress(Progress::Phase("writing messages", Some(total)));
        let mut on_rows = |n: u64| progress(Progress::At(n));
        let db = self.writer.take();
        let db = match db {
            Some(db) => db,
            None => self.rt.block_on(Db::open(&self.url))?,
        };
        let (db, sid) = self.rt.block_on(db.import_session(
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
        ))?;
        self.writer = Some(db);
        Ok((sid, MessageIds::of_import(trace)))
    }

    /// Writes a new analysis run of session `name`: `make` gets the session and the run's id
    /// and returns the run's rows. Returns the run id. The one way every run is stored.
    pub fn save_run(
        &mut self,
        name: &str,
        make: impl FnOnce(&Session, i64) -> (AnalysisRun, RunRows),
    ) -> Result<i64> {
        let s = self.session(name)?;
        self.write(async |db| {
            let run_id = db.next_run_id(s.id).await?;
            let (run, rows) = make(&s, run_id);
            match rows {
                RunRows::Paths(rows) => db.write_analysis(run, rows).await?,
                RunRows::Flows(rows) => db.write_flows(run, rows).await?,
            }
            Ok(run_id)
        })
    }

    /// Writes `result` as a new analysis run of session `name` (path tables only); `more`
    /// adds an algorithm's own rows (session id, run id) to them.
    pub fn save_result(
        &mut self,
        name: &str,
        (result, source, ids): (&AnalysisResult, &str, &MessageIds),
        more: impl FnOnce(i64, i64, &mut RunResults),
    ) -> Result<i64> {
        self.save_run(name, |s, run_id| {
            let (run, mut rows) = store::result_rows(result, s, run_id, source, ids);
            more(s.id, run_id, &mut rows);
            (run, RunRows::Paths(rows))
        })
    }

    /// Reads run `run` (the newest when `None`) of session `name` back as a result.
    pub fn load_result(&mut self, name: &str, run: Option<i64>) -> Result<AnalysisResult> {
        self.read(async |db, url| {
            let s = find_session(db, url, name).await?;
            let runs = read::analysis_runs(db, s.id).await?;
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
            let patterns = read::path_patterns(db, s.id, r.id).await?;
            let mut nodes = Vec::new();
            for p in &patterns {
                nodes.extend(read::path_nodes(db, s.id, r.id, p.id).await?);
            }
            let rows = RunResults {
                patterns,
                nodes,
                hist: read::path_node_hist(db, s.id, r.id).await?,
                instances: read::path_instances(db, s.id, r.id).await?,
                instance_messages: read::path_instance_messages(db, s.id, r.id).await?,
                ..Default::default()
            };
            store::result_of_rows(&r, rows)
        })
    }

    /// Closes the connections, reporting a failure to finish the writes.
    pub fn close(mut self) -> Result<()> {
        self.shut()
    }

    fn shut(&mut self) -> Result<()> {
        if let Some(r) = self.reader.take() {
            self.rt.block_on(r.close());
        }
        if let Some(w) = self.writer.take() {
            self.rt.block_on(w.close())?;
        }
        Ok(())
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        // A failure here was already reported by the write that caused it.
        let _ = self.shut();
    }
}

/// The session called `name`, or an error listing the sessions there are.
async fn find_session(db: &Reader, url: &DbUrl, name: &str) -> Result<Session> {
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
