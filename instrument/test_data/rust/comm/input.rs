use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::net::{self as n, IpAddr};
use std::{io, net::UdpSocket as Udp};
use std::time::Duration;

pub fn dial(addr: &str) -> io::Result<TcpStream> {
    let mut s = TcpStream::connect(addr)?;
    s.write_all(b"hi")?;
    let t: std::net::TcpStream = std::net::TcpStream::connect(addr)?;
    t.shutdown(Shutdown::Both)?;
    let sa = s.peer_addr()?;
    let _u = n::TcpStream::connect_timeout(&sa, Duration::from_secs(1))?;
    Ok(s)
}

pub fn listen() -> io::Result<TcpListener> {
    TcpListener::bind("127.0.0.1:0")
}

pub fn serve(l: &TcpListener) -> io::Result<usize> {
    let (mut peer, _) = l.accept()?;
    let mut buf = Vec::new();
    peer.read_to_end(&mut buf)?;
    for s in l.incoming() {
        drop(s?);
        break;
    }
    Ok(buf.len())
}

pub fn datagram(to: IpAddr) -> io::Result<usize> {
    let u = Udp::bind("127.0.0.1:0")?;
    let addrs = vec![std::net::TcpStream::connect(("127.0.0.1", 1))];
    drop(addrs);
    u.send_to(b"x", (to, 9))
}

pub fn local() -> Option<n::TcpStream> {
    ["127.0.0.1:1"].iter().find_map(|a| n::TcpStream::connect(a).ok())
}

pub fn next_peer(mut i: std::net::Incoming<'_>) -> Option<io::Result<TcpStream>> {
    i.next()
}

/// Stands for another crate's type built from std's socket (tokio, mio).
pub struct Async(std::net::TcpStream);

impl Async {
    pub fn from_std(s: std::net::TcpStream) -> Async {
        Async(s)
    }
}

pub fn adopt(addr: &str) -> io::Result<Async> {
    let s = TcpStream::connect(addr)?;
    Ok(Async::from_std(s))
}
