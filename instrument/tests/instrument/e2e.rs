//! End to end: instrument a program from `tests/programs`, build it (C: gcc against `p5.h` and
//! `libp5_runtime.a`, built with cargo if missing; Python: the client in `clients/python`),
//! run it against a log server (in this process, listening on loopback), read the session
//! back from the server's store, and check the events against the manifest: which sensors
//! fired, how often, and that each sensor's manifest line is the line of the code it stands
//! for. The program's spool directory must stay empty: everything went over the network.

use crate::{crate_dir, have, read};
use p5_instrument::{Modes, Options, run};
use p5_logserver::server::ServeSummary;
use p5_wire::Event;
use p5_wire::manifest::{Manifest, parse_id};
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

/// Functions, calls and comm.
const ALL: Modes = Modes {
    functions: true,
    calls: true,
    comm: true,
};

/// Counts of enter, exit and mark events per sensor, and comm events, in a spool directory.
#[derive(Debug, Default)]
pub struct Seen {
    enters: HashMap<u64, u32>,
    exits: HashMap<u64, u32>,
    marks: HashMap<u64, u32>,
    comm: HashMap<u64, (p5_wire::CommOp, i64)>,
    /// Every comm event: (sensor, op, result), in order.
    pub comm_all: Vec<(u64, p5_wire::CommOp, i64)>,
    /// The sensor tables the program sent (`Sensors` frames).
    pub tables: Vec<p5_wire::sensors::Table>,
}

impl Seen {
    /// Counts the events of one `Events` frame body.
    fn add(&mut self, body: &[u8]) {
        let ev = p5_wire::EventsFrame::parse(body).unwrap();
        for e in ev.events().unwrap() {
            match e.unwrap() {
                Event::Enter { sensor, .. } => *self.enters.entry(sensor).or_default() += 1,
                Event::Exit { sensor, .. } => *self.exits.entry(sensor).or_default() += 1,
                Event::Mark { sensor, .. } => *self.marks.entry(sensor).or_default() += 1,
                Event::Comm {
                    sensor, op, result, ..
                } => {
                    self.comm.insert(sensor, (op, result));
                    self.comm_all.push((sensor, op, result));
                }
                _ => {}
            }
        }
    }
}

/// A p5 log server running in this process on a loopback port, with its own store.
pub struct LogServer {
    rt: tokio::runtime::Runtime,
    addr: std::net::SocketAddr,
    store: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<ServeSummary, p5_logserver::Error>>>,
}

/// The session the programs record into.
pub const SESSION: &str = "e2e";

impl LogServer {
    /// Starts it.
    pub fn start() -> Self {
        let store = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let config = p5_logserver::ServerConfig {
            listen: "127.0.0.1:0".into(),
            store: store.path().to_path_buf(),
            worker_threads: Some(1),
            ..p5_logserver::ServerConfig::default()
        };
        let server = rt.block_on(p5_logserver::Server::bind(config)).unwrap();
        let addr = server.local_addr();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = rt.spawn(server.run(async {
            let _ = rx.await;
        }));
        LogServer {
            rt,
            addr,
            store,
            stop: Some(tx),
            task: Some(task),
        }
    }

    /// The environment that points a program at this server (and at `spool` should it ever
    /// fail to reach it).
    pub fn vars(&self, spool: &Path) -> [(&'static str, OsString); 3] {
        std::fs::create_dir_all(spool).unwrap();
        [
            ("P5_LOGSERVER", self.addr.to_string().into()),
            ("P5_SESSION", SESSION.into()),
            ("P5_DIR", spool.into()),
        ]
    }

    /// Stops the server (it drains and commits what it received), checks that nothing was
    /// spooled, and counts the events of the session.
    pub fn finish(mut self, spool: &Path) -> Seen {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            self.rt.block_on(task).unwrap().unwrap();
        }
        let spooled: Vec<_> = std::fs::read_dir(spool).unwrap().flatten().collect();
        assert!(spooled.is_empty(), "events were spooled: {spooled:?}");
        let dir = p5_logserver::reader::StoreDir::open(self.store.path())
            .unwrap()
            .session(SESSION)
            .unwrap();
        let mut records = dir.records().unwrap();
        let mut seen = Seen::default();
        let mut hello = false;
        while records.advance().unwrap() {
            let Some(r) = records.record() else { continue };
            match r.record {
                p5_wire::store::StoreRecord::Process { .. } => hello = true,
                p5_wire::store::StoreRecord::Data { ty, body, .. }
                    if ty == p5_wire::FrameType::Events as u8 =>
                {
                    seen.add(body)
                }
                p5_wire::store::StoreRecord::Data { ty, body, .. }
                    if ty == p5_wire::FrameType::Sensors as u8 =>
                {
                    seen.tables
                        .push(p5_wire::data::Sensors::parse(body).unwrap().1)
                }
                _ => {}
            }
        }
        assert!(records.faults().is_empty(), "{:?}", records.faults());
        assert!(hello, "no process reached the log server");
        seen
    }
}

/// Counts the events of the spool file in `dir` (local-file mode).
pub fn decode_spool(dir: &Path) -> Seen {
    let file = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .find(|e| e.path().extension().is_some_and(|x| x == "p5spool"))
        .expect("spool file")
        .path();
    let bytes = std::fs::read(file).unwrap();
    let mut seen = Seen::default();
    let mut first = true;
    for f in p5_wire::frame::Frames::new(&bytes) {
        let f = f.unwrap();
        if first {
            assert_eq!(f.frame_type(), Some(p5_wire::FrameType::Hello));
            first = false;
        }
        if f.frame_type() == Some(p5_wire::FrameType::Events) {
            seen.add(f.body);
        }
        if f.frame_type() == Some(p5_wire::FrameType::Sensors) {
            seen.tables
                .push(p5_wire::data::Sensors::parse(f.body).unwrap().1);
        }
    }
    assert!(!first, "empty spool");
    seen
}

/// Instruments `program` (a file under tests/programs) into a fresh tree; returns the temp
/// dir, the output dir, the manifest and the original text.
fn instrument_program(
    program: &str,
    modes: Modes,
) -> (tempfile::TempDir, std::path::PathBuf, Manifest, String) {
    let tmp = tempfile::tempdir().unwrap();
    let src_dir = tmp.path().join("src");
    std::fs::create_dir_all(&src_dir).unwrap();
    let original = read(&crate_dir().join("tests/programs").join(program));
    std::fs::write(src_dir.join(program), &original).unwrap();
    let out = tmp.path().join("out");
    let report = run(&Options {
        paths: vec![src_dir.clone()],
        out: Some(out.clone()),
        modes,
        ..Options::default()
    })
    .unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let manifest: Manifest = serde_json::from_str(&read(&out.join("p5-manifest.json"))).unwrap();
    assert_eq!(manifest.files.len(), 1);
    let copy = out.join("sources").join(&manifest.files[0].sha256);
    assert_eq!(read(&copy), original);
    (tmp, out, manifest, original)
}

/// The tables the program sent describe exactly the manifest's sensors (names, kinds, places),
/// once, and point at the manifest's directory and source copy.
fn check_tables(manifest: &Manifest, out: &Path, seen: &Seen) {
    assert!(!seen.tables.is_empty(), "the program sent no sensor table");
    let mut sent: Vec<_> = seen.tables.iter().flat_map(|t| t.sensors.clone()).collect();
    let mut want = manifest.sensors.clone();
    sent.sort_by(|a, b| a.id.cmp(&b.id));
    want.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(sent, want);
    for t in &seen.tables {
        assert_eq!(Path::new(&t.root), out.canonicalize().unwrap());
        let f = manifest.files.iter().find(|f| f.path == t.file).unwrap();
        assert_eq!(t.sha256, f.sha256);
    }
}

/// Checks `--calls`: every call sensor that fired exited as often as it entered, and each
/// `(callee, times, needle)` names a call sensor on a line containing `needle` that ran
/// `times` times.
fn check_calls(manifest: &Manifest, seen: &Seen, lines: &[&str], want: &[(&str, u32, &str)]) {
    let calls: Vec<_> = manifest
        .sensors
        .iter()
        .filter(|s| s.kind == "call")
        .collect();
    for s in &calls {
        let id = parse_id(&s.id).unwrap();
        assert_eq!(seen.enters.get(&id), seen.exits.get(&id), "call {}", s.name);
    }
    for (name, times, needle) in want {
        let s = calls
            .iter()
            .find(|s| s.name == *name && lines[s.line as usize - 1].contains(needle))
            .unwrap_or_else(|| panic!("no call sensor {name} at {needle}: {calls:?}"));
        let id = parse_id(&s.id).unwrap();
        assert_eq!(seen.enters.get(&id), Some(times), "enters of call {name}");
    }
}

fn function_id(manifest: &Manifest, name: &str) -> (u64, u32) {
    let s = manifest
        .sensors
        .iter()
        .find(|s| s.kind == "function" && s.name == name)
        .unwrap_or_else(|| panic!("no function sensor {name}"));
    (parse_id(&s.id).unwrap(), s.line)
}

#[test]
fn python_program_records_the_manifest_sensors() {
    if !have("python3") {
        eprintln!("python3 not installed; skipping");
        return;
    }
    let (tmp, out, manifest, original) = instrument_program("echo.py", Modes::default());
    let spool = tmp.path().join("spool");
    let server = LogServer::start();
    let o = Command::new("python3")
        .arg(out.join("echo.py"))
        .env("PYTHONPATH", crate_dir().join("../clients/python"))
        .envs(server.vars(&spool))
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "-1 0 2 3 2 4\n");
    let seen = server.finish(&spool);
    check_tables(&manifest, &out, &seen);
    let lines: Vec<&str> = original.lines().collect();
    for (name, calls) in [
        ("classify", 3),
        ("square", 1),
        ("Box.make", 1),
        ("Box.total", 1),
    ] {
        let (id, line) = function_id(&manifest, name);
        assert_eq!(seen.enters.get(&id), Some(&calls), "enters of {name}");
        assert_eq!(seen.exits.get(&id), Some(&calls), "exits of {name}");
        let bare = name.rsplit('.').next().unwrap();
        assert!(
            lines[line as usize - 1].contains(&format!("def {bare}(")),
            "line of {name}"
        );
    }
    // A generator: one span per resumption (3 values + the final StopIteration).
    let (gen_id, _) = function_id(&manifest, "count");
    assert_eq!(seen.enters.get(&gen_id), Some(&4));
    assert_eq!(seen.exits.get(&gen_id), Some(&4));
    // A coroutine suspended once: two resumptions.
    let (co_id, _) = function_id(&manifest, "later");
    assert_eq!(seen.enters.get(&co_id), Some(&2));
    // Socket methods are recorded; the file's close() is routed too but not recorded.
    let comm: Vec<_> = manifest
        .sensors
        .iter()
        .filter(|s| s.kind == "comm")
        .collect();
    assert_eq!(comm.len(), 5, "{comm:?}");
    for (name, op, result) in [
        ("sendall", p5_wire::CommOp::Send, 4),
        ("recv", p5_wire::CommOp::Recv, 4),
    ] {
        let s = comm.iter().find(|s| s.name == name).unwrap();
        assert_eq!(
            seen.comm.get(&parse_id(&s.id).unwrap()),
            Some(&(op, result)),
            "{name}"
        );
        assert!(lines[s.line as usize - 1].contains(&format!(".{name}(")));
    }
    let closes = comm.iter().filter(|s| s.name == "close").count();
    let recorded_closes = comm
        .iter()
        .filter(|s| s.name == "close" && seen.comm.contains_key(&parse_id(&s.id).unwrap()))
        .count();
    assert_eq!((closes, recorded_closes), (3, 2));
    let region = manifest
        .sensors
        .iter()
        .find(|s| s.kind == "region")
        .unwrap();
    let rid = parse_id(&region.id).unwrap();
    assert_eq!(
        (seen.enters.get(&rid), seen.exits.get(&rid)),
        (Some(&1), Some(&1))
    );
    for s in manifest.sensors.iter().filter(|s| s.kind == "statement") {
        assert_eq!(seen.marks.get(&parse_id(&s.id).unwrap()), Some(&1));
    }
}

#[test]
fn c_program_records_the_manifest_sensors() {
    if !have("gcc") {
        eprintln!("gcc not installed; skipping");
        return;
    }
    let (tmp, out, manifest, original) = instrument_program("echo.c", Modes::default());
    let lib = p5_instrument::runtime::static_lib().expect("libp5_runtime.a");
    let exe = tmp.path().join("echo");
    let st = Command::new("gcc")
        .args(["-O1", "-Wall", "-Werror", "-pthread", "-I"])
        .arg(out.join("p5-include"))
        .arg(out.join("echo.c"))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-o"])
        .arg(&exe)
        .status()
        .unwrap();
    assert!(st.success(), "gcc failed");
    let spool = tmp.path().join("spool");
    let server = LogServer::start();
    std::fs::create_dir_all(&spool).unwrap();
    let o = Command::new(&exe)
        .envs(server.vars(&spool))
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "-1 0 2 4\n");
    let seen = server.finish(&spool);
    check_tables(&manifest, &out, &seen);
    let lines: Vec<&str> = original.lines().collect();
    let sensor = |kind: &str, name: &str| {
        manifest
            .sensors
            .iter()
            .find(|s| s.kind == kind && s.name == name)
            .unwrap_or_else(|| panic!("no {kind} sensor {name}"))
    };
    let id = |s: &p5_wire::manifest::Sensor| parse_id(&s.id).unwrap();
    for (func, calls) in [("main", 1), ("classify", 3), ("square", 1)] {
        let (fid, line) = function_id(&manifest, func);
        assert_eq!(seen.enters.get(&fid), Some(&calls), "enters of {func}");
        assert_eq!(
            seen.exits.get(&fid),
            Some(&calls),
            "exits of {func} (early returns)"
        );
        assert!(lines[line as usize - 1].contains(&format!("{func}(")));
    }
    for (name, op, result, needle) in [
        ("send", p5_wire::CommOp::Send, 4, "send(cli"),
        ("recv", p5_wire::CommOp::Recv, 4, "recv(peer"),
        ("write", p5_wire::CommOp::Write, 4, "write(peer"),
        ("read", p5_wire::CommOp::Read, 4, "read(cli"),
        ("poll", p5_wire::CommOp::Wait, 0, "poll(&pf"),
        ("select", p5_wire::CommOp::Wait, 1, "select(peer"),
        ("epoll_wait", p5_wire::CommOp::Wait, 1, "epoll_wait(ep"),
    ] {
        let s = sensor("comm", name);
        assert_eq!(seen.comm.get(&id(s)), Some(&(op, result)), "comm {name}");
        assert!(
            lines[s.line as usize - 1].contains(needle),
            "line of {name}"
        );
    }
    let region = sensor("region", "reply");
    assert_eq!(seen.enters.get(&id(region)), Some(&1));
    assert_eq!(seen.exits.get(&id(region)), Some(&1));
    let statements: Vec<_> = manifest
        .sensors
        .iter()
        .filter(|s| s.kind == "statement")
        .collect();
    assert_eq!(statements.len(), 2);
    for s in statements {
        assert_eq!(seen.marks.get(&id(s)), Some(&1));
    }
}

#[test]
fn java_program_records_the_manifest_sensors() {
    let (tmp, out, manifest, original) = instrument_program("Echo.java", ALL);
    let classes = tmp.path().join("classes");
    if crate::clients::build_java_client(&classes).is_none() {
        eprintln!("no JDK; skipping");
        return;
    }
    let st = Command::new("javac")
        .arg("-cp")
        .arg(&classes)
        .arg("-d")
        .arg(&classes)
        .arg(out.join("Echo.java"))
        .status()
        .unwrap();
    assert!(st.success(), "javac of the instrumented program failed");
    let spool = tmp.path().join("spool");
    let server = LogServer::start();
    let o = Command::new("java")
        .arg("-cp")
        .arg(&classes)
        .arg("Echo")
        .envs(server.vars(&spool))
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "-1 0 2 7 1 4 5\n");
    let seen = server.finish(&spool);
    check_tables(&manifest, &out, &seen);
    let lines: Vec<&str> = original.lines().collect();
    for (name, calls, needle) in [
        ("Echo.classify", 3, "classify("),
        ("Echo.square", 1, "square("),
        ("Echo.fails", 1, "fails("),
        ("Echo.Echo", 1, "Echo("),
        ("Base.Base", 1, "Base("),
        ("Echo.main", 1, "main("),
    ] {
        let (id, line) = function_id(&manifest, name);
        assert_eq!(seen.enters.get(&id), Some(&calls), "enters of {name}");
        assert_eq!(seen.exits.get(&id), Some(&calls), "exits of {name}");
        assert!(lines[line as usize - 1].contains(needle), "line of {name}");
    }
    // Socket streams, the listeners' accepts and the channels' calls are recorded; the
    // process's stream is not.
    let comm: Vec<_> = manifest
        .sensors
        .iter()
        .filter(|s| s.kind == "comm")
        .collect();
    let sensor = |name: &str, needle: &str| {
        let s = comm
            .iter()
            .find(|s| s.name == name && lines[s.line as usize - 1].contains(needle))
            .unwrap_or_else(|| panic!("no comm sensor {name} at {needle}: {comm:?}"));
        parse_id(&s.id).unwrap()
    };
    use p5_wire::CommOp::{Accept, Connect, Recv, Send};
    let events = |id: u64| -> Vec<(p5_wire::CommOp, i64)> {
        seen.comm_all
            .iter()
            .filter(|e| e.0 == id)
            .map(|e| (e.1, e.2))
            .collect()
    };
    assert_eq!(
        events(sensor("getOutputStream", "client.getOutputStream()")),
        [(Send, 4)]
    );
    assert_eq!(
        events(sensor("getInputStream", "peer.getInputStream()")),
        [(Recv, 4)]
    );
    assert!(events(sensor("getInputStream", "p.getInputStream()")).is_empty());
    for needle in ["server.accept()", "listener.accept()"] {
        let accepts = events(sensor("accept", needle));
        assert!(
            matches!(accepts[..], [(Accept, fd)] if fd != 0),
            "{needle}: {accepts:?}"
        );
    }
    assert_eq!(events(sensor("connect", "client.connect(")), [(Connect, 0)]);
    assert_eq!(
        events(sensor("connect", "Socket client = new Socket(")),
        [(Connect, 0)]
    );
    assert_eq!(events(sensor("write", "client.write(")), [(Send, 5)]);
    let reads = events(sensor("read", "peer.read("));
    assert!(!reads.is_empty() && reads.iter().all(|r| r.0 == Recv));
    assert_eq!(reads.iter().map(|r| r.1).sum::<i64>(), 5);
    // `out.write(…)` on a socket stream is offered to the channel wrapper and left alone.
    assert!(events(sensor("write", "out.write(")).is_empty());
    check_calls(
        &manifest,
        &seen,
        &lines,
        &[
            // Leaves by an exception: the finally still records the exit.
            ("fails", 1, "fails();"),
            ("write", 1, "out.write("),
            ("readNBytes", 1, "int n = in.readNBytes("),
        ],
    );
}

#[test]
fn cpp_program_records_the_manifest_sensors() {
    if !have("g++") {
        eprintln!("g++ not installed; skipping");
        return;
    }
    let (tmp, out, manifest, original) = instrument_program("shapes.cpp", Modes::default());
    let lib = p5_instrument::runtime::static_lib().expect("libp5_runtime.a");
    let exe = tmp.path().join("shapes");
    let st = Command::new("g++")
        .args(["-std=c++17", "-O1", "-Wall", "-Werror", "-pthread", "-I"])
        .arg(out.join("p5-include"))
        .arg(out.join("shapes.cpp"))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-o"])
        .arg(&exe)
        .status()
        .unwrap();
    assert!(st.success(), "g++ failed");
    let spool = tmp.path().join("spool");
    let server = LogServer::start();
    let o = Command::new(&exe)
        .envs(server.vars(&spool))
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "9 -1\n");
    let seen = server.finish(&spool);
    check_tables(&manifest, &out, &seen);
    let lines: Vec<&str> = original.lines().collect();
    for (name, calls, needle) in [
        ("geo::Shape::Shape", 2, "Shape(int s)"),
        ("geo::Shape::area", 3, "area()"),
        // One of the two calls leaves by an exception: the RAII guard still records the exit.
        ("geo::Shape::checked", 2, "checked(int limit)"),
        ("safe", 2, "safe("),
        ("main", 1, "main()"),
    ] {
        let (id, line) = function_id(&manifest, name);
        assert_eq!(seen.enters.get(&id), Some(&calls), "enters of {name}");
        assert_eq!(seen.exits.get(&id), Some(&calls), "exits of {name}");
        assert!(lines[line as usize - 1].contains(needle), "line of {name}");
    }
    for (name, op) in [
        ("write", p5_wire::CommOp::Write),
        ("read", p5_wire::CommOp::Read),
    ] {
        let s = manifest
            .sensors
            .iter()
            .find(|s| s.kind == "comm" && s.name == name)
            .unwrap();
        assert_eq!(
            seen.comm.get(&parse_id(&s.id).unwrap()),
            Some(&(op, 4)),
            "comm {name}"
        );
    }
}

#[test]
fn rust_program_records_the_manifest_sensors() {
    let tmp = tempfile::tempdir().unwrap();
    let krate = tmp.path().join("demo");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::write(
        krate.join("Cargo.toml"),
        "[package]\nname = \"p5-demo\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[dependencies]\n\n[workspace]\n",
    )
    .unwrap();
    let original = read(&crate_dir().join("tests/programs/rust_demo.rs"));
    // The program calls p5_runtime::flush(); the original needs the dependency too.
    std::fs::write(krate.join("src/main.rs"), &original).unwrap();
    let out = tmp.path().join("out");
    let report = run(&Options {
        paths: vec![krate.clone()],
        out: Some(out.clone()),
        modes: ALL,
        ..Options::default()
    })
    .unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let toml = read(&out.join("Cargo.toml"));
    assert!(toml.contains("p5-runtime = { path = "), "{toml}");
    let manifest: Manifest = serde_json::from_str(&read(&out.join("p5-manifest.json"))).unwrap();
    let target = crate::e2e_target_dir();
    let spool = tmp.path().join("spool");
    let server = LogServer::start();
    let o = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["run", "-q", "--offline", "--manifest-path"])
        .arg(out.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .envs(server.vars(&spool))
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "12 true 1 4\n");
    let seen = server.finish(&spool);
    check_tables(&manifest, &out, &seen);
    let lines: Vec<&str> = original.lines().collect();
    for (name, calls, needle) in [
        ("Counter::bump", 2, "fn bump("),
        ("parse", 3, "fn parse("),
        // One call panics: the guard records the exit while unwinding.
        ("explode", 2, "fn explode("),
        ("main", 1, "fn main("),
    ] {
        let (id, line) = function_id(&manifest, name);
        assert_eq!(seen.enters.get(&id), Some(&calls), "enters of {name}");
        assert_eq!(seen.exits.get(&id), Some(&calls), "exits of {name}");
        assert!(lines[line as usize - 1].contains(needle), "line of {name}");
    }
    let region = manifest
        .sensors
        .iter()
        .find(|s| s.kind == "region")
        .unwrap();
    let rid = parse_id(&region.id).unwrap();
    assert_eq!(
        (seen.enters.get(&rid), seen.exits.get(&rid)),
        (Some(&1), Some(&1))
    );
    // std sockets record under the sensor of the call that made them; accepted streams under
    // the listener's.
    let comm_sensor = |name: &str, needle: &str| {
        let s = manifest
            .sensors
            .iter()
            .find(|s| {
                s.kind == "comm" && s.name == name && lines[s.line as usize - 1].contains(needle)
            })
            .unwrap_or_else(|| panic!("no comm sensor {name} at {needle}"));
        parse_id(&s.id).unwrap()
    };
    let bind = comm_sensor("bind", "TcpListener::bind(");
    let connect = comm_sensor("connect", "TcpStream::connect(");
    use p5_wire::CommOp::{Accept, Close, Connect, Recv, Send};
    let events = |sensor: u64| -> Vec<(p5_wire::CommOp, i64)> {
        seen.comm_all
            .iter()
            .filter(|e| e.0 == sensor && e.1 != Accept && e.1 != Close)
            .map(|e| (e.1, e.2))
            .collect()
    };
    assert_eq!(events(connect), [(Connect, 0), (Send, 4), (Recv, 5)]);
    assert_eq!(events(bind), [(Recv, 4), (Send, 5)]);
    use p5_wire::CommOp::{RecvFrom, SendTo};
    assert_eq!(events(comm_sensor("bind", "let a = ")), [(SendTo, 3)]);
    assert_eq!(events(comm_sensor("bind", "let b = ")), [(RecvFrom, 3)]);
    let count = |sensor: u64, op| {
        seen.comm_all
            .iter()
            .filter(|e| e.0 == sensor && e.1 == op && e.2 >= 0)
            .count()
    };
    assert_eq!(count(bind, Accept), 1);
    // The listener, the accepted stream and its clone; the connected stream.
    assert_eq!((count(bind, Close), count(connect, Close)), (3, 1));
    check_calls(
        &manifest,
        &seen,
        &lines,
        &[
            // One of the three leaves by `?`.
            ("parse", 3, "s.trim().parse::<u32>()?"),
            ("std::panic::set_hook", 1, "set_hook("),
            ("is_err", 1, "catch_unwind("),
        ],
    );
}
