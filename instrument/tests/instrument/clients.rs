//! The Python and Java runtime clients (`clients/`) against the shared wire test vectors.

use crate::{crate_dir, have};
use std::process::Command;

#[test]
fn python_client_passes_the_vectors() {
    if !have("python3") {
        eprintln!("python3 not installed; skipping");
        return;
    }
    let o = Command::new("python3")
        .args(["-m", "unittest", "discover", "-s"])
        .arg(crate_dir().join("../clients/python/tests"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Compiles the Java client into `dir` (None without a JDK).
pub fn build_java_client(dir: &std::path::Path) -> Option<()> {
    if !have("javac") {
        return None;
    }
    let src = crate_dir().join("../clients/java/src/p5");
    let st = Command::new("javac")
        .arg("-d")
        .arg(dir)
        .args(["P5.java", "Wire.java", "Recorded.java", "Sockets.java"].map(|f| src.join(f)))
        .status()
        .unwrap();
    assert!(st.success(), "javac of the Java client failed");
    Some(())
}

#[test]
fn java_client_passes_the_vectors() {
    let tmp = tempfile::tempdir().unwrap();
    if build_java_client(tmp.path()).is_none() {
        eprintln!("no JDK; skipping");
        return;
    }
    let st = Command::new("javac")
        .arg("-cp")
        .arg(tmp.path())
        .arg("-d")
        .arg(tmp.path())
        .arg(crate_dir().join("../clients/java/test/WireTest.java"))
        .status()
        .unwrap();
    assert!(st.success());
    let o = Command::new("java")
        .arg("-cp")
        .arg(tmp.path())
        .arg("WireTest")
        .arg(crate_dir().join("../wire/test_vectors/vectors.json"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
}

/// `pip install ./clients/python` (the README's command) leaves nothing in the repository that
/// `git status` would show: setuptools' `build/` and `p5.egg-info/` are ignored.
#[test]
fn installing_the_python_client_leaves_the_tree_clean() {
    let repo = crate_dir().join("..");
    if !have("python3") || !have("git") || !repo.join(".git").exists() {
        eprintln!("python3, git or the repository missing; skipping");
        return;
    }
    let status = || {
        let o = Command::new("git")
            .args([
                "status",
                "--porcelain",
                "--untracked-files=all",
                "clients/python",
            ])
            .current_dir(&repo)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let before = status();
    let target = tempfile::tempdir().unwrap();
    let o = Command::new("python3")
        .args(["-m", "pip", "install", "--quiet", "--no-deps"])
        .arg("--target")
        .arg(target.path())
        .arg(repo.join("clients/python"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(target.path().join("p5").join("__init__.py").exists());
    assert_eq!(status(), before, "pip left files in clients/python");
}
