//! Clock pings over UDP: a ping travels in its own datagram, so a fast one is not held up
//! behind a slow one the way frames of one TCP connection are, and its kernel receive stamp
//! is its own. Where delays vary by milliseconds a TCP connection yields about one clean
//! two-way sample per round trip; datagrams can go many per round trip, each clean (issue 22).
//!
//! ```text
//! DatagramPing: "P5pi" | u64 process_uid | Ping body (u64 t_p | u64 echo_t_s | u64 echo_t_p)
//! DatagramPong: "P5po" | u64 process_uid | u64 t_p (the ping's) | u64 t_s
//! ```
//!
//! A client sends them to the address of its log-server connection when the server accepted
//! [`crate::Caps::DATAGRAM_PINGS`]; the server answers each ping of a process it has a
//! connection from with a pong (its time at send), and records the ping as it records a `Ping`
//! frame. A pong carries its ping's `t_p`, so the client knows each round trip exactly. The
//! echo of a datagram ping names a pong. Decoders ignore appended bytes.

use crate::codec::Reader;
use crate::data::Ping;
use crate::error::{DecodeError, Result};

/// First bytes of a [`DatagramPing`].
pub const PING_MAGIC: &[u8; 4] = b"P5pi";
/// First bytes of a [`DatagramPong`].
pub const PONG_MAGIC: &[u8; 4] = b"P5po";
/// Size of an encoded [`DatagramPing`].
pub const PING_LEN: usize = 36;
/// Size of an encoded [`DatagramPong`].
pub const PONG_LEN: usize = 28;

/// A ping in a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatagramPing {
    /// The pinging process (its `Hello`'s `process_uid`).
    pub process_uid: u64,
    /// Send time and echo, as in a `Ping` frame.
    pub ping: Ping,
}

/// The server's answer to a [`DatagramPing`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatagramPong {
    /// The process the ping came from.
    pub process_uid: u64,
    /// The ping's send time (the client's clock).
    pub t_p: u64,
    /// Server-relative time at send.
    pub t_s: u64,
}

fn magic(r: &mut Reader<'_>, want: &[u8; 4]) -> Result<()> {
    let found: [u8; 4] = r.array()?;
    if &found != want {
        return Err(DecodeError::BadMagic {
            found: found.to_vec(),
        });
    }
    Ok(())
}

impl DatagramPing {
    /// Encodes the datagram.
    pub fn encode(&self) -> [u8; PING_LEN] {
        let mut b = [0u8; PING_LEN];
        b[..4].copy_from_slice(PING_MAGIC);
        b[4..12].copy_from_slice(&self.process_uid.to_le_bytes());
        b[12..].copy_from_slice(&self.ping.encode_body());
        b
    }

    /// Decodes a datagram.
    pub fn decode(datagram: &[u8]) -> Result<Self> {
        let mut r = Reader::new(datagram);
        magic(&mut r, PING_MAGIC)?;
        let process_uid = r.u64()?;
        let ping = Ping::decode_body(&r.array::<24>()?)?;
        Ok(DatagramPing { process_uid, ping })
    }
}

impl DatagramPong {
    /// Encodes the datagram.
    pub fn encode(&self) -> [u8; PONG_LEN] {
        let mut b = [0u8; PONG_LEN];
        b[..4].copy_from_slice(PONG_MAGIC);
        b[4..12].copy_from_slice(&self.process_uid.to_le_bytes());
        b[12..20].copy_from_slice(&self.t_p.to_le_bytes());
        b[20..].copy_from_slice(&self.t_s.to_le_bytes());
        b
    }

    /// Decodes a datagram.
    pub fn decode(datagram: &[u8]) -> Result<Self> {
        let mut r = Reader::new(datagram);
        magic(&mut r, PONG_MAGIC)?;
        Ok(DatagramPong {
            process_uid: r.u64()?,
            t_p: r.u64()?,
            t_s: r.u64()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_round_trip_and_bad_ones_are_errors() {
        let p = DatagramPing {
            process_uid: 0x0123_4567_89ab_cdef,
            ping: Ping {
                t_p: 1,
                echo_t_s: 2,
                echo_t_p: 3,
            },
        };
        let bytes = p.encode();
        assert_eq!(DatagramPing::decode(&bytes), Ok(p));
        // Appended bytes are ignored; a short one or another magic is an error.
        let mut longer = bytes.to_vec();
        longer.extend_from_slice(b"later");
        assert_eq!(DatagramPing::decode(&longer), Ok(p));
        for n in 0..PING_LEN {
            assert!(DatagramPing::decode(&bytes[..n]).is_err(), "{n} bytes");
        }
        let pong = DatagramPong {
            process_uid: 7,
            t_p: 8,
            t_s: 9,
        };
        assert_eq!(DatagramPong::decode(&pong.encode()), Ok(pong));
        assert!(matches!(
            DatagramPing::decode(&pong.encode()),
            Err(DecodeError::BadMagic { .. })
        ));
        assert!(DatagramPong::decode(&bytes).is_err());
    }
}
