//! A framed TCP link: reads whole frames (envelope checked: length limit, crc32c) from a
//! blocking socket with timeouts, and writes encoded frames. Used for the upstream
//! connection, relayed child connections and `ctl`.

use p5_wire::frame::{self, HEADER_LEN};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Largest frame accepted from a peer.
pub const MAX_FRAME: u32 = frame::MAX_FRAME_LEN;

/// Link errors.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The socket failed or closed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The peer sent bytes that are not a frame.
    #[error("bad frame from peer: {0}")]
    Garbage(#[from] p5_wire::DecodeError),
    /// The peer closed the connection.
    #[error("connection closed by peer")]
    Closed,
}

/// One received frame.
#[derive(Debug, Clone)]
pub struct Frame {
    /// Type byte.
    pub ty: u8,
    /// Body.
    pub body: Vec<u8>,
    /// The encoded frame (envelope included), for forwarding unchanged.
    pub raw: Vec<u8>,
}

/// Reads frames from a socket, keeping partial input between calls.
#[derive(Debug)]
pub struct FrameReader {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl FrameReader {
    /// Wraps a socket (its read timeout decides how long [`Self::poll`] blocks).
    pub fn new(stream: TcpStream) -> Self {
        Self {
            stream,
            buf: Vec::with_capacity(64 * 1024),
        }
    }

    /// The socket.
    pub fn get_ref(&self) -> &TcpStream {
        &self.stream
    }

    fn take_frame(&mut self) -> Result<Option<Frame>, LinkError> {
        let Some(h) = self.buf.first_chunk::<HEADER_LEN>() else {
            return Ok(None);
        };
        let (len, crc) = frame::parse_header(h, MAX_FRAME)?;
        let total = HEADER_LEN + len as usize;
        if self.buf.len() < total {
            return Ok(None);
        }
        let raw: Vec<u8> = self.buf.drain(..total).collect();
        let f = frame::check(crc, &raw[HEADER_LEN..])?;
        Ok(Some(Frame {
            ty: f.ty,
            body: f.body.to_vec(),
            raw,
        }))
    }

    /// Returns the next complete frame, or `None` if none arrived within the socket's read
    /// timeout.
    pub fn poll(&mut self) -> Result<Option<Frame>, LinkError> {
        if let Some(f) = self.take_frame()? {
            return Ok(Some(f));
        }
        let mut chunk = [0u8; 16 * 1024];
        match self.stream.read(&mut chunk) {
            Ok(0) => Err(LinkError::Closed),
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                self.take_frame()
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Ok(None)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Waits up to `timeout` for a frame.
    pub fn next_within(&mut self, timeout: Duration) -> Result<Option<Frame>, LinkError> {
        let end = Instant::now() + timeout;
        loop {
            if let Some(f) = self.poll()? {
                return Ok(Some(f));
            }
            if Instant::now() >= end {
                return Ok(None);
            }
        }
    }
}

/// Resolves and connects with a timeout (the first address that answers).
pub fn connect(addr: &str, timeout: Duration) -> io::Result<TcpStream> {
    let addrs: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
    let mut last = io::Error::new(io::ErrorKind::InvalidInput, "address resolved to nothing");
    for a in addrs {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => {
                s.set_nodelay(true)?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Encodes one frame.
pub fn encode(ty: p5_wire::FrameType, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + 1 + body.len());
    frame::encode(&mut out, ty as u8, body);
    out
}

/// Encodes a `Control` frame carrying `json`.
pub fn control_frame(json: &str) -> Vec<u8> {
    let mut body = Vec::with_capacity(json.len() + 4);
    p5_wire::codec::put_str(&mut body, json);
    encode(p5_wire::FrameType::Control, &body)
}

/// The JSON text of a `Control` (or message of an `Error`) frame body.
pub fn body_str(body: &[u8]) -> Result<String, p5_wire::DecodeError> {
    p5_wire::codec::Reader::new(body).str("control")
}

/// Writes all bytes with a bounded wait (the socket's write timeout must be set).
pub fn write_all(mut s: &TcpStream, bytes: &[u8]) -> io::Result<()> {
    s.write_all(bytes)?;
    s.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn frames_split_across_reads_and_garbage() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let t = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let f = control_frame("{\"op\":\"status\"}");
            write_all(&s, &f[..5]).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            write_all(&s, &f[5..]).unwrap();
            write_all(&s, b"\xff\xff\xff\xffgarbage!").unwrap();
        });
        let s = connect(&addr, Duration::from_secs(2)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
        let mut r = FrameReader::new(s);
        let f = r.next_within(Duration::from_secs(2)).unwrap().unwrap();
        assert_eq!(f.ty, p5_wire::FrameType::Control as u8);
        assert_eq!(body_str(&f.body).unwrap(), "{\"op\":\"status\"}");
        let e = loop {
            match r.poll() {
                Ok(Some(_)) => panic!("garbage decoded"),
                Ok(None) => continue,
                Err(e) => break e,
            }
        };
        assert!(matches!(e, LinkError::Garbage(_)), "{e}");
        t.join().unwrap();
    }
}
