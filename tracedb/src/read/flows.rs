//! What the convolution and flow analyses stored: convolution edges and spikes, flows with
//! their segments and call paths, and the root-cause candidates of a diff.

use super::{Reader, RowExt};
use crate::error::Error;
use crate::schema;

/// A convolution run's graph edges, by id (empty for other runs and before migration 0011).
pub async fn conv_edges(db: &Reader, sid: i64, run: i64) -> Result<Vec<schema::ConvEdge>, Error> {
    if db.schema_version().await? < 11 {
        return Ok(Vec::new());
    }
    const Q: &str = "SELECT session_id, run_id, id, parent_id, from_node, to_node, messages, \
         delay_ns, height_sd FROM conv_edge WHERE session_id = $1 AND run_id = $2 ORDER BY id";
    Ok(fetch!(db, Q, [sid, run], |r| schema::ConvEdge {
        session_id: r.i("session_id")?,
        run_id: r.i("run_id")?,
        id: r.i("id")?,
        parent_id: r.oi("parent_id")?,
        from_node: r.s("from_node")?,
        to_node: r.s("to_node")?,
        messages: r.i("messages")?,
        delay_ns: r.oi("delay_ns")?,
        height_sd: r.of("height_sd")?,
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
        session_id: r.i("session_id")?,
        run_id: r.i("run_id")?,
        edge_id: r.i("edge_id")?,
        to_node: r.s("to_node")?,
        lag_ns: r.i("lag_ns")?,
        height_sd: r.of("height_sd")?.unwrap_or(0.0),
        messages: r.i("messages")?,
        verdict: r.s("verdict")?,
        child_edge_id: r.oi("child_edge_id")?,
    }))
}

/// The flows of a `flows` run, by id.
pub async fn flows(db: &Reader, sid: i64, run: i64) -> Result<Vec<schema::Flow>, Error> {
    const Q: &str = "SELECT session_id, run_id, id, start_ref, thread_id, t_start, t_end, \
         events, messages, bytes, suspect_score, suspect_rank, label FROM flow \
         WHERE session_id = $1 AND run_id = $2 ORDER BY id";
    Ok(fetch!(db, Q, [sid, run], |r| schema::Flow {
        session_id: r.i("session_id")?,
        run_id: r.i("run_id")?,
        id: r.i("id")?,
        start_ref: r.s("start_ref")?,
        thread_id: r.i("thread_id")?,
        t_start: r.i("t_start")?,
        t_end: r.i("t_end")?,
        events: r.i("events")?,
        messages: r.i("messages")?,
        bytes: r.i("bytes")?,
        suspect_score: r.of("suspect_score")?,
        suspect_rank: r.oi("suspect_rank")?,
        label: r.os("label")?,
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
        session_id: r.i("session_id")?,
        run_id: r.i("run_id")?,
        flow_id: r.i("flow_id")?,
        thread_id: r.i("thread_id")?,
        t_start: r.i("t_start")?,
        t_end: r.i("t_end")?,
    }))
}

/// The call paths of a `flows` run, by flow and path.
pub async fn flow_paths(db: &Reader, sid: i64, run: i64) -> Result<Vec<schema::FlowPath>, Error> {
    const Q: &str = "SELECT session_id, run_id, flow_id, path, first_t, time_ns, bytes \
         FROM flow_path WHERE session_id = $1 AND run_id = $2 ORDER BY flow_id, path";
    Ok(fetch!(db, Q, [sid, run], |r| schema::FlowPath {
        session_id: r.i("session_id")?,
        run_id: r.i("run_id")?,
        flow_id: r.i("flow_id")?,
        path: r.s("path")?,
        first_t: r.i("first_t")?,
        time_ns: r.i("time_ns")?,
        bytes: r.i("bytes")?,
    }))
}

/// The root-cause candidates of a `diff` run, by id.
pub async fn flow_diffs(db: &Reader, sid: i64, run: i64) -> Result<Vec<schema::FlowDiff>, Error> {
    const Q: &str = "SELECT session_id, run_id, id, side, path, merged_leaves, first_t, len, \
         rank_time, rank_len FROM flow_diff WHERE session_id = $1 AND run_id = $2 ORDER BY id";
    Ok(fetch!(db, Q, [sid, run], |r| schema::FlowDiff {
        session_id: r.i("session_id")?,
        run_id: r.i("run_id")?,
        id: r.i("id")?,
        side: r.s("side")?,
        path: r.s("path")?,
        merged_leaves: r.os("merged_leaves")?,
        first_t: r.i("first_t")?,
        len: r.i("len")?,
        rank_time: r.i("rank_time")?,
        rank_len: r.i("rank_len")?,
    }))
}
