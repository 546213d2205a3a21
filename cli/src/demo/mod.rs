//! `p5 demo`: the three case studies of the CoSMoS paper (seed 004 §4), from bundled C sources
//! to the web view in one command.
//!
//! 1. The sources (`samples/{cascade,stream,cracker}`, embedded) are written to `OUT/src` and
//!    instrumented with `p5-instrument` (functions + comm) into `OUT/instr`, which also gets the
//!    manifest and the source copies for click-back.
//! 2. Each program is compiled with gcc against the runtime's static library.
//! 3. An in-process log server records every scenario as its own session in `OUT/store`; a
//!    host agent (`p5 hostagent`, with the OS monitor when running as root) runs beside each
//!    scenario so host load, scheduling, NIC interrupts and the network softirqs (NET_RX /
//!    NET_TX: on loopback the kernel's packet work) are in the picture.
//! 4. All sessions are merged into `OUT/store/p5.sqlite` with the manifest; a summary per
//!    session prints the numbers that carry the paper's findings.
//! 5. The viewer is served (`p5 web`) unless `--no-serve`.
//!
//! Scenarios: `cascade` (§4.1: client → shop → db), `nagle-on`, `nagle-off`, `small-mss`
//! (§4.2: a stream of small messages with Nagle's algorithm, with `TCP_NODELAY`, and with
//! `TCP_NODELAY` plus a small `TCP_MAXSEG`), `cracker-sync`, `cracker-async`, `cracker-salt`
//! (§4.3: the master `cpw` and four workers `cow`, one of them on a "slower host"), and the
//! black-box case study `blackbox`, `blackbox-delayed` (`blackbox`: an unmodified
//! multi-tier service recorded with `--preload`, analysed, and compared with itself slowed
//! down in one backend).

mod blackbox;

mod findings;
mod render;
mod scenarios;
mod steps;

pub use findings::{Finding, ThreadStates, findings};

use anyhow::{Context as _, bail};
use render::{findings_json, render_finding, stream_comparison};
use scenarios::{NORMAL, QUICK, is_root};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Instant;
use steps::{build, instrument_cases, record_all, serve};

/// The scenarios, in the order they run.
pub const SCENARIOS: &[(&str, &str)] = &[
    (
        "cascade",
        "§4.1 cascaded client/server: client -> shop -> db",
    ),
    (
        "nagle-on",
        "§4.2 a stream of small TCP messages, Nagle's algorithm on (the default)",
    ),
    ("nagle-off", "§4.2 the same stream with TCP_NODELAY"),
    (
        "small-mss",
        "§4.2 the same stream with TCP_NODELAY and a small TCP_MAXSEG",
    ),
    (
        "cracker-sync",
        "§4.3 password cracker, synchronous scheme: cpw serves the workers in a fixed order",
    ),
    (
        "cracker-async",
        "§4.3 password cracker, asynchronous scheme: the next word goes to whoever is ready",
    ),
    (
        "cracker-salt",
        "§4.3 password cracker, asynchronous with the salt optimization",
    ),
    (
        "blackbox",
        "black box: an unmodified C service (client, front, auth, catalog, db) under --preload",
    ),
    (
        "blackbox-delayed",
        "black box: the same service with a delay injected in the catalog backend",
    ),
];

/// Options of `p5 demo`.
#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    /// Output directory: src/, instr/ (instrumented sources, manifest), bin/, work/ and store/
    /// (sessions and p5.sqlite) are replaced on each run.
    #[arg(long, default_value = "p5-demo-out")]
    pub out: PathBuf,
    /// Do everything but serve the web view (for scripts and tests).
    #[arg(long)]
    pub no_serve: bool,
    /// Address the web view listens on.
    #[arg(long, default_value = "127.0.0.1:8055")]
    pub listen: SocketAddr,
    /// Run only these scenarios (repeatable or comma-separated): cascade, nagle-on, nagle-off,
    /// small-mss, cracker-sync, cracker-async, cracker-salt, blackbox, blackbox-delayed; `nagle`
    /// (or `stream`), `cracker` and `blackbox` (both black-box sessions) name groups.
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    pub only: Vec<String>,
    /// Do not start a host agent beside the scenarios.
    #[arg(long)]
    pub no_agent: bool,
    /// Small sizes (seconds instead of a minute; for tests).
    #[arg(long, hide = true)]
    pub quick: bool,
    /// Print the findings as JSON on stdout (the human summary goes to stderr).
    #[arg(long)]
    pub json: bool,
}

/// Selected scenario names, in run order.
fn selected(only: &[String]) -> anyhow::Result<Vec<&'static str>> {
    if only.is_empty() {
        return Ok(SCENARIOS.iter().map(|(n, _)| *n).collect());
    }
    let mut want = Vec::new();
    for o in only {
        let o = o.trim();
        let hits: Vec<&str> = SCENARIOS
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| {
                *n == o
                    || (o == "nagle" && matches!(*n, "nagle-on" | "nagle-off" | "small-mss"))
                    || (o == "stream" && matches!(*n, "nagle-on" | "nagle-off" | "small-mss"))
                    || (o == "cracker" && n.starts_with("cracker-"))
                    || (o == "blackbox" && n.starts_with("blackbox"))
            })
            .collect();
        if hits.is_empty() {
            let names: Vec<&str> = SCENARIOS.iter().map(|(n, _)| *n).collect();
            bail!("unknown scenario {o:?}; choose from {}", names.join(", "));
        }
        want.extend(hits);
    }
    Ok(SCENARIOS
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| want.contains(n))
        .collect())
}

/// The demo's folders under `--out`.
struct Dirs {
    src: PathBuf,
    instr: PathBuf,
    bin: PathBuf,
    work: PathBuf,
    store: PathBuf,
}

impl Dirs {
    /// Clears what a previous run left and creates the folders.
    fn fresh(out: &Path) -> anyhow::Result<Dirs> {
        std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
        let out = out
            .canonicalize()
            .with_context(|| format!("cannot resolve {}", out.display()))?;
        let d = Dirs {
            src: out.join("src"),
            instr: out.join("instr"),
            bin: out.join("bin"),
            work: out.join("work"),
            store: out.join("store"),
        };
        for p in [&d.src, &d.instr, &d.bin, &d.store, &d.work] {
            if p.exists() {
                std::fs::remove_dir_all(p)
                    .with_context(|| format!("cannot clear the previous {}", p.display()))?;
            }
        }
        for p in [&d.src, &d.bin, &d.work] {
            std::fs::create_dir_all(p).with_context(|| format!("cannot create {}", p.display()))?;
        }
        Ok(d)
    }
}

/// Runs the demo.
pub fn run(args: &DemoArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let scenarios = selected(&args.only)?;
    let sizes = if args.quick { QUICK } else { NORMAL };
    let d = Dirs::fresh(&args.out)?;
    instrument_cases(&d)?;
    eprintln!("[2/5] compiling with gcc against the p5 runtime");
    let with_service = scenarios.iter().any(|n| n.starts_with(blackbox::BASE));
    let exes = build(&d.src, &d.instr, &d.bin, with_service)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let notes = record_all(&rt, args, &scenarios, &exes, &d, &sizes)?;
    let sched = is_root();
    let (instr, store) = (d.instr, d.store);

    eprintln!("[4/5] merging into SQLite (clock sync, message matching, source manifest)");
    let mut manifests = vec![instr.clone()];
    manifests.extend(exes.service.as_ref().map(|s| s.manifest().to_path_buf()));
    let merge = p5_merge::MergeOptions {
        manifests,
        ..p5_merge::MergeOptions::new(&store)
    };
    let db = merge.db_url();
    let merged = rt.block_on(p5_merge::merge_store(&merge))?;
    for s in &merged {
        if s.violations > 0 || s.matched == 0 {
            eprintln!(
                "      warning: session {}: {} matched messages, {} causality violations",
                s.name, s.matched, s.violations
            );
        }
    }

    eprintln!("[5/5] what the sessions show");
    let findings = rt.block_on(findings(&db))?;
    let mut text = String::new();
    for f in &findings {
        let note = notes.get(f.name.as_str()).map_or("", |s| s.as_str());
        render_finding(&mut text, f, note);
    }
    if let Some(c) = stream_comparison(&findings, &notes) {
        text.push_str(&c);
    }
    let black = if [blackbox::BASE, blackbox::DELAYED]
        .iter()
        .all(|n| scenarios.contains(n))
    {
        let r = blackbox::analyze(&rt, &db, &merged, &sizes)?;
        blackbox::render(&r, &mut text);
        Some(r)
    } else {
        None
    };
    if sched && !args.no_agent && findings.iter().any(|f| f.sched_rows == 0) {
        let _ = writeln!(
            text,
            "\nnote: sessions without scheduling rows were not followed by the host agent's OS \
             monitor, which follows each instrumented process within milliseconds of its start \
             (its messages above say why not: tracefs missing or unusable?)."
        );
    }
    let took = started.elapsed().as_secs_f64();
    let _ = writeln!(text, "demo took {took:.1} s");
    let _ = writeln!(text, "database: {db}   (schema: docs/schema.md)");
    let _ = writeln!(
        text,
        "store:    {}   (p5 inspect {})",
        store.display(),
        store.display()
    );
    if args.json {
        eprint!("{text}");
        let mut v = findings_json(&findings);
        if let Some(r) = &black {
            v["blackbox"] = blackbox::json(r);
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{text}");
    }
    drop(rt);
    // With --json, stdout holds only the JSON document.
    let say = |line: String| {
        if args.json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    // The viewer opens on the black-box comparison when there is one.
    let hash = black
        .as_ref()
        .and_then(blackbox::Report::compare_hash)
        .map(|h| format!("#{h}"))
        .unwrap_or_default();
    serve(args, db, instr, &hash, &say)
}
