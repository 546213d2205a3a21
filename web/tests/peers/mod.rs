//! Real peers of a real `p5 web`, for the attack tests and the soak benchmark: the server as a
//! child process under its own descriptor limit ([`Server`]), a real client that asks for one
//! page on a new connection ([`ask`]), and attackers that hold, trickle into, or pipeline on
//! hundreds or thousands of sockets, reconnecting whenever the server closes one ([`Attack`]).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Longest a real request may take before the test gives up on it (a guard against hangs,
/// not a timing assertion).
pub const PATIENCE: Duration = Duration::from_secs(10);

/// Raises this process's soft descriptor limit to its hard one (attackers hold thousands).
pub fn raise_nofile() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max.min(65536);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// Sets this process's descriptor limit (soft and hard) to `n`, as `prlimit --nofile=n:n`.
pub fn limit_nofile(n: u64) {
    let lim = libc::rlimit {
        rlim_cur: n,
        rlim_max: n,
    };
    // SAFETY: setrlimit reads the struct we pass.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    assert_eq!(rc, 0, "setrlimit: {}", std::io::Error::last_os_error());
}

/// A `p5 web` child process, killed when dropped.
pub struct Server {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its stderr so far.
    pub log: Arc<Mutex<String>>,
}

impl Server {
    /// Runs `cmd` (which must print `p5 web: http://ADDR/` on stderr once it listens) and
    /// waits for the address.
    pub fn spawn(mut cmd: Command) -> Server {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server process");
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("p5 web: http://") {
                    let addr = rest.split('/').next().unwrap_or("").to_owned();
                    let _ = tx.send(addr);
                }
                let mut l = sink.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        });
        let addr = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(a) => a.parse().expect("server address"),
            Err(_) => {
                let _ = child.kill();
                panic!("the server did not start:\n{}", log.lock().unwrap());
            }
        };
        Server { child, addr, log }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An answer: status and body.
#[derive(Debug)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// Body text.
    pub body: String,
    /// From connecting to the last byte.
    pub took: Duration,
    /// The local port of the connection (to find it in the server's log).
    pub port: u16,
}

/// Sends `request` (its head; `Connection: close` is added) on a new connection and reads the
/// whole answer; `Err` says what failed within [`PATIENCE`].
pub fn ask(addr: SocketAddr, head: &str) -> Result<Answer, String> {
    let t = Instant::now();
    let mut s = TcpStream::connect_timeout(&addr, PATIENCE).map_err(|e| format!("connect: {e}"))?;
    let left = || {
        PATIENCE
            .saturating_sub(t.elapsed())
            .max(Duration::from_millis(1))
    };
    let request = format!("{}\r\nConnection: close\r\n\r\n", head.trim_end());
    let port = s.local_addr().map(|a| a.port()).unwrap_or(0);
    s.write_all(request.as_bytes())
        .map_err(|e| format!("send: {e}"))?;
    let mut got = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        s.set_read_timeout(Some(left()))
            .map_err(|e| e.to_string())?;
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if t.elapsed() >= PATIENCE => {
                return Err(format!("no complete answer after {:?} ({e})", t.elapsed()));
            }
            Err(e) if got.is_empty() => return Err(format!("read on port {port}: {e}")),
            Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or(format!("no answer on port {port}: {text:?}"))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or(format!("bad status line: {head:?}"))?;
    Ok(Answer {
        status,
        body: body.to_owned(),
        took: t.elapsed(),
        port,
    })
}

/// The real request of the tests: the session list, which names the fixture's "cracker".
pub fn sessions(addr: SocketAddr, token: Option<&str>) -> Result<Answer, String> {
    let auth = token.map_or(String::new(), |t| format!("\r\nAuthorization: Bearer {t}"));
    ask(
        addr,
        &format!("GET /api/v1/sessions HTTP/1.1\r\nHost: {addr}{auth}"),
    )
}

/// What an attacker's sockets do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Connect and send nothing.
    Idle,
    /// Connect, send nothing, close after the given time and connect again.
    Churn(Duration),
    /// Send a POST header announcing a 1,000,000-byte body, then one byte a second.
    SlowBody,
    /// Send GET after GET and never read an answer.
    Pipeline,
}

/// What an attack did.
#[derive(Debug, Default)]
pub struct Counts {
    /// Connections made.
    pub connects: AtomicU64,
    /// Connections that failed to connect.
    pub failed: AtomicU64,
    /// Connections that ended (closed by the server, or by a churning attacker).
    pub ended: AtomicU64,
}

/// `n` sockets doing `kind` to a server until dropped, each reconnecting when it ends.
pub struct Attack {
    /// What it did so far.
    pub counts: Arc<Counts>,
    stop: Option<tokio::sync::watch::Sender<bool>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Attack {
    /// Starts the attack and returns once every socket has tried its first connection.
    pub fn start(addr: SocketAddr, kind: Kind, n: usize) -> Attack {
        let counts = Arc::new(Counts::default());
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let c = counts.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("attacker runtime");
            rt.block_on(async move {
                let tries = Arc::new(AtomicU64::new(0));
                let tasks: Vec<_> = (0..n)
                    .map(|i| {
                        let run = socket(addr, kind, i, c.clone(), tries.clone(), stopped.clone());
                        tokio::spawn(run)
                    })
                    .collect();
                while tries.load(Relaxed) < n as u64 {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let _ = ready_tx.send(());
                for t in tasks {
                    let _ = t.await;
                }
            });
        });
        let _ = ready.recv_timeout(Duration::from_secs(60));
        Attack {
            counts,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Connections made so far.
    pub fn connects(&self) -> u64 {
        self.counts.connects.load(Relaxed)
    }

    /// Connections that ended so far.
    pub fn ended(&self) -> u64 {
        self.counts.ended.load(Relaxed)
    }
}

impl Drop for Attack {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(true);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One attacking socket, reconnecting until `stop`.
async fn socket(
    addr: SocketAddr,
    kind: Kind,
    i: usize,
    counts: Arc<Counts>,
    tries: Arc<AtomicU64>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut first = true;
    while !*stop.borrow() {
        let conn =
            tokio::time::timeout(Duration::from_secs(1), tokio::net::TcpStream::connect(addr))
                .await;
        if first {
            tries.fetch_add(1, Relaxed);
            first = false;
        }
        let Ok(Ok(s)) = conn else {
            counts.failed.fetch_add(1, Relaxed);
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        counts.connects.fetch_add(1, Relaxed);
        tokio::select! {
            () = behave(s, kind, i) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        counts.ended.fetch_add(1, Relaxed);
    }
}

/// Does `kind` on `s` until the connection ends.
async fn behave(mut s: tokio::net::TcpStream, kind: Kind, i: usize) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = [0u8; 4096];
    match kind {
        Kind::Idle => while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {},
        Kind::Churn(hold) => {
            // Stagger the sockets so that some close and reopen all the time.
            let hold = hold.mul_f64(0.5 + (i % 100) as f64 / 100.0);
            let _ = tokio::time::timeout(hold, async {
                while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
            })
            .await;
        }
        Kind::SlowBody => {
            let head = "POST /api/v1/selection HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: \
                application/json\r\nContent-Length: 1000000\r\n\r\n";
            if s.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            loop {
                tokio::select! {
                    r = s.read(&mut buf) => if !matches!(r, Ok(n) if n > 0) { return },
                    () = tokio::time::sleep(Duration::from_secs(1)) => {
                        if s.write_all(b" ").await.is_err() { return }
                    }
                }
            }
        }
        Kind::Pipeline => {
            let one = "GET /api/v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
            let burst = one.repeat(64);
            while s.write_all(burst.as_bytes()).await.is_ok() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}
