//! The read side: typed queries over a merged database, one function per question a reader
//! asks (the viewer's index and API, the demo's findings, the coming `p5 analyze`).
//!
//! The statements are static strings with `$n` placeholders, which both SQLite and PostgreSQL
//! accept; every value from outside is a bound parameter. [`Reader`] is an enum over the two
//! pools (sqlx's `Any` driver is not in the stack), and the `fetch!` macro runs one statement
//! on whichever pool is open and decodes each row with the same code for both backends,
//! reading every column by the name the statement's SELECT gives it. A SQLite file is opened
//! read-only; opening refuses a database that is not a p5 one.
//!
//! The queries, by what they read (private modules, every item re-exported here):
//! - `sessions`: sessions, hosts, processes, threads, clock bounds, drop ranges;
//! - `sensors`: sensors, source files, sensor call counts;
//! - `timeline`: intervals, states, scheduling and the overview buckets;
//! - `samples`: instants and samples — interrupts, marks, host metrics, counters;
//! - `messages`: matched messages, connections and message roles;
//! - `message_ends`: the bulk message stream `p5 analyze` loads;
//! - `paths`: analysis runs, path patterns, nodes, instances;
//! - `flows`: convolution edges and spikes, flows and flow diffs.

use crate::connect::{CONNECT_TIMEOUT, Catalogue, not_a_database, within};
use crate::error::Error;
use crate::url::DbUrl;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::{ConnectOptions, Connection as _, Row};
use std::str::FromStr;

/// Runs `$sql` with the bound values on `$db`, mapping each row `$row` with `$map`. Rows are
/// streamed (never all materialized as driver rows), so loading millions costs only the
/// mapped values. Defined before the query modules, which use it.
macro_rules! fetch {
    ($db:expr, $sql:expr, [$($bind:expr),*], |$row:ident| $map:expr) => {{
        let mut out = Vec::new();
        match $db {
            $crate::read::Reader::Sqlite(pool) => {
                let mut rows = sqlx::query($sql)$(.bind($bind))*.fetch(pool);
                while let Some($row) = futures_util::TryStreamExt::try_next(&mut rows).await? {
                    let $row = &$row;
                    out.push((|| -> Result<_, sqlx::Error> { Ok($map) })()?);
                }
            }
            $crate::read::Reader::Postgres(pool) => {
                let mut rows = sqlx::query($sql)$(.bind($bind))*.fetch(pool);
                while let Some($row) = futures_util::TryStreamExt::try_next(&mut rows).await? {
                    let $row = &$row;
                    out.push((|| -> Result<_, sqlx::Error> { Ok($map) })()?);
                }
            }
        }
        out
    }};
}

mod flows;
mod message_ends;
mod messages;
mod paths;
mod samples;
mod sensors;
mod sessions;
mod timeline;

pub use flows::{conv_edges, conv_spikes, flow_diffs, flow_paths, flow_segments, flows};
pub use message_ends::{MessageEnds, for_each_message_end};
pub use messages::{
    Connection, MatchedMessage, MessageRole, MessageRow, connections, message_roles, messages,
};
pub use paths::{
    analysis_runs, instance, path_instance_messages, path_instances, path_node_hist, path_nodes,
    path_pattern, path_patterns, pattern_hist, pattern_instances,
};
pub use samples::{
    CounterSample, IrqRow, MarkRow, Metric, counter_samples, host_metrics, irqs, marks,
    metric_samples,
};
pub use sensors::{Sensor, SourceFile, sensor_calls, sensors, source_file};
pub use sessions::{
    Host, Process, Session, Thread, clock_bounds, drop_ranges, hosts, processes, session, sessions,
    threads,
};
pub use timeline::{
    IntervalRow, OverviewRow, SchedRow, StateRow, intervals, overview, sched, states,
};

/// An open trace database, for reading.
#[derive(Debug, Clone)]
pub enum Reader {
    /// SQLite (`sqlite:PATH`), opened read-only.
    Sqlite(sqlx::SqlitePool),
    /// PostgreSQL (`postgres://…`).
    Postgres(sqlx::PgPool),
}

impl Reader {
    /// Opens `sqlite:PATH` (read-only) or `postgres://…` (a pool whose connects and acquires
    /// time out after [`CONNECT_TIMEOUT`]), and checks that it holds a p5 database.
    pub async fn open(url: &DbUrl) -> Result<Reader, Error> {
        let db = match url {
            DbUrl::Postgres(u) => {
                let opts = PgConnectOptions::from_str(u)?;
                // One connection first: a pool reports only "timed out" for a refusal.
                let probe = within(url, opts.connect()).await?;
                let _ = probe.close().await;
                let pool = PgPoolOptions::new()
                    .max_connections(8)
                    .acquire_timeout(CONNECT_TIMEOUT);
                Reader::Postgres(within(url, pool.connect_with(opts)).await?)
            }
            DbUrl::Sqlite(u) => {
                let opts = SqliteConnectOptions::from_str(u)?
                    .read_only(true)
                    .create_if_missing(false);
                let probe = within(url, opts.connect()).await?;
                let _ = probe.close().await;
                // Rows cross from SQLite's worker thread in batches of up to 1024 (sqlx's 50
                // makes the two threads hand over every few rows when loading millions).
                let opts = opts.row_buffer_size(1024);
                let pool = SqlitePoolOptions::new()
                    .max_connections(8)
                    .acquire_timeout(CONNECT_TIMEOUT);
                Reader::Sqlite(within(url, pool.connect_with(opts)).await?)
            }
        };
        let counts: Vec<(i64, i64, i64)> = match &db {
            Reader::Sqlite(p) => sqlx::query_as(Catalogue::SQLITE).fetch_all(p).await,
            Reader::Postgres(p) => sqlx::query_as(Catalogue::POSTGRES).fetch_all(p).await,
        }
        .map_err(|e| not_a_database(url, e))?;
        let cat = Catalogue::from_counts(counts.first().copied().unwrap_or((0, 0, 0)));
        cat.check_readable(url)?;
        Ok(db)
    }

    /// The newest migration applied to the database (1 … [`crate::migrate::latest`]).
    pub async fn schema_version(&self) -> Result<i64, Error> {
        const Q: &str = "SELECT COALESCE(MAX(version), 0) AS latest FROM _sqlx_migrations \
             WHERE success";
        let v = fetch!(self, Q, [], |r| r.i("latest")?);
        Ok(v.first().copied().unwrap_or(0))
    }

    /// Closes the pool.
    pub async fn close(&self) {
        match self {
            Reader::Sqlite(p) => p.close().await,
            Reader::Postgres(p) => p.close().await,
        }
    }
}

/// Typed access by column name, shared by both backends' rows.
trait RowExt {
    fn i(&self, col: &str) -> Result<i64, sqlx::Error>;
    fn oi(&self, col: &str) -> Result<Option<i64>, sqlx::Error>;
    fn s(&self, col: &str) -> Result<String, sqlx::Error>;
    fn os(&self, col: &str) -> Result<Option<String>, sqlx::Error>;
    fn of(&self, col: &str) -> Result<Option<f64>, sqlx::Error>;
    /// Position of a text column's value in `names` (`names.len()` if absent), without
    /// allocating.
    fn cat(&self, col: &str, names: &[&str]) -> Result<u32, sqlx::Error>;
}

macro_rules! row_ext {
    ($row:ty) => {
        impl RowExt for $row {
            fn i(&self, col: &str) -> Result<i64, sqlx::Error> {
                self.try_get(col)
            }
            fn oi(&self, col: &str) -> Result<Option<i64>, sqlx::Error> {
                self.try_get(col)
            }
            fn s(&self, col: &str) -> Result<String, sqlx::Error> {
                self.try_get(col)
            }
            fn os(&self, col: &str) -> Result<Option<String>, sqlx::Error> {
                self.try_get(col)
            }
            fn of(&self, col: &str) -> Result<Option<f64>, sqlx::Error> {
                self.try_get(col)
            }
            fn cat(&self, col: &str, names: &[&str]) -> Result<u32, sqlx::Error> {
                let v: &str = self.try_get(col)?;
                Ok(names.iter().position(|n| *n == v).unwrap_or(names.len()) as u32)
            }
        }
    };
}
row_ext!(sqlx::sqlite::SqliteRow);
row_ext!(sqlx::postgres::PgRow);
