//! Writers of the shared pattern output: `--format table|json|dot`.
//!
//! * `table`: one line per pattern (rank, count, expectation, max probability, mean and p90
//!   latency, signature), then its call tree indented, each node with its mean latency and
//!   call delay, as \[P5\] Fig. 8 labels them.
//! * `json`: the [`AnalysisResult`] itself, `{"algorithm", "params", "patterns": [{"signature",
//!   "count", …}], "instances": […]}`; [`crate::pattern::read_json`] reads it back.
//! * `dot`: one Graphviz cluster per pattern; nodes are labelled with name and mean latency,
//!   edges with mean call delay, the first edge also with the count (\[P5\] Fig. 8).

use crate::pattern::{AnalysisResult, Pattern, Stats};
use std::io::{self, Write};

/// Output format of an analysis.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Format {
    /// Human-readable table.
    #[default]
    Table,
    /// JSON (`{"patterns": […], "instances": […]}`).
    Json,
    /// Graphviz DOT.
    Dot,
}

crate::choices!(Format { "table" => Format::Table, "json" => Format::Json, "dot" => Format::Dot });

/// Writes `result` in `format`, keeping only the first `top` patterns if given (JSON keeps
/// only the instances of the kept patterns).
pub fn write<W: Write>(
    result: &AnalysisResult,
    format: Format,
    top: Option<usize>,
    w: W,
) -> io::Result<()> {
    match format {
        Format::Table => write_table(result, top, w),
        Format::Json => write_json(result, top, w),
        Format::Dot => write_dot(result, top, w),
    }
}

fn ms(ns: f64) -> String {
    format!("{:.3}", ns / 1e6)
}

fn mean(s: &Option<Stats>) -> String {
    s.as_ref().map_or_else(|| "-".to_owned(), |s| ms(s.mean_ns))
}

/// [`mean`] with its unit (`-` alone where there is none).
fn mean_ms(s: &Option<Stats>) -> String {
    s.as_ref()
        .map_or_else(|| "-".to_owned(), |s| format!("{} ms", ms(s.mean_ns)))
}

fn kept(result: &AnalysisResult, top: Option<usize>) -> &[Pattern] {
    let n = top.unwrap_or(usize::MAX).min(result.patterns.len());
    &result.patterns[..n]
}

/// The table format.
pub fn write_table<W: Write>(
    result: &AnalysisResult,
    top: Option<usize>,
    mut w: W,
) -> io::Result<()> {
    let pats = kept(result, top);
    // Every instance counts in its pattern; an analysis may list only some (linking: the
    // most probable per root).
    let counted: u64 = result.patterns.iter().map(|p| p.count).sum();
    let listed = result.instances.len() as u64;
    writeln!(
        w,
        "{} patterns, {counted} instances{}{}",
        result.patterns.len(),
        if listed == counted || listed == 0 {
            String::new()
        } else {
            format!(", {listed} of them listed")
        },
        if result.algorithm.is_empty() {
            String::new()
        } else {
            format!(" ({})", result.algorithm)
        }
    )?;
    writeln!(
        w,
        "{:>5} {:>9} {:>11} {:>6} {:>12} {:>12}  signature",
        "rank", "count", "expected", "max_p", "mean_ms", "p90_ms"
    )?;
    for (i, p) in pats.iter().enumerate() {
        let p90 = p
            .latency
            .as_ref()
            .map_or("-".into(), |s| ms(s.p90_ns as f64));
        writeln!(
            w,
            "{:>5} {:>9} {:>11.2} {:>6.3} {:>12} {:>12}  {}",
            i + 1,
            p.count,
            p.expectation,
            p.max_prob,
            mean(&p.latency),
            p90,
            p.signature
        )?;
        for (j, n) in p.nodes.iter().enumerate().skip(1) {
            let mut depth = 0;
            let mut k = j;
            while let Some(parent) = p.nodes.get(k).and_then(|n| n.parent) {
                depth += 1;
                if depth > p.nodes.len() {
                    break;
                }
                k = parent as usize;
            }
            writeln!(
                w,
                "{:>60}{}{}  latency {}, call delay {}",
                "",
                "  ".repeat(depth),
                n.node,
                mean_ms(&n.latency),
                mean_ms(&n.call_delay)
            )?;
        }
    }
    if pats.len() < result.patterns.len() {
        writeln!(w, "… {} more patterns", result.patterns.len() - pats.len())?;
    }
    Ok(())
}

/// The JSON format.
pub fn write_json<W: Write>(
    result: &AnalysisResult,
    top: Option<usize>,
    mut w: W,
) -> io::Result<()> {
    let n = kept(result, top).len();
    if n == result.patterns.len() {
        serde_json::to_writer(&mut w, result)?;
    } else {
        let cut = AnalysisResult {
            algorithm: result.algorithm.clone(),
            params: result.params.clone(),
            patterns: result.patterns[..n].to_vec(),
            instances: result
                .instances
                .iter()
                .filter(|i| (i.pattern as usize) < n)
                .cloned()
                .collect(),
        };
        serde_json::to_writer(&mut w, &cut)?;
    }
    writeln!(w)
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The DOT format.
pub fn write_dot<W: Write>(
    result: &AnalysisResult,
    top: Option<usize>,
    mut w: W,
) -> io::Result<()> {
    writeln!(w, "digraph patterns {{\n  node [shape=box];")?;
    for (i, p) in kept(result, top).iter().enumerate() {
        writeln!(
            w,
            "  subgraph cluster_{i} {{\n    label=\"#{} {}\";",
            i + 1,
            dot_escape(&p.signature)
        )?;
        for (j, n) in p.nodes.iter().enumerate() {
            let label = if j == 0 {
                dot_escape(&n.node)
            } else {
                format!("{}\\n{} ms", dot_escape(&n.node), mean(&n.latency))
            };
            writeln!(w, "    p{i}n{j} [label=\"{label}\"];")?;
        }
        for (j, n) in p.nodes.iter().enumerate().skip(1) {
            let Some(parent) = n.parent else { continue };
            let label = if parent == 0 {
                format!("{} calls", p.count)
            } else {
                format!("{} ms", mean(&n.call_delay))
            };
            writeln!(w, "    p{i}n{parent} -> p{i}n{j} [label=\"{label}\"];")?;
        }
        writeln!(w, "  }}")?;
    }
    writeln!(w, "}}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::{Collector, Visit};
    use crate::trace::NO_TIME;

    fn result() -> AnalysisResult {
        let mut c = Collector::default();
        let v = |parent, node, t_call, t_ret| Visit {
            parent,
            node,
            t_call,
            t_ret,
            t_call_recv: NO_TIME,
            net_offset: 0,
        };
        for k in 0..2 {
            c.add(
                "A",
                &[v(0, "B", 0, 2_000_000), v(1, "C", 500_000, 1_500_000)],
                1.0,
                vec![k],
            );
        }
        c.add("A", &[v(0, "D", 0, 1)], 1.0, vec![7]);
        c.finish("test", serde_json::Value::Null)
    }

    #[test]
    fn table_lists_patterns_and_trees() {
        let mut out = Vec::new();
        write(&result(), Format::Table, None, &mut out).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("2 patterns, 3 instances (test)"), "{s}");
        assert!(s.contains("A>B(C)"));
        assert!(
            s.contains("    C  latency 1.000 ms, call delay 0.500 ms"),
            "{s}"
        );
        // An analysis that lists only some of the instances it counted says so.
        let mut some = result();
        some.instances.pop();
        let mut out = Vec::new();
        write(&some, Format::Table, None, &mut out).unwrap();
        let t = String::from_utf8(out).unwrap();
        assert!(
            t.contains("2 patterns, 3 instances, 2 of them listed (test)"),
            "{t}"
        );
        // The root's callee has no call delay: a dash, without a unit.
        assert!(s.contains("  B  latency 2.000 ms, call delay -\n"), "{s}");
    }

    #[test]
    fn json_top_keeps_the_kept_patterns_instances() {
        let mut out = Vec::new();
        write(&result(), Format::Json, Some(1), &mut out).unwrap();
        let r: AnalysisResult = serde_json::from_slice(&out).unwrap();
        assert_eq!(r.patterns.len(), 1);
        assert_eq!(r.instances.len(), 2);
    }

    #[test]
    fn dot_has_a_cluster_per_pattern() {
        let mut out = Vec::new();
        write(&result(), Format::Dot, None, &mut out).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert_eq!(s.matches("subgraph cluster_").count(), 2);
        assert!(s.contains("p0n0 -> p0n1 [label=\"2 calls\"]"), "{s}");
        assert!(s.contains("p0n1 -> p0n2 [label=\"0.500 ms\"]"), "{s}");
    }
}
