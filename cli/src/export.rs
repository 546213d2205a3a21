//! `p5 export perfetto`: a merged session as a Perfetto trace file, with a progress bar on a
//! terminal and a one-line summary. The trace is written to `FILE.partial` beside the target
//! and renamed when complete, so a failed export leaves no truncated trace behind.

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;

/// `p5 export FORMAT …`.
#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    #[command(subcommand)]
    format: Format,
}

#[derive(clap::Subcommand, Debug)]
enum Format {
    /// A Perfetto trace (TracePacket protobuf, deflated chunks) for ui.perfetto.dev and
    /// Perfetto's trace processor: processes, threads, calls, states, message flows,
    /// scheduling, interrupts and metrics on the session's time base.
    Perfetto(PerfettoArgs),
}

/// `p5 export perfetto`.
#[derive(clap::Args, Debug)]
struct PerfettoArgs {
    /// The trace database (`sqlite:PATH` or `postgres://USER@HOST[:PORT]/DB`).
    #[arg(long)]
    db: String,
    /// The session to export (may be left out when the database holds only one).
    #[arg(long)]
    session: Option<String>,
    /// The trace file to write (conventionally `.pftrace`).
    #[arg(short, long)]
    output: PathBuf,
    /// Deflate level, 1 (fastest) to 9; 0 writes the packets uncompressed.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=9))]
    level: u32,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

/// Runs `p5 export …`.
pub fn run(args: &ExportArgs) -> anyhow::Result<()> {
    match &args.format {
        Format::Perfetto(a) => perfetto(a),
    }
}

fn perfetto(a: &PerfettoArgs) -> anyhow::Result<()> {
    let url = p5_tracedb::DbUrl::parse(&a.db)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let db = rt.block_on(p5_tracedb::Reader::open(&url))?;
    let session = match &a.session {
        Some(s) => s.clone(),
        None => only_session(&rt, &db)?,
    };
    let mut opts = p5_export::Options::new(&session);
    opts.compression = (a.level > 0).then_some(a.level);
    let partial = a.output.with_extension("pftrace.partial");
    let file = std::fs::File::create(&partial)
        .with_context(|| format!("cannot create {}", partial.display()))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let bar = bar(a.quiet);
    let started = std::time::Instant::now();
    let result = p5_export::perfetto(&db, rt.handle(), &opts, &mut out, &mut |p| {
        bar.set_length(p.total);
        bar.set_position(p.done);
        bar.set_message(format!("{} events; {}", p.events, p.what));
    });
    bar.finish_and_clear();
    drop(out);
    let summary = match result {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e.into());
        }
    };
    std::fs::rename(&partial, &a.output).with_context(|| {
        format!(
            "cannot rename {} to {}",
            partial.display(),
            a.output.display()
        )
    })?;
    let secs = started.elapsed().as_secs_f64();
    println!("{}", render(&summary, secs, &a.output));
    rt.block_on(db.close());
    Ok(())
}

/// The one session of the database, or an error listing them.
fn only_session(rt: &tokio::runtime::Runtime, db: &p5_tracedb::Reader) -> anyhow::Result<String> {
    let sessions = rt.block_on(p5_tracedb::read::sessions(db))?;
    match sessions.as_slice() {
        [s] => Ok(s.name.clone()),
        [] => anyhow::bail!("the database holds no session: run `p5 merge STORE --db URL` first"),
        many => {
            let names: Vec<&str> = many.iter().map(|s| s.name.as_str()).collect();
            anyhow::bail!(
                "the database holds {} sessions; choose one with --session ({})",
                many.len(),
                names.join(", ")
            )
        }
    }
}

fn bar(quiet: bool) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::with_draw_target(Some(1), ProgressDrawTarget::stderr());
    b.set_style(
        ProgressStyle::with_template("[{bar:30}] {pos}/{len} tracks {msg:50} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    b
}

/// The summary printed after an export.
pub fn render(s: &p5_export::Summary, secs: f64, path: &std::path::Path) -> String {
    let per_event = |n: u64| n as f64 / s.session_events.max(1) as f64;
    let mut out = format!(
        "exported session {:?} to {}: {} processes, {} threads, {} tracks; {} calls, {} states, \
         {} on-CPU and {} IRQ slices, {} marks, {} flows, {} counter values; {} track events in \
         {:.2} s ({:.0} session events/s), {} bytes ({:.2} per session event)",
        s.session,
        path.display(),
        s.processes,
        s.threads,
        s.tracks,
        s.intervals,
        s.states,
        s.sched,
        s.irqs,
        s.marks,
        s.flows,
        s.counter_values,
        s.events,
        secs,
        s.session_events as f64 / secs.max(1e-9),
        s.bytes,
        per_event(s.bytes),
    );
    if s.half_messages > 0 {
        out.push_str(&format!(
            "\nnote: {} messages with one end only have no flow",
            s.half_messages
        ));
    }
    if s.moved > 0 || s.clipped > 0 {
        out.push_str(&format!(
            "\nwarning: overlapping rows: {} events moved later, {} slices cut at their parent's end",
            s.moved, s.clipped
        ));
    }
    out
}
