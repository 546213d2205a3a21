//! The read side: typed queries over a merged database, one function per question a reader
//! asks (the viewer's index and API, the demo's findings, the coming `p5 analyze`).
//!
//! The statements are static strings with `$n` placeholders, which both SQLite and PostgreSQL
//! accept; every value from outside is a bound parameter. [`Reader`] is an enum over the two
//! pools (sqlx's `Any` driver is not in the stack), and the `fetch!` macro runs one statement
//! on whichever pool is open and decodes each row with the same code for both backends. A
//! SQLite file is opened read-only; opening refuses a database that is not a p5 one.

use crate::connect::{CONNECT_TIMEOUT, Catalogue, not_a_database, within};
use crate::domain::{Direction, InitiatorFrom, NodeKind, Protocol, Visit};
use crate::error::Error;
use crate::schema;
use crate::url::DbUrl;
use futures_util::TryStreamExt;
use serde::Serialize;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::{ConnectOptions, Connection as _, Row};
use std::str::FromStr;

/// An open trace database, for reading.
#[derive(Debug, Clone)]
pub enum Reader {
    /// SQLite (`sqlite:PATH`), opened read-only.
    Sqlite(sqlx::SqlitePool),
    /// PostgreSQL (`postgres://…`).
    Postgres(sqlx::PgPool),
}

/// Runs `$sql` with the bound values on `$db`, mapping each row `$row` with `$map`. Rows are
/// streamed (never all materialized as driver rows), so loading millions costs only the
/// mapped values.
macro_rules! fetch {
    ($db:expr, $sql:expr, [$($bind:expr),*], |$row:ident| $map:expr) => {{
        let mut out = Vec::new();
        match $db {
            Reader::Sqlite(pool) => {
                let mut rows = sqlx::query($sql)$(.bind($bind))*.fetch(pool);
                while let Some($row) = rows.try_next().await? {
                    let $row = &$row;
                    out.push((|| -> Result<_, sqlx::Error> { Ok($map) })()?);
                }
            }
            Reader::Postgres(pool) => {
                let mut rows = sqlx::query($sql)$(.bind($bind))*.fetch(pool);
                while let Some($row) = rows.try_next().await? {
                    let $row = &$row;
                    out.push((|| -> Result<_, sqlx::Error> { Ok($map) })()?);
                }
            }
        }
        out
    }};
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
        const Q: &str = "SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations WHERE success";
        let v = fetch!(self, Q, [], |r| r.i(0)?);
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

/// A row of `session`.
#[derive(Debug, Clone, Serialize)]
pub struct Session {
    /// Session id.
    pub id: i64,
    /// Name.
    pub name: String,
    /// First instant, ns on the session base.
    pub t_min: Option<i64>,
    /// Last instant.
    pub t_max: Option<i64>,
    /// Events merged.
    pub events: i64,
    /// Processes (host agents and OS monitors included).
    pub processes: i64,
    /// Processes of the program under study (without host agents and OS monitors).
    pub programs: i64,
    /// Threads.
    pub threads: i64,
    /// Messages.
    pub messages: i64,
    /// Messages whose two ends were matched.
    pub matched: i64,
    /// Messages received before they were sent (clock-sync violations).
    pub violations: i64,
    /// Diagnostics.
    pub diagnostics: i64,
    /// Wall clock of the time base, ns since the epoch (a display label only).
    pub base_wall_ns: i64,
    /// Wall clock of the merge (changes when the session is merged again).
    pub merged_at_wall_ns: i64,
    /// Events the runtimes lost to full buffers (sum of `thread.dropped`).
    pub dropped: i64,
    /// The log server's CLOCK_MONOTONIC at the time base's zero: a time `t` on the base is
    /// `t + base_mono_ns` on that server's monotonic clock (and on its host's programs').
    /// Not part of the viewer's answers.
    #[serde(skip_serializing)]
    pub base_mono_ns: i64,
}

const SESSIONS: &str = "SELECT id, name, t_min, t_max, events, processes, threads, messages, \
     matched, violations, diagnostics, base_wall_ns, merged_at_wall_ns, (SELECT COUNT(*) FROM \
     process p WHERE p.session_id = session.id AND p.runtime NOT IN ('host-agent', \
     'os-monitor')), (SELECT CAST(COALESCE(SUM(t.dropped), 0) AS BIGINT) FROM thread t WHERE \
     t.session_id = session.id), base_mono_ns FROM session ORDER BY id";
const SESSION: &str = "SELECT id, name, t_min, t_max, events, processes, threads, messages, \
     matched, violations, diagnostics, base_wall_ns, merged_at_wall_ns, (SELECT COUNT(*) FROM \
     process p WHERE p.session_id = session.id AND p.runtime NOT IN ('host-agent', \
     'os-monitor')), (SELECT CAST(COALESCE(SUM(t.dropped), 0) AS BIGINT) FROM thread t WHERE \
     t.session_id = session.id), base_mono_ns FROM session WHERE id = $1";

/// All sessions.
pub async fn sessions(db: &Reader) -> Result<Vec<Session>, Error> {
    Ok(fetch!(db, SESSIONS, [], |r| session_row(r)?))
}

/// One session, if merged.
pub async fn session(db: &Reader, id: i64) -> Result<Option<Session>, Error> {
    let mut v = fetch!(db, SESSION, [id], |r| session_row(r)?);
    Ok(v.pop())
}

fn session_row<R: RowExt>(r: &R) -> Result<Session, sqlx::Error> {
    Ok(Session {
        id: r.i(0)?,
        name: r.s(1)?,
        t_min: r.oi(2)?,
        t_max: r.oi(3)?,
        events: r.i(4)?,
        processes: r.i(5)?,
        threads: r.i(6)?,
        messages: r.i(7)?,
        matched: r.i(8)?,
        violations: r.i(9)?,
        diagnostics: r.i(10)?,
        base_wall_ns: r.i(11)?,
        merged_at_wall_ns: r.i(12)?,
        programs: r.i(13)?,
        dropped: r.i(14)?,
        base_mono_ns: r.i(15)?,
    })
}

/// A host.
#[derive(Debug, Clone, Serialize)]
pub struct Host {
    /// Host id.
    pub id: i64,
    /// Host name.
    pub hostname: String,
}

/// A process.
#[derive(Debug, Clone, Serialize)]
pub struct Process {
    /// Process id (per session).
    pub id: i64,
    /// Host id.
    pub host_id: i64,
    /// OS pid.
    pub pid: i64,
    /// Program name.
    pub program: String,
    /// Command line.
    pub argv: String,
    /// Runtime (`rust`, `c`, `hostagent`, …).
    pub runtime: String,
    /// Start, ns.
    pub t_start: i64,
    /// End, ns.
    pub t_end: Option<i64>,
}

/// A thread (stream) of a process.
#[derive(Debug, Clone, Serialize)]
pub struct Thread {
    /// Thread id (per session).
    pub id: i64,
    /// Process id.
    pub process_id: i64,
    /// Stream kind (`thread`, `host-metrics`, `os-monitor`, …).
    pub kind: String,
    /// OS thread id.
    pub tid: i64,
    /// Name.
    pub name: String,
    /// Start, ns.
    pub t_start: Option<i64>,
    /// End, ns.
    pub t_end: Option<i64>,
    /// Events lost to full buffers.
    pub dropped: i64,
}

/// Hosts of a session.
pub async fn hosts(db: &Reader, sid: i64) -> Result<Vec<Host>, Error> {
    const Q: &str = "SELECT id, hostname FROM host WHERE session_id = $1 ORDER BY id";
    Ok(fetch!(db, Q, [sid], |r| Host {
        id: r.i(0)?,
        hostname: r.s(1)?
    }))
}

/// Processes of a session.
pub async fn processes(db: &Reader, sid: i64) -> Result<Vec<Process>, Error> {
    const Q: &str = "SELECT id, host_id, pid, program, argv, runtime, t_start, t_end \
         FROM process WHERE session_id = $1 ORDER BY id";
    Ok(fetch!(db, Q, [sid], |r| Process {
        id: r.i(0)?,
        host_id: r.i(1)?,
        pid: r.i(2)?,
        program: r.s(3)?,
        argv: r.s(4)?,
        runtime: r.s(5)?,
        t_start: r.i(6)?,
        t_end: r.oi(7)?,
    }))
}

/// Threads of a session.
pub async fn threads(db: &Reader, sid: i64) -> Result<Vec<Thread>, Error> {
    const Q: &str = "SELECT id, process_id, kind, tid, name, t_start, t_end, dropped \
         FROM thread WHERE session_id = $1 ORDER BY process_id, id";
    Ok(fetch!(db, Q, [sid], |r| Thread {
        id: r.i(0)?,
        process_id: r.i(1)?,
        kind: r.s(2)?,
        tid: r.i(3)?,
        name: r.s(4)?,
        t_start: r.oi(5)?,
        t_end: r.oi(6)?,
        dropped: r.i(7)?,
    }))
}

/// A sensor (a probe in the source, from the instrumenter's manifest).
#[derive(Debug, Clone, Serialize)]
pub struct Sensor {
    /// Sensor id (64-bit hash, as stored: signed). Serialized as a string because JSON
    /// numbers lose precision beyond 2^53.
    #[serde(serialize_with = "as_string")]
    pub id: i64,
    /// `0x` + 16 hex digits.
    pub hex: String,
    /// Kind (`function`, `call`, `comm`, `region`, `statement`, …).
    pub kind: Option<String>,
    /// Source file path (relative to the instrumented tree).
    pub file: Option<String>,
    /// `source_file.id` holding the text.
    pub source_file_id: Option<i64>,
    /// Function.
    pub function: Option<String>,
    /// Display name.
    pub name: String,
    /// First line, 1-based.
    pub line: Option<i64>,
    /// Last line.
    pub end_line: Option<i64>,
}

fn as_string<S: serde::Serializer>(v: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// Sensors of a session, ordered by id (the order defines the compact sensor index).
pub async fn sensors(db: &Reader, sid: i64) -> Result<Vec<Sensor>, Error> {
    const Q: &str = "SELECT id, hex, kind, file, source_file_id, function, name, line, end_line \
         FROM sensor WHERE session_id = $1 ORDER BY id";
    Ok(fetch!(db, Q, [sid], |r| Sensor {
        id: r.i(0)?,
        hex: r.s(1)?,
        kind: r.os(2)?,
        file: r.os(3)?,
        source_file_id: r.oi(4)?,
        function: r.os(5)?,
        name: r.s(6)?,
        line: r.oi(7)?,
        end_line: r.oi(8)?,
    }))
}

/// A source file with its text.
#[derive(Debug, Clone, Serialize)]
pub struct SourceFile {
    /// Id.
    pub id: i64,
    /// Path (relative to the instrumented tree; a label, never opened).
    pub path: String,
    /// Language.
    pub language: String,
    /// Number of lines.
    pub lines: i64,
    /// Text, if the merge had it.
    pub text: Option<String>,
}

/// One source file, if present.
pub async fn source_file(db: &Reader, sid: i64, id: i64) -> Result<Option<SourceFile>, Error> {
    const Q: &str = "SELECT id, path, language, lines, text FROM source_file \
         WHERE session_id = $1 AND id = $2";
    let mut v = fetch!(db, Q, [sid, id], |r| SourceFile {
        id: r.i(0)?,
        path: r.s(1)?,
        language: r.s(2)?,
        lines: r.i(3)?,
        text: r.os(4)?,
    });
    Ok(v.pop())
}

/// An interval row as the index loads it (ordered by thread, start).
#[derive(Debug, Clone, Copy)]
pub struct IntervalRow {
    /// Thread id.
    pub thread: i64,
    /// Sensor id.
    pub sensor: i64,
    /// Start, ns.
    pub t_start: i64,
    /// End, ns.
    pub t_end: i64,
    /// Nesting depth (0 = outermost).
    pub depth: i64,
    /// Time not spent in nested intervals.
    pub self_ns: i64,
}

/// All intervals of a session, in table order (the index sorts them: an ORDER BY here costs
/// SQLite a temporary B-tree over millions of rows).
pub async fn intervals(db: &Reader, sid: i64) -> Result<Vec<IntervalRow>, Error> {
    const Q: &str = "SELECT thread_id, sensor_id, t_start, t_end, depth, self_ns FROM interval \
         WHERE session_id = $1";
    Ok(fetch!(db, Q, [sid], |r| IntervalRow {
        thread: r.i(0)?,
        sensor: r.i(1)?,
        t_start: r.i(2)?,
        t_end: r.i(3)?,
        depth: r.i(4)?,
        self_ns: r.i(5)?,
    }))
}

/// A state row (ordered by thread, start).
#[derive(Debug, Clone)]
pub struct StateRow {
    /// Thread id.
    pub thread: i64,
    /// Start.
    pub t_start: i64,
    /// End.
    pub t_end: i64,
    /// Position of the state's name in the `names` given to [`states`] (`names.len()` when
    /// not among them).
    pub state: u32,
}

/// All states of a session (table order); state names are mapped to their position in `names`.
pub async fn states(db: &Reader, sid: i64, names: &[&str]) -> Result<Vec<StateRow>, Error> {
    const Q: &str = "SELECT thread_id, t_start, t_end, state FROM state WHERE session_id = $1";
    Ok(fetch!(db, Q, [sid], |r| StateRow {
        thread: r.i(0)?,
        t_start: r.i(1)?,
        t_end: r.i(2)?,
        state: r.cat(3, names)?,
    }))
}

/// A scheduling interval of a traced thread: it had a CPU.
#[derive(Debug, Clone, Copy)]
pub struct SchedRow {
    /// Thread id.
    pub thread: i64,
    /// CPU.
    pub cpu: i64,
    /// Start.
    pub t_start: i64,
    /// End.
    pub t_end: i64,
}

/// Scheduling intervals of the session's own threads (table order).
pub async fn sched(db: &Reader, sid: i64) -> Result<Vec<SchedRow>, Error> {
    const Q: &str = "SELECT thread_id, cpu, t_start, t_end FROM sched \
         WHERE session_id = $1 AND thread_id IS NOT NULL";
    Ok(fetch!(db, Q, [sid], |r| SchedRow {
        thread: r.i(0)?,
        cpu: r.i(1)?,
        t_start: r.i(2)?,
        t_end: r.i(3)?,
    }))
}

/// An interrupt instant.
#[derive(Debug, Clone, Copy)]
pub struct IrqRow {
    /// Host.
    pub host: i64,
    /// IRQ number.
    pub irq: i64,
    /// Time.
    pub t: i64,
}

/// Interrupts of a session (table order).
pub async fn irqs(db: &Reader, sid: i64) -> Result<Vec<IrqRow>, Error> {
    const Q: &str = "SELECT host_id, irq, t FROM irq WHERE session_id = $1";
    Ok(fetch!(db, Q, [sid], |r| IrqRow {
        host: r.i(0)?,
        irq: r.i(1)?,
        t: r.i(2)?,
    }))
}

/// A message with its ends.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct MessageRow {
    /// Id.
    pub id: i64,
    /// Payload bytes.
    pub bytes: i64,
    /// Sending thread.
    pub send_thread: i64,
    /// Send call start.
    pub send_t: i64,
    /// Receiving thread.
    pub recv_thread: i64,
    /// End of the receive call that completed the message.
    pub recv_t: i64,
    /// Received before sent on the merged time base.
    pub violation: bool,
    /// Sensor of the send call (compact index into the session's sensors, if known).
    pub send_sensor: Option<u32>,
    /// Sensor of the receive call.
    pub recv_sensor: Option<u32>,
}

/// A matched message (both ends known) as the viewer and the demo read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchedMessage {
    /// Message id.
    pub id: i64,
    /// Bytes.
    pub bytes: i64,
    /// Sending thread.
    pub send_thread: i64,
    /// Send call start.
    pub send_t: i64,
    /// Receiving thread.
    pub recv_thread: i64,
    /// End of the receive that completed it (its start if it never completed).
    pub recv_t: i64,
    /// Received before sent.
    pub violation: bool,
    /// Sensor of the send call.
    pub send_sensor: Option<i64>,
    /// Sensor of the receive call.
    pub recv_sensor: Option<i64>,
}

impl MatchedMessage {
    /// Receive minus send, ns (negative for a violation).
    pub fn latency_ns(&self) -> i64 {
        self.recv_t - self.send_t
    }
}

/// Matched messages (both ends known), in table order.
pub async fn messages(db: &Reader, sid: i64) -> Result<Vec<MatchedMessage>, Error> {
    const Q: &str = "SELECT id, bytes, send_thread_id, send_t, recv_thread_id, \
         COALESCE(recv_end, recv_t), violation, send_sensor_id, recv_sensor_id FROM message \
         WHERE session_id = $1 AND send_thread_id IS NOT NULL AND send_t IS NOT NULL \
         AND recv_thread_id IS NOT NULL AND COALESCE(recv_end, recv_t) IS NOT NULL";
    Ok(fetch!(db, Q, [sid], |r| MatchedMessage {
        id: r.i(0)?,
        bytes: r.i(1)?,
        send_thread: r.i(2)?,
        send_t: r.i(3)?,
        recv_thread: r.i(4)?,
        recv_t: r.i(5)?,
        violation: r.i(6)? != 0,
        send_sensor: r.oi(7)?,
        recv_sensor: r.oi(8)?,
    }))
}

/// A connection (`connection`, migration 0003).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Connection {
    /// Connection id.
    pub id: i64,
    /// Protocol (`None`: a name this version does not know).
    pub proto: Option<Protocol>,
    /// How the initiator was known.
    pub initiator_from: Option<InitiatorFrom>,
    /// Initiator's process.
    pub initiator_process: Option<i64>,
    /// Initiator's thread.
    pub initiator_thread: Option<i64>,
    /// Acceptor's process.
    pub acceptor_process: Option<i64>,
    /// Acceptor's thread.
    pub acceptor_thread: Option<i64>,
    /// Initiator's endpoint.
    pub initiator_endpoint: String,
    /// Acceptor's endpoint.
    pub acceptor_endpoint: String,
    /// First call's start.
    pub t_first: Option<i64>,
    /// Last call's end.
    pub t_last: Option<i64>,
    /// Messages initiator → acceptor.
    pub call_messages: i64,
    /// Their bytes.
    pub call_bytes: i64,
    /// Messages acceptor → initiator.
    pub return_messages: i64,
    /// Their bytes.
    pub return_bytes: i64,
}

/// Each process's clock error bound (ns) as merge estimated it (`None`: no bound stated), by
/// process id.
pub async fn clock_bounds(db: &Reader, sid: i64) -> Result<Vec<(i64, Option<i64>)>, Error> {
    const Q: &str = "SELECT process_id, error_bound_ns FROM clock_estimate \
         WHERE session_id = $1 ORDER BY process_id";
    Ok(fetch!(db, Q, [sid], |r| (r.i(0)?, r.oi(1)?)))
}

/// Throttled and count-only sensors with their call counts, most calls first (empty for a
/// database written before migration 0010).
pub async fn sensor_calls(db: &Reader, sid: i64) -> Result<Vec<schema::SensorCalls>, Error> {
    if db.schema_version().await? < 10 {
        return Ok(Vec::new());
    }
    const Q: &str = "SELECT process_id, sensor_id, t_throttled, calls, timed, timed_ns, \
         recorded, pinned FROM sensor_calls WHERE session_id = $1 \
         ORDER BY calls DESC, sensor_id, process_id";
    Ok(fetch!(db, Q, [sid], |r| schema::SensorCalls {
        session_id: sid,
        process_id: r.i(0)?,
        sensor_id: r.i(1)?,
        t_throttled: r.i(2)?,
        calls: r.i(3)?,
        timed: r.i(4)?,
        timed_ns: r.i(5)?,
        recorded: r.i(6)?,
        pinned: r.i(7)?,
    }))
}

/// Where each thread lost events to full buffers, by thread and time (empty for a database
/// written before migration 0008).
pub async fn drop_ranges(db: &Reader, sid: i64) -> Result<Vec<schema::DropRange>, Error> {
    if db.schema_version().await? < 8 {
        return Ok(Vec::new());
    }
    const Q: &str = "SELECT thread_id, t_start, t_end, events FROM drop_range \
         WHERE session_id = $1 ORDER BY thread_id, t_start";
    Ok(fetch!(db, Q, [sid], |r| schema::DropRange {
        session_id: sid,
        thread_id: r.i(0)?,
        t_start: r.i(1)?,
        t_end: r.i(2)?,
        events: r.i(3)?,
    }))
}

/// The connections of a session, by id (empty for a database merged before migration 0003
/// until the session is merged again).
pub async fn connections(db: &Reader, sid: i64) -> Result<Vec<Connection>, Error> {
    const Q: &str = "SELECT id, proto, initiator_from, initiator_process_id, \
         initiator_thread_id, acceptor_process_id, acceptor_thread_id, initiator_endpoint, \
         acceptor_endpoint, t_first, t_last, call_messages, call_bytes, return_messages, \
         return_bytes FROM connection WHERE session_id = $1 ORDER BY id";
    Ok(fetch!(db, Q, [sid], |r| Connection {
        id: r.i(0)?,
        proto: Protocol::parse(&r.s(1)?),
        initiator_from: InitiatorFrom::parse(&r.s(2)?),
        initiator_process: r.oi(3)?,
        initiator_thread: r.oi(4)?,
        acceptor_process: r.oi(5)?,
        acceptor_thread: r.oi(6)?,
        initiator_endpoint: r.s(7)?,
        acceptor_endpoint: r.s(8)?,
        t_first: r.oi(9)?,
        t_last: r.oi(10)?,
        call_messages: r.i(11)?,
        call_bytes: r.i(12)?,
        return_messages: r.i(13)?,
        return_bytes: r.i(14)?,
    }))
}

/// A message's place on its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageRole {
    /// Message id.
    pub id: i64,
    /// → `connection.id`.
    pub connection: i64,
    /// Call or return.
    pub direction: Direction,
    /// 0-based index within the connection and direction.
    pub ordinal: i64,
}

/// Every message's connection, direction and ordinal, by connection, direction, ordinal:
/// the k-th call and the k-th return of a connection are a request and its reply.
pub async fn message_roles(db: &Reader, sid: i64) -> Result<Vec<MessageRole>, Error> {
    const Q: &str = "SELECT id, connection_id, direction, ordinal FROM message \
         WHERE session_id = $1 AND connection_id IS NOT NULL \
         ORDER BY connection_id, direction, ordinal";
    let rows = fetch!(db, Q, [sid], |r| (r.i(0)?, r.i(1)?, r.s(2)?, r.i(3)?));
    Ok(rows
        .into_iter()
        .filter_map(|(id, connection, d, ordinal)| {
            Some(MessageRole {
                id,
                connection,
                direction: Direction::parse(&d)?,
                ordinal,
            })
        })
        .collect())
}

/// A `path_pattern` row of the columns every pattern query selects, in table order.
fn pattern_row<R: RowExt>(r: &R) -> Result<schema::PathPattern, sqlx::Error> {
    Ok(schema::PathPattern {
        session_id: r.i(0)?,
        run_id: r.i(1)?,
        id: r.i(2)?,
        signature: r.s(3)?,
        root_node: r.s(4)?,
        instances: r.i(5)?,
        expected: r.of(6)?,
        max_prob: r.of(7)?,
        mean_total_ns: r.i(8)?,
        p50_total_ns: r.i(9)?,
        p90_total_ns: r.i(10)?,
        rank: r.i(11)?,
    })
}

/// A `path_instance` row of the columns every instance query selects, in table order.
fn instance_row<R: RowExt>(r: &R) -> Result<schema::PathInstance, sqlx::Error> {
    Ok(schema::PathInstance {
        session_id: r.i(0)?,
        run_id: r.i(1)?,
        id: r.i(2)?,
        pattern_id: r.i(3)?,
        prob: r.of(4)?.unwrap_or(0.0),
        t_start: r.i(5)?,
        t_end: r.i(6)?,
    })
}

/// The analysis runs of a session, by id (empty before migration 0004).
pub async fn analysis_runs(db: &Reader, sid: i64) -> Result<Vec<schema::AnalysisRun>, Error> {
    if db.schema_version().await? < 4 {
        return Ok(Vec::new());
    }
    const Q: &str = "SELECT session_id, id, algorithm, params_json, source, \
         session_merged_at_wall_ns, created_at_wall_ns, messages FROM analysis_run \
         WHERE session_id = $1 ORDER BY id";
    Ok(fetch!(db, Q, [sid], |r| schema::AnalysisRun {
        session_id: r.i(0)?,
        id: r.i(1)?,
        algorithm: r.s(2)?,
        params_json: r.s(3)?,
        source: r.s(4)?,
        session_merged_at_wall_ns: r.i(5)?,
        created_at_wall_ns: r.i(6)?,
        messages: r.i(7)?,
    }))
}

/// The patterns of a run, by rank.
pub async fn path_patterns(
    db: &Reader,
    sid: i64,
    run: i64,
) -> Result<Vec<schema::PathPattern>, Error> {
    const Q: &str = "SELECT session_id, run_id, id, signature, root_node, instances, expected, \
         max_prob, mean_total_ns, p50_total_ns, p90_total_ns, rank FROM path_pattern \
         WHERE session_id = $1 AND run_id = $2 ORDER BY rank, id";
    Ok(fetch!(db, Q, [sid, run], |r| pattern_row(r)?))
}

/// The nodes of a pattern's tree, by id (parents before children).
pub async fn path_nodes(
    db: &Reader,
    sid: i64,
    run: i64,
    pattern: i64,
) -> Result<Vec<schema::PathNode>, Error> {
    const Q: &str = "SELECT session_id, run_id, pattern_id, id, parent_id, ord, node, kind, \
         visit, call_delay_mean_ns, latency_mean_ns, net_delay_mean_ns, samples FROM path_node \
         WHERE session_id = $1 AND run_id = $2 AND pattern_id = $3 ORDER BY id";
    let rows = fetch!(db, Q, [sid, run, pattern], |r| (
        schema::PathNode {
            session_id: r.i(0)?,
            run_id: r.i(1)?,
            pattern_id: r.i(2)?,
            id: r.i(3)?,
            parent_id: r.oi(4)?,
            ord: r.i(5)?,
            node: r.s(6)?,
            kind: NodeKind::Node,
            visit: Visit::Call,
            call_delay_mean_ns: r.oi(9)?,
            latency_mean_ns: r.oi(10)?,
            net_delay_mean_ns: r.oi(11)?,
            samples: r.i(12)?,
        },
        r.s(7)?,
        r.s(8)?
    ));
    let invalid = |column, value: String| Error::Invalid {
        table: "path_node",
        column,
        value,
    };
    rows.into_iter()
        .map(|(mut n, kind, visit)| {
            n.kind = NodeKind::parse(&kind).ok_or_else(|| invalid("kind", kind))?;
            n.visit = Visit::parse(&visit).ok_or_else(|| invalid("visit", visit))?;
            Ok(n)
        })
        .collect()
}

/// A message as `p5 analyze` reads it: both ends (either may be unknown), its connection
/// and its place on it. Arrival is `recv_end` (`recv_t` starts a possibly blocked receive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageEnds {
    /// Message id.
    pub id: i64,
    /// Bytes.
    pub bytes: i64,
    /// Sending process (NULL: the send was not recorded).
    pub send_process: Option<i64>,
    /// Sending thread.
    pub send_thread: Option<i64>,
    /// Send call start on the base.
    pub send_t: Option<i64>,
    /// Receiving process.
    pub recv_process: Option<i64>,
    /// Receiving thread.
    pub recv_thread: Option<i64>,
    /// End of the receive that got the last byte on the base.
    pub recv_end: Option<i64>,
    /// → `connection.id`.
    pub connection: Option<i64>,
    /// Call or return on the connection.
    pub direction: Option<Direction>,
    /// 0-based index within the connection and direction.
    pub ordinal: Option<i64>,
}

/// Streams every message of a session (table order) into `each`, without materializing
/// them: loading millions costs only what `each` keeps. Returns the number of rows.
pub async fn for_each_message_end(
    db: &Reader,
    sid: i64,
    mut each: impl FnMut(MessageEnds),
) -> Result<u64, Error> {
    // Few columns and integers only: each value costs SQLite's driver a copy.
    const Q: &str = "SELECT id, bytes, send_process_id, send_thread_id, send_t, \
         recv_process_id, recv_thread_id, recv_end, connection_id, \
         CAST(CASE direction WHEN 'call' THEN 0 WHEN 'return' THEN 1 END AS BIGINT), ordinal \
         FROM message WHERE session_id = $1";
    fn direction(code: Option<i64>) -> Option<Direction> {
        match code {
            Some(0) => Some(Direction::Call),
            Some(1) => Some(Direction::Return),
            _ => None,
        }
    }
    fn row<R: RowExt>(r: &R) -> Result<MessageEnds, sqlx::Error> {
        let direction = direction(r.oi(9)?);
        Ok(MessageEnds {
            id: r.i(0)?,
            bytes: r.i(1)?,
            send_process: r.oi(2)?,
            send_thread: r.oi(3)?,
            send_t: r.oi(4)?,
            recv_process: r.oi(5)?,
            recv_thread: r.oi(6)?,
            recv_end: r.oi(7)?,
            connection: r.oi(8)?,
            direction,
            ordinal: r.oi(10)?,
        })
    }
    let mut n = 0u64;
    match db {
        // Two million rows through sqlx's SQLite worker take ten seconds: step on the handle.
        // `session_id = ?` alone makes SQLite walk an index and fetch every row by rowid
        // (2.4 s for 2 M); a session's rows were inserted together, so read the rowid range
        // between its first and last message in table order (0.9 s), then through the
        // index whatever lies outside it (none, unless rows were written out of order).
        Reader::Sqlite(pool) => {
            const ENDS: &str = "SELECT \
                 (SELECT rowid FROM message WHERE session_id = $1 ORDER BY id LIMIT 1), \
                 (SELECT rowid FROM message WHERE session_id = $1 ORDER BY id DESC LIMIT 1)";
            let mut ends = (0, -1);
            crate::raw_rows::scan_i64::<2>(pool, ENDS, &[sid], |r| {
                ends = (r[0].unwrap_or(0), r[1].unwrap_or(-1));
            })
            .await?;
            let (lo, hi) = (ends.0.min(ends.1), ends.0.max(ends.1));
            // NOT INDEXED keeps SQLite from preferring the session index over the rowid
            // range; the range's session filter keeps other sessions' rows out.
            let inside = format!("{Q} AND rowid BETWEEN $2 AND $3").replacen(
                "FROM message",
                "FROM message NOT INDEXED",
                1,
            );
            let outside = format!("{Q} AND rowid NOT BETWEEN $2 AND $3");
            let mut one = |r: &[Option<i64>; 11]| {
                each(MessageEnds {
                    id: r[0].unwrap_or(0),
                    bytes: r[1].unwrap_or(0),
                    send_process: r[2],
                    send_thread: r[3],
                    send_t: r[4],
                    recv_process: r[5],
                    recv_thread: r[6],
                    recv_end: r[7],
                    connection: r[8],
                    direction: direction(r[9]),
                    ordinal: r[10],
                })
            };
            n = crate::raw_rows::scan_i64(pool, &inside, &[sid, lo, hi], &mut one).await?;
            n += crate::raw_rows::scan_i64(pool, &outside, &[sid, lo, hi], &mut one).await?;
        }
        Reader::Postgres(pool) => {
            let mut rows = sqlx::query(Q).bind(sid).fetch(pool);
            while let Some(r) = rows.try_next().await? {
                each(row(&r)?);
                n += 1;
            }
        }
    }
    Ok(n)
}

/// The histogram bins of a run's nodes, by node and bin.
pub async fn path_node_hist(
    db: &Reader,
    sid: i64,
    run: i64,
) -> Result<Vec<schema::PathNodeHist>, Error> {
    const Q: &str = "SELECT session_id, run_id, node_id, bin, weight FROM path_node_hist \
         WHERE session_id = $1 AND run_id = $2 ORDER BY node_id, bin";
    Ok(fetch!(db, Q, [sid, run], |r| schema::PathNodeHist {
        session_id: r.i(0)?,
        run_id: r.i(1)?,
        node_id: r.i(2)?,
        bin: r.i(3)?,
        weight: r.of(4)?.unwrap_or(0.0),
    }))
}

/// The instances of a run, by id.
pub async fn path_instances(
    db: &Reader,
    sid: i64,
    run: i64,
) -> Result<Vec<schema::PathInstance>, Error> {
    const Q: &str = "SELECT session_id, run_id, id, pattern_id, prob, t_start, t_end \
         FROM path_instance WHERE session_id = $1 AND run_id = $2 ORDER BY id";
    Ok(fetch!(db, Q, [sid, run], |r| instance_row(r)?))
}

/// The messages of a run's instances, by instance and message id.
pub async fn path_instance_messages(
    db: &Reader,
    sid: i64,
    run: i64,
) -> Result<Vec<schema::PathInstanceMessage>, Error> {
    const Q: &str = "SELECT session_id, run_id, instance_id, message_id, node_id \
         FROM path_instance_message WHERE session_id = $1 AND run_id = $2 \
         ORDER BY instance_id, message_id";
    Ok(fetch!(db, Q, [sid, run], |r| schema::PathInstanceMessage {
        session_id: r.i(0)?,
        run_id: r.i(1)?,
        instance_id: r.i(2)?,
        message_id: r.i(3)?,
        node_id: r.i(4)?,
    }))
}

/// One pattern of a run, if it exists.
pub async fn path_pattern(
    db: &Reader,
    sid: i64,
    run: i64,
    id: i64,
) -> Result<Option<schema::PathPattern>, Error> {
    const Q: &str = "SELECT session_id, run_id, id, signature, root_node, instances, expected, \
         max_prob, mean_total_ns, p50_total_ns, p90_total_ns, rank FROM path_pattern \
         WHERE session_id = $1 AND run_id = $2 AND id = $3";
    let found = fetch!(db, Q, [sid, run, id], |r| pattern_row(r)?);
    Ok(found.into_iter().next())
}

/// The histogram bins of one pattern's nodes, by node and bin.
pub async fn pattern_hist(
    db: &Reader,
    sid: i64,
    run: i64,
    pattern: i64,
) -> Result<Vec<schema::PathNodeHist>, Error> {
    // The pattern's node ids first, then their bins by the (session, run, node) index: a join
    // lets SQLite walk every bin of the run (77 ms at 10 k patterns, 0.1 ms this way).
    const Q: &str = "SELECT session_id, run_id, node_id, bin, weight FROM path_node_hist \
         WHERE session_id = $1 AND run_id = $2 AND node_id IN (SELECT id FROM path_node \
         WHERE session_id = $1 AND run_id = $2 AND pattern_id = $3) ORDER BY node_id, bin";
    Ok(fetch!(db, Q, [sid, run, pattern], |r| {
        schema::PathNodeHist {
            session_id: r.i(0)?,
            run_id: r.i(1)?,
            node_id: r.i(2)?,
            bin: r.i(3)?,
            weight: r.of(4)?.unwrap_or(0.0),
        }
    }))
}

/// Up to `limit` instances of one pattern, by start, from `offset`.
pub async fn pattern_instances(
    db: &Reader,
    sid: i64,
    run: i64,
    pattern: i64,
    (offset, limit): (i64, i64),
) -> Result<Vec<schema::PathInstance>, Error> {
    const Q: &str = "SELECT session_id, run_id, id, pattern_id, prob, t_start, t_end \
         FROM path_instance WHERE session_id = $1 AND run_id = $2 AND pattern_id = $3 \
         ORDER BY t_start, id LIMIT $4 OFFSET $5";
    Ok(fetch!(db, Q, [sid, run, pattern, limit, offset], |r| {
        instance_row(r)?
    }))
}

/// One instance of a run with its messages (message id, node id), or `None`.
pub async fn instance(
    db: &Reader,
    sid: i64,
    run: i64,
    id: i64,
) -> Result<Option<(schema::PathInstance, Vec<(i64, i64)>)>, Error> {
    const I: &str = "SELECT session_id, run_id, id, pattern_id, prob, t_start, t_end \
         FROM path_instance WHERE session_id = $1 AND run_id = $2 AND id = $3";
    // No ORDER BY: with one, SQLite walks the (session, message) index over every run.
    const M: &str = "SELECT message_id, node_id FROM path_instance_message \
         WHERE session_id = $1 AND run_id = $2 AND instance_id = $3";
    let found = fetch!(db, I, [sid, run, id], |r| instance_row(r)?);
    let Some(inst) = found.into_iter().next() else {
        return Ok(None);
    };
    let mut msgs = fetch!(db, M, [sid, run, id], |r| (r.i(0)?, r.i(1)?));
    msgs.sort_unstable();
    Ok(Some((inst, msgs)))
}

/// A convolution run's graph edges, by id (empty for other runs and before migration 0011).
pub async fn conv_edges(db: &Reader, sid: i64, run: i64) -> Result<Vec<schema::ConvEdge>, Error> {
    if db.schema_version().await? < 11 {
        return Ok(Vec::new());
    }
    const Q: &str = "SELECT session_id, run_id, id, parent_id, from_node, to_node, messages, \
         delay_ns, height_sd FROM conv_edge WHERE session_id = $1 AND run_id = $2 ORDER BY id";
    Ok(fetch!(db, Q, [sid, run], |r| schema::ConvEdge {
        session_id: r.i(0)?,
        run_id: r.i(1)?,
        id: r.i(2)?,
        parent_id: r.oi(3)?,
        from_node: r.s(4)?,
        to_node: r.s(5)?,
        messages: r.i(6)?,
        delay_ns: r.oi(7)?,
        height_sd: r.of(8)?,
    }))
}

/// A convolution run's spikes, by the edge they were found under and lag (empty before
/// migration 0011).
pub async fn conv_spikes(db: &Reader, sid: i64, run: i64) -> Result<Vec<schema::ConvSpike>, Error> {
    if db.schema_version().await? < 11 {
        return Ok(Vec::new());
    }
    const Q: &str = "SELECT session_id, run_id, edge_id, to_node, lag_ns, height_sd, messages, \
         verdict, child_edge_id FROM conv_spike WHERE session_id = $1 AND run_id = $2 \
         ORDER BY edge_id, to_node, lag_ns";
    Ok(fetch!(db, Q, [sid, run], |r| schema::ConvSpike {
        session_id: r.i(0)?,
        run_id: r.i(1)?,
        edge_id: r.i(2)?,
        to_node: r.s(3)?,
        lag_ns: r.i(4)?,
        height_sd: r.of(5)?.unwrap_or(0.0),
        messages: r.i(6)?,
        verdict: r.s(7)?,
        child_edge_id: r.oi(8)?,
    }))
}

/// A bucket of the session overview (merge's `overview` table): a group of spans of one lane.
#[derive(Debug, Clone, Copy)]
pub struct OverviewRow {
    /// Thread (states, intervals, scheduling).
    pub thread: Option<i64>,
    /// Host (IRQs).
    pub host: Option<i64>,
    /// 0 = states, d + 1 = intervals at depth d, −1 = scheduling, −2 = IRQs.
    pub lane: i64,
    /// First start of the group's spans.
    pub t_start: i64,
    /// Last end.
    pub t_end: i64,
    /// Sensor id, CPU or IRQ of the longest span.
    pub category: Option<i64>,
    /// Its state (lane 0): position in the `names` given to [`overview`].
    pub state: u32,
    /// Spans in the group.
    pub spans: i64,
    /// Time they cover.
    pub covered: i64,
}

/// The session's overview buckets by owner, lane and time; empty when the database has no
/// overview (merged before it existed).
pub async fn overview(db: &Reader, sid: i64, names: &[&str]) -> Result<Vec<OverviewRow>, Error> {
    const Q: &str = "SELECT thread_id, host_id, lane, t_start, t_end, category, \
         COALESCE(state, ''), spans, covered FROM overview WHERE session_id = $1 \
         ORDER BY thread_id, host_id, lane, t_start";
    let rows = async {
        Ok::<_, Error>(fetch!(db, Q, [sid], |r| OverviewRow {
            thread: r.oi(0)?,
            host: r.oi(1)?,
            lane: r.i(2)?,
            t_start: r.i(3)?,
            t_end: r.i(4)?,
            category: r.oi(5)?,
            state: r.cat(6, names)?,
            spans: r.i(7)?,
            covered: r.i(8)?,
        }))
    };
    match rows.await {
        Ok(v) => Ok(v),
        Err(e) => {
            tracing::debug!("no overview for session {sid}: {e}");
            Ok(Vec::new())
        }
    }
}

/// A host metric.
#[derive(Debug, Clone, Serialize)]
pub struct Metric {
    /// Metric id.
    pub id: i64,
    /// Host.
    pub host_id: i64,
    /// Name (`cpu.total.busy`, `net.eth0.rx_bytes_total`, …).
    pub name: String,
    /// Unit.
    pub unit: String,
    /// Stored value × 10^scale_exp is the value in `unit`.
    pub scale_exp: i64,
}

/// Host metrics of a session.
pub async fn host_metrics(db: &Reader, sid: i64) -> Result<Vec<Metric>, Error> {
    const Q: &str = "SELECT id, host_id, name, unit, scale_exp FROM metric \
         WHERE session_id = $1 AND kind = 'host' ORDER BY host_id, name";
    Ok(fetch!(db, Q, [sid], |r| Metric {
        id: r.i(0)?,
        host_id: r.i(1)?,
        name: r.s(2)?,
        unit: r.s(3)?,
        scale_exp: r.i(4)?,
    }))
}

/// Samples of one metric, by time: `(t, stored value)`.
pub async fn metric_samples(db: &Reader, sid: i64, metric: i64) -> Result<Vec<(i64, i64)>, Error> {
    const Q: &str = "SELECT t, value FROM metric_sample WHERE session_id = $1 AND metric_id = $2 \
         ORDER BY t";
    Ok(fetch!(db, Q, [sid, metric], |r| (r.i(0)?, r.i(1)?)))
}

/// An instant of a sensor (`mark`) as the flow analysis reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkRow {
    /// Thread.
    pub thread: i64,
    /// Sensor id.
    pub sensor: i64,
    /// Time.
    pub t: i64,
}

/// Every mark of a session (table order).
pub async fn marks(db: &Reader, sid: i64) -> Result<Vec<MarkRow>, Error> {
    const Q: &str = "SELECT thread_id, sensor_id, t FROM mark WHERE session_id = $1";
    Ok(fetch!(db, Q, [sid], |r| MarkRow {
        thread: r.i(0)?,
        sensor: r.i(1)?,
        t: r.i(2)?,
    }))
}

/// A sample of an application counter (`metric.kind = 'counter'`), with the counter's
/// name and sensor id (`metric.key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterSample {
    /// The thread that recorded it.
    pub thread: i64,
    /// The counter's sensor id.
    pub sensor: i64,
    /// Time.
    pub t: i64,
    /// Value.
    pub value: i64,
}

/// Every sample of the session's application counters (table order).
pub async fn counter_samples(db: &Reader, sid: i64) -> Result<Vec<CounterSample>, Error> {
    const Q: &str = "SELECT s.thread_id, m.key, s.t, s.value FROM metric_sample s          JOIN metric m ON m.session_id = s.session_id AND m.id = s.metric_id          WHERE s.session_id = $1 AND m.kind = 'counter'";
    Ok(fetch!(db, Q, [sid], |r| CounterSample {
        thread: r.i(0)?,
        sensor: r.i(1)?,
        t: r.i(2)?,
        value: r.i(3)?,
    }))
}

/// The flows of a `flows` run, by id.
pub async fn flows(db: &Reader, sid: i64, run: i64) -> Result<Vec<schema::Flow>, Error> {
    const Q: &str = "SELECT session_id, run_id, id, start_ref, thread_id, t_start, t_end, \
         events, messages, bytes, suspect_score, suspect_rank, label FROM flow \
         WHERE session_id = $1 AND run_id = $2 ORDER BY id";
    Ok(fetch!(db, Q, [sid, run], |r| schema::Flow {
        session_id: r.i(0)?,
        run_id: r.i(1)?,
        id: r.i(2)?,
        start_ref: r.s(3)?,
        thread_id: r.i(4)?,
        t_start: r.i(5)?,
        t_end: r.i(6)?,
        events: r.i(7)?,
        messages: r.i(8)?,
        bytes: r.i(9)?,
        suspect_score: r.of(10)?,
        suspect_rank: r.oi(11)?,
        label: r.os(12)?,
    }))
}

/// The segments of a `flows` run, by flow and start.
pub async fn flow_segments(
    db: &Reader,
    sid: i64,
    run: i64,
) -> Result<Vec<schema::FlowSegment>, Error> {
    const Q: &str = "SELECT session_id, run_id, flow_id, thread_id, t_start, t_end \
         FROM flow_segment WHERE session_id = $1 AND run_id = $2 ORDER BY flow_id, t_start";
    Ok(fetch!(db, Q, [sid, run], |r| schema::FlowSegment {
        session_id: r.i(0)?,
        run_id: r.i(1)?,
        flow_id: r.i(2)?,
        thread_id: r.i(3)?,
        t_start: r.i(4)?,
        t_end: r.i(5)?,
    }))
}

/// The call paths of a `flows` run, by flow and path.
pub async fn flow_paths(db: &Reader, sid: i64, run: i64) -> Result<Vec<schema::FlowPath>, Error> {
    const Q: &str = "SELECT session_id, run_id, flow_id, path, first_t, time_ns, bytes \
         FROM flow_path WHERE session_id = $1 AND run_id = $2 ORDER BY flow_id, path";
    Ok(fetch!(db, Q, [sid, run], |r| schema::FlowPath {
        session_id: r.i(0)?,
        run_id: r.i(1)?,
        flow_id: r.i(2)?,
        path: r.s(3)?,
        first_t: r.i(4)?,
        time_ns: r.i(5)?,
        bytes: r.i(6)?,
    }))
}

/// The root-cause candidates of a `diff` run, by id.
pub async fn flow_diffs(db: &Reader, sid: i64, run: i64) -> Result<Vec<schema::FlowDiff>, Error> {
    const Q: &str = "SELECT session_id, run_id, id, side, path, merged_leaves, first_t, len, \
         rank_time, rank_len FROM flow_diff WHERE session_id = $1 AND run_id = $2 ORDER BY id";
    Ok(fetch!(db, Q, [sid, run], |r| schema::FlowDiff {
        session_id: r.i(0)?,
        run_id: r.i(1)?,
        id: r.i(2)?,
        side: r.s(3)?,
        path: r.s(4)?,
        merged_leaves: r.os(5)?,
        first_t: r.i(6)?,
        len: r.i(7)?,
        rank_time: r.i(8)?,
        rank_len: r.i(9)?,
    }))
}

/// Typed column access shared by both backends' rows.
trait RowExt {
    fn i(&self, i: usize) -> Result<i64, sqlx::Error>;
    fn oi(&self, i: usize) -> Result<Option<i64>, sqlx::Error>;
    fn s(&self, i: usize) -> Result<String, sqlx::Error>;
    fn os(&self, i: usize) -> Result<Option<String>, sqlx::Error>;
    fn of(&self, i: usize) -> Result<Option<f64>, sqlx::Error>;
    /// Position of a text column's value in `names` (`names.len()` if absent), without
    /// allocating.
    fn cat(&self, i: usize, names: &[&str]) -> Result<u32, sqlx::Error>;
}

macro_rules! row_ext {
    ($row:ty) => {
        impl RowExt for $row {
            fn i(&self, i: usize) -> Result<i64, sqlx::Error> {
                self.try_get(i)
            }
            fn oi(&self, i: usize) -> Result<Option<i64>, sqlx::Error> {
                self.try_get(i)
            }
            fn s(&self, i: usize) -> Result<String, sqlx::Error> {
                self.try_get(i)
            }
            fn os(&self, i: usize) -> Result<Option<String>, sqlx::Error> {
                self.try_get(i)
            }
            fn of(&self, i: usize) -> Result<Option<f64>, sqlx::Error> {
                self.try_get(i)
            }
            fn cat(&self, i: usize, names: &[&str]) -> Result<u32, sqlx::Error> {
                let v: &str = self.try_get(i)?;
                Ok(names.iter().position(|n| *n == v).unwrap_or(names.len()) as u32)
            }
        }
    };
}
row_ext!(sqlx::sqlite::SqliteRow);
row_ext!(sqlx::postgres::PgRow);
