//! `p5 demo`: builds the bundled sample — `pingpong`, a multi-threaded TCP client/server in C,
//! instrumented by hand with the runtime's C ABI — records one run of it with an in-process log
//! server, prints a summary of the recorded session (processes, threads, events per sensor,
//! clock-offset samples), and merges it into SQLite (`p5 merge`: clock sync, message
//! matching). Later stages (instrumenter, web) extend this command.

use crate::runtime_lib;
use anyhow::{Context as _, bail};
use p5_logserver::inspect::{ProcessSummary, SessionSummary};
use p5_logserver::{Server, ServerConfig};
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The sample's source, embedded so the demo runs from any directory.
const PINGPONG_C: &str = include_str!("../../samples/pingpong/pingpong.c");
/// Session name the demo records under.
pub const SESSION: &str = "pingpong";

/// The sample's sensor ids and the names of the functions and call sites they mark (the
/// instrumenter will write such a manifest itself).
const SENSOR_NAMES: &[(u64, &str)] = &[
    (0x5050000000000001, "main"),
    (0x5050000000000002, "serve"),
    (0x5050000000000003, "handle"),
    (0x5050000000000004, "compute"),
    (0x5050000000000005, "client"),
    (0x5050000000000006, "request"),
    (0x5050000000000101, "accept (serve)"),
    (0x5050000000000102, "recv request (handle)"),
    (0x5050000000000103, "send reply (handle)"),
    (0x5050000000000104, "connect (client)"),
    (0x5050000000000105, "send request (client)"),
    (0x5050000000000106, "recv reply (client)"),
    (0x5050000000000107, "close"),
    (0x5050000000000201, "replies served (counter)"),
];

/// Options of `p5 demo`.
#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    /// Directory for the built sample and the session store (replaced on each run).
    #[arg(long, default_value = "p5-demo-out")]
    pub out: PathBuf,
    /// Client threads (= server connections).
    #[arg(long, default_value_t = 4)]
    pub threads: u32,
    /// Requests per client thread.
    #[arg(long, default_value_t = 2000)]
    pub requests: u32,
    /// Print the store summary as JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs the demo.
pub fn run(args: &DemoArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let src = args.out.join("src");
    let bin = args.out.join("bin");
    let store = args.out.join("store");
    for d in [&src, &bin] {
        std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
    }
    if store.exists() {
        std::fs::remove_dir_all(&store)
            .with_context(|| format!("cannot clear the previous store {}", store.display()))?;
    }
    std::fs::write(src.join("pingpong.c"), PINGPONG_C)?;
    std::fs::write(src.join("p5.h"), runtime_lib::HEADER)?;

    eprintln!("[1/5] building the sample (gcc, linked with the p5 runtime)");
    let lib = runtime_lib::static_lib()?;
    let exe = bin.join("pingpong");
    runtime_lib::compile_c(&[&src.join("pingpong.c")], &src, &exe, &lib)?;

    eprintln!("[2/5] starting a log server");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let config = ServerConfig {
        listen: "127.0.0.1:0".into(),
        store: store.clone(),
        ..ServerConfig::default()
    };
    let server = rt.block_on(Server::bind(config))?;
    let addr = server.local_addr();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let serving = rt.spawn(server.run(async move {
        let _ = stop_rx.await;
    }));

    eprintln!(
        "[3/5] running pingpong: {} client threads x {} requests against log server {addr}",
        args.threads, args.requests
    );
    let recorded = record(&exe, &addr.to_string(), args);
    let _ = stop_tx.send(());
    let served = rt.block_on(serving).context("log server task failed")?;
    recorded?;
    served?;

    eprintln!("[4/5] reading the session store");
    let summary = p5_logserver::inspect::inspect(&store)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
        return Ok(());
    }
    let session = summary
        .sessions
        .iter()
        .find(|s| s.name == SESSION)
        .with_context(|| format!("session {SESSION:?} missing from {}", store.display()))?;
    print_summary(session, &store, started.elapsed());

    eprintln!("[5/5] merging into SQLite (clock sync, message matching)");
    let merge = p5_merge::MergeArgs {
        quiet: true,
        ..p5_merge::MergeArgs::new(&store)
    };
    let merged = rt.block_on(p5_merge::merge_store(&merge))?;
    println!();
    for s in &merged {
        print!("{}", p5_merge::render(s));
    }
    let db = format!("sqlite:{}", store.join("p5.sqlite").display());
    println!("database: {db}  (schema: docs/schema.md)");
    println!("view it:  p5 web --db {db}   (then open http://127.0.0.1:8055/)");
    Ok(())
}

/// Runs the server and the client processes of the sample to completion.
fn record(exe: &Path, logserver: &str, args: &DemoArgs) -> anyhow::Result<()> {
    let env = [("P5_LOGSERVER", logserver), ("P5_SESSION", SESSION)];
    let mut server = Command::new(exe)
        .args(["server", "0", &args.threads.to_string()])
        .envs(env)
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot start the pingpong server")?;
    let port = match first_line_port(&mut server) {
        Ok(p) => p,
        Err(e) => {
            let _ = server.kill();
            let _ = server.wait();
            return Err(e);
        }
    };
    let client = Command::new(exe)
        .args([
            "client",
            "127.0.0.1",
            &port.to_string(),
            &args.threads.to_string(),
            &args.requests.to_string(),
        ])
        .envs(env)
        .stdout(Stdio::null())
        .status()
        .context("cannot run the pingpong client")?;
    let server_status = wait_bounded(&mut server, Duration::from_secs(60))?;
    if !client.success() || !server_status.success() {
        bail!("pingpong failed: client {client}, server {server_status}");
    }
    Ok(())
}

fn first_line_port(child: &mut Child) -> anyhow::Result<u16> {
    let out = child.stdout.take().context("no stdout from the server")?;
    let mut reader = BufReader::new(out);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    // Keep draining so later output can never block or kill the server with SIGPIPE.
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    line.trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .with_context(|| format!("unexpected first line from the pingpong server: {line:?}"))
}

fn wait_bounded(child: &mut Child, limit: Duration) -> anyhow::Result<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait()? {
            return Ok(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            bail!("the pingpong server did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sensor_name(hex: &str) -> String {
    let id = u64::from_str_radix(hex.trim_start_matches("0x"), 16).unwrap_or(0);
    SENSOR_NAMES
        .iter()
        .find(|(s, _)| *s == id)
        .map(|(_, n)| (*n).to_owned())
        .unwrap_or_else(|| hex.to_owned())
}

fn print_summary(s: &SessionSummary, store: &Path, took: Duration) {
    let events: u64 = s.processes.iter().map(|p| p.events).sum();
    let threads: usize = s.processes.iter().map(|p| p.streams.len()).sum();
    println!();
    println!(
        "session {:?}: {} processes, {} threads, {} events, {} bytes in {} segment(s); demo took {:.1} s",
        s.name,
        s.processes.len(),
        threads,
        events,
        s.bytes,
        s.segment_count,
        took.as_secs_f64()
    );
    for p in &s.processes {
        print_process(p);
    }
    println!();
    println!(
        "store: {}   (details: p5 inspect {} [--json])",
        store.display(),
        store.display()
    );
}

fn print_process(p: &ProcessSummary) {
    println!();
    println!(
        "process {} pid {} on {} ({}): {} events, {} threads",
        p.argv.join(" "),
        p.pid,
        p.hostname,
        p.runtime,
        p.events,
        p.streams.len()
    );
    let o = &p.offsets;
    match (o.min_ns, o.median_ns) {
        (Some(min), Some(med)) => println!(
            "  clock offset samples t_s - t_p: {} (data {}, pings {}), min {:.3} ms, median {:.3} ms",
            o.count,
            o.data,
            o.pings,
            min as f64 / 1e6,
            med as f64 / 1e6
        ),
        _ => println!("  clock offset samples: none"),
    }
    println!("  threads:");
    for t in &p.streams {
        println!(
            "    {:>3} tid {:<8} {:<16} {:>9} events {:>4} frames{}{}",
            t.id,
            t.tid,
            t.name,
            t.events,
            t.frames,
            if t.dropped > 0 {
                format!(", {} dropped", t.dropped)
            } else {
                String::new()
            },
            if t.closed { "" } else { ", open" }
        );
    }
    println!("  events per sensor:");
    for sensor in &p.sensors {
        println!(
            "    {:<28} {:>9}",
            sensor_name(&sensor.sensor),
            sensor.events
        );
    }
}
