//! What `flows` and `diff` print: a table, or JSON (`{"flows": […]}` and
//! `{"differences": […]}`).

use super::anomaly::Suspect;
use super::paths::PathTable;
use super::rootcause::Diff;
use super::rules::Flows;
use serde_json::json;
use std::io::{self, Write};

/// Output format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FlowFormat {
    /// Human-readable table.
    #[default]
    Table,
    /// JSON.
    Json,
}

crate::choices!(FlowFormat { "table" => FlowFormat::Table, "json" => FlowFormat::Json });

/// Order of the root-cause table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Rank {
    /// First occurrence first.
    #[default]
    Time,
    /// Shortest path first.
    Length,
}

crate::choices!(Rank { "time" => Rank::Time, "length" => Rank::Length });

fn ms(ns: i64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// The flows, most suspect first (table) or by id (JSON, `{"flows": […]}`).
pub fn write_flows<W: Write>(
    flows: &Flows,
    scores: &[Suspect],
    paths: &PathTable,
    format: FlowFormat,
    top: Option<usize>,
    mut w: W,
) -> io::Result<()> {
    let keep = top.unwrap_or(usize::MAX);
    if format == FlowFormat::Json {
        let mut seg = flows.segments.iter().peekable();
        let mut out = Vec::with_capacity(flows.flows.len());
        for (k, f) in flows.flows.iter().enumerate() {
            let mut segments = Vec::new();
            while let Some(s) = seg.next_if(|s| s.flow as usize == k) {
                segments.push(json!({"thread": s.thread, "t_start": s.t_start, "t_end": s.t_end}));
            }
            let fp: Vec<_> = flows
                .paths_of(k as u32)
                .iter()
                .map(|p| {
                    json!({"path": paths.render(p.path), "first_t": p.first_t,
                           "time_ns": p.time_ns, "bytes": p.bytes})
                })
                .collect();
            let s = scores.get(k);
            out.push(json!({
                "id": f.id, "start": f.start, "thread": f.thread, "t_start": f.t_start,
                "t_end": f.t_end, "events": f.events, "messages": f.messages, "bytes": f.bytes,
                "suspect_score": s.map(|s| s.score), "suspect_rank": s.map(|s| s.rank),
                "segments": segments, "paths": fp,
            }));
        }
        out.truncate(keep);
        serde_json::to_writer(&mut w, &json!({"flows": out})).map_err(io::Error::other)?;
        return writeln!(w);
    }
    writeln!(
        w,
        "{:>4} {:>6} {:>10} {:>12} {:>10} {:>7} {:>5} {:>9} {:>5} {:>5}  start",
        "rank", "flow", "score", "t_start_ms", "dur_ms", "events", "msgs", "bytes", "segs", "paths"
    )?;
    let mut order: Vec<usize> = (0..flows.flows.len()).collect();
    order.sort_by_key(|&k| scores.get(k).map_or(u32::MAX, |s| s.rank));
    let mut segs = vec![0usize; flows.flows.len()];
    for s in &flows.segments {
        segs[s.flow as usize] += 1;
    }
    for &k in order.iter().take(keep) {
        let f = &flows.flows[k];
        let s = scores.get(k);
        writeln!(
            w,
            "{:>4} {:>6} {:>10} {:>12} {:>10} {:>7} {:>5} {:>9} {:>5} {:>5}  {}",
            s.map_or("-".into(), |s| s.rank.to_string()),
            f.id,
            s.map_or("-".into(), |s| format!("{:.4}", s.score)),
            ms(f.t_start),
            ms(f.t_end - f.t_start),
            f.events,
            f.messages,
            f.bytes,
            segs[k],
            flows.paths_of(k as u32).len(),
            f.start
        )?;
    }
    Ok(())
}

/// The root-cause candidates, Δa before Δn, each by `rank`.
pub fn write_diff<W: Write>(
    d: &Diff,
    paths: &PathTable,
    rank: Rank,
    format: FlowFormat,
    top: Option<usize>,
    mut w: W,
) -> io::Result<()> {
    let mut order: Vec<&super::rootcause::Difference> = d.differences.iter().collect();
    order.sort_by_key(|x| {
        let r = match rank {
            Rank::Time => x.rank_time,
            Rank::Length => x.rank_len,
        };
        (x.side as u8, r)
    });
    let keep = top.unwrap_or(usize::MAX);
    if format == FlowFormat::Json {
        let v: Vec<_> = order
            .iter()
            .take(keep)
            .map(|x| {
                let leaves: Vec<&str> = x.leaves.iter().map(|&l| paths.leaf(l)).collect();
                json!({"side": x.side, "path": x.render(paths), "parent": paths.render(x.path),
                       "leaves": leaves, "first_t": x.first_t, "len": x.len,
                       "rank_time": x.rank_time, "rank_len": x.rank_len})
            })
            .collect();
        let out = json!({"raw_anomalous": d.raw_anomalous, "raw_normal": d.raw_normal,
                         "differences": v});
        serde_json::to_writer(&mut w, &out).map_err(io::Error::other)?;
        return writeln!(w);
    }
    writeln!(
        w,
        "{:<9} {:>9} {:>8} {:>12} {:>4}  path",
        "side", "rank_time", "rank_len", "first_ms", "len"
    )?;
    for x in order.into_iter().take(keep) {
        writeln!(
            w,
            "{:<9} {:>9} {:>8} {:>12} {:>4}  {}",
            x.side.as_str(),
            x.rank_time,
            x.rank_len,
            ms(x.first_t),
            x.len,
            x.render(paths)
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::rootcause::{Coverage, diff};
    use crate::flows::rules::{Flow, PathStat, Segment};

    #[test]
    fn tables_and_json() {
        let mut p = PathTable::default();
        let main = p.path("srv", &["main"]);
        let flows = Flows {
            flows: (1..=2)
                .map(|id| Flow {
                    id,
                    start: format!("message:{id}"),
                    thread: 7,
                    t_start: 1_000_000 * i64::from(id),
                    t_end: 1_500_000 * i64::from(id),
                    events: 4,
                    messages: 2,
                    bytes: 300,
                })
                .collect(),
            segments: vec![Segment {
                flow: 1,
                thread: 7,
                t_start: 2_000_000,
                t_end: 3_000_000,
            }],
            paths: vec![PathStat {
                flow: 1,
                path: main,
                first_t: 2_000_000,
                time_ns: 10,
                bytes: 300,
            }],
            ..Flows::default()
        };
        let scores = [
            Suspect {
                score: 0.0,
                rank: 2,
            },
            Suspect {
                score: 1.0,
                rank: 1,
            },
        ];
        let mut out = Vec::new();
        write_flows(&flows, &scores, &p, FlowFormat::Table, None, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(
            lines[1].contains("message:2") && lines[1].contains("1.0000"),
            "{text}"
        );
        let mut out = Vec::new();
        write_flows(&flows, &scores, &p, FlowFormat::Json, Some(1), &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["flows"].as_array().unwrap().len(), 1);
        let mut out = Vec::new();
        write_flows(&flows, &scores, &p, FlowFormat::Json, None, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["flows"][1]["paths"][0]["path"], "srv: main");
        assert_eq!(v["flows"][1]["segments"][0]["thread"], 7);
        assert_eq!(v["flows"][1]["suspect_rank"], 1);
        // A diff, both formats and both orders.
        let a: Coverage = [
            (p.path("srv", &["main", "B", "C", "D"]), 5),
            (p.path("srv", &["main", "Q"]), 9),
        ]
        .into_iter()
        .collect();
        let d = diff(&a, &Coverage::default(), &p);
        for (rank, first) in [(Rank::Time, "main→B→C→D"), (Rank::Length, "main→Q")] {
            let mut out = Vec::new();
            write_diff(&d, &p, rank, FlowFormat::Table, None, &mut out).unwrap();
            let text = String::from_utf8(out).unwrap();
            assert!(text.lines().nth(1).unwrap().ends_with(first), "{text}");
        }
        let mut out = Vec::new();
        write_diff(&d, &p, Rank::Time, FlowFormat::Json, None, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["raw_anomalous"], 2);
        assert_eq!(v["differences"][0]["side"], "anomalous");
    }
}
