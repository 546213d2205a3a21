//! The one driver every path analysis runs through: read the [`Source`] → run the
//! [`Analysis`] → store the run where the job says → hand back the outcome for the front end
//! to print. Nesting, linking and convolution implement [`Analysis`]; what differs between
//! them is only how they run and which rows of their own they add to the stored run.
//!
//! Where a run is stored: into the session it read (a [`Source::Session`], its message ids as
//! they are), and into [`Job::save`] (a session imported from the same trace or capture: the
//! messages mapped to the ids that import gave them, from their `msg_ref`s taken before the
//! analysis, which may consume its trace — 8 bytes a message).

use crate::db::Database;
use crate::pattern::AnalysisResult;
use crate::progress::Progress;
use crate::source::Source;
use crate::store::MessageIds;
use crate::{ReadReport, Result, Trace};
use p5_tracedb::analysis::RunResults;

/// A path analysis.
pub trait Analysis {
    /// What it returns besides the patterns (counts, a graph).
    type Output;

    /// Runs it on `trace`.
    fn run(&self, trace: Trace, progress: &mut dyn FnMut(Progress)) -> Result<Self::Output>;

    /// The patterns and instances of `out`.
    fn result<'o>(&self, out: &'o Self::Output) -> &'o AnalysisResult;

    /// Rows of its own added to a stored run (session id, run id).
    fn more_rows(&self, _out: &Self::Output, _sid: i64, _run: i64, _rows: &mut RunResults) {}

    /// Whether its instances name messages (stored with their ids).
    fn names_messages(&self) -> bool {
        true
    }

    /// Whether it pairs calls with their returns (nesting, linking): an input with calls and
    /// no return at all (one side of a capture) is then refused as such.
    fn pairs_calls(&self) -> bool {
        false
    }
}

/// Another place to store the run: a session of a database.
#[derive(Debug)]
pub struct Target<'a> {
    /// The database.
    pub db: &'a mut Database,
    /// The session.
    pub session: String,
}

/// What to read and where to store.
#[derive(Debug)]
pub struct Job<'a> {
    /// The input.
    pub source: Source,
    /// The database a [`Source::Session`] is read from; the run is stored there too.
    pub db: Option<&'a mut Database>,
    /// Also store the run here.
    pub save: Option<Target<'a>>,
}

/// A run's outcome.
#[derive(Debug)]
pub struct Done<O> {
    /// What was read (`trace.p5t`, `session run1`).
    pub name: String,
    /// What the reader skipped.
    pub report: ReadReport,
    /// The analysis's output.
    pub output: O,
    /// Where the run was stored: session and run id.
    pub stored: Vec<(String, i64)>,
}

/// Refuses an input with nothing to analyse: no message at all, or — for an analysis that
/// pairs calls with returns — calls and not one return (a capture of one direction).
fn check_input(name: &str, trace: &Trace, pairs_calls: bool) -> Result<()> {
    use crate::trace::Kind;
    if trace.messages.is_empty() {
        return Err(crate::Error::Empty(format!(
            "{name} holds no messages: nothing to analyse (p5 analyze reads what a session's \
             processes sent each other; `p5 inspect` and the viewer show what was recorded)"
        )));
    }
    let count = |k: Kind| trace.messages.iter().filter(|m| m.kind == k).count();
    let (calls, rets) = (count(Kind::Call), count(Kind::Ret));
    if pairs_calls && rets == 0 && calls == trace.messages.len() {
        return Err(crate::Error::Empty(format!(
            "{name} holds {calls} calls and not one return: it sees one direction only (a \
             capture of one side of the traffic). Capture where both directions pass \
             (`tcpdump -i any`, or on every host, each with --pcap)"
        )));
    }
    Ok(())
}

/// Runs `analysis` on `job`.
pub fn run<A: Analysis>(
    analysis: &A,
    mut job: Job<'_>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Done<A::Output>> {
    let input = job.source.read(job.db.as_deref_mut(), false, progress)?;
    check_input(&input.name, &input.trace, analysis.pairs_calls())?;
    let from_file = job.source.session().is_none();
    // The saved session's message ids, from the trace before the analysis consumes it.
    let refs: Option<Vec<u64>> = (job.save.is_some() && from_file && analysis.names_messages())
        .then(|| input.trace.messages.iter().map(|m| m.msg_ref).collect());
    let output = analysis.run(input.trace, progress)?;
    progress(Progress::Done);
    let result = analysis.result(&output);
    let mut stored = Vec::new();
    let mut store = |db: &mut Database, session: &str, source: &str, ids: &MessageIds| {
        let run = db.save_result(session, (result, source, ids), |sid, run, rows| {
            analysis.more_rows(&output, sid, run, rows)
        })?;
        stored.push((session.to_owned(), run));
        Ok::<(), crate::Error>(())
    };
    if let (Some(session), Some(db)) = (job.source.session(), job.db.as_deref_mut()) {
        store(db, session, "sql", &MessageIds::default())?;
    }
    if let Some(t) = job.save {
        let ids = refs.map_or_else(MessageIds::default, MessageIds::of_refs);
        store(t.db, &t.session, &input.name, &ids)?;
    }
    Ok(Done {
        name: input.name,
        report: input.report,
        output,
        stored,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Kind, Message};

    fn trace(kinds: &[Kind]) -> Trace {
        let mut t = Trace::default();
        for &k in kinds {
            let mut m = Message::new(0, 1);
            m.kind = k;
            t.messages.push(m);
        }
        t
    }

    #[test]
    fn empty_and_one_sided_inputs_are_refused_with_the_reason() {
        let e = check_input("s", &trace(&[]), false).unwrap_err();
        assert!(e.to_string().contains("holds no messages"), "{e}");
        let one_side = trace(&[Kind::Call, Kind::Call]);
        let e = check_input("c.pcap", &one_side, true).unwrap_err();
        assert!(e.to_string().contains("one direction only"), "{e}");
        assert!(
            check_input("c.pcap", &one_side, false).is_ok(),
            "convolution reads it"
        );
        assert!(check_input("c", &trace(&[Kind::Call, Kind::Ret]), true).is_ok());
        assert!(check_input("c", &trace(&[Kind::Msg]), true).is_ok());
    }
}
