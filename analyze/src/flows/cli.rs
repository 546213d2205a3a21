//! `p5 analyze flows` and `p5 analyze diff` on the command line: read sessions, build
//! flows ([`super::rules`]), score them ([`super::anomaly`]) or diff them
//! ([`super::rootcause`]), print ([`super::report`]) and store the run.

use super::anomaly::{Reference, suspects};
use super::model::{Join, Rules, Start};
use super::paths::PathTable;
use super::profiles::{ProfileKind, profiles};
use super::report::{self, FlowFormat};
use super::rootcause::{self, Coverage};
use super::rules::{self, Flows};
use super::{load, store};
use crate::cli::Progress;
use crate::{Error, Result};
use p5_tracedb::read::Session;
use serde_json::json;

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
    #[arg(long, value_enum, default_value_t = FlowFormat::Table)]
    pub format: FlowFormat,
    /// Only the first N lines of the table.
    #[arg(long)]
    pub top: Option<usize>,
}

impl RuleArgs {
    fn rules(&self) -> Result<Rules> {
        Ok(Rules {
            starts: self
                .start
                .iter()
                .map(|s| Start::parse(s))
                .collect::<Result<_>>()?,
            joins: self
                .join
                .iter()
                .map(|s| Join::parse(s))
                .collect::<Result<_>>()?,
        })
    }

    fn params(&self) -> serde_json::Value {
        json!({"start": self.start, "join": self.join})
    }
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
    #[arg(long, value_enum, default_value_t = ProfileKind::Coverage)]
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
    #[arg(long, value_enum, default_value_t = report::Rank::Time)]
    pub rank: report::Rank,
}

/// Runs `p5 analyze flows` or `p5 analyze diff`.
pub fn run(cmd: &FlowsCmd, progress: &mut dyn FnMut(Progress)) -> Result<()> {
    match cmd {
        FlowsCmd::Flows(a) => run_flows(a, progress),
        FlowsCmd::Diff(a) => run_diff(a, progress),
    }
}

fn run_flows(a: &FlowsArgs, progress: &mut dyn FnMut(Progress)) -> Result<()> {
    let rules = a.rules.rules()?;
    let url = crate::db::parse_url(&a.rules.db)?;
    let mut names = vec![a.session.as_str()];
    if let Some(r) = &a.reference_session {
        names.push(r);
    }
    progress(Progress::Phase("reading sessions", None));
    let loaded = load::load(&url, &names)?;
    progress(Progress::Phase("building flows", None));
    let mut paths = PathTable::default();
    let (session, events) = &loaded[0];
    let flows = rules::build(events, &rules, &mut paths)?;
    let n = flows.flows.len();
    let normal: Vec<usize> = a.normal.iter().map(|&id| id as usize).collect();
    if let Some(bad) = normal.iter().find(|&&id| id == 0 || id > n) {
        return Err(Error::Usage(format!(
            "--normal {bad}: session {:?} has flows 1 to {n}",
            a.session
        )));
    }
    let normal: Vec<usize> = normal.into_iter().map(|id| id - 1).collect();
    progress(Progress::Phase("scoring", None));
    let ps = profiles(&flows, a.profile);
    let scores = if let Some((_, ref_events)) = loaded.get(1) {
        let ref_flows = rules::build(ref_events, &rules, &mut paths)?;
        suspects(&ps, Reference::External(&profiles(&ref_flows, a.profile)))
    } else if !normal.is_empty() {
        suspects(&ps, Reference::Normal(&normal))
    } else {
        suspects(&ps, Reference::Nearest(a.k))
    };
    progress(Progress::Done);
    eprintln!(
        "{}: {} flows from {} events ({} outside any flow{}), {} call paths",
        session.name,
        n,
        flows.events,
        flows.outside,
        if flows.unjoined > 0 {
            format!(", {} directive targets joined nothing", flows.unjoined)
        } else {
            String::new()
        },
        paths.count()
    );
    if !a.rules.no_save {
        let mut params = a.rules.params();
        params["profile"] = json!(a.profile);
        params["k"] = json!(a.k);
        params["normal"] = json!(a.normal);
        params["reference_session"] = json!(a.reference_session);
        let run = load::save(&url, session, |id| {
            let rows = store::flow_rows(session, id, &flows, &scores, &normal, &paths);
            (store::run_row(session, id, "flows", &params), rows)
        })?;
        eprintln!("stored as analysis run {run} of session {}", session.name);
    }
    report::write_flows(
        &flows,
        &scores,
        &paths,
        a.rules.format,
        a.rules.top,
        std::io::stdout().lock(),
    )?;
    Ok(())
}

/// One side of a diff.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Operand {
    session: String,
    flow: Option<u32>,
}

fn operand(s: &str, session: Option<&str>) -> Result<Operand> {
    let digits = |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit());
    if digits(s) {
        let Some(session) = session else {
            return Err(Error::Usage(format!(
                "diff {s}: a bare flow id needs --session NAME"
            )));
        };
        return Ok(Operand {
            session: session.to_owned(),
            flow: Some(
                s.parse()
                    .map_err(|_| Error::Usage(format!("diff {s}: not a flow id")))?,
            ),
        });
    }
    if let Some((name, id)) = s.rsplit_once(':')
        && digits(id)
        && !name.is_empty()
    {
        return Ok(Operand {
            session: name.to_owned(),
            flow: Some(
                id.parse()
                    .map_err(|_| Error::Usage(format!("diff {s}: not a flow id")))?,
            ),
        });
    }
    Ok(Operand {
        session: s.to_owned(),
        flow: None,
    })
}

fn run_diff(a: &DiffArgs, progress: &mut dyn FnMut(Progress)) -> Result<()> {
    let rules = a.rules.rules()?;
    let url = crate::db::parse_url(&a.rules.db)?;
    let sides = [
        operand(&a.anomalous, a.session.as_deref())?,
        operand(&a.normal, a.session.as_deref())?,
    ];
    let mut names: Vec<&str> = sides.iter().map(|o| o.session.as_str()).collect();
    names.dedup();
    progress(Progress::Phase("reading sessions", None));
    let loaded = load::load(&url, &names)?;
    progress(Progress::Phase("diffing", None));
    let mut paths = PathTable::default();
    let mut built: Vec<(String, Flows)> = Vec::new();
    let mut cov: Vec<Coverage> = Vec::new();
    for o in &sides {
        let (_, ev) = loaded
            .iter()
            .find(|(s, _)| s.name == o.session)
            .ok_or_else(|| Error::Usage(format!("no session {:?}", o.session)))?;
        let Some(id) = o.flow else {
            cov.push(rules::session_coverage(ev, &mut paths));
            continue;
        };
        if !built.iter().any(|(n, _)| n == &o.session) {
            let f = rules::build(ev, &rules, &mut paths)?;
            built.push((o.session.clone(), f));
        }
        let flows = &built
            .iter()
            .find(|(n, _)| n == &o.session)
            .expect("built")
            .1;
        if id == 0 || id as usize > flows.flows.len() {
            return Err(Error::Usage(format!(
                "diff: session {:?} has flows 1 to {}, not {id}",
                o.session,
                flows.flows.len()
            )));
        }
        cov.push(rules::flow_coverage(flows, id - 1));
    }
    let d = rootcause::diff(&cov[0], &cov[1], &paths);
    progress(Progress::Done);
    eprintln!(
        "{} against {}: {} paths only in the anomalous side → {} after pruning and merging, \
         {} only in the normal side → {}",
        a.anomalous,
        a.normal,
        d.raw_anomalous,
        d.differences
            .iter()
            .filter(|x| x.side == rootcause::Side::Anomalous)
            .count(),
        d.raw_normal,
        d.differences
            .iter()
            .filter(|x| x.side == rootcause::Side::Normal)
            .count(),
    );
    if !a.rules.no_save {
        let session: &Session = &loaded
            .iter()
            .find(|(s, _)| s.name == sides[0].session)
            .expect("loaded")
            .0;
        let mut params = a.rules.params();
        params["anomalous"] = json!(a.anomalous);
        params["normal"] = json!(a.normal);
        let run = load::save(&url, session, |id| {
            let rows = store::diff_rows(session, id, &d, &paths);
            (store::run_row(session, id, "diff", &params), rows)
        })?;
        eprintln!("stored as analysis run {run} of session {}", session.name);
    }
    report::write_diff(
        &d,
        &paths,
        a.rank,
        a.rules.format,
        a.rules.top,
        std::io::stdout().lock(),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operands_parse() {
        let o = |s, sess| operand(s, sess).unwrap();
        assert_eq!(
            o("3", Some("s")),
            Operand {
                session: "s".into(),
                flow: Some(3)
            }
        );
        assert!(operand("3", None).is_err());
        assert_eq!(
            o("run-2:3", None),
            Operand {
                session: "run-2".into(),
                flow: Some(3)
            }
        );
        assert_eq!(
            o("good", Some("s")),
            Operand {
                session: "good".into(),
                flow: None
            }
        );
    }
}
