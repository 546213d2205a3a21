//! `GET` one API path from a `p5 web` started on a database (shared by the cli tests that check
//! what the viewer serves).

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::Path;
use std::process::Command;

/// `GET path` from `p5 web` on `db`; the JSON body.
pub fn web_get(db: &Path, path: &str) -> serde_json::Value {
    let mut web = Command::new(env!("CARGO_BIN_EXE_p5"))
        .args(["web", "--no-cache", "--listen", "127.0.0.1:0", "--db"])
        .arg(format!("sqlite:{}", db.display()))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(web.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    let _ = web.kill();
    let _ = web.wait();
    let body = reply.split("\r\n\r\n").nth(1).unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {reply}"))
}
