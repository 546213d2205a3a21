//! Flow analysis throughput (issue 19's budgets): flow construction ≥ 1 M events/s, and the
//! root-cause diff of two 80,000-path coverage profiles ≤ 1 s (seed 002 §5.1: profiles of
//! more than 80,000 call paths, more than 21,000 differences).
//!
//! * *flows*: a cascade in memory (analysis input, not the database read): `P5_BENCH_CLIENTS`
//!   client threads (default 16) each sending `P5_BENCH_REQUESTS` requests (default 20,000)
//!   to a front thread that calls a back-end thread, with nested calls on every tier — about
//!   40 events per request. Timed: [`rules::build`] (every rule, segments, path statistics),
//!   then the coverage profiles and suspect scores of every flow, separately.
//! * *diff*: two profiles over one call tree of 100,000 paths (fan-out 8): each holds
//!   80,000, 20,000 of them on one side only (40,000 differences). Timed: [`rootcause::diff`] (Δa, Δn, prefix
//!   pruning, leaf merging, both rankings).
//!
//! Each case runs three times and prints the median, besides the load average, since other
//! builds share this machine.

use p5_analyze::flows::model::{Events, Interval, Msg, Rules, SensorInfo, Start, ThreadInfo};
use p5_analyze::flows::paths::{PathId, PathTable};
use p5_analyze::flows::rootcause::{self, Coverage};
use p5_analyze::flows::{anomaly, profiles, rules};
use p5_tracedb::domain::Direction;
use std::time::Instant;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn sensor(id: i64, name: &str) -> SensorInfo {
    SensorInfo {
        id,
        name: name.into(),
        function: Some(name.into()),
        hex: format!("{id:#018x}"),
    }
}

/// Clients × requests through client → front → back, with calls on every tier.
fn cascade(clients: usize, requests: usize) -> Events {
    let mut ev = Events {
        session: "bench".into(),
        sensors: [
            "main",
            "request",
            "encode",
            "decode",
            "serve",
            "parse",
            "render",
            "lookup",
            "crunch",
            "read_full",
            "write_full",
        ]
        .iter()
        .enumerate()
        .map(|(i, n)| sensor(i as i64 + 1, n))
        .collect(),
        ..Events::default()
    };
    let us = 1_000i64;
    let mut id = 0i64;
    let call = |ev: &mut Events, th: i64, s: i64, a: i64, b: i64, depth: i64| {
        ev.intervals.push(Interval {
            thread: th,
            sensor: s,
            t_start: a,
            t_end: b,
            depth,
        });
    };
    for c in 0..clients as i64 {
        let (ct, ft, bt) = (3 * c + 1, 3 * c + 2, 3 * c + 3);
        for (t, p) in [(ct, "client"), (ft, "front"), (bt, "back")] {
            ev.threads.push(ThreadInfo {
                id: t,
                process: t,
                program: p.into(),
            });
        }
        let end = requests as i64 * 100 * us + 10 * us;
        for t in [ct, ft, bt] {
            call(&mut ev, t, 1, 0, end, 0);
        }
        for r in 0..requests as i64 {
            let t = r * 100 * us + c;
            // Client: request → encode, send, read_full, decode.
            call(&mut ev, ct, 2, t + us, t + 90 * us, 1);
            call(&mut ev, ct, 3, t + 2 * us, t + 4 * us, 2);
            call(&mut ev, ct, 10, t + 5 * us, t + 85 * us, 2);
            call(&mut ev, ct, 4, t + 86 * us, t + 89 * us, 2);
            // Front: serve → parse, write/read to back, render, write back.
            call(&mut ev, ft, 5, t + 10 * us, t + 80 * us, 1);
            call(&mut ev, ft, 6, t + 11 * us, t + 15 * us, 2);
            call(&mut ev, ft, 10, t + 17 * us, t + 60 * us, 2);
            call(&mut ev, ft, 7, t + 61 * us, t + 70 * us, 2);
            call(&mut ev, ft, 11, t + 71 * us, t + 75 * us, 2);
            // Back: lookup → crunch.
            call(&mut ev, bt, 8, t + 21 * us, t + 50 * us, 1);
            call(&mut ev, bt, 9, t + 22 * us, t + 45 * us, 2);
            call(&mut ev, bt, 11, t + 46 * us, t + 49 * us, 2);
            for (from, to, s, e, dir, bytes) in [
                (ct, ft, t + 5 * us, t + 9 * us, Direction::Call, 128),
                (ft, bt, t + 16 * us, t + 20 * us, Direction::Call, 128),
                (bt, ft, t + 47 * us, t + 55 * us, Direction::Return, 512),
                (ft, ct, t + 72 * us, t + 80 * us, Direction::Return, 512),
            ] {
                id += 1;
                ev.messages.push(Msg {
                    id,
                    bytes,
                    send: Some((from, s)),
                    recv: Some((to, e)),
                    direction: Some(dir),
                });
            }
        }
    }
    ev
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn bench_flows() {
    let (clients, requests) = (
        env("P5_BENCH_CLIENTS", 16),
        env("P5_BENCH_REQUESTS", 20_000),
    );
    let ev = cascade(clients, requests);
    let rules = Rules {
        starts: vec![Start::MessagesFrom("client".into())],
        joins: vec![],
    };
    let n = ev.count();
    let (mut build, mut score) = (Vec::new(), Vec::new());
    let mut flows = 0;
    for _ in 0..3 {
        let mut paths = PathTable::default();
        let t = Instant::now();
        let f = rules::build(&ev, &rules, &mut paths).expect("rules resolve");
        build.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let ps = profiles::profiles(&f, profiles::ProfileKind::Coverage);
        let s = anomaly::suspects(&ps, anomaly::Reference::Nearest(1));
        score.push(t.elapsed().as_secs_f64());
        assert_eq!(s.len(), f.flows.len());
        flows = f.flows.len();
    }
    let b = median(build);
    println!(
        "flows: {n} events, {flows} flows: build {:.3} s median of 3 = {:.2} M events/s \
         (budget ≥ 1 M events/s: {}); profiles and scores {:.3} s; load {}",
        b,
        n as f64 / b / 1e6,
        if n as f64 / b >= 1e6 {
            "met"
        } else {
            "NOT met"
        },
        median(score),
        load_average()
    );
}

fn bench_diff() {
    // One call tree of 100,000 paths, fan-out 8, under program `job`.
    let mut t = PathTable::default();
    let root = t.program("job");
    let names: Vec<u32> = (0..8).map(|i| t.name(&format!("f{i}"))).collect();
    let mut all: Vec<PathId> = vec![t.child(root, names[0])];
    let mut k = 0;
    while all.len() < 100_000 {
        let parent = all[k];
        for &n in &names {
            all.push(t.child(parent, n));
        }
        k += 1;
    }
    all.truncate(100_000);
    // A: the first 80,000 paths; B: the first 60,000 and the last 20,000: 20,000 differ
    // each way.
    let a: Coverage = all[..80_000]
        .iter()
        .enumerate()
        .map(|(i, &p)| (p, i as i64))
        .collect();
    let b: Coverage = all[..60_000]
        .iter()
        .chain(&all[80_000..])
        .enumerate()
        .map(|(i, &p)| (p, i as i64))
        .collect();
    let mut times = Vec::new();
    let mut out = None;
    for _ in 0..3 {
        let s = Instant::now();
        let d = rootcause::diff(&a, &b, &t);
        times.push(s.elapsed().as_secs_f64());
        out = Some(d);
    }
    let d = out.expect("ran");
    let m = median(times);
    println!(
        "diff: profiles of {} and {} paths, {} + {} differences → {} after pruning and \
         merging: {:.3} s median of 3 (budget ≤ 1 s: {}); load {}",
        a.len(),
        b.len(),
        d.raw_anomalous,
        d.raw_normal,
        d.differences.len(),
        m,
        if m <= 1.0 { "met" } else { "NOT met" },
        load_average()
    );
}

fn main() {
    bench_flows();
    bench_diff();
}
