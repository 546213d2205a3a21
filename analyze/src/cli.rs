//! `p5 analyze …`: the command line (clap) and its [`run`]. The umbrella binary parses
//! [`AnalyzeArgs`] and calls [`run`] with a progress callback it draws as it likes.
//!
//! Subcommands: `maketrace` (ground-truth generator), `score` (accuracy against ground
//! truth), `convert` (text trace normalisation and export), `import` (a trace or capture
//! into the trace database, optionally with its ground truth as an analysis run), `show` (a
//! result from JSON or from the database as a table, JSON or DOT; `--save-db` stores it).
//! `nesting` and `convolution` (Project 5's algorithms, [`crate::nesting`],
//! [`crate::convolution`]), `linking` (WAP5's, [`crate::linking`]), `flows` and `diff`
//! (self-propelled instrumentation's, [`crate::flows`]).

use crate::clients::{FIXED_PORT_PEERS, aggregate_clients};
use crate::input::InputArgs;
use crate::maketrace::{self, Config, Record};
use crate::output::Format;
use crate::pattern::read_json;
use crate::score::{RankBy, ScoreOptions, score};
use crate::text;
use crate::{Error, Result, fat};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What a long operation reports to whoever draws progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// A phase begins, with its total if known.
    Phase(&'static str, Option<u64>),
    /// Position within the phase.
    At(u64),
    /// The operation is over.
    Done,
}

/// `p5 analyze`.
#[derive(Debug, clap::Args)]
pub struct AnalyzeArgs {
    /// The subcommand.
    #[command(subcommand)]
    pub cmd: AnalyzeCmd,
}

/// The subcommands of `p5 analyze`.
#[derive(Debug, clap::Subcommand)]
pub enum AnalyzeCmd {
    /// Generate a Project 5 text trace and its ground truth from tracelets (Project 5 paper §7.1.1).
    Maketrace(MaketraceArgs),
    /// Score an analysis result against ground truth (Project 5 paper §7.5.1).
    Score(ScoreArgs),
    /// Read a text trace and write it back normalised (optionally coalesced, aggregated).
    Convert(ConvertArgs),
    /// Print an analysis result or ground truth (JSON, or a run in the trace database) as a
    /// table, JSON or DOT.
    Show(ShowArgs),
    /// Write a text trace or pcap captures into the trace database as a session (the viewer
    /// then shows it), optionally with its ground truth as an analysis run.
    Import(ImportArgs),
    /// Causal paths from the timing of calls and returns (Project 5 nesting, its paper §5.1).
    Nesting(crate::nesting::cli::NestingArgs),
    /// Causal paths and delays of free-form messages by cross-correlating their timing
    /// (Project 5 convolution, its paper §5.2).
    Convolution(crate::convolution::cli::ConvolutionArgs),
    /// Probabilistic causal trees of free-form messages, calls and returns alike (WAP5
    /// message linking, its paper §5).
    Linking(crate::linking::cli::LinkingArgs),
    /// Flows, suspect scores and root-cause differences (self-propelled instrumentation):
    /// `flows` and `diff`.
    #[command(flatten)]
    Flows(crate::flows::cli::FlowsCmd),
}

/// `p5 analyze import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// Project 5 text trace to import.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "pcap",
        required_unless_present = "pcap"
    )]
    pub trace: Option<PathBuf>,
    /// pcap or pcapng captures of one system (repeatable; `FILE@+1.5ms` offsets a clock).
    #[arg(long, value_name = "FILE[@±OFFSET]", num_args = 1..)]
    pub pcap: Vec<String>,
    /// Node naming of captures: `host` (IP address, the default) or `endpoint`.
    #[arg(long, value_enum)]
    pub node: Option<crate::node::NodeKey>,
    /// Trace database to write (`sqlite:PATH` or `postgres://…`; created if missing).
    #[arg(long, value_name = "URL")]
    pub db: String,
    /// Session name (default: the input file's name without extension); an existing
    /// session of that name is replaced.
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    /// Ground truth from maketrace: also written as an analysis run (`algorithm = truth`).
    #[arg(long, value_name = "GT.json", requires = "trace")]
    pub truth: Option<PathBuf>,
}

/// `p5 analyze show`.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// The result or ground truth (JSON); or use `--db`.
    #[arg(required_unless_present = "db", conflicts_with = "db")]
    pub result: Option<PathBuf>,
    /// Read the result from this trace database (with `--session`, `--run`).
    #[arg(long, value_name = "URL", requires = "session")]
    pub db: Option<String>,
    /// The session whose run to read (`--db`) or to save to (`--save-db`).
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    /// The analysis run to read (default: the newest).
    #[arg(long, requires = "db")]
    pub run: Option<i64>,
    /// Also write the result into this trace database as a new run of `--session`.
    #[arg(long, value_name = "URL", requires = "session")]
    pub save_db: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Only the N most frequent patterns.
    #[arg(long)]
    pub top: Option<usize>,
}

/// `p5 analyze maketrace`.
#[derive(Debug, clap::Args)]
pub struct MaketraceArgs {
    /// Tracelet configuration (TOML; see analyze/fixtures).
    pub config: PathBuf,
    /// Random seed: the same seed gives the same bytes.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Text trace to write.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Ground-truth JSON to write.
    #[arg(long)]
    pub truth: Option<PathBuf>,
    /// Simulated duration (overrides the configuration), e.g. 500s.
    #[arg(long)]
    pub duration: Option<String>,
    /// Which ends of each message are written (overrides the configuration).
    #[arg(long, value_enum)]
    pub record: Option<Record>,
    /// Clock skew of a node, e.g. WS2=+30ms (repeatable; a bare number is milliseconds).
    #[arg(long, value_name = "NODE=±MS")]
    pub skew: Vec<String>,
    /// Sniffer peak capture rate in packets/s (default: capture everything).
    #[arg(long)]
    pub capture_rate: Option<f64>,
    /// Sniffer queue length in packets.
    #[arg(long, default_value_t = 64)]
    pub loss_queue: usize,
    /// Name every run's root after its own client endpoint (`10.x.y.z:port`, a new port per
    /// run) instead of the tracelet's root name; linking aggregates them back into `CLIENT`.
    #[arg(long)]
    pub client_endpoints: bool,
}

/// `p5 analyze score`.
#[derive(Debug, clap::Args)]
pub struct ScoreArgs {
    /// Ground truth (from maketrace).
    #[arg(long)]
    pub truth: PathBuf,
    /// The analysis result (JSON).
    pub result: PathBuf,
    /// The N of the top-N false-negative rate: a range `1..40`, a list `1,5,10` or one N.
    #[arg(long, default_value = "1..40")]
    pub top: String,
    /// Tolerances of the top-N rate besides 0.
    #[arg(long, value_delimiter = ',', default_value = "0.02,0.06")]
    pub tolerance: Vec<f64>,
    /// Rank patterns by count or by expectation (linking).
    #[arg(long, value_enum, default_value_t = RankBy::Count)]
    pub rank: RankBy,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Write here instead of standard output.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// `p5 analyze convert`.
#[derive(Debug, clap::Args)]
pub struct ConvertArgs {
    /// What to read.
    #[command(flatten)]
    pub input: InputArgs,
    /// Text trace to write (`-` for standard output).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Merge fat messages (WAP5 §2.3).
    #[arg(long)]
    pub coalesce: bool,
    /// Rename clients to CLIENT (WAP5 §2.5.1); needs endpoint node names.
    #[arg(long)]
    pub aggregate_clients: bool,
    /// Distinct peers that make an endpoint fixed.
    #[arg(long, default_value_t = FIXED_PORT_PEERS)]
    pub fixed_port_peers: usize,
    /// Minimum fraction digits of the written times.
    #[arg(long)]
    pub precision: Option<u8>,
    /// Add clock skew to a node's stamps, e.g. WS2=+30ms (repeatable; "skewer", P5 §7.5.6).
    #[arg(long, value_name = "NODE=±MS")]
    pub skew: Vec<String>,
}

/// Runs `p5 analyze …`.
pub fn run(args: &AnalyzeArgs, progress: &mut dyn FnMut(Progress)) -> Result<()> {
    let r = match &args.cmd {
        AnalyzeCmd::Maketrace(a) => run_maketrace(a, progress),
        AnalyzeCmd::Score(a) => run_score(a),
        AnalyzeCmd::Convert(a) => run_convert(a, progress),
        AnalyzeCmd::Show(a) => run_show(a),
        AnalyzeCmd::Import(a) => crate::import::run(a, progress),
        AnalyzeCmd::Nesting(a) => crate::nesting::cli::run(a, progress),
        AnalyzeCmd::Convolution(a) => crate::convolution::cli::run(a, progress),
        AnalyzeCmd::Linking(a) => crate::linking::cli::run(a, progress),
        AnalyzeCmd::Flows(a) => crate::flows::cli::run(a, progress),
    };
    progress(Progress::Done);
    r
}

/// Parses `NODE=+30ms` (a bare number is milliseconds).
pub fn parse_skew(s: &str) -> Result<(String, i64)> {
    let bad = || {
        Error::Usage(format!(
            "--skew {s:?}: expected NODE=±DURATION, e.g. WS2=+30ms"
        ))
    };
    let (node, v) = s.rsplit_once('=').ok_or_else(bad)?;
    let v = v.trim();
    let ns = if v
        .trim_start_matches(['+', '-'])
        .chars()
        .all(|c| c.is_ascii_digit() || c == '.')
    {
        maketrace::config::parse_duration(&format!("{v}ms"))
    } else {
        maketrace::config::parse_duration(v)
    }
    .map_err(|_| bad())?;
    if node.is_empty() {
        return Err(bad());
    }
    Ok((node.to_owned(), ns))
}

/// Parses `1..40`, `1..=40`, `1,5,10` or `7`.
pub fn parse_top(s: &str) -> Result<Vec<usize>> {
    let bad = || Error::Usage(format!("--top {s:?}: expected 1..40, 1,5,10 or 7"));
    let num = |x: &str| x.trim().parse::<usize>().map_err(|_| bad());
    let v: Vec<usize> = if let Some((a, b)) = s.split_once("..") {
        let b = b.strip_prefix('=').unwrap_or(b);
        (num(a)?..=num(b)?).collect()
    } else {
        s.split(',').map(num).collect::<Result<_>>()?
    };
    if v.is_empty() || v.contains(&0) || v.len() > 100_000 {
        return Err(bad());
    }
    Ok(v)
}

fn write_json_file<T: serde::Serialize>(value: &T, path: &Path) -> Result<()> {
    let f = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let mut w = std::io::BufWriter::new(f);
    serde_json::to_writer(&mut w, value).map_err(|e| Error::io(path, std::io::Error::other(e)))?;
    w.write_all(b"\n")
        .and_then(|()| w.flush())
        .map_err(|e| Error::io(path, e))
}

fn run_maketrace(a: &MaketraceArgs, progress: &mut dyn FnMut(Progress)) -> Result<()> {
    let text = std::fs::read_to_string(&a.config).map_err(|e| Error::io(&a.config, e))?;
    let cfg = Config::parse(&text, &a.config)?;
    let duration = a
        .duration
        .as_deref()
        .map(maketrace::config::parse_duration)
        .transpose()
        .map_err(Error::Usage)?;
    let skew: Vec<(String, i64)> = a
        .skew
        .iter()
        .map(|s| parse_skew(s))
        .collect::<Result<_>>()?;
    let nodes = cfg.nodes();
    if let Some((n, _)) = skew.iter().find(|(n, _)| !nodes.contains(n.as_str())) {
        return Err(Error::Usage(format!(
            "--skew {n}: no such node in {} (nodes: {})",
            a.config.display(),
            nodes.iter().copied().collect::<Vec<_>>().join(", ")
        )));
    }
    if a.capture_rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        return Err(Error::Usage(
            "--capture-rate must be a positive number of packets/s".into(),
        ));
    }
    if duration.is_some_and(|d| d < 0) {
        return Err(Error::Usage("--duration must not be negative".into()));
    }
    let opts = maketrace::Options {
        seed: a.seed,
        duration,
        record: a.record,
        skew,
        capture_rate: a.capture_rate,
        queue: a.loss_queue,
        client_endpoints: a.client_endpoints,
    };
    let clients = cfg.tracelets.iter().map(|t| u64::from(t.parallel)).sum();
    progress(Progress::Phase("simulating clients", Some(clients)));
    let g = maketrace::generate_with_progress(&cfg, &opts, &mut |done, _| {
        progress(Progress::At(done));
    });
    progress(Progress::Phase("writing", None));
    text::write_file(&g.trace, &g.layout, &a.output)?;
    if let Some(t) = &a.truth {
        write_json_file(&g.truth, t)?;
    }
    let c = &g.truth.capture;
    eprintln!(
        "{}: {} messages, {} patterns, {} instances; {} of {} lines dropped ({:.2} %)",
        a.output.display(),
        c.messages,
        g.truth.result.patterns.len(),
        g.truth.result.instances.len(),
        c.dropped,
        c.lines,
        c.drop_rate * 100.0
    );
    Ok(())
}

fn run_score(a: &ScoreArgs) -> Result<()> {
    let truth = read_json(&a.truth)?;
    let result = read_json(&a.result)?;
    let opts = ScoreOptions {
        top: parse_top(&a.top)?,
        tolerances: a.tolerance.clone(),
        rank_by: a.rank,
    };
    let s = score(&truth, &result, &opts);
    let mut out: Box<dyn Write> = match &a.output {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).map_err(|e| Error::io(p, e))?,
        )),
        None => Box::new(std::io::stdout().lock()),
    };
    if a.json {
        serde_json::to_writer(&mut out, &s).map_err(std::io::Error::other)?;
        writeln!(out)?;
    } else {
        crate::score::write_table(&s, &mut out)?;
    }
    out.flush()?;
    Ok(())
}

fn run_show(a: &ShowArgs) -> Result<()> {
    let r = match (&a.result, &a.db, &a.session) {
        (Some(path), ..) => read_json(path)?,
        (None, Some(url), Some(session)) => {
            crate::db::load_result(&crate::db::parse_url(url)?, session, a.run)?
        }
        _ => {
            return Err(Error::Usage(
                "give a result file or --db URL --session NAME".into(),
            ));
        }
    };
    if let (Some(url), Some(session)) = (&a.save_db, &a.session) {
        let source = a
            .result
            .as_ref()
            .map_or_else(|| "sql".to_owned(), |p| format!("file:{}", p.display()));
        let ids = crate::store::MessageIds::default();
        let run = crate::db::save_result(&crate::db::parse_url(url)?, session, &r, &source, &ids)?;
        eprintln!("saved as analysis run {run} of session {session}");
    }
    crate::output::write(&r, a.format, a.top, std::io::stdout().lock())?;
    Ok(())
}

fn run_convert(a: &ConvertArgs, progress: &mut dyn FnMut(Progress)) -> Result<()> {
    progress(Progress::Phase("reading", None));
    let mut t = a.input.read(true)?;
    if !t.report.counts.is_empty() {
        eprintln!("{}: {}", t.name, t.report);
    }
    // Coalesce first: a flow is a pair of the original nodes, before clients merge.
    if a.coalesce {
        let merged = fat::coalesce(&mut t.trace);
        eprintln!("{merged} fat-message pieces merged");
    }
    if a.aggregate_clients {
        t.trace = aggregate_clients(&t.trace, a.fixed_port_peers).trace;
    }
    if !a.skew.is_empty() {
        let mut offsets = Vec::new();
        for s in &a.skew {
            let (node, ns) = parse_skew(s)?;
            let id = t.trace.nodes.get(&node).ok_or_else(|| {
                Error::Usage(format!("--skew {node}: no such node in {}", t.name))
            })?;
            offsets.push((id, ns));
        }
        crate::skew::apply(&mut t.trace, &offsets);
        // The lines' order changes with their times: write them in time order.
        t.layout.order.clear();
    }
    if let Some(p) = a.precision {
        t.layout.precision = t.layout.precision.max(p.min(9));
    }
    progress(Progress::Phase("writing", None));
    if a.output == Path::new("-") {
        text::write(&t.trace, &t.layout, std::io::stdout().lock())?;
        Ok(())
    } else {
        text::write_file(&t.trace, &t.layout, &a.output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skews_and_tops_parse() {
        assert_eq!(parse_skew("WS2=+30ms").unwrap(), ("WS2".into(), 30_000_000));
        assert_eq!(parse_skew("a=b=-5").unwrap(), ("a=b".into(), -5_000_000));
        assert_eq!(parse_skew("X=1.5s").unwrap().1, 1_500_000_000);
        assert!(parse_skew("WS2").is_err());
        assert!(parse_skew("=5ms").is_err());
        assert_eq!(parse_top("1..40").unwrap().len(), 40);
        assert_eq!(parse_top("1..=3").unwrap(), [1, 2, 3]);
        assert_eq!(parse_top("1,5").unwrap(), [1, 5]);
        assert!(parse_top("0").is_err());
        assert!(parse_top("x").is_err());
    }
}
