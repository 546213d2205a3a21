use std::io::Write;
use std::net::{TcpListener, TcpStream};

pub fn dial(addr: &str) -> std::io::Result<TcpStream> { let _p5_guard = p5_runtime::scope(0xbd701916ae51b116);
    let mut s = p5_runtime::net::TcpStream::connect(0x6aa45a7a8ad37c0e, addr).map(p5_runtime::net::TcpStream::into_inner)?;
    s.write_all(b"hi")?;
    let t = p5_runtime::net::TcpStream::connect(0x5df499500d829871, addr).map(p5_runtime::net::TcpStream::into_inner)?;
    drop(t);
    Ok(s)
}

pub fn listen() -> std::io::Result<TcpListener> { let _p5_guard = p5_runtime::scope(0xa2147ea0ad087e1d);
    TcpListener::bind("127.0.0.1:0")
}
