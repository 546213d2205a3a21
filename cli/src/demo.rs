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

use anyhow::{Context as _, bail};
use p5_logserver::LocalServer;
use p5_tracedb::domain::{Runtime, ThreadState};
use p5_wire::event::{NET_RX_SOFTIRQ, NET_TX_SOFTIRQ, SOFTIRQ_BASE};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader, Read as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CASCADE_C: &str = include_str!("../../samples/cascade/cascade.c");
const STREAM_C: &str = include_str!("../../samples/stream/stream.c");
const CRACKER_C: &str = include_str!("../../samples/cracker/cracker.c");

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

/// Problem sizes of one run.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    cascade_requests: u32,
    cascade_work: u32,
    stream_messages: u32,
    stream_size: u32,
    stream_burst: u32,
    stream_gap_us: u32,
    stream_redraw: u32,
    cracker_workers: u32,
    cracker_slow: u32,
    cracker_words: u32,
    cracker_accounts: u32,
    cracker_cost: u32,
    blackbox_requests: u32,
    blackbox_gap_us: u32,
    blackbox_delay_us: u32,
}

const NORMAL: Sizes = Sizes {
    cascade_requests: 2000,
    cascade_work: 20,
    stream_messages: 20_000,
    stream_size: 200,
    stream_burst: 5,
    stream_gap_us: 300,
    stream_redraw: 1000,
    cracker_workers: 4,
    cracker_slow: 3,
    cracker_words: 500,
    cracker_accounts: 24,
    cracker_cost: 40,
    blackbox_requests: 200,
    blackbox_gap_us: 500,
    blackbox_delay_us: 5000,
};

const QUICK: Sizes = Sizes {
    cascade_requests: 150,
    cascade_work: 5,
    stream_messages: 2000,
    stream_size: 200,
    stream_burst: 5,
    stream_gap_us: 300,
    stream_redraw: 1000,
    cracker_workers: 4,
    cracker_slow: 3,
    cracker_words: 200,
    cracker_accounts: 12,
    cracker_cost: 16,
    blackbox_requests: 200,
    blackbox_gap_us: 500,
    blackbox_delay_us: 5000,
};

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

/// Step 1: the case studies' sources written and instrumented.
fn instrument_cases(d: &Dirs) -> anyhow::Result<()> {
    eprintln!(
        "[1/5] instrumenting the case studies with p5-instrument (functions + comm) -> {}",
        d.instr.display()
    );
    for (dir, file, text) in [
        ("cascade", "cascade.c", CASCADE_C),
        ("stream", "stream.c", STREAM_C),
        ("cracker", "cracker.c", CRACKER_C),
    ] {
        std::fs::create_dir_all(d.src.join(dir))?;
        std::fs::write(d.src.join(dir).join(file), text)?;
    }
    let report = p5_instrument::run(&p5_instrument::Options {
        paths: vec![d.src.clone()],
        out: Some(d.instr.clone()),
        ..p5_instrument::Options::default()
    })
    .context("instrumenting the case studies")?;
    for (file, p) in &report.problems {
        eprintln!("      {file}:{}:{}: {}", p.line, p.column, p.message);
    }
    eprintln!(
        "      {} files, {} sensors",
        report.sources,
        report.sensors.len()
    );
    Ok(())
}

/// Step 3: every scenario recorded into the store by a log server in this process (and a host
/// agent per session unless `--no-agent`); returns each scenario's note.
fn record_all<'a>(
    rt: &tokio::runtime::Runtime,
    args: &DemoArgs,
    scenarios: &[&'a str],
    exes: &Exes,
    d: &Dirs,
    sizes: &Sizes,
) -> anyhow::Result<BTreeMap<&'a str, String>> {
    let server = LocalServer::start(rt.handle(), &d.store)?;
    let addr = server.addr().to_string();
    let sched = is_root();
    eprintln!(
        "[3/5] recording {} scenario(s) with log server {addr}{}",
        scenarios.len(),
        if args.no_agent {
            ""
        } else if sched {
            " and a host agent with the OS monitor"
        } else {
            " and a host agent (not root: no kernel scheduling trace)"
        }
    );
    let mut notes = BTreeMap::new();
    let mut recorded = Ok(());
    for &name in scenarios {
        let t = Instant::now();
        let env = Env {
            logserver: &addr,
            session: name,
            work: &d.work.join(name),
        };
        let agent = (!args.no_agent)
            .then(|| start_agent(&addr, name, sched, &d.store))
            .flatten();
        let r = run_scenario(name, exes, &env, sizes);
        if let Some(mut a) = agent
            && !crate::agent::stop(&mut a, Duration::from_secs(15))
        {
            eprintln!("      the host agent did not stop in time; killed it");
        }
        match r {
            Ok(note) => {
                eprintln!(
                    "      {name:<16} {:>6.2} s  {note}",
                    t.elapsed().as_secs_f64()
                );
                notes.insert(name, note);
            }
            Err(e) => {
                recorded = Err(e.context(format!("scenario {name}")));
                break;
            }
        }
    }
    let served = server.stop(rt.handle());
    recorded?;
    served?;
    Ok(notes)
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

/// Starts a host agent for session `name` (with the OS monitor when `sched`) and gives it a
/// moment to connect and take its first sample; `None` (said why) if it cannot start.
fn start_agent(addr: &str, name: &str, sched: bool, store: &Path) -> Option<Child> {
    let spool_dir = store.join(".agent-spool");
    let options = crate::agent::AgentOptions {
        logserver: addr,
        session: name,
        interval: "50ms",
        pids: &[],
        sched,
        spool_dir: &spool_dir,
    };
    match crate::agent::spawn(&options) {
        Ok(a) => {
            // Wait until it handles SIGTERM, which it then answers by flushing (on a loaded
            // machine it may take seconds to start, and a short scenario can end before:
            // stopped earlier, it would die with nothing sent); then let it connect and take
            // its first sample before the programs start.
            if !crate::agent::wait_started(&a, Duration::from_secs(10)) {
                eprintln!("      the host agent did not start in 10 s");
            }
            std::thread::sleep(Duration::from_millis(250));
            Some(a)
        }
        Err(e) => {
            eprintln!("      no host agent: {e:#}");
            None
        }
    }
}

/// Compiles the instrumented case studies against the runtime's static library and, when
/// `with_service`, the black-box service with plain `cc`.
fn build(src: &Path, instr: &Path, bin: &Path, with_service: bool) -> anyhow::Result<Exes> {
    let lib = p5_instrument::runtime::static_lib()?;
    let include = instr.join(p5_instrument::runtime::INCLUDE_DIR);
    let mut exes = Exes {
        cascade: bin.join("cascade"),
        stream: bin.join("stream"),
        cpw: bin.join("cpw"),
        service: None,
    };
    p5_instrument::runtime::compile_c(
        &[&instr.join("cascade/cascade.c")],
        &include,
        &exes.cascade,
        &lib,
    )?;
    p5_instrument::runtime::compile_c(
        &[&instr.join("stream/stream.c")],
        &include,
        &exes.stream,
        &lib,
    )?;
    p5_instrument::runtime::compile_c(
        &[&instr.join("cracker/cracker.c")],
        &include,
        &exes.cpw,
        &lib,
    )?;
    // One binary: it is cpw or cow by the name it runs under.
    std::fs::hard_link(&exes.cpw, bin.join("cow"))
        .or_else(|_| std::fs::copy(&exes.cpw, bin.join("cow")).map(|_| ()))
        .context("cannot create bin/cow")?;
    if with_service {
        eprintln!("      the black-box service with plain cc (no p5; recorded with --preload)");
        // The call-name manifest goes beside the binaries (both replaced on each run).
        exes.service = Some(blackbox::Service::build(src, bin, bin)?);
    }
    Ok(exes)
}

/// The demo's last step: serves the viewer (unless `--no-serve`) and says where, `hash`
/// appended.
fn serve(
    args: &DemoArgs,
    db: String,
    instr: PathBuf,
    hash: &str,
    say: &dyn Fn(String),
) -> anyhow::Result<()> {
    if args.no_serve {
        say(format!(
            "view it:  p5 web --db {db} --select-dir {}   (then open http://127.0.0.1:8055/{hash})",
            instr.display()
        ));
        return Ok(());
    }
    let mut listen = args.listen;
    if std::net::TcpListener::bind(listen).is_err() && listen.port() != 0 {
        // Busy (another viewer?): take any free port rather than fail after all that work.
        eprintln!("{listen} is in use; the viewer takes a free port instead");
        listen.set_port(0);
    }
    if listen.port() != 0 {
        say(format!(
            "serving the viewer on http://{listen}/{hash}  (Ctrl-C to stop)"
        ));
    } else if !hash.is_empty() {
        say(format!(
            "the black-box comparison: the viewer's address below followed by {hash}"
        ));
    }
    Ok(crate::web::serve(&p5_web::WebOptions {
        db,
        listen,
        token: None,
        select_dir: Some(instr),
        cache_dir: None,
        no_cache: true,
    })?)
}

/// The built programs.
#[derive(Debug)]
struct Exes {
    cascade: PathBuf,
    stream: PathBuf,
    cpw: PathBuf,
    /// The black-box service, when a black-box scenario runs.
    service: Option<blackbox::Service>,
}

/// Where and under which session a scenario records.
#[derive(Debug)]
struct Env<'a> {
    logserver: &'a str,
    session: &'a str,
    work: &'a Path,
}

impl Env<'_> {
    /// `exe` started under the name `name` (argv[0]: the program name in the views).
    fn command(&self, exe: &Path, name: &str) -> Command {
        use std::os::unix::process::CommandExt as _;
        let mut c = Command::new(exe);
        c.arg0(name);
        c.env("P5_LOGSERVER", self.logserver)
            .env("P5_SESSION", self.session)
            .env_remove("P5_DISABLE")
            .env_remove("P5_DIR")
            .current_dir(self.work)
            .stdin(Stdio::null());
        c
    }
}

/// Runs one scenario to completion; returns a one-line note of what the programs printed.
fn run_scenario(name: &str, exes: &Exes, env: &Env<'_>, s: &Sizes) -> anyhow::Result<String> {
    std::fs::create_dir_all(env.work)?;
    match name {
        "cascade" => {
            let mut db = AppServer::start(env.command(&exes.cascade, "db").args(["db", "0"]))?;
            let mut shop = AppServer::start(env.command(&exes.cascade, "shop").args([
                "shop",
                "0",
                &db.port.to_string(),
            ]))?;
            let client = env
                .command(&exes.cascade, "client")
                .args(["client", &shop.port.to_string()])
                .args([s.cascade_requests.to_string(), s.cascade_work.to_string()])
                .output()
                .context("cannot run the cascade client")?;
            shop.finish("shop")?;
            db.finish("db")?;
            check(&client, "cascade client")?;
            Ok(last_line(&client.stdout))
        }
        "nagle-on" | "nagle-off" | "small-mss" => {
            let mode = match name {
                "nagle-on" => "nagle",
                "nagle-off" => "nodelay",
                _ => "mss",
            };
            let mut server = AppServer::start(env.command(&exes.stream, "stream-server").args([
                "server".to_owned(),
                "0".to_owned(),
                s.stream_redraw.to_string(),
            ]))?;
            let client = env
                .command(&exes.stream, "stream-client")
                .args(["client", &server.port.to_string()])
                .args([
                    s.stream_messages.to_string(),
                    s.stream_size.to_string(),
                    s.stream_burst.to_string(),
                    s.stream_gap_us.to_string(),
                ])
                .arg(mode)
                .output()
                .context("cannot run the stream client")?;
            server.finish("stream server")?;
            check(&client, "stream client")?;
            Ok(last_line(&client.stdout))
        }
        blackbox::BASE | blackbox::DELAYED => exes
            .service
            .as_ref()
            .context("the black-box service was not built")?
            .run(env, s, name == blackbox::DELAYED),
        _ => {
            let mode = name.trim_start_matches("cracker-");
            let out = env
                .command(&exes.cpw, &exes.cpw.to_string_lossy())
                .arg(mode)
                .args(
                    [
                        s.cracker_workers,
                        s.cracker_slow,
                        s.cracker_words,
                        s.cracker_accounts,
                        s.cracker_cost,
                    ]
                    .map(|v| v.to_string()),
                )
                .output()
                .context("cannot run cpw")?;
            check(&out, "cpw")?;
            Ok(last_line(&out.stdout))
        }
    }
}

fn check(out: &std::process::Output, what: &str) -> anyhow::Result<()> {
    if !out.status.success() {
        bail!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn last_line(b: &[u8]) -> String {
    String::from_utf8_lossy(b)
        .lines()
        .last()
        .unwrap_or("")
        .trim()
        .to_owned()
}

/// A server process of a scenario that printed `listening on HOST:PORT` first.
struct AppServer {
    child: Child,
    port: u16,
}

impl AppServer {
    fn start(cmd: &mut Command) -> anyhow::Result<AppServer> {
        let mut child = cmd
            .stdout(Stdio::piped())
            .spawn()
            .context("cannot start a server")?;
        let out = child.stdout.take().context("no stdout from the server")?;
        let mut reader = BufReader::new(out);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        // Keep draining so later output never blocks the server.
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = reader.read_to_end(&mut sink);
        });
        let port = line.trim().rsplit(':').next().and_then(|p| p.parse().ok());
        match port {
            Some(port) => Ok(AppServer { child, port }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                bail!("unexpected first line from a server: {line:?}")
            }
        }
    }

    fn finish(&mut self, what: &str) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(s) = self.child.try_wait()? {
                if !s.success() {
                    bail!("{what} failed ({s})");
                }
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                bail!("{what} did not exit within a minute");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for AppServer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

// ---- findings: the numbers behind the paper's figures, from the merged database ----

const STATES: &[&str] = p5_tracedb::domain::ThreadState::NAMES;

/// One application thread's time per state.
#[derive(Debug, Clone, Default)]
pub struct ThreadStates {
    /// Program name.
    pub program: String,
    /// The process's role: its first argument (`db`, `shop`, `client`; a worker's slowness).
    pub role: String,
    /// Process id (OS).
    pub pid: i64,
    /// Thread row id.
    pub thread: i64,
    /// ns per state name.
    pub ns: BTreeMap<&'static str, i64>,
}

impl ThreadStates {
    /// Total recorded time.
    pub fn total(&self) -> i64 {
        self.ns.values().sum()
    }

    /// Calculating time over calculating plus receiving and waiting (in poll/select/epoll):
    /// how busy a worker was, leaving out sends (on a loaded machine a send that wakes the peer
    /// often loses the CPU inside the call, which stretches it from microseconds to a time
    /// slice). Waiting never counts as busy.
    pub fn busy(&self) -> f64 {
        let ns = |s: ThreadState| self.ns.get(s.name()).copied().unwrap_or(0);
        let c = ns(ThreadState::Calculating);
        let idle = ns(ThreadState::Receiving) + ns(ThreadState::Waiting);
        if c + idle <= 0 {
            return 0.0;
        }
        c as f64 / (c + idle) as f64
    }

    /// Share of `state` in the thread's recorded time.
    pub fn share(&self, state: &str) -> f64 {
        let t = self.total();
        if t <= 0 {
            return 0.0;
        }
        self.ns.get(state).copied().unwrap_or(0) as f64 / t as f64
    }
}

/// What one session shows.
#[derive(Debug, Clone, Default)]
pub struct Finding {
    /// Session name.
    pub name: String,
    /// Processes (program names, sorted).
    pub programs: Vec<String>,
    /// Span of the application processes, ns.
    pub span_ns: i64,
    /// Matched messages.
    pub matched: i64,
    /// Messages received before they were sent.
    pub violations: i64,
    /// Message latency (receive end − send start), ns: median and 99th percentile.
    pub latency_ns: Option<(i64, i64)>,
    /// Time per state of each application thread.
    pub threads: Vec<ThreadStates>,
    /// Total time and calls per function (all threads).
    pub functions: BTreeMap<String, (i64, u64)>,
    /// Rows of `sched` and `irq`.
    pub sched_rows: usize,
    /// IRQ rows (NIC interrupts and network softirqs).
    pub irq_rows: usize,
    /// Of them, NET_RX and NET_TX softirqs (the kernel's packet work; on loopback all of it).
    pub net_softirqs: (usize, usize),
    /// Host metric series.
    pub metrics: usize,
}

/// Reads the findings of every session from the merged database.
pub async fn findings(db_url: &str) -> anyhow::Result<Vec<Finding>> {
    use p5_tracedb::read as q;
    let db = q::Reader::open(&p5_tracedb::DbUrl::parse(db_url)?).await?;
    let mut out = Vec::new();
    let sessions = q::sessions(&db).await?;
    for s in sessions {
        let e = |e: p5_tracedb::Error| anyhow::anyhow!("session {}: {e}", s.name);
        let procs = q::processes(&db, s.id).await.map_err(e)?;
        let threads = q::threads(&db, s.id).await.map_err(e)?;
        let states = q::states(&db, s.id, STATES).await.map_err(e)?;
        let msgs = q::messages(&db, s.id).await.map_err(e)?;
        let sensors = q::sensors(&db, s.id).await.map_err(e)?;
        let intervals = q::intervals(&db, s.id).await.map_err(e)?;
        let app: Vec<&q::Process> = procs
            .iter()
            .filter(|p| Runtime::parse(&p.runtime).is_none_or(Runtime::is_program))
            .collect();
        let mut programs: Vec<String> = app.iter().map(|p| p.program.clone()).collect();
        programs.sort();
        let t0 = app.iter().map(|p| p.t_start).min().unwrap_or(0);
        let t1 = app.iter().filter_map(|p| p.t_end).max().unwrap_or(t0);
        let by_thread: HashMap<i64, &q::Thread> = threads.iter().map(|t| (t.id, t)).collect();
        let by_proc: HashMap<i64, &q::Process> = procs.iter().map(|p| (p.id, p)).collect();
        let mut ts: BTreeMap<i64, ThreadStates> = BTreeMap::new();
        for r in &states {
            let Some(t) = by_thread.get(&r.thread) else {
                continue;
            };
            let entry = ts.entry(r.thread).or_insert_with(|| {
                let p = by_proc.get(&t.process_id);
                let argv: Vec<String> = p
                    .and_then(|p| serde_json::from_str(&p.argv).ok())
                    .unwrap_or_default();
                let program = p.map(|p| p.program.clone()).unwrap_or_default();
                let role = match program.as_str() {
                    "cow" => argv.get(2).map(|s| format!("slowness {s}")),
                    _ => argv.get(1).cloned(),
                };
                ThreadStates {
                    program,
                    role: role.unwrap_or_default(),
                    pid: p.map_or(0, |p| p.pid),
                    thread: r.thread,
                    ns: BTreeMap::new(),
                }
            });
            let name = STATES.get(r.state as usize).copied().unwrap_or("other");
            *entry.ns.entry(name).or_insert(0) += (r.t_end - r.t_start).max(0);
        }
        let mut lat: Vec<i64> = msgs
            .iter()
            .map(|m| m.latency_ns())
            .filter(|d| *d >= 0)
            .collect();
        lat.sort_unstable();
        let latency_ns = (!lat.is_empty()).then(|| {
            let pick = |p: f64| lat[((lat.len() - 1) as f64 * p).round() as usize];
            (pick(0.5), pick(0.99))
        });
        let names: HashMap<i64, String> = sensors
            .iter()
            .map(|x| (x.id, x.function.clone().unwrap_or_else(|| x.name.clone())))
            .collect();
        let mut functions: BTreeMap<String, (i64, u64)> = BTreeMap::new();
        for i in &intervals {
            let n = names
                .get(&i.sensor)
                .cloned()
                .unwrap_or_else(|| format!("{:#x}", i.sensor));
            let f = functions.entry(n).or_insert((0, 0));
            f.0 += (i.t_end - i.t_start).max(0);
            f.1 += 1;
        }
        let sched_rows = q::sched(&db, s.id).await.map_err(e)?.len();
        let irqs = q::irqs(&db, s.id).await.map_err(e)?;
        let irq_rows = irqs.len();
        let softirq = |v: u32| {
            let n = i64::from(SOFTIRQ_BASE + v);
            irqs.iter().filter(|r| r.irq == n).count()
        };
        let net_softirqs = (softirq(NET_RX_SOFTIRQ), softirq(NET_TX_SOFTIRQ));
        let metrics = q::host_metrics(&db, s.id).await.map_err(e)?.len();
        out.push(Finding {
            name: s.name.clone(),
            programs,
            span_ns: t1 - t0,
            matched: s.matched,
            violations: s.violations,
            latency_ns,
            threads: ts.into_values().collect(),
            functions,
            sched_rows,
            irq_rows,
            net_softirqs,
            metrics,
        });
    }
    let order = |n: &str| SCENARIOS.iter().position(|(s, _)| *s == n).unwrap_or(99);
    out.sort_by_key(|f| order(&f.name));
    Ok(out)
}

fn ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

/// The §4.2 point in one place: the same messages cost very different numbers of TCP
/// segments (and so receive softirqs) with Nagle's algorithm, with `TCP_NODELAY`, and with
/// a small MSS that splits every message. `None` unless the three stream sessions ran.
fn stream_comparison(findings: &[Finding], notes: &BTreeMap<&str, String>) -> Option<String> {
    const RUNS: [&str; 3] = ["nagle-on", "nagle-off", "small-mss"];
    // The client's last line: "client mss: 2000 messages of 200 bytes, 6000 segments sent, mss 76".
    let number_before = |line: &str, word: &str| -> Option<u64> {
        let words: Vec<&str> = line.split([' ', ',']).filter(|w| !w.is_empty()).collect();
        let i = words.iter().position(|w| *w == word)?;
        words.get(i.checked_sub(1)?)?.parse().ok()
    };
    let mut rows = Vec::new();
    for run in RUNS {
        let note = notes.get(run)?;
        let messages = number_before(note, "messages")?;
        let segments = number_before(note, "segments")?;
        let f = findings.iter().find(|f| f.name == run)?;
        rows.push((run, messages, segments, f.net_softirqs.0));
    }
    let mut o = String::from(
        "
§4.2 compared (the same messages, three socket setups):
",
    );
    for (run, messages, segments, net_rx) in &rows {
        let _ = writeln!(
            o,
            "  {run:<10} {segments:>7} TCP segments for {messages} messages = {:>5.2} per message, {net_rx:>6} NET_RX softirqs",
            *segments as f64 / (*messages).max(1) as f64
        );
    }
    let (on, off, mss) = (rows[0].2.max(1), rows[1].2.max(1), rows[2].2);
    let _ = writeln!(
        o,
        "  Nagle's algorithm packs small writes ({:.1}x fewer segments than TCP_NODELAY); a small \
         MSS splits each message ({:.1}x more segments than TCP_NODELAY, {:.1}x more than Nagle).",
        off as f64 / on as f64,
        mss as f64 / off as f64,
        mss as f64 / on as f64
    );
    Some(o)
}

fn render_finding(o: &mut String, f: &Finding, note: &str) {
    let about = SCENARIOS
        .iter()
        .find(|(n, _)| *n == f.name)
        .map_or("", |(_, d)| *d);
    let _ = writeln!(o);
    let _ = writeln!(o, "session {:<14} {about}", f.name);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for p in &f.programs {
        *counts.entry(p.as_str()).or_insert(0) += 1;
    }
    let procs: Vec<String> = counts
        .iter()
        .map(|(p, n)| {
            if *n > 1 {
                format!("{n} x {p}")
            } else {
                (*p).to_owned()
            }
        })
        .collect();
    let _ = writeln!(
        o,
        "  {} over {:.0} ms; {} messages matched, {} received before sent; host: {} metric series, {} sched rows, {} irq rows",
        procs.join(", "),
        ms(f.span_ns),
        f.matched,
        f.violations,
        f.metrics,
        f.sched_rows,
        f.irq_rows
    );
    if !note.is_empty() {
        let _ = writeln!(o, "  program: {note}");
    }
    if let Some((p50, p99)) = f.latency_ns {
        let _ = writeln!(
            o,
            "  message latency (send start -> receive end): median {:.3} ms, p99 {:.3} ms",
            ms(p50),
            ms(p99)
        );
    }
    match f.name.as_str() {
        "cascade" => {
            for t in &f.threads {
                let _ = writeln!(
                    o,
                    "  {:<8} pid {:<7} calculating {:>5.1} %  sending {:>5.1} %  receiving {:>5.1} %",
                    t.role,
                    t.pid,
                    100.0 * t.share(ThreadState::Calculating.name()),
                    100.0 * t.share(ThreadState::Sending.name()),
                    100.0 * t.share(ThreadState::Receiving.name())
                );
            }
            for func in [
                "request_page",
                "parse_request",
                "lookup_prices",
                "render_page",
            ] {
                if let Some((ns, n)) = f.functions.get(func) {
                    let _ = writeln!(
                        o,
                        "  {func:<14} {n:>6} calls, mean {:.3} ms",
                        ms(*ns) / (*n).max(1) as f64
                    );
                }
            }
        }
        n if n.starts_with("cracker") => render_cracker(o, f),
        _ => {
            if let Some((ns, n)) = f.functions.get("handle_events") {
                let _ = writeln!(
                    o,
                    "  server reads (handle_events): {n}, mean {:.3} ms each",
                    ms(*ns) / (*n).max(1) as f64
                );
            }
            let (rx, tx) = f.net_softirqs;
            let nic = f.irq_rows - rx - tx;
            if f.irq_rows > 0 {
                let _ = writeln!(
                    o,
                    "  beneath it (IRQ row): network softirqs, the kernel's loopback packet work: {rx} \
                     NET_RX ({:.2} per message), {tx} NET_TX (p5's own uploads to the log server \
                     included){}",
                    rx as f64 / f.matched.max(1) as f64,
                    if nic > 0 {
                        format!("; {nic} NIC interrupts")
                    } else {
                        String::new()
                    }
                );
            }
        }
    }
}

/// The cracker sessions' lines: each worker's busy share, the master's threads, compute.
fn render_cracker(o: &mut String, f: &Finding) {
    let busy = |prog: &str| -> Vec<&ThreadStates> {
        f.threads
            .iter()
            .filter(|t| t.program == prog && t.total() > 0)
            .collect()
    };
    let mut cows = busy("cow");
    cows.sort_by(|a, b| a.role.cmp(&b.role).then(a.thread.cmp(&b.thread)));
    let _ = writeln!(
        o,
        "  cow workers: busy = calculating / (calculating + waiting for a job); shares of each worker's time"
    );
    for t in &cows {
        let _ = writeln!(
            o,
            "    cow pid {:<7} {:<11} busy {:>5.1} %   calculating {:>5.1} %  waiting (receiving) {:>5.1} %  sending {:>5.1} %",
            t.pid,
            t.role,
            100.0 * t.busy(),
            100.0 * t.share(ThreadState::Calculating.name()),
            100.0 * t.share(ThreadState::Receiving.name()),
            100.0 * t.share(ThreadState::Sending.name())
        );
    }
    let mean = |v: &dyn Fn(&ThreadStates) -> f64| {
        cows.iter().map(|t| v(t)).sum::<f64>() / cows.len().max(1) as f64
    };
    let _ = writeln!(
        o,
        "    mean                    busy {:>5.1} %   calculating {:>5.1} %  waiting (receiving) {:>5.1} %",
        100.0 * mean(&|t| t.busy()),
        100.0 * mean(&|t| t.share(ThreadState::Calculating.name())),
        100.0 * mean(&|t| t.share(ThreadState::Receiving.name()))
    );
    for cpw in busy("cpw") {
        let _ = writeln!(
            o,
            "  cpw thread {:<4} calculating {:>5.1} %, receiving {:>5.1} %",
            cpw.thread,
            100.0 * cpw.share(ThreadState::Calculating.name()),
            100.0 * cpw.share(ThreadState::Receiving.name())
        );
    }
    let salt = f.functions.get("set_salt").copied().unwrap_or_default();
    let enc = f.functions.get("encrypt_word").copied().unwrap_or_default();
    let _ = writeln!(
        o,
        "  compute: set_salt {} calls {:.0} ms, encrypt_word {} calls {:.0} ms",
        salt.1,
        ms(salt.0),
        enc.1,
        ms(enc.0)
    );
}

fn findings_json(fs: &[Finding]) -> serde_json::Value {
    let v: Vec<serde_json::Value> = fs
        .iter()
        .map(|f| {
            serde_json::json!({
                "name": f.name,
                "programs": f.programs,
                "span_ns": f.span_ns,
                "matched": f.matched,
                "violations": f.violations,
                "latency_p50_ns": f.latency_ns.map(|l| l.0),
                "latency_p99_ns": f.latency_ns.map(|l| l.1),
                "sched_rows": f.sched_rows,
                "irq_rows": f.irq_rows,
                "net_rx_softirqs": f.net_softirqs.0,
                "net_tx_softirqs": f.net_softirqs.1,
                "metrics": f.metrics,
                "threads": f.threads.iter().map(|t| serde_json::json!({
                    "program": t.program,
                    "role": t.role,
                    "pid": t.pid,
                    "thread": t.thread,
                    "ns": t.ns,
                })).collect::<Vec<_>>(),
                "functions": f.functions.iter().map(|(k, (ns, n))| (k.clone(), serde_json::json!({"ns": ns, "calls": n}))).collect::<serde_json::Map<_, _>>(),
            })
        })
        .collect();
    serde_json::json!({ "sessions": v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_is_not_busy() {
        let mut t = ThreadStates::default();
        t.ns.insert("calculating", 100);
        t.ns.insert("receiving", 100);
        assert_eq!(t.busy(), 0.5);
        t.ns.insert("waiting", 200);
        assert_eq!(t.busy(), 0.25);
        assert_eq!(t.share("waiting"), 0.5);
    }
}
