//! The demo program's run time recorded against `P5_DISABLE=1`: the bundled
//! `samples/pingpong` C program, built once against `libp5_runtime.a`, run recording into a
//! real `p5 logserver` and with `P5_DISABLE=1` (sensors cost one load, nothing is recorded);
//! alternated, best of a few runs each, so machine noise hits both alike.

use super::{Detail, run_cargo};
use crate::report::{Better, Row};
use crate::{Ctx, Size};
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn demo(ctx: &Ctx) -> Vec<Row> {
    let row = Row::new(
        "demo pingpong run time, recorded",
        1.10,
        "× P5_DISABLE=1",
        Better::Lower,
    )
    .command("cargo run -p p5-xtask --release -- bench-report --only demo");
    let t = Instant::now();
    let got = demo_ratio(ctx);
    let (threads, n, runs) = sizes(ctx);
    ctx.details.borrow_mut().push(Detail {
        measurement: "demo",
        command: format!(
            "samples/pingpong (gcc -O2, libp5_runtime.a): `server 0 {threads}` and \
             `client 127.0.0.1 PORT {threads} {n}`, {runs} × alternately with P5_DISABLE=1 \
             and recording into `p5 logserver`"
        ),
        seconds: t.elapsed().as_secs_f64(),
        output: got
            .as_ref()
            .map(|(r, on, off)| {
                format!(
                    "recorded {:.1} ms, P5_DISABLE=1 {:.1} ms (best of {runs} each): {r:.3}×\n",
                    on.as_secs_f64() * 1e3,
                    off.as_secs_f64() * 1e3
                )
            })
            .map_err(Clone::clone),
    });
    match got {
        Ok((ratio, on, off)) => vec![row.measured(Ok(ratio)).note(format!(
            "recorded {:.0} ms vs P5_DISABLE=1 {:.0} ms, best of {runs}; an informal budget",
            on.as_secs_f64() * 1e3,
            off.as_secs_f64() * 1e3
        ))],
        Err(e) => vec![row.measured(Err(e))],
    }
}

/// Threads, requests per thread and runs of each kind.
fn sizes(ctx: &Ctx) -> (u32, u32, u32) {
    match ctx.size {
        // Long enough (≈ 0.3 s and ≈ 1 s) that start-up and the exit flush do not dominate.
        Size::Quick => (4, 10_000, 3),
        _ => (4, 40_000, 3),
    }
}

fn target_dir(ctx: &Ctx) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| ctx.root.join("target"))
}
/// A `p5 logserver` child; killed on drop.
struct LogServer(std::process::Child, String);

impl LogServer {
    fn start(p5: &Path, store: &Path) -> Result<LogServer, String> {
        let mut child = Command::new(p5)
            .args(["logserver", "--listen", "127.0.0.1:0", "--store"])
            .arg(store)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start p5 logserver: {e}"))?;
        let mut line = String::new();
        let out = child.stdout.take().ok_or("no stdout")?;
        BufReader::new(out)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .ok_or_else(|| format!("p5 logserver said {line:?}"))?
            .to_owned();
        Ok(LogServer(child, addr))
    }
}

impl Drop for LogServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One pingpong run (server and client); its wall time.
fn pingpong(bin: &Path, env: &[(&str, &str)], threads: u32, n: u32) -> Result<Duration, String> {
    let t = Instant::now();
    let mut server = Command::new(bin);
    server
        .args(["server", "0", &threads.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in env {
        server.env(k, v);
    }
    let mut server = server.spawn().map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(server.stdout.take().ok_or("no stdout")?)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    let port = line
        .trim()
        .rsplit(':')
        .next()
        .filter(|p| p.parse::<u16>().is_ok())
        .ok_or_else(|| format!("pingpong server said {line:?}"))?
        .to_owned();
    let mut client = Command::new(bin);
    client
        .args([
            "client",
            "127.0.0.1",
            &port,
            &threads.to_string(),
            &n.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in env {
        client.env(k, v);
    }
    let cs = client.status().map_err(|e| e.to_string())?;
    let ss = server.wait().map_err(|e| e.to_string())?;
    if !cs.success() || !ss.success() {
        return Err(format!("pingpong failed: client {cs}, server {ss}"));
    }
    Ok(t.elapsed())
}

fn demo_ratio(ctx: &Ctx) -> Result<(f64, Duration, Duration), String> {
    super::step("demo: cargo build --release -p p5-cli -p p5-runtime");
    run_cargo(
        ctx,
        &["build", "--release", "-p", "p5-cli", "-p", "p5-runtime"],
        &[],
    )?;
    let release = target_dir(ctx).join("release");
    let p5 = release.join("p5");
    let lib = release.join("libp5_runtime.a");
    if !lib.is_file() {
        return Err(format!("{} missing after the build", lib.display()));
    }
    let tmp = std::env::temp_dir().join(format!("p5-bench-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
    let result = (|| {
        let bin = tmp.join("pingpong");
        let st = Command::new(std::env::var_os("CC").unwrap_or_else(|| "gcc".into()))
            .args(["-O2", "-pthread", "-I"])
            .arg(ctx.root.join("runtime/include"))
            .arg(ctx.root.join("samples/pingpong/pingpong.c"))
            .arg(&lib)
            .args(["-lpthread", "-ldl", "-lm", "-lrt", "-o"])
            .arg(&bin)
            .status()
            .map_err(|e| format!("cannot run gcc: {e}"))?;
        if !st.success() {
            return Err(format!("gcc failed ({st})"));
        }
        let server = LogServer::start(&p5, &tmp.join("store"))?;
        let (threads, n, runs) = sizes(ctx);
        let spool = tmp.join("spool").display().to_string();
        let on_env = [
            ("P5_LOGSERVER", server.1.as_str()),
            ("P5_SESSION", "bench"),
            ("P5_DIR", spool.as_str()),
        ];
        let off_env = [("P5_DISABLE", "1")];
        let (mut on, mut off) = (Duration::MAX, Duration::MAX);
        // Alternate, so machine noise hits both alike; the best run of each counts.
        for _ in 0..runs {
            off = off.min(pingpong(&bin, &off_env, threads, n)?);
            on = on.min(pingpong(&bin, &on_env, threads, n)?);
        }
        Ok((on.as_secs_f64() / off.as_secs_f64(), on, off))
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    result
}
