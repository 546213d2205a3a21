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

/// A golden dump of the trace of a session `p5 merge` wrote (the skew fixture, merged by an
/// older p5: migrations 0001–0002), decoded with Perfetto's classes.
#[test]
fn merged_session_matches_its_golden_dump() {
    let dir = tempfile::tempdir().unwrap();
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tracedb/test_data/merged-v0002.sqlite");
    let db = dir.path().join("merged.sqlite");
    std::fs::copy(&src, &db).unwrap();
    let rt = runtime();
    let (bytes, s) = export(
        &rt,
        &format!("sqlite:{}", db.display()),
        &Options::new("skew"),
    )
    .unwrap();
    let trace = dir.path().join("skew.pftrace");
    std::fs::write(&trace, &bytes).unwrap();
    let dump = dir.path().join("dump.txt");
    let c = check(&trace, &db, "skew", Some(&dump));
    assert_eq!(c["intervals"], 183);
    assert_eq!(c["states"], 893);
    assert_eq!(c["flows"], s.flows);
    assert_eq!(s.processes, 5);
    assert_eq!(s.threads, 6);
    let got = std::fs::read_to_string(&dump).unwrap();
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/merged-v0002.txt");
    if std::env::var_os("P5_BLESS").is_some() {
        std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
        std::fs::write(&golden, &got).unwrap();
    }
    let want = std::fs::read_to_string(&golden)
        .unwrap_or_else(|_| panic!("missing {} (run with P5_BLESS=1)", golden.display()));
    assert!(
        got == want,
        "the trace differs from {} (P5_BLESS=1 rewrites it)",
        golden.display()
    );
}

/// PostgreSQL gives the same trace, byte for byte, as SQLite for the same rows.
#[test]
fn postgres_export_is_the_sqlite_export() {
    let rt = runtime();
    let pg = rt.block_on(p5_tracedb::testing::PgSchema::new("export"));
    rt.block_on(fixture::write(&pg.url(), "synthetic", 40));
    let dir = tempfile::tempdir().unwrap();
    let (_, url) = synthetic(dir.path(), 40);
    let opts = Options::new("synthetic");
    let (lite, a) = export(&rt, &url, &opts).unwrap();
    let (post, b) = export(&rt, &pg.url(), &opts).unwrap();
    assert_eq!(a, b);
    assert!(
        lite == post,
        "the PostgreSQL export differs from the SQLite one"
    );
}

fn one_line(e: &Error) -> String {
    let text = e.to_string();
    assert!(!text.contains('\n'), "not one line: {text}");
    text
}

#[test]
fn a_missing_or_empty_session_is_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let (_, url) = synthetic(dir.path(), 3);
    let rt = runtime();
    rt.block_on(fixture::write(&url, "empty", 0));
    let e = export(&rt, &url, &Options::new("nope")).unwrap_err();
    assert!(matches!(e, Error::NoSession { .. }), "{e}");
    assert_eq!(
        one_line(&e),
        "no session \"nope\" in the database (sessions: synthetic, empty)"
    );
    let e = export(&rt, &url, &Options::new("empty")).unwrap_err();
    assert!(matches!(e, Error::Empty(_)), "{e}");
    assert!(one_line(&e).contains("nothing to export"));
}

/// A database damaged after it was merged (pages overwritten) gives an error, not a panic or
/// a trace that looks whole.
#[test]
fn a_damaged_database_is_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let (path, url) = synthetic(dir.path(), 200);
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    // Keep the header and the schema page; garble a stretch of the data pages.
    for b in &mut bytes[n / 3..n / 3 + n / 4] {
        *b = 0xA5;
    }
    std::fs::write(&path, &bytes).unwrap();
    let rt = runtime();
    let db = rt.block_on(Reader::open(&DbUrl::parse(&url).unwrap()));
    let e = match db {
        Err(e) => {
            // Refused at opening: a clear line from the database layer.
            assert!(!e.to_string().contains('\n'));
            return;
        }
        Ok(db) => {
            let mut out = Vec::new();
            let r = perfetto(
                &db,
                rt.handle(),
                &Options::new("synthetic"),
                &mut out,
                &mut |_| {},
            );
            r.unwrap_err()
        }
    };
    let text = one_line(&e);
    assert!(
        text.contains("malformed") || text.contains("reading"),
        "{text}"
    );
}

/// A writer that fails (a full disk, a client gone) ends the export with its error.
#[test]
fn a_failing_writer_ends_the_export_with_its_error() {
    struct Full(usize);
    impl std::io::Write for Full {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if self.0 < b.len() {
                return Err(std::io::Error::other("disk full"));
            }
            self.0 -= b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let (_, url) = synthetic(dir.path(), 300);
    let rt = runtime();
    let db = rt
        .block_on(Reader::open(&DbUrl::parse(&url).unwrap()))
        .unwrap();
    let opts = Options {
        compression: None,
        ..Options::new("synthetic")
    };
    let e = perfetto(&db, rt.handle(), &opts, &mut Full(100_000), &mut |_| {}).unwrap_err();
    assert_eq!(one_line(&e), "writing the trace: disk full");
}
