//! Typed writes of the analysis tables (migrations 0004, 0009 and 0011, `docs/schema.md`): one
//! [`schema::AnalysisRun`] and its results ([`RunResults`], or [`FlowResults`] for flows),
//! written in one transaction. `p5 analyze`
//! writes through this; re-merging a session clears its runs with everything else.

use crate::error::Error;
use crate::schema::{self, AnalysisRun, PathInstance, PathInstanceMessage, PathNode};
use crate::schema::{ConvEdge, ConvSpike};
use crate::schema::{Flow, FlowDiff, FlowPath, FlowSegment, PathNodeHist, PathPattern};
use crate::write::Db;

/// The results of one analysis run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunResults {
    /// Patterns.
    pub patterns: Vec<PathPattern>,
    /// Their trees' nodes.
    pub nodes: Vec<PathNode>,
    /// Node histograms.
    pub hist: Vec<PathNodeHist>,
    /// Instances.
    pub instances: Vec<PathInstance>,
    /// The messages of each instance.
    pub instance_messages: Vec<PathInstanceMessage>,
    /// A convolution run's graph edges (migration 0011).
    pub conv_edges: Vec<ConvEdge>,
    /// And the spikes its correlations showed.
    pub conv_spikes: Vec<ConvSpike>,
}

/// The results of a `flows` or `diff` run (migration 0009).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlowResults {
    /// Flows.
    pub flows: Vec<Flow>,
    /// Their segments.
    pub segments: Vec<FlowSegment>,
    /// Their call paths.
    pub paths: Vec<FlowPath>,
    /// Root-cause candidates.
    pub diffs: Vec<FlowDiff>,
}

impl FlowResults {
    /// Checks that every row belongs to `run` (same session and run id).
    fn check(&self, run: &AnalysisRun) -> Result<(), Error> {
        let keys = (self.flows.iter().map(|r| ("flow", r.session_id, r.run_id)))
            .chain(
                self.segments
                    .iter()
                    .map(|r| ("flow_segment", r.session_id, r.run_id)),
            )
            .chain(
                self.paths
                    .iter()
                    .map(|r| ("flow_path", r.session_id, r.run_id)),
            )
            .chain(
                self.diffs
                    .iter()
                    .map(|r| ("flow_diff", r.session_id, r.run_id)),
            );
        check_keys(keys, run)
    }
}

/// Checks that every (table, session id, run id) of a run's rows is `run`'s.
fn check_keys<'a>(
    keys: impl Iterator<Item = (&'a str, i64, i64)>,
    run: &AnalysisRun,
) -> Result<(), Error> {
    for (table, sid, rid) in keys {
        if sid != run.session_id {
            return Err(mismatch(table, "session"));
        }
        if rid != run.id {
            return Err(mismatch(table, "run"));
        }
    }
    Ok(())
}

/// A row whose keys disagree with its run.
fn mismatch(table: &str, what: &str) -> Error {
    Error::Db(sqlx::Error::Protocol(format!(
        "{table} row of another {what} in an analysis run's results"
    )))
}

impl RunResults {
    /// Checks that every row belongs to `run` (same session and run id).
    fn check(&self, run: &AnalysisRun) -> Result<(), Error> {
        let keys = self
            .patterns
            .iter()
            .map(|r| ("path_pattern", r.session_id, r.run_id))
            .chain(
                self.nodes
                    .iter()
                    .map(|r| ("path_node", r.session_id, r.run_id)),
            )
            .chain(
                self.hist
                    .iter()
                    .map(|r| ("path_node_hist", r.session_id, r.run_id)),
            )
            .chain(
                self.instances
                    .iter()
                    .map(|r| ("path_instance", r.session_id, r.run_id)),
            )
            .chain(
                self.instance_messages
                    .iter()
                    .map(|r| ("path_instance_message", r.session_id, r.run_id)),
            )
            .chain(
                self.conv_edges
                    .iter()
                    .map(|r| ("conv_edge", r.session_id, r.run_id)),
            )
            .chain(
                self.conv_spikes
                    .iter()
                    .map(|r| ("conv_spike", r.session_id, r.run_id)),
            );
        check_keys(keys, run)
    }
}

impl Db {
    /// The id for a new analysis run of session `session_id` (one above the largest).
    pub async fn next_run_id(&mut self, session_id: i64) -> Result<i64, Error> {
        use sqlx::Row as _;
        const Q: &str = "SELECT COALESCE(MAX(id), 0) + 1 FROM analysis_run WHERE session_id = $1";
        let id: i64 = match self {
            Db::Sqlite(c) => sqlx::query(Q).bind(session_id).fetch_one(c).await?.get(0),
            Db::Postgres(c) => sqlx::query(Q).bind(session_id).fetch_one(c).await?.get(0),
        };
        Ok(id)
    }

    /// Writes a run and its results in one transaction.
    pub async fn write_analysis(
        &mut self,
        run: AnalysisRun,
        results: RunResults,
    ) -> Result<(), Error> {
        results.check(&run)?;
        self.begin().await?;
        let r = async {
            self.insert([run]).await?;
            self.insert(results.patterns).await?;
            self.insert(results.nodes).await?;
            self.insert(results.hist).await?;
            self.insert(results.instances).await?;
            self.insert(results.instance_messages).await?;
            self.insert_chunked(results.conv_edges).await?;
            self.insert_chunked(results.conv_spikes).await
        }
        .await;
        match r {
            Ok(()) => self.commit().await,
            Err(e) => {
                let _ = self.rollback().await;
                Err(e)
            }
        }
    }

    /// Writes a `flows` or `diff` run and its rows in one transaction.
    pub async fn write_flows(
        &mut self,
        run: AnalysisRun,
        results: FlowResults,
    ) -> Result<(), Error> {
        results.check(&run)?;
        self.begin().await?;
        let r = async {
            self.insert([run]).await?;
            self.insert_chunked(results.flows).await?;
            self.insert_chunked(results.segments).await?;
            self.insert_chunked(results.paths).await?;
            self.insert_chunked(results.diffs).await
        }
        .await;
        match r {
            Ok(()) => self.commit().await,
            Err(e) => {
                let _ = self.rollback().await;
                Err(e)
            }
        }
    }

    /// Writes rows in chunks of 50,000: a run of a large session has millions of path rows,
    /// whose values [`Db::insert`] would otherwise hold all at once.
    async fn insert_chunked<R: schema::Row>(&mut self, rows: Vec<R>) -> Result<(), Error> {
        let mut it = rows.into_iter();
        loop {
            let chunk: Vec<R> = it.by_ref().take(50_000).collect();
            if chunk.is_empty() {
                return Ok(());
            }
            self.insert(chunk).await?;
        }
    }

    /// Deletes one run and its results.
    pub async fn delete_analysis(&mut self, session_id: i64, run_id: i64) -> Result<(), Error> {
        for t in schema::ANALYSIS
            .iter()
            .chain(schema::FLOWS)
            .chain(schema::CONVOLUTION)
        {
            let key = if t.name == "analysis_run" {
                "id"
            } else {
                "run_id"
            };
            let sql = format!(
                "DELETE FROM {} WHERE session_id = $1 AND {key} = $2",
                t.name
            );
            let q = sqlx::AssertSqlSafe(sql);
            match self {
                Db::Sqlite(c) => {
                    sqlx::query(q)
                        .bind(session_id)
                        .bind(run_id)
                        .execute(c)
                        .await?;
                }
                Db::Postgres(c) => {
                    sqlx::query(q)
                        .bind(session_id)
                        .bind(run_id)
                        .execute(c)
                        .await?;
                }
            }
        }
        Ok(())
    }
}
