//! `p5 analyze nesting` on the command line: read the input, run [`super::nesting`], print
//! the patterns, and store the run in the trace database.

use super::{Params, assign::Penalties, nesting_owned};
use crate::cli::Progress;
use crate::input::InputArgs;
use crate::output::Format;
use crate::{Error, Result};

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
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Only the N most frequent patterns.
    #[arg(long)]
    pub top: Option<usize>,
    /// Also store the run in this trace database, as a run of `--save-session` (a session
    /// imported from the same trace or capture; with `--db` input the run is stored there
    /// anyway).
    #[arg(long, value_name = "URL", requires = "save_session")]
    pub save_db: Option<String>,
    /// The session of `--save-db` to store the run in.
    #[arg(long, value_name = "NAME", requires = "save_db")]
    pub save_session: Option<String>,
}

/// Runs `p5 analyze nesting`.
pub fn run(a: &NestingArgs, progress: &mut dyn FnMut(Progress)) -> Result<()> {
    let window = match &a.skew_window {
        Some(s) => crate::maketrace::config::parse_duration(s)
            .map_err(|e| Error::Usage(format!("--skew-window {s:?}: {e}")))?,
        None => 0,
    };
    for (name, v) in [
        ("overlap", a.overlap),
        ("same", a.same),
        ("generic", a.generic),
    ] {
        if !v.is_finite() || v < 0.0 {
            return Err(Error::Usage(format!("--{name} {v}: must be 0 or more")));
        }
    }
    if !a.root_below.is_finite() || !(0.0..=1.0).contains(&a.root_below) {
        return Err(Error::Usage(format!(
            "--root-below {}: a share from 0 to 1",
            a.root_below
        )));
    }
    if !a.smooth.is_finite() || !(0.0..=100.0).contains(&a.smooth) {
        return Err(Error::Usage(format!(
            "--smooth {}: 0 to 100 bins",
            a.smooth
        )));
    }
    let input = a.input.read_with_progress(false, progress)?;
    if !input.report.counts.is_empty() {
        eprintln!("{}: {}", input.name, input.report);
    }
    progress(Progress::Phase("nesting", None));
    let params = Params {
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
    };
    // What storing the run needs of the trace, taken now: nesting consumes it.
    let save = (a.save_db.as_ref(), a.save_session.as_ref());
    let targets = crate::db::RunTargets::of(&a.input, &input, save);
    let name = input.name;
    let (result, counts) = nesting_owned(input.trace, &params);
    progress(Progress::Done);
    if counts.reversed > 0 {
        eprintln!(
            "{}: {} returns seemed to leave before their call arrived (by more than the skew \
             window): paired by call id; the clocks that stamped them disagree (see \
             --skew-window)",
            name, counts.reversed
        );
    }
    eprintln!(
        "{}: {} call pairs ({} nested, {} roots), {} calls and {} returns unmatched ({} and {} \
         kept, their lost half estimated), {} children moved where their parent's number of \
         children was rare, {} patterns",
        name,
        counts.pairs,
        counts.nested,
        counts.pairs - counts.nested,
        counts.unmatched_calls,
        counts.unmatched_rets,
        counts.repaired.calls,
        counts.repaired.rets,
        counts.rebalanced,
        result.patterns.len()
    );
    targets.save(&result)?;
    crate::output::write(&result, a.format, a.top, std::io::stdout().lock())?;
    Ok(())
}
