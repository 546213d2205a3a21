//! `p5 analyze linking` on the command line: read the input, run [`super::linking`], print
//! the patterns ranked as asked, and store the run in the trace database.

use super::{KernelKind, Params, linking_owned};
use crate::cli::Progress;
use crate::input::InputArgs;
use crate::maketrace::config::parse_duration;
use crate::output::Format;
use crate::pattern::Rank;
use crate::{Error, Result};

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
    #[arg(long, default_value_t = crate::clients::FIXED_PORT_PEERS)]
    pub fixed_port_peers: usize,
    /// Keep the pieces of a message written with several writes apart.
    #[arg(long)]
    pub no_coalesce: bool,
    /// How candidate parents are weighed: ours learned from the trace (robust to
    /// parallelism; the default is ours, `--kernel empirical --exclusive true --refits 5`),
    /// or WAP5's exponential (the paper's weights: `--kernel exponential --exclusive false
    /// --refits 0`).
    #[arg(long, value_enum, default_value_t = KernelKind::Empirical)]
    pub kernel: KernelKind,
    /// A message causes at most one message per receiver (unless the links say it surely
    /// caused several): ambiguous children are alternatives, not independent guesses.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub exclusive: bool,
    /// EM rounds refitting the empirical kernel to the links it gave.
    #[arg(long, default_value_t = super::REFITS)]
    pub refits: u32,
    /// Clients (nodes that use no fixed port, or named CLIENT) and nodes that are only
    /// ever answered start paths: their messages are not caused by the reply before them.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub client_roots: bool,
    /// Pattern order.
    #[arg(long, value_enum, default_value_t = Rank::Expectation)]
    pub rank: Rank,
    /// Print step 1's mean delay of every edge.
    #[arg(long)]
    pub delays: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Only the N first patterns.
    #[arg(long)]
    pub top: Option<usize>,
    /// Also store the run in this trace database, as a run of `--save-session`.
    #[arg(long, value_name = "URL", requires = "save_session")]
    pub save_db: Option<String>,
    /// The session of `--save-db` to store the run in.
    #[arg(long, value_name = "NAME", requires = "save_db")]
    pub save_session: Option<String>,
}

/// Parses `LOW..HIGH` with 0 ≤ LOW ≤ HIGH ≤ 1.
fn range(s: &str) -> Result<(f64, f64)> {
    let bad = || Error::Usage(format!("--try-both {s:?}: LOW..HIGH, 0 ≤ LOW ≤ HIGH ≤ 1"));
    let (lo, hi) = s.split_once("..").ok_or_else(bad)?;
    let (lo, hi): (f64, f64) = (
        lo.trim().parse().map_err(|_| bad())?,
        hi.trim().parse().map_err(|_| bad())?,
    );
    if !(0.0..=1.0).contains(&lo) || !(lo..=1.0).contains(&hi) {
        return Err(bad());
    }
    Ok((lo, hi))
}

impl LinkingArgs {
    /// The parameters the options give.
    pub fn params(&self) -> Result<Params> {
        let window = parse_duration(&self.window)
            .map_err(|e| Error::Usage(format!("--window {:?}: {e}", self.window)))?;
        if window <= 0 {
            return Err(Error::Usage("--window must be positive".into()));
        }
        if !self.spontaneous_y.is_finite() || self.spontaneous_y <= 0.0 {
            return Err(Error::Usage(format!(
                "--spontaneous-y {}: must be positive",
                self.spontaneous_y
            )));
        }
        if !(0.0..=1.0).contains(&self.min_prob) {
            return Err(Error::Usage(format!(
                "--min-prob {}: between 0 and 1",
                self.min_prob
            )));
        }
        if self.max_try_both > 24 {
            return Err(Error::Usage(format!(
                "--max-try-both {}: at most 24 (each one doubles a root's instances)",
                self.max_try_both
            )));
        }
        Ok(Params {
            window,
            spontaneous_y: self.spontaneous_y,
            try_both: range(&self.try_both)?,
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
        })
    }
}

/// Runs `p5 analyze linking`.
pub fn run(a: &LinkingArgs, progress: &mut dyn FnMut(Progress)) -> Result<()> {
    let params = a.params()?;
    let input = a.input.read_with_progress(false, progress)?;
    if !input.report.counts.is_empty() {
        eprintln!("{}: {}", input.name, input.report);
    }
    // What storing the run needs of the trace, taken now: linking consumes it (no copy).
    let save = (a.save_db.as_ref(), a.save_session.as_ref());
    let targets = crate::db::RunTargets::of(&a.input, &input, save);
    let name = input.name;
    let (result, counts) = linking_owned(input.trace, &params, progress);
    let t = &counts.trees;
    eprintln!(
        "{}: {} messages ({} pieces merged), links: {} probably-true, {} try-both, {} \
         probably-false; {} roots, {} instances ({} roots used up their try-both links, {} \
         branches below --min-prob, {} that could cause no next step), {} patterns",
        name,
        counts.messages,
        counts.coalesced,
        counts.true_links,
        counts.try_both_links,
        counts.false_links,
        t.roots,
        t.instances,
        t.capped,
        t.pruned,
        t.dead_ends,
        result.patterns.len()
    );
    if !counts.untraced.is_empty() {
        eprintln!(
            "untraced (timed by their peers; only A→B→A causality): {}",
            counts.untraced.join(", ")
        );
    }
    if a.delays {
        eprintln!("mean delay before each edge's messages (step 1):");
        for e in &counts.edges {
            let mean = e
                .mean_ns
                .map_or("spontaneous".to_owned(), |d| format!("{:.3} ms", d / 1e6));
            eprintln!(
                "  {} → {}: {} ({} of {} messages had a cause within the window)",
                e.from, e.to, mean, e.caused, e.messages
            );
        }
    }
    targets.save(&result)?;
    crate::output::write(&result, a.format, a.top, std::io::stdout().lock())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::range;

    #[test]
    fn try_both_ranges_parse() {
        assert_eq!(range("0.3..0.7").unwrap(), (0.3, 0.7));
        assert_eq!(range(" 0 .. 1 ").unwrap(), (0.0, 1.0));
        for bad in ["0.7..0.3", "0.3", "a..b", "-1..0.5", "0.2..1.5"] {
            assert!(range(bad).is_err(), "{bad}");
        }
    }
}
