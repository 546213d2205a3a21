//! Sessions and what ran in them: the session rows with their counts, hosts, processes and
//! threads, each process's clock error bound and where threads lost events.

use super::{Reader, RowExt};
use crate::error::Error;
use crate::schema;
use serde::Serialize;

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

/// The session query with `$tail` (its WHERE and ORDER BY) appended; every column named.
macro_rules! select_sessions {
    ($tail:literal) => {
        concat!(
            "SELECT id, name, t_min, t_max, events, processes, threads, messages, matched, \
             violations, diagnostics, base_wall_ns, merged_at_wall_ns, \
             (SELECT COUNT(*) FROM process p WHERE p.session_id = session.id \
             AND p.runtime NOT IN ('host-agent', 'os-monitor')) AS programs, \
             (SELECT CAST(COALESCE(SUM(t.dropped), 0) AS BIGINT) FROM thread t \
             WHERE t.session_id = session.id) AS dropped, base_mono_ns FROM session ",
            $tail
        )
    };
}
const SESSIONS: &str = select_sessions!("ORDER BY id");
const SESSION: &str = select_sessions!("WHERE id = $1");

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
        id: r.i("id")?,
        name: r.s("name")?,
        t_min: r.oi("t_min")?,
        t_max: r.oi("t_max")?,
        events: r.i("events")?,
        processes: r.i("processes")?,
        threads: r.i("threads")?,
        messages: r.i("messages")?,
        matched: r.i("matched")?,
        violations: r.i("violations")?,
        diagnostics: r.i("diagnostics")?,
        base_wall_ns: r.i("base_wall_ns")?,
        merged_at_wall_ns: r.i("merged_at_wall_ns")?,
        programs: r.i("programs")?,
        dropped: r.i("dropped")?,
        base_mono_ns: r.i("base_mono_ns")?,
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
        id: r.i("id")?,
        hostname: r.s("hostname")?
    }))
}

/// Processes of a session.
pub async fn processes(db: &Reader, sid: i64) -> Result<Vec<Process>, Error> {
    const Q: &str = "SELECT id, host_id, pid, program, argv, runtime, t_start, t_end \
         FROM process WHERE session_id = $1 ORDER BY id";
    Ok(fetch!(db, Q, [sid], |r| Process {
        id: r.i("id")?,
        host_id: r.i("host_id")?,
        pid: r.i("pid")?,
        program: r.s("program")?,
        argv: r.s("argv")?,
        runtime: r.s("runtime")?,
        t_start: r.i("t_start")?,
        t_end: r.oi("t_end")?,
    }))
}

/// Threads of a session.
pub async fn threads(db: &Reader, sid: i64) -> Result<Vec<Thread>, Error> {
    const Q: &str = "SELECT id, process_id, kind, tid, name, t_start, t_end, dropped \
         FROM thread WHERE session_id = $1 ORDER BY process_id, id";
    Ok(fetch!(db, Q, [sid], |r| Thread {
        id: r.i("id")?,
        process_id: r.i("process_id")?,
        kind: r.s("kind")?,
        tid: r.i("tid")?,
        name: r.s("name")?,
        t_start: r.oi("t_start")?,
        t_end: r.oi("t_end")?,
        dropped: r.i("dropped")?,
    }))
}

/// Each process's clock error bound (ns) as merge estimated it (`None`: no bound stated), by
/// process id.
pub async fn clock_bounds(db: &Reader, sid: i64) -> Result<Vec<(i64, Option<i64>)>, Error> {
    const Q: &str = "SELECT process_id, error_bound_ns FROM clock_estimate \
         WHERE session_id = $1 ORDER BY process_id";
    Ok(fetch!(db, Q, [sid], |r| (
        r.i("process_id")?,
        r.oi("error_bound_ns")?
    )))
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
        thread_id: r.i("thread_id")?,
        t_start: r.i("t_start")?,
        t_end: r.i("t_end")?,
        events: r.i("events")?,
    }))
}
