//! p5-instrument end-to-end program: methods, early returns, `?`, a caught panic, a region.
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::num::ParseIntError;

struct Counter {
    n: u32,
}

impl Counter {
    fn bump(&mut self, by: u32) -> u32 {
        if by == 0 {
            return self.n;
        }
        self.n += by;
        self.n
    }
}

fn parse(s: &str) -> Result<u32, ParseIntError> {
    let v = s.trim().parse::<u32>()?;
    Ok(v * 2)
}

fn explode(x: u32) -> u32 {
    if x > 1 {
        panic!("too big");
    }
    x
}

fn datagrams() -> std::io::Result<usize> {
    let a = UdpSocket::bind("127.0.0.1:0")?;
    let b = UdpSocket::bind("127.0.0.1:0")?;
    a.send_to(b"abc", b.local_addr()?)?;
    let mut buf = [0u8; 8];
    let (n, _) = b.recv_from(&mut buf)?;
    Ok(n)
}

fn talk() -> std::io::Result<usize> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let mut s = TcpStream::connect(l.local_addr()?)?;
    let (mut peer, _) = l.accept()?;
    s.write_all(b"ping")?;
    let mut buf = [0u8; 4];
    peer.read_exact(&mut buf)?;
    let mut reply = peer.try_clone()?;
    reply.write_all(b"pong!")?;
    let mut back = [0u8; 5];
    (&s).read_exact(&mut back)?;
    Ok(buf.len() + datagrams()? - 3)
}

fn main() {
    let mut c = Counter { n: 0 };
    let mut total = 0;
    // p5:begin sum
    for s in ["1", "x", "3"] {
        total += parse(s).unwrap_or(0);
    }
    total += c.bump(2) + c.bump(0);
    // p5:end
    std::panic::set_hook(Box::new(|_| {}));
    let caught = std::panic::catch_unwind(|| explode(5)).is_err();
    println!("{total} {caught} {} {}", explode(1), talk().unwrap());
    p5_runtime::flush();
}
