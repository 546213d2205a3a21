//! Integration tests of the log server: real TCP peers speaking the wire protocol (built with
//! the `p5_wire` encoders) against the real server, started in-process (library) or as the
//! binary (for SIGKILL / SIGTERM), with the results verified through the store reader.
//!
//! No assertion depends on timing: timeouts are configured small where a test needs one to
//! fire, and socket read timeouts are only hang guards.

use p5_logserver::import::{IMPORTED_CONN_ID, import_files};
use p5_logserver::inspect::{StoreSummary, inspect, render_text};
use p5_logserver::reader::StoreDir;
use p5_logserver::recover::RecoveryReport;
use p5_logserver::server::ServeSummary;
use p5_logserver::{ConnLimits, Error, Server, ServerConfig, StoreConfig};
use p5_wire::data::{self, Ack, DataHeader, Ping, StreamClose, StreamOpen};
use p5_wire::event::EventEncoder;
use p5_wire::frame::{self, FrameType};
use p5_wire::hello::{Caps, Hello, HelloAck, Identity};
use p5_wire::store::{SampleSource, StoreRecord};
use std::collections::{BTreeMap, HashMap};
use std::io::{self, BufRead, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Hang guard for socket reads: far longer than anything a passing test waits for.
const HANG_GUARD: Duration = Duration::from_secs(60);

mod errors;
mod full_disk;
mod hostile;

// ---------------------------------------------------------------------------------------------
// Frames

fn identity(uid: u64, session: &str) -> Identity {
    Identity {
        process_uid: uid,
        pid: (uid % 100_000) as u32 + 1,
        ppid: 1,
        start_wall_ns: 1_700_000_000_000_000_000,
        start_mono_ns: 5_000_000_000,
        clock: 2,
        runtime: 1,
        host_id: "machine-1".into(),
        boot_id: "boot-1".into(),
        hostname: "node1".into(),
        program: format!("prog{uid}"),
        session: session.into(),
        argv: vec![format!("prog{uid}"), "--work".into()],
    }
}

fn encode(ty: FrameType, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::encode(&mut out, ty as u8, body);
    out
}

fn hello_frame(uid: u64, session: &str, caps: Caps) -> Vec<u8> {
    let h = Hello {
        version: p5_wire::PROTOCOL_VERSION,
        caps,
        identity: identity(uid, session),
    };
    encode(FrameType::Hello, &h.encode_body())
}

fn open_frame(stream: u32, t_p: u64) -> Vec<u8> {
    let o = StreamOpen {
        header: DataHeader {
            stream,
            seq: 0,
            t_p,
        },
        kind_raw: 1,
        tid: 1000 + stream as u64,
        name: format!("thread-{stream}"),
    };
    encode(FrameType::StreamOpen, &o.encode_body())
}

/// Sensors used by the test traces.
const SENSORS: [u64; 3] = [0x1111, 0x2222, 0x3333];

/// An `Events` frame with `pairs` nested enter/exit pairs (2 × pairs events): sensor 0 wraps
/// sensor 1, or sensor 2 every fourth time.
fn events_frame(stream: u32, seq: u64, pairs: u32, t_p: u64) -> (Vec<u8>, u64) {
    let mut e = EventEncoder::new();
    let mut t = seq * 1_000_000;
    let mut n = 0;
    let mut k = 0;
    while n < pairs {
        k += 1;
        let inner = if k % 4 == 0 { SENSORS[2] } else { SENSORS[1] };
        if n + 2 <= pairs {
            e.enter(t, SENSORS[0]);
            t += 40;
            e.enter(t, inner);
            t += 120;
            e.exit(t, inner);
            t += 30;
            e.exit(t, SENSORS[0]);
            t += 15;
            n += 2;
        } else {
            e.enter(t, inner);
            t += 50;
            e.exit(t, inner);
            n += 1;
        }
    }
    let mut out = Vec::new();
    data::encode_events(&mut out, DataHeader { stream, seq, t_p }, seq, &e);
    (out, 2 * pairs as u64)
}

fn close_frame(stream: u32, seq: u64, t_p: u64) -> Vec<u8> {
    let c = StreamClose {
        header: DataHeader { stream, seq, t_p },
        t_end: t_p,
        dropped: 7,
    };
    encode(FrameType::StreamClose, &c.encode_body())
}

fn ping_frame(t_p: u64) -> Vec<u8> {
    let p = Ping {
        t_p,
        echo_t_s: 0,
        echo_t_p: 0,
    };
    encode(FrameType::Ping, &p.encode_body())
}

fn goodbye_frame(t_p: u64) -> Vec<u8> {
    encode(FrameType::Goodbye, &t_p.to_le_bytes())
}

/// A full stream: open, `n` event frames, close; and its event count.
fn stream_frames(stream: u32, n: u64, pairs: u32) -> (Vec<Vec<u8>>, u64) {
    let mut frames = vec![open_frame(stream, 1)];
    let mut events = 0;
    for seq in 1..=n {
        let (f, e) = events_frame(stream, seq, pairs, seq * 10);
        frames.push(f);
        events += e;
    }
    frames.push(close_frame(stream, n + 1, (n + 1) * 10));
    (frames, events)
}

// ---------------------------------------------------------------------------------------------
// A protocol peer

struct Peer {
    s: TcpStream,
}

#[derive(Debug, Default)]
struct Closed {
    error: Option<String>,
    last_ack: u64,
}

impl Peer {
    fn connect(addr: SocketAddr) -> Self {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(HANG_GUARD)).unwrap();
        s.set_nodelay(true).unwrap();
        Self { s }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).expect("send");
    }

    fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.s.write_all(bytes)
    }

    /// Reads one frame; `None` at EOF or connection reset.
    fn read_frame(&mut self) -> Option<(u8, Vec<u8>)> {
        let mut h = [0u8; 8];
        if let Err(e) = self.s.read_exact(&mut h) {
            assert_ne!(e.kind(), io::ErrorKind::WouldBlock, "hang guard hit");
            return None;
        }
        let (len, crc) =
            frame::parse_header(&h, frame::MAX_FRAME_LEN).expect("server frame length");
        let mut payload = vec![0u8; len as usize];
        if self.s.read_exact(&mut payload).is_err() {
            return None;
        }
        let f = frame::check(crc, &payload).expect("server frame crc");
        Some((f.ty, f.body.to_vec()))
    }

    fn hello(addr: SocketAddr, uid: u64, session: &str) -> (Self, HelloAck) {
        let mut p = Self::connect(addr);
        p.send(&hello_frame(uid, session, Caps::ALL));
        let (ty, body) = p.read_frame().expect("hello ack");
        assert_eq!(
            ty,
            FrameType::HelloAck as u8,
            "{}",
            String::from_utf8_lossy(&body)
        );
        (p, HelloAck::decode_body(&body).unwrap())
    }

    /// Reads acks until one reaches `count`.
    fn wait_ack(&mut self, count: u64) -> u64 {
        loop {
            let (ty, body) = self
                .read_frame()
                .expect("connection closed while waiting for acks");
            match FrameType::from_u8(ty) {
                Some(FrameType::Ack) => {
                    let a = Ack::decode_body(&body).unwrap();
                    assert!(a.count <= count, "ack {} beyond {count}", a.count);
                    if a.count == count {
                        return a.t_s;
                    }
                }
                Some(FrameType::Error) => panic!("server error: {}", error_text(&body)),
                _ => panic!("unexpected frame type {ty:#x}"),
            }
        }
    }

    /// Reads until the server closes the connection, collecting the last ack and any error.
    fn expect_closed(&mut self) -> Closed {
        let mut c = Closed::default();
        while let Some((ty, body)) = self.read_frame() {
            match FrameType::from_u8(ty) {
                Some(FrameType::Ack) => c.last_ack = Ack::decode_body(&body).unwrap().count,
                Some(FrameType::Error) => c.error = Some(error_text(&body)),
                _ => panic!("unexpected frame type {ty:#x}"),
            }
        }
        c
    }

    fn goodbye(mut self, total: u64) -> Closed {
        self.send(&goodbye_frame(1));
        let c = self.expect_closed();
        assert_eq!(c.last_ack.max(total), total);
        c
    }
}

fn error_text(body: &[u8]) -> String {
    p5_wire::codec::Reader::new(body)
        .str("message")
        .unwrap_or_else(|_| "<undecodable>".into())
}

// ---------------------------------------------------------------------------------------------
// Servers

fn config(store: &Path) -> ServerConfig {
    ServerConfig {
        listen: "127.0.0.1:0".into(),
        store: store.to_path_buf(),
        worker_threads: Some(2),
        ..ServerConfig::default()
    }
}

struct InProc {
    rt: tokio::runtime::Runtime,
    addr: SocketAddr,
    run_id: u64,
    recovery: RecoveryReport,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<ServeSummary, Error>>>,
}

impl InProc {
    fn start(config: ServerConfig) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let server = rt.block_on(Server::bind(config)).expect("bind");
        let addr = server.local_addr();
        let run_id = server.clock().server_run_id;
        let recovery = server.recovery().clone();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = rt.spawn(server.run(async {
            let _ = rx.await;
        }));
        Self {
            rt,
            addr,
            run_id,
            recovery,
            stop: Some(tx),
            task: Some(task),
        }
    }

    fn stop(mut self) -> ServeSummary {
        let _ = self.stop.take().unwrap().send(());
        let task = self.task.take().unwrap();
        self.rt.block_on(task).unwrap().expect("server run")
    }
}

struct BinServer {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
}

fn spawn_bin(store: &Path, log: &Path, extra: &[&str]) -> BinServer {
    let mut child = Command::new(env!("CARGO_BIN_EXE_p5-logserver"))
        .args(["--listen", "127.0.0.1:0", "--store"])
        .arg(store)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("spawn p5-logserver");
    let mut line = String::new();
    io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}; log: {}", read(log)))
        .parse()
        .unwrap();
    BinServer {
        child,
        addr,
        log: log.to_path_buf(),
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

impl BinServer {
    fn terminate(mut self) -> String {
        // SAFETY: sending a signal to our own child process.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        let log = read(&self.log);
        assert!(status.success(), "exit status {status}; log:\n{log}");
        log
    }

    fn sigkill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Reading the store

#[derive(Debug, Default)]
struct Stored {
    /// (uid, stream) → stored seqs in store order.
    seqs: HashMap<(u64, u32), Vec<u64>>,
    /// (uid, stream) → events.
    events: HashMap<(u64, u32), u64>,
    /// uid → (conn_id, t_s) of process records.
    processes: HashMap<u64, Vec<(u64, u64)>>,
    /// uid → sample sources.
    samples: HashMap<u64, Vec<u8>>,
    /// uid → disconnect reasons.
    disconnects: HashMap<u64, Vec<String>>,
    /// t_s of data records per uid.
    data_t_s: HashMap<u64, Vec<u64>>,
    /// All records as (segment run id, type, raw bytes) for before/after comparisons.
    raw: Vec<Vec<u8>>,
    faults: usize,
}

fn stored(root: &Path) -> Stored {
    let mut out = Stored::default();
    for session in StoreDir::open(root).unwrap().sessions().unwrap() {
        let mut recs = session.records().unwrap();
        while recs.advance().unwrap() {
            out.raw
                .push(recs.segment().unwrap().raw().unwrap().to_vec());
            let r = recs.record().expect("record decodes");
            match r.record {
                StoreRecord::Process {
                    t_s,
                    conn_id,
                    hello,
                } => out
                    .processes
                    .entry(hello.identity.process_uid)
                    .or_default()
                    .push((conn_id, t_s)),
                StoreRecord::Data {
                    t_s,
                    process_uid,
                    ty,
                    body,
                } => {
                    let h = DataHeader::peek(body).unwrap();
                    out.seqs
                        .entry((process_uid, h.stream))
                        .or_default()
                        .push(h.seq);
                    out.data_t_s.entry(process_uid).or_default().push(t_s);
                    if ty == FrameType::Events as u8 {
                        let n = data::EventsFrame::parse(body).unwrap().validate().unwrap();
                        *out.events.entry((process_uid, h.stream)).or_default() += n as u64;
                    }
                }
                StoreRecord::Sample {
                    process_uid,
                    source,
                    ..
                } => out.samples.entry(process_uid).or_default().push(source),
                StoreRecord::Disconnect {
                    process_uid,
                    reason,
                    ..
                } => out.disconnects.entry(process_uid).or_default().push(reason),
                StoreRecord::Unknown { ty } => panic!("unknown record {ty:#x}"),
            }
        }
        out.faults += recs.faults().len();
    }
    out
}

fn assert_exact(s: &Stored, uid: u64, stream: u32, last_seq: u64, events: u64) {
    let seqs = s.seqs.get(&(uid, stream)).expect("stream stored");
    let want: Vec<u64> = (0..=last_seq).collect();
    assert_eq!(
        seqs, &want,
        "stream {uid:x}/{stream}: every frame exactly once, in order"
    );
    assert_eq!(s.events.get(&(uid, stream)).copied().unwrap_or(0), events);
}

fn last_segment(root: &Path, session: &str) -> PathBuf {
    let s = StoreDir::open(root).unwrap().session(session).unwrap();
    s.segments().unwrap().last().unwrap().path.clone()
}

// ---------------------------------------------------------------------------------------------
// Tests

#[test]
fn many_clients_each_frame_stored_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = InProc::start(config(dir.path()));
    let addr = server.addr;
    const CLIENTS: u64 = 8;
    const FRAMES: u64 = 40;
    let threads: Vec<_> = (0..CLIENTS)
        .map(|c| {
            std::thread::spawn(move || {
                let uid = 0xc0ffee00 + c;
                let (mut p, ack) = Peer::hello(addr, uid, "multi");
                assert_eq!(ack.caps, Caps::ALL);
                let mut total = 0;
                let mut events = 0;
                for stream in 0..2u32 {
                    let (frames, e) = stream_frames(stream, FRAMES, 1000);
                    events += e;
                    for (i, f) in frames.iter().enumerate() {
                        p.send(f);
                        if i % 10 == 0 {
                            p.send(&ping_frame(i as u64));
                        }
                    }
                    total += frames.len() as u64;
                }
                p.wait_ack(total);
                p.goodbye(total);
                (uid, events / 2, ack.server_run_id)
            })
        })
        .collect();
    let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let summary = server.stop();
    assert_eq!(summary.connections, CLIENTS);
    let s = stored(dir.path());
    assert_eq!(s.faults, 0);
    for (uid, events, run_id) in results {
        assert_eq!(run_id, server_run_of(dir.path(), "multi"));
        for stream in 0..2 {
            assert_exact(&s, uid, stream, FRAMES + 1, events);
        }
        assert_eq!(s.processes[&uid].len(), 1);
        assert!(s.processes[&uid][0].0 >= 1, "live conn ids start at 1");
        assert!(
            s.data_t_s[&uid].iter().all(|&t| t > 0),
            "live frames carry t_s"
        );
        let pings = s.samples[&uid]
            .iter()
            .filter(|&&x| x == SampleSource::Ping as u8);
        assert_eq!(pings.count(), 2 * 5);
        assert_eq!(s.disconnects[&uid], vec!["goodbye".to_string()]);
    }
    let (_, stats) = &summary.sessions[0];
    assert_eq!(stats.frames, CLIENTS * 2 * (FRAMES + 2));
    assert_eq!(stats.duplicates, 0);
}

fn server_run_of(root: &Path, session: &str) -> u64 {
    let seg = last_segment(root, session);
    p5_logserver::reader::SegmentReader::open(&seg)
        .unwrap()
        .header()
        .server_run_id
}

#[test]
fn resend_after_reconnect_is_deduplicated_and_still_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let server = InProc::start(config(dir.path()));
    let uid = 0xabc;
    let (frames, _) = stream_frames(3, 15, 50);
    // First connection: open + events 1..=10, acknowledged, then the connection drops.
    let (mut p, ack1) = Peer::hello(server.addr, uid, "");
    for f in &frames[..11] {
        p.send(f);
    }
    p.wait_ack(11);
    drop(p);
    // Second connection: resend 5..=10 (already stored) and send 11..=16 (new).
    let mut p = Peer::connect(server.addr);
    let mut caps = Caps::ALL;
    caps.0 |= 1 << 40;
    p.send(&hello_frame(uid, "", caps));
    let (ty, body) = p.read_frame().unwrap();
    assert_eq!(ty, FrameType::HelloAck as u8);
    let ack2 = HelloAck::decode_body(&body).unwrap();
    assert_eq!(
        ack2.caps,
        Caps::ALL,
        "caps are the intersection with what the server knows"
    );
    assert_eq!(ack2.server_run_id, ack1.server_run_id);
    for f in &frames[5..] {
        let mut f = f.clone();
        data::stamp_send_time(&mut f, 999_999);
        p.send(&f);
    }
    p.wait_ack((frames.len() - 5) as u64);
    p.goodbye((frames.len() - 5) as u64);
    let summary = server.stop();
    let s = stored(dir.path());
    assert_exact(&s, uid, 3, 16, 15 * 100);
    let dups = s.samples[&uid]
        .iter()
        .filter(|&&x| x == SampleSource::Duplicate as u8)
        .count();
    assert_eq!(dups, 6, "each duplicate leaves a clock sample");
    assert_eq!(summary.sessions[0].0, "default");
    assert_eq!(summary.sessions[0].1.duplicates, 6);
    assert_eq!(s.processes[&uid].len(), 2);
    assert_eq!(s.disconnects[&uid][0], "peer closed the connection");
}

#[test]
fn sigkill_mid_stream_then_restart_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = spawn_bin(&store, &dir.path().join("run1.log"), &[]);
    let uid = 0x5151;
    let (frames, events) = stream_frames(1, 600, 1000);
    let frames = Arc::new(frames);
    let (p, _) = Peer::hello(server.addr, uid, "crash");
    let mut reader = p;
    let mut writer = Peer {
        s: reader.s.try_clone().unwrap(),
    };
    let f2 = frames.clone();
    let sender = std::thread::spawn(move || {
        for (i, f) in f2.iter().enumerate() {
            if writer.try_send(f).is_err() {
                return;
            }
            if i % 20 == 0 {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    });
    // Kill the server (SIGKILL) once a good part is acknowledged, while frames still flow.
    let mut acked = 0;
    while acked < 150 {
        match reader.read_frame() {
            Some((ty, body)) if ty == FrameType::Ack as u8 => {
                acked = Ack::decode_body(&body).unwrap().count;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    server.sigkill();
    // Acks already in flight still count: they were all sent after the frames were durable.
    while let Some((ty, body)) = reader.read_frame() {
        if ty == FrameType::Ack as u8 {
            acked = Ack::decode_body(&body).unwrap().count;
        }
    }
    sender.join().unwrap();
    assert!(
        acked < frames.len() as u64,
        "the kill should come mid-stream"
    );

    // Restart on the same store; the client resends everything not acknowledged.
    let server = spawn_bin(&store, &dir.path().join("run2.log"), &[]);
    let (mut p, _) = Peer::hello(server.addr, uid, "crash");
    let rest = &frames[acked as usize..];
    for f in rest {
        let mut f = f.clone();
        data::stamp_send_time(&mut f, 7);
        p.send(&f);
    }
    p.wait_ack(rest.len() as u64);
    p.goodbye(rest.len() as u64);
    let log = server.terminate();
    assert!(log.contains("session recovered"), "log:\n{log}");

    let s = stored(&store);
    assert_exact(&s, uid, 1, 601, events);
    assert_eq!(s.faults, 0, "recovery left no damage");
    let summary = inspect(&store).unwrap();
    assert_eq!(summary.sessions[0].runs.len(), 2);
}

#[test]
fn sigterm_drains_connections_and_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = spawn_bin(&store, &dir.path().join("run.log"), &[]);
    let uid = 0x7e7e;
    let (frames, _) = stream_frames(2, 300, 500);
    let (mut p, _) = Peer::hello(server.addr, uid, "term");
    for f in &frames[..100] {
        p.send(f);
    }
    p.wait_ack(100);
    let mut writer = Peer {
        s: p.s.try_clone().unwrap(),
    };
    let rest: Vec<Vec<u8>> = frames[100..].to_vec();
    let sender = std::thread::spawn(move || {
        for f in &rest {
            if writer.try_send(f).is_err() {
                return;
            }
        }
    });
    let log = server.terminate();
    assert!(log.contains("SIGTERM received"), "log:\n{log}");
    let closed = p.expect_closed();
    sender.join().unwrap();
    let s = stored(&store);
    let n = s.seqs[&(uid, 2)].len() as u64;
    assert!(n >= 100);
    assert_eq!(
        closed.last_ack.max(100),
        n,
        "every frame the server took was stored and acknowledged before exit"
    );
    assert_eq!(s.seqs[&(uid, 2)], (0..n).collect::<Vec<_>>());
    assert_eq!(
        s.disconnects[&uid],
        vec!["server shutting down".to_string()]
    );
}

fn write_session(root: &Path, uid: u64, session: &str, frames: &[Vec<u8>]) {
    let server = InProc::start(config(root));
    let (mut p, _) = Peer::hello(server.addr, uid, session);
    for f in frames {
        p.send(f);
    }
    p.wait_ack(frames.len() as u64);
    p.goodbye(frames.len() as u64);
    server.stop();
}

#[test]
fn torn_tail_of_garbage_is_cut_and_reported_at_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let uid = 0x70;
    let (frames, events) = stream_frames(0, 20, 200);
    write_session(dir.path(), uid, "torn", &frames[..12]);
    let before = stored(dir.path());
    let seg = last_segment(dir.path(), "torn");
    let clean_len = std::fs::metadata(&seg).unwrap().len();
    let mut f = std::fs::OpenOptions::new().append(true).open(&seg).unwrap();
    f.write_all(&[0x5a; 300]).unwrap();
    drop(f);

    let server = InProc::start(config(dir.path()));
    let repairs: Vec<_> = server.recovery.repairs().collect();
    assert_eq!(repairs.len(), 1, "{:?}", server.recovery);
    assert_eq!(repairs[0].0, "torn");
    assert_eq!(repairs[0].1.offset, clean_len);
    assert_eq!(repairs[0].1.removed_bytes, 300);
    assert_eq!(std::fs::metadata(&seg).unwrap().len(), clean_len);
    assert_eq!(
        stored(dir.path()).raw,
        before.raw,
        "nothing before the tear is lost"
    );

    // The rebuilt dedup map still recognises old frames after the restart.
    let (mut p, _) = Peer::hello(server.addr, uid, "torn");
    for f in &frames[8..] {
        p.send(f);
    }
    p.wait_ack((frames.len() - 8) as u64);
    p.goodbye((frames.len() - 8) as u64);
    server.stop();
    let s = stored(dir.path());
    assert_exact(&s, uid, 0, 21, events);
    let summary = inspect(dir.path()).unwrap();
    let ses = &summary.sessions[0];
    assert_eq!(ses.repairs.len(), 1);
    assert_eq!(ses.segment_count, 2, "each run writes its own segment");
    assert!(ses.faults.is_empty());
    let mut text = Vec::new();
    render_text(&summary, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("repaired torn tail"), "{text}");
    // When the session was recorded, as a person reads it: today's local date.
    let today = chrono::Local::now().format("%Y-%m-%d ").to_string();
    assert!(text.contains(&format!("first started {today}")), "{text}");
}

#[test]
fn torn_tail_cutting_the_last_record_keeps_everything_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let uid = 0x71;
    let (frames, _) = stream_frames(0, 10, 200);
    write_session(dir.path(), uid, "cut", &frames);
    let before = stored(dir.path());
    let seg = last_segment(dir.path(), "cut");
    let len = std::fs::metadata(&seg).unwrap().len();
    let last = before.raw.last().unwrap().len() as u64 + 8;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(len - 5)
        .unwrap();
    // Unrepaired damage is visible to readers before any restart.
    let summary = inspect(dir.path()).unwrap();
    assert_eq!(summary.sessions[0].faults.len(), 1);

    let server = InProc::start(config(dir.path()));
    let repairs: Vec<_> = server.recovery.repairs().collect();
    assert_eq!(repairs.len(), 1);
    assert_eq!(repairs[0].1.offset, len - last);
    server.stop();
    let after = stored(dir.path());
    assert_eq!(after.raw[..], before.raw[..before.raw.len() - 1]);
    assert_eq!(after.faults, 0);
}

#[test]
fn torn_segment_header_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let (frames, events) = stream_frames(0, 3, 10);
    write_session(dir.path(), 0x72, "hdr", &frames);
    let sdir = dir.path().join("hdr");
    std::fs::write(sdir.join("00000001.p5seg"), b"P5SEG").unwrap();
    let server = InProc::start(config(dir.path()));
    assert_eq!(server.recovery.repairs().count(), 1);
    server.stop();
    assert!(!sdir.join("00000001.p5seg").exists());
    assert_exact(&stored(dir.path()), 0x72, 0, 4, events);
}

/// Starts a bad connection that first completes the handshake.
fn after_hello(addr: SocketAddr, uid: u64) -> Peer {
    Peer::hello(addr, uid, "bad").0
}

#[test]
fn bad_input_closes_only_that_connection() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.limits = ConnLimits {
        hello_timeout: Duration::from_millis(1500),
        idle_timeout: Duration::from_secs(3),
        frame_timeout: Duration::from_millis(1500),
        ..ConnLimits::default()
    };
    let server = InProc::start(cfg);
    let addr = server.addr;

    // A good client keeps streaming (never idle for long) while the bad ones come and go.
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let good = std::thread::spawn(move || {
        let (mut p, _) = Peer::hello(addr, 0x600d, "bad");
        p.send(&open_frame(0, 1));
        let mut seq = 0;
        let mut events = 0;
        while !d.load(Ordering::Relaxed) || seq < 20 {
            seq += 1;
            let (f, e) = events_frame(0, seq, 100, seq);
            events += e;
            p.send(&f);
            p.wait_ack(seq + 1);
            std::thread::sleep(Duration::from_millis(20));
        }
        p.goodbye(seq + 1);
        (seq, events)
    });

    let mut uid = 0xbad0;
    let mut next_uid = || {
        uid += 1;
        uid
    };
    let mut cases: Vec<(&str, u64, Closed)> = Vec::new();

    // Garbage instead of a hello.
    let mut p = Peer::connect(addr);
    p.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    let c = p.expect_closed();
    assert!(c.error.as_deref().unwrap_or("").contains("length"), "{c:?}");

    // Wrong magic in the hello.
    let mut p = Peer::connect(addr);
    let mut h = Hello {
        version: 1,
        caps: Caps::ALL,
        identity: identity(1, ""),
    }
    .encode_body();
    h[..6].copy_from_slice(b"NOTP5!");
    p.send(&encode(FrameType::Hello, &h));
    let c = p.expect_closed();
    assert!(
        c.error.as_deref().unwrap_or("").contains("bad magic"),
        "{c:?}"
    );

    // Not a hello first.
    let mut p = Peer::connect(addr);
    p.send(&ping_frame(1));
    let c = p.expect_closed();
    assert!(
        c.error
            .as_deref()
            .unwrap_or("")
            .contains("expected a hello"),
        "{c:?}"
    );

    // Bad session names (path traversal, hidden, too long).
    for name in ["../../etc", ".hidden", "a/b", &"x".repeat(65)] {
        let mut p = Peer::connect(addr);
        p.send(&hello_frame(9, name, Caps::ALL));
        let c = p.expect_closed();
        assert!(
            c.error
                .as_deref()
                .unwrap_or("")
                .contains("invalid session name"),
            "{name}: {c:?}"
        );
    }

    // No hello at all within the hello timeout.
    let mut p = Peer::connect(addr);
    let c = p.expect_closed();
    assert!(
        c.error.as_deref().unwrap_or("").contains("no hello"),
        "{c:?}"
    );

    // Oversized length after the hello.
    let id = next_uid();
    let mut p = after_hello(addr, id);
    let mut h = [0u8; 8];
    h[..4].copy_from_slice(&(frame::MAX_FRAME_LEN + 1).to_le_bytes());
    p.send(&h);
    cases.push(("frame length", id, p.expect_closed()));

    // Bad checksum.
    let id = next_uid();
    let mut p = after_hello(addr, id);
    let mut f = open_frame(0, 1);
    f[12] ^= 0x40;
    p.send(&f);
    cases.push(("checksum mismatch", id, p.expect_closed()));

    // A well-framed body that does not decode (events past the end of the batch).
    let id = next_uid();
    let mut p = after_hello(addr, id);
    p.send(&open_frame(0, 1));
    let (mut f, _) = events_frame(0, 1, 10, 1);
    let cut = f.len() - 3;
    f.truncate(cut);
    let body = f[9..].to_vec();
    p.send(&encode(FrameType::Events, &body));
    cases.push(("invalid frame of type 0x11", id, p.expect_closed()));

    // Wrong sequence number for the frame type.
    let id = next_uid();
    let mut p = after_hello(addr, id);
    let (f, _) = events_frame(0, 0, 10, 1);
    p.send(&f);
    cases.push(("sequence number", id, p.expect_closed()));

    // A frame type clients may not send.
    let id = next_uid();
    let mut p = after_hello(addr, id);
    p.send(&encode(FrameType::Ack, &[0u8; 16]));
    cases.push(("invalid frame of type 0x03", id, p.expect_closed()));

    // Half a frame, then the client closes.
    let id = next_uid();
    let mut p = after_hello(addr, id);
    let (f, _) = events_frame(0, 1, 100, 1);
    p.send(&open_frame(0, 1));
    p.send(&f[..f.len() / 2]);
    p.s.shutdown(Shutdown::Write).unwrap();
    cases.push(("middle of a frame", id, p.expect_closed()));

    // Idle past the timeout.
    let id = next_uid();
    let mut p = after_hello(addr, id);
    cases.push(("idle", id, p.expect_closed()));

    // Slow-loris: a frame started and never finished.
    let id = next_uid();
    let mut p = after_hello(addr, id);
    p.send(&f[..20]);
    cases.push(("not completed", id, p.expect_closed()));

    done.store(true, Ordering::Relaxed);
    let (seq, events) = good.join().unwrap();
    server.stop();

    let s = stored(dir.path());
    assert_exact(&s, 0x600d, 0, seq, events);
    for (what, id, closed) in &cases {
        let reason = &s.disconnects[id][0];
        assert!(
            reason.contains(what),
            "expected {what:?} in disconnect reason {reason:?}"
        );
        if *what != "middle of a frame" {
            let told = closed.error.as_deref().unwrap_or("");
            assert!(
                told.contains(what),
                "expected {what:?} in the error frame, got {closed:?}"
            );
        }
    }
    // The half-frame client's complete frame before the cut was stored and acknowledged.
    let half = cases.iter().find(|c| c.0 == "middle of a frame").unwrap();
    assert_eq!(s.seqs[&(half.1, 0)], vec![0]);
    assert_eq!(half.2.last_ack, 1);
    assert!(
        !dir.path()
            .join("..")
            .join("etc")
            .join("00000000.p5seg")
            .exists()
    );
    let names: Vec<_> = StoreDir::open(dir.path())
        .unwrap()
        .sessions()
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, vec!["bad".to_string()]);
}

#[test]
fn connections_past_the_cap_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.max_connections = 2;
    let server = InProc::start(cfg);
    let (a, _) = Peer::hello(server.addr, 1, "cap");
    let (b, _) = Peer::hello(server.addr, 2, "cap");
    let mut c = Peer::connect(server.addr);
    c.send(&hello_frame(3, "cap", Caps::ALL));
    let closed = c.expect_closed();
    assert_eq!(closed.error.as_deref(), Some("too many connections"));
    a.goodbye(0);
    b.goodbye(0);
    let summary = server.stop();
    assert_eq!((summary.connections, summary.refused), (2, 1));
}

#[test]
fn store_is_locked_while_a_server_runs() {
    let dir = tempfile::tempdir().unwrap();
    let server = InProc::start(config(dir.path()));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let second = rt.block_on(Server::bind(config(dir.path())));
    assert!(matches!(second, Err(Error::Locked { .. })), "{second:?}");
    let import = import_files(dir.path(), &[], StoreConfig::default());
    assert!(matches!(import, Err(Error::Locked { .. })));
    server.stop();
}

#[test]
fn segments_roll_over_and_read_back_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.store_config.segment_max_bytes = 64 * 1024;
    let server = InProc::start(cfg);
    let run_id = server.run_id;
    let (frames, events) = stream_frames(4, 60, 2000);
    let (mut p, _) = Peer::hello(server.addr, 0x5e6, "roll");
    for f in &frames {
        p.send(f);
    }
    p.wait_ack(frames.len() as u64);
    p.goodbye(frames.len() as u64);
    server.stop();
    let segs = StoreDir::open(dir.path())
        .unwrap()
        .session("roll")
        .unwrap()
        .segments()
        .unwrap();
    assert!(segs.len() > 3, "{} segments", segs.len());
    for (i, seg) in segs.iter().enumerate() {
        assert_eq!(seg.index, i as u64);
        let r = seg.open().unwrap();
        assert_eq!(r.header().segment_index, i as u64);
        assert_eq!(r.header().server_run_id, run_id);
        assert!(seg.len <= 64 * 1024 || i + 1 == segs.len() || seg.len < 2 * 64 * 1024);
    }
    assert_exact(&stored(dir.path()), 0x5e6, 4, 61, events);
}

fn spool_file(path: &Path, uid: u64, frames: &[Vec<u8>], extra: &[u8]) {
    let mut out = hello_frame(uid, "spooled", Caps::ALL);
    for (i, f) in frames.iter().enumerate() {
        out.extend_from_slice(f);
        if i == 2 {
            out.extend_from_slice(&ping_frame(5));
        }
    }
    out.extend_from_slice(extra);
    std::fs::write(path, out).unwrap();
}

#[test]
fn import_of_spool_files_marks_processes_and_deduplicates() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let (frames, events) = stream_frames(0, 8, 300);
    let a = dir.path().join("a.p5spool");
    spool_file(&a, 0x5900, &frames, &goodbye_frame(9));
    // A crashed writer: the last frame is cut short.
    let b = dir.path().join("b.p5spool");
    let (frames_b, _) = stream_frames(1, 4, 300);
    let cut = &frames_b[frames_b.len() - 1];
    spool_file(
        &b,
        0x5901,
        &frames_b[..frames_b.len() - 1],
        &cut[..cut.len() - 4],
    );
    let junk = dir.path().join("junk");
    std::fs::write(&junk, b"not a spool file at all").unwrap();

    let report = import_files(
        &store,
        &[a.clone(), b.clone(), junk.clone()],
        StoreConfig::default(),
    )
    .unwrap();
    assert!(report.has_errors(), "the junk file fails");
    assert!(report.files[0].error.is_none() && report.files[0].tail.is_none());
    assert_eq!(report.files[0].data_frames, frames.len() as u64);
    assert_eq!(report.files[0].ignored, 2, "ping and goodbye");
    assert!(
        report.files[1]
            .tail
            .as_deref()
            .unwrap()
            .contains("ends inside")
    );
    assert!(report.files[2].error.is_some());
    assert_eq!(
        report.sessions[0].1.frames,
        (frames.len() + frames_b.len() - 1) as u64
    );

    // Importing again (with the binary) stores nothing new.
    let out = Command::new(env!("CARGO_BIN_EXE_p5-logserver"))
        .args(["import", "--store"])
        .arg(&store)
        .arg(&a)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("0 frames stored, 10 duplicates skipped"),
        "{stdout}"
    );

    let s = stored(&store);
    assert_exact(&s, 0x5900, 0, 9, events);
    assert_eq!(s.seqs[&(0x5901, 1)], vec![0, 1, 2, 3, 4]);
    for uid in [0x5900, 0x5901] {
        assert!(
            s.processes[&uid]
                .iter()
                .all(|&(conn, t_s)| conn == IMPORTED_CONN_ID && t_s == 0)
        );
        assert!(
            s.data_t_s[&uid].iter().all(|&t| t == 0),
            "imported frames have no t_s"
        );
        assert!(
            !s.samples.contains_key(&uid),
            "imports record no clock samples"
        );
    }
    let summary = inspect(&store).unwrap();
    let p = &summary.sessions[0].processes[0];
    assert!(p.imported);
    assert_eq!(p.offsets.count, 0);
}

#[test]
fn inspect_reports_processes_streams_sensors_and_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let uid = 0x1a5b;
    let (frames, events) = stream_frames(5, 10, 400);
    let server = InProc::start(config(&store));
    let (mut p, _) = Peer::hello(server.addr, uid, "insp");
    p.send(&ping_frame(3));
    for f in &frames[..frames.len() - 1] {
        p.send(f);
    }
    p.wait_ack(frames.len() as u64 - 1);
    p.goodbye(frames.len() as u64 - 1);
    server.stop();

    let out = Command::new(env!("CARGO_BIN_EXE_p5-logserver"))
        .arg("inspect")
        .arg(&store)
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success());
    let summary: StoreSummary = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary, inspect(&store).unwrap());
    let ses = &summary.sessions[0];
    assert_eq!(ses.name, "insp");
    assert_eq!((ses.segment_count, ses.runs.len()), (1, 1));
    let p = &ses.processes[0];
    assert_eq!(p.process_uid, format!("{uid:016x}"));
    assert_eq!(
        (p.pid, p.program.as_str(), p.runtime.as_str()),
        (identity(uid, "").pid, "prog6747", "rust")
    );
    assert_eq!(p.argv, identity(uid, "").argv);
    assert_eq!(p.connections, 1);
    assert_eq!(p.events, events);
    assert_eq!(p.disconnects, BTreeMap::from([("goodbye".to_string(), 1)]));
    let st = &p.streams[0];
    assert_eq!(
        (st.id, st.kind.as_str(), st.tid, st.name.as_str()),
        (5, "thread", 1005, "thread-5")
    );
    assert_eq!(
        (st.frames, st.events, st.closed, st.dropped),
        (11, events, false, 10)
    );
    let sensor_total: u64 = p.sensors.iter().map(|s| s.events).sum();
    assert_eq!(sensor_total, events);
    assert_eq!(p.sensors[0].sensor, format!("{:016x}", SENSORS[0]));
    assert_eq!(p.sensors.len(), 3);
    assert_eq!(
        (p.offsets.count, p.offsets.data, p.offsets.pings),
        (12, 11, 1)
    );
    // t_p of the test frames is tiny, so t_s − t_p is positive.
    assert!(p.offsets.min_ns.unwrap() > 0);
    assert!(p.offsets.median_ns.unwrap() >= p.offsets.min_ns.unwrap());

    let text = Command::new(env!("CARGO_BIN_EXE_p5-logserver"))
        .arg("inspect")
        .arg(&store)
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    for want in [
        "session insp",
        "thread-5",
        "clock offset",
        "events per sensor",
        "goodbye ×1",
    ] {
        assert!(text.contains(want), "{want:?} missing in:\n{text}");
    }
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Random bytes after a valid handshake never take the server down: the connection is
        /// closed (or stays open waiting for more), and a new client is served normally.
        #[test]
        fn random_bytes_after_hello_never_break_the_server(
            noise in proptest::collection::vec(any::<u8>(), 1..4096)
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut cfg = config(dir.path());
            cfg.limits.idle_timeout = Duration::from_millis(300);
            cfg.limits.frame_timeout = Duration::from_millis(300);
            let server = InProc::start(cfg);
            let (mut p, _) = Peer::hello(server.addr, 1, "fuzz");
            let _ = p.try_send(&noise);
            let _ = p.expect_closed();
            drop(p);
            let (frames, events) = stream_frames(0, 2, 10);
            write_more_to(server.addr, 2, "fuzz", &frames);
            server.stop();
            assert_exact(&stored(dir.path()), 2, 0, 3, events);
        }
    }
}

#[test]
fn store_write_failure_fails_only_that_session_and_acknowledges_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // A file where the session directory should be: the writer cannot create its segment.
    std::fs::write(dir.path().join("broken"), b"not a directory").unwrap();
    let server = InProc::start(config(dir.path()));
    let (frames, _) = stream_frames(0, 3, 10);
    // Every connection to the session is told and nothing is acknowledged, for as long as
    // the segment cannot be created; other sessions work.
    for uid in [0xb0, 0xb1] {
        let (mut p, _) = Peer::hello(server.addr, uid, "broken");
        for f in &frames {
            let _ = p.try_send(f);
        }
        let closed = p.expect_closed();
        assert_eq!(
            closed.last_ack, 0,
            "nothing was durable, nothing may be acknowledged"
        );
        let error = closed.error.as_deref().unwrap_or("");
        assert!(error.contains("store write failed"), "{closed:?}");
        assert!(
            error.contains("cannot create session directory"),
            "{closed:?}"
        );
    }
    write_more_to(server.addr, 0xb2, "fine", &frames);
    // Nothing was written before the segment existed, so once the cause is gone the session
    // takes data again, without a restart.
    std::fs::remove_file(dir.path().join("broken")).unwrap();
    write_more_to(server.addr, 0xb3, "broken", &frames);
    server.stop();
    let s = stored(dir.path());
    assert_eq!(s.seqs.len(), 2);
    assert_eq!(s.seqs[&(0xb2, 0)], vec![0, 1, 2, 3, 4]);
    assert_eq!(s.seqs[&(0xb3, 0)], vec![0, 1, 2, 3, 4]);
    assert!(!s.seqs.contains_key(&(0xb0, 0)) && !s.seqs.contains_key(&(0xb1, 0)));
}

fn write_more_to(addr: SocketAddr, uid: u64, session: &str, frames: &[Vec<u8>]) {
    let (mut p, _) = Peer::hello(addr, uid, session);
    for f in frames {
        p.send(f);
    }
    p.wait_ack(frames.len() as u64);
    p.goodbye(frames.len() as u64);
}

/// D4 (issue 12): one flipped bit inside an acknowledged record of the last segment is not a
/// torn tail. Recovery deletes nothing, keeps the damaged bytes in a quarantine file and
/// reports them; inspect and the reader merge uses read every intact record after it.
#[test]
fn flipped_bit_mid_segment_skips_one_record_and_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let uid = 0x7D;
    let (frames, _) = stream_frames(0, 24, 200);
    write_session(dir.path(), uid, "flip", &frames);
    let before = stored(dir.path());
    assert!(before.raw.len() >= 20, "{} records", before.raw.len());
    let seg = last_segment(dir.path(), "flip");
    let len = std::fs::metadata(&seg).unwrap().len();
    // Offset of record 2 (0-based: the third), and a bit flipped in the middle of it.
    let header_len = p5_logserver::reader::SegmentReader::open(&seg)
        .unwrap()
        .header_len();
    let at = header_len
        + before.raw[..2]
            .iter()
            .map(|r| r.len() as u64 + 8)
            .sum::<u64>();
    let rec_len = before.raw[2].len() as u64 + 8;
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[(at + rec_len / 2) as usize] ^= 0x10;
    std::fs::write(&seg, &bytes).unwrap();
    let mut want = before.raw.clone();
    want.remove(2);

    // Readers (inspect, merge's reader) see every intact record after the damage.
    let damaged = stored(dir.path());
    assert!(
        damaged.raw == want,
        "every intact record is read: {} of {} records",
        damaged.raw.len(),
        want.len()
    );
    assert_eq!(damaged.faults, 1, "the damaged record is reported");
    eprintln!(
        "flipped bit in record 2 of {}: {} intact records read after it",
        before.raw.len(),
        damaged.raw.len() - 2
    );
    let summary = inspect(dir.path()).unwrap();
    assert_eq!(summary.sessions[0].faults.len(), 1);
    assert_eq!(summary.sessions[0].faults[0].offset, at);
    assert_eq!(summary.sessions[0].records, want.len() as u64);

    // Recovery truncates nothing and quarantines the damaged record's bytes.
    let server = InProc::start(config(dir.path()));
    assert_eq!(
        server.recovery.repairs().count(),
        0,
        "{:?}",
        server.recovery
    );
    assert_eq!(server.recovery.sessions[0].faults.len(), 1);
    server.stop();
    assert_eq!(
        std::fs::metadata(&seg).unwrap().len(),
        len,
        "nothing deleted"
    );
    let q = p5_logserver::recover::quarantine_dir(&dir.path().join("flip"));
    let files: Vec<_> = std::fs::read_dir(&q).unwrap().flatten().collect();
    assert_eq!(files.len(), 1, "one quarantine file in {}", q.display());
    let kept = std::fs::read(files[0].path()).unwrap();
    assert!(kept[..] == bytes[at as usize..(at + rec_len) as usize]);
    assert!(
        stored(dir.path()).raw == want,
        "still readable after recovery"
    );
}

/// D2 (issue 12): peers that send an 8-byte header claiming an 8 MiB frame and then nothing
/// (32 before Hello, 32 after a valid Hello) must not hold the in-flight budget: a real
/// client's first ack still arrives promptly.
#[test]
fn lying_headers_do_not_starve_a_real_client() {
    let dir = tempfile::tempdir().unwrap();
    let server = InProc::start(config(dir.path()));
    let mut lie = Vec::new();
    lie.extend_from_slice(&frame::MAX_FRAME_LEN.to_le_bytes());
    lie.extend_from_slice(&0u32.to_le_bytes());
    let mut attackers = Vec::new();
    for i in 0..32u64 {
        let (mut p, _) = Peer::hello(server.addr, 0xA000 + i, "victim");
        p.send(&lie);
        attackers.push(p);
    }
    for _ in 0..32 {
        let mut p = Peer::connect(server.addr);
        let _ = p.try_send(&lie);
        attackers.push(p);
    }
    // Let the server read every lying header.
    std::thread::sleep(Duration::from_millis(300));
    let t0 = std::time::Instant::now();
    let mut p = Peer::connect(server.addr);
    p.s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    p.send(&hello_frame(0xB0B, "victim", Caps::ALL));
    let (ty, _) = p.read_frame().expect("hello ack");
    assert_eq!(ty, FrameType::HelloAck as u8);
    let (frames, _) = stream_frames(0, 1, 10);
    p.send(&frames[0]);
    p.wait_ack(1);
    // The 5 s read timeout above is the hang guard; no assertion measures time.
    eprintln!(
        "with 64 lying peers, a real client's first ack took {:?}",
        t0.elapsed()
    );
    p.goodbye(1);
    drop(attackers);
    server.stop();
}

/// Issue 12: the rule for unknown frame types after Hello (docs/wire.md): a protocol error,
/// answered with an `Error` frame naming the type before the connection closes; what was
/// acknowledged before stays stored.
#[test]
fn unknown_frame_type_after_hello_is_answered_with_an_error_frame() {
    let dir = tempfile::tempdir().unwrap();
    let server = InProc::start(config(dir.path()));
    let (mut p, _) = Peer::hello(server.addr, 0x0E, "unknown");
    let (frames, _) = stream_frames(0, 1, 10);
    p.send(&frames[0]);
    p.wait_ack(1);
    p.send(&encode_raw(0x55, b"from the future"));
    let c = p.expect_closed();
    let e = c.error.expect("an Error frame before the close");
    assert!(e.contains("0x55"), "{e}");
    server.stop();
}

fn encode_raw(ty: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::encode(&mut out, ty, body);
    out
}

/// Every ping is answered at once with an ack (the count durable so far): the client echoes
/// its `t_s` in its next ping, so a burst of pings gives round trips whose both ends are awake.
#[test]
fn pings_are_answered_at_once_with_an_ack() {
    let dir = tempfile::tempdir().unwrap();
    let server = InProc::start(config(dir.path()));
    let (mut p, hello_ack) = Peer::hello(server.addr, 0x9a11, "pong");
    let mut last_t_s = hello_ack.t_s;
    for round in 0..3u64 {
        p.send(&ping_frame(round));
        let (ty, body) = p.read_frame().expect("an answer to the ping");
        assert_eq!(
            ty,
            FrameType::Ack as u8,
            "{}",
            String::from_utf8_lossy(&body)
        );
        let a = Ack::decode_body(&body).unwrap();
        assert_eq!(a.count, 0, "no data frame was sent");
        assert!(a.t_s >= last_t_s, "ack t_s {} before {last_t_s}", a.t_s);
        last_t_s = a.t_s;
    }
    let (frames, _) = stream_frames(0, 3, 50);
    for f in &frames {
        p.send(f);
    }
    let n = frames.len() as u64;
    p.wait_ack(n);
    p.send(&ping_frame(9));
    let (ty, body) = p.read_frame().expect("an answer to the ping");
    assert_eq!(ty, FrameType::Ack as u8);
    assert_eq!(Ack::decode_body(&body).unwrap().count, n);
    p.goodbye(n);
    server.stop();
}

/// Clock pings over UDP: a process whose hello asked for them gets the capability, and each
/// of its datagram pings to the listener's address is answered with a pong at once and
/// recorded as a ping sample, echo included, without a sync of its own. A datagram that does
/// not decode, one from a process without a connection, and any after its connection ended
/// get no answer and leave nothing in the store.
#[test]
fn pings_over_udp_are_answered_and_recorded_while_connected() {
    use p5_wire::datagram::{DatagramPing, DatagramPong};
    let dir = tempfile::tempdir().unwrap();
    let server = InProc::start(config(dir.path()));
    let (p, hello_ack) = Peer::hello(server.addr, 0xd6a1, "udp");
    assert!(hello_ack.caps.contains(Caps::DATAGRAM_PINGS));
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.connect(server.addr).unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let ping = |uid: u64, t_p: u64, echo: u64| DatagramPing {
        process_uid: uid,
        ping: Ping {
            t_p,
            echo_t_s: echo,
            echo_t_p: echo + 1,
        },
    };
    let mut buf = [0u8; 64];
    let mut last = hello_ack.t_s;
    for round in 1..=5u64 {
        udp.send(&ping(0xd6a1, round, last).encode()).unwrap();
        let n = udp.recv(&mut buf).expect("a pong");
        let pong = DatagramPong::decode(&buf[..n]).unwrap();
        assert_eq!((pong.process_uid, pong.t_p), (0xd6a1, round));
        assert!(pong.t_s >= last, "pong t_s {} before {last}", pong.t_s);
        last = pong.t_s;
    }
    // Unanswered: garbage, a short ping, a process that never connected.
    udp.send(b"not a ping at all, but long enough").unwrap();
    udp.send(&ping(0xd6a1, 6, 0).encode()[..20]).unwrap();
    udp.send(&ping(0x5afe, 7, 0).encode()).unwrap();
    assert!(udp.recv(&mut buf).is_err(), "nothing answers those");
    p.goodbye(0);
    // The connection is gone, and with it the process's right to ping.
    std::thread::sleep(Duration::from_millis(100));
    udp.send(&ping(0xd6a1, 8, 0).encode()).unwrap();
    assert!(
        udp.recv(&mut buf).is_err(),
        "no answer after the connection ended"
    );
    // Nothing was to be acknowledged: the records were written as they came and synced once,
    // at the end.
    let summary = server.stop();
    let (_, w) = summary.sessions.iter().find(|(n, _)| n == "udp").unwrap();
    assert!(w.records >= 7 && w.commits == 1, "{w:?}");
    let s = stored(dir.path());
    assert_eq!(s.samples[&0xd6a1], vec![SampleSource::Ping as u8; 5]);
    assert!(!s.samples.contains_key(&0x5afe));
}
