//! `p5 analyze flows` and `p5 analyze diff`: options → [`p5_analyze::flows::job`], the
//! outcome printed with [`p5_analyze::flows::report`].

use super::choice;
use p5_analyze::Progress;
use p5_analyze::db::Database;
use p5_analyze::flows::job::{self, DiffOptions, FlowsOptions, RuleSpecs};
use p5_analyze::flows::profiles::ProfileKind;
use p5_analyze::flows::report::{self, FlowFormat};

/// `p5 analyze flows` and `p5 analyze diff`.
#[derive(Debug, clap::Subcommand)]
pub enum FlowsCmd {
    /// Separate a session's concurrent requests into flows (self-propelled
    /// instrumentation §3) and score how unusual each is (§4.1).
    Flows(FlowsArgs),
    /// The call paths only one side has — two flows, or two sessions — reduced and ranked
    /// as root-cause candidates (self-propelled instrumentation §4.2).
    Diff(DiffArgs),
}

/// The flow rules and the database, shared by `flows` and `diff`.
#[derive(Debug, Clone, clap::Args)]
pub struct RuleArgs {
    /// Trace database (`sqlite:PATH` or `postgres://…`).
    #[arg(long, value_name = "URL")]
    pub db: String,
    /// What starts a flow (repeatable): `sensor:NAME` (each enter of a function),
    /// `mark:NAME`, `messages-from:PROGRAM` (each message the program sends that no message
    /// it received caused). Default: every program's uncaused messages.
    #[arg(long, value_name = "SPEC")]
    pub start: Vec<String>,
    /// Mapping directive (repeatable): a counter sample of SENSOR_B joins the flow of the
    /// earlier sample of SENSOR_A with the same value in the same process (a queue's
    /// enqueue and dequeue).
    #[arg(long, value_name = "SENSOR_A=SENSOR_B")]
    pub join: Vec<String>,
    /// Print only; do not store the run in the database.
    #[arg(long)]
    pub no_save: bool,
    /// Output format.
    #[arg(long, value_parser = choice::<FlowFormat>(), default_value_t = FlowFormat::Table)]
    pub format: FlowFormat,
    /// Only the first N lines of the table.
    #[arg(long)]
    pub top: Option<usize>,
}

/// `p5 analyze flows`.
#[derive(Debug, clap::Args)]
pub struct FlowsArgs {
    /// Rules, database, output.
    #[command(flatten)]
    pub rules: RuleArgs,
    /// The session.
    #[arg(long, value_name = "NAME")]
    pub session: String,
    /// Profile compared between flows.
    #[arg(long, value_parser = choice::<ProfileKind>(), default_value_t = ProfileKind::Coverage)]
    pub profile: ProfileKind,
    /// Without references: score = distance to the k-th nearest other flow.
    #[arg(long, default_value_t = 1)]
    pub k: usize,
    /// Known-normal flows (ids): score = distance to the nearest of them.
    #[arg(long, value_name = "FLOW", num_args = 1.., conflicts_with = "reference_session")]
    pub normal: Vec<u32>,
    /// A session of known-normal behaviour (same rules): score = distance to its nearest
    /// flow.
    #[arg(long, value_name = "NAME")]
    pub reference_session: Option<String>,
}

/// `p5 analyze diff`.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// Rules, database, output.
    #[command(flatten)]
    pub rules: RuleArgs,
    /// The session of bare flow ids.
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    /// The anomalous side: `FLOW` (an id in `--session`), `SESSION:FLOW` or `SESSION`.
    pub anomalous: String,
    /// The normal side, in the same forms.
    pub normal: String,
    /// Order of the table.
    #[arg(long, value_parser = choice::<report::Rank>(), default_value_t = report::Rank::Time)]
    pub rank: report::Rank,
}

impl RuleArgs {
    fn specs(&self) -> RuleSpecs {
        RuleSpecs {
            start: self.start.clone(),
            join: self.join.clone(),
            save: !self.no_save,
        }
    }
}

/// Runs `p5 analyze flows` or `p5 analyze diff`.
pub fn run(cmd: &FlowsCmd, progress: &mut dyn FnMut(Progress)) -> anyhow::Result<()> {
    match cmd {
        FlowsCmd::Flows(a) => flows(a, progress),
        FlowsCmd::Diff(a) => diff(a, progress),
    }
}

fn flows(a: &FlowsArgs, progress: &mut dyn FnMut(Progress)) -> anyhow::Result<()> {
    let mut db = Database::open(&a.rules.db)?;
    let o = FlowsOptions {
        rules: a.rules.specs(),
        session: a.session.clone(),
        profile: a.profile,
        k: a.k,
        normal: a.normal.clone(),
        reference_session: a.reference_session.clone(),
    };
    let out = job::flows(&mut db, &o, progress)?;
    db.close()?;
    eprintln!("{}", out.summary());
    if let Some(run) = out.run {
        eprintln!(
            "stored as analysis run {run} of session {}",
            out.session.name
        );
    }
    report::write_flows(
        &out.flows,
        &out.scores,
        &out.paths,
        a.rules.format,
        a.rules.top,
        std::io::stdout().lock(),
    )?;
    Ok(())
}

fn diff(a: &DiffArgs, progress: &mut dyn FnMut(Progress)) -> anyhow::Result<()> {
    let mut db = Database::open(&a.rules.db)?;
    let o = DiffOptions {
        rules: a.rules.specs(),
        anomalous: a.anomalous.clone(),
        normal: a.normal.clone(),
        session: a.session.clone(),
    };
    let out = job::diff(&mut db, &o, progress)?;
    db.close()?;
    eprintln!("{}", out.summary(&o));
    if let Some(run) = out.run {
        eprintln!("stored as analysis run {run} of session {}", out.session);
    }
    report::write_diff(
        &out.diff,
        &out.paths,
        a.rank,
        a.rules.format,
        a.rules.top,
        std::io::stdout().lock(),
    )?;
    Ok(())
}
