//! `p5 merge`: turns a log server's session store into one synchronized trace database.
//!
//! It reads a session twice, streaming ([`load`]); puts every source on the session's time
//! base — the clock of the log server's first run — by fitting offset and drift to the
//! `(t_p, t_s − t_p)` samples the log server recorded ([`clock`]; processes of one boot share
//! one fit, [`domain`]); matches every send to its receive by connection endpoints and byte
//! counting ([`matching`]) and uses the matched messages to refine and tighten the clocks until
//! no message is received before it was sent; builds the
//! rows the views need — function-call [`intervals`] with depth and self time, thread
//! [`states`] for the Gantt chart, scheduling intervals, IRQs, metric samples, the
//! [`connections`] every message travelled on — and writes them to SQLite (default) or
//! PostgreSQL through `p5_tracedb` (the schema, documented in `docs/schema.md`; this crate
//! contains no SQL).
//!
//! Damaged stores, unknown sensors and sources without clock samples never stop a merge: it
//! keeps what it can and writes `diagnostic` rows. [`merge_store`] merges and returns a
//! [`SessionSummary`] per session, reporting progress through a [`Progress`]; [`render`] formats
//! a summary; the `p5` binary parses its command line into [`MergeOptions`], prints the
//! summaries and draws the progress bar.

pub mod clock;
pub mod clock_table;
pub mod coalesce;
pub mod connections;
pub mod domain;
pub mod error;
pub mod intervals;
pub mod inventory;
pub mod load;
pub mod manifest;
pub mod matching;
pub mod messages;
pub mod overview;
pub mod progress;
pub mod replay;
pub mod session;
pub mod states;

pub use error::Error;
pub use progress::{Progress, Silent};
pub use session::{Diagnostic, ProcessClock, SessionSummary, Severity, ThrottledSensor};

use p5_logserver::reader::StoreDir;
use p5_tracedb::DbUrl;
use std::path::PathBuf;

/// What to merge and where to: the options of `p5 merge` (the command line lives in the `p5`
/// binary).
#[derive(Debug, Clone, Default)]
pub struct MergeOptions {
    /// Session store directory (written by `p5 logserver`).
    pub store: PathBuf,
    /// Database: `sqlite:PATH` (created if missing) or `postgres://user@host/db`; `None`
    /// means `sqlite:<STORE>/p5.sqlite`.
    pub db: Option<String>,
    /// Merge only this session (`None`: every session in the store).
    pub session: Option<String>,
    /// Instrumentation output directories holding `p5-manifest.json` and `sources/`: they
    /// give sensors their source locations and text.
    pub manifests: Vec<PathBuf>,
}

impl MergeOptions {
    /// Options for merging `store` into its default database, every session.
    pub fn new(store: impl Into<PathBuf>) -> Self {
        MergeOptions {
            store: store.into(),
            ..MergeOptions::default()
        }
    }

    /// The database URL in effect, as given (default: `sqlite:<STORE>/p5.sqlite`).
    pub fn db_url(&self) -> String {
        self.db
            .clone()
            .unwrap_or_else(|| format!("sqlite:{}", self.store.join("p5.sqlite").display()))
    }

    /// The database URL, parsed.
    pub fn parsed_db_url(&self) -> Result<DbUrl, Error> {
        match &self.db {
            Some(u) => Ok(DbUrl::parse(u)?),
            None => Ok(DbUrl::sqlite_file(&self.store.join("p5.sqlite"))),
        }
    }
}

/// Merges the store's sessions (or the one named) and returns what each merge did.
pub async fn merge_store(opts: &MergeOptions) -> Result<Vec<SessionSummary>, Error> {
    merge_store_with(opts, &Silent).await
}

/// [`merge_store`], reporting progress.
pub async fn merge_store_with(
    opts: &MergeOptions,
    progress: &dyn Progress,
) -> Result<Vec<SessionSummary>, Error> {
    let url = opts.parsed_db_url()?;
    let manifests = manifest::Manifests::load(&opts.manifests)?;
    let store = StoreDir::open(&opts.store)?;
    let sessions = match &opts.session {
        Some(name) => {
            let s = store.session(name)?;
            if !s.path.is_dir() {
                return Err(Error::NoSession(name.clone()));
            }
            vec![s]
        }
        None => {
            let all = store.sessions()?;
            let segments = |s: &p5_logserver::reader::SessionDir| {
                s.segments().map(|v| !v.is_empty()).unwrap_or(false)
            };
            if !all.iter().any(segments) {
                return Err(Error::NoStore(opts.store.clone()));
            }
            all
        }
    };
    let started = std::time::Instant::now();
    let elapsed = || started.elapsed().as_millis() as u64;
    let mut db = p5_tracedb::Db::open(&url).await?;
    tracing::debug!(elapsed_ms = elapsed(), "merge: database open");
    let store_name = opts.store.display().to_string();
    let mut out = Vec::new();
    for s in &sessions {
        db.begin().await?;
        let (mut back, summary) = session::merge(db, &store_name, s, &manifests, progress).await?;
        tracing::debug!(elapsed_ms = elapsed(), "merge: committing {}", s.name);
        back.commit().await?;
        tracing::debug!(elapsed_ms = elapsed(), "merge: committed {}", s.name);
        db = back;
        out.push(summary);
    }
    db.close().await?;
    tracing::debug!(elapsed_ms = elapsed(), "merge: closed");
    Ok(out)
}

/// Formats a summary for the terminal.
pub fn render(s: &SessionSummary) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(o, "session {} (id {})", s.name, s.id);
    let _ = writeln!(
        o,
        "  {} processes, {} streams, {} events",
        s.clocks.len(),
        s.streams,
        s.events
    );
    for c in &s.clocks {
        let bound = c
            .fit
            .error_bound_ns
            .map_or("-".to_owned(), |b| format!("±{b} ns"));
        let _ = writeln!(
            o,
            "  {:>7} {:<16} {:<12} offset {:>16} ns  drift {:>+9.3} ppm  {:>6}+{:<6}+{:<6} samples  {:<8} bound {}{}",
            c.pid,
            c.program,
            c.hostname,
            c.fit.map(0),
            c.fit.drift_ppm(),
            c.fit.forward,
            c.fit.backward,
            c.fit.messages,
            c.fit.method.name(),
            bound,
            if c.tighten_ns != 0 {
                format!("  (messages moved it {} ns)", c.tighten_ns)
            } else {
                String::new()
            }
        );
    }
    o.push_str(&clock_table::render(&s.clocks));
    let _ = write!(
        o,
        "  messages: {} matched, {} sends and {} receives unmatched",
        s.matched, s.unmatched_sends, s.unmatched_recvs
    );
    if s.undescribed > 0 {
        let _ = write!(
            o,
            ", {} calls on sockets the runtime never described (not matchable)",
            s.undescribed
        );
    }
    let _ = writeln!(o);
    if s.folded > 0 {
        let _ = writeln!(
            o,
            "  pieces: {} further sends or receives stored as pieces of the message they \
             continue (nothing went the other way between them)",
            s.folded
        );
    }
    let _ = writeln!(o, "  connections: {}", s.connections);
    if s.dropped.0 > 0 {
        let (n, threads) = s.dropped;
        let _ = writeln!(
            o,
            "  WARNING: {n} events were lost to full buffers in {threads} thread(s): the trace \
             has gaps there (table drop_range; the Gantt marks them)"
        );
    }
    if !s.throttled.is_empty() {
        let calls: u64 = s.throttled.iter().map(|t| t.calls).sum();
        let _ = writeln!(
            o,
            "  throttled: {} sensor(s) only counted calls after a while ({calls} calls in all; \
             table sensor_calls, the statistics view and the source panel list them; \
             P5_THROTTLE=off records everything):",
            s.throttled.len()
        );
        for t in s.throttled.iter().take(10) {
            let _ = writeln!(
                o,
                "    {:<40} {:>12} calls, {} long ones recorded, {} {:.3} s in",
                t.name,
                t.calls,
                t.recorded,
                if t.pinned {
                    "pinned count-only"
                } else {
                    "throttled"
                },
                t.after_ns as f64 / 1e9
            );
        }
        if s.throttled.len() > 10 {
            let _ = writeln!(o, "    … and {} more", s.throttled.len() - 10);
        }
    }
    let _ = writeln!(
        o,
        "  causality: {} violations from the samples alone, {} after tightening",
        s.violations_before, s.violations
    );
    let rows: Vec<String> = s.rows.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let _ = writeln!(o, "  rows: {}", rows.join(", "));
    let _ = writeln!(o, "  diagnostics: {}", s.diagnostics.len());
    for d in &s.diagnostics {
        let _ = writeln!(o, "    {}: {}: {}", d.severity, d.kind, d.message);
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The summary's message line counts calls that could not be matched at all (sockets no
    /// runtime described), not only the matchable ones left over.
    #[test]
    fn the_summary_counts_calls_on_undescribed_sockets() {
        let mut s = SessionSummary {
            matched: 0,
            ..SessionSummary::default()
        };
        assert!(render(&s).contains("messages: 0 matched, 0 sends and 0 receives unmatched\n"));
        s.folded = 3;
        assert!(render(&s).contains(
            "unmatched\n  pieces: 3 further sends or receives stored as pieces of the message"
        ));
        s.undescribed = 1135;
        assert!(render(&s).contains(
            "messages: 0 matched, 0 sends and 0 receives unmatched, 1135 calls on sockets the \
             runtime never described (not matchable)\n"
        ));
    }

    /// Throttled sensors are named in the summary with their calls and when.
    #[test]
    fn the_summary_lists_throttled_sensors() {
        let mut s = SessionSummary::default();
        assert!(!render(&s).contains("throttled"));
        s.throttled = vec![ThrottledSensor {
            name: "lvm.c:luaV_execute".into(),
            calls: 4_000_000,
            recorded: 12,
            after_ns: 1_500_000_000,
            pinned: false,
        }];
        let r = render(&s);
        assert!(
            r.contains("throttled: 1 sensor(s) only counted calls"),
            "{r}"
        );
        assert!(r.contains("lvm.c:luaV_execute"), "{r}");
        assert!(
            r.contains("4000000 calls, 12 long ones recorded, throttled 1.500 s in"),
            "{r}"
        );
    }
}
