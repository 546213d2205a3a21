use std::io::Write;
use std::net::{TcpListener, TcpStream};

pub fn dial(addr: &str) -> std::io::Result<TcpStream> {
    let mut s = TcpStream::connect(addr)?;
    s.write_all(b"hi")?;
    let t = std::net::TcpStream::connect(addr)?;
    drop(t);
    Ok(s)
}

pub fn listen() -> std::io::Result<TcpListener> {
    TcpListener::bind("127.0.0.1:0")
}
