//! What clock pings over UDP cost: a log server in this process, one client connection that
//! asked for them, and 2,000 datagram pings a second for 5 s (the runtime's dense rate),
//! each pong read with its kernel stamp — against 5 s of the same connection idle. Prints the
//! CPU time per ping (client, server and store writer together) and the share of a core at
//! that rate. `cargo run --release -p p5-logserver --example datagram_cost`.

use p5_logserver::{Server, ServerConfig};
use p5_wire::data::Ping;
use p5_wire::datagram::{DatagramPing, DatagramPong};
use p5_wire::frame::{self, FrameType};
use p5_wire::hello::{Caps, Hello, Identity};
use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

const RUN: Duration = Duration::from_secs(5);
const INTERVAL: Duration = Duration::from_micros(500);

/// User + system CPU time of this process, s.
fn cpu_s() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn main() {
    let dir = tempfile::tempdir().expect("a temporary store");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let config = ServerConfig {
        listen: "127.0.0.1:0".into(),
        store: dir.path().to_path_buf(),
        ..ServerConfig::default()
    };
    let server = rt.block_on(Server::bind(config)).expect("bind");
    let addr = server.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = rt.spawn(server.run(async move {
        let _ = stopped.await;
    }));

    let uid = 0xc057;
    let hello = Hello {
        version: p5_wire::PROTOCOL_VERSION,
        caps: Caps::ALL,
        identity: Identity {
            process_uid: uid,
            session: "cost".into(),
            ..Identity::default()
        },
    };
    let mut tcp = TcpStream::connect(addr).expect("connect");
    let mut f = Vec::new();
    frame::encode(&mut f, FrameType::Hello as u8, &hello.encode_body());
    tcp.write_all(&f).expect("hello");
    let mut head = [0u8; frame::HEADER_LEN];
    tcp.read_exact(&mut head).expect("hello ack");
    let (len, _) = frame::parse_header(&head, 1 << 16).expect("a frame");
    let mut body = vec![0u8; len as usize];
    tcp.read_exact(&mut body).expect("hello ack body");

    let udp = UdpSocket::bind("127.0.0.1:0").expect("udp");
    udp.connect(addr).expect("udp connect");
    udp.set_nonblocking(true).expect("non-blocking");
    p5_rxstamp::enable(udp.as_raw_fd());
    let origin = Instant::now();

    let c0 = cpu_s();
    std::thread::sleep(RUN);
    let idle = cpu_s() - c0;

    let c1 = cpu_s();
    let (mut sent, mut pongs) = (0u64, 0u64);
    let mut buf = [0u8; 64];
    let mut next = Instant::now();
    let end = next + RUN;
    while next < end {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        while let Ok((n, _)) = p5_rxstamp::recv(udp.as_raw_fd(), &mut buf) {
            pongs += DatagramPong::decode(&buf[..n]).is_ok() as u64;
        }
        let ping = DatagramPing {
            process_uid: uid,
            ping: Ping {
                t_p: origin.elapsed().as_nanos() as u64,
                echo_t_s: 0,
                echo_t_p: 0,
            },
        };
        sent += udp.send(&ping.encode()).is_ok() as u64;
        next += INTERVAL;
    }
    std::thread::sleep(Duration::from_millis(50));
    while let Ok((n, _)) = p5_rxstamp::recv(udp.as_raw_fd(), &mut buf) {
        pongs += DatagramPong::decode(&buf[..n]).is_ok() as u64;
    }
    let busy = cpu_s() - c1;
    drop(tcp);
    let _ = stop.send(());
    let _ = rt.block_on(task);

    let per_ping_us = (busy - idle) / sent.max(1) as f64 * 1e6;
    println!(
        "{sent} datagram pings in {:.1} s, {pongs} pongs; CPU {busy:.3} s against {idle:.3} s idle: \
         {per_ping_us:.1} µs a ping (client, server and store), {:.1} % of a core at {:.0} a second",
        RUN.as_secs_f64(),
        per_ping_us * 1e-4 / INTERVAL.as_secs_f64(),
        1.0 / INTERVAL.as_secs_f64()
    );
}
