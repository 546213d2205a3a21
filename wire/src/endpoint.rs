//! Socket endpoints as recorded by communication events.
//!
//! ```text
//! u8 family: 0 none | 4 IPv4: 4 addr bytes, u16 BE port | 6 IPv6: 16 addr bytes, u16 BE port
//!          | 1 unix: varint len, path bytes (≤ 108)
//! ```

use crate::codec::{Reader, put_varint};
use crate::error::{DecodeError, Result};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// Longest unix socket path (sun_path).
pub const MAX_UNIX_PATH: usize = 108;

/// One end of a connection or datagram.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Endpoint {
    /// Unknown or not applicable.
    #[default]
    None,
    /// An IPv4 or IPv6 address and port.
    Inet(SocketAddr),
    /// A unix-domain socket path (may be empty for unnamed sockets).
    Unix(Vec<u8>),
}

impl Endpoint {
    /// Appends the encoding.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Endpoint::None => out.push(0),
            Endpoint::Inet(SocketAddr::V4(a)) => {
                out.push(4);
                out.extend_from_slice(&a.ip().octets());
                out.extend_from_slice(&a.port().to_be_bytes());
            }
            Endpoint::Inet(SocketAddr::V6(a)) => {
                out.push(6);
                out.extend_from_slice(&a.ip().octets());
                out.extend_from_slice(&a.port().to_be_bytes());
            }
            Endpoint::Unix(p) => {
                let p = &p[..p.len().min(MAX_UNIX_PATH)];
                out.push(1);
                put_varint(out, p.len() as u64);
                out.extend_from_slice(p);
            }
        }
    }

    /// Decodes one endpoint.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self> {
        match r.u8()? {
            0 => Ok(Endpoint::None),
            4 => {
                let ip = Ipv4Addr::from(r.array::<4>()?);
                let port = r.u16_be()?;
                Ok(Endpoint::Inet(SocketAddr::V4(SocketAddrV4::new(ip, port))))
            }
            6 => {
                let ip = Ipv6Addr::from(r.array::<16>()?);
                let port = r.u16_be()?;
                Ok(Endpoint::Inet(SocketAddr::V6(SocketAddrV6::new(
                    ip, port, 0, 0,
                ))))
            }
            1 => {
                let len = r.varint()?;
                if len > MAX_UNIX_PATH as u64 {
                    return Err(DecodeError::Invalid {
                        field: "unix path length",
                        value: len,
                    });
                }
                Ok(Endpoint::Unix(r.take(len as usize)?.to_vec()))
            }
            f => Err(DecodeError::Invalid {
                field: "endpoint family",
                value: f as u64,
            }),
        }
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::None => f.write_str("-"),
            Endpoint::Inet(a) => write!(f, "{a}"),
            Endpoint::Unix(p) => write!(f, "unix:{}", String::from_utf8_lossy(p)),
        }
    }
}
