//! Tracelet configurations (TOML) and their expansion into message templates.
//!
//! ```toml
//! duration = "60s"          # simulated time (default 60 s)
//! start = "1000s"           # time of the trace's origin (default 1000 s)
//! precision = 6             # fraction digits of the written times (default 6, µs)
//! record = "send"           # which ends are written: send | recv | both (default send)
//! net = ["200us", "50us"]   # network delay, Gaussian mean and sd (default 200 µs ± 50 µs)
//!
//! [[tracelet]]
//! name = "multi-tier"
//! parallel = 4                       # clients running it in parallel (default 1)
//! think = ["0ms", "500ms"]           # uniform think time between runs (default 0)
//! call_delay = ["10ms", "2ms"]       # a caller's delay before each call (default 1 ms)
//! ret_delay = ["5ms", "1ms"]         # a callee's delay before it returns (default 1 ms)
//! nodes.WS2 = { call_delay = ["210ms", "2ms"] }   # per-node overrides
//!
//! [[tracelet.variant]]               # one is chosen per run, by weight (default 1)
//! weight = 3
//! tree = "CLIENT>WS1(AUTH,API(DB))"  # serial calls, in signature syntax
//!
//! [[tracelet.variant]]
//! steps = [                          # or an explicit message sequence
//!   { call = "A>B" },
//!   { call = "B>C", delay = ["10ms", "1ms"] },
//!   { call = "B>C", delay = "1ms" },   # a second call before the first returns
//!   { ret = "C>B", delay = "5ms" },    # closes the oldest open B→C call (or `of = 1`)
//!   { ret = "C>B", delay = "5ms" },
//!   { ret = "B>A", delay = "1ms" },
//!   { msg = "B>D" },                   # a free-form message
//! ]
//! ```
//!
//! A step's `delay` (Gaussian, clamped at 0) runs from the previous step's *arrival* to its
//! own departure; the first step leaves when the run starts. A tracelet with neither
//! variants nor its own `tree`/`steps` is an error.

use crate::Error;
use crate::parse::parse_duration;
use crate::pattern::{CallTree, parse_signature};
use crate::trace::{Kind, Time};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// A Gaussian delay: mean and standard deviation, ns.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Gauss {
    /// Mean (ns).
    pub mean: f64,
    /// Standard deviation (ns).
    pub sd: f64,
}

/// A delay as written: `"5ms"` or `["5ms", "1ms"]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum DelaySpec {
    /// Constant.
    One(String),
    /// Mean and sd.
    Two(Vec<String>),
}

impl DelaySpec {
    fn gauss(&self) -> Result<Gauss, String> {
        match self {
            DelaySpec::One(m) => Ok(Gauss {
                mean: parse_duration(m)? as f64,
                sd: 0.0,
            }),
            DelaySpec::Two(v) if (1..=2).contains(&v.len()) => Ok(Gauss {
                mean: parse_duration(&v[0])? as f64,
                sd: v
                    .get(1)
                    .map(|s| parse_duration(s))
                    .transpose()?
                    .unwrap_or(0) as f64,
            }),
            DelaySpec::Two(_) => Err("a delay is \"mean\" or [\"mean\", \"sd\"]".into()),
        }
    }
}

/// Per-node delay overrides.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// Delay before each call the node makes.
    pub call_delay: Option<DelaySpec>,
    /// Delay before the node returns.
    pub ret_delay: Option<DelaySpec>,
    /// Extra delay before each of the node's calls but the first (a `tree`'s serial calls):
    /// \[P5\] §7.2's "200 msec. delay inserted at node WS2, between the serial calls".
    pub gap: Option<String>,
}

/// One step as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepSpec {
    /// `"A>B"`: a call from A to B.
    pub call: Option<String>,
    /// `"B>A"`: B's return to A.
    pub ret: Option<String>,
    /// `"A>B"`: a free-form message.
    pub msg: Option<String>,
    /// Which step (0-based) a `ret` answers, if not the oldest open call.
    pub of: Option<usize>,
    /// Delay since the previous step's arrival.
    pub delay: Option<DelaySpec>,
}

/// One variant of a tracelet.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantSpec {
    /// Relative weight (default 1).
    pub weight: Option<f64>,
    /// Serial call tree in signature syntax.
    pub tree: Option<String>,
    /// Explicit steps.
    pub steps: Option<Vec<StepSpec>>,
}

/// One tracelet as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceletSpec {
    /// Name.
    pub name: Option<String>,
    /// Parallel clients.
    pub parallel: Option<u32>,
    /// Think time, uniform between two durations.
    pub think: Option<Vec<String>>,
    /// Default delay before each call.
    pub call_delay: Option<DelaySpec>,
    /// Default delay before each return.
    pub ret_delay: Option<DelaySpec>,
    /// Per-node overrides.
    #[serde(default)]
    pub nodes: BTreeMap<String, NodeSpec>,
    /// Variants.
    #[serde(default)]
    pub variant: Vec<VariantSpec>,
    /// A single tree (instead of variants).
    pub tree: Option<String>,
    /// A single step list (instead of variants).
    pub steps: Option<Vec<StepSpec>>,
}

/// A whole configuration as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigSpec {
    /// Simulated duration.
    pub duration: Option<String>,
    /// Trace origin.
    pub start: Option<String>,
    /// Fraction digits written.
    pub precision: Option<u8>,
    /// `send`, `recv` or `both`.
    pub record: Option<String>,
    /// Network delay.
    pub net: Option<DelaySpec>,
    /// Tracelets.
    #[serde(default)]
    pub tracelet: Vec<TraceletSpec>,
}

/// Which ends of a message are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Record {
    /// `*_SENT` lines, stamped by the sender's clock (a sniffer at the sender; \[P5\]).
    #[default]
    Send,
    /// `*_RCVD` lines, stamped by the receiver's clock.
    Recv,
    /// Both.
    Both,
}

crate::choices!(Record { "send" => Record::Send, "recv" => Record::Recv, "both" => Record::Both });

/// One message template of a variant.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Call, return or message.
    pub kind: Kind,
    /// Sender.
    pub src: String,
    /// Receiver.
    pub dst: String,
    /// Delay since the previous step's arrival.
    pub delay: Gauss,
    /// For a return: the index of the call step it answers.
    pub answers: Option<usize>,
    /// For a call or message: the index of the step that delivered the caller's cause
    /// (`None`: the root caller acts on its own).
    pub parent: Option<usize>,
}

/// A variant, expanded.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    /// Relative weight.
    pub weight: f64,
    /// The root caller.
    pub root: String,
    /// The message templates.
    pub steps: Vec<Step>,
}

/// A tracelet, expanded.
#[derive(Debug, Clone, PartialEq)]
pub struct Tracelet {
    /// Name.
    pub name: String,
    /// Parallel clients.
    pub parallel: u32,
    /// Think time bounds (ns).
    pub think: (Time, Time),
    /// Variants.
    pub variants: Vec<Variant>,
}

/// A configuration, expanded and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Simulated duration (ns).
    pub duration: Time,
    /// Origin (ns).
    pub start: Time,
    /// Fraction digits.
    pub precision: u8,
    /// Which ends are written.
    pub record: Record,
    /// Network delay.
    pub net: Gauss,
    /// Tracelets.
    pub tracelets: Vec<Tracelet>,
}

fn opt_gauss(d: &Option<DelaySpec>, default: Gauss) -> Result<Gauss, String> {
    d.as_ref().map_or(Ok(default), DelaySpec::gauss)
}

fn pair(s: &str) -> Result<(String, String), String> {
    match s.split_once('>') {
        Some((a, b)) if !a.trim().is_empty() && !b.trim().is_empty() => {
            Ok((a.trim().to_owned(), b.trim().to_owned()))
        }
        _ => Err(format!("{s:?} is not \"SENDER>RECEIVER\"")),
    }
}

impl Config {
    /// Sets every tracelet's number of parallel clients and its think time bounds (ns),
    /// where given: the load a closed-loop run is generated at (`--clients`, `--think`).
    pub fn set_load(&mut self, clients: Option<u32>, think: Option<(Time, Time)>) {
        for t in &mut self.tracelets {
            if let Some(c) = clients {
                t.parallel = c.max(1);
            }
            if let Some(th) = think {
                t.think = th;
            }
        }
    }
}

impl Config {
    /// Parses and checks a TOML configuration; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Config, Error> {
        let err = |message: String| Error::Config {
            path: path.into(),
            message,
        };
        let spec: ConfigSpec = toml::from_str(text).map_err(|e| err(e.to_string()))?;
        Config::from_spec(&spec).map_err(err)
    }

    /// Expands a parsed configuration.
    pub fn from_spec(spec: &ConfigSpec) -> Result<Config, String> {
        let duration = parse_duration(spec.duration.as_deref().unwrap_or("60s"))?;
        let start = parse_duration(spec.start.as_deref().unwrap_or("1000s"))?;
        let record = match spec.record.as_deref().unwrap_or("send") {
            "send" => Record::Send,
            "recv" => Record::Recv,
            "both" => Record::Both,
            r => return Err(format!("record = {r:?}: use send, recv or both")),
        };
        let net = opt_gauss(
            &spec.net,
            Gauss {
                mean: 200e3,
                sd: 50e3,
            },
        )?;
        let precision = spec.precision.unwrap_or(6);
        if precision > 9 {
            return Err("precision is 0 to 9 fraction digits".into());
        }
        if spec.tracelet.is_empty() {
            return Err("no [[tracelet]]".into());
        }
        if duration < 0 {
            return Err("duration is negative".into());
        }
        let tracelets = spec
            .tracelet
            .iter()
            .enumerate()
            .map(|(i, t)| tracelet(i, t))
            .collect::<Result<Vec<_>, _>>()?;
        let cfg = Config {
            duration,
            start,
            precision,
            record,
            net,
            tracelets,
        };
        for t in &cfg.tracelets {
            let moves = t.think.1 > 0
                || cfg.net.mean > 0.0
                || t.variants
                    .iter()
                    .any(|v| v.steps.iter().any(|s| s.delay.mean > 0.0));
            if !moves {
                return Err(format!(
                    "tracelet {:?}: no think time, delay or network delay: time would stand still",
                    t.name
                ));
            }
        }
        Ok(cfg)
    }

    /// Every node name the tracelets use.
    pub fn nodes(&self) -> std::collections::BTreeSet<&str> {
        self.tracelets
            .iter()
            .flat_map(|t| &t.variants)
            .flat_map(|v| &v.steps)
            .flat_map(|s| [s.src.as_str(), s.dst.as_str()])
            .collect()
    }
}

fn tracelet(i: usize, t: &TraceletSpec) -> Result<Tracelet, String> {
    let name = t.name.clone().unwrap_or_else(|| format!("tracelet{i}"));
    let ctx = |e: String| format!("tracelet {name:?}: {e}");
    let think = match t.think.as_deref() {
        None => (0, 0),
        Some([a]) => (parse_duration(a)?, parse_duration(a)?),
        Some([a, b]) => (parse_duration(a)?, parse_duration(b)?),
        Some(_) => return Err(ctx("think is [\"min\", \"max\"]".into())),
    };
    if think.0 < 0 || think.1 < think.0 {
        return Err(ctx("think needs 0 ≤ min ≤ max".into()));
    }
    let one_ms = Gauss { mean: 1e6, sd: 0.0 };
    let delays = Delays {
        call: opt_gauss(&t.call_delay, one_ms).map_err(ctx)?,
        ret: opt_gauss(&t.ret_delay, one_ms).map_err(ctx)?,
        nodes: &t.nodes,
    };
    let mut specs = t.variant.clone();
    if t.tree.is_some() || t.steps.is_some() {
        specs.push(VariantSpec {
            weight: None,
            tree: t.tree.clone(),
            steps: t.steps.clone(),
        });
    }
    if specs.is_empty() {
        return Err(ctx("no variant, tree or steps".into()));
    }
    let variants = specs
        .iter()
        .map(|v| variant(v, &delays))
        .collect::<Result<Vec<_>, _>>()
        .map_err(ctx)?;
    if variants.iter().all(|v| v.weight == 0.0) {
        return Err(ctx("every variant has weight 0".into()));
    }
    Ok(Tracelet {
        name,
        parallel: t.parallel.unwrap_or(1).max(1),
        think,
        variants,
    })
}

/// Default and per-node delays of a tracelet.
struct Delays<'a> {
    call: Gauss,
    ret: Gauss,
    nodes: &'a BTreeMap<String, NodeSpec>,
}

impl Delays<'_> {
    fn call(&self, node: &str) -> Result<Gauss, String> {
        match self.nodes.get(node) {
            Some(n) => opt_gauss(&n.call_delay, self.call),
            None => Ok(self.call),
        }
    }
    fn gap(&self, node: &str) -> Result<f64, String> {
        match self.nodes.get(node).and_then(|n| n.gap.as_deref()) {
            Some(g) => Ok(parse_duration(g)? as f64),
            None => Ok(0.0),
        }
    }
    fn ret(&self, node: &str) -> Result<Gauss, String> {
        match self.nodes.get(node) {
            Some(n) => opt_gauss(&n.ret_delay, self.ret),
            None => Ok(self.ret),
        }
    }
}

fn variant(v: &VariantSpec, d: &Delays<'_>) -> Result<Variant, String> {
    let weight = v.weight.unwrap_or(1.0);
    if !(weight.is_finite() && weight >= 0.0) {
        return Err("weight must be ≥ 0".into());
    }
    let steps = match (&v.tree, &v.steps) {
        (Some(tree), None) => {
            let (root, callees) = parse_signature(tree)?;
            let mut steps = Vec::new();
            for (i, c) in callees.iter().enumerate() {
                let extra = if i > 0 { d.gap(&root)? } else { 0.0 };
                expand(&root, c, d, &mut steps, extra, 0)?;
            }
            steps
        }
        (None, Some(s)) => s
            .iter()
            .map(|s| step(s, d))
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err("a variant has either `tree` or `steps`".into()),
    };
    let root = steps
        .first()
        .map(|s| s.src.clone())
        .ok_or("a variant has no steps")?;
    let steps = link(&root, steps)?;
    Ok(Variant {
        weight,
        root,
        steps,
    })
}

fn expand(
    caller: &str,
    t: &CallTree,
    d: &Delays<'_>,
    out: &mut Vec<Step>,
    extra: f64,
    depth: usize,
) -> Result<(), String> {
    if depth > 64 {
        return Err("tree nests too deeply".into());
    }
    out.push(Step {
        kind: Kind::Call,
        src: caller.to_owned(),
        dst: t.name.clone(),
        delay: if out.is_empty() {
            Gauss::default()
        } else {
            let g = d.call(caller)?;
            Gauss {
                mean: g.mean + extra,
                sd: g.sd,
            }
        },
        answers: None,
        parent: None,
    });
    for (i, c) in t.children.iter().enumerate() {
        let extra = if i > 0 { d.gap(&t.name)? } else { 0.0 };
        expand(&t.name, c, d, out, extra, depth + 1)?;
    }
    out.push(Step {
        kind: Kind::Ret,
        src: t.name.clone(),
        dst: caller.to_owned(),
        delay: d.ret(&t.name)?,
        answers: None,
        parent: None,
    });
    Ok(())
}

fn step(s: &StepSpec, d: &Delays<'_>) -> Result<Step, String> {
    let (kind, text) = match (&s.call, &s.ret, &s.msg) {
        (Some(c), None, None) => (Kind::Call, c),
        (None, Some(r), None) => (Kind::Ret, r),
        (None, None, Some(m)) => (Kind::Msg, m),
        _ => return Err("a step has exactly one of call, ret, msg".into()),
    };
    let (src, dst) = pair(text)?;
    let default = match kind {
        Kind::Ret => d.ret(&src)?,
        _ => d.call(&src)?,
    };
    Ok(Step {
        kind,
        delay: opt_gauss(&s.delay, default)?,
        answers: s.of,
        parent: None,
        src,
        dst,
    })
}

/// Resolves returns to their calls and calls to their causes (see [`Step::parent`]).
fn link(root: &str, mut steps: Vec<Step>) -> Result<Vec<Step>, String> {
    let mut open: Vec<usize> = Vec::new(); // calls and messages that may cause later steps
    for k in 0..steps.len() {
        let s = &steps[k];
        if s.kind == Kind::Ret {
            let pos = match s.answers {
                Some(of) => open.iter().position(|&o| o == of),
                None => open.iter().position(|&o| {
                    steps[o].kind == Kind::Call && steps[o].src == s.dst && steps[o].dst == s.src
                }),
            };
            let Some(pos) = pos else {
                return Err(format!(
                    "step {k}: return {}>{} answers no open call",
                    s.src, s.dst
                ));
            };
            let call = open.remove(pos);
            let c = &steps[call];
            if c.kind != Kind::Call || c.src != s.dst || c.dst != s.src {
                return Err(format!(
                    "step {k}: `of = {call}` is not a call {}>{}",
                    s.dst, s.src
                ));
            }
            steps[k].answers = Some(call);
        } else {
            let parent = open.iter().rev().copied().find(|&o| steps[o].dst == s.src);
            if parent.is_none() && s.src != root {
                return Err(format!(
                    "step {k}: {} sends without having been called (root is {root})",
                    s.src
                ));
            }
            steps[k].parent = parent;
            open.push(k);
        }
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_expands_into_serial_calls_and_returns() {
        let c = Config::parse(
            "[[tracelet]]\ntree = \"A>B(C,D)\"\ncall_delay = \"2ms\"\nnodes.C = { ret_delay = [\"9ms\", \"1ms\"] }\n",
            Path::new("x.toml"),
        )
        .unwrap();
        let v = &c.tracelets[0].variants[0];
        let s: Vec<String> = v
            .steps
            .iter()
            .map(|s| format!("{:?} {}>{}", s.kind, s.src, s.dst))
            .collect();
        assert_eq!(
            s,
            [
                "Call A>B", "Call B>C", "Ret C>B", "Call B>D", "Ret D>B", "Ret B>A"
            ]
        );
        assert_eq!(v.steps[2].delay, Gauss { mean: 9e6, sd: 1e6 });
        assert_eq!(v.steps[3].delay.mean, 2e6);
        assert_eq!(
            (v.steps[2].answers, v.steps[3].parent, v.steps[5].answers),
            (Some(1), Some(0), Some(0))
        );
    }

    #[test]
    fn bad_configurations_say_why() {
        let bad = |t: &str| {
            Config::parse(t, Path::new("b.toml"))
                .unwrap_err()
                .to_string()
        };
        assert!(bad("").contains("no [[tracelet]]"));
        assert!(
            bad("[[tracelet]]\nsteps = [{ call = \"A>B\" }, { call = \"C>D\" }]")
                .contains("without having been called")
        );
        assert!(
            bad("[[tracelet]]\nsteps = [{ call = \"A>B\" }, { ret = \"C>A\" }]")
                .contains("answers no open call")
        );
        assert!(bad("[[tracelet]]\ntree = \"A>B\"\nbogus = 1").contains("bogus"));
    }
}
