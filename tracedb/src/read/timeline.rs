//! What the timeline draws as spans: intervals, thread states, scheduling intervals, and the
//! overview's buckets of them.

use super::{Reader, RowExt};
use crate::error::Error;

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
        thread: r.i("thread_id")?,
        sensor: r.i("sensor_id")?,
        t_start: r.i("t_start")?,
        t_end: r.i("t_end")?,
        depth: r.i("depth")?,
        self_ns: r.i("self_ns")?,
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
        thread: r.i("thread_id")?,
        t_start: r.i("t_start")?,
        t_end: r.i("t_end")?,
        state: r.cat("state", names)?,
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
        thread: r.i("thread_id")?,
        cpu: r.i("cpu")?,
        t_start: r.i("t_start")?,
        t_end: r.i("t_end")?,
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
         COALESCE(state, '') AS state_name, spans, covered FROM overview WHERE session_id = $1 \
         ORDER BY thread_id, host_id, lane, t_start";
    let rows = async {
        Ok::<_, Error>(fetch!(db, Q, [sid], |r| OverviewRow {
            thread: r.oi("thread_id")?,
            host: r.oi("host_id")?,
            lane: r.i("lane")?,
            t_start: r.i("t_start")?,
            t_end: r.i("t_end")?,
            category: r.oi("category")?,
            state: r.cat("state_name", names)?,
            spans: r.i("spans")?,
            covered: r.i("covered")?,
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
