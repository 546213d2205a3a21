//! Multi-host end-to-end test: three "hosts" as network namespaces on one bridge (`tc netem`
//! delay and jitter on every link where the kernel has it), the log server and the top host
//! agent on host `a`, child agents on `b` and `c`, and a cascade of instrumented C processes
//! (client on `c` → middle server on `b` → end server on `a`) exchanging TCP request/reply
//! messages. The processes on `b` and `c` run under libfaketime with their own offsets and
//! rates (`FAKETIME`, `P5_CLOCK=mono`), and each of them sees its own boot id and host name (a
//! private mount and UTS namespace with `/proc/sys/kernel/random/boot_id` bind-mounted over),
//! as a process on a separate machine would: `p5 merge` maps processes of the log server's
//! boot exactly through CLOCK_MONOTONIC, which a faked CLOCK_MONOTONIC would otherwise break.
//!
//! The session is merged with `p5_merge::merge_store`; the test asserts that no message is
//! received before it was sent, that each estimated clock map is within its stated error
//! bound of the truth (honest) and — on the plain run — that each hop's share of the bound is
//! at most 5× its share of the error, or ≤ 50 µs where that is under 10 µs (tight: bounds
//! compose hop by hop, `c`'s through `b`), and prints per host the errors at the hop's start
//! and end, the bound, their ratio, drifts and samples. The truth comes from the processes
//! themselves: each prints pairs of (faked CLOCK_MONOTONIC, real CLOCK_MONOTONIC read by a raw
//! system call, which libfaketime does not intercept) at its start and end.
//!
//! Delays that vary: this kernel has no `sch_netem`, so the relay runs put a fourth namespace
//! between `b`, `c` and the bridge, where `p5-jitter-relay` (an Ethernet bridge in user space)
//! holds every frame for 0.5–3 ms; drifts are ±100 ppm. The 5 s run is a test; the 60 s run is
//! `#[ignore]`d (`scripts/clock-bench.sh` runs all three). Their bounds are at least half the
//! smallest round trip (≥ 1 ms), so only honesty is asserted there.
//!
//! Fails with the reason without root, `ip`/`tc`/`unshare`/`gcc`, network namespaces or
//! Debian's `faketime` package (`scripts/install-deps.sh` installs it). On a kernel without
//! `sch_netem` the plain run's links carry no added delay (printed); the veth latency is then
//! tens of microseconds. Traffic stays inside the namespaces the test creates (bounded: one
//! client, `REQUESTS` requests or the run's time); they are deleted on every exit path
//! (guards), after their processes are killed. Runs take turns (a lock): each loads both cores.
//! With `P5_MULTIHOST_KEEP=PATH` a run's directory (store, logs) is kept and linked at `PATH`.

use p5_logserver::reader::StoreDir;
use p5_wire::store::StoreRecord;
use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const FAKETIME_LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";
const LOGSERVER_PORT: u16 = 28725;
const AGENT_PORT: u16 = 28726;
const HOP_PORT: u16 = 7001;
/// Requests the client sends (one every 20 ms plus the round trip: about 8 s; each process
/// pings the log server in bursts — 32 every 100 ms in a connection's first 10 s, then 8
/// every 500 ms — and the fits need a few of them).
const REQUESTS: u32 = 300;
/// Per-link one-way delay and jitter (each direction crosses two netem queues).
const NETEM: [&str; 4] = ["delay", "2ms", "400us", "distribution normal"];

/// The cascade program: `hop LISTEN_PORT NEXT_HOST|- NEXT_PORT N PAUSE_US RUN_MS`. With
/// `LISTEN_PORT` 0 it is the client (N requests to NEXT, a pause after each, stopping after
/// `RUN_MS` of real time unless 0; prints `done requests=K`); otherwise it serves one
/// connection, forwarding each request to NEXT (unless `-`) before replying. Prints
/// `start`/`end` clock pairs.
const HOP_C: &str = r#"
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "p5.h"

#define S_MAIN 0x4d48000000000001ULL
#define S_HOP 0x4d48000000000002ULL
#define C_ACCEPT 0x4d48000000000101ULL
#define C_RECV_IN 0x4d48000000000102ULL
#define C_SEND_OUT 0x4d48000000000103ULL
#define C_RECV_OUT 0x4d48000000000104ULL
#define C_SEND_BACK 0x4d48000000000105ULL
#define C_CONNECT 0x4d48000000000106ULL
#define C_CLOSE 0x4d48000000000107ULL
#define MSG 128

static long long ts_ns(struct timespec t) { return t.tv_sec * 1000000000LL + t.tv_nsec; }
static long long fake_ns(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return ts_ns(t); }
static long long raw_ns(void) { struct timespec t; syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &t); return ts_ns(t); }
/* The (fake, real) pair read closest together of a few tries (a preemption between the reads
   would skew one). */
static void pair(const char *what) {
    long long best = -1, f = 0, r = 0;
    for (int i = 0; i < 200; i++) {
        long long r0 = raw_ns(), f0 = fake_ns(), r1 = raw_ns();
        if (best < 0 || r1 - r0 < best) { best = r1 - r0; f = f0; r = r0 + (r1 - r0) / 2; }
    }
    printf("%s pid=%d fake=%lld raw=%lld gap=%lld\n", what, getpid(), f, r, best);
    fflush(stdout);
}
static int read_full(uint64_t s, int fd, char *b, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = p5_recv(s, fd, b + got, n - got, 0);
        if (r == 0) return -1;
        if (r < 0) { if (errno == EINTR) continue; return -1; }
        got += (size_t)r;
    }
    return 0;
}
static int write_full(uint64_t s, int fd, const char *b, size_t n) {
    size_t put = 0;
    while (put < n) {
        ssize_t r = p5_send(s, fd, b + put, n - put, MSG_NOSIGNAL);
        if (r < 0) { if (errno == EINTR) continue; return -1; }
        put += (size_t)r;
    }
    return 0;
}
static void nodelay(int fd) { int one = 1; setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); }
static int dial(const char *host, int port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, host, &a.sin_addr);
    for (int tries = 0; tries < 500; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (p5_connect(C_CONNECT, fd, (struct sockaddr *)&a, sizeof a) == 0) { nodelay(fd); return fd; }
        close(fd);
        usleep(10000);
    }
    perror("hop: connect");
    return -1;
}
int main(int argc, char **argv) {
    if (argc != 7) { fprintf(stderr, "usage: hop LISTEN_PORT NEXT_HOST|- NEXT_PORT N PAUSE_US RUN_MS\n"); return 2; }
    int port = atoi(argv[1]), nport = atoi(argv[3]), n = atoi(argv[4]), pause_us = atoi(argv[5]);
    long long run_ns = atoll(argv[6]) * 1000000LL;
    const char *next = argv[2];
    p5_init();
    pair("start");
    int rc = 0;
    {
        P5_SCOPE(S_MAIN);
        char buf[MSG];
        if (port == 0) {
            int up = dial(next, nport);
            if (up < 0) return 1;
            long long t0 = raw_ns();
            int i = 0;
            for (; i < n && (run_ns == 0 || raw_ns() - t0 < run_ns); i++) {
                P5_SCOPE(S_HOP);
                memset(buf, 'a' + i % 26, sizeof buf);
                if (write_full(C_SEND_OUT, up, buf, MSG) || read_full(C_RECV_OUT, up, buf, MSG)) { rc = 1; break; }
                usleep(pause_us);
            }
            p5_close(C_CLOSE, up);
            printf("done requests=%d\n", i);
            fflush(stdout);
        } else {
            int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
            setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
            if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 4)) { perror("hop: listen"); return 1; }
            printf("listening\n");
            fflush(stdout);
            int in = p5_accept(C_ACCEPT, ls, NULL, NULL);
            if (in < 0) { perror("hop: accept"); return 1; }
            nodelay(in);
            int up = strcmp(next, "-") ? dial(next, nport) : -1;
            while (read_full(C_RECV_IN, in, buf, MSG) == 0) {
                P5_SCOPE(S_HOP);
                if (up >= 0 && (write_full(C_SEND_OUT, up, buf, MSG) || read_full(C_RECV_OUT, up, buf, MSG))) { rc = 1; break; }
                if (write_full(C_SEND_BACK, in, buf, MSG)) { rc = 1; break; }
            }
            p5_close(C_CLOSE, in);
            if (up >= 0) p5_close(C_CLOSE, up);
            close(ls);
        }
    }
    pair("end");
    return rc;
}
"#;

/// Runs a command, returning its stderr as the error.
fn sh(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args[0]))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Three namespaces `a` (bridge, 10.77.0.1), `b` (.2), `c` (.3), and with relays a fourth,
/// `r`, through which `b`'s and `c`'s links to the bridge pass (interfaces `h1`/`s1` for `b`,
/// `h2`/`s2` for `c`, bridged by a jitter relay each); deleted on drop.
struct Net {
    /// `a`, `b`, `c`, then `r` if relayed.
    ns: Vec<String>,
    /// Whether `tc netem` delays the links (false where the kernel lacks sch_netem).
    netem: bool,
}

impl Net {
    fn ip(i: usize) -> String {
        format!("10.77.0.{}", i + 1)
    }

    fn create(label: &str, relayed: bool) -> Result<Net, String> {
        let tag = std::process::id() % 100_000;
        let names: &[&str] = if relayed {
            &["a", "b", "c", "r"]
        } else {
            &["a", "b", "c"]
        };
        let mut net = Net {
            ns: Vec::new(),
            netem: !relayed,
        };
        // On an error half-way, dropping `net` deletes whatever exists.
        for h in names {
            let n = format!("p5mh-{tag}{label}-{h}");
            sh(&["ip", "netns", "add", &n])?;
            net.ns.push(n);
        }
        let a = net.ns[0].as_str();
        let netem = |ns: &str, dev: &str| -> Result<(), String> {
            let mut args = vec![
                "ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "netem",
            ];
            args.extend(NETEM.iter().flat_map(|s| s.split(' ')));
            sh(&args)
        };
        sh(&["ip", "-n", a, "link", "add", "br0", "type", "bridge"])?;
        sh(&["ip", "-n", a, "addr", "add", "10.77.0.1/24", "dev", "br0"])?;
        sh(&["ip", "-n", a, "link", "set", "br0", "up"])?;
        sh(&["ip", "-n", a, "link", "set", "lo", "up"])?;
        for i in 1..3 {
            let n = net.ns[i].as_str();
            let port = format!("port{i}");
            if let Some(r) = net.ns.get(3) {
                let (h, s) = (format!("h{i}"), format!("s{i}"));
                sh(&[
                    "ip", "-n", a, "link", "add", &port, "type", "veth", "peer", "name", &s,
                    "netns", r,
                ])?;
                sh(&[
                    "ip", "-n", n, "link", "add", "eth0", "type", "veth", "peer", "name", &h,
                    "netns", r,
                ])?;
                for dev in [&h, &s] {
                    sh(&["ip", "-n", r, "link", "set", dev, "promisc", "on", "up"])?;
                }
            } else {
                sh(&[
                    "ip", "-n", a, "link", "add", &port, "type", "veth", "peer", "name", "eth0",
                    "netns", n,
                ])?;
            }
            sh(&["ip", "-n", a, "link", "set", &port, "master", "br0", "up"])?;
            let addr = format!("{}/24", Net::ip(i));
            sh(&["ip", "-n", n, "addr", "add", &addr, "dev", "eth0"])?;
            sh(&["ip", "-n", n, "link", "set", "eth0", "up"])?;
            sh(&["ip", "-n", n, "link", "set", "lo", "up"])?;
            if relayed {
                continue;
            }
            for (ns, dev) in [(a, port.as_str()), (n, "eth0")] {
                if let Err(e) = netem(ns, dev) {
                    // Kernels without sch_netem (e.g. minimal VM kernels): run without it.
                    eprintln!("note: no netem delay on {dev} in {ns}: {e}");
                    net.netem = false;
                }
            }
        }
        Ok(net)
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for n in self.ns.iter().filter(|n| !n.is_empty()) {
            let _ = Command::new("ip")
                .args(["netns", "del", n])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// A child process whose stdout lines are collected by a thread; killed on drop.
struct Proc {
    name: String,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Proc {
    fn spawn(name: &str, mut cmd: Command, log: &Path) -> Proc {
        let err = std::fs::File::create(log.join(format!("{name}.stderr"))).unwrap();
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().unwrap();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(l);
            }
        });
        Proc {
            name: name.to_owned(),
            child,
            lines,
        }
    }

    fn wait_line(&self, prefix: &str, timeout: Duration) {
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            if self.lines().iter().any(|l| l.starts_with(prefix)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("{}: no line {prefix:?} within {timeout:?}", self.name);
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Waits for the exit (killing it after `timeout`) and asserts success.
    fn wait(&mut self, timeout: Duration) {
        let end = Instant::now() + timeout;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                assert!(st.success(), "{} exited with {st}", self.name);
                // Let the reader thread take the last lines.
                std::thread::sleep(Duration::from_millis(50));
                return;
            }
            if Instant::now() > end {
                let _ = self.child.kill();
                panic!("{} did not finish within {timeout:?}", self.name);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn terminate(&mut self, timeout: Duration) {
        // SAFETY: signalling our own child (`ip netns exec` execs the command in place).
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.wait(timeout);
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Why the test cannot run here, if it cannot.
fn unavailable() -> Option<String> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("network namespaces need root".into());
    }
    for tool in ["ip", "tc", "unshare", "gcc"] {
        let found = Command::new(tool)
            .arg(if tool == "gcc" { "--version" } else { "-V" })
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found {
            return Some(format!("`{tool}` is not installed"));
        }
    }
    if !Path::new(FAKETIME_LIB).is_file() {
        return Some(format!(
            "{FAKETIME_LIB} missing (apt-get install -y faketime)"
        ));
    }
    None
}

/// A clock pair printed by `hop`: (faked, real) CLOCK_MONOTONIC.
fn pairs(lines: &[String]) -> (u32, [(i64, i64); 2]) {
    let mut pid = 0;
    let mut out = [(0, 0); 2];
    for (k, what) in ["start ", "end "].iter().enumerate() {
        let l = lines
            .iter()
            .find(|l| l.starts_with(what))
            .unwrap_or_else(|| panic!("no {what:?} line in {lines:?}"));
        let field = |key: &str| -> i64 {
            l.split_whitespace()
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {key} in {l:?}"))
        };
        pid = field("pid") as u32;
        out[k] = (field("fake"), field("raw"));
    }
    (pid, out)
}

/// One run of the cascade: clocks, traffic and what sits in the links.
struct Scenario {
    /// Tag in the namespace names (tests run one at a time, but names stay apart).
    label: &'static str,
    /// `FAKETIME` of the `hop` on `b` and on `c` (`a` runs on the real clock).
    faketime: [&'static str; 2],
    /// Requests the client sends at most, the pause after each, and the real time after which
    /// it stops (0: none).
    requests: u32,
    pause_us: u32,
    run_ms: u32,
    /// Jitter relays (hold µs, uniform in `[lo, hi]`, per frame) on `b`'s and `c`'s links:
    /// everything between hosts passes one (`c → b` two).
    relay: Option<(u64, u64)>,
}

/// What one host's clock estimate came to against the truth.
struct HostResult {
    name: &'static str,
    method: &'static str,
    /// estimate − truth at the hop's start and end, ns.
    err: [f64; 2],
    bound: Option<i64>,
    /// Forward clock samples of its host (frames, pings on the connection and over UDP).
    forward: u64,
}

/// What a run measured.
struct Outcome {
    hosts: Vec<HostResult>,
    failures: Vec<String>,
}

/// Serializes the runs: each builds namespaces and loads both cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// 2 µs: how well the test itself knows the truth (pair reads, rate estimate).
const SLACK: f64 = 2_000.0;
/// Errors below this count as this when checking a bound's tightness: twice the 5 µs the issue
/// asks for. No honest bound is below half the smallest round trip (about 20 µs on these
/// veths), so a lucky small error must not fail the check.
const FLOOR: f64 = 10_000.0;

/// Spawns a command in namespace `i`.
fn in_ns(net: &Net, i: usize) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &net.ns[i]]);
    c
}

/// The scenario's jitter relays in namespace `r`: one bridging `b`'s link, one `c`'s.
fn relays(sc: &Scenario, net: &Net, log: &Path) -> Vec<Proc> {
    let Some((lo, hi)) = sc.relay else {
        return Vec::new();
    };
    let relay = env!("CARGO_BIN_EXE_p5-jitter-relay");
    (1..3)
        .map(|i| {
            let mut c = in_ns(net, 3);
            c.arg(relay)
                .args(["--left", &format!("h{i}"), "--right", &format!("s{i}")])
                .args(["--min-us", &lo.to_string(), "--max-us", &hi.to_string()])
                .args(["--seed", &i.to_string()]);
            let p = Proc::spawn(&format!("relay-{i}"), c, log);
            p.wait_line("relaying", Duration::from_secs(20));
            p
        })
        .collect()
}

/// Prints each relay direction's last report of how late it released frames (it prints one
/// every 2 s, covering the run so far, to its stderr).
fn print_relay_lateness(sc: &Scenario, log: &Path) {
    if sc.relay.is_none() {
        return;
    }
    for i in 1..3 {
        let text =
            std::fs::read_to_string(log.join(format!("relay-{i}.stderr"))).unwrap_or_default();
        let mut last: BTreeMap<&str, &str> = BTreeMap::new();
        for l in text.lines() {
            if let Some((dir, _)) = l.split_once(':') {
                last.insert(dir, l);
            }
        }
        for l in last.values() {
            println!("relay {l}");
        }
    }
}

/// Starts the three hops (server `a`, middle `b`, client `c`), the latter two under libfaketime
/// with their own boot id and host name.
fn hops(sc: &Scenario, net: &Net, dir: &Path, hop: &Path) -> Vec<Proc> {
    let ls = format!("{}:{LOGSERVER_PORT}", Net::ip(0));
    let (b_next, c_next) = ((Net::ip(0), HOP_PORT), (Net::ip(1), HOP_PORT));
    let args: [[String; 4]; 3] = [
        [HOP_PORT.to_string(), "-".into(), "0".into(), "0".into()],
        [
            HOP_PORT.to_string(),
            b_next.0,
            b_next.1.to_string(),
            "0".into(),
        ],
        [
            "0".into(),
            c_next.0,
            c_next.1.to_string(),
            sc.requests.to_string(),
        ],
    ];
    let spool = dir.join("spool");
    let mut out = Vec::new();
    for (i, h) in ["a", "b", "c"].into_iter().enumerate() {
        let mut c = in_ns(net, i);
        c.env("P5_LOGSERVER", &ls)
            .env("P5_SESSION", "multihost")
            .env("P5_DIR", &spool)
            .env("P5_CLOCK", "mono")
            .env("P5_EXIT_TIMEOUT_MS", "10000");
        if i > 0 {
            // Its own boot id and host name, as on another machine; libfaketime only for hop.
            let boot = dir.join(format!("boot_id-{h}"));
            std::fs::write(
                &boot,
                format!("{:08x}-0000-4000-8000-00000000000{i}\n", 0x7035_0000 + i),
            )
            .unwrap();
            c.args([
                "unshare",
                "--mount",
                "--uts",
                "--propagation",
                "private",
                "sh",
                "-c",
                "hostname \"$1\" && mount --bind \"$2\" /proc/sys/kernel/random/boot_id && shift 2 && exec \"$@\"",
                "sh",
                &format!("p5mh-{h}"),
            ])
            .arg(&boot)
            .args(["env", &format!("LD_PRELOAD={FAKETIME_LIB}")])
            .env("FAKETIME", sc.faketime[i - 1]);
        }
        c.arg(hop)
            .args(&args[i])
            .args([sc.pause_us.to_string(), sc.run_ms.to_string()]);
        let p = Proc::spawn(&format!("hop-{h}"), c, dir);
        if i < 2 {
            p.wait_line("listening", Duration::from_secs(20));
        }
        out.push(p);
    }
    out
}

/// The log server's start on CLOCK_MONOTONIC and each process's (start_mono, boot id) by pid.
fn store_truth(store: &Path) -> (i64, BTreeMap<u32, (u64, String)>) {
    let mut server_start = None;
    let mut start_mono = BTreeMap::new();
    let session = StoreDir::open(store).unwrap().session("multihost").unwrap();
    let mut records = session.records().unwrap();
    while records.advance().unwrap() {
        let Some(r) = records.record() else { continue };
        server_start.get_or_insert(r.segment.server_start_mono_ns as i64);
        if let StoreRecord::Process { hello, .. } = r.record {
            let id = hello.identity;
            start_mono.insert(id.pid, (id.start_mono_ns, id.boot_id));
        }
    }
    (server_start.expect("an empty store"), start_mono)
}

/// Runs a scenario end to end, prints the merge summary and the table of errors and bounds,
/// and returns what it measured; asserts what every run must hold (the agent tree, matched
/// messages, no causality violation).
fn run(sc: &Scenario) -> Outcome {
    // A test that passes by skipping proves nothing: what it needs is installed by
    // `scripts/install-deps.sh` (the test command runs it), so a gap is a failure.
    if let Some(why) = unavailable() {
        panic!("the multi-host test cannot run: {why} (run scripts/install-deps.sh as root)");
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let net = Net::create(sc.label, sc.relay.is_some())
        .unwrap_or_else(|e| panic!("cannot build the namespaces: {e}"));
    let started = Instant::now();
    let mut dir = tempfile::tempdir().unwrap();
    if let Ok(keep) = std::env::var("P5_MULTIHOST_KEEP") {
        let _ = std::fs::remove_file(&keep);
        let _ = std::os::unix::fs::symlink(dir.path(), &keep);
        dir.disable_cleanup(true);
    }
    let log = dir.path();
    let store = dir.path().join("store");
    std::fs::create_dir_all(&store).unwrap();

    // Build the cascade program against the runtime's static library.
    let src = dir.path().join("hop.c");
    std::fs::write(&src, HOP_C).unwrap();
    std::fs::write(dir.path().join("p5.h"), p5_instrument::runtime::HEADER).unwrap();
    let hop = dir.path().join("hop");
    let lib = p5_instrument::runtime::static_lib().expect("libp5_runtime.a");
    p5_instrument::runtime::compile_c(&[src.as_path()], dir.path(), &hop, &lib).expect("build hop");

    let p5 = env!("CARGO_BIN_EXE_p5");
    let ls_addr = format!("{}:{LOGSERVER_PORT}", Net::ip(0));
    let top_addr = format!("{}:{AGENT_PORT}", Net::ip(0));
    let mut logserver = {
        let mut c = in_ns(&net, 0);
        c.args([p5, "logserver", "--listen", &ls_addr, "--store"])
            .arg(&store);
        Proc::spawn("logserver", c, log)
    };
    logserver.wait_line("listening on", Duration::from_secs(20));
    // The relays first: a host that looks for its neighbours before the link carries frames
    // retries a second later, and its processes' first clock samples come that much later.
    let relays = relays(sc, &net, log);
    let mut agents = Vec::new();
    for i in 0..3 {
        let mut c = in_ns(&net, i);
        c.args([p5, "hostagent", "--session", "multihost", "--spool-dir"])
            .arg(dir.path().join(format!("agent-spool-{i}")));
        if i == 0 {
            c.args(["--logserver", &ls_addr, "--listen", &top_addr]);
        } else {
            c.args(["--parent", &top_addr]);
        }
        agents.push(Proc::spawn(&format!("agent-{i}"), c, log));
    }
    let mut hops = hops(sc, &net, dir.path(), &hop);
    let limit = Duration::from_millis(sc.run_ms as u64) + Duration::from_secs(45);
    for p in hops.iter_mut().rev() {
        p.wait(limit);
    }
    for a in agents.iter_mut().rev() {
        a.terminate(Duration::from_secs(10));
    }
    logserver.terminate(Duration::from_secs(10));
    let run_time = started.elapsed();
    drop(relays);
    print_relay_lateness(sc, log);
    let done: u64 = hops[2]
        .lines()
        .iter()
        .find_map(|l| l.strip_prefix("done requests=")?.parse().ok())
        .expect("the client's request count");

    let (server_start, start_mono) = store_truth(&store);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut args = p5_merge::MergeOptions::new(&store);
    args.db = Some(format!(
        "sqlite:{}",
        dir.path().join("multihost.sqlite").display()
    ));
    let summaries = rt.block_on(p5_merge::merge_store(&args)).expect("merge");
    let s = summaries
        .iter()
        .find(|s| s.name == "multihost")
        .expect("session merged");
    print!("{}", p5_merge::render(s));
    let outcome = compare(sc, s, &hops, server_start, &start_mono);
    println!(
        "links: {}; {} requests, messages: {} matched; causality violations: {} before tightening, {} after; run {:.1} s",
        match sc.relay {
            Some((lo, hi)) =>
                format!("jitter relays holding each frame {lo}–{hi} µs on b's and c's links"),
            None if net.netem => format!("netem {}", NETEM.join(" ")),
            None => "no netem (unavailable)".to_owned(),
        },
        done,
        s.matched,
        s.violations_before,
        s.violations,
        run_time.as_secs_f64()
    );
    let agents_seen = s
        .clocks
        .iter()
        .filter(|c| c.program == "hostagent" || c.program == "p5")
        .count();
    assert!(
        agents_seen >= 3,
        "the agent tree delivered {agents_seen} of 3 agents"
    );
    assert!(
        done > 0 && s.matched >= 2 * done,
        "too few matched messages: {} for {done} requests",
        s.matched
    );
    assert_eq!(s.violations, 0, "messages received before they were sent");
    outcome
}

/// Compares each hop's clock estimate with the truth (from its own (faked, real) pairs) and
/// prints the table; failures of identity (host name, boot id) and of honesty (error beyond
/// the bound) are collected.
fn compare(
    sc: &Scenario,
    s: &p5_merge::SessionSummary,
    hops: &[Proc],
    server_start: i64,
    start_mono: &BTreeMap<u32, (u64, String)>,
) -> Outcome {
    println!(
        "{:<5} {:<14} {:<9} {:>14} {:>11} {:>11} {:>11} {:>6} {:>11} {:>11} {:>11} {:>14}",
        "host",
        "FAKETIME",
        "method",
        "true offset",
        "err @start",
        "err @end",
        "bound",
        "ratio",
        "inj drift",
        "true drift",
        "est drift",
        "samples f+b+m"
    );
    let real_boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap()
        .trim()
        .to_owned();
    let mut out = Outcome {
        hosts: Vec::new(),
        failures: Vec::new(),
    };
    for (i, (name, p)) in ["a", "b", "c"].into_iter().zip(hops).enumerate() {
        let faketime = i.checked_sub(1).map(|k| sc.faketime[k]);
        let (pid, [(f1, r1), (f2, r2)]) = pairs(&p.lines());
        let (mono0, boot) = start_mono
            .get(&pid)
            .unwrap_or_else(|| panic!("hop-{name} (pid {pid}) has no handshake"));
        let c = s
            .clocks
            .iter()
            .find(|c| c.pid == pid)
            .unwrap_or_else(|| panic!("hop-{name} (pid {pid}) has no clock estimate"));
        // Faked clock f = f1 + rate·(real − r1); process time t = f − mono0.
        let rate = (f2 - f1) as f64 / (r2 - r1) as f64;
        let real_at = |t: f64| r1 as f64 + (*mono0 as f64 + t - f1 as f64) / rate;
        let truth = |t: f64| real_at(t) - server_start as f64;
        let t_end = (f2 - *mono0 as i64) as f64;
        let err = |t: f64| c.fit.map(t as i64) as f64 - truth(t);
        let (e0, e1) = (err(0.0), err(t_end));
        let true_drift_ppm = (1.0 / rate - 1.0) * 1e6;
        // The rate FAKETIME asked for (`xR`), as the drift merge reports (slow: positive).
        let injected_ppm = faketime
            .and_then(|f| f.split_whitespace().find_map(|w| w.strip_prefix('x')))
            .and_then(|r| r.parse::<f64>().ok())
            .map_or(0.0, |r| (1.0 / r - 1.0) * 1e6);
        let bound = c.fit.error_bound_ns;
        let worst = e0.abs().max(e1.abs());
        println!(
            "{:<5} {:<14} {:<9} {:>14.0} {:>11.0} {:>11.0} {:>11} {:>6} {:>+11.3} {:>+11.3} {:>+11.3} {:>14}",
            name,
            faketime.unwrap_or("-"),
            c.fit.method.name(),
            truth(0.0),
            e0,
            e1,
            bound.map_or("none".into(), |b| format!("±{b}")),
            bound.map_or("-".into(), |b| format!("{:.1}", b as f64 / worst.max(1.0))),
            injected_ppm,
            true_drift_ppm,
            c.fit.drift_ppm(),
            format!("{}+{}+{}", c.fit.forward, c.fit.backward, c.fit.messages),
        );
        if faketime.is_some() && c.hostname != format!("p5mh-{name}") {
            out.failures
                .push(format!("hop-{name}: host name {:?}", c.hostname));
        }
        if faketime.is_some() && *boot == real_boot {
            out.failures
                .push(format!("hop-{name}: reported the real boot id"));
        }
        match bound {
            Some(b) if worst <= b as f64 + SLACK => {}
            Some(b) => out.failures.push(format!(
                "hop-{name}: error {e0:.0}/{e1:.0} ns exceeds the stated bound {b} ns"
            )),
            None => out.failures.push(format!(
                "hop-{name}: no error bound stated ({})",
                c.fit.method.name()
            )),
        }
        out.hosts.push(HostResult {
            name,
            method: c.fit.method.name(),
            err: [e0, e1],
            bound,
            forward: c.fit.forward,
        });
    }
    out
}

/// The hops whose share of the stated bound is more than 5× their share of the actual error
/// (or 5× [`FLOOR`] where that is smaller): a bound that loose cannot tell a good estimate from
/// a bad one. Bounds compose hop by hop (`b` against the log server's host `a`, `c` through
/// `b`'s messages), so each hop is judged by what it adds: `b` by its bound and error, `c` by
/// its bound less `b`'s and its error less `b`'s (at the same instants, near enough: the hops
/// start and end within milliseconds of each other).
fn loose_bounds(o: &Outcome) -> Vec<String> {
    let mut upstream: Option<&HostResult> = None;
    let mut out = Vec::new();
    for h in o.hosts.iter().filter(|h| h.method != "exact") {
        let Some(b) = h.bound else { continue };
        let (ub, ue) = upstream.map_or((0, [0.0; 2]), |u| (u.bound.unwrap_or(0), u.err));
        let own = (b - ub) as f64;
        let err = (h.err[0] - ue[0]).abs().max((h.err[1] - ue[1]).abs());
        if own > 5.0 * err.max(FLOOR) {
            out.push(format!(
                "hop-{}: its share of the bound, {own:.0} ns (of {b} ns), is more than 5× its share \
                 of the error, {err:.0} ns (or 5× {FLOOR} ns)",
                h.name
            ));
        }
        upstream = Some(h);
    }
    out
}

#[test]
fn three_hosts_with_skewed_drifting_clocks_merge_causally_within_bounds() {
    let o = run(&Scenario {
        label: "",
        faketime: ["+3s x1.0003", "-1.5s x0.9998"],
        requests: REQUESTS,
        pause_us: 20_000,
        run_ms: 0,
        relay: None,
    });
    assert!(o.failures.is_empty(), "{:#?}", o.failures);
    let loose = loose_bounds(&o);
    assert!(loose.is_empty(), "{loose:#?}");
}

/// Delays that vary: every link between hosts through a jitter relay holding each chunk for
/// 0.5–3 ms, drifts of ±100 ppm, 5 s of traffic. The bounds must hold; they are wide here (at
/// least half the smallest round trip, ≥ 1 ms), so tightness is not asked; the errors are
/// printed.
#[test]
fn clocks_hold_their_bounds_through_a_jitter_relay_for_5_s() {
    let o = run(&relay_scenario("j5", 5_000));
    assert!(o.failures.is_empty(), "{:#?}", o.failures);
    assert_dense_behind_the_relays(&o);
}

/// Behind the relays every answer takes over a millisecond, so the hops ping over UDP, one
/// datagram every 500 µs in their first 10 s: 10,000–12,300 forward samples a host in a 5 s
/// run, where pings on the connection alone (one per round trip) and frames gave 2,100–2,200,
/// and one datagram a millisecond 5,400–8,100.
fn assert_dense_behind_the_relays(o: &Outcome) {
    for h in o.hosts.iter().filter(|h| h.name != "a") {
        assert!(
            h.forward >= 6_000,
            "hop-{}: {} forward clock samples: no dense pings over UDP?",
            h.name,
            h.forward
        );
    }
}

/// As above for 60 s of traffic (about a minute and a half in all): `cargo test -p p5-cli
/// --test multihost -- --ignored --nocapture`, or `scripts/clock-bench.sh`.
#[test]
#[ignore = "60 s of traffic; run with --ignored (scripts/clock-bench.sh)"]
fn clocks_hold_their_bounds_through_a_jitter_relay_for_60_s() {
    let o = run(&relay_scenario("j60", 60_000));
    assert!(o.failures.is_empty(), "{:#?}", o.failures);
    assert_dense_behind_the_relays(&o);
}

fn relay_scenario(label: &'static str, run_ms: u32) -> Scenario {
    Scenario {
        label,
        faketime: ["+3s x1.0001", "-1.5s x0.9999"],
        requests: u32::MAX / 2,
        pause_us: 0,
        run_ms,
        relay: Some((500, 3_000)),
    }
}
