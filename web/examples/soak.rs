//! Soak benchmark of the viewer: runs `p5 web` (this program re-run as its server, under its
//! own descriptor limit) for `--seconds` (default 600) while two real clients ask for the
//! session list, rows, sensors, Gantt, messages and statistics one after the other, each on a
//! new connection; after a quiet fifth the attacks of issue 46 take turns (600 idle sockets,
//! 300 trickling request bodies, 300 pipeliners that never read, 3,000 re-opened sockets, all
//! of them at once), then a quiet fifth again. It prints the request latency percentiles of
//! each phase, the requests that failed (no 200 within 10 s), the attackers' connections, and
//! the server's peak RSS; the load (`/proc/loadavg`) before and after.
//!
//! ```sh
//! cargo run --release -p p5-web --example soak -- --seconds 120
//! cargo run --release -p p5-web --example soak -- --db sqlite:/tmp/big.db --nofile 300 --token s3cret
//! ```

#[path = "../tests/fixture/mod.rs"]
#[allow(unused_macros)]
mod fixture;
#[path = "../tests/peers/mod.rs"]
mod peers;

use clap::Parser;
use peers::{Attack, Kind, Server};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Parser)]
struct Args {
    /// Length of the whole run.
    #[arg(long, default_value_t = 600)]
    seconds: u64,
    /// Database to serve (default: the test fixture, written to a temporary directory).
    #[arg(long)]
    db: Option<String>,
    /// Descriptor limit of the server (soft and hard).
    #[arg(long, default_value_t = 1024)]
    nofile: u64,
    /// Run the server with this access token.
    #[arg(long)]
    token: Option<String>,
    /// Internal: be the server.
    #[arg(long, hide = true)]
    serve_child: bool,
}

/// The phases: a name and the attacks running in it.
fn phases() -> Vec<(&'static str, Vec<(Kind, usize)>)> {
    vec![
        ("quiet", vec![]),
        ("600 idle", vec![(Kind::Idle, 600)]),
        ("300 trickling bodies", vec![(Kind::SlowBody, 300)]),
        ("300 pipeliners", vec![(Kind::Pipeline, 300)]),
        ("3000 re-opened", vec![(Kind::Idle, 3000)]),
        (
            "all at once",
            vec![
                (Kind::Idle, 300),
                (Kind::SlowBody, 150),
                (Kind::Pipeline, 150),
                (Kind::Churn(Duration::from_secs(2)), 1000),
            ],
        ),
        ("quiet again", vec![]),
    ]
}

fn main() {
    let args = Args::parse();
    if args.serve_child {
        serve(&args);
        return;
    }
    peers::raise_nofile();
    let dir = tempfile::tempdir().expect("temporary directory");
    let db = args.db.clone().unwrap_or_else(|| {
        let path = dir.path().join("trace.db");
        tokio::runtime::Runtime::new().unwrap().block_on(async {
            let pool = fixture::create(&path).await;
            fixture::small(&pool).await;
            fixture::analyses(&pool).await;
            fixture::overview(&pool).await;
            pool.close().await;
        });
        format!("sqlite:{}", path.display())
    });
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--serve-child", "--nofile", &args.nofile.to_string()])
        .args(["--db", &db]);
    if let Some(t) = &args.token {
        cmd.args(["--token", t]);
    }
    let server = Server::spawn(cmd);
    println!("load before: {}", loadavg());
    println!(
        "p5 web on {} (--nofile {}, token: {}), {} s",
        server.addr,
        args.nofile,
        args.token.is_some(),
        args.seconds
    );
    run(&server, &args);
    println!("load after: {}", loadavg());
}

/// The server: `p5 web` itself under the descriptor limit.
fn serve(args: &Args) {
    peers::limit_nofile(args.nofile);
    // P5_LOG=p5_web=debug P5_LOG_FILE=PATH: the server's log, for looking into a failure.
    if let (Ok(filter), Ok(path)) = (std::env::var("P5_LOG"), std::env::var("P5_LOG_FILE")) {
        let file = std::fs::File::create(path).expect("log file");
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::sync::Mutex::new(file))
            .with_ansi(false)
            .init();
    }
    let web = p5_web::WebOptions {
        db: args.db.clone().expect("--db"),
        listen: "127.0.0.1:0".parse().unwrap(),
        token: args.token.clone(),
        select_dir: None,
        cache_dir: None,
        no_cache: true,
    };
    if let Err(e) = p5_web::run(&web, |url| eprintln!("p5 web: {url}")) {
        eprintln!("p5 web: {e}");
        std::process::exit(1);
    }
}

/// One request's outcome: phase, latency, answered.
type Sample = (usize, Duration, bool);

fn run(server: &Server, args: &Args) {
    let phases = phases();
    let quiet = args.seconds / 5;
    let attacked = (args.seconds - 2 * quiet) / (phases.len() as u64 - 2);
    let phase = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let samples = Arc::new(Mutex::new(Vec::<Sample>::new()));
    let clients: Vec<_> = (0..2)
        .map(|i| {
            let (phase, stop, samples) = (phase.clone(), stop.clone(), samples.clone());
            let (addr, token) = (server.addr, args.token.clone());
            std::thread::spawn(move || client(i, addr, token, &phase, &stop, &samples))
        })
        .collect();
    let rss = Arc::new(Mutex::new(0u64));
    let sampler = {
        let (stop, rss, pid) = (stop.clone(), rss.clone(), server.pid());
        std::thread::spawn(move || {
            while !stop.load(Relaxed) {
                let now = status_kib(pid, "VmRSS:");
                let mut peak = rss.lock().unwrap();
                *peak = (*peak).max(now);
                drop(peak);
                std::thread::sleep(Duration::from_millis(500));
            }
        })
    };
    let mut connects = Vec::new();
    for (i, (name, attacks)) in phases.iter().enumerate() {
        let secs = if attacks.is_empty() { quiet } else { attacked };
        phase.store(i, Relaxed);
        let running: Vec<Attack> = attacks
            .iter()
            .map(|&(kind, n)| Attack::start(server.addr, kind, n))
            .collect();
        std::thread::sleep(Duration::from_secs(secs));
        connects.push(running.iter().map(Attack::connects).sum::<u64>());
        eprintln!("phase {name} done");
    }
    stop.store(true, Relaxed);
    for c in clients {
        let _ = c.join();
    }
    let _ = sampler.join();
    let hwm = status_kib(server.pid(), "VmHWM:");
    report(&phases, &samples.lock().unwrap(), &connects);
    println!(
        "p5 web peak RSS: {:.1} MiB (VmHWM), largest sampled VmRSS {:.1} MiB",
        hwm as f64 / 1024.0,
        *rss.lock().unwrap() as f64 / 1024.0
    );
}

/// A real client: the viewer's requests in turn, each on a new connection.
fn client(
    i: usize,
    addr: std::net::SocketAddr,
    token: Option<String>,
    phase: &AtomicUsize,
    stop: &AtomicBool,
    samples: &Mutex<Vec<Sample>>,
) {
    let routes = [
        "/api/v1/sessions",
        "/api/v1/sessions/1/rows",
        "/api/v1/sessions/1/sensors",
        "/api/v1/sessions/1/gantt?t0=0&t1=40000000&px=1200",
        "/api/v1/sessions/1/messages?t0=0&t1=40000000&limit=2000",
        "/api/v1/sessions/1/stats",
        "/",
    ];
    let auth = token.map_or(String::new(), |t| format!("\r\nAuthorization: Bearer {t}"));
    let mut n = i;
    while !stop.load(Relaxed) {
        let p = phase.load(Relaxed);
        let route = routes[n % routes.len()];
        n += 1;
        let head = format!("GET {route} HTTP/1.1\r\nHost: {addr}{auth}");
        let t = Instant::now();
        let answer = peers::ask(addr, &head);
        let ok = answer.as_ref().is_ok_and(|a| a.status == 200);
        if !ok {
            let why = match answer {
                Ok(a) => format!("{}: {}", a.status, a.body),
                Err(e) => e,
            };
            eprintln!("{route} failed after {:?}: {why}", t.elapsed());
        } else if let Ok(a) = &answer
            && a.took > Duration::from_millis(500)
        {
            eprintln!("{route} took {:?} (port {})", a.took, a.port);
        }
        samples.lock().unwrap().push((p, t.elapsed(), ok));
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn report(phases: &[(&str, Vec<(Kind, usize)>)], samples: &[Sample], connects: &[u64]) {
    println!(
        "{:<22} {:>8} {:>6} {:>9} {:>9} {:>9} {:>9} {:>11}",
        "phase", "requests", "failed", "p50 ms", "p90 ms", "p99 ms", "max ms", "attacks"
    );
    let line = |name: &str, picked: Vec<&Sample>, connects: u64| {
        let mut ms: Vec<f64> = picked.iter().map(|s| s.1.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        let failed = picked.iter().filter(|s| !s.2).count();
        let q = |f: f64| {
            ms.get(((ms.len() as f64 - 1.0) * f).round() as usize)
                .copied()
                .unwrap_or(f64::NAN)
        };
        println!(
            "{name:<22} {:>8} {failed:>6} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {connects:>11}",
            ms.len(),
            q(0.5),
            q(0.9),
            q(0.99),
            q(1.0)
        );
    };
    for (i, (name, _)) in phases.iter().enumerate() {
        line(
            name,
            samples.iter().filter(|s| s.0 == i).collect(),
            connects[i],
        );
    }
    let attacked = |s: &&Sample| !phases[s.0].1.is_empty();
    line(
        "without attackers",
        samples.iter().filter(|s| !attacked(s)).collect(),
        0,
    );
    line(
        "with attackers",
        samples.iter().filter(attacked).collect(),
        connects.iter().sum(),
    );
}

/// A `/proc/PID/status` field in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_owned()
}
