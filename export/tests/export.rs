//! Integration tests of `p5_export::perfetto`: sessions written through the trace database
//! (the synthetic one of `fixture`, and `tracedb/test_data/merged-v0002.sqlite`, a session
//! `p5 merge` wrote) are exported, and every packet is decoded and checked against the
//! database by `tests/perfetto_check.py` with Perfetto's own generated protobuf classes (the
//! `perfetto` PyPI package: `scripts/install-py.sh`; without it these tests fail). A golden
//! dump of the merged session's trace is compared with `tests/golden/merged-v0002.txt`
//! (`P5_BLESS=1` rewrites it). PostgreSQL exports must be byte-for-byte the SQLite ones.

mod fixture;

use p5_export::{Error, Options, Summary, perfetto};
use p5_tracedb::{DbUrl, Reader};
use std::path::{Path, PathBuf};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Exports `session` of `url` into bytes.
fn export(
    rt: &tokio::runtime::Runtime,
    url: &str,
    opts: &Options,
) -> Result<(Vec<u8>, Summary), Error> {
    let db = rt
        .block_on(Reader::open(&DbUrl::parse(url).unwrap()))
        .unwrap();
    let mut out = Vec::new();
    let mut calls = 0;
    let summary = perfetto(&db, rt.handle(), opts, &mut out, &mut |_| calls += 1)?;
    assert!(calls > 0, "no progress reported");
    rt.block_on(db.close());
    Ok((out, summary))
}

/// Runs the checker on `trace`; returns its JSON summary.
fn check(trace: &Path, db: &Path, session: &str, dump: Option<&Path>) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/perfetto_check.py");
    let mut cmd = std::process::Command::new("python3");
    cmd.arg(&script).arg(trace).arg(db).arg(session);
    if let Some(d) = dump {
        cmd.arg("--dump").arg(d);
    }
    let out = cmd.output().expect("python3 runs");
    assert!(
        out.status.success(),
        "perfetto_check failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        if out.status.code() == Some(2) {
            " — run scripts/install-py.sh"
        } else {
            ""
        }
    );
    serde_json::from_slice(&out.stdout).expect("checker prints JSON")
}

fn synthetic(dir: &Path, iters: i64) -> (PathBuf, String) {
    let path = dir.join("synthetic.sqlite");
    let url = format!("sqlite:{}", path.display());
    runtime().block_on(fixture::write(&url, "synthetic", iters));
    (path, url)
}

#[test]
fn synthetic_session_decodes_with_perfettos_classes_and_matches_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let (path, url) = synthetic(dir.path(), 120);
    let rt = runtime();
    for compression in [Some(1), None] {
        let opts = Options {
            compression,
            ..Options::new("synthetic")
        };
        let (bytes, s) = export(&rt, &url, &opts).unwrap();
        let trace = dir.path().join("t.pftrace");
        std::fs::write(&trace, &bytes).unwrap();
        let c = check(&trace, &path, "synthetic", None);
        let threads = fixture::THREADS as u64;
        assert_eq!(s.intervals, 120 * 5 * threads);
        assert_eq!(c["intervals"], s.intervals);
        assert_eq!(s.states, 120 * 4 * threads);
        assert_eq!(c["states"], s.states);
        assert_eq!(s.flows, 120 * threads - fixture::lost(120) as u64);
        assert_eq!(c["flows"], s.flows);
        assert_eq!(s.half_messages, fixture::lost(120) as u64);
        assert_eq!(
            c["sched"].as_u64().unwrap() + c["sched_unattributed"].as_u64().unwrap(),
            s.sched
        );
        assert_eq!(c["irqs"], s.irqs);
        assert_eq!(c["marks"], s.marks);
        assert_eq!(c["counter_values"], s.counter_values);
        assert_eq!(c["events"], s.events);
        assert_eq!((s.moved, s.clipped), (0, 0));
        assert_eq!(s.bytes, bytes.len() as u64);
        if compression.is_some() {
            assert!(
                s.bytes * 3 < s.raw_bytes,
                "{} bytes of {} raw",
                s.bytes,
                s.raw_bytes
            );
        } else {
            assert_eq!(s.bytes, s.raw_bytes);
        }
    }
}
