//! Integration tests of the runtime. The runtime is a per-process global, so each test runs
//! helper processes — the `load` example, or a C program built against `include/p5.h` and
//! the static library — and checks what they produced: spool files decoded with `p5_wire`,
//! or what an in-test log-server peer (real handshake, acks, a deliberate disconnect)
//! received. The helpers are (re)built by `cargo build` from the test (cheap when fresh).

use p5_wire::data::{self, Ack, DataHeader, EventsFrame, Ping, StreamClose, StreamOpen};
use p5_wire::frame::{self, FrameType, Frames};
use p5_wire::{Caps, CommOp, Endpoint, Event, Hello, HelloAck, RuntimeKind, SocketProto};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

// ---------------------------------------------------------------- helper binaries

/// `target/<profile>`, derived from this test executable (`target/<profile>/deps/runtime-*`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent()
        .and_then(Path::parent)
        .expect("test executable lives in target/<profile>/deps")
        .to_path_buf()
}

/// Builds the library (static and shared) and the `load` example once per test run, so the
/// helpers are never stale: `cargo test --test runtime` alone does not rebuild examples.
fn build_helpers() {
    static BUILT: std::sync::Once = std::sync::Once::new();
    BUILT.call_once(|| {
        let profile = profile_dir();
        let target = profile.parent().expect("target dir");
        let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.args(["build", "-p", "p5-runtime", "--lib", "--example", "load"])
            .env("CARGO_TARGET_DIR", target)
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if profile.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let st = cmd.status().expect("run cargo build");
        assert!(st.success(), "cargo build of the test helpers failed");
    });
}

/// The `load` example.
fn load_bin() -> PathBuf {
    build_helpers();
    profile_dir().join("examples/load")
}

/// The static library.
fn staticlib() -> PathBuf {
    build_helpers();
    profile_dir().join("libp5_runtime.a")
}

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("p5-runtime-test-")
        .tempdir()
        .expect("temp dir")
}

/// A `load` command with a clean p5 environment; `args` are split at whitespace.
fn load(envs: &[(&str, &str)], args: &str) -> Command {
    let mut c = Command::new(load_bin());
    for k in [
        "P5_DISABLE",
        "P5_LOGSERVER",
        "P5_DIR",
        "P5_SESSION",
        "P5_EXIT_TIMEOUT_MS",
        "P5_RING_SLOTS",
        "P5_FLUSH_MS",
        "P5_CLOCK",
        "P5_DISCARD",
    ] {
        c.env_remove(k);
    }
    c.envs(envs.iter().copied()).args(args.split_whitespace());
    c
}

fn run_ok(mut c: Command) -> Output {
    let out = c.output().expect("spawn helper");
    assert!(
        out.status.success(),
        "helper failed: {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Value of `key=` on the line starting with `tag`.
fn field(stdout: &str, tag: &str, key: &str) -> u64 {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(tag))
        .unwrap_or_else(|| panic!("no {tag} line in {stdout}"));
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line}"))
}

fn spool_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "p5spool"));
    v.sort();
    v
}

// ---------------------------------------------------------------- decoding

/// One stream reassembled from data frames (deduplicated by sequence number).
#[derive(Debug, Default)]
struct Stream {
    open: Option<StreamOpen>,
    events: BTreeMap<u64, (u64, Vec<Event>)>,
    close: Option<StreamClose>,
}

impl Stream {
    fn events(&self) -> Vec<Event> {
        self.events.values().flat_map(|(_, e)| e.clone()).collect()
    }

    /// Checks the stream is complete: open at 0, events at 1.., close last, no gap.
    fn assert_complete(&self, what: &str) {
        assert!(self.open.is_some(), "{what}: no StreamOpen");
        let close = self
            .close
            .unwrap_or_else(|| panic!("{what}: no StreamClose"));
        let seqs: Vec<u64> = self.events.keys().copied().collect();
        let want: Vec<u64> = (1..close.header.seq).collect();
        assert_eq!(seqs, want, "{what}: sequence gap");
        let mut last = 0;
        for (_, (dropped, _)) in self.events.iter() {
            assert!(*dropped >= last, "{what}: dropped went backwards");
            last = *dropped;
        }
        assert!(close.dropped >= last);
    }
}

/// Everything one process sent, from a spool file or from server connections.
#[derive(Debug, Default)]
struct Recording {
    hello: Option<Hello>,
    streams: BTreeMap<u32, Stream>,
    goodbye: bool,
    data_frames: usize,
    /// (stream, seq, t_p) of every data frame in arrival order.
    arrivals: Vec<(u32, u64, u64)>,
}

impl Recording {
    fn add_frame(&mut self, ty: u8, body: &[u8]) {
        data::validate_client_frame(ty, body).expect("frame validates");
        match FrameType::from_u8(ty).expect("known frame type") {
            FrameType::Hello => {
                let h = Hello::decode_body(body).unwrap();
                if let Some(old) = &self.hello {
                    assert_eq!(old.identity, h.identity, "identity changed between hellos");
                }
                self.hello = Some(h);
            }
            FrameType::StreamOpen => {
                let o = StreamOpen::decode_body(body).unwrap();
                assert_eq!(o.header.seq, 0);
                let h = o.header;
                self.arrive(h);
                self.streams.entry(h.stream).or_default().open = Some(o);
            }
            FrameType::Events => {
                let f = EventsFrame::parse(body).unwrap();
                self.arrive(f.header);
                let ev: Vec<Event> = f.events().unwrap().map(|e| e.unwrap()).collect();
                let s = self.streams.entry(f.header.stream).or_default();
                if let Some((_, old)) = s.events.get(&f.header.seq) {
                    assert_eq!(old, &ev, "a resent frame differs");
                }
                s.events.insert(f.header.seq, (f.dropped, ev));
            }
            FrameType::StreamClose => {
                let c = StreamClose::decode_body(body).unwrap();
                self.arrive(c.header);
                self.streams.entry(c.header.stream).or_default().close = Some(c);
            }
            FrameType::Goodbye => self.goodbye = true,
            FrameType::Ping => {}
            other => panic!("unexpected frame {other:?} from a client"),
        }
    }

    fn arrive(&mut self, h: DataHeader) {
        self.data_frames += 1;
        self.arrivals.push((h.stream, h.seq, h.t_p));
    }

    fn from_spool(path: &Path) -> Recording {
        let bytes = std::fs::read(path).expect("read spool");
        let mut r = Recording::default();
        for (i, f) in Frames::new(&bytes).enumerate() {
            let f = f.unwrap_or_else(|(at, e)| panic!("spool corrupt at {at}: {e}"));
            if i == 0 {
                assert_eq!(f.ty, FrameType::Hello as u8, "spool must start with Hello");
            }
            r.add_frame(f.ty, f.body);
        }
        r
    }

    fn hello(&self) -> &Hello {
        self.hello.as_ref().expect("a hello")
    }

    fn stream_named(&self, name: &str) -> &Stream {
        self.streams
            .values()
            .find(|s| s.open.as_ref().is_some_and(|o| o.name == name))
            .unwrap_or_else(|| panic!("no stream named {name}"))
    }

    /// The stream holding events with sensor prefix `prefix` (`sensor >> 32`).
    fn stream_with_prefix(&self, prefix: u64) -> &Stream {
        self.streams
            .values()
            .find(|s| {
                s.events()
                    .first()
                    .is_some_and(|e| e.sensor() >> 32 == prefix)
            })
            .unwrap_or_else(|| panic!("no stream with prefix {prefix:#x}"))
    }
}

/// Checks `events` is exactly `n` enter/exit pairs with sensors `prefix << 32 | i`, in order,
/// with non-decreasing times.
fn assert_pairs(events: &[Event], prefix: u64, n: u64) {
    assert_eq!(
        events.len() as u64,
        2 * n,
        "event count for prefix {prefix:#x}"
    );
    let mut last_t = 0;
    for (i, pair) in events.chunks(2).enumerate() {
        let id = prefix << 32 | i as u64;
        match pair {
            [
                Event::Enter { t: t0, sensor: s0 },
                Event::Exit { t: t1, sensor: s1 },
            ] => {
                assert_eq!((*s0, *s1), (id, id), "pair {i} of prefix {prefix:#x}");
                assert!(*t0 >= last_t && t1 >= t0, "time went backwards at pair {i}");
                last_t = *t1;
            }
            other => panic!("pair {i}: unexpected {other:?}"),
        }
    }
}

// ---------------------------------------------------------------- a log-server peer

/// What the peer does with a connection.
#[derive(Debug, Clone, Copy)]
enum Policy {
    /// Acknowledge every data frame at once.
    AckAll,
    /// Read this many data frames, acknowledge none, close.
    DropAfter(usize),
}

/// One connection as the peer saw it: (type, body) of each client frame.
type ConnLog = Vec<(u8, Vec<u8>)>;

fn read_frame(s: &mut TcpStream) -> Option<(u8, Vec<u8>)> {
    let mut h = [0u8; frame::HEADER_LEN];
    s.read_exact(&mut h).ok()?;
    let (len, crc) = frame::parse_header(&h, frame::MAX_FRAME_LEN).expect("valid header");
    let mut payload = vec![0u8; len as usize];
    s.read_exact(&mut payload).ok()?;
    let f = frame::check(crc, &payload).expect("valid checksum");
    Some((f.ty, f.body.to_vec()))
}

fn serve(mut s: TcpStream, policy: Policy, echoed: &mpsc::Sender<()>) -> ConnLog {
    let mut log = Vec::new();
    let (ty, body) = read_frame(&mut s).expect("hello");
    assert_eq!(ty, FrameType::Hello as u8);
    let hello = Hello::decode_body(&body).expect("hello decodes");
    log.push((ty, body));
    let ack = HelloAck {
        version: 1,
        caps: hello.caps.intersect(Caps::ALL),
        server_run_id: 7,
        t_s: 1,
    };
    let mut out = Vec::new();
    frame::encode(&mut out, FrameType::HelloAck as u8, &ack.encode_body());
    s.write_all(&out).expect("send hello ack");
    let mut data = 0u64;
    while let Some((ty, body)) = read_frame(&mut s) {
        let is_data = FrameType::from_u8(ty).is_some_and(FrameType::is_data);
        let goodbye = ty == FrameType::Goodbye as u8;
        if ty == FrameType::Ping as u8 && Ping::decode_body(&body).is_ok_and(|p| p.echo_t_s != 0) {
            let _ = echoed.send(());
        }
        log.push((ty, body));
        if is_data {
            data += 1;
            match policy {
                Policy::DropAfter(n) if data as usize >= n => return log,
                Policy::DropAfter(_) => {}
                Policy::AckAll => {
                    let mut a = Vec::new();
                    let ack = Ack {
                        count: data,
                        t_s: 1000 + data,
                    };
                    frame::encode(&mut a, FrameType::Ack as u8, &ack.encode_body());
                    if s.write_all(&a).is_err() {
                        break;
                    }
                }
            }
        }
        if goodbye {
            break;
        }
    }
    log
}

/// Serves connections on `l` with the given policies in turn (the last repeats) until a
/// connection ends with Goodbye; returns every connection's log, and a channel that gets a
/// message for each ping echoing an ack.
fn spawn_server(
    l: TcpListener,
    policies: Vec<Policy>,
) -> (mpsc::Receiver<Vec<ConnLog>>, mpsc::Receiver<()>) {
    let (tx, rx) = mpsc::channel();
    let (echo_tx, echo_rx) = mpsc::channel();
    thread::spawn(move || {
        let mut logs = Vec::new();
        for i in 0.. {
            let Ok((s, _)) = l.accept() else { break };
            let p = policies[i.min(policies.len() - 1)];
            let log = serve(s, p, &echo_tx);
            let done = log.iter().any(|(t, _)| *t == FrameType::Goodbye as u8);
            logs.push(log);
            if done {
                break;
            }
        }
        let _ = tx.send(logs);
    });
    (rx, echo_rx)
}

fn recording_of(logs: &[ConnLog]) -> Recording {
    let mut r = Recording::default();
    for log in logs {
        for (ty, body) in log {
            r.add_frame(*ty, body);
        }
    }
    r
}

// ---------------------------------------------------------------- tests

#[test]
fn local_mode_records_every_event_in_thread_order() {
    let dir = tempdir();
    let d = dir.path().to_str().unwrap();
    let out = run_ok(load(
        &[("P5_DIR", d), ("P5_SESSION", "orders")],
        "--threads 4 --events 5000 --rounds 5 --pause-ms 5 --net",
    ));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let pid = field(&stdout, "stats", "pid");
    let files = spool_files(dir.path());
    assert_eq!(files.len(), 1, "one output file: {files:?}");
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    let r = Recording::from_spool(&files[0]);
    let h = r.hello();
    assert_eq!(h.identity.pid as u64, pid);
    assert_eq!(
        name,
        format!("orders-{pid}-{:016x}.p5spool", h.identity.process_uid)
    );
    assert_eq!(h.identity.session, "orders");
    assert_eq!(h.identity.runtime, RuntimeKind::Rust as u8);
    assert_eq!(h.identity.program, "load");
    assert!(h.identity.argv.iter().any(|a| a == "--net"));
    assert!(r.goodbye, "clean exit ends with Goodbye");
    for t in 0..4 {
        let s = r.stream_named(&format!("load-{t}"));
        s.assert_complete(&format!("thread {t}"));
        assert_pairs(&s.events(), t, 5000);
        assert_eq!(s.close.unwrap().dropped, 0);
        assert!(s.open.as_ref().unwrap().tid > 0);
    }
    // The main thread's UDP exchange, counter and mark.
    let main = r
        .streams
        .values()
        .find(|s| s.events().iter().any(|e| matches!(e, Event::Comm { .. })))
        .expect("main thread stream");
    let ev = main.events();
    assert!(
        ev.len() < 40,
        "main thread recorded only the exchanges: {ev:?}"
    );
    main.assert_complete("main thread");
    let socks: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            Event::Socket { proto, local, .. } => Some((*proto, local.clone())),
            _ => None,
        })
        .collect();
    // Two UDP sockets; the TCP listener (described when bound), the connecting and the
    // accepted stream.
    assert_eq!(socks.len(), 5, "each socket described once: {ev:?}");
    assert!(socks[..2].iter().all(|(p, _)| *p == SocketProto::Udp));
    assert!(socks[2..].iter().all(|(p, _)| *p == SocketProto::Tcp));
    let (a, b) = (socks[0].1.clone(), socks[1].1.clone());
    let comm = |sensor: u64, op: CommOp| -> Vec<(i64, Endpoint)> {
        ev.iter()
            .filter_map(|e| match e {
                Event::Comm {
                    sensor: s,
                    op: o,
                    result,
                    peer,
                    ..
                } if *s == sensor && *o == op => Some((*result, peer.clone())),
                _ => None,
            })
            .collect()
    };
    // UDP: the datagram names its receiver when sent and its sender when received.
    assert_eq!(comm(0x5E, CommOp::SendTo), [(5, b)]);
    assert_eq!(comm(0x5E, CommOp::RecvFrom), [(5, a)]);
    // A poll before the datagram was sent waited out its 20 ms; the one after found it.
    assert_eq!(
        comm(0x5F, CommOp::Wait),
        [(0, Endpoint::None), (1, Endpoint::None)]
    );
    let waits: Vec<u64> = ev
        .iter()
        .filter_map(|e| match e {
            Event::Comm {
                sensor: 0x5F,
                duration,
                fd: -1,
                ..
            } => Some(*duration),
            _ => None,
        })
        .collect();
    assert!(
        waits[0] >= 20_000_000,
        "the idle poll lasted {} ns",
        waits[0]
    );
    // TCP: connect, accept, a 4-byte request and reply (read_exact may take several reads).
    let listen = socks[2].1.clone();
    assert_eq!(
        socks[4].1, listen,
        "the accepted stream's local end is the listener's"
    );
    assert_eq!(comm(0x7C, CommOp::Connect), [(0, listen.clone())]);
    assert_eq!(comm(0x7C, CommOp::Accept).len(), 1);
    let sent: Vec<i64> = comm(0x7C, CommOp::Send).iter().map(|c| c.0).collect();
    assert_eq!(sent, [4, 4]);
    let received: i64 = comm(0x7C, CommOp::Recv).iter().map(|c| c.0).sum();
    assert_eq!(received, 8);
    // Every wrapped socket is closed by drop: two UDP, two TCP streams and the listener.
    assert_eq!(
        comm(0x5E, CommOp::Close).len() + comm(0x7C, CommOp::Close).len(),
        5
    );
    assert!(ev.iter().any(|e| matches!(
        e,
        Event::Counter {
            sensor: 0xC0,
            value: -5,
            ..
        }
    )));
    assert!(
        ev.iter()
            .any(|e| matches!(e, Event::Mark { sensor: 0x3A, .. }))
    );
    // Times are relative to the process start: the first event is within the run.
    assert!(ev.iter().all(|e| e.time() < 60_000_000_000));
}

#[test]
fn full_rings_count_every_lost_event_in_band() {
    let dir = tempdir();
    let d = dir.path().to_str().unwrap();
    run_ok(load(
        &[
            ("P5_DIR", d),
            ("P5_RING_SLOTS", "64"),
            ("P5_FLUSH_MS", "500"),
        ],
        "--threads 2 --events 20000",
    ));
    let files = spool_files(dir.path());
    let r = Recording::from_spool(&files[0]);
    for t in 0..2 {
        let s = r.stream_named(&format!("load-{t}"));
        s.assert_complete(&format!("thread {t}"));
        let ev = s.events();
        let dropped = s.close.unwrap().dropped;
        assert_eq!(
            ev.len() as u64 + dropped,
            40_000,
            "kept + dropped = recorded"
        );
        // What was kept is still in order.
        let ids: Vec<u64> = ev.iter().map(|e| e.sensor() & 0xffff_ffff).collect();
        assert!(ids.windows(2).all(|w| w[0] <= w[1]));
        eprintln!("thread {t}: kept {}, dropped {dropped}", ev.len());
    }
}

#[test]
fn forked_child_is_a_new_process() {
    let dir = tempdir();
    let d = dir.path().to_str().unwrap();
    let out = run_ok(load(
        &[("P5_DIR", d)],
        "--threads 1 --events 100 --fork 300",
    ));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let parent_pid = field(&stdout, "stats", "pid");
    let child_pid = field(&stdout, "child", "pid");
    let files = spool_files(dir.path());
    assert_eq!(files.len(), 2, "{files:?}");
    let recs: Vec<Recording> = files.iter().map(|f| Recording::from_spool(f)).collect();
    let parent = recs
        .iter()
        .find(|r| r.hello().identity.pid as u64 == parent_pid)
        .expect("parent file");
    let child = recs
        .iter()
        .find(|r| r.hello().identity.pid as u64 == child_pid)
        .expect("child file");
    let (pi, ci) = (&parent.hello().identity, &child.hello().identity);
    assert_eq!(ci.ppid, pi.pid);
    assert_ne!(ci.process_uid, pi.process_uid);
    assert!(
        ci.start_mono_ns > pi.start_mono_ns,
        "child starts at the fork"
    );
    assert!(child.goodbye, "child flushed at exit");
    // The child has exactly its own events; the parent's stay with the parent.
    assert_eq!(child.streams.len(), 1);
    let cs = child.stream_with_prefix(0xC);
    assert_pairs(&cs.events(), 0xC, 300);
    assert_pairs(&parent.stream_named("load-0").events(), 0, 100);
    assert!(
        parent
            .streams
            .values()
            .all(|s| s.events().iter().all(|e| e.sensor() >> 32 != 0xC))
    );
}

#[test]
fn disabled_runtime_writes_nothing() {
    let dir = tempdir();
    let d = dir.path().to_str().unwrap();
    let out = run_ok(load(&[("P5_DIR", d), ("P5_DISABLE", "1")], "--events 100"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("disabled"));
    assert_eq!(field(&stdout, "stats", "events"), 0);
    assert!(spool_files(dir.path()).is_empty());
}

#[test]
fn server_acks_and_resend_after_reconnect() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    // First connection: take three data frames, acknowledge nothing, hang up.
    let (rx, echoed) = spawn_server(l, vec![Policy::DropAfter(3), Policy::AckAll]);
    let dir = tempdir();
    let d = dir.path().to_str().unwrap();
    let mut child = load(
        &[
            ("P5_LOGSERVER", &addr),
            ("P5_DIR", d),
            ("P5_EXIT_TIMEOUT_MS", "30000"),
        ],
        "--threads 2 --events 3000 --rounds 3 --pause-ms 30 --wait-stdin",
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::null())
    .spawn()
    .unwrap();
    // Keep the process alive until a ping has echoed an ack (pings go every 500 ms); the
    // bound only keeps a broken runtime from hanging the test.
    echoed
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("no ping echoed an ack");
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.wait().unwrap().success());
    let logs = rx.recv().expect("server logs");
    assert!(logs.len() >= 2, "the runtime reconnected");
    let r = recording_of(&logs);
    assert!(r.goodbye);
    for t in 0..2 {
        let s = r.stream_named(&format!("load-{t}"));
        s.assert_complete(&format!("thread {t}"));
        assert_pairs(&s.events(), t, 3000);
    }
    assert_pairs(&r.stream_with_prefix(0xB).events(), 0xB, 3000);
    // The frames the first connection never acknowledged came again, restamped.
    let first = recording_of(&logs[..1]);
    let later = recording_of(&logs[1..]);
    assert_eq!(first.arrivals.len(), 3);
    for (stream, seq, t_p) in &first.arrivals {
        let again = later
            .arrivals
            .iter()
            .find(|(s, q, _)| s == stream && q == seq)
            .unwrap_or_else(|| panic!("frame {stream}/{seq} was not resent"));
        assert!(*t_p > 0 && again.2 > *t_p, "send time restamped on resend");
    }
    // Pings echo the server time of an ack (1000 + count) and when it arrived.
    let echoes: Vec<Ping> = logs[1..]
        .iter()
        .flatten()
        .filter(|(t, _)| *t == FrameType::Ping as u8)
        .map(|(_, b)| Ping::decode_body(b).unwrap())
        .filter(|p| p.echo_t_s != 0)
        .collect();
    assert!(!echoes.is_empty(), "no ping echoed an ack");
    assert!(
        echoes
            .iter()
            .all(|p| p.echo_t_s > 1000 && p.echo_t_p > 0 && p.t_p >= p.echo_t_p)
    );
    // Everything was acknowledged, so no spool is left behind.
    assert!(
        spool_files(dir.path()).is_empty(),
        "{:?}",
        spool_files(dir.path())
    );
}

#[test]
fn spool_is_replayed_when_the_server_appears() {
    // A port nobody listens on yet.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let dir = tempdir();
    let d = dir.path().to_str().unwrap();
    let mut cmd = load(
        &[
            ("P5_LOGSERVER", &addr),
            ("P5_DIR", d),
            ("P5_EXIT_TIMEOUT_MS", "30000"),
        ],
        "--threads 2 --events 1000 --flush --wait-stdin",
    );
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    for l in lines.by_ref() {
        let l = l.unwrap();
        seen.push(l.clone());
        if l.starts_with("phase1") {
            break;
        }
    }
    assert!(seen.iter().any(|l| l == "flushed true"), "{seen:?}");
    let files = spool_files(dir.path());
    assert_eq!(files.len(), 1, "server absent: spooled");
    let spooled = Recording::from_spool(&files[0]);
    assert_pairs(&spooled.stream_named("load-0").events(), 0, 1000);
    // Now the server comes; the process records more and exits.
    let l = TcpListener::bind(&addr).expect("rebind the port");
    let (rx, _) = spawn_server(l, vec![Policy::AckAll]);
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(child.wait().unwrap().success(), "{rest:?}");
    let r = recording_of(&rx.recv().unwrap());
    assert_eq!(r.hello().identity, spooled.hello().identity);
    for t in 0..2 {
        let s = r.stream_named(&format!("load-{t}"));
        s.assert_complete(&format!("thread {t}"));
        assert_pairs(&s.events(), t, 1000);
    }
    assert_pairs(&r.stream_with_prefix(0xB).events(), 0xB, 1000);
    assert!(r.goodbye);
    assert!(
        spool_files(dir.path()).is_empty(),
        "acknowledged spool deleted"
    );
}

/// True if `/proc/net/unix` lists the runtime's announcement socket of `pid`.
fn announced(pid: u32) -> bool {
    std::fs::read_to_string("/proc/net/unix")
        .unwrap()
        .lines()
        .any(|l| l.ends_with(&format!(" @p5-runtime-{pid}")))
}

#[test]
fn a_recording_process_announces_itself_until_it_exits() {
    let dir = tempdir();
    let d = dir.path().to_str().unwrap();
    let mut child = load(&[("P5_DIR", d)], "--threads 1 --events 100 --wait-stdin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for l in lines.by_ref() {
        if l.unwrap().starts_with("phase1") {
            break;
        }
    }
    assert!(announced(pid), "@p5-runtime-{pid} while recording");
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    for _ in lines {}
    assert!(child.wait().unwrap().success());
    assert!(!announced(pid), "gone with the process");
    // A disabled runtime announces nothing.
    let mut child = load(
        &[("P5_DISABLE", "1")],
        "--threads 1 --events 100 --wait-stdin",
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    let pid = child.id();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for l in lines.by_ref() {
        if l.unwrap().starts_with("phase1") {
            break;
        }
    }
    assert!(!announced(pid), "disabled: no announcement");
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    for _ in lines {}
    assert!(child.wait().unwrap().success());
}

#[test]
fn sensor_before_the_environment_exists_does_not_misconfigure_the_runtime() {
    let dir = tempdir();
    let exe = dir.path().join("preinit");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let st = Command::new("gcc")
        .args(["-std=c11", "-Wall", "-O1", "-I"])
        .arg(root.join("include"))
        .arg(root.join("tests/c/preinit.c"))
        .arg(staticlib())
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-o"])
        .arg(&exe)
        .status()
        .expect("run gcc");
    assert!(st.success(), "gcc failed");
    let out_dir = dir.path().join("out");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut c = Command::new(&exe);
    c.env_remove("P5_LOGSERVER")
        .env_remove("P5_DISABLE")
        .env("P5_DIR", &out_dir)
        .env("TMPDIR", &tmp);
    run_ok(c);
    let files = spool_files(&out_dir);
    assert_eq!(files.len(), 1, "recorded into P5_DIR");
    assert!(
        spool_files(&tmp.join("p5")).is_empty(),
        "nothing in the default spool directory"
    );
    let r = Recording::from_spool(&files[0]);
    let sensors: Vec<u64> = r
        .streams
        .values()
        .flat_map(|s| s.events().iter().map(|e| e.sensor()).collect::<Vec<_>>())
        .collect();
    assert_eq!(
        sensors,
        vec![0x78, 0x78],
        "main's events, not the pre-init ones"
    );
}

#[test]
fn c_program_records_through_the_c_abi() {
    let dir = tempdir();
    let exe = dir.path().join("p5c");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let st = Command::new("gcc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-I"])
        .arg(root.join("include"))
        .arg(root.join("tests/c/main.c"))
        .arg(staticlib())
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-o"])
        .arg(&exe)
        .status()
        .expect("run gcc");
    assert!(st.success(), "gcc failed");
    let out_dir = dir.path().join("out");
    let mut c = Command::new(&exe);
    c.env_remove("P5_LOGSERVER")
        .env_remove("P5_DISABLE")
        .env("P5_DIR", &out_dir);
    let out = run_ok(c);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("events "));
    let files = spool_files(&out_dir);
    assert_eq!(files.len(), 1);
    let r = Recording::from_spool(&files[0]);
    assert_eq!(r.hello().identity.runtime, RuntimeKind::C as u8);
    // Worker threads: 1000 scopes each.
    let workers: Vec<&Stream> = r
        .streams
        .values()
        .filter(|s| s.events().first().is_some_and(|e| e.sensor() >= 0xA000))
        .collect();
    assert_eq!(workers.len(), 2);
    for w in workers {
        w.assert_complete("worker");
        let ev = w.events();
        assert_eq!(ev.len(), 2000);
        assert!(ev.chunks(2).all(|p| matches!(p,
            [Event::Enter { sensor: a, .. }, Event::Exit { sensor: b, .. }] if a == b)));
    }
    let main = r
        .streams
        .values()
        .find(|s| s.events().iter().any(|e| e.sensor() == 0x100))
        .expect("main stream");
    let ev = main.events();
    assert!(matches!(
        &ev[..4],
        [
            Event::Enter { sensor: 0x100, .. },
            Event::Mark { sensor: 0x101, .. },
            Event::Counter {
                sensor: 0x102,
                value: -7,
                ..
            },
            Event::Exit { sensor: 0x100, .. }
        ]
    ));
    let comm = |sensor: u64| -> Vec<(CommOp, i64, i64, Endpoint)> {
        ev.iter()
            .filter_map(|e| match e {
                Event::Comm {
                    sensor: s,
                    op,
                    fd,
                    result,
                    peer,
                    ..
                } if *s == sensor => Some((*op, *fd, *result, peer.clone())),
                _ => None,
            })
            .collect()
    };
    // Descriptors are reused after close, so a Socket event belongs to the comm event of the
    // same descriptor nearest to it in the stream.
    let socket_near = |fd: i64, sensor: u64| -> (SocketProto, Endpoint, Endpoint) {
        let at = ev
            .iter()
            .position(|e| e.sensor() == sensor && matches!(e, Event::Comm { .. }));
        let at = at.unwrap_or_else(|| panic!("no comm event of sensor {sensor:#x}"));
        ev.iter()
            .enumerate()
            .filter_map(|(i, e)| match e {
                Event::Socket {
                    fd: f,
                    proto,
                    local,
                    peer,
                    ..
                } if *f == fd => Some((i.abs_diff(at), (*proto, local.clone(), peer.clone()))),
                _ => None,
            })
            .min_by_key(|(d, _)| *d)
            .unwrap_or_else(|| panic!("no socket event for fd {fd}"))
            .1
    };
    let [(CommOp::Connect, cfd, 0, listen_addr)] = &comm(0x300)[..] else {
        panic!("connect: {:?}", comm(0x300))
    };
    let (proto, client_local, client_peer) = &socket_near(*cfd, 0x300);
    assert_eq!(*proto, SocketProto::Tcp);
    assert_eq!(client_peer, listen_addr);
    let [(CommOp::Accept, _, sfd, accepted_peer)] = &comm(0x301)[..] else {
        panic!("accept: {:?}", comm(0x301))
    };
    assert_eq!(accepted_peer, client_local);
    let (_, server_local, server_peer) = socket_near(*sfd, 0x301);
    assert_eq!(
        &server_peer, client_local,
        "server socket's peer is the client"
    );
    assert_eq!(&server_local, listen_addr);
    assert!(matches!(&comm(0x302)[..], [(CommOp::Send, fd, 5, Endpoint::None)] if fd == cfd));
    assert!(matches!(&comm(0x303)[..], [(CommOp::Recv, fd, 5, _)] if fd == sfd));
    assert!(
        matches!(&comm(0x304)[..], [(CommOp::Recv, 9999, r, _)] if *r == -(libc::EBADF as i64))
    );
    assert!(matches!(&comm(0x305)[..], [(CommOp::Write, _, 1, _)]));
    assert!(matches!(&comm(0x306)[..], [(CommOp::Read, _, 1, _)]));
    assert!(matches!(&comm(0x309)[..], [(CommOp::Shutdown, _, 0, _)]));
    assert_eq!(comm(0x30a).len(), 5);
    assert!(comm(0x30a).iter().all(|c| c.0 == CommOp::Close && c.2 == 0));
    assert!(
        matches!(&comm(0x30b)[..], [(CommOp::Close, 9999, r, _)] if *r == -(libc::EBADF as i64))
    );
    let [(CommOp::SendTo, u1, 5, to)] = &comm(0x307)[..] else {
        panic!("sendto: {:?}", comm(0x307))
    };
    let [(CommOp::RecvFrom, u2, 5, from)] = &comm(0x308)[..] else {
        panic!("recvfrom: {:?}", comm(0x308))
    };
    let (p1, u1_local, _) = socket_near(*u1, 0x307);
    let (p2, u2_local, _) = socket_near(*u2, 0x308);
    assert_eq!((p1, p2), (SocketProto::Udp, SocketProto::Udp));
    assert_eq!(&u1_local, from, "recvfrom names the sender");
    assert_eq!(&u2_local, to, "sendto names the receiver");
    assert!(matches!(&comm(0x30c)[..], [(CommOp::SendMsg, _, 4, p)] if p == to));
    assert!(matches!(&comm(0x30d)[..], [(CommOp::RecvMsg, _, 4, p)] if p == from));
    assert!(matches!(
        &comm(0x30e)[..],
        [(CommOp::Send, _, 17, Endpoint::None)]
    ));
    assert!(r.goodbye);
}

#[test]
fn c_waits_are_recorded_with_their_times() {
    let dir = tempdir();
    let exe = dir.path().join("p5wait");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let st = Command::new("gcc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-I"])
        .arg(root.join("include"))
        .arg(root.join("tests/c/wait.c"))
        .arg(staticlib())
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-o"])
        .arg(&exe)
        .status()
        .expect("run gcc");
    assert!(st.success(), "gcc failed");
    let out_dir = dir.path().join("out");
    let mut c = Command::new(&exe);
    c.env_remove("P5_LOGSERVER")
        .env_remove("P5_DISABLE")
        .env("P5_DIR", &out_dir);
    let out = run_ok(c);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let ep: i64 = stdout.trim().strip_prefix("ep ").unwrap().parse().unwrap();
    let files = spool_files(&out_dir);
    assert_eq!(files.len(), 1);
    let r = Recording::from_spool(&files[0]);
    let ev: Vec<Event> = r.streams.values().flat_map(|s| s.events()).collect();
    let wait = |sensor: u64| -> (i64, u64, i64) {
        let w: Vec<(i64, u64, i64)> = ev
            .iter()
            .filter_map(|e| match e {
                Event::Comm {
                    sensor: s,
                    op: CommOp::Wait,
                    fd,
                    duration,
                    result,
                    ..
                } if *s == sensor => Some((*fd, *duration, *result)),
                _ => None,
            })
            .collect();
        assert_eq!(w.len(), 1, "one wait of sensor {sensor:#x}: {w:?}");
        w[0]
    };
    const MS: u64 = 1_000_000;
    // An idle socket with a 20 ms timeout: the wait lasts at least 20 ms, nothing is ready.
    for (sensor, fd) in [
        (0x400, -1),
        (0x401, -1),
        (0x402, -1),
        (0x403, -1),
        (0x404, ep),
        (0x405, ep),
    ] {
        let (f, d, n) = wait(sensor);
        assert_eq!((f, n), (fd, 0), "sensor {sensor:#x}");
        assert!(
            (20 * MS..2_000 * MS).contains(&d),
            "sensor {sensor:#x} waited {d} ns"
        );
    }
    // A datagram is waiting: one ready descriptor, no timeout.
    for (sensor, fd) in [(0x406, -1), (0x407, ep)] {
        let (f, d, n) = wait(sensor);
        assert_eq!((f, n), (fd, 1), "sensor {sensor:#x}");
        assert!(d < 900 * MS, "sensor {sensor:#x} waited {d} ns");
    }
    let (f, _, n) = wait(0x408);
    assert_eq!(
        (f, n),
        (-1, -(libc::EBADF as i64)),
        "a failed wait records -errno"
    );
    // Waits describe no socket (the descriptor is an epoll instance or absent).
    assert!(
        !ev.iter()
            .any(|e| matches!(e, Event::Socket { fd, .. } if *fd == ep || *fd == -1))
    );
}

// ---------------------------------------------------------------- header vs exports

/// `(name, arity)` of each `p5_*` prototype in the header (inline helpers excluded).
fn header_prototypes(h: &str) -> BTreeSet<(String, usize)> {
    // Join lines, strip comments and preprocessor lines, split into declarations.
    let mut text = String::new();
    let mut in_comment = false;
    let mut in_cplusplus = false;
    for line in h.lines() {
        let l = line.trim();
        if l == "#ifdef __cplusplus" {
            in_cplusplus = true;
        }
        if in_cplusplus || l.starts_with('#') {
            in_cplusplus &= l != "#endif";
            continue;
        }
        let mut rest = line;
        loop {
            if in_comment {
                match rest.find("*/") {
                    Some(i) => {
                        rest = &rest[i + 2..];
                        in_comment = false;
                    }
                    None => break,
                }
            } else {
                match rest.find("/*") {
                    Some(i) => {
                        text.push_str(&rest[..i]);
                        rest = &rest[i + 2..];
                        in_comment = true;
                    }
                    None => {
                        text.push_str(rest);
                        break;
                    }
                }
            }
        }
        text.push(' ');
    }
    let mut out = BTreeSet::new();
    let mut depth = 0;
    let mut decl = String::new();
    for ch in text.chars() {
        match ch {
            '{' => {
                depth += 1;
                decl.clear();
            }
            '}' => {
                depth -= 1;
                decl.clear();
            }
            ';' if depth == 0 => {
                let d = std::mem::take(&mut decl);
                if d.contains("static") || !d.contains('(') {
                    continue;
                }
                let (head, args) = d.split_once('(').unwrap();
                let name = head
                    .trim_end()
                    .rsplit(|c: char| !c.is_alphanumeric() && c != '_')
                    .next()
                    .unwrap();
                if !name.starts_with("p5_") {
                    continue;
                }
                let args = args.trim_end().trim_end_matches(')').trim();
                let n = if args.is_empty() || args == "void" {
                    0
                } else {
                    args.split(',').count()
                };
                out.insert((name.to_string(), n));
            }
            _ if depth == 0 => decl.push(ch),
            _ => {}
        }
    }
    out
}

/// `(name, arity)` of each exported `extern "C" fn p5_*` in the Rust source.
fn rust_exports(src: &str) -> BTreeSet<(String, usize)> {
    let mut out = BTreeSet::new();
    let mut rest = src;
    while let Some(i) = rest.find("extern \"C\" fn p5_") {
        let after = &rest[i + "extern \"C\" fn ".len()..];
        let open = after.find('(').unwrap();
        let close = open + after[open..].find(')').unwrap();
        let params = after[open + 1..close].trim().trim_end_matches(',').trim();
        let n = if params.is_empty() {
            0
        } else {
            params.split(',').count()
        };
        out.insert((after[..open].to_string(), n));
        rest = &after[close..];
    }
    out
}

#[test]
fn header_declares_exactly_the_exported_functions() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let header = std::fs::read_to_string(root.join("include/p5.h")).unwrap();
    let mut src = String::new();
    let mut dirs = vec![root.join("src")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                src.push_str(&std::fs::read_to_string(p).unwrap());
            }
        }
    }
    let declared = header_prototypes(&header);
    let exported = rust_exports(&src);
    assert!(exported.len() >= 25, "parsed too few exports: {exported:?}");
    assert_eq!(declared, exported, "p5.h and the Rust exports differ");
    // The exported flag the inline helpers read.
    assert!(src.contains("export_name = \"p5_active\""));
    assert!(header.contains("extern unsigned char p5_active;"));
    // And the symbols really are in the static library.
    let nm = Command::new("nm")
        .args(["-g", "--defined-only"])
        .arg(staticlib())
        .output()
        .expect("run nm");
    let syms = String::from_utf8_lossy(&nm.stdout);
    for (name, _) in declared
        .iter()
        .map(|(n, a)| (n.as_str(), a))
        .chain([("p5_active", &0)])
    {
        assert!(
            syms.lines().any(|l| l.ends_with(&format!(" {name}"))),
            "{name} missing from libp5_runtime.a"
        );
    }
}

/// D1 (issue 12): a log server that accepts TCP but never answers the handshake (a
/// `kill -STOP`ped one) must be treated as absent: no event is dropped because connecting
/// stalled the drain loop, and exit waits once, bounded by `P5_EXIT_TIMEOUT_MS`.
#[test]
fn hung_server_does_not_stall_draining() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    l.set_nonblocking(true).unwrap();
    let holder = thread::spawn(move || {
        // Accepts and holds every connection, never reading or answering.
        let mut held = Vec::new();
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            match l.accept() {
                Ok((s, _)) => held.push(s),
                Err(_) => thread::sleep(Duration::from_millis(5)),
            }
        }
        held.len()
    });
    let dir = tempdir();
    let d = dir.path().to_str().unwrap();
    let t0 = std::time::Instant::now();
    let out = run_ok(load(
        &[
            ("P5_LOGSERVER", &addr),
            ("P5_DIR", d),
            ("P5_EXIT_TIMEOUT_MS", "500"),
        ],
        "--threads 1 --events 150000 --rounds 600 --pause-ms 1",
    ));
    let took = t0.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let attempts = holder.join().unwrap();
    drop(out);
    // Every event is in the spool, in order, and none was dropped.
    let files = spool_files(dir.path());
    assert_eq!(files.len(), 1, "one spool: {files:?}");
    let r = Recording::from_spool(&files[0]);
    let s = r.stream_named("load-0");
    s.assert_complete("thread 0");
    let kept = s.events().len();
    let dropped = s.close.unwrap().dropped;
    eprintln!(
        "hung server: {attempts} connection attempts, kept {kept}, dropped {dropped} of \
         300000 events, process took {took:?}"
    );
    assert!(attempts >= 1, "the runtime tried the hung server");
    assert_eq!(dropped, 0, "no event dropped while the server hangs");
    assert_eq!(kept, 300_000);
    assert!(
        took < Duration::from_secs(15),
        "exit waits once, bounded by the exit timeout (took {took:?})"
    );
}

/// Builds `tests/c/<name>.c` against the static library with extra gcc flags.
fn build_c(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let exe = dir.join(name);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let st = Command::new("gcc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O2"])
        .args(extra)
        .arg("-I")
        .arg(root.join("include"))
        .arg(root.join(format!("tests/c/{name}.c")))
        .arg(staticlib())
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-o"])
        .arg(&exe)
        .status()
        .expect("run gcc");
    assert!(st.success(), "gcc failed");
    exe
}

/// Runs `exe` in local-file mode with `envs`; returns its recording.
fn record_c(exe: &Path, out_dir: &Path, envs: &[(&str, &str)]) -> Recording {
    let mut c = Command::new(exe);
    c.env_remove("P5_LOGSERVER")
        .env_remove("P5_DISABLE")
        .env_remove("P5_THROTTLE")
        .env("P5_DIR", out_dir)
        .envs(envs.iter().copied());
    run_ok(c);
    let files = spool_files(out_dir);
    assert_eq!(files.len(), 1);
    Recording::from_spool(&files[0])
}

/// A `Calls` report: (calls, timed, recorded, pinned, t).
type CallsReport = (u64, u64, u64, u8, u64);

/// (enters of `sensor`, its last `Calls` report).
fn enters_and_calls(r: &Recording, sensor: u64) -> (usize, Option<CallsReport>) {
    let mut enters = 0;
    let mut calls = None;
    for s in r.streams.values() {
        for e in s.events() {
            match e {
                Event::Enter { sensor: x, .. } if x == sensor => enters += 1,
                Event::Calls {
                    sensor: x,
                    calls: c,
                    timed,
                    recorded,
                    pinned,
                    t,
                    ..
                } if x == sensor => calls = Some((c, timed, recorded, pinned, t)),
                _ => {}
            }
        }
    }
    (enters, calls)
}

/// Issue 21 item 1 (both guard builds: recorded calls written inline, the default, and
/// through the runtime, `-DP5_CALL_RECORD`): with `P5_THROTTLE=100,10us` the hot tiny scope is recorded 100 times
/// (plus long sampled calls) and then only counted — and its `Calls` report has every call;
/// the slow scope (mean above 10 µs) and the scope pinned on are recorded on every call; the
/// scope pinned off is counted from the first call; the scope that is long every 50th call
/// is throttled, yet each of its long calls is recorded. With `P5_THROTTLE=off` everything but the
/// pinned-off scope is recorded.
#[test]
fn hot_tiny_scopes_are_throttled_and_counted() {
    let dir = tempdir();
    for (k, flags) in [&[][..], &["-DP5_CALL_RECORD"][..]].into_iter().enumerate() {
        let sub = dir.path().join(k.to_string());
        std::fs::create_dir_all(&sub).unwrap();
        let exe = build_c(&sub, "throttle", flags);
        check_throttling(&exe, &sub);
    }
}

/// The assertions of [`hot_tiny_scopes_are_throttled_and_counted`] for one build.
fn check_throttling(exe: &Path, dir: &Path) {
    let r = record_c(exe, &dir.join("on"), &[("P5_THROTTLE", "100,10us")]);
    for s in r.streams.values() {
        s.assert_complete("throttle");
    }
    let (tiny, calls) = enters_and_calls(&r, 0x7100);
    let (calls, timed, recorded, pinned, t) = calls.expect("a Calls report for the hot scope");
    assert_eq!(calls, 50_000, "every call counted");
    assert_eq!(pinned, 0);
    assert!(t > 0, "throttled at a time in the run");
    // Every 64th call, and every call for 4096 after one that was long (preempted).
    assert!(
        (100..100 + 50_000 / 64 + 2 + 4096 * recorded).contains(&timed),
        "timed {timed}, {recorded} long"
    );
    // The thread's first event goes out of line (it registers the ring) and is not timed.
    assert_eq!(
        tiny as u64,
        1 + 100 + recorded,
        "recorded: the first 101 and the long ones"
    );
    let (on, on_calls) = enters_and_calls(&r, 0x7300);
    assert_eq!((on, on_calls), (50_000, None), "pinned on: always recorded");
    let (off, off_calls) = enters_and_calls(&r, 0x7400);
    let off_calls = off_calls.expect("a Calls report for the pinned-off scope");
    assert_eq!((off_calls.0, off_calls.3), (50_000, 1));
    assert_eq!(
        off as u64, off_calls.2,
        "pinned off: only long calls recorded"
    );
    // Long every 50th call: each long call is recorded, also after throttling (the first
    // 100 calls are recorded in full; of them, calls 0 and 50 are long).
    let (some, some_calls) = enters_and_calls(&r, 0x7500);
    let (calls, _, recorded, _, _) =
        some_calls.expect("a Calls report for the sometimes-long scope");
    assert_eq!(calls, 50_000);
    assert!(recorded >= 1_000, "{recorded} long calls seen");
    assert!(
        some as u64 >= 100 + 998 && some as u64 <= 100 + recorded,
        "{some} recorded, {recorded} long"
    );
    let (slow, slow_calls) = enters_and_calls(&r, 0x7200);
    assert_eq!(
        (slow, slow_calls),
        (300, None),
        "slow scopes are never throttled"
    );

    // `,all`: every throttled call is timed, so each of the rare scope's 10 long calls (after
    // the window the one before opened, and not sampled calls) is recorded.
    let r = record_c(exe, &dir.join("all"), &[("P5_THROTTLE", "100,10us,all")]);
    let (rare, rare_calls) = enters_and_calls(&r, 0x7600);
    let (calls, timed, recorded, _, _) = rare_calls.expect("a Calls report for the rare scope");
    assert_eq!((calls, timed), (50_000, 50_000), "every call timed");
    assert!(recorded >= 10, "{recorded} long calls seen");
    assert_eq!(
        rare as u64,
        100 + recorded,
        "the first 100 and every long one"
    );

    let r = record_c(exe, &dir.join("off"), &[("P5_THROTTLE", "off")]);
    assert_eq!(enters_and_calls(&r, 0x7100), (50_000, None));
    assert_eq!(enters_and_calls(&r, 0x7300), (50_000, None));
    assert_eq!(enters_and_calls(&r, 0x7400).1.map(|c| c.0), Some(50_000));
}

/// The guards without the inline path (`-DP5_NO_INLINE`, as on other architectures) call
/// `p5_enter`/`p5_exit` and never throttle.
#[test]
fn scope_guards_without_the_inline_path_record_every_call() {
    let dir = tempdir();
    let exe = build_c(dir.path(), "throttle", &["-DP5_NO_INLINE"]);
    let r = record_c(
        &exe,
        &dir.path().join("out"),
        &[("P5_THROTTLE", "100,10us")],
    );
    assert_eq!(enters_and_calls(&r, 0x7100), (50_000, None));
    assert_eq!(enters_and_calls(&r, 0x7400), (50_000, None));
}

/// Issue 21 item 3: `P5_FULL=wait` loses nothing even with the smallest ring; the same run
/// with the default `drop` loses events and counts every one.
#[test]
fn full_wait_loses_nothing_with_a_tiny_ring() {
    let dir = tempdir();
    let d = dir.path().to_str().unwrap();
    run_ok(load(
        &[
            ("P5_DIR", d),
            ("P5_RING", "64"),
            ("P5_FULL", "wait"),
            ("P5_FLUSH_MS", "500"),
        ],
        "--threads 2 --events 20000",
    ));
    let files = spool_files(dir.path());
    let r = Recording::from_spool(&files[0]);
    for t in 0..2 {
        let s = r.stream_named(&format!("load-{t}"));
        s.assert_complete(&format!("thread {t}"));
        assert_eq!(s.close.unwrap().dropped, 0);
        assert_eq!(s.events().len(), 40_000);
    }
}

/// Thread churn (D9): 1,000 short threads of 4 events each, 50 at a time, through the C ABI,
/// cost pages, not rings: the process's peak resident size stays far below one 16 MiB ring
/// per thread (rings taken from the allocator were zeroed by hand once glibc raised its mmap
/// threshold: 5–6 GB peak). All 4,000 events are recorded.
#[test]
fn short_threads_cost_pages_not_rings() {
    let dir = tempdir();
    let exe = build_c(dir.path(), "churn", &["-pthread"]);
    let out_dir = dir.path().join("out");
    let mut c = Command::new(&exe);
    c.arg("1000")
        .env_remove("P5_LOGSERVER")
        .env_remove("P5_DISABLE")
        .env_remove("P5_RING")
        .env_remove("P5_RING_SLOTS")
        .env("P5_DIR", &out_dir);
    let out = run_ok(c);
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{}", stdout.trim());
    let hwm_kb = field(&stdout, "churn", "vmhwm_kb");
    assert!(
        hwm_kb < 256 * 1024,
        "peak resident size {} MB for 1,000 short threads",
        hwm_kb / 1024
    );
    let files = spool_files(&out_dir);
    assert_eq!(files.len(), 1);
    let r = Recording::from_spool(&files[0]);
    let events: usize = r.streams.values().map(|s| s.events().len()).sum();
    assert_eq!(events, 4000, "every thread's 4 events");
}
