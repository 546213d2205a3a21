//! The file-level subcommands of `p5 analyze`: `maketrace`, `score`, `convert`, `show` and
//! `import` — options → the library's readers, writers and transforms, and what is printed.

use super::choice;
use super::input::{InputArgs, print_report};
use p5_analyze::clients::{FIXED_PORT_PEERS, aggregate_clients};
use p5_analyze::db::Database;
use p5_analyze::import::{ImportOptions, read_truth};
use p5_analyze::maketrace::{self, Config, Record};
use p5_analyze::node::NodeKey;
use p5_analyze::output::Format;
use p5_analyze::parse::{flag_duration, parse_capture, parse_duration, parse_skew, parse_top};
use p5_analyze::pattern::{read_json, write_json_file};
use p5_analyze::score::{RankBy, ScoreOptions, score as score_of};
use p5_analyze::source::Source;
use p5_analyze::store::MessageIds;
use p5_analyze::{Error, Progress, fat, text};
use std::io::Write;
use std::path::{Path, PathBuf};

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
    #[arg(long, value_parser = choice::<NodeKey>())]
    pub node: Option<NodeKey>,
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
    #[arg(long, value_parser = choice::<Format>(), default_value_t = Format::Table)]
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
    #[arg(long, value_parser = choice::<Record>())]
    pub record: Option<Record>,
    /// Clock skew of a node, e.g. WS2=+30ms (repeatable; a bare number is milliseconds).
    #[arg(long, value_name = "NODE=±MS")]
    pub skew: Vec<String>,
    /// Parallel clients of every tracelet (overrides the configuration): the load of a
    /// closed-loop run.
    #[arg(long, value_name = "N")]
    pub clients: Option<u32>,
    /// Think time between a client's runs (overrides the configuration): `MAX` (uniform from
    /// 0) or `MIN..MAX`, e.g. `1ms` for a closed loop.
    #[arg(long, value_name = "[MIN..]MAX")]
    pub think: Option<String>,
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
    #[arg(long, value_parser = choice::<RankBy>(), default_value_t = RankBy::Count)]
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

/// Runs `p5 analyze maketrace`.
pub fn maketrace(a: &MaketraceArgs, progress: &mut dyn FnMut(Progress)) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&a.config).map_err(|e| Error::io(&a.config, e))?;
    let mut cfg = Config::parse(&text, &a.config)?;
    let think = match a.think.as_deref() {
        None => None,
        Some(t) => Some(match t.split_once("..") {
            Some((lo, hi)) => (flag_duration("think", lo)?, flag_duration("think", hi)?),
            None => (0, flag_duration("think", t)?),
        }),
    };
    if think.is_some_and(|(lo, hi)| lo < 0 || hi < lo) {
        return Err(Error::Usage("--think: 0 ≤ MIN ≤ MAX".into()).into());
    }
    cfg.set_load(a.clients, think);
    let duration = a
        .duration
        .as_deref()
        .map(parse_duration)
        .transpose()
        .map_err(Error::Usage)?;
    let skew: Vec<(String, i64)> = a
        .skew
        .iter()
        .map(|s| parse_skew(s))
        .collect::<p5_analyze::Result<_>>()?;
    let nodes = cfg.nodes();
    if let Some((n, _)) = skew.iter().find(|(n, _)| !nodes.contains(n.as_str())) {
        return Err(Error::Usage(format!(
            "--skew {n}: no such node in {} (nodes: {})",
            a.config.display(),
            nodes.iter().copied().collect::<Vec<_>>().join(", ")
        ))
        .into());
    }
    if a.capture_rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        return Err(
            Error::Usage("--capture-rate must be a positive number of packets/s".into()).into(),
        );
    }
    if duration.is_some_and(|d| d < 0) {
        return Err(Error::Usage("--duration must not be negative".into()).into());
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

/// Runs `p5 analyze score`.
pub fn score(a: &ScoreArgs) -> anyhow::Result<()> {
    let truth = read_json(&a.truth)?;
    let result = read_json(&a.result)?;
    let opts = ScoreOptions {
        top: parse_top(&a.top)?,
        tolerances: a.tolerance.clone(),
        rank_by: a.rank,
    };
    let s = score_of(&truth, &result, &opts);
    let mut out: Box<dyn Write> = match &a.output {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).map_err(|e| Error::io(p, e))?,
        )),
        None => Box::new(std::io::stdout().lock()),
    };
    if a.json {
        serde_json::to_writer(&mut out, &s)?;
        writeln!(out)?;
    } else {
        p5_analyze::score::write_table(&s, &mut out)?;
    }
    out.flush()?;
    Ok(())
}

/// Runs `p5 analyze show`.
pub fn show(a: &ShowArgs) -> anyhow::Result<()> {
    let r = match (&a.result, &a.db, &a.session) {
        (Some(path), ..) => read_json(path)?,
        (None, Some(url), Some(session)) => Database::open(url)?.load_result(session, a.run)?,
        _ => {
            return Err(
                Error::Usage("give a result file or --db URL --session NAME".into()).into(),
            );
        }
    };
    if let (Some(url), Some(session)) = (&a.save_db, &a.session) {
        let source = a
            .result
            .as_ref()
            .map_or_else(|| "sql".to_owned(), |p| format!("file:{}", p.display()));
        let ids = MessageIds::default();
        let mut db = Database::open(url)?;
        let run = db.save_result(session, (&r, &source, &ids), |_, _, _| {})?;
        db.close()?;
        eprintln!("saved as analysis run {run} of session {session}");
    }
    p5_analyze::output::write(&r, a.format, a.top, std::io::stdout().lock())?;
    Ok(())
}

/// Runs `p5 analyze convert`.
pub fn convert(a: &ConvertArgs, progress: &mut dyn FnMut(Progress)) -> anyhow::Result<()> {
    progress(Progress::Phase("reading", None));
    let mut db = a.input.database()?;
    let mut t = a.input.source()?.read(db.as_mut(), true, progress)?;
    print_report(&t.name, &t.report);
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
        p5_analyze::skew::apply(&mut t.trace, &offsets);
        // The lines' order changes with their times: write them in time order.
        t.layout.order.clear();
    }
    if let Some(p) = a.precision {
        t.layout.precision = t.layout.precision.max(p.min(9));
    }
    progress(Progress::Phase("writing", None));
    if a.output == Path::new("-") {
        text::write(&t.trace, &t.layout, std::io::stdout().lock())?;
    } else {
        text::write_file(&t.trace, &t.layout, &a.output)?;
    }
    Ok(())
}

/// Runs `p5 analyze import`.
pub fn import(a: &ImportArgs, progress: &mut dyn FnMut(Progress)) -> anyhow::Result<()> {
    let mut db = Database::open(&a.db)?;
    // Read the ground truth first: a bad file should not leave a half-finished import.
    let truth = a.truth.as_deref().map(read_truth).transpose()?;
    let source = match &a.trace {
        Some(p) => Source::trace(p.clone(), a.node)?,
        None => {
            let files = a
                .pcap
                .iter()
                .map(|s| parse_capture(s))
                .collect::<p5_analyze::Result<Vec<_>>>()?;
            Source::pcap(files, a.node)?
        }
    };
    let o = ImportOptions {
        source,
        session: a.session.clone(),
        truth,
        now_wall_ns: now_wall_ns(),
    };
    let done = p5_analyze::import::import(&mut db, o, progress)?;
    db.close()?;
    print_report(&done.name, &done.report);
    let (name, sid) = &done.session;
    eprintln!(
        "{}: session {name:?} (id {sid}): {} nodes, {} messages",
        a.db, done.nodes, done.messages
    );
    if let Some(run) = done.truth_run {
        eprintln!("ground truth saved as analysis run {run}");
    }
    Ok(())
}

fn now_wall_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}
