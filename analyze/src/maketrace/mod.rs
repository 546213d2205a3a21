//! `p5 analyze maketrace`: the tracelet-based trace generator with ground truth (\[P5\]
//! §7.1.1, §7.5.5, §7.5.6; analysis.md §3).
//!
//! A configuration ([`config`]) lists tracelets — message templates with Gaussian delays —
//! each run by N parallel clients separated by a uniform think time. The generator
//! instantiates them over the simulated duration, then:
//!
//! 1. stamps each message's written ends (`record`: send, receive or both) with the stamping
//!    node's clock: true time + its `--skew`, truncated to the written precision;
//! 2. passes the written lines, in true time order, through a sniffer with a peak capture
//!    rate and a finite queue (64 packets, \[P5\] §7.5.5) that drops what would overflow it;
//! 3. writes the surviving lines in the text format ([`crate::text`]) with a unique call id
//!    per call/return pair (and per free-form message);
//! 4. writes the ground truth: an [`AnalysisResult`] (algorithm `truth`) whose instances name
//!    the `msg_ref` (the line of the first surviving line) of every message that survived, plus
//!    every message's instance, pattern and position (its call-tree node).
//!
//! Truth timings use the true, unskewed send times (a node's latency is its return's send
//! − its call's send). Randomness comes only from a ChaCha8 generator seeded with `--seed`
//! and a Box–Muller Gaussian written here, so the same seed gives the same bytes.

pub mod config;
pub mod sniffer;

pub use config::{Config, Record};
pub use sniffer::Sniffer;

use crate::pattern::{AnalysisResult, Collector, Visit};
use crate::text::{self, Layout};
use crate::trace::{CallId, Kind, Message, NO_TIME, NodeId, Time, Trace};
use config::Gauss;
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Options of [`generate`] that the command line sets.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Random seed.
    pub seed: u64,
    /// Overrides the configuration's duration (ns).
    pub duration: Option<Time>,
    /// Overrides the configuration's `record`.
    pub record: Option<Record>,
    /// Per-node clock offsets (ns), added to the times that node stamps.
    pub skew: Vec<(String, Time)>,
    /// Sniffer peak capture rate (lines/s); `None` captures everything.
    pub capture_rate: Option<f64>,
    /// Sniffer queue length (packets).
    pub queue: usize,
    /// Every run's root node is its own endpoint, `10.x.y.z:port` (a client per parallel
    /// copy, a new ephemeral port per run, as clients that open a connection per request):
    /// what WAP5-style linking needs to tell clients apart before it aggregates them back
    /// into `CLIENT`. The ground truth keeps the root's name.
    pub client_endpoints: bool,
}

/// The endpoint name of run `run` of client copy `client` ([`Options::client_endpoints`]).
fn client_endpoint(client: u64, run: u64) -> String {
    format!(
        "10.{}.{}.{}:{}",
        client / 62_500 % 250 + 1,
        client / 250 % 250,
        client % 250 + 1,
        1024 + run % 64_000
    )
}

/// One message of the ground truth.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TruthMessage {
    /// Its `msg_ref` in the written trace (the line number of its first line).
    pub msg_ref: u64,
    /// Index of its instance in the truth's `instances` (`gt_instance`).
    pub gt_instance: u32,
    /// Index of its pattern in the truth's `patterns` (`gt_pattern`).
    pub gt_pattern: u32,
    /// Its call-tree node in the pattern: the callee of a call or message, the returning
    /// node of a return.
    pub position: u32,
    /// Call, return or message.
    pub kind: Kind,
}

/// What the sniffer did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CaptureStats {
    /// Messages generated.
    pub messages: u64,
    /// Lines offered to the sniffer.
    pub lines: u64,
    /// Lines dropped.
    pub dropped: u64,
    /// dropped / lines.
    pub drop_rate: f64,
}

/// The ground-truth file: a result (algorithm `truth`) plus every message's place.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GroundTruth {
    /// Patterns and instances (instances list surviving messages only).
    #[serde(flatten)]
    pub result: AnalysisResult,
    /// Every surviving message, in `msg_ref` order.
    pub messages: Vec<TruthMessage>,
    /// The sniffer's account.
    pub capture: CaptureStats,
}

/// A generated trace: the text file's bytes and its ground truth.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The trace as written (messages in first-line order).
    pub trace: Trace,
    /// Its layout (line order) for [`text::write`].
    pub layout: Layout,
    /// The truth.
    pub truth: GroundTruth,
}

impl Generated {
    /// The text trace's bytes.
    pub fn text(&self) -> Vec<u8> {
        let mut out = Vec::new();
        // Writing to memory cannot fail.
        let _ = text::write(&self.trace, &self.layout, &mut out);
        out
    }
}

/// A Gaussian sample (Box–Muller) from the generator's own uniform draws.
fn gauss(rng: &mut ChaCha8Rng, g: Gauss) -> f64 {
    if g.sd == 0.0 {
        return g.mean;
    }
    let u1 = 1.0 - unit(rng); // (0, 1]
    let u2 = unit(rng);
    g.mean + g.sd * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A uniform draw in [0, 1).
fn unit(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

fn delay(rng: &mut ChaCha8Rng, g: Gauss) -> Time {
    gauss(rng, g).max(0.0).round() as Time
}

/// One generated message, before stamping.
#[derive(Debug, Clone, Copy)]
struct Gen {
    send: Time,
    recv: Time,
    src: NodeId,
    dst: NodeId,
    kind: Kind,
    call_id: CallId,
}

/// One run of a variant.
#[derive(Debug, Clone, Copy)]
struct Run {
    tracelet: u32,
    variant: u32,
    first: usize,
    start: Time,
}

/// Instantiates the tracelets over the duration: messages (by instance) and runs.
fn simulate(
    cfg: &Config,
    opts: &Options,
    rng: &mut ChaCha8Rng,
    nodes: &mut crate::Nodes,
    progress: &mut dyn FnMut(u64, u64),
) -> (Vec<Gen>, Vec<Run>) {
    let duration = opts.duration.unwrap_or(cfg.duration);
    let end = cfg.start.saturating_add(duration);
    let (mut msgs, mut runs) = (Vec::new(), Vec::new());
    let mut next_id: CallId = 0;
    let clients: u64 = cfg.tracelets.iter().map(|t| u64::from(t.parallel)).sum();
    let mut done = 0;
    for (ti, t) in cfg.tracelets.iter().enumerate() {
        let total_w: f64 = t.variants.iter().map(|v| v.weight).sum();
        let ids: Vec<Vec<(NodeId, NodeId)>> = t
            .variants
            .iter()
            .map(|v| {
                v.steps
                    .iter()
                    .map(|s| (nodes.intern(&s.src), nodes.intern(&s.dst)))
                    .collect()
            })
            .collect();
        let roots: Vec<NodeId> = t.variants.iter().map(|v| nodes.intern(&v.root)).collect();
        let think =
            |rng: &mut ChaCha8Rng| t.think.0 + ((t.think.1 - t.think.0) as f64 * unit(rng)) as Time;
        for _client in 0..t.parallel {
            let mut at = cfg.start + think(rng);
            let mut run_no = 0u64;
            while at < end {
                let mut pick = unit(rng) * total_w;
                let mut vi = 0;
                while vi + 1 < t.variants.len() && pick >= t.variants[vi].weight {
                    pick -= t.variants[vi].weight;
                    vi += 1;
                }
                let v = &t.variants[vi];
                let first = msgs.len();
                runs.push(Run {
                    tracelet: ti as u32,
                    variant: vi as u32,
                    first,
                    start: at,
                });
                let ep = opts
                    .client_endpoints
                    .then(|| nodes.intern(&client_endpoint(done, run_no)));
                run_no += 1;
                let node = |id: NodeId| match ep {
                    Some(ep) if id == roots[vi] => ep,
                    _ => id,
                };
                let mut arrival = at;
                for (k, s) in v.steps.iter().enumerate() {
                    let send = arrival + delay(rng, s.delay);
                    let recv = send + delay(rng, cfg.net);
                    arrival = recv;
                    let call_id = match s.answers {
                        Some(call) => msgs.get(first + call).map_or(0, |m: &Gen| m.call_id),
                        None => {
                            next_id += 1;
                            next_id - 1
                        }
                    };
                    msgs.push(Gen {
                        send,
                        recv,
                        src: node(ids[vi][k].0),
                        dst: node(ids[vi][k].1),
                        kind: s.kind,
                        call_id,
                    });
                }
                // At least 1 ns per run, so that time always moves (Config checks that some
                // delay has a positive mean; this bounds the unlucky all-zero draws).
                at = (arrival + think(rng)).max(at + 1);
            }
            done += 1;
            progress(done, clients);
        }
    }
    (msgs, runs)
}

/// Generates a trace and its ground truth from `cfg`.
pub fn generate(cfg: &Config, opts: &Options) -> Generated {
    generate_with_progress(cfg, opts, &mut |_, _| {})
}

/// [`generate`], reporting (clients simulated, clients) as it goes.
pub fn generate_with_progress(
    cfg: &Config,
    opts: &Options,
    progress: &mut dyn FnMut(u64, u64),
) -> Generated {
    let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
    let mut trace = Trace::default();
    let (msgs, runs) = simulate(cfg, opts, &mut rng, &mut trace.nodes, progress);
    let record = opts.record.unwrap_or(cfg.record);
    let skew: HashMap<NodeId, Time> = opts
        .skew
        .iter()
        .filter_map(|(n, s)| trace.nodes.get(n).map(|id| (id, *s)))
        .collect();
    let unit = 10i64.pow(9 - u32::from(cfg.precision.min(9)));
    // Lines: (stamped time, true time, message, is_receive).
    let mut lines: Vec<(Time, Time, u32, bool)> = Vec::with_capacity(msgs.len() * 2);
    for (i, m) in msgs.iter().enumerate() {
        let stamp =
            |t: Time, node| (t + skew.get(&node).copied().unwrap_or(0)).div_euclid(unit) * unit;
        if record != Record::Recv {
            lines.push((stamp(m.send, m.src), m.send, i as u32, false));
        }
        if record != Record::Send {
            lines.push((stamp(m.recv, m.dst), m.recv, i as u32, true));
        }
    }
    let mut capture = CaptureStats {
        messages: msgs.len() as u64,
        lines: lines.len() as u64,
        ..CaptureStats::default()
    };
    if let Some(rate) = opts.capture_rate {
        lines.sort_unstable_by_key(|l| (l.1, l.2, l.3));
        let mut sniffer = Sniffer::new(rate, opts.queue);
        lines.retain(|l| sniffer.offer(l.1));
        capture.dropped = capture.lines - lines.len() as u64;
        capture.drop_rate = capture.dropped as f64 / capture.lines.max(1) as f64;
    }
    lines.sort_unstable_by_key(|l| (l.0, l.1, l.2, l.3));
    // Messages in the order of their first surviving line; msg_ref = that line.
    let mut index = vec![u32::MAX; msgs.len()];
    let mut layout = Layout::fresh(cfg.precision);
    for (n, &(t, _, i, recv)) in lines.iter().enumerate() {
        let g = &msgs[i as usize];
        if index[i as usize] == u32::MAX {
            index[i as usize] = trace.messages.len() as u32;
            let mut m = Message::new(g.src, g.dst);
            m.kind = g.kind;
            m.call_id = g.call_id;
            m.msg_ref = n as u64 + 1;
            trace.messages.push(m);
        }
        let m = &mut trace.messages[index[i as usize] as usize];
        if recv {
            m.t_recv = t;
        } else {
            m.t_send = t;
        }
        layout
            .order
            .push(u64::from(index[i as usize]) << 1 | u64::from(recv));
    }
    let truth = truth(cfg, opts, &msgs, &runs, &index, &trace, capture);
    Generated {
        trace,
        layout,
        truth,
    }
}

/// Builds the ground truth from the runs.
fn truth(
    cfg: &Config,
    opts: &Options,
    msgs: &[Gen],
    runs: &[Run],
    index: &[u32],
    trace: &Trace,
    capture: CaptureStats,
) -> GroundTruth {
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by_key(|&r| (runs[r].start, r));
    let mut collector = Collector::default();
    let mut placed: Vec<(u64, u32, u32, Kind)> = Vec::new(); // msg_ref, instance, node, kind
    for (inst_no, &r) in order.iter().enumerate() {
        let run = runs[r];
        let v = &cfg.tracelets[run.tracelet as usize].variants[run.variant as usize];
        let made = &msgs[run.first..run.first + v.steps.len()];
        let mut visit_of = vec![u32::MAX; v.steps.len()];
        let mut visits = Vec::new();
        for (k, s) in v.steps.iter().enumerate() {
            if s.kind == Kind::Ret {
                continue;
            }
            visit_of[k] = visits.len() as u32;
            let t_ret = v
                .steps
                .iter()
                .enumerate()
                .find(|(_, r)| r.answers == Some(k))
                .map_or(NO_TIME, |(j, _)| made[j].send);
            visits.push(Visit {
                parent: s.parent.map_or(0, |p| visit_of[p] + 1),
                node: &s.dst,
                t_call: made[k].send,
                t_ret,
                t_call_recv: made[k].recv,
                net_offset: 0,
            });
        }
        let refs: Vec<(usize, u64)> = (0..v.steps.len())
            .filter_map(|k| {
                let i = index[run.first + k];
                (i != u32::MAX).then(|| (k, trace.messages[i as usize].msg_ref))
            })
            .collect();
        let node_of = collector.add(&v.root, &visits, 1.0, refs.iter().map(|r| r.1).collect());
        for &(k, msg_ref) in &refs {
            let s = &v.steps[k];
            let visit = match s.answers {
                Some(call) => visit_of[call],
                None => visit_of[k],
            };
            placed.push((msg_ref, inst_no as u32, node_of[visit as usize], s.kind));
        }
    }
    let params = serde_json::json!({
        "seed": opts.seed,
        "duration_ns": opts.duration.unwrap_or(cfg.duration),
        "record": format!("{:?}", opts.record.unwrap_or(cfg.record)).to_lowercase(),
        "skew_ns": opts.skew.iter().map(|(n, s)| (n.clone(), *s)).collect::<std::collections::BTreeMap<_, _>>(),
        "capture_rate": opts.capture_rate,
        "queue": opts.queue,
    });
    let result = collector.finish("truth", params);
    placed.sort_unstable_by_key(|p| p.0);
    let messages = placed
        .into_iter()
        .map(|(msg_ref, inst, position, kind)| TruthMessage {
            msg_ref,
            gt_instance: inst,
            gt_pattern: result.instances[inst as usize].pattern,
            position,
            kind,
        })
        .collect();
    GroundTruth {
        result,
        messages,
        capture,
    }
}

#[cfg(test)]
mod tests;
