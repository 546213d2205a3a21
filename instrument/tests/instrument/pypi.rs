//! Real Python packages from PyPI, each with its own test suite: the sdist is downloaded with
//! pip, instrumented, and its tests are run from the original tree and from the instrumented
//! one (with the Python client from `clients/python`, spooling events to a folder); both runs
//! must give the same outcome — the same number of tests run and the same result line — and
//! the instrumented run must record events. bottle 0.13 (a web framework whose descriptors
//! and route introspection broke under the old decorator placement), more-itertools
//! (generators everywhere), simplejson (pure Python without its optional C speedups) and idna.
//! `cargo test -p p5-instrument -- --ignored realcode` (needs pip and network).

use p5_instrument::{Modes, Options, run};
use std::path::Path;
use std::process::Command;

/// The lines of a unittest run that must not change: "Ran N tests" and the result.
fn outcome(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|l| l.starts_with("Ran ") || l.starts_with("OK") || l.starts_with("FAILED"))
        .map(|l| l.split(" in ").next().unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

fn unittest(dir: &Path, tests: &str, spool: &Path) -> String {
    let o = Command::new("python3")
        .args(["-m", "unittest", "discover", "-s", tests, "-t", "."])
        .current_dir(dir)
        .env(
            "PYTHONPATH",
            format!(
                "{}:.",
                crate::crate_dir().join("../clients/python").display()
            ),
        )
        .env("P5_DIR", spool)
        .env_remove("P5_LOGSERVER")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let got = outcome(&err);
    assert!(
        got.contains("Ran "),
        "{}: no unittest summary:\n{err}",
        dir.display()
    );
    if !o.status.success() {
        eprintln!("{}: {err}", dir.display());
    }
    got
}

/// Downloads `name==version`, runs its tests (folder `tests`) plain and instrumented in each
/// of `modes`; requires the same outcome and at least `min_sensors` sensors.
fn package(name: &str, version: &str, tests: &str, modes: &[Modes], min_sensors: usize) {
    let tmp = tempfile::tempdir().unwrap();
    let st = Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--no-binary",
            ":all:",
        ])
        .arg(format!("{name}=={version}"))
        .arg("-d")
        .arg(tmp.path())
        .status()
        .unwrap();
    assert!(st.success(), "pip download {name} failed");
    let tarball = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".tar.gz"))
        .expect("an sdist");
    let st = Command::new("tar")
        .arg("xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(tmp.path())
        .status()
        .unwrap();
    assert!(st.success());
    let src = tmp.path().join(
        tarball
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".tar.gz"),
    );
    let plain = unittest(&src, tests, &tmp.path().join("spool-plain"));
    for (i, m) in modes.iter().enumerate() {
        let out = tmp.path().join(format!("out{i}"));
        let report = run(&Options {
            paths: vec![src.clone()],
            out: Some(out.clone()),
            modes: *m,
            ..Options::default()
        })
        .unwrap();
        assert!(
            report.sensors.len() >= min_sensors,
            "{name}: {} sensors",
            report.sensors.len()
        );
        let spool = tmp.path().join(format!("spool{i}"));
        let got = unittest(&out, tests, &spool);
        assert_eq!(got, plain, "{name} {m:?}: instrumented tests differ");
        let recorded: u64 = std::fs::read_dir(&spool)
            .unwrap()
            .flatten()
            .map(|e| e.metadata().unwrap().len())
            .sum();
        assert!(recorded > 10_000, "{name} {m:?}: few events recorded");
    }
}

const DEFAULT: Modes = Modes {
    functions: true,
    calls: false,
    comm: true,
};
const EVERY: Modes = Modes {
    functions: true,
    calls: true,
    comm: true,
};

#[test]
#[ignore = "downloads bottle 0.13 from PyPI with pip and runs its 365 tests three times (~10 s)"]
fn realcode_pypi_bottle() {
    package("bottle", "0.13.2", "test", &[DEFAULT, EVERY], 800);
}

#[test]
#[ignore = "downloads more-itertools from PyPI with pip and runs its 817 tests twice (~15 s)"]
fn realcode_pypi_more_itertools() {
    package("more-itertools", "10.5.0", "tests", &[DEFAULT], 800);
}

#[test]
#[ignore = "downloads simplejson from PyPI with pip and runs its tests three times (~40 s)"]
fn realcode_pypi_simplejson() {
    package(
        "simplejson",
        "3.19.3",
        "simplejson/tests",
        &[DEFAULT, EVERY],
        300,
    );
}

#[test]
#[ignore = "downloads idna from PyPI with pip and runs its 6,000 tests three times (~20 s)"]
fn realcode_pypi_idna() {
    package("idna", "3.7", "tests", &[DEFAULT, EVERY], 100);
}
