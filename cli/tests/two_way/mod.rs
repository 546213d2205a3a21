//! Shared by the tests of the Python and Java clients: their clock pings reach the store as
//! two-way samples; the Java client compiled with a program.
// Each test crate that includes this module uses some of it.
#![allow(dead_code)]

use p5_logserver::reader::StoreDir;
use p5_wire::hello::RuntimeKind;
use p5_wire::store::{SampleSource, StoreRecord};
use std::collections::BTreeMap;
use std::path::Path;

/// Each of the `processes` processes of `runtime` in `session` sent pings that echo the log
/// server's answers (at least a burst's worth), and its samples leave room for a clock line:
/// the smallest `t_s − t_p` of its pings stays above the largest of its echoes (a receipt
/// taken too early would cross them).
pub fn assert_two_way_samples(store: &Path, session: &str, runtime: RuntimeKind, processes: usize) {
    let session = StoreDir::open(store).unwrap().session(session).unwrap();
    let mut records = session.records().unwrap();
    let mut found = Vec::new();
    // Per process: echoed pings, least forward t_s − t_p, greatest backward one.
    let mut seen: BTreeMap<u64, (u32, i128, i128)> = BTreeMap::new();
    while records.advance().unwrap() {
        let Some(r) = records.record() else { continue };
        match r.record {
            StoreRecord::Process { hello, .. }
                if RuntimeKind::from_u8(hello.identity.runtime) == runtime =>
            {
                found.push((hello.identity.process_uid, hello.identity.program));
            }
            StoreRecord::Sample {
                t_s,
                process_uid,
                t_p,
                echo_t_s,
                echo_t_p,
                source,
            } if source == SampleSource::Ping as u8 && echo_t_s != 0 => {
                let e = seen.entry(process_uid).or_insert((0, i128::MAX, i128::MIN));
                e.0 += 1;
                e.1 = e.1.min(t_s as i128 - t_p as i128);
                e.2 = e.2.max(echo_t_s as i128 - echo_t_p as i128);
            }
            _ => {}
        }
    }
    assert_eq!(found.len(), processes, "{found:?}");
    for (uid, program) in found {
        let (n, forward, backward) = seen.get(&uid).copied().unwrap_or((0, 0, 0));
        assert!(n >= 8, "{program}: {n} pings echoing an answer");
        assert!(
            forward > backward,
            "{program}: forward floor {forward} ns not above the echoes' {backward} ns"
        );
        println!(
            "{program}: {n} echoed pings, least round trip {:.1} µs",
            (forward - backward) as f64 / 1e3
        );
    }
}

/// The server run's start and each process's start (uid → start), CLOCK_MONOTONIC ns: where
/// every process shares the server's real clock, the truth of its clock map.
pub fn starts(store: &Path, session: &str) -> (u64, BTreeMap<u64, u64>) {
    let session = StoreDir::open(store).unwrap().session(session).unwrap();
    let mut records = session.records().unwrap();
    let mut server = None;
    let mut starts = BTreeMap::new();
    while records.advance().unwrap() {
        let Some(r) = records.record() else { continue };
        server.get_or_insert(r.segment.server_start_mono_ns);
        if let StoreRecord::Process { hello, .. } = r.record {
            starts.insert(hello.identity.process_uid, hello.identity.start_mono_ns);
        }
    }
    (server.expect("an empty store"), starts)
}

/// Compiles the Java client with `programs` into `dir/classes`; returns that directory.
pub fn compile_java(dir: &Path, programs: &[&Path]) -> std::path::PathBuf {
    let have = |p: &str| {
        std::process::Command::new(p)
            .arg("-version")
            .output()
            .is_ok()
    };
    assert!(
        have("javac") && have("java"),
        "a JDK is needed (scripts/test.sh installs it)"
    );
    let classes = dir.join("classes");
    let client: Vec<std::path::PathBuf> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../clients/java/src/p5"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "java"))
            .collect();
    let st = std::process::Command::new("javac")
        .arg("-d")
        .arg(&classes)
        .args(&client)
        .args(programs)
        .status()
        .unwrap();
    assert!(st.success(), "javac failed");
    classes
}
