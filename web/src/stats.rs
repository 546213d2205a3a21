//! Statistics of a session (CoSMoS' static visualizer, Fig. 14): per-sensor count, total,
//! mean, percentiles, self and child time and a log₂ duration histogram; the nesting tree
//! (which sensor runs inside which, with time totals); time per thread state; and the host
//! metric means a Kiviat diagram draws. Pure: computed from a [`SessionIndex`].

use crate::index::{STATES, SessionIndex};
use serde_json::{Value, json};

/// Number of log₂ histogram bins (1 ns … 2⁴⁰ ns ≈ 18 min; longer durations land in the last).
const BINS: usize = 41;

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The log₂ bin of a duration: bin k holds `[2^(k-1), 2^k)`, bin 0 holds 0.
pub fn bin(d: i64) -> usize {
    if d <= 0 {
        0
    } else {
        (64 - d.leading_zeros() as usize).min(BINS - 1)
    }
}

/// Time per thread state over every thread, by position in [`STATES`] (the last slot:
/// states the viewer does not know).
pub fn state_totals(ix: &SessionIndex) -> Vec<i64> {
    let mut totals = vec![0i64; STATES.len() + 1];
    for tl in ix.lanes.values() {
        for (s, e, c) in tl.states.spans() {
            let k = (c as usize).min(STATES.len());
            totals[k] = totals[k].saturating_add(e.saturating_sub(s));
        }
    }
    totals
}

/// Computes the statistics document served by `/stats`.
pub fn compute(ix: &SessionIndex) -> Value {
    let n = ix.sensors.len();
    let mut durations: Vec<Vec<i64>> = vec![Vec::new(); n];
    for tl in ix.lanes.values() {
        for lane in &tl.levels {
            for (s, e, c) in lane.spans() {
                if let Some(v) = durations.get_mut(c as usize) {
                    v.push(e.saturating_sub(s));
                }
            }
        }
    }
    let mut sensors = Vec::new();
    for (i, d) in durations.iter_mut().enumerate() {
        if d.is_empty() {
            continue;
        }
        d.sort_unstable();
        let t = ix.totals[i];
        let mut hist = [0u64; BINS];
        for &x in d.iter() {
            hist[bin(x)] += 1;
        }
        let lo = hist.iter().position(|&c| c > 0).unwrap_or(0);
        let hi = hist.iter().rposition(|&c| c > 0).unwrap_or(0);
        let s = &ix.sensors[i];
        sensors.push(json!({
            "sensor": i,
            "hex": s.hex,
            "name": s.name,
            "function": s.function,
            "file": s.file,
            "line": s.line,
            "kind": s.kind,
            "count": t.count,
            "total": t.total,
            "mean": t.total as f64 / t.count.max(1) as f64,
            "min": d[0],
            "p50": percentile(d, 50.0),
            "p95": percentile(d, 95.0),
            "p99": percentile(d, 99.0),
            "max": d[d.len() - 1],
            "self": t.self_ns,
            "child": t.total.saturating_sub(t.self_ns),
            // Bin k counts durations in [2^(k-1), 2^k) ns; `first_bin` is k of counts[0].
            "hist": { "first_bin": lo, "counts": &hist[lo..=hi] },
        }));
    }
    sensors.sort_by(|a, b| {
        b["total"]
            .as_i64()
            .cmp(&a["total"].as_i64())
            .then(a["sensor"].as_u64().cmp(&b["sensor"].as_u64()))
    });
    let mut tree: Vec<_> = ix.tree.iter().collect();
    tree.sort_by_key(|(k, _)| **k);
    let tree: Vec<Value> = tree
        .into_iter()
        .map(|(&(p, c), &(count, total))| {
            json!({
                "parent": (p != u32::MAX).then_some(p),
                "child": c,
                "count": count,
                "total": total,
            })
        })
        .collect();
    let states: Vec<Value> = state_totals(ix)
        .iter()
        .enumerate()
        .filter(|(_, t)| **t > 0)
        .map(|(i, t)| json!({ "state": STATES.get(i).copied().unwrap_or("other"), "total": t }))
        .collect();
    json!({
        "sensors": sensors,
        "tree": tree,
        "states": states,
        "kiviat": kiviat(ix),
        "dropped_intervals": ix.dropped_intervals,
    })
}

/// The throttled (and count-only) sensors of `sensor_calls`, summed over processes, most
/// calls first: which sensor, when it was throttled (base ns), its calls in all, the calls
/// its intervals hold (`recorded` long calls) and the mean of its timed calls.
pub fn throttled(ix: &SessionIndex, rows: &[p5_tracedb::schema::SensorCalls]) -> Vec<Value> {
    let mut by: std::collections::BTreeMap<i64, (i64, i64, i64, i64, i64, bool)> =
        std::collections::BTreeMap::new();
    for r in rows {
        let e = by
            .entry(r.sensor_id)
            .or_insert((i64::MAX, 0, 0, 0, 0, r.pinned != 0));
        e.0 = e.0.min(r.t_throttled);
        e.1 = e.1.saturating_add(r.calls);
        e.2 = e.2.saturating_add(r.recorded);
        e.3 = e.3.saturating_add(r.timed);
        e.4 = e.4.saturating_add(r.timed_ns);
    }
    let mut out: Vec<(i64, Value)> = by
        .into_iter()
        .map(|(id, (t, calls, recorded, timed, timed_ns, pinned))| {
            let idx = ix.sensor_index.get(&id).copied();
            let s = idx.map(|i| &ix.sensors[i as usize]);
            let v = json!({
                "sensor": idx,
                "hex": s.map_or_else(|| format!("0x{:016x}", id as u64), |s| s.hex.clone()),
                "name": s.map(|s| s.name.clone()),
                "function": s.and_then(|s| s.function.clone()),
                "t_throttled": t,
                "calls": calls,
                "recorded": recorded,
                "mean": timed_ns as f64 / timed.max(1) as f64,
                "pinned": pinned,
            });
            (calls, v)
        })
        .collect();
    out.sort_by_key(|v| std::cmp::Reverse(v.0));
    out.into_iter().map(|(_, v)| v).collect()
}

/// Per host, the mean of each load series; axes are normalised by the largest host value
/// (percentages by 100) so every host's polygon fits the same diagram.
fn kiviat(ix: &SessionIndex) -> Value {
    const AXES: &[&str] = &["cpu", "mem", "load", "net_rx", "net_tx"];
    let mut hosts: Vec<(i64, String, Vec<Option<f64>>)> = Vec::new();
    for h in &ix.hosts {
        let Some(series) = ix.series.get(&h.id) else {
            continue;
        };
        let means = AXES
            .iter()
            .map(|a| {
                let s = series.iter().find(|s| s.name == *a)?;
                (!s.points.is_empty())
                    .then(|| s.points.iter().map(|p| p.1).sum::<f64>() / s.points.len() as f64)
            })
            .collect();
        hosts.push((h.id, h.hostname.clone(), means));
    }
    // The outer ring: 100 for percentages, else the largest host mean (none without data).
    let scale: Vec<Option<f64>> = (0..AXES.len())
        .map(|k| {
            if matches!(AXES[k], "cpu" | "mem") {
                Some(100.0)
            } else {
                hosts
                    .iter()
                    .filter_map(|h| h.2[k])
                    .reduce(f64::max)
                    .map(|m| m.max(f64::MIN_POSITIVE))
            }
        })
        .collect();
    let hosts: Vec<Value> = hosts
        .into_iter()
        .map(|(id, name, means)| {
            let norm: Vec<Option<f64>> = means
                .iter()
                .zip(&scale)
                .map(|(m, s)| Some((m.as_ref()? / s.as_ref()?).clamp(0.0, 1.0)))
                .collect();
            json!({ "host": id, "hostname": name, "mean": means, "normalized": norm })
        })
        .collect();
    // What the outer ring stands for on each axis, so the diagram has a scale.
    const UNITS: &[&str] = &["%", "%", "", "B/s", "B/s"];
    json!({ "axes": AXES, "units": UNITS, "scale": scale, "hosts": hosts })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 95.0), 95);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
    }

    #[test]
    fn bins_are_log2() {
        assert_eq!(bin(0), 0);
        assert_eq!(bin(1), 1);
        assert_eq!(bin(2), 2);
        assert_eq!(bin(3), 2);
        assert_eq!(bin(1024), 11);
        assert_eq!(bin(i64::MAX), BINS - 1);
    }
}
