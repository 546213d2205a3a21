//! Integration tests: real `hostagent` processes in a tree on loopback (and across network
//! namespaces) delivering to a real log server started in-process, read back from the store.

use p5_hostagent::ctl::{self, Reply};
use p5_hostagent::osmon::SOFTIRQ_BASE;
use p5_logserver::reader::StoreDir;
use p5_logserver::{Server, ServerConfig};
use p5_wire::data::{ClockSamples, DataHeader, EventsFrame, Names, StreamOpen};
use p5_wire::hello::RuntimeKind;
use p5_wire::store::StoreRecord;
use p5_wire::{Event, FrameType};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod errors;
mod hostile;

/// The OS-monitor accuracy test runs alone: the other tests' loopback traffic makes softirq
/// work on the busy loop's CPU, which sched_switch intervals include and the scheduler's CPU
/// time does not.
static EXCLUSIVE: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn shared_slot() -> std::sync::RwLockReadGuard<'static, ()> {
    EXCLUSIVE.read().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------- log server (in-process)

struct LogServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LogServer {
    fn start(store: &Path, listen: &str) -> Self {
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let cfg = ServerConfig {
            listen: listen.to_owned(),
            store: store.to_owned(),
            ..ServerConfig::default()
        };
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let server = Server::bind(cfg).await.unwrap();
                addr_tx.send(server.local_addr()).unwrap();
                server
                    .run(async move {
                        let _ = stop_rx.await;
                    })
                    .await
                    .unwrap();
            });
        });
        let addr = addr_rx.recv_timeout(Duration::from_secs(20)).unwrap();
        Self {
            addr,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    fn addr(&self) -> String {
        self.addr.to_string()
    }

    fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

impl Drop for LogServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

// ---------------------------------------------------------------- agents (processes)

struct Agent {
    child: Child,
    addr: Option<String>,
    log: PathBuf,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An address nothing answers on for as long as the returned socket lives: bound, never
/// listening, so a connection is refused, and no other test's listener can take the port (a
/// port that was merely free once could be, and then an "outage" reaches a log server).
fn refusing_addr() -> (std::os::fd::OwnedFd, String) {
    use std::os::fd::FromRawFd;
    // SAFETY: socket calls on a descriptor owned here; both addresses are initialised
    // sockaddr_in values of the length given.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let owned = std::os::fd::OwnedFd::from_raw_fd(fd);
        let mut a: libc::sockaddr_in = std::mem::zeroed();
        a.sin_family = libc::AF_INET as libc::sa_family_t;
        a.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let mut len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let rc = libc::bind(fd, (&raw const a).cast(), len);
        assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
        let rc = libc::getsockname(fd, (&raw mut a).cast(), &mut len);
        assert_eq!(rc, 0, "getsockname: {}", std::io::Error::last_os_error());
        (owned, format!("127.0.0.1:{}", u16::from_be(a.sin_port)))
    }
}

impl Agent {
    fn spawn(dir: &Path, name: &str, args: &[&str]) -> Self {
        Self::spawn_with(dir, name, None, args)
    }

    fn spawn_with(dir: &Path, name: &str, prefix: Option<&[&str]>, args: &[&str]) -> Self {
        let log = dir.join(format!("{name}.log"));
        let spool = dir.join(format!("spool-{name}"));
        let bin = env!("CARGO_BIN_EXE_hostagent");
        let mut cmd = match prefix {
            Some(p) => {
                let mut c = Command::new(p[0]);
                c.args(&p[1..]).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        cmd.args(args)
            .arg("--spool-dir")
            .arg(&spool)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap());
        let mut child = cmd.spawn().unwrap();
        let out = child.stdout.take().unwrap();
        let addr = if args.contains(&"--listen") {
            let mut line = String::new();
            BufReader::new(out).read_line(&mut line).unwrap();
            let a = line.trim().strip_prefix("listening on ").map(str::to_owned);
            assert!(a.is_some(), "{name}: no address: {line:?}\n{}", read(&log));
            a
        } else {
            None
        };
        Self { child, addr, log }
    }

    fn addr(&self) -> &str {
        self.addr.as_deref().unwrap()
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// SIGTERM and wait for a clean exit (the agent flushes and drains).
    fn terminate(mut self) {
        unsafe { libc::kill(self.pid(), libc::SIGTERM) };
        let end = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                assert!(st.success(), "agent exit {st}:\n{}", read(&self.log));
                return;
            }
            assert!(
                Instant::now() < end,
                "agent did not stop:\n{}",
                read(&self.log)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

fn status(addr: &str) -> Reply {
    ctl::send(addr, &ctl::parse_command(&["status".to_owned()]).unwrap()).unwrap()
}

fn ctl_words(addr: &str, words: &str) -> Result<Reply, ctl::CtlError> {
    let w: Vec<String> = words.split_whitespace().map(str::to_owned).collect();
    ctl::send(addr, &ctl::parse_command(&w)?)
}

fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

// ---------------------------------------------------------------- the store, read back

#[derive(Debug, Default)]
struct Stream {
    name: String,
    kind: u8,
    seqs: Vec<u64>,
    closed: bool,
    names: HashMap<u64, String>,
    /// (frame seq, events)
    events: Vec<(u64, Vec<Event>)>,
    clock: Vec<ClockSamples>,
}

#[derive(Debug, Default)]
struct Proc {
    pid: u32,
    runtime: u8,
    start_mono_ns: u64,
    streams: BTreeMap<u32, Stream>,
}

fn read_store(store: &Path, session: &str) -> BTreeMap<u64, Proc> {
    let dir = StoreDir::open(store).unwrap().session(session).unwrap();
    let mut procs: BTreeMap<u64, Proc> = BTreeMap::new();
    let mut records = dir.records().unwrap();
    while records.advance().unwrap() {
        let Some(r) = records.record() else { continue };
        match r.record {
            StoreRecord::Process { hello, .. } => {
                let p = procs.entry(hello.identity.process_uid).or_default();
                p.pid = hello.identity.pid;
                p.runtime = hello.identity.runtime;
                p.start_mono_ns = hello.identity.start_mono_ns;
            }
            StoreRecord::Data {
                process_uid,
                ty,
                body,
                ..
            } => {
                let h = DataHeader::peek(body).unwrap();
                let s = procs
                    .entry(process_uid)
                    .or_default()
                    .streams
                    .entry(h.stream)
                    .or_default();
                s.seqs.push(h.seq);
                match FrameType::from_u8(ty) {
                    Some(FrameType::StreamOpen) => {
                        let o = StreamOpen::decode_body(body).unwrap();
                        s.name = o.name;
                        s.kind = o.kind_raw;
                    }
                    Some(FrameType::StreamClose) => s.closed = true,
                    Some(FrameType::Names) => {
                        for n in Names::decode_body(body).unwrap().names {
                            s.names.insert(n.id, n.name);
                        }
                    }
                    Some(FrameType::Events) => {
                        let f = EventsFrame::parse(body).unwrap();
                        let ev = f.events().unwrap().map(|e| e.unwrap()).collect();
                        s.events.push((h.seq, ev));
                    }
                    Some(FrameType::ClockSamples) => {
                        s.clock.push(ClockSamples::decode_body(body).unwrap());
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    assert!(records.faults().is_empty(), "{:?}", records.faults());
    procs
}

fn agents(procs: &BTreeMap<u64, Proc>) -> Vec<(&u64, &Proc)> {
    procs
        .iter()
        .filter(|(_, p)| p.runtime == RuntimeKind::HostAgent as u8)
        .collect()
}

/// Every frame exactly once, sequence numbers 0..n without gaps, closed.
fn assert_exact(s: &Stream, what: &str) {
    let want: Vec<u64> = (0..s.seqs.len() as u64).collect();
    assert_eq!(s.seqs, want, "{what}: sequence numbers");
    assert!(s.closed, "{what}: stream not closed");
}

/// Times of one metric's samples.
fn metric_times(s: &Stream, name: &str) -> Vec<u64> {
    let id = p5_hostagent::metric::metric_id(name);
    assert_eq!(
        s.names.get(&id).map(String::as_str),
        Some(name),
        "{name} not declared"
    );
    s.events
        .iter()
        .flat_map(|(_, ev)| ev.iter())
        .filter_map(|e| match e {
            Event::Counter { t, sensor, .. } if *sensor == id => Some(*t),
            _ => None,
        })
        .collect()
}

/// No gap longer than `max` between consecutive samples.
fn assert_continuous(times: &[u64], max: Duration, what: &str) {
    assert!(times.len() >= 2, "{what}: {} samples", times.len());
    let worst = times
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]))
        .max()
        .unwrap();
    assert!(
        worst <= max.as_nanos() as u64,
        "{what}: a gap of {} ms between samples",
        worst / 1_000_000
    );
}

fn three_tree(dir: &Path, ls: &str, session: &str, mid_port: Option<u16>) -> (Agent, Agent, Agent) {
    let top = Agent::spawn(
        dir,
        "top",
        &[
            "--session",
            session,
            "--logserver",
            ls,
            "--listen",
            "127.0.0.1:0",
        ],
    );
    let mid_listen = format!("127.0.0.1:{}", mid_port.unwrap_or(0));
    let mid = Agent::spawn(
        dir,
        "mid",
        &[
            "--session",
            session,
            "--parent",
            top.addr(),
            "--listen",
            &mid_listen,
        ],
    );
    let leaf = Agent::spawn(
        dir,
        "leaf",
        &[
            "--session",
            session,
            "--parent",
            mid.addr(),
            "--pid",
            &std::process::id().to_string(),
        ],
    );
    wait_until("three agents in status", Duration::from_secs(20), || {
        status(top.addr()).agents.len() == 3
    });
    (top, mid, leaf)
}

// ---------------------------------------------------------------- tests

#[test]
fn tree_of_three_delivers_every_frame_exactly_once_with_hop_clock_samples() {
    let _slot = shared_slot();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let ls = LogServer::start(&store, "127.0.0.1:0");
    let (top, mid, leaf) = three_tree(dir.path(), &ls.addr(), "tree", None);
    std::thread::sleep(Duration::from_millis(1500));
    let st = status(top.addr());
    assert!(st.unanswered.is_empty(), "{st:?}");
    let pids: Vec<u32> = st.agents.iter().map(|a| a.pid).collect();
    for a in [&top, &mid, &leaf] {
        assert!(pids.contains(&(a.pid() as u32)), "{pids:?}");
    }
    assert!(
        st.agents
            .iter()
            .all(|a| a.upstream_connected && a.samples_sent > 0)
    );
    let (leaf_pid, mid_pid, top_pid) = (leaf.pid() as u32, mid.pid() as u32, top.pid() as u32);
    leaf.terminate();
    mid.terminate();
    top.terminate();
    ls.stop();

    let procs = read_store(&store, "tree");
    let ags = agents(&procs);
    assert_eq!(ags.len(), 3, "{:?}", procs.keys());
    let uid_of = |pid: u32| *ags.iter().find(|(_, p)| p.pid == pid).unwrap().0;
    for (uid, p) in &ags {
        let s = &p.streams[&1];
        assert_eq!(s.kind, 2, "host metrics kind");
        assert_exact(s, &format!("agent {uid:x}"));
        let t = metric_times(s, "cpu.total.busy");
        assert!(t.len() >= 10, "{} samples", t.len());
        assert_continuous(&t, Duration::from_millis(600), "cpu.total.busy");
        for m in [
            "mem.used",
            "vm.pgfault_total",
            "net.lo.rx_bytes_total",
            "load.1",
        ] {
            assert!(!metric_times(s, m).is_empty(), "{m}");
        }
    }
    // The leaf monitors this test process.
    let leaf_s = &procs[&uid_of(leaf_pid)].streams[&1];
    let me = std::process::id();
    assert!(
        leaf_s
            .names
            .values()
            .any(|n| n.ends_with(&format!(".{me}.rss")))
    );
    // Hop clock samples: the mid agent about the leaf, the top about both.
    let peers = |pid: u32| -> Vec<u64> {
        let mut v: Vec<u64> = procs[&uid_of(pid)].streams[&1]
            .clock
            .iter()
            .map(|c| c.peer_process_uid)
            .collect();
        v.sort();
        v.dedup();
        v
    };
    assert_eq!(peers(mid_pid), vec![uid_of(leaf_pid)]);
    let mut want = vec![uid_of(leaf_pid), uid_of(mid_pid)];
    want.sort();
    assert_eq!(peers(top_pid), want);
    // Receiver-later-than-sender holds per pair up to the clock offset, which is bounded by
    // the agents' start-time difference on one host: check the pairs are sane.
    for c in &procs[&uid_of(mid_pid)].streams[&1].clock {
        assert!(!c.samples.is_empty());
        for (r, s) in &c.samples {
            assert!(r.abs_diff(*s) < 60_000_000_000, "{r} {s}");
        }
    }
}

/// An agent's own uplink pings in bursts paced by the answers (8 every 500 ms,
/// `p5_runtime::pings`) and takes each ack's receipt time from the kernel's stamp, so a host
/// with nothing but its agent still gets tight two-way clock samples. On one host the truth
/// is exact (both clocks are CLOCK_MONOTONIC less a known start), so every sample's delay is
/// known: none may be negative, both directions' fastest must be small, and there must be
/// dozens of echoes (one ping a second before: 2 or 3 in this run; 47–55 now, 20 asked for
/// a loaded machine).
#[test]
fn agents_ping_in_bursts_with_kernel_stamped_echoes() {
    let _slot = shared_slot();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let ls = LogServer::start(&store, "127.0.0.1:0");
    let session = ["--session", "pings"];
    let top = Agent::spawn(
        dir.path(),
        "top",
        &[
            session[0],
            session[1],
            "--logserver",
            &ls.addr(),
            "--listen",
            "127.0.0.1:0",
        ],
    );
    let leaf = Agent::spawn(
        dir.path(),
        "leaf",
        &[session[0], session[1], "--parent", top.addr()],
    );
    wait_until("two agents in status", Duration::from_secs(20), || {
        status(top.addr()).agents.len() == 2
    });
    std::thread::sleep(Duration::from_millis(2500));
    leaf.terminate();
    top.terminate();
    ls.stop();

    let session = StoreDir::open(&store).unwrap().session("pings").unwrap();
    let mut records = session.records().unwrap();
    let mut start: HashMap<u64, i64> = HashMap::new();
    // Per agent: (forward delays, backward delays), ns.
    let mut delays: BTreeMap<u64, (Vec<i64>, Vec<i64>)> = BTreeMap::new();
    while records.advance().unwrap() {
        let Some(r) = records.record() else { continue };
        let server_start = r.segment.server_start_mono_ns as i64;
        match r.record {
            StoreRecord::Process { hello, .. } => {
                let id = hello.identity;
                start.insert(id.process_uid, id.start_mono_ns as i64);
            }
            StoreRecord::Sample {
                t_s,
                process_uid,
                t_p,
                echo_t_s,
                echo_t_p,
                source,
            } if source == p5_wire::store::SampleSource::Ping as u8 => {
                let a = start[&process_uid];
                let d = delays.entry(process_uid).or_default();
                d.0.push((t_s as i64 + server_start) - (t_p as i64 + a));
                if echo_t_s != 0 {
                    d.1.push((echo_t_p as i64 + a) - (echo_t_s as i64 + server_start));
                }
            }
            _ => {}
        }
    }
    assert_eq!(delays.len(), 2, "pings from both agents");
    for (uid, (fwd, back)) in &delays {
        let min = |v: &[i64]| v.iter().copied().min().unwrap_or(i64::MAX);
        let (f, b) = (min(fwd), min(back));
        println!(
            "agent {uid:x}: {} pings, {} echoes; fastest forward {:.1} µs, backward {:.1} µs",
            fwd.len(),
            back.len(),
            f as f64 / 1e3,
            b as f64 / 1e3
        );
        assert!(back.len() >= 20, "{uid:x}: {} echoes in 2.5 s", back.len());
        // A stamp is never before the send (a few µs for the clocks' own conversions).
        assert!(
            f > -5_000 && b > -5_000,
            "{uid:x}: negative delay {f} / {b} ns"
        );
        assert!(
            f < 1_000_000 && b < 1_000_000,
            "{uid:x}: floors {f} / {b} ns"
        );
    }
}

#[test]
fn control_propagates_down_and_reaches_late_joiners() {
    let _slot = shared_slot();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let ls = LogServer::start(&store, "127.0.0.1:0");
    let (top, mid, leaf) = three_tree(dir.path(), &ls.addr(), "ctl", None);

    let rep = ctl_words(top.addr(), "set interval=250ms metrics=mem.*").unwrap();
    assert_eq!(rep.agents.len(), 3, "{rep:?}");
    for a in &rep.agents {
        assert_eq!(
            (a.interval_ms, a.metrics.as_slice()),
            (250, &["mem.*".to_owned()][..])
        );
    }
    // A late joiner below the mid agent receives the tree's settings.
    let late = Agent::spawn(
        dir.path(),
        "late",
        &["--session", "ctl", "--parent", mid.addr()],
    );
    wait_until(
        "the late joiner adopts the settings",
        Duration::from_secs(20),
        || {
            let st = status(top.addr());
            st.agents.len() == 4 && st.agents.iter().all(|a| a.interval_ms == 250)
        },
    );
    std::thread::sleep(Duration::from_millis(1200));

    // stop: sampling halts everywhere; start resumes.
    let rep = ctl_words(top.addr(), "stop").unwrap();
    assert!(rep.agents.iter().all(|a| !a.recording) && rep.agents.len() == 4);
    std::thread::sleep(Duration::from_millis(700));
    let counts = || -> BTreeMap<u32, u64> {
        status(top.addr())
            .agents
            .iter()
            .map(|a| (a.pid, a.samples_sent))
            .collect()
    };
    let before = counts();
    std::thread::sleep(Duration::from_millis(1200));
    let after = counts();
    assert_eq!(before, after, "samples taken while stopped");
    let rep = ctl_words(top.addr(), "start").unwrap();
    assert!(rep.agents.iter().all(|a| a.recording));
    wait_until(
        "sampling resumes everywhere",
        Duration::from_secs(15),
        || {
            let now = counts();
            now.len() == after.len() && now.iter().all(|(pid, n)| *n >= after[pid] + 4)
        },
    );

    // ctl errors are clear.
    let e = ctl_words(top.addr(), "set interval=5")
        .unwrap_err()
        .to_string();
    assert!(e.contains("interval must be"), "{e}");
    let e = ctl_words(top.addr(), "set metrics=[")
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad metric pattern"), "{e}");
    let (_reserved, nowhere) = refusing_addr();
    let e = ctl_words(&nowhere, "status").unwrap_err().to_string();
    assert!(e.contains("cannot reach the agent"), "{e}");
    let out = Command::new(env!("CARGO_BIN_EXE_hostagent"))
        .args(["ctl", "--agent", top.addr(), "frobnicate"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown command"));

    let leaf_pid = leaf.pid() as u32;
    late.terminate();
    leaf.terminate();
    mid.terminate();
    top.terminate();
    ls.stop();
    // After the change the leaf recorded only mem.* metrics, every 250 ms.
    let procs = read_store(&store, "ctl");
    let leaf_p = procs.values().find(|p| p.pid == leaf_pid).unwrap();
    let s = &leaf_p.streams[&1];
    assert_exact(s, "leaf");
    let (_, last) = s.events.iter().rev().find(|(_, e)| !e.is_empty()).unwrap();
    for e in last {
        let name = &s.names[&e.sensor()];
        assert!(
            name.starts_with("mem."),
            "{name} recorded after metrics=mem.*"
        );
    }
    let t = metric_times(s, "mem.used");
    let tail: Vec<u64> = t[t.len() - 3..].to_vec();
    for w in tail.windows(2) {
        let d = w[1] - w[0];
        assert!((200_000_000..400_000_000).contains(&d), "interval {d} ns");
    }
}

#[test]
fn parent_outage_spools_and_replays_exactly() {
    let _slot = shared_slot();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let ls = LogServer::start(&store, "127.0.0.1:0");
    let mid_port = free_port();
    let (top, mid, leaf) = three_tree(dir.path(), &ls.addr(), "outage", Some(mid_port));
    std::thread::sleep(Duration::from_millis(1000));
    let leaf_pid = leaf.pid() as u32;
    mid.kill();
    // Down for longer than the spill delay: the leaf writes its frames to disk.
    let spool_dir = dir.path().join("spool-leaf");
    wait_until("the leaf spools to disk", Duration::from_secs(15), || {
        std::fs::read_dir(&spool_dir)
            .map(|d| {
                d.flatten()
                    .any(|e| e.metadata().map(|m| m.len() > 200).unwrap_or(false))
            })
            .unwrap_or(false)
    });
    std::thread::sleep(Duration::from_millis(1500));
    let mid2 = Agent::spawn(
        dir.path(),
        "mid2",
        &[
            "--session",
            "outage",
            "--parent",
            top.addr(),
            "--listen",
            &format!("127.0.0.1:{mid_port}"),
        ],
    );
    wait_until(
        "the leaf replayed its spool",
        Duration::from_secs(30),
        || {
            let st = status(top.addr());
            st.agents
                .iter()
                .any(|a| a.pid == leaf_pid && a.spool_bytes == 0 && a.upstream_connected)
        },
    );
    wait_until("the spool file is gone", Duration::from_secs(10), || {
        std::fs::read_dir(&spool_dir)
            .map(|d| d.count() == 0)
            .unwrap_or(true)
    });
    leaf.terminate();
    mid2.terminate();
    top.terminate();
    ls.stop();
    let procs = read_store(&store, "outage");
    let leaf_p = procs.values().find(|p| p.pid == leaf_pid).unwrap();
    let s = &leaf_p.streams[&1];
    assert_exact(s, "leaf across the outage");
    let t = metric_times(s, "cpu.total.busy");
    // Several seconds of outage (the test sleeps 2.5 s around it), yet no sample is missing:
    // the samples span the whole run without a gap. (Their count depends on how busy the
    // machine is; the span and the gaps do not.)
    let span = t.last().unwrap_or(&0) - t.first().unwrap_or(&0);
    assert!(span >= 2_500_000_000, "{} samples over {span} ns", t.len());
    assert_continuous(
        &t,
        Duration::from_millis(600),
        "leaf samples across the outage",
    );
}

#[test]
fn log_server_restart_and_garbage_children_do_not_harm_the_tree() {
    let _slot = shared_slot();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let ls = LogServer::start(&store, "127.0.0.1:0");
    let ls_addr = ls.addr();
    let top = Agent::spawn(
        dir.path(),
        "top",
        &[
            "--session",
            "faults",
            "--logserver",
            &ls_addr,
            "--listen",
            "127.0.0.1:0",
        ],
    );
    let leaf = Agent::spawn(
        dir.path(),
        "leaf",
        &["--session", "faults", "--parent", top.addr()],
    );
    wait_until("two agents", Duration::from_secs(20), || {
        status(top.addr()).agents.len() == 2
    });

    // Garbage: random bytes; a valid Hello followed by a corrupt frame; a Hello that lies.
    let mut g = TcpStream::connect(top.addr()).unwrap();
    g.write_all(b"GET / HTTP/1.1\r\n\r\nxxxxxxxxxxxxxxxxxxxxxxxxx")
        .unwrap();
    let mut h = TcpStream::connect(top.addr()).unwrap();
    let mut hello_frame = Vec::new();
    let body = p5_wire::hello::Hello {
        version: 1,
        caps: p5_wire::hello::Caps::ALL,
        identity: p5_wire::hello::Identity {
            process_uid: 77,
            runtime: RuntimeKind::HostAgent as u8,
            session: "faults".into(),
            ..Default::default()
        },
    }
    .encode_body();
    p5_wire::frame::encode(&mut hello_frame, FrameType::Hello as u8, &body);
    h.write_all(&hello_frame).unwrap();
    let mut bad = Vec::new();
    p5_wire::frame::encode(&mut bad, FrameType::Events as u8, &[1, 2, 3]);
    h.write_all(&bad).unwrap();
    let mut trunc = Vec::new();
    p5_wire::frame::encode(&mut trunc, FrameType::Hello as u8, b"P5WIRE\x01");
    let mut t = TcpStream::connect(top.addr()).unwrap();
    t.write_all(&trunc).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    wait_until("garbage children dropped", Duration::from_secs(10), || {
        let st = status(top.addr());
        st.agents.len() == 2 && st.agents[0].relays == 1
    });
    drop((g, h, t));

    // The log server restarts on the same address.
    std::thread::sleep(Duration::from_millis(500));
    ls.stop();
    std::thread::sleep(Duration::from_millis(3000));
    let ls2 = LogServer::start(&store, &ls_addr);
    wait_until("delivery resumes", Duration::from_secs(30), || {
        let st = status(top.addr());
        st.agents.len() == 2
            && st
                .agents
                .iter()
                .all(|a| a.upstream_connected && a.spool_bytes == 0 && a.lag_ms < 3000)
    });
    let leaf_pid = leaf.pid() as u32;
    leaf.terminate();
    top.terminate();
    ls2.stop();
    let procs = read_store(&store, "faults");
    // The lying Hello was valid, so it reached the store as a process, but without data.
    assert!(procs.get(&77).is_none_or(|p| p.streams.is_empty()));
    let ags: Vec<_> = agents(&procs)
        .into_iter()
        .filter(|(_, p)| !p.streams.is_empty())
        .collect();
    assert_eq!(ags.len(), 2, "{:?}", procs.keys());
    for (uid, p) in ags {
        let s = &p.streams[&1];
        assert_exact(s, &format!("{uid:x}"));
        let t = metric_times(s, "cpu.total.busy");
        assert_continuous(&t, Duration::from_millis(600), &format!("pid {}", p.pid));
    }
    assert!(procs.values().any(|p| p.pid == leaf_pid));
}

/// A network namespace with a veth pair to the root namespace, removed on drop.
struct Netns {
    name: String,
    veth: String,
    peer: String,
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
        let _ = Command::new("ip")
            .args(["link", "del", &self.veth])
            .status();
    }
}

fn sh(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn make_netns(subnet: u8) -> Result<Netns, String> {
    let tag = std::process::id() % 100_000;
    let ns = Netns {
        name: format!("p5ha-{tag}"),
        veth: format!("p5ha{tag}a"),
        peer: format!("p5ha{tag}b"),
    };
    let peer = ns.peer.clone();
    let host_ip = format!("10.231.{subnet}.1/24");
    let ns_ip = format!("10.231.{subnet}.2/24");
    sh(&["ip", "netns", "add", &ns.name])?;
    sh(&[
        "ip", "link", "add", &ns.veth, "type", "veth", "peer", "name", &peer,
    ])?;
    sh(&["ip", "link", "set", &peer, "netns", &ns.name])?;
    sh(&["ip", "addr", "add", &host_ip, "dev", &ns.veth])?;
    sh(&["ip", "link", "set", &ns.veth, "up"])?;
    sh(&[
        "ip", "netns", "exec", &ns.name, "ip", "addr", "add", &ns_ip, "dev", &peer,
    ])?;
    sh(&[
        "ip", "netns", "exec", &ns.name, "ip", "link", "set", &peer, "up",
    ])?;
    sh(&[
        "ip", "netns", "exec", &ns.name, "ip", "link", "set", "lo", "up",
    ])?;
    Ok(ns)
}

#[test]
fn child_in_another_network_namespace_delivers_through_the_top() {
    let _slot = shared_slot();
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: creating network namespaces needs root");
        return;
    }
    let subnet = (std::process::id() % 200) as u8 + 20;
    let ns = match make_netns(subnet) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("skipped: cannot create a network namespace: {e}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let ls = LogServer::start(&store, "127.0.0.1:0");
    let listen = format!("10.231.{subnet}.1:0");
    let top = Agent::spawn(
        dir.path(),
        "top",
        &[
            "--session",
            "netns",
            "--logserver",
            &ls.addr(),
            "--listen",
            &listen,
        ],
    );
    let prefix = ["ip", "netns", "exec", ns.name.as_str()];
    let child = Agent::spawn_with(
        dir.path(),
        "child",
        Some(&prefix),
        &["--session", "netns", "--parent", top.addr()],
    );
    wait_until(
        "the namespaced child joins",
        Duration::from_secs(20),
        || status(top.addr()).agents.len() == 2,
    );
    std::thread::sleep(Duration::from_millis(1500));
    child.terminate();
    top.terminate();
    ls.stop();
    let procs = read_store(&store, "netns");
    let ags = agents(&procs);
    assert_eq!(ags.len(), 2);
    // The namespaced agent sees only its own interfaces: the veth end and lo.
    let names: Vec<Vec<String>> = ags
        .iter()
        .map(|(_, p)| {
            assert_exact(&p.streams[&1], "netns agent");
            p.streams[&1].names.values().cloned().collect()
        })
        .collect();
    let peer = format!("net.{}.rx_bytes_total", ns.peer);
    assert!(
        names.iter().any(|n| n.contains(&peer)),
        "no agent recorded {peer}"
    );
    drop(ns);
}

#[test]
fn os_monitor_on_cpu_intervals_sum_to_the_measured_cpu_time() {
    let _slot = EXCLUSIVE.write().unwrap_or_else(|e| e.into_inner());
    use p5_hostagent::osmon::TraceSession;
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the OS monitor test needs root for tracefs");
        return;
    }
    let clock = p5_hostagent::clock::AgentClock::start();
    let mut session = match TraceSession::start(clock, &[], false) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("skipped: tracefs unavailable: {e}");
            return;
        }
    };
    // A busy loop that stops itself at once, so tracing covers all of its running time.
    // At nice −20 (we are root) other tasks' wakeups rarely preempt it, so its CPU time is
    // not diluted by the interrupt work every preemption brings (see the end).
    // Pinned to CPU 0: on this VM the first sched_switch events of a CPU other than the one
    // that enabled the event are sometimes missing for a while (see ARCHITECTURE.md).
    let mut busy = Command::new("taskset")
        .args([
            "-c",
            "0",
            "nice",
            "-n",
            "-20",
            "sh",
            "-c",
            "kill -STOP $$; while :; do :; done",
        ])
        .spawn()
        .unwrap();
    let pid = busy.id();
    let stopped =
        || p5_hostagent::proc_stat::read_task_stat(pid, None).is_some_and(|s| s.state == b'T');
    wait_until(
        "the busy loop stops itself",
        Duration::from_secs(5),
        stopped,
    );
    session.set_tids(&[pid]).unwrap();
    // Let the enabled event settle before the loop runs.
    std::thread::sleep(Duration::from_millis(100));
    let exec_ns = || -> u64 {
        let t = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap();
        t.split_whitespace().next().unwrap().parse().unwrap()
    };
    let exec0 = exec_ns();
    let cpu0 = p5_hostagent::proc_stat::read_task_stat(pid, None)
        .unwrap()
        .cpu_ticks;
    let mut events = Vec::new();
    session.drain(&mut events).unwrap();
    events.clear();
    unsafe { libc::kill(pid as i32, libc::SIGCONT) };
    let end = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < end {
        session.drain(&mut events).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
    wait_until("the busy loop stops", Duration::from_secs(5), stopped);
    std::thread::sleep(Duration::from_millis(200));
    session.drain(&mut events).unwrap();
    let exec1 = exec_ns();
    let cpu1 = p5_hostagent::proc_stat::read_task_stat(pid, None)
        .unwrap()
        .cpu_ticks;
    let _ = busy.kill();
    let _ = busy.wait();
    let measured_ns = (cpu1 - cpu0) * (1_000_000_000 / p5_hostagent::proc_stat::clock_ticks());
    // Paired per CPU, as the merge does: a drain returns each CPU's events in order, but a
    // CPU whose page was not yet readable can deliver its switch-out after another CPU's
    // later switch-in.
    let mut on_cpu = 0u64;
    let mut since: std::collections::HashMap<u32, u64> = std::collections::HashMap::new();
    let mut switches = 0;
    for e in &events {
        if let Event::Switch {
            t,
            cpu,
            prev_tid,
            next_tid,
            ..
        } = *e
        {
            switches += 1;
            if prev_tid == pid
                && let Some(s) = since.remove(&cpu)
            {
                on_cpu += t - s;
            }
            if next_tid == pid {
                since.insert(cpu, t);
            }
        }
    }
    let exec = exec1 - exec0;
    eprintln!(
        "os monitor: {switches} switches, on-CPU {} ms; CPU time from /proc/PID/schedstat {} ms, from /proc/PID/stat {} ms",
        on_cpu / 1_000_000,
        exec / 1_000_000,
        measured_ns / 1_000_000
    );
    assert!(switches >= 2, "no switches recorded");
    if session.is_binary() {
        // Binary pages carry nanoseconds; the text pipe would round to microseconds.
        assert!(
            events.iter().any(|e| e.time() % 1000 != 0),
            "no sub-microsecond times"
        );
    } else {
        eprintln!("note: read the text trace pipe (microsecond timestamps)");
    }
    assert!(
        measured_ns > 500_000_000,
        "the busy loop hardly ran: {measured_ns} ns"
    );
    // The scheduler's own ns-exact account of the process's CPU time: within 5 %.
    let err = on_cpu.abs_diff(exec) as f64 / exec as f64;
    assert!(
        err <= 0.05,
        "on-CPU {on_cpu} ns vs schedstat {exec} ns ({:.1} %)",
        err * 100.0
    );
    // /proc/PID/stat counts whole clock ticks (two readings: up to two ticks of rounding).
    let tick = 1_000_000_000 / p5_hostagent::proc_stat::clock_ticks();
    let err = on_cpu.abs_diff(measured_ns) as f64 / measured_ns as f64;
    assert!(
        on_cpu.abs_diff(measured_ns) <= measured_ns / 20 + 2 * tick,
        "on-CPU {on_cpu} ns vs /proc/PID/stat {measured_ns} ns ({:.1} %)",
        err * 100.0
    );
}

/// Interrupt counts per numeric IRQ line, summed over CPUs.
fn irq_counts() -> BTreeMap<u32, u64> {
    let text = std::fs::read_to_string("/proc/interrupts").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (irq, rest) = l.trim_start().split_once(':')?;
            let irq: u32 = irq.parse().ok()?;
            let n = rest
                .split_whitespace()
                .map_while(|w| w.parse::<u64>().ok())
                .sum();
            Some((irq, n))
        })
        .collect()
}

/// Writes and syncs a file `rounds` times (each sync makes the disk raise interrupts).
fn disk_burst(dir: &Path, rounds: usize) {
    use std::io::Write as _;
    let mut f = std::fs::File::create(dir.join("burst")).unwrap();
    for i in 0..rounds {
        f.write_all(&[i as u8; 4096]).unwrap();
        f.sync_all().unwrap();
    }
}

#[test]
fn os_monitor_records_the_interrupts_of_a_chosen_line() {
    let _slot = shared_slot();
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: tracing interrupts needs root and tracefs");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The disk's line: the one that counts most during a burst of synced writes.
    let before = irq_counts();
    disk_burst(dir.path(), 50);
    let after = irq_counts();
    let Some((&irq, grew)) = after
        .iter()
        .map(|(irq, n)| (irq, n.saturating_sub(*before.get(irq).unwrap_or(n))))
        .max_by_key(|&(_, d)| d)
    else {
        eprintln!("skipped: /proc/interrupts lists no numeric IRQ lines");
        return;
    };
    if grew < 10 {
        eprintln!("skipped: no IRQ line follows disk syncs here (best: {irq}, {grew} interrupts)");
        return;
    }
    let store = dir.path().join("store");
    let ls = LogServer::start(&store, "127.0.0.1:0");
    let mut work = Command::new("sleep").arg("30").spawn().unwrap();
    let top = Agent::spawn(
        dir.path(),
        "top",
        &[
            "--session",
            "irq",
            "--logserver",
            &ls.addr(),
            "--listen",
            "127.0.0.1:0",
            "--sched",
            "--irq",
            &irq.to_string(),
            "--pid",
            &work.id().to_string(),
        ],
    );
    let sched = || status(top.addr()).agents[0].sched.clone();
    wait_until("the os monitor starts", Duration::from_secs(15), || {
        let s = sched();
        s.starts_with("tracefs") || s.starts_with("proc")
    });
    let active = sched();
    disk_burst(dir.path(), 100);
    std::thread::sleep(Duration::from_millis(500));
    let _ = work.kill();
    let _ = work.wait();
    top.terminate();
    ls.stop();
    if !active.starts_with("tracefs") {
        eprintln!("skipped: tracefs unavailable ({active})");
        return;
    }
    let procs = read_store(&store, "irq");
    let (_, p) = agents(&procs)[0];
    let os = p
        .streams
        .values()
        .find(|s| s.kind == 3)
        .expect("an os monitor stream");
    let irqs: Vec<(u32, u64)> = os
        .events
        .iter()
        .flat_map(|(_, e)| e.iter())
        .filter_map(|e| match e {
            Event::Irq {
                irq: i, duration, ..
            } => Some((*i, *duration)),
            _ => None,
        })
        .collect();
    let (soft, hard): (Vec<_>, Vec<_>) = irqs.iter().partition(|&&(i, _)| i >= SOFTIRQ_BASE);
    assert!(
        hard.len() >= 10,
        "{} interrupts of line {irq} recorded",
        hard.len()
    );
    assert!(hard.iter().all(|&(i, _)| i == irq), "only the chosen line");
    // Beside it, the network softirqs (the agent's own loopback traffic to the log server).
    assert!(
        soft.iter()
            .all(|&(i, _)| i == SOFTIRQ_BASE + 2 || i == SOFTIRQ_BASE + 3),
        "only NET_TX and NET_RX softirqs"
    );
    assert!(
        irqs.iter().all(|&(_, d)| d < 100_000_000),
        "handler durations are plausible"
    );
}

/// Sends `bytes` over a loopback TCP connection to a reader thread; returns how long it took.
fn loopback_traffic(bytes: usize) -> Duration {
    use std::io::Read as _;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (mut rx, _) = l.accept().unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        let mut n = 0;
        while n < bytes {
            match rx.read(&mut buf).unwrap() {
                0 => break,
                k => n += k,
            }
        }
        n
    });
    let chunk = vec![7u8; 16 * 1024];
    let t = Instant::now();
    let mut sent = 0;
    while sent < bytes {
        let k = chunk.len().min(bytes - sent);
        tx.write_all(&chunk[..k]).unwrap();
        sent += k;
    }
    assert_eq!(reader.join().unwrap(), bytes);
    t.elapsed()
}

#[test]
fn os_monitor_records_network_softirqs_of_loopback_traffic() {
    use p5_hostagent::osmon::{NET_RX_SOFTIRQ, NET_TX_SOFTIRQ, TraceSession};
    // Alone, so the counts are this traffic's (other hosts' users of loopback aside).
    let _slot = EXCLUSIVE.write().unwrap_or_else(|e| e.into_inner());
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the OS monitor test needs root for tracefs");
        return;
    }
    const MB: usize = 8;
    let clock = p5_hostagent::clock::AgentClock::start();
    let untraced = loopback_traffic(MB << 20);
    let mut session = match TraceSession::start(clock, &[], true) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("skipped: tracefs unavailable: {e}");
            return;
        }
    };
    if !session.traces_softirqs() {
        eprintln!("skipped: this kernel has no softirq trace events");
        return;
    }
    // The test process is the monitored one: its threads' scheduling is traced too.
    session.set_tids(&[std::process::id()]).unwrap();
    let mut events = Vec::new();
    session.drain(&mut events).unwrap();
    events.clear();
    let t0 = clock.now_ns();
    let traced = loopback_traffic(MB << 20);
    let t1 = clock.now_ns();
    std::thread::sleep(Duration::from_millis(200));
    let decode = Instant::now();
    session.drain(&mut events).unwrap();
    let decode = decode.elapsed();
    let total = events.len();
    let binary = session.is_binary();
    drop(session);
    let soft = |vec: u32| -> Vec<(u64, u64, u32)> {
        events
            .iter()
            .filter_map(|e| match *e {
                Event::Irq {
                    t,
                    irq,
                    duration,
                    cpu,
                    ..
                } if irq == SOFTIRQ_BASE + vec && t >= t0 && t <= t1 => Some((t, duration, cpu)),
                _ => None,
            })
            .collect()
    };
    let (rx, tx) = (soft(NET_RX_SOFTIRQ), soft(NET_TX_SOFTIRQ));
    let mut d: Vec<u64> = rx.iter().map(|&(_, d, _)| d).collect();
    d.sort_unstable();
    let pick = |p: f64| {
        d.get(((d.len().max(1) - 1) as f64 * p) as usize)
            .copied()
            .unwrap_or(0)
    };
    let busy: u64 = d.iter().sum();
    eprintln!(
        "net softirqs for {MB} MB over loopback in {:.1} ms ({:.1} ms untraced): {} NET_RX ({:.1}/MB), {} NET_TX; \
         NET_RX duration median {} ns, p90 {} ns, max {} ns, {:.1} % of the transfer's time; \
         {total} events decoded in {:.2} ms ({:.0} ns each)",
        traced.as_secs_f64() * 1e3,
        untraced.as_secs_f64() * 1e3,
        rx.len(),
        rx.len() as f64 / MB as f64,
        tx.len(),
        pick(0.5),
        pick(0.9),
        pick(1.0),
        100.0 * busy as f64 / (t1 - t0) as f64,
        decode.as_secs_f64() * 1e3,
        decode.as_secs_f64() * 1e9 / total.max(1) as f64,
    );
    // Loopback hands each segment (up to 64 KiB) to NET_RX: at least a few per MB.
    assert!(
        rx.len() >= 2 * MB,
        "{} NET_RX softirqs for {MB} MB",
        rx.len()
    );
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    assert!(rx.iter().all(|&(_, _, c)| c < cpus), "CPU numbers");
    assert!(
        d.iter().all(|&d| d < 50_000_000),
        "NET_RX durations are plausible (< 50 ms): {d:?}"
    );
    assert!(
        pick(0.5) < 1_000_000,
        "a typical NET_RX takes microseconds: {d:?}"
    );
    if binary {
        // Nanosecond times: every softirq took some time (the text pipe rounds to µs).
        assert!(d.iter().all(|&d| d > 0), "entry before exit: {d:?}");
    }
    // Traced, NET_RX work sums to less than the whole transfer.
    assert!(busy < t1 - t0, "{busy} ns of NET_RX in {} ns", t1 - t0);

    // Turned off: no softirq is recorded.
    let mut session = TraceSession::start(clock, &[], false).unwrap();
    assert!(!session.traces_softirqs());
    session.set_tids(&[std::process::id()]).unwrap();
    session.drain(&mut events).unwrap();
    events.clear();
    loopback_traffic(1 << 20);
    std::thread::sleep(Duration::from_millis(100));
    session.drain(&mut events).unwrap();
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::Irq { irq, .. } if *irq >= SOFTIRQ_BASE)),
        "softirqs recorded though turned off"
    );
}

#[test]
fn os_monitor_starts_with_an_instrumented_process_without_being_told() {
    use std::os::linux::net::SocketAddrExt as _;
    let _slot = shared_slot();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let ls = LogServer::start(&store, "127.0.0.1:0");
    let top = Agent::spawn(
        dir.path(),
        "top",
        &[
            "--session",
            "auto",
            "--logserver",
            &ls.addr(),
            "--listen",
            "127.0.0.1:0",
            "--sched",
            "--sched-mode",
            "proc",
        ],
    );
    let sched = || status(top.addr()).agents[0].sched.clone();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        sched().starts_with("waiting"),
        "nothing to monitor yet: {}",
        sched()
    );
    // A process announced the way the p5 runtime announces itself.
    let mut work = Command::new("sh")
        .args([
            "-c",
            "while :; do i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done; sleep 0.02; done",
        ])
        .spawn()
        .unwrap();
    let name = format!("p5-runtime-{}", work.id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let announcement = std::os::unix::net::UnixDatagram::bind_addr(&addr).unwrap();
    wait_until(
        "the os monitor starts by itself",
        Duration::from_secs(15),
        || sched().starts_with("proc"),
    );
    let _ = work.kill();
    let _ = work.wait();
    drop(announcement);
    wait_until(
        "the os monitor stops after the process",
        Duration::from_secs(15),
        || sched().starts_with("waiting"),
    );
    top.terminate();
    ls.stop();
}

fn mono_now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Issue 14 item 2: a standalone agent (nobody tells it a pid) follows a process within
/// 10 ms of its announcement — the runtime's abstract socket, bound here as the runtime binds
/// it — and follows the children it starts, which announce nothing, naming them.
#[test]
fn os_monitor_follows_an_announced_process_within_10_ms_with_its_children() {
    use std::os::linux::net::SocketAddrExt as _;
    // Alone: the other tests' agents create and remove trace instances, and the kernel holds
    // its event lock meanwhile (removing one waits for RCU), which delayed following by up
    // to 34 ms when they ran beside this one.
    let _slot = EXCLUSIVE.write().unwrap_or_else(|e| e.into_inner());
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: following processes with kernel tracing needs root for tracefs");
        return;
    }
    if let Err(e) = p5_hostagent::tracefs::find_or_mount() {
        eprintln!("skipped: tracefs unavailable: {e}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let ls = LogServer::start(&store, "127.0.0.1:0");
    let top = Agent::spawn(
        dir.path(),
        "top",
        &[
            "--session",
            "announce",
            "--logserver",
            &ls.addr(),
            "--listen",
            "127.0.0.1:0",
            "--sched",
        ],
    );
    let sched = || status(top.addr()).agents[0].sched.clone();
    wait_until("the os monitor waits", Duration::from_secs(15), || {
        sched().starts_with("waiting")
    });
    // Switches every millisecond or so: it forks `sleep` (a child nobody announces) and
    // waits for it.
    let mut work = Command::new("sh")
        .args(["-c", "while :; do sleep 0.001; done"])
        .spawn()
        .unwrap();
    let pid = work.id();
    std::thread::sleep(Duration::from_millis(300));
    let name = format!("p5-runtime-{pid}");
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let announced = mono_now_ns();
    let announcement = std::os::unix::net::UnixDatagram::bind_addr(&addr).unwrap();
    wait_until("the os monitor follows", Duration::from_secs(15), || {
        sched().starts_with("tracefs")
    });
    std::thread::sleep(Duration::from_millis(300));
    let _ = work.kill();
    let _ = work.wait();
    drop(announcement);
    let log = top.log.clone();
    top.terminate();
    ls.stop();
    let procs = read_store(&store, "announce");
    let (_, agent) = agents(&procs)[0];
    let os = agent
        .streams
        .values()
        .find(|s| s.kind == 3)
        .expect("an os monitor stream");
    let events: Vec<&Event> = os.events.iter().flat_map(|(_, e)| e.iter()).collect();
    let first = events
        .iter()
        .find_map(|e| match e {
            Event::Switch {
                t,
                prev_tid,
                next_tid,
                ..
            } if *prev_tid == pid || *next_tid == pid => Some(*t),
            _ => None,
        })
        .expect("a switch of the announced process");
    // The monitor stamps the Task record of a process it starts following after tracing
    // is on for it.
    let followed = events
        .iter()
        .find_map(|e| match e {
            Event::Task { t, tid, .. } if *tid == pid => Some(*t),
            _ => None,
        })
        .expect("a task record of the announced process");
    let since = |t: u64| (agent.start_mono_ns + t) as i64 - announced as i64;
    let (started, first) = (since(followed), since(first));
    eprintln!(
        "os monitor following {:.2} ms after the announcement, first sched_switch after {:.2} ms",
        started as f64 / 1e6,
        first as f64 / 1e6
    );
    assert!(
        started <= 10_000_000,
        "the monitor followed {started} ns after the announcement\n{}",
        read(&log)
    );
    assert!(
        first <= started + 50_000_000,
        "no switch soon after tracing was on"
    );
    // Its children: named by Task events (sh forks, the child execs sleep) and scheduled.
    let children: Vec<u32> = events
        .iter()
        .filter_map(|e| match e {
            Event::Task {
                tid, pid: p, comm, ..
            } if *p == *tid && *tid != pid && comm == "sleep" => Some(*tid),
            _ => None,
        })
        .collect();
    assert!(
        children.len() >= 20,
        "{} sleep children named",
        children.len()
    );
    // Each child was seen on a CPU: a switch into or out of it. Not only into: on this
    // kernel (6.18) a switch from the idle task into a followed thread is often missing from
    // the pid-filtered instance (on the CPU the child was forked onto, its switches out are
    // there and none in; adding pid 0 to `set_event_pid` did not bring them back), so a
    // child's first stretch on a CPU may have no start.
    let on_cpu = |c: &u32| {
        events.iter().any(|e| {
            matches!(e, Event::Switch { next_tid, prev_tid, .. } if next_tid == c || prev_tid == c)
        })
    };
    let seen = children.iter().filter(|c| on_cpu(c)).count();
    // ... and woken (`sched_wakeup_new` at least): where the merge starts a stretch whose
    // switch in is missing.
    let woken = children
        .iter()
        .filter(|c| (events.iter()).any(|e| matches!(e, Event::Wakeup { tid, .. } if tid == *c)))
        .count();
    assert_eq!(woken, children.len(), "children woken");
    let into = events
        .iter()
        .filter(|e| matches!(e, Event::Switch { next_tid, .. } if children.contains(next_tid)))
        .count();
    eprintln!(
        "{seen} of {} children seen on a CPU, {into} switches into them",
        children.len()
    );
    assert_eq!(seen, children.len(), "{into} switches into children");
}

#[test]
fn os_monitor_in_the_agent_follows_the_monitored_process() {
    let _slot = shared_slot();
    let root = unsafe { libc::geteuid() } == 0;
    for mode in ["auto", "proc"] {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        let ls = LogServer::start(&store, "127.0.0.1:0");
        // Alternates a short busy stretch and a sleep: switches and wakeups.
        let mut work = Command::new("sh")
            .args([
                "-c",
                "while :; do i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done; sleep 0.02; done",
            ])
            .spawn()
            .unwrap();
        let pid = work.id();
        let top = Agent::spawn(
            dir.path(),
            "top",
            &[
                "--session",
                "sched",
                "--logserver",
                &ls.addr(),
                "--listen",
                "127.0.0.1:0",
                "--sched",
                "--sched-mode",
                mode,
                "--pid",
                &pid.to_string(),
            ],
        );
        let sched = || status(top.addr()).agents[0].sched.clone();
        wait_until("the os monitor starts", Duration::from_secs(15), || {
            let s = sched();
            s.starts_with("tracefs") || s.starts_with("proc")
        });
        let active = sched();
        let log = top.log.clone();
        // `ctl stop` pauses the OS monitor too; `start` resumes it.
        ctl_words(top.addr(), "stop").unwrap();
        wait_until("the os monitor pauses", Duration::from_secs(10), || {
            sched().starts_with("waiting")
        });
        ctl_words(top.addr(), "start").unwrap();
        wait_until("the os monitor resumes", Duration::from_secs(10), || {
            sched() == active
        });
        std::thread::sleep(Duration::from_millis(1500));
        let _ = work.kill();
        let _ = work.wait();
        wait_until(
            "the os monitor stops after the process",
            Duration::from_secs(15),
            || sched().starts_with("waiting"),
        );
        top.terminate();
        ls.stop();
        let procs = read_store(&store, "sched");
        let (_, p) = agents(&procs)[0];
        let os = p
            .streams
            .values()
            .find(|s| s.kind == 3)
            .expect("an os monitor stream");
        assert_exact(os, "os monitor stream");
        let events: Vec<&Event> = os.events.iter().flat_map(|(_, e)| e.iter()).collect();
        if mode == "auto" && active.starts_with("tracefs") {
            assert!(root);
            assert!(os.name.contains("tracefs"), "{}", os.name);
            let switches = events
                .iter()
                .filter(|e| matches!(e, Event::Switch { prev_tid, next_tid, .. } if *prev_tid == pid || *next_tid == pid))
                .count();
            let wakeups = events
                .iter()
                .filter(|e| matches!(e, Event::Wakeup { tid, .. } if *tid == pid))
                .count();
            assert!(
                switches >= 20 && wakeups >= 10,
                "{switches} switches, {wakeups} wakeups"
            );
        } else {
            if mode == "auto" {
                eprintln!(
                    "note: tracefs unavailable ({active}); checked the /proc fallback instead"
                );
            }
            assert!(
                os.name.contains("lower fidelity"),
                "{}: {active}\n{}",
                os.name,
                read(&log)
            );
            let metric = format!("thread.{pid}.{pid}.cpu_ns_total");
            let t = metric_times(os, &metric);
            assert!(t.len() >= 5, "{} samples of {metric}", t.len());
        }
    }
}

#[test]
fn agent_stopped_during_an_outage_leaves_a_spool_that_imports_exactly() {
    let _slot = shared_slot();
    let dir = tempfile::tempdir().unwrap();
    let (_reserved, nowhere) = refusing_addr();
    let agent = Agent::spawn(
        dir.path(),
        "alone",
        &["--session", "spooled", "--logserver", &nowhere],
    );
    std::thread::sleep(Duration::from_millis(3500));
    // It gives up delivering after its drain timeout and leaves everything in the spool.
    agent.terminate();
    let spools: Vec<PathBuf> = std::fs::read_dir(dir.path().join("spool-alone"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(spools.len(), 1, "{spools:?}");
    assert!(
        spools[0].extension().is_some_and(|e| e == "p5spool"),
        "{spools:?}"
    );
    let store = dir.path().join("store");
    let rep = p5_logserver::import::import_files(&store, &spools, Default::default()).unwrap();
    assert!(!rep.has_errors(), "{rep:?}");
    let procs = read_store(&store, "spooled");
    let ags = agents(&procs);
    assert_eq!(ags.len(), 1);
    let s = &ags[0].1.streams[&1];
    assert_exact(s, "spooled agent");
    let t = metric_times(s, "cpu.total.busy");
    assert!(t.len() >= 25, "{} samples", t.len());
    assert_continuous(&t, Duration::from_millis(600), "spooled samples");
}

fn rss_kb(pid: i32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// D3 (issue 12): 50 children that each send a valid Hello, then almost all of a frame
/// claiming nearly 8 MiB and never finish it (and 10 more that send a header claiming 8 MiB
/// before any Hello) must not grow the agent past 64 MB: partial frames share one
/// process-wide budget and the agent stops reading once it is spent.
#[test]
fn partial_frames_from_many_children_stay_within_a_memory_budget() {
    let _slot = shared_slot();
    let dir = tempfile::tempdir().unwrap();
    let ls = LogServer::start(&dir.path().join("store"), "127.0.0.1:0");
    let top = Agent::spawn(
        dir.path(),
        "top",
        &[
            "--session",
            "budget",
            "--logserver",
            &ls.addr(),
            "--listen",
            "127.0.0.1:0",
        ],
    );
    wait_until("the agent", Duration::from_secs(20), || {
        status(top.addr()).agents.len() == 1
    });
    let before = rss_kb(top.pid());
    let len = p5_wire::frame::MAX_FRAME_LEN - 64;
    let mut threads = Vec::new();
    for i in 0..60u64 {
        let addr = top.addr().to_owned();
        threads.push(std::thread::spawn(move || {
            let Ok(mut s) = TcpStream::connect(&addr) else {
                return None;
            };
            s.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
            let mut out = Vec::new();
            if i < 50 {
                let body = p5_wire::hello::Hello {
                    version: 1,
                    caps: p5_wire::hello::Caps::ALL,
                    identity: p5_wire::hello::Identity {
                        process_uid: 0xD3_0000 + i,
                        runtime: RuntimeKind::HostAgent as u8,
                        session: "budget".into(),
                        ..Default::default()
                    },
                }
                .encode_body();
                p5_wire::frame::encode(&mut out, FrameType::Hello as u8, &body);
            }
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
            out.push(FrameType::Events as u8);
            out.resize(out.len() + len as usize - 100, 0x42);
            let _ = s.write_all(&out);
            Some(s)
        }));
    }
    let socks: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    std::thread::sleep(Duration::from_millis(500));
    let under_attack = rss_kb(top.pid());
    eprintln!(
        "agent RSS {} kB before, {} kB with 60 partial ~8 MiB frames",
        before, under_attack
    );
    assert!(under_attack > 0, "agent alive");
    assert!(
        under_attack <= 64 * 1024,
        "agent RSS {under_attack} kB under attack (before {before} kB)"
    );
    drop(socks);
    // Still serving.
    assert_eq!(status(top.addr()).agents.len(), 1);
    top.terminate();
    ls.stop();
}
