//! One instance of a path pattern on the Gantt (`GET /sessions/{id}/runs/{run}/instances/{i}`):
//! its messages (so the page can highlight their arrows) and, for every thread the instance
//! passed through, the time between the thread's first and last message of the instance split
//! into on CPU, waiting for a CPU and blocked, with the thread states and the functions that
//! took the most self time there — what message timing alone (Project 5, WAP5) cannot say.
//!
//! The split reads the session index: scheduling spans (when the thread had a CPU) give
//! *on CPU*; the rest of a `calculating` state is *waiting for a CPU*; the rest of any other
//! state (receiving, sending, waiting, …) is *blocked*. Without scheduling data for the thread
//! (no OS monitor), `calculating` counts as on CPU and `sched` is false.

use crate::api::{ApiResult, St, sid};
use crate::error::ApiError;
use crate::index::{STATES, SessionIndex, ThreadLanes};
use crate::paths::{find_run, id};
use axum::Json;
use axum::extract::{Path, State};
use p5_tracedb::read as query;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};

/// Functions listed per thread.
const TOP: usize = 5;

/// How a thread spent a window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Split {
    /// Scheduled on a CPU (or calculating, without scheduling data).
    pub on_cpu: i64,
    /// Calculating but not on a CPU (`None` without scheduling data).
    pub runnable: Option<i64>,
    /// In any other state and not on a CPU.
    pub blocked: i64,
    /// No state recorded.
    pub unknown: i64,
    /// Time per state name.
    pub states: BTreeMap<&'static str, i64>,
    /// (sensor index, self time), largest first, at most `TOP`.
    pub top: Vec<(u32, i64)>,
}

/// The index of `calculating` in [`STATES`].
fn calculating() -> u32 {
    STATES.iter().position(|s| *s == "calculating").unwrap_or(0) as u32
}

/// Splits `[t0, t1)` of one thread's lanes.
pub fn split(tl: &ThreadLanes, t0: i64, t1: i64) -> Split {
    let mut out = Split::default();
    let sched = !tl.sched.is_empty();
    let calc = calculating();
    let mut stated = 0i64;
    let (mut on, mut runnable, mut blocked) = (0i64, 0i64, 0i64);
    for (s, e, c) in tl.states.clipped(t0, t1) {
        let d = e - s;
        stated += d;
        let name = STATES.get(c as usize).copied().unwrap_or("other");
        *out.states.entry(name).or_default() += d;
        if !sched {
            if c == calc {
                on += d;
            } else {
                blocked += d;
            }
            continue;
        }
        let cpu = tl.sched.covered_within(s, e);
        on += cpu;
        if c == calc {
            runnable += d - cpu;
        } else {
            blocked += d - cpu;
        }
    }
    if sched {
        // On a CPU outside any recorded state (before the first event, say) still counts.
        on = tl.sched.covered_within(t0, t1);
        out.runnable = Some(runnable);
    }
    out.on_cpu = on;
    out.blocked = blocked;
    out.unknown = ((t1 - t0) - stated).max(0);
    out.top = top_functions(tl, t0, t1);
    out
}

/// Self time per sensor within `[t0, t1)`: each level's clipped spans minus the next level's
/// time inside them; the `TOP` largest.
pub fn top_functions(tl: &ThreadLanes, t0: i64, t1: i64) -> Vec<(u32, i64)> {
    let mut by: HashMap<u32, i64> = HashMap::new();
    for (d, lane) in tl.levels.iter().enumerate() {
        for (s, e, c) in lane.clipped(t0, t1) {
            let inner = tl.levels.get(d + 1).map_or(0, |l| l.covered_within(s, e));
            *by.entry(c).or_default() += (e - s - inner).max(0);
        }
    }
    let mut v: Vec<(u32, i64)> = by.into_iter().filter(|x| x.1 > 0).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.truncate(TOP);
    v
}

/// A thread's part of an instance: the window between its first and last message end.
#[derive(Debug, Clone, PartialEq)]
pub struct Visit {
    /// Thread id.
    pub thread: i64,
    /// First message end on the thread.
    pub t0: i64,
    /// Last.
    pub t1: i64,
}

/// The threads an instance's messages touch, by first time: `(send thread, send time,
/// receive thread, receive time)` per message.
pub fn visits(msgs: &[(i64, i64, i64, i64)]) -> Vec<Visit> {
    let mut by: HashMap<i64, Visit> = HashMap::new();
    let mut touch = |th: i64, t: i64| {
        let v = by.entry(th).or_insert(Visit {
            thread: th,
            t0: t,
            t1: t,
        });
        v.t0 = v.t0.min(t);
        v.t1 = v.t1.max(t);
    };
    for &(st, s, rt, r) in msgs {
        touch(st, s);
        touch(rt, r);
    }
    let mut v: Vec<Visit> = by.into_values().collect();
    v.sort_by_key(|x| (x.t0, x.thread));
    v
}

/// `GET /sessions/{id}/runs/{run}/instances/{instance}`.
pub async fn instance(State(st): St, Path((s, r, i)): Path<(String, String, String)>) -> ApiResult {
    let sid = sid(&s)?;
    let (run, _) = find_run(&st.db, sid, id("run", &r)?).await?;
    let iid = id("instance", &i)?;
    let (inst, members) = query::instance(&st.db, sid, run.id, iid)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no instance {iid} in run {}", run.id)))?;
    let nodes = query::path_nodes(&st.db, sid, run.id, inst.pattern_id).await?;
    let names: HashMap<i64, &str> = nodes.iter().map(|n| (n.id, n.node.as_str())).collect();
    let ix = st.cache.get(&st.db, sid).await?;
    let node_of: HashMap<i64, i64> = members.iter().copied().collect();
    // The pattern nodes each thread stood for: those its received messages entered.
    let mut stood: HashMap<i64, Vec<&str>> = HashMap::new();
    let mut msgs = Vec::new();
    let mut rows = Vec::new();
    for m in ix.messages.iter().filter(|m| node_of.contains_key(&m.id)) {
        msgs.push((m.send_thread, m.send_t, m.recv_thread, m.recv_t));
        let node = node_of.get(&m.id).and_then(|n| names.get(n)).copied();
        if let Some(n) = node {
            let v = stood.entry(m.recv_thread).or_default();
            if !v.contains(&n) {
                v.push(n);
            }
        }
        rows.push(json!({
            "id": m.id, "bytes": m.bytes, "node": node,
            "send_thread": m.send_thread, "send_t": m.send_t,
            "recv_thread": m.recv_thread, "recv_t": m.recv_t,
        }));
    }
    let threads: Vec<Value> = visits(&msgs)
        .iter()
        .map(|v| visit_json(&ix, v, stood.get(&v.thread).map_or(&[][..], |n| n)))
        .collect();
    Ok(Json(json!({
        "id": inst.id,
        "pattern": inst.pattern_id,
        "prob": inst.prob,
        "t_start": inst.t_start,
        "t_end": inst.t_end,
        "messages": rows,
        // Messages of the instance the merged session does not hold (a stale run).
        "missing": members.len().saturating_sub(msgs.len()),
        "threads": threads,
    })))
}

/// One thread of an instance with its split.
fn visit_json(ix: &SessionIndex, v: &Visit, nodes: &[&str]) -> Value {
    let sp = ix
        .lanes
        .get(&v.thread)
        .map(|tl| split(tl, v.t0, v.t1))
        .unwrap_or_default();
    let top: Vec<Value> = sp
        .top
        .iter()
        .map(|&(c, ns)| {
            let name = ix.sensors.get(c as usize).map(|s| s.name.as_str());
            json!({ "sensor": c, "name": name, "self_ns": ns })
        })
        .collect();
    json!({
        "thread": v.thread,
        "label": ix.thread_label(v.thread),
        "nodes": nodes,
        "t0": v.t0,
        "t1": v.t1,
        "on_cpu_ns": sp.on_cpu,
        "runnable_ns": sp.runnable,
        "blocked_ns": sp.blocked,
        "unknown_ns": sp.unknown,
        "sched": sp.runnable.is_some(),
        "states": sp.states,
        "top": top,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lod::Lane;

    fn state(name: &str) -> u32 {
        STATES.iter().position(|s| *s == name).unwrap() as u32
    }

    #[test]
    fn a_window_splits_into_cpu_runnable_and_blocked() {
        let mut tl = ThreadLanes::default();
        // calculating 0..40, receiving 40..100; on a CPU 10..30 and 50..60.
        tl.states.push(0, 40, state("calculating"));
        tl.states.push(40, 100, state("receiving"));
        tl.sched.push(10, 30, 0);
        tl.sched.push(50, 60, 1);
        let mut l0 = Lane::default();
        l0.push(0, 100, 7);
        let mut l1 = Lane::default();
        l1.push(20, 35, 8);
        tl.levels = vec![l0, l1];
        let s = split(&tl, 0, 120);
        assert_eq!(s.on_cpu, 30);
        assert_eq!(s.runnable, Some(20));
        assert_eq!(s.blocked, 50);
        assert_eq!(s.unknown, 20);
        assert_eq!(s.states["calculating"], 40);
        assert_eq!(s.top, [(7, 85), (8, 15)]);
    }

    #[test]
    fn without_scheduling_calculating_is_on_cpu() {
        let mut tl = ThreadLanes::default();
        tl.states.push(0, 40, state("calculating"));
        tl.states.push(40, 100, state("receiving"));
        let s = split(&tl, 20, 60);
        assert_eq!((s.on_cpu, s.runnable, s.blocked), (20, None, 20));
    }

    #[test]
    fn visits_span_each_threads_messages() {
        // client 1 → server 2 → db 3 → server → client.
        let v = visits(&[(1, 0, 2, 5), (2, 6, 3, 9), (3, 12, 2, 15), (2, 16, 1, 20)]);
        let w: Vec<_> = v.iter().map(|v| (v.thread, v.t0, v.t1)).collect();
        assert_eq!(w, [(1, 0, 20), (2, 5, 16), (3, 9, 12)]);
    }
}
