use std::io::{Read, Write};
use p5_runtime::net::compat::{Shutdown, TcpListener, TcpStream};
use p5_runtime::net::compat::{self as n, IpAddr};
use {std::io, p5_runtime::net::compat::UdpSocket as Udp};
use std::time::Duration;

pub fn dial(addr: &str) -> io::Result<TcpStream> { let _p5_guard = p5_runtime::scope(0xbd701916ae51b116);
    let mut s = TcpStream::p5_connect(0x6aa45a7a8ad37c0e, addr)?;
    s.write_all(b"hi")?;
    let t: p5_runtime::net::compat::TcpStream = p5_runtime::net::compat::TcpStream::p5_connect(0x5df499500d829871, addr)?;
    t.shutdown(Shutdown::Both)?;
    let sa = s.peer_addr()?;
    let _u = n::TcpStream::p5_connect_timeout(0x8401dccf8571dd48, &sa, Duration::from_secs(1))?;
    Ok(s)
}

pub fn listen() -> io::Result<TcpListener> { let _p5_guard = p5_runtime::scope(0xa2147ea0ad087e1d);
    TcpListener::p5_bind(0x41ac39ffbb54d2a9, "127.0.0.1:0")
}

pub fn serve(l: &TcpListener) -> io::Result<usize> { let _p5_guard = p5_runtime::scope(0x770bd67a273478e7);
    let (mut peer, _) = l.accept()?;
    let mut buf = Vec::new();
    peer.read_to_end(&mut buf)?;
    for s in l.incoming() {
        drop(s?);
        break;
    }
    Ok(buf.len())
}

pub fn datagram(to: IpAddr) -> io::Result<usize> { let _p5_guard = p5_runtime::scope(0x403528ca338438c5);
    let u = Udp::p5_bind(0xcfed0ce7a7b1bb41, "127.0.0.1:0")?;
    let addrs = vec![p5_runtime::net::compat::TcpStream::connect(("127.0.0.1", 1))];
    drop(addrs);
    u.send_to(b"x", (to, 9))
}

pub fn local() -> Option<n::TcpStream> { let _p5_guard = p5_runtime::scope(0x234e9f50cd8a822b);
    ["127.0.0.1:1"].iter().find_map(|a| n::TcpStream::p5_connect(0x6d695fa505226f63, a).ok())
}

pub fn next_peer(mut i: p5_runtime::net::compat::Incoming<'_>) -> Option<io::Result<TcpStream>> { let _p5_guard = p5_runtime::scope(0x0cc79368dc598938);
    i.next()
}

/// Stands for another crate's type built from std's socket (tokio, mio).
pub struct Async(p5_runtime::net::compat::TcpStream);

impl Async {
    pub fn from_std(s: p5_runtime::net::compat::TcpStream) -> Async { let _p5_guard = p5_runtime::scope(0xf20dc015eb5e784c);
        Async(s)
    }
}

pub fn adopt(addr: &str) -> io::Result<Async> { let _p5_guard = p5_runtime::scope(0xa83555e2db02fa98);
    let s = TcpStream::p5_connect(0x83028694050a18ec, addr)?;
    Ok(Async::from_std((s).into()))
}
