//! The demo's steps around the scenarios: the case studies' sources written and instrumented,
//! built, every scenario recorded with a host agent beside it, and the viewer served.

use super::scenarios::{Env, Sizes, is_root, run_scenario};
use super::{DemoArgs, Dirs, blackbox};
use anyhow::Context as _;
use p5_logserver::LocalServer;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

pub(super) const CASCADE_C: &str = include_str!("../../../samples/cascade/cascade.c");
pub(super) const STREAM_C: &str = include_str!("../../../samples/stream/stream.c");
pub(super) const CRACKER_C: &str = include_str!("../../../samples/cracker/cracker.c");

/// Step 1: the case studies' sources written and instrumented.
pub(super) fn instrument_cases(d: &Dirs) -> anyhow::Result<()> {
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
pub(super) fn record_all<'a>(
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

/// Starts a host agent for session `name` (with the OS monitor when `sched`) and gives it a
/// moment to connect and take its first sample; `None` (said why) if it cannot start.
pub(super) fn start_agent(addr: &str, name: &str, sched: bool, store: &Path) -> Option<Child> {
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
pub(super) fn build(
    src: &Path,
    instr: &Path,
    bin: &Path,
    with_service: bool,
) -> anyhow::Result<Exes> {
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
pub(super) fn serve(
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
pub(super) struct Exes {
    pub(super) cascade: PathBuf,
    pub(super) stream: PathBuf,
    pub(super) cpw: PathBuf,
    /// The black-box service, when a black-box scenario runs.
    pub(super) service: Option<blackbox::Service>,
}
