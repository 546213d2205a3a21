//! Flow results as rows of the trace database (migration 0009, `docs/schema.md`), without
//! I/O: a `flows` run gives `flow`, `flow_segment` and `flow_path` rows, a `diff` run
//! `flow_diff` rows; both hang off an `analysis_run` row.

use super::anomaly::Suspect;
use super::paths::PathTable;
use super::rootcause::Diff;
use super::rules::Flows;
use p5_tracedb::analysis::FlowResults;
use p5_tracedb::read::Session;
use p5_tracedb::schema::{AnalysisRun, Flow, FlowDiff, FlowPath, FlowSegment};

/// The `analysis_run` row.
pub fn run_row(
    s: &Session,
    run_id: i64,
    algorithm: &str,
    params: &serde_json::Value,
) -> AnalysisRun {
    AnalysisRun {
        session_id: s.id,
        id: run_id,
        algorithm: algorithm.to_owned(),
        params_json: params.to_string(),
        source: "sql".to_owned(),
        session_merged_at_wall_ns: s.merged_at_wall_ns,
        created_at_wall_ns: crate::store::now_wall_ns(),
        messages: s.messages,
    }
}

fn i(x: u64) -> i64 {
    i64::try_from(x).unwrap_or(i64::MAX)
}

/// The rows of a `flows` run: every flow with its score (when scored) and `normal` label
/// (flows given as known-normal, by index), its segments and its paths.
pub fn flow_rows(
    s: &Session,
    run_id: i64,
    flows: &Flows,
    suspects: &[Suspect],
    normal: &[usize],
    paths: &PathTable,
) -> FlowResults {
    let sid = s.id;
    let mut out = FlowResults::default();
    for (k, f) in flows.flows.iter().enumerate() {
        let sus = suspects.get(k);
        out.flows.push(Flow {
            session_id: sid,
            run_id,
            id: i64::from(f.id),
            start_ref: f.start.clone(),
            thread_id: f.thread,
            t_start: f.t_start,
            t_end: f.t_end,
            events: i(f.events),
            messages: i(f.messages),
            bytes: i(f.bytes),
            suspect_score: sus.map(|x| x.score),
            suspect_rank: sus.map(|x| i64::from(x.rank)),
            label: normal.contains(&k).then(|| "normal".to_owned()),
        });
    }
    out.segments = flows
        .segments
        .iter()
        .map(|g| FlowSegment {
            session_id: sid,
            run_id,
            flow_id: i64::from(g.flow) + 1,
            thread_id: g.thread,
            t_start: g.t_start,
            t_end: g.t_end,
        })
        .collect();
    out.paths = flows
        .paths
        .iter()
        .map(|p| FlowPath {
            session_id: sid,
            run_id,
            flow_id: i64::from(p.flow) + 1,
            path: paths.render(p.path),
            first_t: p.first_t,
            time_ns: p.time_ns,
            bytes: p.bytes,
        })
        .collect();
    out
}

/// The rows of a `diff` run.
pub fn diff_rows(s: &Session, run_id: i64, diff: &Diff, paths: &PathTable) -> FlowResults {
    let diffs = diff
        .differences
        .iter()
        .enumerate()
        .map(|(k, d)| FlowDiff {
            session_id: s.id,
            run_id,
            id: k as i64 + 1,
            side: d.side.as_str().to_owned(),
            path: paths.render(d.path),
            merged_leaves: (!d.leaves.is_empty()).then(|| {
                let l: Vec<&str> = d.leaves.iter().map(|&l| paths.leaf(l)).collect();
                l.join(",")
            }),
            first_t: d.first_t,
            len: i64::from(d.len),
            rank_time: i64::from(d.rank_time),
            rank_len: i64::from(d.rank_len),
        })
        .collect();
    FlowResults {
        diffs,
        ..FlowResults::default()
    }
}
