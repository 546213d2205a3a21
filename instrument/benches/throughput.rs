//! Instrumentation throughput: a generated 250,000-line C file (functions with loops, early
//! returns, calls and socket calls) instrumented with the default modes (functions + comm)
//! and with every mode, against a baseline of tree-sitter parsing alone, then the same on the
//! real SQLite amalgamation (`sqlite3.c`, 266 k lines, from the libsqlite3-sys crate in
//! cargo's registry, or `$P5_BENCH_SQLITE`). Budget: 250 k lines in ≤ 1 s. Prints the median
//! and the best of 5 runs, wall and process CPU time (all threads: on a machine shared with
//! other work the wall time moves by ±25 %, the CPU time much less), and the load average;
//! `cargo bench -p p5-instrument --bench throughput`.
//!
//! Measured on the shared 2-core machine while it also ran other builds (load 2.6–4; the
//! one-piece parse alone then took 1.2–1.35 s, against 0.7 s when the machine was quiet):
//! default modes best 0.85 s wall, 1.60 s CPU, 6.8 MB/s, typically 0.94–1.0 s (up to 1.7 s
//! when busiest); every mode best 1.08 s wall, 2.0 s CPU, 5.4 MB/s, typically 1.1–1.7 s.
//! Before the chunks were walked while later ones parse and the walk was pruned, in the same
//! runs: default best 1.02 s, typically 1.1–1.36 s; every mode best 1.20 s.

use p5_instrument::{Lang, Modes, Selection, instrument};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

fn generate(lines: usize) -> String {
    let mut s = String::from("#include <stdio.h>\n#include <unistd.h>\n\n");
    let mut i = 0;
    // Each function below is 16 lines.
    while 3 + i * 16 < lines {
        write!(
            s,
            "static int helper_{i}(int fd, char *buf, int n)\n{{\n    int total = 0;\n    \
             for (int k = 0; k < n; k++) {{\n        if (buf[k] == 0)\n            return -1;\n        \
             total += buf[k] * {i};\n    }}\n    ssize_t w = write(fd, buf, (size_t)n);\n    \
             if (w < 0) {{\n        perror(\"write\");\n        return -2;\n    }}\n    \
             printf(\"%d\\n\", total);\n    return total + (int)read(fd, buf, 1);\n}}\n"
        )
        .unwrap();
        i += 1;
    }
    s
}

/// Process CPU time (user + system, all threads).
fn cpu() -> Duration {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// (wall, cpu) of each of `runs` runs, sorted by wall time.
fn timings(runs: usize, mut f: impl FnMut()) -> Vec<(Duration, Duration)> {
    let mut v: Vec<_> = (0..runs)
        .map(|_| {
            let (t, c) = (Instant::now(), cpu());
            f();
            (t.elapsed(), cpu() - c)
        })
        .collect();
    v.sort();
    v
}

/// `sqlite3.c` from the libsqlite3-sys crate in cargo's registry (the real-code tests fetch
/// it), or `$P5_BENCH_SQLITE`.
fn sqlite_amalgamation() -> Option<(String, String)> {
    if let Some(p) = std::env::var_os("P5_BENCH_SQLITE") {
        let p = std::path::PathBuf::from(p);
        return Some((p.display().to_string(), std::fs::read_to_string(&p).ok()?));
    }
    let home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cargo")))?;
    let mut found: Vec<_> = std::fs::read_dir(home.join("registry/src"))
        .ok()?
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
        .map(|e| e.path().join("sqlite3/sqlite3.c"))
        .filter(|p| p.exists() && p.to_string_lossy().contains("libsqlite3-sys-"))
        .collect();
    found.sort();
    let p = found.pop()?;
    Some((p.display().to_string(), std::fs::read_to_string(&p).ok()?))
}

/// Times tree-sitter's one-piece parse and instrumentation in the default modes and in every
/// mode; prints the median and the best of 5 runs, wall and CPU (all threads).
fn bench(name: &str, src: &str) {
    let lines = src.lines().count();
    let mb = src.len() as f64 / 1e6;
    println!("input {name}: {lines} lines, {mb:.2} MB of C");
    let sel = Selection::all();
    let report = |what: &str, t: &[(Duration, Duration)]| {
        let (med, best) = (t[t.len() / 2], t[0]);
        let s = med.0.as_secs_f64();
        println!(
            "  {what:<28} median {:>7.1} ms wall, cpu {:>7.1} ms | best {:>7.1} ms wall, cpu {:>7.1} ms | {:>5.1} MB/s  {:>8.0} lines/s",
            s * 1e3,
            med.1.as_secs_f64() * 1e3,
            best.0.as_secs_f64() * 1e3,
            best.1.as_secs_f64() * 1e3,
            mb / s,
            lines as f64 / s,
        );
        med.0
    };
    report(
        "baseline: tree-sitter parse",
        &timings(5, || {
            let mut p = tree_sitter::Parser::new();
            p.set_language(&Lang::C.grammar()).unwrap();
            std::hint::black_box(p.parse(src, None));
        }),
    );
    let mut sensors = 0;
    let d = report(
        "functions + comm (default)",
        &timings(5, || {
            let o = instrument(Lang::C, "f.c", src, Modes::default(), &sel);
            sensors = o.sensors.len();
            std::hint::black_box(o);
        }),
    );
    println!(
        "  {sensors} sensors; budget 250k lines in <= 1000 ms (median): {}",
        if d.as_secs_f64() * 250_000.0 / lines as f64 <= 1.0 {
            "met"
        } else {
            "MISSED"
        }
    );
    let all = Modes {
        functions: true,
        calls: true,
        comm: true,
    };
    report(
        "functions + calls + comm",
        &timings(5, || {
            std::hint::black_box(instrument(Lang::C, "f.c", src, all, &sel));
        }),
    );
}

fn main() {
    if let Ok(l) = std::fs::read_to_string("/proc/loadavg") {
        println!("load average: {}", l.trim());
    }
    bench("generated", &generate(250_000));
    match sqlite_amalgamation() {
        Some((path, text)) => bench(&path, &text),
        None => {
            println!("sqlite3.c not found (run the real-code tests once, or set P5_BENCH_SQLITE)")
        }
    }
}
