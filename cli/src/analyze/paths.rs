//! `p5 analyze nesting`, `linking` and `convolution`: options → parameters, the run through
//! [`p5_analyze::job`], what it found printed (the summary lines on stderr, the patterns on
//! stdout).

use super::choice;
use super::input::{InputArgs, Opened, SaveArgs, print_report, print_stored};
use p5_analyze::convolution::job::{Convolution, write_dot, write_table};
use p5_analyze::linking::{KernelKind, job::Linking};
use p5_analyze::nesting::{assign::Penalties, job::Nesting};
use p5_analyze::output::{self, Format};
use p5_analyze::parse::{flag_duration, parse_range};
use p5_analyze::pattern::Rank;
use p5_analyze::{Progress, job};

/// `p5 analyze nesting`.
#[derive(Debug, clap::Args)]
pub struct NestingArgs {
    /// The input.
    #[command(flatten)]
    pub input: InputArgs,
    /// Penalty exponent for children of the same parent that overlap in time.
    #[arg(long, default_value_t = 2.0)]
    pub overlap: f64,
    /// Penalty exponent for children of the same parent calling the same node.
    #[arg(long, default_value_t = 0.0)]
    pub same: f64,
    /// Penalty exponent for every child of the same parent.
    #[arg(long, default_value_t = 0.0)]
    pub generic: f64,
    /// Smooth the scoreboards with a Gaussian of this many bins (0: off; 2 helps under clock
    /// skew and without it).
    #[arg(long, default_value_t = 2.0, num_args = 0..=1, default_missing_value = "2")]
    pub smooth: f64,
    /// Skew window for traces with one timestamp per message, e.g. 30ms.
    #[arg(long, value_name = "DURATION")]
    pub skew_window: Option<String>,
    /// The paper's 340 delay bins from 1 ms (default: 466 from 1 µs).
    #[arg(long)]
    pub paper_bins: bool,
    /// Score candidate parents by their call delays alone, as the paper does (default: also
    /// by the gap from the child's return to the parent's).
    #[arg(long)]
    pub no_returns: bool,
    /// Passes after the first that score candidate parents by the gap since the child each
    /// made before and by the return gap, keyed by that child's callee, as the pass before
    /// assigned them (0: one pass; `--no-returns --gap-passes 0` is the paper's scoring).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub gap_passes: u32,
    /// Drop calls whose return was lost and returns whose call was, as the paper does
    /// (default: keep them as pairs, the lost half estimated from the link's typical delays,
    /// so the requests they belong to keep their shape).
    #[arg(long)]
    pub no_repair: bool,
    /// After the last pass, leave a child with several candidate parents a root when its
    /// best parent scores below this share of what a child typically scores under such a
    /// parent, e.g. 0.005 for a trace that lost messages (default 0: every child with a
    /// positive score gets its best parent, as the paper does; a genuinely slow call scores
    /// low too).
    #[arg(long, default_value_t = 0.0, value_name = "SHARE")]
    pub root_below: f64,
    /// Keep the greedy assignment as it is, as the paper does (default: after the last pass,
    /// children move where a parent has a number of children to a callee, or in all, that
    /// few parents of its kind have — a request without its application call, an application
    /// call with three DB calls — to a candidate parent the move leaves with fewer such).
    #[arg(long)]
    pub no_rebalance: bool,
    /// Ignore what the recorded threads say and infer every parent from timing alone, as
    /// the paper's black box does (the default on a p5 session: each call's parent is the
    /// request its caller's thread was serving; traces and captures know no threads).
    #[arg(long)]
    pub black_box: bool,
    /// Output format.
    #[arg(long, value_parser = choice::<Format>(), default_value_t = Format::Table)]
    pub format: Format,
    /// Only the N most frequent patterns.
    #[arg(long)]
    pub top: Option<usize>,
    /// Where else to store the run.
    #[command(flatten)]
    pub save: SaveArgs,
}
/// `p5 analyze linking`.
#[derive(Debug, clap::Args)]
pub struct LinkingArgs {
    /// The input.
    #[command(flatten)]
    pub input: InputArgs,
    /// The window x: a message's cause arrived at most this long before it left (longer
    /// than the longest real processing delay; it need not be tight).
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    pub window: String,
    /// Spontaneity weighs like a link y mean delays long.
    #[arg(long, default_value_t = 4.0)]
    pub spontaneous_y: f64,
    /// Links with a probability in this range are tried both ways (`LOW..HIGH`).
    #[arg(long, default_value = "0.3..0.7", value_name = "LOW..HIGH")]
    pub try_both: String,
    /// At most this many try-both links per root (each doubles the root's instances).
    #[arg(long, default_value_t = 10)]
    pub max_try_both: u32,
    /// At most this many messages per instance.
    #[arg(long, default_value_t = 10_000)]
    pub max_messages: usize,
    /// Instances less probable than this are not built (0: all, as the paper).
    #[arg(long, default_value_t = 0.01)]
    pub min_prob: f64,
    /// Rename clients (nodes that use no fixed port) `CLIENT`.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub aggregate_clients: bool,
    /// An endpoint with at least this many distinct peers is a server's fixed port.
    #[arg(long, default_value_t = p5_analyze::clients::FIXED_PORT_PEERS)]
    pub fixed_port_peers: usize,
    /// Keep the pieces of a message written with several writes apart.
    #[arg(long)]
    pub no_coalesce: bool,
    /// How candidate parents are weighed: ours learned from the trace (robust to
    /// parallelism; the default is ours, `--kernel empirical --exclusive true --refits 5`),
    /// or WAP5's exponential (the paper's weights: `--kernel exponential --exclusive false
    /// --refits 0`).
    #[arg(long, value_parser = choice::<KernelKind>(), default_value_t = KernelKind::Empirical)]
    pub kernel: KernelKind,
    /// A message causes at most one message per receiver (unless the links say it surely
    /// caused several): ambiguous children are alternatives, not independent guesses.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub exclusive: bool,
    /// EM rounds refitting the empirical kernel to the links it gave.
    #[arg(long, default_value_t = p5_analyze::linking::REFITS)]
    pub refits: u32,
    /// Clients (nodes that use no fixed port, or named CLIENT) and nodes that are only
    /// ever answered start paths: their messages are not caused by the reply before them.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub client_roots: bool,
    /// Pattern order.
    #[arg(long, value_parser = choice::<Rank>(), default_value_t = Rank::Expectation)]
    pub rank: Rank,
    /// Print step 1's mean delay of every edge.
    #[arg(long)]
    pub delays: bool,
    /// Ignore what the recorded threads say and infer every parent from timing alone, as
    /// the paper's black box does (the default on a p5 session: each call's parent is the
    /// request its caller's thread was serving; traces and captures know no threads).
    #[arg(long)]
    pub black_box: bool,
    /// Output format.
    #[arg(long, value_parser = choice::<Format>(), default_value_t = Format::Table)]
    pub format: Format,
    /// Only the N first patterns.
    #[arg(long)]
    pub top: Option<usize>,
    /// Where else to store the run.
    #[command(flatten)]
    pub save: SaveArgs,
}
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
    #[arg(long, value_parser = choice::<Format>(), default_value_t = Format::Table)]
    pub format: Format,
    /// Where else to store the run.
    #[command(flatten)]
    pub save: SaveArgs,
}
/// Runs `p5 analyze nesting`.
pub fn nesting(a: &NestingArgs, progress: &mut dyn FnMut(Progress)) -> anyhow::Result<()> {
    let window = match &a.skew_window {
        Some(s) => flag_duration("skew-window", s)?,
        None => 0,
    };
    let params = p5_analyze::nesting::Params {
        penalties: Penalties {
            overlap: a.overlap,
            same: a.same,
            generic: a.generic,
        },
        smooth: a.smooth,
        window,
        paper_bins: a.paper_bins,
        returns: !a.no_returns,
        gap_passes: a.gap_passes,
        repair: !a.no_repair,
        root_below: a.root_below,
        rebalance: !a.no_rebalance,
        threads: !a.black_box,
    };
    params.validate()?;
    let mut opened = Opened::new(&a.input, &a.save)?;
    let done = job::run(&Nesting(params), opened.job(), progress)?;
    print_report(&done.name, &done.report);
    let (result, counts) = &done.output;
    for line in counts.summary(&done.name, result.patterns.len()) {
        eprintln!("{line}");
    }
    print_stored(&done.stored);
    output::write(result, a.format, a.top, std::io::stdout().lock())?;
    Ok(())
}

impl LinkingArgs {
    /// The parameters the options give.
    pub fn params(&self) -> anyhow::Result<p5_analyze::linking::Params> {
        let p = p5_analyze::linking::Params {
            window: flag_duration("window", &self.window)?,
            spontaneous_y: self.spontaneous_y,
            try_both: parse_range("try-both", &self.try_both)?,
            max_try_both: self.max_try_both,
            max_messages: self.max_messages.max(1),
            min_prob: self.min_prob,
            aggregate_clients: self.aggregate_clients,
            fixed_port_peers: self.fixed_port_peers.max(1),
            coalesce: !self.no_coalesce,
            rank: self.rank,
            kernel: self.kernel,
            exclusive: self.exclusive,
            refits: self.refits,
            client_roots: self.client_roots,
            threads: !self.black_box,
        };
        p.validate()?;
        Ok(p)
    }
}

/// Runs `p5 analyze linking`.
pub fn linking(a: &LinkingArgs, progress: &mut dyn FnMut(Progress)) -> anyhow::Result<()> {
    let params = a.params()?;
    let mut opened = Opened::new(&a.input, &a.save)?;
    let done = job::run(&Linking(params), opened.job(), progress)?;
    print_report(&done.name, &done.report);
    let (result, counts) = &done.output;
    for line in counts.summary(&done.name, result.patterns.len(), a.delays) {
        eprintln!("{line}");
    }
    print_stored(&done.stored);
    output::write(result, a.format, a.top, std::io::stdout().lock())?;
    Ok(())
}

/// Runs `p5 analyze convolution`.
pub fn convolution(a: &ConvolutionArgs, progress: &mut dyn FnMut(Progress)) -> anyhow::Result<()> {
    let quantum = flag_duration("quantum", &a.quantum)?;
    let tolerance = match &a.tolerance {
        Some(t) => flag_duration("tolerance", t)?,
        None => quantum,
    };
    let params = p5_analyze::convolution::Params {
        quantum,
        spike_sd: a.spike_sd,
        valley_sd: a.valley_sd,
        tolerance,
        min_messages: a.min_messages,
        max_depth: a.max_depth.clamp(1, 64),
    };
    params.validate()?;
    let analysis = Convolution {
        params,
        roots: a.root.clone(),
    };
    let mut opened = Opened::new(&a.input, &a.save)?;
    let done = job::run(&analysis, opened.job(), progress)?;
    print_report(&done.name, &done.report);
    let g = &done.output;
    eprintln!("{}", g.summary(&done.name));
    print_stored(&done.stored);
    let out = std::io::stdout().lock();
    match a.format {
        Format::Table => write_table(g, out)?,
        Format::Json => output::write(&g.result, Format::Json, None, out)?,
        Format::Dot => write_dot(g, out)?,
    }
    Ok(())
}
