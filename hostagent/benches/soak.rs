//! Soak benchmark of the two receiving servers under attack:
//! `cargo bench -p p5-hostagent --bench soak -- [--seconds N] [--clients N]`.
//!
//! Runs a real log server (this binary re-run as one, so its memory is its own) and a real
//! `hostagent` relaying for children, each with `--max-connections 256`, for `--seconds`
//! (default 600) in two halves: the first with good clients only, the second with the same
//! good clients beside a mix of attackers against both servers, coming back whenever closed —
//! lying 8 MiB headers (before and after a Hello), slow senders holding all but one byte of an
//! 8 MiB frame (40 at the log server: more than its whole 256 MiB pool; 5 at the agent), two
//! tricklers each, 300 idle sockets each (more than the cap) and garbage. The good clients
//! are p5 runtime processes (this binary re-run as one), half connected to the log server,
//! half relayed by the agent; each records rounds of `--events` events and flushes after each
//! (`flush` waits for the acknowledgements).
//!
//! Reported per half: events acknowledged per second, the slowest and 99th-percentile flush
//! (the time from the last event of a round to its acknowledgement), frames spooled, and the
//! peak RSS of each server (VmHWM, reset between halves); at the end the loss: events
//! recorded by the clients against events durable in the store (it must be zero). The
//! attackers are the tests' own (`logserver/tests/hostile/attack.rs`).

#[path = "../../logserver/tests/hostile/attack.rs"]
#[allow(dead_code)]
mod attack;

use attack::Kind;
use p5_logserver::reader::StoreDir;
use p5_wire::data::EventsFrame;
use p5_wire::frame::FrameType;
use p5_wire::store::StoreRecord;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const OUTER: u64 = 0x50a4_0000_0000_0001;
const INNER: u64 = 0x50a4_0000_0000_0002;

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("__logserver") => return logserver_role(&args),
        Some("__client") => return client_role(&args),
        _ => {}
    }
    let seconds: u64 = arg(&args, "--seconds", 600);
    let clients: usize = arg(&args, "--clients", 4);
    let events: u64 = arg(&args, "--events", 20_000);
    run(seconds.max(10), clients.max(2), events.max(4));
}

/// The log server role: serves a store until SIGTERM.
fn logserver_role(args: &[String]) {
    let config = p5_logserver::ServerConfig {
        listen: "127.0.0.1:0".into(),
        store: args[2].clone().into(),
        max_connections: 256,
        ..p5_logserver::ServerConfig::default()
    };
    if let Err(e) = p5_logserver::run(config, |addr| println!("listening on {addr}")) {
        eprintln!("soak log server: {}", p5_logserver::error::chain(&e));
        std::process::exit(1);
    }
}

/// The good client role: rounds of events for the given seconds, then one line of counters.
fn client_role(args: &[String]) {
    let seconds: u64 = args[2].parse().unwrap_or(10);
    let per_round: u64 = args[3].parse().unwrap_or(20_000);
    p5_runtime::init();
    let guard = Instant::now() + Duration::from_secs(5);
    while p5_runtime::stats().connects == 0 && Instant::now() < guard {
        std::thread::sleep(Duration::from_millis(2));
    }
    let end = Instant::now() + Duration::from_secs(seconds);
    let (mut acked_events, mut rounds) = (0u64, 0u64);
    let mut flush_us = Vec::new();
    while Instant::now() < end {
        for _ in 0..per_round / 4 {
            let _outer = p5_runtime::scope(OUTER);
            p5_runtime::enter(INNER);
            p5_runtime::exit(INNER);
        }
        let t = Instant::now();
        let ok = p5_runtime::flush();
        flush_us.push(t.elapsed().as_micros() as u64);
        rounds += 1;
        if ok && p5_runtime::stats().frames_spooled == 0 {
            acked_events += per_round / 4 * 4;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    p5_runtime::shutdown();
    let s = p5_runtime::stats();
    flush_us.sort_unstable();
    let p99 = flush_us[(flush_us.len() * 99 / 100).min(flush_us.len().saturating_sub(1))];
    println!(
        "soak-client events={} acked_events={acked_events} rounds={rounds} frames={} acked={} \
         spooled={} lost={} disconnects={} max_flush_us={} p99_flush_us={p99}",
        s.events,
        s.frames,
        s.frames_acked,
        s.frames_spooled,
        s.frames_lost,
        s.disconnects,
        flush_us.last().copied().unwrap_or(0)
    );
}

/// A child that printed `listening on ADDR` first.
fn listening(mut child: Child) -> (Child, String) {
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read the address");
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("no address: {line:?}"))
        .to_owned();
    (child, addr)
}

fn status_kb(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Resets a process's peak RSS (VmHWM) to its current RSS (needs the right to write
/// `/proc/PID/clear_refs`, e.g. root); false if it could not.
fn reset_peak(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

/// Counters summed over the good clients of one half.
#[derive(Debug, Default)]
struct Half {
    events: u64,
    acked_events: u64,
    frames: u64,
    acked: u64,
    spooled: u64,
    lost: u64,
    disconnects: u64,
    max_flush_us: u64,
    p99_flush_us: u64,
    clients: usize,
}

impl Half {
    fn add(&mut self, line: &str) {
        let Some((_, fields)) = line.split_once("soak-client ") else {
            return;
        };
        let kv: BTreeMap<&str, u64> = fields
            .split_whitespace()
            .filter_map(|f| f.split_once('='))
            .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
            .collect();
        let g = |k: &str| kv.get(k).copied().unwrap_or(0);
        self.events += g("events");
        self.acked_events += g("acked_events");
        self.frames += g("frames");
        self.acked += g("acked");
        self.spooled += g("spooled");
        self.lost += g("lost");
        self.disconnects += g("disconnects");
        self.max_flush_us = self.max_flush_us.max(g("max_flush_us"));
        self.p99_flush_us = self.p99_flush_us.max(g("p99_flush_us"));
        self.clients += 1;
    }
}

/// Runs `n` good clients for `seconds`, half to `direct`, half through `relay`.
fn good_clients(
    dir: &Path,
    direct: &str,
    relay: &str,
    n: usize,
    seconds: u64,
    events: u64,
    tag: &str,
) -> Half {
    let exe = std::env::current_exe().expect("bench binary");
    let children: Vec<Child> = (0..n)
        .map(|i| {
            let (addr, via) = if i % 2 == 0 {
                (direct, "direct")
            } else {
                (relay, "relay")
            };
            Command::new(&exe)
                .args(["__client", &seconds.to_string(), &events.to_string()])
                .env("P5_LOGSERVER", addr)
                .env("P5_SESSION", format!("soak-{tag}-{via}-{i}"))
                .env("P5_DIR", dir.join("client-spool"))
                .env("P5_THROTTLE", "off")
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("start a good client")
        })
        .collect();
    let mut half = Half::default();
    for mut c in children {
        let mut out = String::new();
        if let Some(mut o) = c.stdout.take() {
            let _ = o.read_to_string(&mut out);
        }
        let _ = c.wait();
        for l in out.lines() {
            if std::env::var_os("SOAK_DEBUG").is_some() {
                eprintln!("{l}");
            }
            half.add(l);
        }
    }
    half
}

/// Events durable in the store in the good clients' sessions (`soak-calm-*`, `soak-storm-*`).
fn durable_events(store: &Path) -> u64 {
    let mut n = 0;
    for s in StoreDir::open(store)
        .expect("store")
        .sessions()
        .expect("sessions")
    {
        if !(s.name.starts_with("soak-calm-") || s.name.starts_with("soak-storm-")) {
            continue;
        }
        let mut recs = s.records().expect("records");
        while recs.advance().expect("read") {
            if let Some(r) = recs.record()
                && let StoreRecord::Data { ty, body, .. } = r.record
                && ty == FrameType::Events as u8
                && let Ok(e) = EventsFrame::parse(body).and_then(|f| f.validate())
            {
                n += e as u64;
            }
        }
        if std::env::var_os("SOAK_DEBUG").is_some() {
            eprintln!("session {}: {n} cumulative", s.name);
        }
    }
    n
}

fn attacks(addr: &str, partial: usize) -> Vec<attack::Attack> {
    attack::mix(
        addr,
        &[
            (Kind::LyingHeader { hello: true }, 16),
            (Kind::LyingHeader { hello: false }, 16),
            (Kind::PartialFrame, partial),
            (Kind::Trickle, 2),
            (Kind::Idle { hello: false }, 280),
            (Kind::Idle { hello: true }, 20),
            (Kind::Garbage, 8),
        ],
        "soak-attack",
    )
}

fn report(what: &str, h: &Half, seconds: u64, ls_peak: u64, agent_peak: u64) {
    println!(
        "{what:<16} {:>5} clients  {:>12.0} events acked/s  flush max {:>7.1} ms, p99 {:>6.1} ms  \
         frames {}/{} acked, {} spooled, {} lost, {} reconnects  peak RSS log server {:.1} MB, agent {:.1} MB",
        h.clients,
        h.acked_events as f64 / seconds as f64,
        h.max_flush_us as f64 / 1e3,
        h.p99_flush_us as f64 / 1e3,
        h.acked,
        h.frames,
        h.spooled,
        h.lost,
        h.disconnects,
        ls_peak as f64 / 1024.0,
        agent_peak as f64 / 1024.0,
    );
}

fn run(seconds: u64, clients: usize, events: u64) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("store");
    let exe = std::env::current_exe().expect("bench binary");
    let (mut ls, ls_addr) = listening(
        Command::new(&exe)
            .args(["__logserver", store.to_str().expect("utf-8 path")])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the log server"),
    );
    let (mut agent, agent_addr) = listening(
        Command::new(env!("CARGO_BIN_EXE_hostagent"))
            .args(["--session", "soak-agent", "--logserver", &ls_addr])
            .args(["--listen", "127.0.0.1:0", "--max-connections", "256"])
            .arg("--spool-dir")
            .arg(dir.path().join("agent-spool"))
            .env("RUST_LOG", "off")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the agent"),
    );
    let half = seconds / 2;
    println!(
        "soak: {seconds} s ({half} s without attackers, then {half} s with), {clients} good \
         clients (half relayed), {events} events per round; load {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    let peaks_resettable = reset_peak(ls.id()) && reset_peak(agent.id());
    let calm = good_clients(
        dir.path(),
        &ls_addr,
        &agent_addr,
        clients,
        half,
        events,
        "calm",
    );
    let calm_peaks = (
        status_kb(ls.id(), "VmHWM:"),
        status_kb(agent.id(), "VmHWM:"),
    );
    report("without attackers", &calm, half, calm_peaks.0, calm_peaks.1);
    if peaks_resettable {
        reset_peak(ls.id());
        reset_peak(agent.id());
    }
    let mut hostile = attacks(&ls_addr, 40);
    hostile.extend(attacks(&agent_addr, 5));
    let opened = || {
        hostile
            .iter()
            .map(|a| a.connections.load(std::sync::atomic::Ordering::Relaxed))
            .sum::<u64>()
    };
    let storm = good_clients(
        dir.path(),
        &ls_addr,
        &agent_addr,
        clients,
        half,
        events,
        "storm",
    );
    let storm_peaks = (
        status_kb(ls.id(), "VmHWM:"),
        status_kb(agent.id(), "VmHWM:"),
    );
    let attacker_connections = opened();
    drop(hostile);
    report("with attackers", &storm, half, storm_peaks.0, storm_peaks.1);
    println!("attackers opened {attacker_connections} connections in {half} s");
    if !peaks_resettable {
        println!("(peak RSS could not be reset between halves: the second is the run's peak)");
    }
    // SAFETY: signalling our own children.
    unsafe {
        libc::kill(agent.id() as i32, libc::SIGTERM);
        let _ = agent.wait();
        libc::kill(ls.id() as i32, libc::SIGTERM);
    }
    let _ = ls.wait();
    let recorded = calm.events + storm.events;
    let durable = durable_events(&store);
    println!(
        "loss: {recorded} events recorded by the good clients, {durable} durable in the store, \
         {} missing ({} frames spooled by clients)",
        recorded.saturating_sub(durable),
        calm.spooled + storm.spooled
    );
    println!(
        "load after: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
}
