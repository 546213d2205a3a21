//! A two-process request/reply program recorded through the p5 runtime, used by the merge
//! end-to-end test: `pingpong server PORT_FILE N` and `pingpong client PORT N`. Requests are
//! written in two parts and replies read in small pieces, so byte counting has work to do.

use p5_runtime::net::{TcpListener, TcpStream};
use std::io::{Read, Write};

const S_MAIN: u64 = 0xe2e0_0000_0000_0001;
const S_HANDLE: u64 = 0xe2e0_0000_0000_0002;
const S_REQUEST: u64 = 0xe2e0_0000_0000_0003;
const C_NET: u64 = 0xe2e0_0000_0000_0101;

fn read_exact(s: &mut TcpStream, n: usize, piece: usize) {
    let mut buf = vec![0u8; n];
    let mut got = 0;
    while got < n {
        let end = (got + piece).min(n);
        match s.read(&mut buf[got..end]) {
            Ok(0) | Err(_) => return,
            Ok(k) => got += k,
        }
    }
}

fn main() {
    p5_runtime::init();
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(10);
    {
        let _main = p5_runtime::scope(S_MAIN);
        match args.get(1).map(String::as_str) {
            Some("server") => {
                let l = TcpListener::p5_bind(C_NET, "127.0.0.1:0").expect("bind");
                let port = l.local_addr().expect("addr").port();
                std::fs::write(&args[2], port.to_string()).expect("port file");
                let (mut s, _) = l.accept().expect("accept");
                for _ in 0..n {
                    read_exact(&mut s, 100, 100);
                    let _h = p5_runtime::scope(S_HANDLE);
                    std::thread::sleep(std::time::Duration::from_micros(200));
                    s.write_all(&[7u8; 300]).expect("reply");
                }
            }
            Some("client") => {
                let mut s = TcpStream::p5_connect(
                    C_NET,
                    ("127.0.0.1", args[2].parse::<u16>().expect("port")),
                )
                .expect("connect");
                for _ in 0..n {
                    let _r = p5_runtime::scope(S_REQUEST);
                    s.write_all(&[1u8; 60]).expect("request");
                    s.write_all(&[2u8; 40]).expect("request");
                    read_exact(&mut s, 300, 128);
                }
            }
            _ => eprintln!("usage: pingpong server PORT_FILE N | client PORT N"),
        }
    }
    p5_runtime::flush();
}
