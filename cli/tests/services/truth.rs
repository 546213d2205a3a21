//! Ground truth for the services test: which request every recorded message belongs to, from
//! the tiers' own logs (request id, process, OS thread and CLOCK_MONOTONIC interval per
//! request), and the score of an analysis run's instances against it.

use p5_tracedb::read::{MessageEnds, Process, Thread};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

/// One line of `requests.jsonl`: a tier's interval spent on one request.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Request id (`r1`, `r2`, …).
    pub id: String,
    /// `client` or `backend`.
    pub tier: String,
    /// The client's request kind (`pooled`, `fresh`, `pg`).
    pub kind: Option<String>,
    /// OS pid and thread id.
    pub pid: i64,
    /// OS thread id.
    pub tid: i64,
    /// CLOCK_MONOTONIC start and end, ns.
    pub t0: i64,
    /// End.
    pub t1: i64,
}

/// Reads the tiers' log.
pub fn read_log(path: &Path) -> Vec<Entry> {
    let text = std::fs::read_to_string(path).expect("requests.jsonl");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"));
            let s = |k: &str| v[k].as_str().map(str::to_owned);
            let i = |k: &str| v[k].as_i64().unwrap_or_else(|| panic!("{l}: no {k}"));
            Entry {
                id: s("id").expect("id"),
                tier: s("tier").expect("tier"),
                kind: s("kind"),
                pid: i("pid"),
                tid: i("tid"),
                t0: i("t0"),
                t1: i("t1"),
            }
        })
        .collect()
}

/// Every message's request.
#[derive(Debug, Default)]
pub struct Truth {
    /// Request ids, in order of the client's log.
    pub requests: Vec<String>,
    /// Each request's kind.
    pub kinds: Vec<String>,
    /// Message id → request index.
    pub of: HashMap<i64, usize>,
    /// Messages with an end on a logging thread outside every interval of it.
    pub outside: usize,
    /// Of those, sends to a peer that was not recorded (psycopg's Terminate when a handler
    /// thread's connection is dropped after its reply): no request's.
    pub outside_to_unrecorded: usize,
    /// Messages with no end on a logging thread (neither client nor backend).
    pub unclaimed: usize,
    /// Requests the client logged with no backend line (must be 0).
    pub without_backend: usize,
    /// Mean requests in flight at the client (sum of intervals over the span).
    pub in_flight: f64,
}

/// Attributes each message to the request whose interval on one of its ends' threads holds
/// that end's time (sends by their start, receives by their end).
pub fn attribute(
    log: &[Entry],
    base_mono_ns: i64,
    processes: &[Process],
    threads: &[Thread],
    messages: &[MessageEnds],
) -> Truth {
    let mut t = Truth::default();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for e in log.iter().filter(|e| e.tier == "client") {
        index.insert(&e.id, t.requests.len());
        t.requests.push(e.id.clone());
        t.kinds.push(e.kind.clone().unwrap_or_default());
    }
    let backends: HashSet<&str> = log
        .iter()
        .filter(|e| e.tier == "backend")
        .map(|e| e.id.as_str())
        .collect();
    t.without_backend = t
        .requests
        .iter()
        .filter(|r| !backends.contains(r.as_str()))
        .count();
    let pid_of: HashMap<i64, i64> = processes.iter().map(|p| (p.id, p.pid)).collect();
    let thread_of: HashMap<(i64, i64), i64> = threads
        .iter()
        .filter_map(|th| Some(((*pid_of.get(&th.process_id)?, th.tid), th.id)))
        .collect();
    // thread id → intervals on the base (start, end, request), by start.
    let mut spans: BTreeMap<i64, Vec<(i64, i64, usize)>> = BTreeMap::new();
    for e in log {
        let (Some(&r), Some(&th)) = (index.get(e.id.as_str()), thread_of.get(&(e.pid, e.tid)))
        else {
            continue;
        };
        spans
            .entry(th)
            .or_default()
            .push((e.t0 - base_mono_ns, e.t1 - base_mono_ns, r));
    }
    for v in spans.values_mut() {
        v.sort_unstable();
    }
    let find = |th: Option<i64>, at: Option<i64>| -> Option<Option<usize>> {
        let v = spans.get(&th?)?;
        let at = at?;
        let k = v.partition_point(|s| s.0 <= at);
        Some(k.checked_sub(1).filter(|&k| at <= v[k].1).map(|k| v[k].2))
    };
    for m in messages {
        let ends = [
            find(m.send_thread, m.send_t),
            find(m.recv_thread, m.recv_end),
        ];
        match ends.iter().flatten().find_map(|r| *r) {
            Some(r) => {
                t.of.insert(m.id, r);
            }
            None if ends.iter().any(Option::is_some) => {
                t.outside += 1;
                t.outside_to_unrecorded += usize::from(m.recv_thread.is_none());
            }
            None => t.unclaimed += 1,
        }
    }
    let clients: Vec<&Entry> = log.iter().filter(|e| e.tier == "client").collect();
    let busy: i64 = clients.iter().map(|e| e.t1 - e.t0).sum();
    let lo = clients.iter().map(|e| e.t0).min().unwrap_or(0);
    let hi = clients.iter().map(|e| e.t1).max().unwrap_or(0);
    t.in_flight = busy as f64 / (hi - lo).max(1) as f64;
    t
}

/// How an analysis run's instances match the requests.
#[derive(Debug, Default)]
pub struct Score {
    /// Requests.
    pub requests: usize,
    /// Requests whose messages are exactly one instance's.
    pub exact: usize,
    /// Mean over requests of the best Jaccard index of an instance with its message set.
    pub mean_jaccard: f64,
    /// Requests none of whose messages is in an instance.
    pub without_instance: usize,
    /// Per kind (kinds whose requests share a pattern joined, `maria+pg`): (requests,
    /// instances of the patterns its exact requests have).
    pub kinds: BTreeMap<String, (usize, usize)>,
    /// Some requests that were not exact: (id, messages, best instance's messages).
    pub wrong: Vec<(String, usize, usize)>,
}

impl Score {
    /// Share of requests exactly right.
    pub fn exact_share(&self) -> f64 {
        self.exact as f64 / self.requests.max(1) as f64
    }
}

/// Scores the instances (`(instance, message)` pairs and each instance's pattern).
pub fn score(truth: &Truth, members: &[(i64, i64)], pattern_of: &HashMap<i64, i64>) -> Score {
    let mut sets: HashMap<i64, HashSet<i64>> = HashMap::new();
    let mut of_msg: HashMap<i64, Vec<i64>> = HashMap::new();
    for &(inst, msg) in members {
        sets.entry(inst).or_default().insert(msg);
        of_msg.entry(msg).or_default().push(inst);
    }
    let mut want: Vec<HashSet<i64>> = vec![HashSet::new(); truth.requests.len()];
    for (&m, &r) in &truth.of {
        want[r].insert(m);
    }
    let mut s = Score {
        requests: want.len(),
        ..Score::default()
    };
    let mut jaccard = 0.0;
    let mut exact_patterns: BTreeMap<String, HashSet<i64>> = BTreeMap::new();
    for (r, w) in want.iter().enumerate() {
        let candidates: HashSet<i64> = w
            .iter()
            .filter_map(|m| of_msg.get(m))
            .flatten()
            .copied()
            .collect();
        if candidates.is_empty() {
            s.without_instance += 1;
        }
        let best = candidates
            .iter()
            .map(|i| {
                let got = &sets[i];
                let inter = got.intersection(w).count();
                let j = inter as f64 / (got.len() + w.len() - inter).max(1) as f64;
                (j, *i, got.len())
            })
            .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)));
        let kind = &truth.kinds[r];
        s.kinds.entry(kind.clone()).or_default().0 += 1;
        match best {
            Some((j, inst, _)) if j >= 1.0 => {
                s.exact += 1;
                jaccard += 1.0;
                if let Some(&p) = pattern_of.get(&inst) {
                    exact_patterns.entry(kind.clone()).or_default().insert(p);
                }
            }
            other => {
                jaccard += other.map_or(0.0, |b| b.0);
                if s.wrong.len() < 8 {
                    s.wrong
                        .push((truth.requests[r].clone(), w.len(), other.map_or(0, |b| b.2)));
                }
            }
        }
    }
    s.mean_jaccard = jaccard / s.requests.max(1) as f64;
    let mut per_pattern: HashMap<i64, usize> = HashMap::new();
    for p in pattern_of.values() {
        *per_pattern.entry(*p).or_default() += 1;
    }
    // Kinds whose requests share a pattern (a PostgreSQL and a MariaDB query look alike
    // when both databases are unrecorded peers) are counted together, as `maria+pg`.
    let mut groups: Vec<(BTreeSet<String>, HashSet<i64>)> = exact_patterns
        .into_iter()
        .map(|(k, p)| (BTreeSet::from([k]), p))
        .collect();
    let mut i = 0;
    while i < groups.len() {
        match (i + 1..groups.len()).find(|&j| !groups[i].1.is_disjoint(&groups[j].1)) {
            Some(j) => {
                let (kinds, patterns) = groups.remove(j);
                groups[i].0.extend(kinds);
                groups[i].1.extend(patterns);
            }
            None => i += 1,
        }
    }
    let requests = std::mem::take(&mut s.kinds);
    for (kinds, patterns) in groups {
        let n: usize = patterns.iter().filter_map(|p| per_pattern.get(p)).sum();
        let r: usize = kinds
            .iter()
            .filter_map(|k| requests.get(k))
            .map(|c| c.0)
            .sum();
        let name = kinds.into_iter().collect::<Vec<_>>().join("+");
        s.kinds.insert(name, (r, n));
    }
    for (k, c) in requests {
        if !s.kinds.keys().any(|g| g.split('+').any(|x| x == k)) {
            s.kinds.insert(k, (c.0, 0));
        }
    }
    s
}
