//! Hot real programs (issue 21 item 5): the Lua 5.4 interpreter (crates.io `lua-src`) running
//! a small workload — recursive fib, a table sort, string matching, coroutines — and zlib
//! (crates.io `libz-sys`) compressing and inflating 4 MiB, each instrumented with
//! `p5-instrument --functions`, built with `gcc -O2` against the runtime, and run against the
//! same build without p5 in one run.
//!
//! Per program and setting (`default`, `P5_THROTTLE=off`, `P5_THROTTLE=1000,10us,all`:
//! every throttled call timed, so every long one is recorded) it prints the best wall time of
//! `P5_BENCH_RUNS` (default 7) runs of both builds, interleaved (the instrumented one sending
//! to a `p5-logserver` on loopback, as under `p5 record`), their ratio, and — from the spool
//! file of one more recorded run (local-file mode, decoded with `p5_wire`) — the events
//! recorded, the sensors throttled and the calls they only counted, and the events dropped. Needs gcc and the crates (network or a warm cargo cache).
//!
//! Three more lines per program run the builds compiled with `-DP5_NO_INLINE` (every guard
//! calls `p5_enter`/`p5_exit`, nothing is throttled) and `-DP5_CALL_RECORD` (recorded calls
//! go through `p5_site_enter`/`p5_site_exit` instead of writing the ring inline), throttling
//! off — the guard variants measured inside a real program —, and `-DP5_SAMPLE_MASK=0`
//! with default settings: every throttled call timed, so every long one can be recorded.
//!
//! First it prints the C microbenchmark of the inlined guard (`benches/c/inline.c`).
//!
//! `cargo bench -p p5-runtime --bench lua`

use p5_wire::Event;
use p5_wire::data::{EventsFrame, StreamClose};
use p5_wire::frame::{FrameType, Frames};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const LUA_MAIN: &str = r#"#include "lua.h"
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

const LUA_WORK: &str = r#"local function fib(n) if n < 2 then return n end return fib(n-1) + fib(n-2) end
local t = {}
for i = 1, 3000 do t[#t+1] = string.format("k%05d:%d", (i * 7919) % 3001, fib(i % 12)) end
table.sort(t)
local n = 0
for _, s in ipairs(t) do if s:match("^k0*(%d+):(%d+)$") then n = n + 1 end end
local co = coroutine.wrap(function() for i = 1, 2000 do coroutine.yield(i * i) end end)
local sum = 0
for i = 1, 2000 do sum = sum + co() end
print(#t, n, sum, fib(24))
"#;

const ZLIB_MAIN: &str = r#"#include "zlib.h"
#include <stdio.h>
#include <stdlib.h>
int main(void) {
    const unsigned long n = 4u << 20;
    unsigned char *src = malloc(n), *out = malloc(compressBound(n)), *back = malloc(n);
    unsigned long x = 12345;
    for (unsigned long i = 0; i < n; i++) { x = x * 1103515245 + 12345; src[i] = "abcdefgh"[(x >> 16) & 7] ^ (i % 97 == 0); }
    uLongf clen = compressBound(n), blen = n;
    if (compress2(out, &clen, src, n, 6) != Z_OK) return 1;
    if (uncompress(back, &blen, out, clen) != Z_OK || blen != n) return 2;
    printf("%lu -> %lu, crc %lx\n", n, (unsigned long)clen, crc32(0, back, blen));
    return 0;
}
"#;

#[path = "../../testsupport/crate_source.rs"]
mod crate_source;
use crate_source::crate_source;

fn copy_c(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("dir");
    for e in std::fs::read_dir(from).expect("read source dir").flatten() {
        let p = e.path();
        let ext = p.extension().and_then(|x| x.to_str()).unwrap_or("");
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        // Lua's own executables have a `main` of their own.
        if (ext == "c" || ext == "h") && !matches!(name, "lua.c" | "luac.c" | "onelua.c") {
            std::fs::copy(&p, to.join(name)).expect("copy");
        }
    }
}

fn c_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    v.sort();
    v
}

fn gcc(src: &Path, main: &Path, extra: &[&str], out: &Path) {
    let st = Command::new("gcc")
        .args(["-O2", "-w", "-DLUA_USE_LINUX", "-I"])
        .arg(src)
        .args(c_files(src))
        .arg(main)
        .args(extra)
        .args(["-lm", "-ldl", "-lpthread", "-lrt", "-o"])
        .arg(out)
        .status()
        .expect("run gcc");
    assert!(st.success(), "gcc failed for {}", out.display());
}

/// An instrumented build with other guard flags: label, executable, settings it runs with.
type Variant = (
    &'static str,
    PathBuf,
    &'static [(&'static str, &'static str)],
);

/// One program: plain and instrumented executables and their arguments.
struct Program {
    name: &'static str,
    plain: PathBuf,
    p5: PathBuf,
    /// The same instrumented build with other guard flags.
    variants: Vec<Variant>,
    args: Vec<String>,
}

fn build(
    name: &'static str,
    src: &Path,
    main_c: &str,
    args: Vec<String>,
    tools: (&Path, &Path),
    work: &Path,
) -> Program {
    let (instrument, lib) = tools;
    let dir = work.join(name);
    let main = dir.join("main.c");
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(&main, main_c).expect("main.c");
    let plain = dir.join("plain");
    gcc(src, &main, &[], &plain);
    let out = dir.join("instrumented");
    let _ = std::fs::remove_dir_all(&out);
    let st = Command::new(instrument)
        .args(["--functions", "-q", "-o"])
        .arg(&out)
        .arg(src)
        .status()
        .expect("run p5-instrument");
    assert!(st.success(), "p5-instrument failed");
    let p5 = dir.join("p5");
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("include");
    let inc = format!("-I{}", include.display());
    gcc(&out, &main, &[&inc, lib.to_str().expect("utf-8 path")], &p5);
    let lib = lib.to_str().expect("utf-8 path");
    let mut variants = Vec::new();
    const OFF: &[(&str, &str)] = &[("P5_THROTTLE", "off")];
    for (label, flag, env) in [
        ("P5_NO_INLINE, throttle off", "-DP5_NO_INLINE", OFF),
        ("P5_CALL_RECORD, throttle off", "-DP5_CALL_RECORD", OFF),
        (
            "P5_SAMPLE_MASK=0 (every throttled call timed)",
            "-DP5_SAMPLE_MASK=0",
            &[],
        ),
    ] {
        let exe = dir.join(format!("p5-{flag}"));
        gcc(&out, &main, &[&inc, flag, lib], &exe);
        variants.push((label, exe, env));
    }
    Program {
        name,
        plain,
        p5,
        variants,
        args,
    }
}

/// Wall time of one run: against the log server at `server` (as `p5 record` runs programs),
/// or in local-file mode into `spool` when `server` is `None`.
fn run_once(
    exe: &Path,
    args: &[String],
    envs: &[(&str, &str)],
    spool: &Path,
    server: Option<&str>,
) -> Duration {
    let _ = std::fs::remove_dir_all(spool);
    let mut c = Command::new(exe);
    c.args(args)
        .env_remove("P5_LOGSERVER")
        .env_remove("P5_THROTTLE")
        .env("P5_DIR", spool)
        .envs(envs.iter().copied());
    if let Some(s) = server {
        c.env("P5_LOGSERVER", s);
    }
    let t = Instant::now();
    let out = c.output().expect("run program");
    let d = t.elapsed();
    assert!(out.status.success(), "{} failed", exe.display());
    d
}

/// What one recorded run's spool holds.
#[derive(Debug, Default)]
struct Counts {
    events: u64,
    throttled: u64,
    counted_only: u64,
    dropped: u64,
}

fn counts(spool: &Path) -> Counts {
    let mut c = Counts::default();
    let mut calls: BTreeMap<u64, (u64, u64, u64)> = BTreeMap::new();
    let mut dropped: BTreeMap<u32, u64> = BTreeMap::new();
    for e in std::fs::read_dir(spool).expect("spool dir").flatten() {
        let bytes = std::fs::read(e.path()).expect("read spool");
        for f in Frames::new(&bytes).flatten() {
            if f.ty == FrameType::Events as u8 {
                let Ok(ev) = EventsFrame::parse(f.body) else {
                    continue;
                };
                let d = dropped.entry(ev.header.stream).or_default();
                *d = (*d).max(ev.dropped);
                for e in ev.events().into_iter().flatten().flatten() {
                    match e {
                        Event::Calls {
                            sensor,
                            calls: n,
                            timed,
                            recorded,
                            ..
                        } => {
                            calls.insert(sensor, (n, timed, recorded));
                        }
                        _ => c.events += 1,
                    }
                }
            } else if f.ty == FrameType::StreamClose as u8
                && let Ok(s) = StreamClose::decode_body(f.body)
            {
                let d = dropped.entry(s.header.stream).or_default();
                *d = (*d).max(s.dropped);
            }
        }
    }
    c.throttled = calls.len() as u64;
    // Calls after throttling that were neither timed nor long: counted, not recorded.
    c.counted_only = calls
        .values()
        .map(|&(n, _, rec)| n.saturating_sub(rec))
        .sum();
    c.dropped = dropped.values().sum();
    c
}

fn bench(
    (p, exe): (&Program, &Path),
    setting: &str,
    envs: &[(&str, &str)],
    runs: usize,
    ctx: (&Path, &str),
) {
    let (work, server) = ctx;
    let spool = work.join("spool");
    let (mut plain, mut p5) = (Duration::MAX, Duration::MAX);
    for _ in 0..runs {
        plain = plain.min(run_once(&p.plain, &p.args, &[], &spool, None));
        p5 = p5.min(run_once(exe, &p.args, envs, &spool, Some(server)));
    }
    // The counts: one more run in local-file mode, its spool decoded here.
    run_once(exe, &p.args, envs, &spool, None);
    let c = counts(&spool);
    let total = c.events + c.dropped;
    println!(
        "{:<5} {setting:<26} plain {:>8.4} s  p5 {:>8.4} s  ratio {:>5.2}x  events recorded {:>9}  \
         throttled {:>3} sensors ({} calls counted only)  dropped {} ({:.2} %)",
        p.name,
        plain.as_secs_f64(),
        p5.as_secs_f64(),
        p5.as_secs_f64() / plain.as_secs_f64(),
        c.events,
        c.throttled,
        c.counted_only,
        c.dropped,
        if total > 0 {
            c.dropped as f64 * 100.0 / total as f64
        } else {
            0.0
        }
    );
}

/// Starts `p5-logserver` on a free loopback port with a fresh store; returns it and its
/// address.
fn log_server(profile: &Path, work: &Path) -> (std::process::Child, String) {
    use std::io::BufRead;
    let store = work.join("store");
    let _ = std::fs::remove_dir_all(&store);
    let mut child = Command::new(profile.join("p5-logserver"))
        .args(["--listen", "127.0.0.1:0", "--store"])
        .arg(&store)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start p5-logserver");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read the listening line");
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .expect("`listening on ADDR`")
        .to_owned();
    (child, addr)
}

/// The C guards in a plain loop (`benches/c/inline.c`), discard mode, as built by default
/// and with `-DP5_CALL_RECORD`.
fn micro(lib: &Path, work: &Path) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for flag in ["-DP5_DEFAULT_GUARDS", "-DP5_CALL_RECORD"] {
        let exe = work.join("inline");
        let st = Command::new("gcc")
            .args(["-O2", flag, "-I"])
            .arg(root.join("include"))
            .arg(root.join("benches/c/inline.c"))
            .arg(lib)
            .args(["-lpthread", "-ldl", "-lm", "-lrt", "-o"])
            .arg(&exe)
            .status()
            .expect("run gcc");
        assert!(st.success(), "gcc failed for inline.c");
        let out = Command::new(&exe)
            .env_remove("P5_LOGSERVER")
            .env("P5_DISCARD", "1")
            .output()
            .expect("run inline");
        print!("{}", String::from_utf8_lossy(&out.stdout));
    }
}

fn main() {
    let profile = std::env::current_exe()
        .expect("bench path")
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .to_path_buf();
    let st = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args([
            "build",
            "--release",
            "-p",
            "p5-instrument",
            "-p",
            "p5-runtime",
            "-p",
            "p5-logserver",
        ])
        .status()
        .expect("cargo build");
    assert!(
        st.success(),
        "building p5-instrument, the runtime and p5-logserver failed"
    );
    let instrument = profile.join("p5-instrument");
    let lib = profile.join("libp5_runtime.a");
    let work = profile.join("p5-bench-hot");
    std::fs::create_dir_all(&work).expect("work dir");
    let runs: usize = std::env::var("P5_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);

    let lua_src = work.join("lua-src");
    copy_c(
        &crate_source("lua-src", "547", &work).join("lua-5.4.7"),
        &lua_src,
    );
    let script = work.join("work.lua");
    std::fs::write(&script, LUA_WORK).expect("script");
    let zlib_src = work.join("zlib-src");
    copy_c(
        &crate_source("libz-sys", "1", &work).join("src/zlib"),
        &zlib_src,
    );
    let tools = (instrument.as_path(), lib.as_path());
    let programs = [
        build(
            "lua",
            &lua_src,
            LUA_MAIN,
            vec![script.display().to_string()],
            tools,
            &work,
        ),
        build("zlib", &zlib_src, ZLIB_MAIN, vec![], tools, &work),
    ];
    micro(&lib, &work);
    let (mut server, addr) = log_server(&profile, &work);
    let off = [("P5_THROTTLE", "off")];
    let all = [("P5_THROTTLE", "1000,10us,all")];
    for p in &programs {
        bench((p, &p.p5), "default", &[], runs, (&work, &addr));
        bench((p, &p.p5), "P5_THROTTLE=off", &off, runs, (&work, &addr));
        let label = "P5_THROTTLE=1000,10us,all (every long call)";
        bench((p, &p.p5), label, &all, runs, (&work, &addr));
        for (label, exe, env) in &p.variants {
            bench((p, exe), label, env, runs, (&work, &addr));
        }
    }
    let _ = server.kill();
    let _ = server.wait();
    println!(
        "(best of {runs} interleaved runs; the 2-core machine is shared with other builds, so \
         ratios move by 25 % and more between runs)"
    );
}
