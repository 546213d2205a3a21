//! The command line: output modes, dry run, in-place with undo, build flags, usage errors.

use crate::read;
use std::path::Path;
use std::process::{Command, Output};

fn p5i(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_p5-instrument"))
        .args(args)
        .arg("--quiet")
        .current_dir(cwd)
        .output()
        .unwrap()
}

fn tree() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    std::fs::write(
        src.join("a.c"),
        "#include <unistd.h>\n\nint f(int fd) { return (int)write(fd, \"x\", 1); }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("sub/b.py"),
        "import os\n\ndef g():\n    return os.getpid()\n",
    )
    .unwrap();
    std::fs::write(src.join("Makefile"), "all:\n\tcc a.c\n").unwrap();
    t
}

#[test]
fn out_dir_mirrors_the_tree() {
    let t = tree();
    let o = p5i(&["src", "-o", "out"], t.path());
    assert!(o.status.success(), "{o:?}");
    let out = t.path().join("out");
    assert_eq!(read(&out.join("Makefile")), "all:\n\tcc a.c\n");
    let a = read(&out.join("a.c"));
    assert!(a.contains("P5_SCOPE(") && a.contains("p5_write("), "{a}");
    assert!(read(&out.join("sub/b.py")).contains("@p5.sensor("));
    assert!(out.join("p5-include/p5.h").is_file());
    assert!(out.join("p5-manifest.json").is_file());
    // The originals are untouched.
    assert!(!read(&t.path().join("src/a.c")).contains("P5_SCOPE"));
}

#[test]
fn dry_run_lists_and_writes_nothing() {
    let t = tree();
    let o = p5i(&["src", "--dry-run", "--functions"], t.path());
    assert!(o.status.success(), "{o:?}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("a.c:3:1\tc\tfunction\t0x"), "{stdout}");
    assert!(
        stdout.contains("sub/b.py:3:1\tpython\tfunction"),
        "{stdout}"
    );
    assert!(!stdout.contains("comm"), "{stdout}");
    assert!(!t.path().join("src/.p5-instrument").exists());
}

#[test]
fn in_place_and_undo_round_trip() {
    let t = tree();
    let before = read(&t.path().join("src/a.c"));
    assert!(p5i(&["src", "--in-place"], t.path()).status.success());
    let during = read(&t.path().join("src/a.c"));
    assert_ne!(during, before);
    assert!(
        t.path()
            .join("src/.p5-instrument/p5-manifest.json")
            .is_file()
    );
    // Again: nothing changes, the backup keeps the original.
    assert!(p5i(&["src", "--in-place"], t.path()).status.success());
    assert_eq!(read(&t.path().join("src/a.c")), during);
    let o = p5i(&["src", "--in-place", "--undo"], t.path());
    assert!(o.status.success(), "{o:?}");
    assert_eq!(read(&t.path().join("src/a.c")), before);
    assert!(!t.path().join("src/.p5-instrument").exists());
}

#[test]
fn usage_errors_are_reported() {
    let t = tree();
    let o = p5i(&["src"], t.path());
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("-o OUTDIR"));
    let o = p5i(&["missing-dir", "-o", "out"], t.path());
    assert!(!o.status.success());
    let o = p5i(&["src", "-o", "."], t.path());
    assert!(!o.status.success());
    std::fs::write(t.path().join("bad.toml"), "functions = 1").unwrap();
    let o = p5i(&["src", "-o", "out", "--select", "bad.toml"], t.path());
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("bad selection file"));
}

#[test]
fn cflags_point_at_the_header() {
    let t = tree();
    let o = p5i(&["--cflags"], t.path());
    assert!(o.status.success());
    let s = String::from_utf8_lossy(&o.stdout);
    let dir = s.trim().strip_prefix("-I").expect("-I flag");
    assert!(Path::new(dir).join("p5.h").is_file(), "{s}");
}
