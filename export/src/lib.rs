//! p5 sessions in other tools' formats. [`perfetto`] streams a merged session out of the
//! trace database as a Perfetto trace: the TracePacket protobuf that Perfetto's UI and trace
//! processor read natively (not the legacy Chrome JSON).
//!
//! What becomes what ([`tracks`] has the track tree):
//! - processes and threads → process and thread tracks (pids remapped to be unique across
//!   hosts, the host in the process name and labels);
//! - `interval` (function calls) → slices on the thread's track, named by the sensor, with
//!   its source place (`SourceLocation`: file, function, line);
//! - `state` → slices on the thread's `states` track (`op`, `fd`, `result` as arguments);
//! - `message` → one flow per message with both ends, from the state slice the send started
//!   in to the one the receive that completed it ended in (a flow id is the message id);
//! - `sched` → slices `cpu N` on the thread's `on CPU` track, and for threads p5 did not
//!   record, slices `tid T` on the host's `cpu N` tracks; `irq` → slices on `irq cpu N`;
//! - `mark` → instants on the thread's `marks` track; `metric`/`metric_sample` → counter
//!   tracks (host metrics under the host, application counters under their process).
//!
//! Time: one base, the session's. Every timestamp is the session time plus
//! `session.base_mono_ns`, on CLOCK_MONOTONIC, which a trace-wide clock snapshot names the
//! trace's clock (`primary_trace_clock`) and ties to the wall clock (`base_wall_ns`), so
//! Perfetto can show either. Within a track timestamps are deltas ([`sequence`]).
//!
//! Streaming ([`sink`], `p5_tracedb::stream`): every track is read by one query in time
//! order (the state tracks merge their thread's sends and receives in), encoded, and
//! written in deflated chunks while the next is read; memory is bounded by the open slices
//! of one track and a few chunks, whatever the session's size. [`perfetto`] is synchronous
//! and writes to any [`std::io::Write`], with a progress callback, so a server can run it
//! on a blocking thread and stream the bytes into an HTTP response through a channel.

pub mod error;
mod export;
mod host;
pub mod nest;
pub mod proto;
pub mod sequence;
pub mod sink;
mod states;
pub mod tracks;

pub use error::Error;

use error::Context;
use p5_tracedb::{Reader, read, stream::Stream};
use std::io::Write;
use tokio::runtime::Handle;

/// What to export and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// The session's name.
    pub session: String,
    /// Deflate level 1 (fastest, the default) to 9, or `None` to write the packets
    /// uncompressed.
    pub compression: Option<u32>,
}

impl Options {
    /// Session `name`, compressed at level 1.
    pub fn new(name: &str) -> Options {
        Options {
            session: name.to_owned(),
            compression: Some(1),
        }
    }
}

/// How far an export is.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    /// Queries done (one per track read).
    pub done: u64,
    /// Queries in all.
    pub total: u64,
    /// Track events written so far.
    pub events: u64,
    /// What is being read.
    pub what: String,
}

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// The session's name.
    pub session: String,
    /// Events the merge decoded (`session.events`).
    pub session_events: u64,
    /// Process tracks.
    pub processes: u64,
    /// Thread tracks.
    pub threads: u64,
    /// Tracks in all (processes, threads, child, host and counter tracks).
    pub tracks: u64,
    /// Function-call slices.
    pub intervals: u64,
    /// Thread-state slices.
    pub states: u64,
    /// On-CPU slices.
    pub sched: u64,
    /// Interrupt slices.
    pub irqs: u64,
    /// Mark instants.
    pub marks: u64,
    /// Flows (messages with both ends).
    pub flows: u64,
    /// Flow ends on an instant because no state slice of the thread held them.
    pub flow_instants: u64,
    /// Messages with one end only: no flow.
    pub half_messages: u64,
    /// Counter values.
    pub counter_values: u64,
    /// Track events written.
    pub events: u64,
    /// Packets, the compressed chunks' inner packets included.
    pub packets: u64,
    /// Bytes of packets before compression.
    pub raw_bytes: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Events moved later to keep their track in time order (overlapping rows).
    pub moved: u64,
    /// Slices cut at the end of the slice enclosing them.
    pub clipped: u64,
}

/// Exports session `opts.session` of `db` to `out` as a Perfetto trace. Synchronous: call it
/// outside async tasks; `rt` runs the database's queries. `progress` is called after every
/// track and every 65,536 events.
pub fn perfetto<W: Write + Send>(
    db: &Reader,
    rt: &Handle,
    opts: &Options,
    out: &mut W,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Summary, Error> {
    let sessions = rt
        .block_on(read::sessions(db))
        .reading(|| "the sessions".into())?;
    let Some(s) = sessions.iter().find(|s| s.name == opts.session) else {
        let known: Vec<&str> = sessions.iter().map(|s| s.name.as_str()).collect();
        return Err(Error::NoSession {
            name: opts.session.clone(),
            known: if known.is_empty() {
                "none".into()
            } else {
                known.join(", ")
            },
        });
    };
    if s.t_min.is_none() && s.messages == 0 {
        return Err(Error::Empty(s.name.clone()));
    }
    let sid = s.id;
    let what = |w: &'static str| move || format!("the {w} of session {sid}");
    let hosts = rt.block_on(read::hosts(db, sid)).reading(what("hosts"))?;
    let processes = rt
        .block_on(read::processes(db, sid))
        .reading(what("processes"))?;
    let threads = rt
        .block_on(read::threads(db, sid))
        .reading(what("threads"))?;
    let sensors = rt
        .block_on(read::sensors(db, sid))
        .reading(what("sensors"))?;
    let stream = Stream::open(db, rt).reading(|| "the database".into())?;
    let base = session_base(&stream, sid).reading(what("time base"))?;
    let mut summary = Summary {
        session: s.name.clone(),
        session_events: s.events.max(0) as u64,
        half_messages: (s.messages - s.matched).max(0) as u64,
        ..Summary::default()
    };
    let meta = export::Meta {
        sid,
        base_mono_ns: base,
        base_wall_ns: s.base_wall_ns,
    };
    std::thread::scope(|scope| {
        let (sink, writer) = sink::Sink::start(scope, out, opts.compression);
        let tree = (hosts, processes, threads, sensors);
        let run = export::Exporter::run(&stream, sink, meta, tree, &mut summary, progress);
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the trace writer thread panicked")));
        match (run, written) {
            // The writer's own error explains a stopped writer best.
            (Err(Error::WriterGone), Err(e)) | (Ok(()), Err(e)) => Err(Error::Io(e)),
            (Err(e), _) => Err(e),
            (Ok(()), Ok(bytes)) => {
                summary.bytes = bytes;
                Ok(())
            }
        }
    })?;
    Ok(summary)
}

/// The session's `base_mono_ns` (not in [`read::Session`]).
fn session_base(stream: &Stream, sid: i64) -> Result<i64, p5_tracedb::Error> {
    let mut c = stream.session_base(sid)?;
    let base = match c.next()? {
        Some(r) => r.i64(0)?,
        None => 0,
    };
    Ok(base)
}
