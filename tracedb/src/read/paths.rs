//! Analysis runs and what path analysis stored: patterns, their node trees and histograms,
//! and the instances with their messages.

use super::{Reader, RowExt};
use crate::domain::{NodeKind, Visit};
use crate::error::Error;
use crate::schema;

/// A `path_pattern` row from the columns every pattern query selects, by name.
fn pattern_row<R: RowExt>(r: &R) -> Result<schema::PathPattern, sqlx::Error> {
    Ok(schema::PathPattern {
        session_id: r.i("session_id")?,
        run_id: r.i("run_id")?,
        id: r.i("id")?,
        signature: r.s("signature")?,
        root_node: r.s("root_node")?,
        instances: r.i("instances")?,
        expected: r.of("expected")?,
        max_prob: r.of("max_prob")?,
        mean_total_ns: r.i("mean_total_ns")?,
        p50_total_ns: r.i("p50_total_ns")?,
        p90_total_ns: r.i("p90_total_ns")?,
        rank: r.i("rank")?,
    })
}

/// A `path_instance` row from the columns every instance query selects, by name.
fn instance_row<R: RowExt>(r: &R) -> Result<schema::PathInstance, sqlx::Error> {
    Ok(schema::PathInstance {
        session_id: r.i("session_id")?,
        run_id: r.i("run_id")?,
        id: r.i("id")?,
        pattern_id: r.i("pattern_id")?,
        prob: r.of("prob")?.unwrap_or(0.0),
        t_start: r.i("t_start")?,
        t_end: r.i("t_end")?,
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
        session_id: r.i("session_id")?,
        id: r.i("id")?,
        algorithm: r.s("algorithm")?,
        params_json: r.s("params_json")?,
        source: r.s("source")?,
        session_merged_at_wall_ns: r.i("session_merged_at_wall_ns")?,
        created_at_wall_ns: r.i("created_at_wall_ns")?,
        messages: r.i("messages")?,
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
            session_id: r.i("session_id")?,
            run_id: r.i("run_id")?,
            pattern_id: r.i("pattern_id")?,
            id: r.i("id")?,
            parent_id: r.oi("parent_id")?,
            ord: r.i("ord")?,
            node: r.s("node")?,
            kind: NodeKind::Node,
            visit: Visit::Call,
            call_delay_mean_ns: r.oi("call_delay_mean_ns")?,
            latency_mean_ns: r.oi("latency_mean_ns")?,
            net_delay_mean_ns: r.oi("net_delay_mean_ns")?,
            samples: r.i("samples")?,
        },
        r.s("kind")?,
        r.s("visit")?
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

/// The histogram bins of a run's nodes, by node and bin.
pub async fn path_node_hist(
    db: &Reader,
    sid: i64,
    run: i64,
) -> Result<Vec<schema::PathNodeHist>, Error> {
    const Q: &str = "SELECT session_id, run_id, node_id, bin, weight FROM path_node_hist \
         WHERE session_id = $1 AND run_id = $2 ORDER BY node_id, bin";
    Ok(fetch!(db, Q, [sid, run], |r| schema::PathNodeHist {
        session_id: r.i("session_id")?,
        run_id: r.i("run_id")?,
        node_id: r.i("node_id")?,
        bin: r.i("bin")?,
        weight: r.of("weight")?.unwrap_or(0.0),
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
        session_id: r.i("session_id")?,
        run_id: r.i("run_id")?,
        instance_id: r.i("instance_id")?,
        message_id: r.i("message_id")?,
        node_id: r.i("node_id")?,
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
            session_id: r.i("session_id")?,
            run_id: r.i("run_id")?,
            node_id: r.i("node_id")?,
            bin: r.i("bin")?,
            weight: r.of("weight")?.unwrap_or(0.0),
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
    let mut msgs = fetch!(db, M, [sid, run, id], |r| (
        r.i("message_id")?,
        r.i("node_id")?
    ));
    msgs.sort_unstable();
    Ok(Some((inst, msgs)))
}
