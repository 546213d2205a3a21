//! `p5 record --preload` on programs built without p5 (issue 16): an unmodified C client →
//! server → backend chain (started by a shell: fork and exec; the backend forks per
//! connection; the client is exec'd by `env -i`, with an empty environment) and an unmodified Python `http.server` asked by `http.client`. Every message
//! is matched, no message is received before it was sent, the calls are named after the libc
//! function, the processes after their programs, and the server's polls are waiting states.

mod web_get;

use p5_tracedb::domain::ThreadState;
use p5_tracedb::read;
use std::path::{Path, PathBuf};
use std::process::Command;
use web_get::web_get;

const REQUESTS: usize = 40;

/// Builds the chain's three programs (plain gcc, no p5) into `dir`.
fn build_chain(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/preload/chain.c");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for role in ["client", "server", "backend"] {
        let st = Command::new(std::env::var("CC").unwrap_or_else(|_| "gcc".into()))
            .args(["-O2", "-o"])
            .arg(bin.join(role))
            .arg(format!("-DROLE_{}", role.to_uppercase()))
            .arg(&src)
            .status()
            .expect("gcc is needed (scripts/install-deps.sh installs it)");
        assert!(st.success(), "gcc failed for {role}");
    }
    bin
}

/// Runs `p5 record --preload` on `cmd` with a store in `dir`; returns stdout and stderr.
fn record(dir: &Path, session: &str, agent: bool, cmd: &[&str]) -> (String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_p5"));
    c.args(["record", "--preload", "--session", session, "--store"])
        .arg(dir.join("store"))
        .current_dir(dir);
    if !agent {
        c.arg("--no-agent");
    }
    let o = c.arg("--").args(cmd).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stdout}\n{stderr}");
    (stdout, stderr)
}

/// What the merged session holds: programs of the recorded processes, sensor names, the
/// number of waiting, sending and receiving states, and the matched messages.
struct Merged {
    programs: Vec<String>,
    sensors: Vec<String>,
    waits: usize,
    sends: usize,
    recvs: usize,
    messages: usize,
    /// (sending program, receiving program) of every matched message.
    pairs: Vec<(String, String)>,
    /// Messages received before they were sent.
    violations: usize,
}

fn merged(dir: &Path) -> Merged {
    let url = format!("sqlite:{}", dir.join("store/p5.sqlite").display());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let db = read::Reader::open(&p5_tracedb::DbUrl::parse(&url).unwrap())
            .await
            .unwrap();
        let s = read::sessions(&db).await.unwrap().remove(0);
        let processes = read::processes(&db, s.id).await.unwrap();
        let threads = read::threads(&db, s.id).await.unwrap();
        let program_of = |thread: i64| {
            let t = threads.iter().find(|t| t.id == thread)?;
            let p = processes.iter().find(|p| p.id == t.process_id)?;
            Some(p.program.clone())
        };
        let messages = read::messages(&db, s.id).await.unwrap();
        let pairs = messages
            .iter()
            .map(|m| {
                let name = |t| program_of(t).unwrap_or_default();
                (name(m.send_thread), name(m.recv_thread))
            })
            .collect();
        let violations = messages.iter().filter(|m| m.violation).count();
        let programs = processes.iter().map(|p| p.program.clone()).collect();
        let sensors = read::sensors(&db, s.id)
            .await
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .collect();
        let names = ThreadState::NAMES;
        let states = read::states(&db, s.id, names).await.unwrap();
        let count = |state: ThreadState| {
            let k = names.iter().position(|n| *n == state.name()).unwrap();
            states.iter().filter(|r| r.state as usize == k).count()
        };
        let (waits, sends, recvs) = (
            count(ThreadState::Waiting),
            count(ThreadState::Sending),
            count(ThreadState::Receiving),
        );
        Merged {
            programs,
            sensors,
            waits,
            sends,
            recvs,
            messages: messages.len(),
            pairs,
            violations,
        }
    })
}

/// The message arrows `p5 web` serves for session 1 of `db` (its `/messages` API).
fn web_messages(db: &Path) -> Vec<serde_json::Value> {
    web_get(db, "/api/v1/sessions/1/messages")["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The number after `label` on the summary line that starts with it.
fn number_after(stdout: &str, label: &str) -> Option<u64> {
    let at = stdout.find(label)? + label.len();
    stdout[at..]
        .split(|c: char| !c.is_ascii_digit())
        .find(|s| !s.is_empty())?
        .parse()
        .ok()
}

#[test]
fn an_unmodified_c_chain_is_recorded_with_every_message_matched() {
    let dir = tempfile::tempdir().unwrap();
    let bin = build_chain(dir.path());
    let script = format!(
        "{b}/backend pb & {b}/server ps pb & env -i {b}/client ps {REQUESTS}; wait",
        b = bin.display()
    );
    let (stdout, stderr) = record(dir.path(), "chain", false, &["sh", "-c", &script]);
    assert!(
        stdout.contains(&format!("client: {REQUESTS} requests, {REQUESTS} replies")),
        "the client's own account: {stdout}"
    );
    // Four messages per request: client → server → backend → server → client.
    let n = 4 * REQUESTS;
    assert!(
        stdout.contains(&format!(
            "messages: {n} matched, 0 sends and 0 receives unmatched\n"
        )),
        "{stdout}\n{stderr}"
    );
    assert!(stdout.contains("connections: 2\n"), "{stdout}");
    assert_eq!(
        number_after(&stdout, "violations from the samples alone, "),
        Some(0),
        "{stdout}"
    );
    // The shell started the programs and sent nothing: said so.
    assert!(stderr.contains("sh (pid"), "{stderr}");
    let m = merged(dir.path());
    assert_eq!(m.messages, n);
    assert_eq!(m.violations, 0);
    let between = |a: &str, b: &str| m.pairs.iter().filter(|p| p.0 == a && p.1 == b).count();
    assert_eq!(between("client", "server"), REQUESTS);
    assert_eq!(between("server", "backend"), REQUESTS);
    assert_eq!(between("backend", "server"), REQUESTS);
    assert_eq!(between("server", "client"), REQUESTS);
    for p in ["client", "server", "backend"] {
        assert!(m.programs.iter().any(|x| x == p), "{p}: {:?}", m.programs);
    }
    // The backend's parent accepted; its forked child answered: both recorded.
    let backends = m.programs.iter().filter(|p| *p == "backend").count();
    assert_eq!(backends, 2, "{:?}", m.programs);
    for call in [
        "send", "recv", "read", "write", "readv", "writev", "poll", "accept", "connect",
    ] {
        assert!(
            m.sensors.iter().any(|s| s == call),
            "{call}: {:?}",
            m.sensors
        );
    }
    assert!(m.waits >= REQUESTS, "the server's polls: {} waits", m.waits);
    // What the viewer draws: every send call a sending state, every receive a receiving one.
    assert!(m.sends >= n && m.recvs >= n, "{} / {}", m.sends, m.recvs);

    // The viewer's API draws an arrow for every message.
    let arrows = web_messages(&dir.path().join("store/p5.sqlite"));
    assert_eq!(arrows.len(), n, "arrows");
    assert!(
        arrows
            .iter()
            .all(|a| a["violation"] == false && a["send_thread"] != a["recv_thread"])
    );

    // Black-box path inference on the recorded session finds the chain the client describes:
    // every request is one client>server(backend) instance.
    let db = format!("sqlite:{}", dir.path().join("store/p5.sqlite").display());
    let o = Command::new(env!("CARGO_BIN_EXE_p5"))
        .args([
            "analyze",
            "nesting",
            "--db",
            &db,
            "--session",
            "chain",
            "--node",
            "program",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let row = text
        .lines()
        .find(|l| l.trim_end().ends_with(" client>server(backend)"))
        .unwrap_or_else(|| panic!("no client>server(backend) pattern: {text}"));
    let count: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(count.get(1), Some(&REQUESTS.to_string().as_str()), "{text}");
}

const PY_REQUESTS: usize = 20;

#[test]
fn an_unmodified_python_http_server_and_client_match_every_message() {
    let dir = tempfile::tempdir().unwrap();
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/preload/http_pair.py");
    std::fs::write(dir.path().join("hello.txt"), "hello from http.server\n").unwrap();
    let n = PY_REQUESTS.to_string();
    let (stdout, stderr) = record(
        dir.path(),
        "http",
        true,
        &["python3", here.to_str().unwrap(), &n],
    );
    assert!(
        stdout.contains(&format!(
            "http_pair: {PY_REQUESTS} requests, {PY_REQUESTS} ok"
        )),
        "{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains(" 0 sends and 0 receives unmatched\n"),
        "{stdout}\n{stderr}"
    );
    assert_eq!(
        number_after(&stdout, "connections: "),
        Some(PY_REQUESTS as u64)
    );
    assert_eq!(
        number_after(&stdout, "violations from the samples alone, "),
        Some(0),
        "{stdout}"
    );
    let m = merged(dir.path());
    assert_eq!(m.violations, 0);
    // Each exchange is at least a request and a response.
    assert!(m.messages >= 2 * PY_REQUESTS, "{} messages", m.messages);
    // Named after what the interpreter runs: the script and the module.
    let mut pythons: Vec<&str> = m
        .programs
        .iter()
        .map(String::as_str)
        .filter(|p| *p != "hostagent")
        .collect();
    pythons.sort_unstable();
    assert_eq!(pythons, ["http.server", "http_pair.py"], "{:?}", m.programs);
    for call in ["send", "recv", "accept4", "connect"] {
        assert!(
            m.sensors.iter().any(|s| s == call),
            "{call}: {:?}",
            m.sensors
        );
    }
    assert!(m.waits > 0, "serve_forever's polls");
}

#[test]
fn nginx_proxying_to_python_is_matched_in_both_directions() {
    let have = Command::new("sh")
        .args([
            "-c",
            "command -v nginx >/dev/null || test -x /usr/sbin/nginx",
        ])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        have,
        "nginx is needed (scripts/install-deps.sh installs nginx-light)"
    );
    let dir = tempfile::tempdir().unwrap();
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/preload/nginx_pair.py");
    std::fs::write(dir.path().join("hello.txt"), "hello from http.server\n").unwrap();
    let n = PY_REQUESTS.to_string();
    let (stdout, stderr) = record(
        dir.path(),
        "nginx",
        false,
        &["python3", here.to_str().unwrap(), &n],
    );
    assert!(
        stdout.contains(&format!(
            "nginx_pair: {PY_REQUESTS} requests, {PY_REQUESTS} ok"
        )),
        "{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains(" 0 sends and 0 receives unmatched"),
        "{stdout}\n{stderr}"
    );
    let m = merged(dir.path());
    assert_eq!(m.violations, 0);
    let nginx = |p: &str| p.starts_with("nginx");
    let python = |p: &str| p == "nginx_pair.py" || p == "http.server";
    let count = |f: &dyn Fn(&(String, String)) -> bool| m.pairs.iter().filter(|p| f(p)).count();
    // Each request: client → nginx → backend, and the response back the same way.
    let client_to_nginx = count(&|p| python(&p.0) && nginx(&p.1));
    let nginx_to_backend = count(&|p| nginx(&p.0) && python(&p.1));
    assert!(client_to_nginx >= 2 * PY_REQUESTS, "{:?}", m.pairs);
    assert!(nginx_to_backend >= 2 * PY_REQUESTS, "{:?}", m.pairs);
    for call in ["epoll_wait", "accept4", "recv", "connect"] {
        assert!(
            m.sensors.iter().any(|s| s == call),
            "{call}: {:?}",
            m.sensors
        );
    }
}

/// A statically linked program cannot be interposed: `p5 record --preload` says so before
/// the run and, when it recorded nothing, after it.
#[test]
fn a_static_binary_is_reported_as_not_interposable() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("pair.c");
    std::fs::write(
        &src,
        "#include <sys/socket.h>\n#include <unistd.h>\n\
         int main(void) { int sv[2]; char b[4] = \"ping\";\n\
         if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return 1;\n\
         if (send(sv[0], b, 4, 0) != 4 || recv(sv[1], b, 4, 0) != 4) return 1;\n\
         return 0; }\n",
    )
    .unwrap();
    let exe = dir.path().join("pair");
    let st = Command::new("gcc")
        .args(["-static", "-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(
        st.success(),
        "gcc -static failed (libc6-dev provides libc.a)"
    );
    let (_, stderr) = record(dir.path(), "static", false, &[exe.to_str().unwrap()]);
    assert!(
        stderr.contains("WARNING: pair cannot be recorded with --preload: it is statically linked"),
        "{stderr}"
    );
    assert!(
        stderr.contains("sent nothing the preload saw; it is statically linked"),
        "{stderr}"
    );
}

#[test]
fn file_and_pipe_io_gives_the_same_results_with_the_preload() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("fileio");
    let st = Command::new("gcc")
        .args(["-O2", "-pthread", "-o"])
        .arg(&exe)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/preload/fileio.c"))
        .status()
        .unwrap();
    assert!(st.success(), "gcc failed");
    let d = dir.path().to_str().unwrap();
    let bare = Command::new(&exe)
        .args([&format!("{d}/bare.txt"), d])
        .status()
        .unwrap();
    assert!(bare.success());
    let (stdout, _) = record(
        dir.path(),
        "fileio",
        false,
        &[exe.to_str().unwrap(), &format!("{d}/pre.txt"), d],
    );
    let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).unwrap();
    let (bare, pre) = (read("bare.txt"), read("pre.txt"));
    assert!(
        bare.contains("read closed -1 Bad file descriptor"),
        "{bare}"
    );
    assert!(
        bare.contains("read empty pipe -1 Resource temporarily"),
        "{bare}"
    );
    assert_eq!(pre, bare);
    // The socket calls were recorded, in both rounds.
    let m = merged(dir.path());
    assert!(
        m.sensors.iter().any(|s| s == "write"),
        "{:?}\n{stdout}",
        m.sensors
    );
    assert_eq!(m.sends, 2, "{stdout}");
}
