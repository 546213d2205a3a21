//! Real code bases, fetched with cargo at test time: SQLite's amalgamation (266 k lines, from
//! the crates.io crate `libsqlite3-sys`) and Lua 5.4 (29 k lines, from `lua-src`) — each
//! instrumented with `--functions --comm` and again with `--calls`, built with gcc against the
//! runtime, run, and required to print exactly what the original build prints while recording
//! events; LLVM's libFuzzer (C++, 10 k lines, from `libfuzzer-sys`), whose instrumented build
//! must fuzz exactly like the original for a fixed seed; the `shlex` crate (Rust), whose
//! own test suite must pass instrumented (with and without `--calls`); and the `tiny_http`
//! crate, instrumented with every mode, serving one request whose bytes its std sockets must
//! record. Needs network (or a warm cargo cache) and a few
//! minutes: `cargo test -p p5-instrument -- --ignored realcode`.

use crate::read;
use p5_instrument::unit::instrument_plain;
use p5_instrument::{Lang, Modes, Options, Selection, instrument, run};
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "../../../testsupport/crate_source.rs"]
mod crate_source;
use crate_source::crate_source;

fn copy_dir(from: &Path, to: &Path, keep: impl Fn(&Path) -> bool) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_file() && keep(&p) {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

fn gcc(args: &[&Path], extra: &[&str], out: &Path) {
    let o = Command::new("gcc")
        .args(["-O0", "-w", "-DLUA_USE_LINUX"])
        .args(args)
        .args(extra)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "gcc: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Instruments `src` (functions + comm, then functions + calls + comm), builds original and
/// instrumented programs from `main_c` plus the tree's `.c` files, runs both with `args`, and
/// compares their output.
fn check_tree(tmp: &Path, src: &Path, main_c: &str, args: &[&str], min_sensors: usize) {
    for calls in [false, true] {
        let dir = tmp.join(if calls { "calls" } else { "functions" });
        std::fs::create_dir_all(&dir).unwrap();
        check_modes(&dir, src, main_c, args, min_sensors, calls);
    }
}

fn check_modes(tmp: &Path, src: &Path, main_c: &str, args: &[&str], min: usize, calls: bool) {
    let min_sensors = min;
    let out = tmp.join("out");
    let report = run(&Options {
        paths: vec![src.to_path_buf()],
        out: Some(out.clone()),
        modes: Modes {
            functions: true,
            calls,
            comm: true,
        },
        ..Options::default()
    })
    .unwrap();
    eprintln!(
        "{} sensors in {} files, {} problems",
        report.sensors.len(),
        report.sources,
        report.problems.len()
    );
    assert!(report.sensors.len() >= min_sensors);
    let main = tmp.join("main.c");
    std::fs::write(&main, main_c).unwrap();
    let sources = |dir: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "c"))
            .collect();
        v.sort();
        v
    };
    let lib = p5_instrument::runtime::static_lib().unwrap();
    let (orig, instr) = (tmp.join("orig"), tmp.join("instr"));
    let inc_src = format!("-I{}", src.display());
    let mut a: Vec<&Path> = vec![&main];
    let s1 = sources(src);
    a.extend(s1.iter().map(PathBuf::as_path));
    gcc(&a, &[&inc_src, "-lm", "-ldl", "-lpthread"], &orig);
    let inc_out = format!("-I{}", out.display());
    let inc_p5 = format!("-I{}", out.join("p5-include").display());
    let mut b: Vec<&Path> = vec![&main];
    let s2 = sources(&out);
    b.extend(s2.iter().map(PathBuf::as_path));
    b.push(&lib);
    gcc(
        &b,
        &[&inc_out, &inc_p5, "-lm", "-ldl", "-lpthread", "-lrt"],
        &instr,
    );
    let spool = tmp.join("spool");
    let want = Command::new(&orig).args(args).output().unwrap();
    let got = Command::new(&instr)
        .args(args)
        .env("P5_DIR", &spool)
        .env_remove("P5_LOGSERVER")
        .output()
        .unwrap();
    assert!(want.status.success(), "{want:?}");
    assert_eq!(
        String::from_utf8_lossy(&got.stdout),
        String::from_utf8_lossy(&want.stdout)
    );
    let recorded = std::fs::read_dir(&spool).unwrap().flatten().next().unwrap();
    assert!(
        recorded.metadata().unwrap().len() > 10_000,
        "few events recorded"
    );
}

#[test]
#[ignore = "fetches and builds SQLite (~1 min)"]
fn realcode_sqlite_amalgamation() {
    let tmp = tempfile::tempdir().unwrap();
    let krate = crate_source("libsqlite3-sys", "0.37", tmp.path());
    let src = tmp.path().join("sqlite");
    copy_dir(&krate.join("sqlite3"), &src, |p| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("sqlite3"))
    });
    let amalgamation = read(&src.join("sqlite3.c"));
    assert!(amalgamation.lines().count() > 200_000);
    // A large file: parsed in chunks (if it parses cleanly) and walked pruned, which must
    // change nothing.
    for modes in [
        Modes::default(),
        Modes {
            calls: true,
            ..Modes::default()
        },
    ] {
        let (a, b) = (
            instrument(
                Lang::C,
                "sqlite3.c",
                &amalgamation,
                modes,
                &Selection::all(),
            ),
            instrument_plain(
                Lang::C,
                "sqlite3.c",
                &amalgamation,
                modes,
                &Selection::all(),
            ),
        );
        // Chunks parse sqlite3.c on both cores (its unreadable macros stay inside their
        // chunks); error recovery may then see a broken definition differently from the
        // one-piece parse: the rewritten text must not change, nor any sensor's identity or
        // start; a span's end may (the one-piece parse cut `deleteTable` 12 lines short), and
        // the unreadable regions may be reported as other stretches.
        assert!(a.text == b.text, "{modes:?}: output differs");
        let key = |s: &p5_instrument::sensor::Sensor| {
            (
                s.id,
                s.kind,
                s.function.clone(),
                s.name.clone(),
                s.span.line,
                s.span.column,
                s.inserted,
            )
        };
        let (ka, kb): (Vec<_>, Vec<_>) = (
            a.sensors.iter().map(key).collect(),
            b.sensors.iter().map(key).collect(),
        );
        assert_eq!(ka, kb, "{modes:?}: sensors differ");
        let ends = a
            .sensors
            .iter()
            .zip(&b.sensors)
            .filter(|(x, y)| x.span != y.span)
            .count();
        assert!(
            ends * 1000 <= a.sensors.len(),
            "{modes:?}: {ends} sensor spans differ"
        );
        eprintln!(
            "{modes:?}: {} sensors, {ends} span ends differ; problems {} chunked, {} one-piece",
            a.sensors.len(),
            a.problems.len(),
            b.problems.len()
        );
    }
    let main = r#"#include <stdio.h>
#include "sqlite3.h"
static int row(void *u, int n, char **v, char **c) { (void)u; for (int i = 0; i < n; i++) printf("%s=%s ", c[i], v[i] ? v[i] : "NULL"); printf("\n"); return 0; }
int main(void) {
    sqlite3 *db; char *err = 0;
    if (sqlite3_open(":memory:", &db)) return 1;
    const char *sql = "create table t(a integer primary key, b text);"
        "insert into t(b) values ('x'),('y'),('z');"
        "with recursive c(n) as (select 1 union all select n+1 from c where n<1000) insert into t(b) select printf('r%d', n) from c;"
        "create index tb on t(b);"
        "select count(*), sum(a), max(b) from t;"
        "select b from t where b like 'r99%' order by a desc limit 3;";
    if (sqlite3_exec(db, sql, row, 0, &err)) { printf("error %s\n", err); return 1; }
    sqlite3_close(db);
    return 0;
}
"#;
    check_tree(tmp.path(), &src, main, &[], 4000);
}

#[test]
#[ignore = "fetches and builds Lua (~20 s)"]
fn realcode_lua() {
    let tmp = tempfile::tempdir().unwrap();
    let krate = crate_source("lua-src", "547", tmp.path());
    let src = tmp.path().join("lua");
    copy_dir(&krate.join("lua-5.4.7"), &src, |p| {
        p.extension().is_some_and(|x| x == "c" || x == "h")
    });
    let main = r#"#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"
#include <stdio.h>
int main(int argc, char **argv) {
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    if (argc < 2 || luaL_dofile(L, argv[1]) != LUA_OK) { fprintf(stderr, "%s\n", lua_tostring(L, -1)); return 1; }
    lua_close(L);
    return 0;
}
"#;
    let script = tmp.path().join("t.lua");
    std::fs::write(
        &script,
        r#"local function fib(n) if n < 2 then return n end return fib(n-1) + fib(n-2) end
local t = {}
for i = 1, 200 do t[#t+1] = string.format("%d:%d", i, fib(i % 20)) end
table.sort(t)
print(#t, t[1], t[#t], fib(22))
local co = coroutine.wrap(function() for i = 1, 3 do coroutine.yield(i * i) end end)
print(co(), co(), co())
print(pcall(error, "boom"))
print(string.rep("ab", 3), math.floor(10.7), select('#', 1, 2, 3))
"#,
    )
    .unwrap();
    check_tree(tmp.path(), &src, main, &[script.to_str().unwrap()], 1000);
}

/// `#N DONE corp: … lim: …` lines of a libFuzzer run, without the timing fields.
fn fuzz_summary(out: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(out)
        .lines()
        // "pulse" lines depend on elapsed time (libFuzzer prints them after 2 s).
        .filter(|l| {
            (l.starts_with('#') && !l.split_whitespace().any(|w| w == "pulse"))
                || l.starts_with("Done ")
        })
        .map(|l| {
            l.split_whitespace()
                .filter(|w| !w.ends_with("Mb") && !w.contains("second"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .map(|l| {
            // "exec/s: N" and "in N" carry timing; drop their numbers.
            let mut out = Vec::new();
            let mut skip = false;
            for w in l.split(' ') {
                if skip {
                    skip = false;
                    continue;
                }
                if w == "exec/s:" || w == "rss:" || w == "in" {
                    skip = true;
                    continue;
                }
                out.push(w.to_owned());
            }
            out.join(" ")
        })
        .collect()
}

#[test]
#[ignore = "fetches and builds LLVM's libFuzzer (~1 min)"]
fn realcode_cpp_libfuzzer() {
    let tmp = tempfile::tempdir().unwrap();
    let krate = crate_source("libfuzzer-sys", "0.4", tmp.path());
    let src = tmp.path().join("libfuzzer");
    copy_dir(&krate.join("libfuzzer"), &src, |p| {
        p.extension()
            .is_some_and(|x| x == "cpp" || x == "h" || x == "def")
    });
    let out = tmp.path().join("out");
    let report = run(&Options {
        paths: vec![src.clone()],
        out: Some(out.clone()),
        ..Options::default()
    })
    .unwrap();
    assert!(
        report.sensors.len() > 400,
        "{} sensors",
        report.sensors.len()
    );
    let target = tmp.path().join("target.cpp");
    std::fs::write(
        &target,
        "#include <cstddef>\n#include <cstdint>\nextern \"C\" int LLVMFuzzerTestOneInput(const \
         uint8_t *d, size_t n) { volatile int x = 0; if (n > 2 && d[0] == 'p' && d[1] == '5') \
         x = 1; return x * 0; }\n",
    )
    .unwrap();
    let lib = p5_instrument::runtime::static_lib().unwrap();
    let build = |dir: &Path, exe: &Path, extra: &[&Path]| {
        let mut cmd = Command::new("g++");
        cmd.args(["-std=c++17", "-O0", "-w", "-pthread"])
            .arg(format!("-I{}", dir.display()))
            .arg(format!("-I{}", out.join("p5-include").display()))
            .arg(&target);
        let mut cpps: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "cpp"))
            .collect();
        cpps.sort();
        cmd.args(&cpps).args(extra);
        cmd.args(["-ldl", "-lm", "-lrt", "-o"]).arg(exe);
        let o = cmd.output().unwrap();
        assert!(
            o.status.success(),
            "g++: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let (orig, instr) = (tmp.path().join("orig"), tmp.path().join("instr"));
    build(&src, &orig, &[]);
    build(&out, &instr, &[&lib]);
    let args = ["-runs=20000", "-seed=7"];
    let want = Command::new(&orig).args(args).output().unwrap();
    let got = Command::new(&instr)
        .args(args)
        .env("P5_DIR", tmp.path().join("spool"))
        .env_remove("P5_LOGSERVER")
        .output()
        .unwrap();
    assert!(want.status.success() && got.status.success());
    let (w, g) = (fuzz_summary(&want.stderr), fuzz_summary(&got.stderr));
    assert!(w.iter().any(|l| l.starts_with("Done 20000 runs")), "{w:?}");
    assert_eq!(g, w);
}

#[test]
#[ignore = "fetches and tests the shlex crate (~30 s)"]
fn realcode_rust_crate_shlex() {
    let tmp = tempfile::tempdir().unwrap();
    let krate = crate_source("shlex", "=2.0.1", tmp.path());
    let target = crate::e2e_target_dir();
    for calls in [false, true] {
        let out = tmp.path().join(if calls { "out-calls" } else { "out" });
        let report = run(&Options {
            paths: vec![krate.clone()],
            out: Some(out.clone()),
            modes: Modes {
                functions: true,
                calls,
                comm: true,
            },
            ..Options::default()
        })
        .unwrap();
        assert!(
            report.sensors.len() > if calls { 60 } else { 20 },
            "{} sensors",
            report.sensors.len()
        );
        assert!(read(&out.join("Cargo.toml")).contains("p5-runtime"));
        let o = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(["test", "-q", "--offline", "--manifest-path"])
            .arg(out.join("Cargo.toml"))
            .env("CARGO_TARGET_DIR", &target)
            .env("P5_DIR", tmp.path().join("spool"))
            .env_remove("P5_LOGSERVER")
            .env_remove("RUSTFLAGS")
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(String::from_utf8_lossy(&o.stdout).contains("test result: ok"));
    }
}

#[test]
#[ignore = "fetches tiny_http and builds a server on it (~30 s)"]
fn realcode_rust_crate_tiny_http_comm() {
    let tmp = tempfile::tempdir().unwrap();
    let krate = crate_source("tiny_http", "=0.12.0", tmp.path());
    let out = tmp.path().join("out");
    let report = run(&Options {
        paths: vec![krate],
        out: Some(out.clone()),
        modes: Modes {
            functions: true,
            calls: true,
            comm: true,
        },
        ..Options::default()
    })
    .unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    // tiny_http forbids unsafe code: its files cannot register a sensor table (said, not hidden).
    assert!(report.untabled > 0, "{}", report.untabled);
    // An uninstrumented server program on the instrumented library, with a plain std client.
    let app = tmp.path().join("app");
    std::fs::create_dir_all(app.join("src")).unwrap();
    std::fs::write(
        app.join("Cargo.toml"),
        format!(
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\
             [dependencies]\ntiny_http = {{ path = {:?} }}\n{}\n[workspace]\n",
            out.display().to_string(),
            p5_instrument::runtime::cargo_dependency()
        ),
    )
    .unwrap();
    const REQUEST: &str = "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    std::fs::write(
        app.join("src/main.rs"),
        format!(
            r#"use std::io::{{Read, Write}};
fn main() {{
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let port = server.server_addr().to_ip().unwrap().port();
    let client = std::thread::spawn(move || {{
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all({REQUEST:?}.as_bytes()).unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).unwrap();
        reply
    }});
    let rq = server.recv().unwrap();
    rq.respond(tiny_http::Response::from_string("hello")).unwrap();
    let reply = client.join().unwrap();
    println!("{{}} {{}}", reply.len(), reply.lines().last().unwrap());
    drop(server);
    p5_runtime::flush();
}}
"#
        ),
    )
    .unwrap();
    let spool = tmp.path().join("spool");
    let o = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["run", "-q", "--offline", "--manifest-path"])
        .arg(app.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", crate::e2e_target_dir())
        .env("P5_DIR", &spool)
        .env_remove("P5_LOGSERVER")
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let (reply_len, body) = stdout.trim().split_once(' ').unwrap();
    assert_eq!(body, "hello");
    // The listener tiny_http binds records the accept, the request read and the reply written.
    let manifest: p5_wire::manifest::Manifest =
        serde_json::from_str(&read(&out.join("p5-manifest.json"))).unwrap();
    let bind = manifest
        .sensors
        .iter()
        .find(|s| s.kind == "comm" && s.name == "bind")
        .expect("a bind sensor");
    let id = p5_wire::manifest::parse_id(&bind.id).unwrap();
    let seen = crate::e2e::decode_spool(&spool);
    let bytes = |op| -> i64 {
        seen.comm_all
            .iter()
            .filter(|e| e.0 == id && e.1 == op && e.2 > 0)
            .map(|e| e.2)
            .sum()
    };
    use p5_wire::CommOp::{Accept, Recv, Send};
    assert!(seen.comm_all.iter().any(|e| e.0 == id && e.1 == Accept));
    assert_eq!(bytes(Recv), REQUEST.len() as i64);
    assert_eq!(bytes(Send), reply_len.parse::<i64>().unwrap());
}

/// Function definitions Universal Ctags finds in `text` (their 1-based lines). Ctags 5.9 loses
/// its place in sqlite3.c after line 31,930 (an `#if` whose branches open different braces),
/// so it reads the file in pieces of ≥ 500 lines cut after a `}` alone on its line (the end
/// of a top-level definition); the lines are mapped back.
fn ctags_functions(text: &str, tmp: &Path) -> Vec<(String, usize)> {
    let dir = tmp.join("ctags");
    std::fs::create_dir_all(&dir).unwrap();
    let mut pieces: Vec<(PathBuf, usize)> = Vec::new();
    let mut piece = String::new();
    let (mut first, mut n) = (1usize, 0usize);
    let total = text.lines().count();
    for (i, line) in text.lines().enumerate() {
        piece.push_str(line);
        piece.push('\n');
        n += 1;
        if (line == "}" && n >= 500) || i + 1 == total {
            let p = dir.join(format!("p{}.c", pieces.len()));
            std::fs::write(&p, &piece).unwrap();
            pieces.push((p, first - 1));
            piece.clear();
            first = i + 2;
            n = 0;
        }
    }
    if !piece.is_empty() {
        let p = dir.join(format!("p{}.c", pieces.len()));
        std::fs::write(&p, &piece).unwrap();
        pieces.push((p, first - 1));
    }
    let out = Command::new("ctags")
        .args(["-x", "--kinds-C=f", "--languages=C"])
        .args(pieces.iter().map(|p| &p.0))
        .output()
        .expect("universal-ctags (scripts/install-deps.sh)");
    let _ = std::fs::remove_dir_all(&dir);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let line: usize = w.get(2)?.parse().ok()?;
            let offset = pieces.iter().find(|p| p.0.to_str() == w.get(3).copied())?.1;
            Some((w[0].to_owned(), line + offset))
        })
        .collect()
}

/// Instruments every `.c` file of `files` (default modes) and returns (functions ctags finds,
/// those with a function sensor whose span holds their line, problems, the missing names).
fn coverage(files: &[PathBuf], tmp: &Path) -> (usize, usize, usize, Vec<String>) {
    let (mut found, mut covered, mut problems) = (0, 0, 0);
    let mut missing = Vec::new();
    for f in files {
        let text = read(f);
        let out = instrument(Lang::C, "f.c", &text, Modes::default(), &Selection::all());
        problems += out.problems.len();
        for (name, line) in ctags_functions(&text, tmp) {
            found += 1;
            let hit = out.sensors.iter().any(|s| {
                s.kind == p5_instrument::sensor::Kind::Function
                    && s.span.line as usize <= line
                    && line <= s.span.end_line as usize
            });
            if hit {
                covered += 1;
            } else {
                missing.push(format!("{}:{line}: {name}", f.display()));
            }
        }
    }
    (found, covered, problems, missing)
}

#[test]
#[ignore = "fetches Lua and SQLite, runs ctags (~20 s)"]
fn realcode_coverage_ctags() {
    let tmp = tempfile::tempdir().unwrap();
    let lua = crate_source("lua-src", "547", tmp.path()).join("lua-5.4.7");
    let mut lua_files: Vec<PathBuf> = std::fs::read_dir(&lua)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    lua_files.sort();
    let sqlite = crate_source("libsqlite3-sys", "0.37", tmp.path()).join("sqlite3/sqlite3.c");
    for (name, files, min_found) in [("Lua", lua_files, 1000), ("SQLite", vec![sqlite], 4500)] {
        let (found, covered, problems, missing) = coverage(&files, tmp.path());
        let ratio = covered as f64 / found as f64;
        eprintln!(
            "{name}: {covered} of {found} ctags functions have a sensor ({:.2} %), {problems} problems; missing: {missing:?}",
            100.0 * ratio
        );
        assert!(found >= min_found, "{name}: ctags found only {found}");
        assert!(ratio >= 0.995, "{name}: coverage {:.2} %", 100.0 * ratio);
    }
}
