//! Log-server ingest benchmark: events/s into the durable store from 1, 8 and 64 concurrent
//! clients on loopback, against a baseline of the same bytes copied from loopback TCP into a
//! file by a plain tokio copy (no parsing, no validation, one sync at the end).
//!
//! Each client sends a stream open and pre-encoded `Events` frames of 16 Ki realistic events
//! (nested enter/exit with small gaps, ≈ 2.5 B/event), then waits until every frame is
//! acknowledged (durable). The server runs in-process on a runtime with ONE worker thread (the
//! budget is "≥ 20 M events/s on one core"), plus its session writer thread; the clients run on
//! another runtime. Server CPU time is read per thread from /proc (threads `p5ls-*`), so the
//! table also shows events per server CPU-second.
//!
//! Run: `cargo bench -p p5-logserver --bench ingest` (`P5_BENCH_EVENTS` overrides the number of
//! events per configuration, default 96 Mi).

use p5_logserver::{Server, ServerConfig};
use p5_wire::data::{self, DataHeader, StreamOpen};
use p5_wire::event::EventEncoder;
use p5_wire::frame::{self, FrameType};
use p5_wire::hello::{Caps, Hello, Identity};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const EVENTS_PER_FRAME: u32 = 16 * 1024;

/// Sensor ids of a small call tree.
const SENSORS: [u64; 6] = [
    0x9e37_79b9_7f4a_7c15,
    0xbf58_476d_1ce4_e5b9,
    0x94d0_49bb_1331_11eb,
    0x2545_f491_4f6c_dd1d,
    0x1656_67b1_9e37_79f9,
    0x27d4_eb2f_1656_67c5,
];

/// One frame of nested enter/exit events: a loop body (sensor 0) calling 1–3 helpers, one of
/// which sometimes calls a leaf; gaps of tens to hundreds of ns, like an instrumented hot loop.
fn batch(t: &mut u64, rng: &mut u64) -> EventEncoder {
    let mut e = EventEncoder::new();
    let mut next = || {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        *rng
    };
    while e.len() + 8 <= EVENTS_PER_FRAME {
        e.enter(*t, SENSORS[0]);
        *t += 20 + next() % 40;
        for _ in 0..1 + next() % 3 {
            let s = SENSORS[1 + (next() % 3) as usize];
            e.enter(*t, s);
            *t += 30 + next() % 200;
            if next() % 4 == 0 && e.len() + 4 <= EVENTS_PER_FRAME {
                e.enter(*t, SENSORS[4 + (next() % 2) as usize]);
                *t += 50 + next() % 100;
                e.exit(*t, SENSORS[4 + (next() % 2) as usize]);
                *t += 5 + next() % 20;
            }
            e.exit(*t, s);
            *t += 10 + next() % 30;
        }
        e.exit(*t, SENSORS[0]);
        *t += 15 + next() % 50;
    }
    e
}

struct ClientLoad {
    uid: u64,
    hello: Vec<u8>,
    /// Stream open + events frames, concatenated.
    data: Vec<u8>,
    frames: u64,
    events: u64,
}

fn make_loads(clients: usize, total_events: u64) -> Vec<ClientLoad> {
    let frames_per_client = (total_events / EVENTS_PER_FRAME as u64 / clients as u64).max(1);
    (0..clients)
        .map(|c| {
            let uid = 0xbe00_0000 + c as u64;
            let identity = Identity {
                process_uid: uid,
                pid: 1000 + c as u32,
                program: "bench".into(),
                session: "bench".into(),
                ..Identity::default()
            };
            let hello = Hello {
                version: 1,
                caps: Caps::ALL,
                identity,
            };
            let mut h = Vec::new();
            frame::encode(&mut h, FrameType::Hello as u8, &hello.encode_body());
            let mut data = Vec::new();
            let open = StreamOpen {
                header: DataHeader {
                    stream: 0,
                    seq: 0,
                    t_p: 1,
                },
                kind_raw: 1,
                tid: 1,
                name: "main".into(),
            };
            frame::encode(&mut data, FrameType::StreamOpen as u8, &open.encode_body());
            let (mut t, mut rng) = (1_000u64, 0x1234_5678_9abc_def1u64 + c as u64);
            let mut events = 0;
            for seq in 1..=frames_per_client {
                let b = batch(&mut t, &mut rng);
                events += b.len() as u64;
                let header = DataHeader {
                    stream: 0,
                    seq,
                    t_p: t,
                };
                data::encode_events(&mut data, header, 0, &b);
            }
            ClientLoad {
                uid,
                hello: h,
                data,
                frames: frames_per_client + 1,
                events,
            }
        })
        .collect()
}

/// CPU time (ns) of this process's threads whose name starts with `prefix`.
fn thread_cpu_ns(prefix: &str) -> u64 {
    let mut total = 0;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !comm.starts_with(prefix) {
            continue;
        }
        let sched = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
        total += sched
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
    }
    total
}

struct Outcome {
    wall: Duration,
    server_cpu_ns: u64,
    commits: u64,
}

fn client_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("bench-client")
        .enable_all()
        .build()
        .expect("client runtime")
}

async fn run_client(addr: SocketAddr, load: Arc<ClientLoad>, start: Arc<tokio::sync::Barrier>) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.set_nodelay(true).ok();
    s.write_all(&load.hello).await.expect("hello");
    let mut h = [0u8; 8];
    s.read_exact(&mut h).await.expect("hello ack");
    let (len, _) = frame::parse_header(&h, frame::MAX_FRAME_LEN).expect("ack len");
    let mut body = vec![0u8; len as usize];
    s.read_exact(&mut body).await.expect("hello ack body");
    assert_eq!(body[0], FrameType::HelloAck as u8, "handshake refused");
    let (mut rd, mut wr) = s.into_split();
    start.wait().await;
    let want = load.frames;
    let acks = tokio::spawn(async move {
        let mut h = [0u8; 8];
        let mut b = [0u8; 17];
        loop {
            rd.read_exact(&mut h).await.expect("ack");
            rd.read_exact(&mut b).await.expect("ack body");
            assert_eq!(b[0], FrameType::Ack as u8);
            let count = u64::from_le_bytes(b[1..9].try_into().unwrap_or_default());
            if count == want {
                return rd;
            }
        }
    });
    wr.write_all(&load.data).await.expect("send");
    let _rd = acks.await.expect("acks");
    let _ = load.uid;
}

fn bench_logserver(loads: &[Arc<ClientLoad>]) -> Outcome {
    let dir = tempfile::tempdir().expect("tempdir");
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("p5ls-rt")
        .enable_all()
        .build()
        .expect("server runtime");
    let config = ServerConfig {
        listen: "127.0.0.1:0".into(),
        store: dir.path().to_path_buf(),
        ..ServerConfig::default()
    };
    let server = server_rt.block_on(Server::bind(config)).expect("bind");
    let addr = server.local_addr();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = server_rt.spawn(server.run(async {
        let _ = stop_rx.await;
    }));
    let clients = client_runtime();
    let start = Arc::new(tokio::sync::Barrier::new(loads.len() + 1));
    let handles: Vec<_> = loads
        .iter()
        .map(|l| clients.spawn(run_client(addr, l.clone(), start.clone())))
        .collect();
    let (wall, server_cpu_ns) = clients.block_on(async {
        start.wait().await;
        let cpu0 = thread_cpu_ns("p5ls-");
        let t0 = Instant::now();
        for h in handles {
            h.await.expect("client");
        }
        (t0.elapsed(), thread_cpu_ns("p5ls-").saturating_sub(cpu0))
    });
    let _ = stop_tx.send(());
    let summary = server_rt
        .block_on(task)
        .expect("server task")
        .expect("server run");
    let commits = summary.sessions.iter().map(|s| s.1.commits).sum();
    Outcome {
        wall,
        server_cpu_ns,
        commits,
    }
}

/// The same bytes through loopback TCP into files with a plain `tokio::io::copy`.
fn bench_baseline(loads: &[Arc<ClientLoad>]) -> Duration {
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("baseline-rt")
        .enable_all()
        .build()
        .expect("baseline runtime");
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).expect("bind");
    let addr = listener.local_addr().expect("addr");
    let n = loads.len();
    let root = dir.path().to_path_buf();
    let acceptor = rt.spawn(async move {
        let mut copies = Vec::new();
        for i in 0..n {
            let (mut s, _) = listener.accept().await.expect("accept");
            let path = root.join(format!("{i}.bin"));
            copies.push(tokio::spawn(async move {
                let mut f = tokio::fs::File::create(&path).await.expect("create");
                tokio::io::copy(&mut s, &mut f).await.expect("copy");
                f.sync_all().await.expect("sync");
            }));
        }
        for c in copies {
            c.await.expect("copy task");
        }
    });
    let clients = client_runtime();
    let start = Arc::new(tokio::sync::Barrier::new(n + 1));
    let handles: Vec<_> = loads
        .iter()
        .map(|l| {
            let (l, start) = (l.clone(), start.clone());
            clients.spawn(async move {
                let mut s = TcpStream::connect(addr).await.expect("connect");
                start.wait().await;
                s.write_all(&l.hello).await.expect("send");
                s.write_all(&l.data).await.expect("send");
                s.shutdown().await.expect("shutdown");
            })
        })
        .collect();
    clients.block_on(async {
        start.wait().await;
        let t0 = Instant::now();
        for h in handles {
            h.await.expect("client");
        }
        acceptor.await.expect("acceptor");
        t0.elapsed()
    })
}

/// Validation alone (what the server does per byte before storing), single thread.
fn bench_validate(load: &ClientLoad) -> f64 {
    let t0 = Instant::now();
    let mut events = 0u64;
    let mut rounds = 0;
    while t0.elapsed() < Duration::from_millis(500) || rounds == 0 {
        for f in frame::Frames::new(&load.data) {
            let f = f.expect("frame");
            events += data::validate_client_frame(f.ty, f.body).expect("valid") as u64;
        }
        rounds += 1;
    }
    events as f64 / t0.elapsed().as_secs_f64()
}

fn fs_type(p: &Path) -> String {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let p = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let mut best = ("?".to_string(), 0);
    for line in mounts.lines() {
        let f: Vec<_> = line.split_whitespace().collect();
        if f.len() > 2 && p.starts_with(f[1]) && f[1].len() >= best.1 {
            best = (f[2].to_string(), f[1].len());
        }
    }
    best.0
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let total: u64 = std::env::var("P5_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(96 << 20);
    let tmp = std::env::temp_dir();
    println!(
        "p5-logserver ingest to a durable store ({} events/config, {} events/frame, store on {} [{}])",
        total,
        EVENTS_PER_FRAME,
        tmp.display(),
        fs_type(&tmp)
    );
    println!(
        "{:>7} {:>10} {:>9} {:>9} {:>11} {:>9} {:>13} {:>11} {:>8}",
        "clients",
        "events",
        "B/event",
        "wall s",
        "Mevents/s",
        "MB/s",
        "Mev/server-s",
        "baseline/s",
        "ratio"
    );
    for clients in [1usize, 8, 64] {
        let loads: Vec<Arc<ClientLoad>> = make_loads(clients, total)
            .into_iter()
            .map(Arc::new)
            .collect();
        let events: u64 = loads.iter().map(|l| l.events).sum();
        let bytes: u64 = loads
            .iter()
            .map(|l| (l.hello.len() + l.data.len()) as u64)
            .sum();
        let o = bench_logserver(&loads);
        let base = bench_baseline(&loads);
        let eps = events as f64 / o.wall.as_secs_f64();
        let base_eps = events as f64 / base.as_secs_f64();
        println!(
            "{:>7} {:>10} {:>9.2} {:>9.3} {:>11.1} {:>9.1} {:>13.1} {:>11.1} {:>8.2}   ({} syncs)",
            clients,
            events,
            bytes as f64 / events as f64,
            o.wall.as_secs_f64(),
            eps / 1e6,
            bytes as f64 / o.wall.as_secs_f64() / 1e6,
            events as f64 / (o.server_cpu_ns.max(1) as f64 / 1e9) / 1e6,
            base_eps / 1e6,
            eps / base_eps,
            o.commits
        );
    }
    let one = make_loads(1, 4 << 20);
    println!(
        "validation only (validate_client_frame, one thread): {:.1} Mevents/s",
        bench_validate(&one[0]) / 1e6
    );
    println!(
        "Mev/server-s = events per CPU-second of the server's threads (1 async worker + writer); \
         baseline = same bytes, loopback TCP -> file via tokio::io::copy, one fsync per file; \
         ratio = logserver / baseline events/s."
    );
}
