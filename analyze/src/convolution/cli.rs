//! `p5 analyze convolution` on the command line: read the input, run
//! [`super::convolution`], print the path graph (table, JSON in the shared result format with
//! the edges in its `params`, or DOT as in \[P5\] Fig. 9) and store the run.

use super::{Graph, Params, convolution, roots};
use crate::cli::Progress;
use crate::input::InputArgs;
use crate::maketrace::config::parse_duration;
use crate::output::Format;
use crate::store::MessageIds;
use crate::{Error, Result};
use std::io::Write;

/// `p5 analyze convolution`.
#[derive(Debug, clap::Args)]
pub struct ConvolutionArgs {
    /// The input.
    #[command(flatten)]
    pub input: InputArgs,
    /// The quantum μ of the indicator functions, e.g. 10ms.
    #[arg(long, default_value = "10ms", value_name = "DURATION")]
    pub quantum: String,
    /// A spike is this many standard deviations above the correlation's mean.
    #[arg(long, default_value_t = 4.0)]
    pub spike_sd: f64,
    /// Spikes are apart only when a point below this many deviations lies between them.
    #[arg(long, default_value_t = 3.0)]
    pub valley_sd: f64,
    /// How far a message may be from a delay and still count for it (default: the quantum).
    #[arg(long, value_name = "DURATION")]
    pub tolerance: Option<String>,
    /// An edge needs at least this many messages.
    #[arg(long, default_value_t = 100)]
    pub min_messages: u64,
    /// Longest path, in edges.
    #[arg(long, default_value_t = 16)]
    pub max_depth: usize,
    /// Start the paths here (repeatable; default: every node that sends and never receives,
    /// else the sender of the first message).
    #[arg(long, value_name = "NODE")]
    pub root: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Also store the run in this trace database, as a run of `--save-session`.
    #[arg(long, value_name = "URL", requires = "save_session")]
    pub save_db: Option<String>,
    /// The session of `--save-db` to store the run in.
    #[arg(long, value_name = "NAME", requires = "save_db")]
    pub save_session: Option<String>,
}

fn duration(flag: &str, s: &str) -> Result<i64> {
    parse_duration(s).map_err(|e| Error::Usage(format!("--{flag} {s:?}: {e}")))
}

/// Runs `p5 analyze convolution`.
pub fn run(a: &ConvolutionArgs, progress: &mut dyn FnMut(Progress)) -> Result<()> {
    let quantum = duration("quantum", &a.quantum)?;
    let tolerance = match &a.tolerance {
        Some(t) => duration("tolerance", t)?,
        None => quantum,
    };
    if quantum <= 0 || tolerance < 0 {
        return Err(Error::Usage(
            "--quantum must be positive, --tolerance not negative".into(),
        ));
    }
    for (name, v) in [("spike-sd", a.spike_sd), ("valley-sd", a.valley_sd)] {
        if !v.is_finite() || v < 0.0 {
            return Err(Error::Usage(format!("--{name} {v}: must be 0 or more")));
        }
    }
    let p = Params {
        quantum,
        spike_sd: a.spike_sd,
        valley_sd: a.valley_sd,
        tolerance,
        min_messages: a.min_messages,
        max_depth: a.max_depth.clamp(1, 64),
    };
    let input = a.input.read_with_progress(false, progress)?;
    if !input.report.counts.is_empty() {
        eprintln!("{}: {}", input.name, input.report);
    }
    let roots = roots(&input.trace, &a.root)?;
    progress(Progress::Phase("convolution", None));
    let g = convolution(&input.trace, &roots, &p)?;
    progress(Progress::Done);
    eprintln!(
        "{}: {} edges from {} root(s), {} paths",
        input.name,
        g.edges.len(),
        roots.len(),
        g.result.patterns.len()
    );
    let mut targets = Vec::new();
    if let (Some(url), Some(session)) = (&a.input.db, &a.input.session) {
        targets.push((url, session, "sql".to_owned()));
    }
    if let (Some(url), Some(session)) = (&a.save_db, &a.save_session) {
        targets.push((url, session, input.name.clone()));
    }
    for (url, session, source) in targets {
        let url = crate::db::parse_url(url)?;
        let ids = MessageIds::default();
        let run = crate::db::save_result_with(
            &url,
            session,
            (&g.result, &source, &ids),
            |sid, run, rows| super::store_rows(&g, sid, run, rows),
        )?;
        eprintln!("stored as analysis run {run} of session {session}");
    }
    let out = std::io::stdout().lock();
    match a.format {
        Format::Table => write_table(&g, out)?,
        Format::Json => crate::output::write(&g.result, Format::Json, None, out)?,
        Format::Dot => write_dot(&g, out)?,
    }
    Ok(())
}

fn ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

/// The graph as an indented tree: each edge under the one it continues.
pub fn write_table<W: Write>(g: &Graph, mut w: W) -> Result<()> {
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

/// The graph in DOT, as \[P5\] Fig. 9: a node per edge's end, edges labelled with their
/// message count and delay.
pub fn write_dot<W: Write>(g: &Graph, mut w: W) -> Result<()> {
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
