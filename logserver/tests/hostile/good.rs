//! The good client of the attack tests: the p5 runtime itself, in a child process (the test
//! binary run again with only [`good_runtime_client_process`]). It connects, records rounds of
//! events, flushes after each and prints its counters. It passes when it connected once,
//! never lost its connection, had every frame acknowledged and spooled nothing: a client that
//! waits too long for its handshake or its acks spools (that is the runtime's own rule), so no
//! assertion here measures time. Shared by the log server's and the host agent's tests (which
//! include this file).

use p5_logserver::reader::StoreDir;
use p5_wire::data::EventsFrame;
use p5_wire::frame::FrameType;
use p5_wire::store::StoreRecord;
use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Sensors of the good client: an outer scope around an inner one.
const OUTER: u64 = 0x600d_0000_0000_0001;
const INNER: u64 = 0x600d_0000_0000_0002;
/// Rounds of events the good client records, each followed by a flush.
pub const GOOD_ROUNDS: u64 = 20;
/// Events per round (outer enter, inner enter, inner exit, outer exit).
pub const GOOD_EVENTS_PER_ROUND: u64 = 40_000;
/// Longest the good client waits for its first handshake before it records anyway. Far
/// longer than a handshake takes; shorter than every server timeout that would end an
/// attack by itself (hello 10 s, frame 30 s), so a server that lets the client in only once
/// the attackers time out still fails.
const CONNECT_GUARD: Duration = Duration::from_secs(5);
/// Hang guard of the whole good client run.
const RUN_GUARD: Duration = Duration::from_secs(120);

/// The counters the good client printed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct GoodReport {
    pub events: u64,
    pub frames: u64,
    pub acked: u64,
    pub spooled: u64,
    pub lost: u64,
    pub connects: u64,
    pub disconnects: u64,
    pub flushed: u64,
}

impl GoodReport {
    fn parse(line: &str) -> Option<Self> {
        let mut r = GoodReport::default();
        // The harness prints "test NAME ... " before it on the same line.
        let (_, fields) = line.split_once("good-client ")?;
        for kv in fields.split_whitespace() {
            let Some((k, v)) = kv.split_once('=') else {
                break;
            };
            let Ok(v) = v.parse::<u64>() else {
                break;
            };
            match k {
                "events" => r.events = v,
                "frames" => r.frames = v,
                "acked" => r.acked = v,
                "spooled" => r.spooled = v,
                "lost" => r.lost = v,
                "connects" => r.connects = v,
                "disconnects" => r.disconnects = v,
                "flushed" => r.flushed = v,
                _ => {}
            }
        }
        Some(r)
    }

    /// Every frame acknowledged on one connection that never dropped, nothing spooled.
    pub fn assert_served(&self, what: &str) {
        let all = GOOD_ROUNDS * GOOD_EVENTS_PER_ROUND;
        assert_eq!(self.events, all, "{what}: events recorded: {self:?}");
        assert_eq!(self.connects, 1, "{what}: handshakes: {self:?}");
        assert_eq!(self.disconnects, 0, "{what}: connection lost: {self:?}");
        assert_eq!(self.spooled, 0, "{what}: frames spooled: {self:?}");
        assert_eq!(self.lost, 0, "{what}: frames lost: {self:?}");
        assert!(self.frames >= GOOD_ROUNDS, "{what}: frames: {self:?}");
        assert_eq!(self.acked, self.frames, "{what}: frames acked: {self:?}");
        assert_eq!(self.flushed, GOOD_ROUNDS, "{what}: flushes: {self:?}");
    }
}

/// Runs the good client against `addr` in session `session`, spooling (if it must) under
/// `dir`, and returns what it printed.
pub fn run_good_client(addr: &str, session: &str, dir: &Path) -> GoodReport {
    let exe = std::env::current_exe().expect("test binary path");
    let log = dir.join(format!("good-client-{session}.log"));
    let mut child = Command::new(exe)
        .args([
            "--ignored",
            "--exact",
            &client_test_name(),
            "--nocapture",
            "--test-threads=1",
        ])
        .env("P5_LOGSERVER", addr)
        .env("P5_SESSION", session)
        .env("P5_DIR", dir.join(format!("good-spool-{session}")))
        .env("P5_THROTTLE", "off")
        .env("P5_GOOD_CLIENT", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("client log"))
        .spawn()
        .expect("start the good client");
    let mut out = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let end = Instant::now() + RUN_GUARD;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the good client hung; its log:\n{}", read(&log));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = reader.join().unwrap_or_default();
    assert!(
        status.success(),
        "good client: {status}\n{stdout}\n{}",
        read(&log)
    );
    stdout
        .lines()
        .find_map(GoodReport::parse)
        .unwrap_or_else(|| panic!("no report from the good client:\n{stdout}\n{}", read(&log)))
}

/// The harness name of [`good_runtime_client_process`] in whichever test binary includes this
/// file: its module path without the crate.
fn client_test_name() -> String {
    let path = module_path!();
    let module = path.split_once("::").map_or("", |(_, m)| m);
    format!("{module}::good_runtime_client_process")
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// The good client itself (see the module docs); only meaningful as a child process.
#[test]
#[ignore = "the good client of the attack tests, which run it as a child process"]
fn good_runtime_client_process() {
    assert!(
        std::env::var_os("P5_GOOD_CLIENT").is_some(),
        "run by the attack tests, not by hand"
    );
    p5_runtime::init();
    let guard = Instant::now() + CONNECT_GUARD;
    while p5_runtime::stats().connects == 0 && Instant::now() < guard {
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut flushed = 0;
    for _ in 0..GOOD_ROUNDS {
        for _ in 0..GOOD_EVENTS_PER_ROUND / 4 {
            let _outer = p5_runtime::scope(OUTER);
            p5_runtime::enter(INNER);
            p5_runtime::exit(INNER);
        }
        if p5_runtime::flush() {
            flushed += 1;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let s = p5_runtime::stats();
    println!(
        "good-client events={} frames={} acked={} spooled={} lost={} connects={} disconnects={} flushed={flushed}",
        s.events,
        s.frames,
        s.frames_acked,
        s.frames_spooled,
        s.frames_lost,
        s.connects,
        s.disconnects
    );
    p5_runtime::shutdown();
}

/// Events stored in `session` (every `Events` frame of every process, each once).
pub fn stored_events(root: &Path, session: &str) -> u64 {
    let s = StoreDir::open(root).unwrap().session(session).unwrap();
    let mut recs = s.records().unwrap();
    let mut n = 0;
    while recs.advance().unwrap() {
        if let Some(r) = recs.record()
            && let StoreRecord::Data { ty, body, .. } = r.record
            && ty == FrameType::Events as u8
        {
            n += EventsFrame::parse(body).unwrap().validate().unwrap() as u64;
        }
    }
    n
}
