//! `flows` and `diff` as the front end runs them: read the sessions through the one
//! [`Database`] handle, build flows ([`super::rules`]), score them ([`super::anomaly`]) or
//! diff them ([`super::rootcause`]), and store the run. The caller prints the outcome with
//! [`super::report`].

use super::anomaly::{Reference, Suspect, suspects};
use super::model::{Join, Rules, Start};
use super::paths::PathTable;
use super::profiles::{ProfileKind, profiles};
use super::rootcause::{self, Coverage, Diff, Side};
use super::rules::{self, Flows};
use super::store;
use crate::db::{Database, RunRows};
use crate::progress::Progress;
use crate::{Error, Result};
use p5_tracedb::read::Session;
use serde_json::json;

/// The rules both commands build flows with, as written (`--start`, `--join`).
#[derive(Debug, Clone, Default)]
pub struct RuleSpecs {
    /// Start events: `sensor:NAME`, `messages-from:PROGRAM`, `mark:NAME`.
    pub start: Vec<String>,
    /// Join directives `SENSOR_A=SENSOR_B`.
    pub join: Vec<String>,
    /// Store the run (`false`: only print).
    pub save: bool,
}

impl RuleSpecs {
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

/// Options of [`flows`].
#[derive(Debug, Clone, Default)]
pub struct FlowsOptions {
    /// The rules.
    pub rules: RuleSpecs,
    /// The session to build flows of.
    pub session: String,
    /// The profile flows are compared by.
    pub profile: ProfileKind,
    /// Score against the k-th nearest other flow.
    pub k: usize,
    /// Flows (1-based ids) known to be normal.
    pub normal: Vec<u32>,
    /// A session of known-normal runs to score against.
    pub reference_session: Option<String>,
}

/// What [`flows`] found.
#[derive(Debug)]
pub struct FlowsOutcome {
    /// The session.
    pub session: Session,
    /// Its flows.
    pub flows: Flows,
    /// Their suspect scores.
    pub scores: Vec<Suspect>,
    /// The call paths.
    pub paths: PathTable,
    /// The stored run, if stored.
    pub run: Option<i64>,
}

impl FlowsOutcome {
    /// One line: how many flows from how many events.
    pub fn summary(&self) -> String {
        let f = &self.flows;
        format!(
            "{}: {} flows from {} events ({} outside any flow{}), {} call paths",
            self.session.name,
            f.flows.len(),
            f.events,
            f.outside,
            if f.unjoined > 0 {
                format!(", {} directive targets joined nothing", f.unjoined)
            } else {
                String::new()
            },
            self.paths.count()
        )
    }
}

/// Builds and scores the flows of `o.session`.
pub fn flows(
    db: &mut Database,
    o: &FlowsOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<FlowsOutcome> {
    let rules = o.rules.rules()?;
    let mut names = vec![o.session.as_str()];
    if let Some(r) = &o.reference_session {
        names.push(r);
    }
    progress(Progress::Phase("reading sessions", None));
    let mut loaded = db.flow_events(&names)?;
    progress(Progress::Phase("building flows", None));
    let mut paths = PathTable::default();
    let flows = rules::build(&loaded[0].1, &rules, &mut paths)?;
    let n = flows.flows.len();
    let normal: Vec<usize> = o.normal.iter().map(|&id| id as usize).collect();
    if let Some(bad) = normal.iter().find(|&&id| id == 0 || id > n) {
        return Err(Error::Usage(format!(
            "--normal {bad}: session {:?} has flows 1 to {n}",
            o.session
        )));
    }
    let normal: Vec<usize> = normal.into_iter().map(|id| id - 1).collect();
    progress(Progress::Phase("scoring", None));
    let ps = profiles(&flows, o.profile);
    let scores = if let Some((_, ref_events)) = loaded.get(1) {
        let ref_flows = rules::build(ref_events, &rules, &mut paths)?;
        suspects(&ps, Reference::External(&profiles(&ref_flows, o.profile)))
    } else if !normal.is_empty() {
        suspects(&ps, Reference::Normal(&normal))
    } else {
        suspects(&ps, Reference::Nearest(o.k))
    };
    let session = loaded.swap_remove(0).0;
    let run = if o.rules.save {
        let mut params = o.rules.params();
        params["profile"] = json!(o.profile);
        params["k"] = json!(o.k);
        params["normal"] = json!(o.normal);
        params["reference_session"] = json!(o.reference_session);
        Some(db.save_run(&session.name, |s, id| {
            let rows = store::flow_rows(s, id, &flows, &scores, &normal, &paths);
            (
                store::run_row(s, id, "flows", &params),
                RunRows::Flows(rows),
            )
        })?)
    } else {
        None
    };
    progress(Progress::Done);
    Ok(FlowsOutcome {
        session,
        flows,
        scores,
        paths,
        run,
    })
}

/// One side of a diff: a session, or one flow of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operand {
    /// The session.
    pub session: String,
    /// The flow (1-based), or the whole session.
    pub flow: Option<u32>,
}

impl Operand {
    /// Parses `SESSION`, `SESSION:FLOW` or a bare `FLOW` of `session`.
    pub fn parse(s: &str, session: Option<&str>) -> Result<Operand> {
        let digits = |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit());
        let id = |x: &str| {
            x.parse()
                .map_err(|_| Error::Usage(format!("diff {s}: not a flow id")))
        };
        if digits(s) {
            let Some(session) = session else {
                return Err(Error::Usage(format!(
                    "diff {s}: a bare flow id needs --session NAME"
                )));
            };
            return Ok(Operand {
                session: session.to_owned(),
                flow: Some(id(s)?),
            });
        }
        if let Some((name, flow)) = s.rsplit_once(':')
            && digits(flow)
            && !name.is_empty()
        {
            return Ok(Operand {
                session: name.to_owned(),
                flow: Some(id(flow)?),
            });
        }
        Ok(Operand {
            session: s.to_owned(),
            flow: None,
        })
    }
}

/// Options of [`diff`].
#[derive(Debug, Clone)]
pub struct DiffOptions {
    /// The rules.
    pub rules: RuleSpecs,
    /// The anomalous side, as written.
    pub anomalous: String,
    /// The normal side, as written.
    pub normal: String,
    /// The session of bare flow ids.
    pub session: Option<String>,
}

/// What [`diff`] found.
#[derive(Debug)]
pub struct DiffOutcome {
    /// The differences.
    pub diff: Diff,
    /// The call paths.
    pub paths: PathTable,
    /// The stored run, if stored.
    pub run: Option<i64>,
    /// The session the run was stored in (the anomalous side's).
    pub session: String,
}

impl DiffOutcome {
    /// One line: paths only in either side, before and after pruning and merging.
    pub fn summary(&self, o: &DiffOptions) -> String {
        let d = &self.diff;
        let side = |s: Side| d.differences.iter().filter(|x| x.side == s).count();
        format!(
            "{} against {}: {} paths only in the anomalous side → {} after pruning and \
             merging, {} only in the normal side → {}",
            o.anomalous,
            o.normal,
            d.raw_anomalous,
            side(Side::Anomalous),
            d.raw_normal,
            side(Side::Normal),
        )
    }
}

/// Root-cause differences between two sessions or flows.
pub fn diff(
    db: &mut Database,
    o: &DiffOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<DiffOutcome> {
    let rules = o.rules.rules()?;
    let sides = [
        Operand::parse(&o.anomalous, o.session.as_deref())?,
        Operand::parse(&o.normal, o.session.as_deref())?,
    ];
    let mut names: Vec<&str> = sides.iter().map(|o| o.session.as_str()).collect();
    names.dedup();
    progress(Progress::Phase("reading sessions", None));
    let loaded = db.flow_events(&names)?;
    progress(Progress::Phase("diffing", None));
    let mut paths = PathTable::default();
    let mut built: Vec<(String, Flows)> = Vec::new();
    let mut cov: Vec<Coverage> = Vec::new();
    for side in &sides {
        let events = loaded
            .iter()
            .find(|(s, _)| s.name == side.session)
            .map(|(_, e)| e)
            .ok_or_else(|| Error::Usage(format!("no session {:?}", side.session)))?;
        let Some(id) = side.flow else {
            cov.push(rules::session_coverage(events, &mut paths));
            continue;
        };
        let k = match built.iter().position(|(n, _)| n == &side.session) {
            Some(k) => k,
            None => {
                built.push((
                    side.session.clone(),
                    rules::build(events, &rules, &mut paths)?,
                ));
                built.len() - 1
            }
        };
        let flows = &built[k].1;
        if id == 0 || id as usize > flows.flows.len() {
            return Err(Error::Usage(format!(
                "diff: session {:?} has flows 1 to {}, not {id}",
                side.session,
                flows.flows.len()
            )));
        }
        cov.push(rules::flow_coverage(flows, id - 1));
    }
    let d = rootcause::diff(&cov[0], &cov[1], &paths);
    let session = sides[0].session.clone();
    let run = if o.rules.save {
        let mut params = o.rules.params();
        params["anomalous"] = json!(o.anomalous);
        params["normal"] = json!(o.normal);
        Some(db.save_run(&session, |s, id| {
            let rows = store::diff_rows(s, id, &d, &paths);
            (store::run_row(s, id, "diff", &params), RunRows::Flows(rows))
        })?)
    } else {
        None
    };
    progress(Progress::Done);
    Ok(DiffOutcome {
        diff: d,
        paths,
        run,
        session,
    })
}

#[cfg(test)]
mod tests {
    use super::Operand;

    #[test]
    fn operands_parse() {
        let o = |s, sess| Operand::parse(s, sess).unwrap();
        let op = |s: &str, flow| Operand {
            session: s.into(),
            flow,
        };
        assert_eq!(o("3", Some("s")), op("s", Some(3)));
        assert!(Operand::parse("3", None).is_err());
        assert_eq!(o("run-2:3", None), op("run-2", Some(3)));
        assert_eq!(o("good", Some("s")), op("good", None));
    }
}
