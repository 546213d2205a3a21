//! Convolution as a [`job`](crate::job) runs it: its parameters checked, the run from its
//! roots, the graph's own rows (`conv_edge`, `conv_spike`) added to the stored run, and the
//! graph printed as a table or DOT (\[P5\] Fig. 9).

use super::{Graph, Params, convolution, roots};
use crate::job::Analysis;
use crate::pattern::AnalysisResult;
use crate::progress::Progress;
use crate::{Error, Result, Trace};
use p5_tracedb::analysis::RunResults;
use std::io::{self, Write};

/// Convolution with its parameters and roots (none: found from the trace).
#[derive(Debug, Clone, Default)]
pub struct Convolution {
    /// The parameters.
    pub params: Params,
    /// Names of the nodes the paths start at.
    pub roots: Vec<String>,
}

impl Default for Params {
    fn default() -> Self {
        Params::at(10_000_000)
    }
}

impl Params {
    /// Refuses parameters outside their ranges (as usage errors naming the option).
    pub fn validate(&self) -> Result<()> {
        if self.quantum <= 0 || self.tolerance < 0 {
            return Err(Error::Usage(
                "--quantum must be positive, --tolerance not negative".into(),
            ));
        }
        for (name, v) in [("spike-sd", self.spike_sd), ("valley-sd", self.valley_sd)] {
            if !v.is_finite() || v < 0.0 {
                return Err(Error::Usage(format!("--{name} {v}: must be 0 or more")));
            }
        }
        Ok(())
    }
}

impl Analysis for Convolution {
    type Output = Graph;

    fn run(&self, trace: Trace, progress: &mut dyn FnMut(Progress)) -> Result<Graph> {
        self.params.validate()?;
        let roots = roots(&trace, &self.roots)?;
        progress(Progress::Phase("convolution", None));
        convolution(&trace, &roots, &self.params)
    }

    fn result<'o>(&self, g: &'o Graph) -> &'o AnalysisResult {
        &g.result
    }

    fn more_rows(&self, g: &Graph, sid: i64, run: i64, rows: &mut RunResults) {
        store_rows(g, sid, run, rows);
    }

    fn names_messages(&self) -> bool {
        false
    }
}

impl Graph {
    /// One line: edges, roots and paths found in input `name`.
    pub fn summary(&self, name: &str) -> String {
        let roots: std::collections::BTreeSet<&str> = self
            .edges
            .iter()
            .filter(|e| e.parent.is_none())
            .map(|e| e.from.as_str())
            .collect();
        format!(
            "{name}: {} edges from {} root(s), {} paths",
            self.edges.len(),
            roots.len(),
            self.result.patterns.len()
        )
    }
}

/// The graph's `conv_edge` and `conv_spike` rows (ids 1-based, as stored).
pub fn store_rows(g: &Graph, sid: i64, run: i64, rows: &mut RunResults) {
    use p5_tracedb::schema::{ConvEdge, ConvSpike};
    let id = |i: u32| i64::from(i) + 1;
    rows.conv_edges = g
        .edges
        .iter()
        .enumerate()
        .map(|(i, e)| ConvEdge {
            session_id: sid,
            run_id: run,
            id: i as i64 + 1,
            parent_id: e.parent.map(id),
            from_node: e.from.clone(),
            to_node: e.to.clone(),
            messages: e.messages as i64,
            delay_ns: e.delay_ns,
            height_sd: e.height_sd,
        })
        .collect();
    rows.conv_spikes = g
        .spikes
        .iter()
        .map(|s| ConvSpike {
            session_id: sid,
            run_id: run,
            edge_id: id(s.edge),
            to_node: s.to.clone(),
            lag_ns: s.lag_ns,
            height_sd: s.height_sd,
            messages: s.messages as i64,
            verdict: s.verdict.to_owned(),
            child_edge_id: s.child.map(id),
        })
        .collect();
}

fn ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

/// The graph as an indented table, one edge a line.
pub fn write_table<W: Write>(g: &Graph, mut w: W) -> io::Result<()> {
    let mut depth = vec![0usize; g.edges.len()];
    for (i, e) in g.edges.iter().enumerate() {
        depth[i] = e.parent.map_or(0, |p| depth[p as usize] + 1);
        let pad = "  ".repeat(depth[i]);
        let line = match (e.delay_ns, e.height_sd) {
            (Some(d), Some(h)) => format!(
                "{pad}{} → {}  {} messages after {:.3} ms ({h:.1} sd)",
                e.from,
                e.to,
                e.messages,
                ms(d)
            ),
            _ => format!("{pad}{} → {}  {} messages", e.from, e.to, e.messages),
        };
        writeln!(w, "{line}")?;
    }
    if g.edges.is_empty() {
        writeln!(
            w,
            "no edge with enough messages (see --min-messages, --root)"
        )?;
    }
    Ok(())
}

/// The graph in Graphviz DOT (\[P5\] Fig. 9).
pub fn write_dot<W: Write>(g: &Graph, mut w: W) -> io::Result<()> {
    let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    writeln!(w, "digraph convolution {{")?;
    writeln!(w, "  node [shape=box];")?;
    for (i, e) in g.edges.iter().enumerate() {
        if e.parent.is_none() {
            writeln!(w, "  r{i} [label=\"{}\"];", esc(&e.from))?;
        }
        writeln!(w, "  n{i} [label=\"{}\"];", esc(&e.to))?;
        let from = e.parent.map_or(format!("r{i}"), |p| format!("n{p}"));
        let label = match e.delay_ns {
            Some(d) => format!("{} msgs, {:.3} ms", e.messages, ms(d)),
            None => format!("{} msgs", e.messages),
        };
        writeln!(w, "  {from} -> n{i} [label=\"{label}\"];")?;
    }
    writeln!(w, "}}")?;
    Ok(())
}
