//! Multi-host end-to-end test: three "hosts" as network namespaces on one bridge, `tc netem`
//! delay and jitter on every link, the log server and the top host agent on host `a`, child
//! agents on `b` and `c`, and a cascade of instrumented C processes (client on `c` → middle
//! server on `b` → end server on `a`) exchanging TCP request/reply messages. The processes
//! on `b` and `c` run under libfaketime with their own offsets and rates (`FAKETIME`,
//! `P5_CLOCK=mono`), and each of them sees its own boot id and host name (a private mount and
//! UTS namespace with `/proc/sys/kernel/random/boot_id` bind-mounted over), as a process on a
//! separate machine would: `p5 merge` maps processes of the log server's boot exactly through
//! CLOCK_MONOTONIC, which a faked CLOCK_MONOTONIC would otherwise break.
//!
//! The session is merged with `p5_merge::merge_store`; the test asserts that no message is
//! received before it was sent and that each estimated clock map is within its stated error
//! bound of the truth, and prints the measured errors. The truth comes from the processes
//! themselves: each prints pairs of (faked CLOCK_MONOTONIC, real CLOCK_MONOTONIC read by a raw
//! system call, which libfaketime does not intercept) at its start and end.
//!
//! Fails with the reason without root, `ip`/`tc`/`unshare`/`gcc`, network namespaces or
//! Debian's `faketime` package (`scripts/install-deps.sh` installs it). On a kernel without
//! `sch_netem` the links carry no added delay (printed); the veth latency is then tens of
//! microseconds, close to what sample-based clock fits resolve on a loaded machine. Traffic
//! stays inside the namespaces the test creates (bounded: one client, `REQUESTS` requests);
//! they are deleted on every exit path (guards), after their processes are killed.

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
/// Requests the client sends (one every 20 ms plus the round trip: about 8 s; the log server
/// gets a ping echo from each process every 500 ms, and the fits need a few of them).
const REQUESTS: u32 = 300;
/// Per-link one-way delay and jitter (each direction crosses two netem queues).
const NETEM: [&str; 4] = ["delay", "2ms", "400us", "distribution normal"];

/// The cascade program: `hop LISTEN_PORT NEXT_HOST|- NEXT_PORT N`. With `LISTEN_PORT` 0 it is
/// the client (N requests to NEXT); otherwise it serves one connection, forwarding each
/// request to NEXT (unless `-`) before replying. Prints `start`/`end` clock pairs.
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
    if (argc != 5) { fprintf(stderr, "usage: hop LISTEN_PORT NEXT_HOST|- NEXT_PORT N\n"); return 2; }
    int port = atoi(argv[1]), nport = atoi(argv[3]), n = atoi(argv[4]);
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
            for (int i = 0; i < n; i++) {
                P5_SCOPE(S_HOP);
                memset(buf, 'a' + i % 26, sizeof buf);
                if (write_full(C_SEND_OUT, up, buf, MSG) || read_full(C_RECV_OUT, up, buf, MSG)) { rc = 1; break; }
                usleep(20000);
            }
            p5_close(C_CLOSE, up);
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

/// Three namespaces `a` (bridge, 10.77.0.1), `b` (.2), `c` (.3); deleted on drop.
struct Net {
    ns: [String; 3],
    /// Whether `tc netem` delays the links (false where the kernel lacks sch_netem).
    netem: bool,
}

impl Net {
    fn ip(i: usize) -> String {
        format!("10.77.0.{}", i + 1)
    }

    fn create() -> Result<Net, String> {
        let tag = std::process::id() % 100_000;
        let mut net = Net {
            ns: ["a", "b", "c"].map(|h| format!("p5mh-{tag}-{h}")),
            netem: true,
        };
        // On an error half-way, dropping `net` deletes whatever exists.
        for n in &net.ns {
            sh(&["ip", "netns", "add", n])?;
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
            sh(&[
                "ip", "-n", a, "link", "add", &port, "type", "veth", "peer", "name", "eth0",
                "netns", n,
            ])?;
            sh(&["ip", "-n", a, "link", "set", &port, "master", "br0", "up"])?;
            let addr = format!("{}/24", Net::ip(i));
            sh(&["ip", "-n", n, "addr", "add", &addr, "dev", "eth0"])?;
            sh(&["ip", "-n", n, "link", "set", "eth0", "up"])?;
            sh(&["ip", "-n", n, "link", "set", "lo", "up"])?;
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

struct Host<'a> {
    name: &'a str,
    /// `FAKETIME` for its `hop` process (None: the real clock).
    faketime: Option<&'a str>,
    /// `hop` arguments.
    hop: [String; 4],
}

#[test]
fn three_hosts_with_skewed_drifting_clocks_merge_causally_within_bounds() {
    // A test that passes by skipping proves nothing: what it needs is installed by
    // `scripts/install-deps.sh` (the test command runs it), so a gap is a failure.
    if let Some(why) = unavailable() {
        panic!("the multi-host test cannot run: {why} (run scripts/install-deps.sh as root)");
    }
    let net = Net::create().unwrap_or_else(|e| panic!("cannot build the namespaces: {e}"));
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
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
    let in_ns = |i: usize| {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &net.ns[i]]);
        c
    };
    let ls_addr = format!("{}:{LOGSERVER_PORT}", Net::ip(0));
    let top_addr = format!("{}:{AGENT_PORT}", Net::ip(0));

    let mut logserver = {
        let mut c = in_ns(0);
        c.args([p5, "logserver", "--listen", &ls_addr, "--store"])
            .arg(&store);
        Proc::spawn("logserver", c, log)
    };
    logserver.wait_line("listening on", Duration::from_secs(20));
    let mut agents = Vec::new();
    for i in 0..3 {
        let mut c = in_ns(i);
        c.args([p5, "hostagent", "--session", "multihost", "--spool-dir"])
            .arg(dir.path().join(format!("agent-spool-{i}")));
        if i == 0 {
            c.args(["--logserver", &ls_addr, "--listen", &top_addr]);
        } else {
            c.args(["--parent", &top_addr]);
        }
        agents.push(Proc::spawn(&format!("agent-{i}"), c, log));
    }

    let hosts = [
        Host {
            name: "a",
            faketime: None,
            hop: [HOP_PORT.to_string(), "-".into(), "0".into(), "0".into()],
        },
        Host {
            name: "b",
            faketime: Some("+3s x1.0003"),
            hop: [
                HOP_PORT.to_string(),
                Net::ip(0),
                HOP_PORT.to_string(),
                "0".into(),
            ],
        },
        Host {
            name: "c",
            faketime: Some("-1.5s x0.9998"),
            hop: [
                "0".into(),
                Net::ip(1),
                HOP_PORT.to_string(),
                REQUESTS.to_string(),
            ],
        },
    ];
    let spool = dir.path().join("spool");
    let mut hops: Vec<Proc> = Vec::new();
    for (i, h) in hosts.iter().enumerate() {
        let mut c = in_ns(i);
        c.env("P5_LOGSERVER", &ls_addr)
            .env("P5_SESSION", "multihost")
            .env("P5_DIR", &spool)
            .env("P5_CLOCK", "mono")
            .env("P5_EXIT_TIMEOUT_MS", "10000");
        if let Some(ft) = h.faketime {
            // Its own boot id and host name, as on another machine; libfaketime only for hop.
            let boot = dir.path().join(format!("boot_id-{}", h.name));
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
                &format!("p5mh-{}", h.name),
            ])
            .arg(&boot)
            .args(["env", &format!("LD_PRELOAD={FAKETIME_LIB}")])
            .env("FAKETIME", ft);
        }
        c.arg(&hop).args(&h.hop);
        let p = Proc::spawn(&format!("hop-{}", h.name), c, log);
        if h.hop[0] != "0" {
            p.wait_line("listening", Duration::from_secs(20));
        }
        hops.push(p);
    }
    for p in hops.iter_mut().rev() {
        p.wait(Duration::from_secs(45));
    }
    for a in agents.iter_mut().rev() {
        a.terminate(Duration::from_secs(10));
    }
    logserver.terminate(Duration::from_secs(10));
    let run_time = started.elapsed();

    // The truth: where each process's zero lies on the base (the log server's start on
    // CLOCK_MONOTONIC) and its rate, from the hop's own (faked, real) pairs.
    let mut server_start = None;
    let mut start_mono: BTreeMap<u32, (u64, String)> = BTreeMap::new();
    {
        let session = StoreDir::open(&store)
            .unwrap()
            .session("multihost")
            .unwrap();
        let mut records = session.records().unwrap();
        while records.advance().unwrap() {
            let Some(r) = records.record() else { continue };
            server_start.get_or_insert(r.segment.server_start_mono_ns as i64);
            if let StoreRecord::Process { hello, .. } = r.record {
                let id = hello.identity;
                start_mono.insert(id.pid, (id.start_mono_ns, id.boot_id));
            }
        }
    }
    let server_start = server_start.expect("an empty store");

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut args = p5_merge::MergeArgs::new(&store);
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

    println!(
        "{:<5} {:<14} {:<14} {:>14} {:>12} {:>12} {:>12} {:>11} {:>11} {:>11} {:>10}",
        "host",
        "FAKETIME",
        "method",
        "true offset",
        "err @start",
        "err @end",
        "bound",
        "inj drift",
        "true drift",
        "est drift",
        "samples"
    );
    let real_boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap()
        .trim()
        .to_owned();
    let mut failures = Vec::new();
    for (h, p) in hosts.iter().zip(&hops) {
        let (pid, [(f1, r1), (f2, r2)]) = pairs(&p.lines());
        let (mono0, boot) = start_mono
            .get(&pid)
            .unwrap_or_else(|| panic!("hop-{} (pid {pid}) has no handshake", h.name));
        let c = s
            .clocks
            .iter()
            .find(|c| c.pid == pid)
            .unwrap_or_else(|| panic!("hop-{} (pid {pid}) has no clock estimate", h.name));
        // Faked clock f = f1 + rate·(real − r1); process time t = f − mono0.
        let rate = (f2 - f1) as f64 / (r2 - r1) as f64;
        let real_at = |t: f64| r1 as f64 + (*mono0 as f64 + t - f1 as f64) / rate;
        let truth = |t: f64| real_at(t) - server_start as f64;
        let t_end = (f2 - *mono0 as i64) as f64;
        let err = |t: f64| c.fit.map(t as i64) as f64 - truth(t);
        let (e0, e1) = (err(0.0), err(t_end));
        let true_drift_ppm = (1.0 / rate - 1.0) * 1e6;
        // The rate FAKETIME asked for (`xR`), as the drift merge reports (slow: positive).
        let injected_ppm = h
            .faketime
            .and_then(|f| f.split_whitespace().find_map(|w| w.strip_prefix('x')))
            .and_then(|r| r.parse::<f64>().ok())
            .map_or(0.0, |r| (1.0 / r - 1.0) * 1e6);
        let bound = c.fit.error_bound_ns;
        println!(
            "{:<5} {:<14} {:<14} {:>14.0} {:>12.0} {:>12.0} {:>12} {:>+11.3} {:>+11.3} {:>+11.3} {:>5}+{:<4}",
            h.name,
            h.faketime.unwrap_or("-"),
            c.fit.method.name(),
            truth(0.0),
            e0,
            e1,
            bound.map_or("none".into(), |b| format!("±{b}")),
            injected_ppm,
            true_drift_ppm,
            c.fit.drift_ppm(),
            c.fit.forward,
            c.fit.backward,
        );
        if h.faketime.is_some() && c.hostname != format!("p5mh-{}", h.name) {
            failures.push(format!("hop-{}: host name {:?}", h.name, c.hostname));
        }
        if h.faketime.is_some() && *boot == real_boot {
            failures.push(format!("hop-{}: reported the real boot id", h.name));
        }
        // 2 µs: how well the test itself knows the truth (pair reads, rate estimate).
        const SLACK: f64 = 2_000.0;
        match bound {
            Some(b) if e0.abs().max(e1.abs()) <= b as f64 + SLACK => {}
            Some(b) => failures.push(format!(
                "hop-{}: error {e0:.0}/{e1:.0} ns exceeds the stated bound {b} ns",
                h.name
            )),
            None => failures.push(format!(
                "hop-{}: no error bound stated ({})",
                h.name,
                c.fit.method.name()
            )),
        }
    }
    println!(
        "links: {}; messages: {} matched; causality violations: {} before tightening, {} after; run {:.1} s",
        if net.netem {
            format!("netem {}", NETEM.join(" "))
        } else {
            "no netem (unavailable)".to_owned()
        },
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
        s.matched >= 2 * REQUESTS as u64,
        "too few matched messages: {}",
        s.matched
    );
    assert_eq!(s.violations, 0, "messages received before they were sent");
    assert!(failures.is_empty(), "{failures:#?}");
    drop(hops);
    drop(agents);
    drop(logserver);
    drop(net);
}
