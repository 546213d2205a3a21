//! Who may connect: peers outside the allow-list are closed at accept, the others served.

use crate::{InProc, Peer, config, spawn_bin};
use p5_wire::frame::FrameType;
use std::io::Read as _;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Connects to `to` from the address `from` (any port).
pub fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let s = rt.block_on(async {
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.bind(format!("{from}:0").parse().unwrap()).unwrap();
        sock.connect(to).await.unwrap()
    });
    let s = s.into_std().unwrap();
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// Reads until EOF or an error; the bytes read.
fn read_to_close(mut s: TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

/// `--allow 127.0.0.1/32`: a peer at 127.0.0.2 is closed without a byte, even after it sent
/// a Hello; one at 127.0.0.1 is served as always.
#[test]
fn peers_outside_the_allow_list_are_closed_at_accept() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let server = spawn_bin(
        &store,
        &dir.path().join("ls.log"),
        &["--allow", "127.0.0.1/32"],
    );
    let mut outsider = connect_from("127.0.0.2", server.addr);
    let _ = std::io::Write::write_all(
        &mut outsider,
        &crate::hello_frame(7, "allow", p5_wire::Caps::ALL),
    );
    assert!(
        read_to_close(outsider).is_empty(),
        "nothing is sent to a refused peer"
    );
    let (p, ack) = Peer::hello(server.addr, 8, "allow");
    assert!(ack.server_run_id != 0);
    p.goodbye(0);
    let log = server.terminate();
    assert!(
        log.contains("peer not in the allow-list"),
        "the refusal is logged:\n{log}"
    );
    let s = crate::stored(&store);
    assert!(
        !s.processes.contains_key(&7),
        "the outsider's Hello was never read"
    );
    assert!(s.processes.contains_key(&8));
}

/// The default on a loopback listener admits every loopback address; the summary counts
/// refused peers.
#[test]
fn refused_peers_are_counted_and_loopback_is_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.allow = Some("10.0.0.0/8".parse().unwrap());
    let server = InProc::start(cfg);
    for _ in 0..3 {
        assert!(read_to_close(connect_from("127.0.0.1", server.addr)).is_empty());
    }
    let summary = server.stop();
    assert_eq!((summary.refused_peers, summary.connections), (3, 0));

    let dir = tempfile::tempdir().unwrap();
    let server = InProc::start(config(dir.path()));
    let mut p = Peer {
        s: connect_from("127.0.0.3", server.addr),
    };
    p.send(&crate::hello_frame(9, "lo", p5_wire::Caps::ALL));
    let (ty, _) = p.read_frame().expect("hello ack");
    assert_eq!(ty, FrameType::HelloAck as u8);
    p.goodbye(0);
    let summary = server.stop();
    assert_eq!((summary.refused_peers, summary.connections), (0, 1));
}
