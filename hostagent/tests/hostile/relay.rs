//! A relaying agent under attack: lying headers, slow senders holding real bytes, idle
//! sockets filling its connection cap, garbage, and all of them at once, while a good child
//! records through it; and the allow-list of its listener.

use super::attack::{self, Kind, settle, settle_at};
use super::good::{GOOD_EVENTS_PER_ROUND, GOOD_ROUNDS, run_good_client, stored_events};
use crate::{Agent, LogServer, read, shared_slot, status};
use std::io::Read as _;
use std::path::Path;

/// A log server and a top agent listening for children, both in session `hostile`.
fn tree(dir: &Path, extra: &[&str]) -> (LogServer, Agent) {
    let ls = LogServer::start(&dir.join("store"), "127.0.0.1:0");
    let ls_addr = ls.addr();
    let mut args = vec![
        "--session",
        "hostile",
        "--logserver",
        ls_addr.as_str(),
        "--listen",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    let top = Agent::spawn(dir, "top", &args);
    (ls, top)
}

fn port_of(addr: &str) -> u16 {
    addr.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port")
}

/// Runs the good client through `top` and checks that it was served and every event of it
/// is in the store.
fn good_child_is_served(dir: &Path, ls: LogServer, top: Agent, what: &str) {
    let report = run_good_client(top.addr(), "good", dir);
    let log = top.log.clone();
    top.terminate();
    ls.stop();
    if report.spooled > 0 || report.acked != report.frames {
        eprintln!("agent log:\n{}", read(&log));
    }
    report.assert_served(what);
    let all = GOOD_ROUNDS * GOOD_EVENTS_PER_ROUND;
    assert_eq!(
        stored_events(&dir.join("store"), "good"),
        all,
        "every event durable"
    );
}

/// D8: four children send a Hello and all but one byte of an 8 MiB frame, one more trickles
/// its last bytes: more than the agent's whole shared budget for partial frames (24 MiB).
#[test]
fn slow_senders_holding_real_bytes_do_not_starve_a_relayed_child() {
    let _slot = shared_slot();
    let dir = tempfile::tempdir().unwrap();
    let (ls, top) = tree(dir.path(), &[]);
    let partial = attack::start(top.addr(), Kind::PartialFrame, 4, "attack");
    let trickle = attack::start(top.addr(), Kind::Trickle, 1, "attack");
    settle(&[&partial, &trickle], 5);
    good_child_is_served(dir.path(), ls, top, "beside slow senders");
    drop((partial, trickle));
}

/// D2 at an agent: 32 children claim 8 MiB frames after a Hello, 32 before one.
#[test]
fn lying_frame_headers_do_not_starve_a_relayed_child() {
    let _slot = shared_slot();
    let dir = tempfile::tempdir().unwrap();
    let (ls, top) = tree(dir.path(), &[]);
    let after = attack::start(top.addr(), Kind::LyingHeader { hello: true }, 32, "attack");
    let before = attack::start(top.addr(), Kind::LyingHeader { hello: false }, 32, "attack");
    settle(&[&after, &before], 64);
    good_child_is_served(dir.path(), ls, top, "beside lying headers");
    drop((after, before));
}

/// Idle sockets take every one of the agent's 1,024 connection slots (most without a Hello,
/// some after one) and come back as soon as they are closed.
#[test]
fn idle_sockets_filling_the_connection_cap_do_not_lock_out_a_child() {
    let _slot = shared_slot();
    let dir = tempfile::tempdir().unwrap();
    let (ls, top) = tree(dir.path(), &[]);
    let attacks = attack::mix(
        top.addr(),
        &[
            (Kind::Idle { hello: false }, 1100),
            (Kind::Idle { hello: true }, 24),
        ],
        "attack",
    );
    settle_at(port_of(top.addr()), 1024);
    good_child_is_served(dir.path(), ls, top, "with the connection cap full");
    drop(attacks);
}

/// Every attack at once, coming and going.
#[test]
fn a_mix_of_attackers_coming_and_going_does_not_starve_a_relayed_child() {
    let _slot = shared_slot();
    let dir = tempfile::tempdir().unwrap();
    let (ls, top) = tree(dir.path(), &["--max-connections", "128"]);
    let attacks = attack::mix(
        top.addr(),
        &[
            (Kind::LyingHeader { hello: true }, 8),
            (Kind::LyingHeader { hello: false }, 8),
            (Kind::PartialFrame, 4),
            (Kind::Trickle, 2),
            (Kind::Idle { hello: false }, 100),
            (Kind::Idle { hello: true }, 8),
            (Kind::Garbage, 8),
        ],
        "attack",
    );
    settle(&attacks.iter().collect::<Vec<_>>(), 138);
    good_child_is_served(dir.path(), ls, top, "beside every attack at once");
    drop(attacks);
}

/// `--allow 127.0.0.1/32`: a peer at 127.0.0.2 is closed at accept without a byte, even a
/// `ctl` request; from 127.0.0.1 the agent answers.
#[test]
fn peers_outside_the_agents_allow_list_are_closed_at_accept() {
    let _slot = shared_slot();
    let dir = tempfile::tempdir().unwrap();
    let (ls, top) = tree(dir.path(), &["--allow", "127.0.0.1/32"]);
    let addr: std::net::SocketAddr = top.addr().parse().unwrap();
    let mut outsider = connect_from("127.0.0.2", addr);
    let req = p5_hostagent::link::control_frame(r#"{"op":"status","id":1}"#);
    let _ = std::io::Write::write_all(&mut outsider, &req);
    let mut got = Vec::new();
    let _ = outsider.read_to_end(&mut got);
    assert!(got.is_empty(), "nothing is sent to a refused peer");
    assert_eq!(
        status(top.addr()).agents.len(),
        1,
        "loopback 127.0.0.1 is served"
    );
    let log = top.log.clone();
    top.terminate();
    ls.stop();
    let log = read(&log);
    assert!(log.contains("peer not in the allow-list"), "{log}");
}

/// Connects to `to` from the address `from` (any port).
fn connect_from(from: &str, to: std::net::SocketAddr) -> std::net::TcpStream {
    use std::os::fd::FromRawFd;
    let from: std::net::Ipv4Addr = from.parse().unwrap();
    // SAFETY: socket calls on a descriptor owned here; the addresses are initialised
    // sockaddr_in values of the length given.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let s = std::net::TcpStream::from_raw_fd(fd);
        let mut a: libc::sockaddr_in = std::mem::zeroed();
        a.sin_family = libc::AF_INET as libc::sa_family_t;
        a.sin_addr.s_addr = u32::from(from).to_be();
        let len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert_eq!(libc::bind(fd, (&raw const a).cast(), len), 0);
        let std::net::SocketAddr::V4(to) = to else {
            panic!("IPv4 only")
        };
        let mut b: libc::sockaddr_in = std::mem::zeroed();
        b.sin_family = libc::AF_INET as libc::sa_family_t;
        b.sin_addr.s_addr = u32::from(*to.ip()).to_be();
        b.sin_port = to.port().to_be();
        assert_eq!(libc::connect(fd, (&raw const b).cast(), len), 0);
        s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        s
    }
}

/// A guard below the attackers' own frame timeout (30 s): an agent that relays the frame only
/// once the attackers time out fails here.
const BELOW_FRAME_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// A child's StreamOpen and one `Events` frame of about 3.6 MiB (more than its allowance).
fn large_frames() -> (Vec<u8>, Vec<u8>, u64) {
    use p5_wire::data::{self, DataHeader, StreamOpen};
    let open = StreamOpen {
        header: DataHeader {
            stream: 0,
            seq: 0,
            t_p: 1,
        },
        kind_raw: 1,
        tid: 1,
        name: "big".into(),
    };
    let mut open_f = Vec::new();
    p5_wire::frame::encode(
        &mut open_f,
        p5_wire::FrameType::StreamOpen as u8,
        &open.encode_body(),
    );
    let mut e = p5_wire::event::EventEncoder::new();
    let mut t = 0;
    for _ in 0..800_000u64 {
        e.enter(t, 0x77);
        e.exit(t + 100, 0x77);
        t += 150;
    }
    let mut big = Vec::new();
    let header = DataHeader {
        stream: 0,
        seq: 1,
        t_p: 2,
    };
    data::encode_events(&mut big, header, 0, &e);
    (open_f, big, 1_600_000)
}

/// The pool goes back from stalled children to one that needs it: four partial 8 MiB frames
/// hold all of it, then a child sends a 3.6 MiB frame and is acknowledged end to end.
#[test]
fn stalled_children_give_the_pool_back_to_a_large_frame() {
    let _slot = shared_slot();
    let dir = tempfile::tempdir().unwrap();
    let (ls, top) = tree(dir.path(), &[]);
    let partial = attack::start(top.addr(), Kind::PartialFrame, 4, "attack");
    settle(&[&partial], 4);
    let mut s = std::net::TcpStream::connect(top.addr()).unwrap();
    s.set_read_timeout(Some(BELOW_FRAME_TIMEOUT)).unwrap();
    std::io::Write::write_all(&mut s, &attack::hello_frame("large")).unwrap();
    let (open, big, events) = large_frames();
    assert!(big.len() > 3 << 20);
    let mut r = p5_hostagent::link::FrameReader::trusted(s.try_clone().unwrap());
    let hello_ack = r
        .next_within(BELOW_FRAME_TIMEOUT)
        .unwrap()
        .expect("hello ack");
    assert_eq!(hello_ack.ty, p5_wire::FrameType::HelloAck as u8);
    std::io::Write::write_all(&mut s, &open).unwrap();
    std::io::Write::write_all(&mut s, &big).unwrap();
    let mut acked = 0;
    while acked < 2 {
        let f = r
            .next_within(BELOW_FRAME_TIMEOUT)
            .unwrap()
            .expect("an ack before the attackers time out");
        assert_eq!(
            f.ty,
            p5_wire::FrameType::Ack as u8,
            "{:?}",
            p5_hostagent::link::body_str(&f.body)
        );
        acked = p5_wire::data::Ack::decode_body(&f.body).unwrap().count;
    }
    drop((r, s, partial));
    let log = top.log.clone();
    top.terminate();
    ls.stop();
    let log = read(&log);
    assert!(
        log.contains("evicted: held"),
        "a stalled holder was evicted:\n{log}"
    );
    assert_eq!(stored_events(&dir.path().join("store"), "large"), events);
}
