//! The in-memory record layout of a ring: fixed 16-byte slots, one per simple event, a few for
//! counters and communication events.
//!
//! ```text
//! slot 0 (every record)   w0 = kind << 60 | ticks since origin (60 bits, two's complement)
//!                         w1 = sensor id
//! Counter   slot 1        w0 = value                      w1 = 0
//! Comm      slot 1        w0 = end ticks (60 bits)        w1 = result (bytes or −errno)
//!           slot 2        w0 = fd                         w1 = op | peer_len << 8
//!           then ⌈peer_len / 16⌉ slots of peer endpoint bytes
//! Socket    slot 1        w0 = fd                         w1 = proto | local_len << 8 | peer_len << 16
//!           then ⌈(local_len + peer_len) / 16⌉ slots of endpoint bytes (local, then peer)
//! ```
//!
//! Endpoint bytes are already in the wire's [`Endpoint`] encoding ([`RawEndpoint`]), built
//! without allocating from a `sockaddr` or a [`SocketAddr`]. A simple event is therefore two
//! stores; the flusher turns records back into `p5_wire::Event`s.

use p5_wire::codec::Reader;
use p5_wire::{CommOp, Endpoint, SocketProto};
use std::net::SocketAddr;

/// Bits of a slot's first word that hold ticks.
pub const TICK_BITS: u32 = 60;
/// Mask of the tick bits.
pub const TICK_MASK: u64 = (1 << TICK_BITS) - 1;
/// Largest encoded endpoint: family, length varint, 108-byte unix path.
pub const MAX_ENDPOINT: usize = 112;
/// Most slots one record can take (a socket record with two unix paths).
pub const MAX_SLOTS: usize = 2 + (2 * MAX_ENDPOINT).div_ceil(16);

/// Record kinds, stored in the top four bits of slot 0 (values match the wire's event kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Scope entered.
    Enter = 0,
    /// Scope left.
    Exit = 1,
    /// Instant.
    Mark = 2,
    /// Counter value (2 slots).
    Counter = 3,
    /// Communication call (3+ slots).
    Comm = 4,
    /// Socket endpoints (2+ slots).
    Socket = 5,
}

/// One ring slot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C, align(16))]
pub struct Slot(pub [u64; 2]);

/// The first word of a record.
#[inline(always)]
pub const fn head_word(kind: Kind, rel_ticks: u64) -> u64 {
    ((kind as u64) << TICK_BITS) | (rel_ticks & TICK_MASK)
}

/// Sign-extends a 60-bit tick field.
#[inline]
pub fn ticks_of(w: u64) -> i64 {
    ((w << (64 - TICK_BITS)) as i64) >> (64 - TICK_BITS)
}

/// An endpoint already in wire encoding, in a fixed buffer (no allocation on the hot path).
#[derive(Clone, Copy)]
pub struct RawEndpoint {
    len: u8,
    buf: [u8; MAX_ENDPOINT],
}

impl std::fmt::Debug for RawEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RawEndpoint({:?})", self.as_bytes())
    }
}

impl PartialEq for RawEndpoint {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for RawEndpoint {}

impl Default for RawEndpoint {
    fn default() -> Self {
        Self::NONE
    }
}

impl RawEndpoint {
    /// No endpoint (family 0).
    pub const NONE: RawEndpoint = RawEndpoint {
        len: 1,
        buf: [0; MAX_ENDPOINT],
    };

    /// The encoded bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len as usize]
    }

    fn from_parts(family: u8, parts: &[&[u8]]) -> Self {
        let mut e = RawEndpoint::NONE;
        e.buf[0] = family;
        let mut n = 1;
        for p in parts {
            let take = p.len().min(MAX_ENDPOINT - n);
            e.buf[n..n + take].copy_from_slice(&p[..take]);
            n += take;
        }
        e.len = n as u8;
        e
    }

    /// From a Rust socket address.
    pub fn from_addr(a: &SocketAddr) -> Self {
        match a {
            SocketAddr::V4(a) => Self::from_parts(4, &[&a.ip().octets(), &a.port().to_be_bytes()]),
            SocketAddr::V6(a) => Self::from_parts(6, &[&a.ip().octets(), &a.port().to_be_bytes()]),
        }
    }

    /// A unix endpoint with this path (cut to 108 bytes).
    pub fn unix(path: &[u8]) -> Self {
        let path = &path[..path.len().min(108)];
        Self::from_parts(1, &[&[path.len() as u8], path])
    }

    /// From an optional Rust socket address.
    pub fn from_opt(a: Option<&SocketAddr>) -> Self {
        a.map_or(Self::NONE, Self::from_addr)
    }

    /// From a C `sockaddr` of `len` bytes (null or unknown families give `NONE`).
    ///
    /// # Safety
    /// `sa` must be null or point to at least `len` readable bytes.
    pub unsafe fn from_sockaddr(sa: *const libc::sockaddr, len: libc::socklen_t) -> Self {
        let len = len as usize;
        if sa.is_null() || len < std::mem::size_of::<libc::sa_family_t>() {
            return Self::NONE;
        }
        // SAFETY: the caller guarantees `len` readable bytes; we read at most that many, with
        // unaligned reads because a caller's buffer need not be aligned for the struct.
        unsafe {
            let family = std::ptr::read_unaligned(sa as *const libc::sa_family_t) as i32;
            match family {
                libc::AF_INET if len >= std::mem::size_of::<libc::sockaddr_in>() => {
                    let s = std::ptr::read_unaligned(sa as *const libc::sockaddr_in);
                    let ip = s.sin_addr.s_addr.to_ne_bytes();
                    Self::from_parts(4, &[&ip, &u16::from_be(s.sin_port).to_be_bytes()])
                }
                libc::AF_INET6 if len >= std::mem::size_of::<libc::sockaddr_in6>() => {
                    let s = std::ptr::read_unaligned(sa as *const libc::sockaddr_in6);
                    Self::from_parts(
                        6,
                        &[
                            &s.sin6_addr.s6_addr,
                            &u16::from_be(s.sin6_port).to_be_bytes(),
                        ],
                    )
                }
                libc::AF_UNIX => {
                    let off = std::mem::size_of::<libc::sa_family_t>();
                    let path_len = (len - off).min(108);
                    let path = std::slice::from_raw_parts((sa as *const u8).add(off), path_len);
                    // Pathname sockets end at the first NUL; abstract ones (leading NUL) keep
                    // their bytes.
                    let path = match path.first() {
                        Some(0) => path,
                        _ => &path[..path.iter().position(|&b| b == 0).unwrap_or(path.len())],
                    };
                    Self::from_parts(1, &[&[path.len() as u8], path])
                }
                _ => Self::NONE,
            }
        }
    }

    fn to_endpoint(bytes: &[u8]) -> Endpoint {
        Endpoint::decode(&mut Reader::new(bytes)).unwrap_or_default()
    }
}

/// A record on its way into a ring: built on the stack, copied in one go.
#[derive(Debug, Clone, Copy)]
pub struct Record {
    /// The slots; only the first `len` are used.
    pub slots: [Slot; MAX_SLOTS],
    /// Slots used.
    pub len: usize,
}

impl Record {
    fn new() -> Self {
        Record {
            slots: [Slot::default(); MAX_SLOTS],
            len: 0,
        }
    }

    fn push(&mut self, a: u64, b: u64) {
        if self.len < MAX_SLOTS {
            self.slots[self.len] = Slot([a, b]);
            self.len += 1;
        }
    }

    fn push_bytes(&mut self, parts: &[&[u8]]) {
        let mut buf = [0u8; 2 * MAX_ENDPOINT];
        let mut n = 0;
        for p in parts {
            buf[n..n + p.len()].copy_from_slice(p);
            n += p.len();
        }
        for chunk in buf[..n].chunks(16) {
            let mut s = [0u8; 16];
            s[..chunk.len()].copy_from_slice(chunk);
            let (lo, hi) = s.split_at(8);
            self.push(
                u64::from_le_bytes(lo.try_into().unwrap_or_default()),
                u64::from_le_bytes(hi.try_into().unwrap_or_default()),
            );
        }
    }

    /// The used slots.
    pub fn as_slots(&self) -> &[Slot] {
        &self.slots[..self.len]
    }

    /// A counter record.
    pub fn counter(rel: u64, sensor: u64, value: i64) -> Self {
        let mut r = Self::new();
        r.push(head_word(Kind::Counter, rel), sensor);
        r.push(value as u64, 0);
        r
    }

    /// A communication record.
    pub fn comm(
        rel_start: u64,
        rel_end: u64,
        sensor: u64,
        op: CommOp,
        fd: i64,
        result: i64,
        peer: &RawEndpoint,
    ) -> Self {
        let mut r = Self::new();
        r.push(head_word(Kind::Comm, rel_start), sensor);
        r.push(rel_end & TICK_MASK, result as u64);
        r.push(fd as u64, op as u64 | (peer.len as u64) << 8);
        r.push_bytes(&[peer.as_bytes()]);
        r
    }

    /// A socket record.
    pub fn socket(
        rel: u64,
        sensor: u64,
        fd: i64,
        proto: SocketProto,
        local: &RawEndpoint,
        peer: &RawEndpoint,
    ) -> Self {
        let mut r = Self::new();
        r.push(head_word(Kind::Socket, rel), sensor);
        r.push(
            fd as u64,
            proto as u64 | (local.len as u64) << 8 | (peer.len as u64) << 16,
        );
        r.push_bytes(&[local.as_bytes(), peer.as_bytes()]);
        r
    }
}

/// A record read back from a ring, times still in ticks since the origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded {
    /// Enter, exit or mark.
    Simple {
        /// Which.
        kind: Kind,
        /// Ticks.
        t: i64,
        /// Sensor.
        sensor: u64,
    },
    /// Counter.
    Counter {
        /// Ticks.
        t: i64,
        /// Sensor.
        sensor: u64,
        /// Value.
        value: i64,
    },
    /// Communication call.
    Comm {
        /// Start ticks.
        t: i64,
        /// End ticks.
        end: i64,
        /// Sensor.
        sensor: u64,
        /// Operation (`None` if the byte is unknown).
        op: Option<CommOp>,
        /// File descriptor.
        fd: i64,
        /// Result.
        result: i64,
        /// Peer.
        peer: Endpoint,
    },
    /// Socket endpoints.
    Socket {
        /// Ticks.
        t: i64,
        /// Sensor.
        sensor: u64,
        /// File descriptor.
        fd: i64,
        /// Protocol.
        proto: SocketProto,
        /// Local address.
        local: Endpoint,
        /// Peer address.
        peer: Endpoint,
    },
}

/// Why a record could not be read back (a producer bug or a torn write from a signal handler
/// racing its own thread); the flusher skips the rest of the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

/// Reads one record whose first slot is `first`, pulling continuation slots from `next`
/// (which returns `None` past the published head).
pub fn decode(first: Slot, next: &mut impl FnMut() -> Option<Slot>) -> Result<Decoded, Corrupt> {
    let [w0, sensor] = first.0;
    let t = ticks_of(w0);
    let kind = (w0 >> TICK_BITS) as u8;
    let mut more = || next().ok_or(Corrupt);
    Ok(match kind {
        0 => Decoded::Simple {
            kind: Kind::Enter,
            t,
            sensor,
        },
        1 => Decoded::Simple {
            kind: Kind::Exit,
            t,
            sensor,
        },
        2 => Decoded::Simple {
            kind: Kind::Mark,
            t,
            sensor,
        },
        3 => Decoded::Counter {
            t,
            sensor,
            value: more()?.0[0] as i64,
        },
        4 => {
            let [end, result] = more()?.0;
            let [fd, info] = more()?.0;
            let plen = ((info >> 8) & 0xff) as usize;
            let bytes = gather(plen, &mut more)?;
            Decoded::Comm {
                t,
                end: ticks_of(end),
                sensor,
                op: CommOp::from_u8(info as u8),
                fd: fd as i64,
                result: result as i64,
                peer: RawEndpoint::to_endpoint(&bytes[..plen]),
            }
        }
        5 => {
            let [fd, info] = more()?.0;
            let llen = ((info >> 8) & 0xff) as usize;
            let plen = ((info >> 16) & 0xff) as usize;
            let bytes = gather(llen + plen, &mut more)?;
            Decoded::Socket {
                t,
                sensor,
                fd: fd as i64,
                proto: SocketProto::from_u8(info as u8),
                local: RawEndpoint::to_endpoint(&bytes[..llen]),
                peer: RawEndpoint::to_endpoint(&bytes[llen..llen + plen]),
            }
        }
        _ => return Err(Corrupt),
    })
}

fn gather(
    n: usize,
    more: &mut impl FnMut() -> Result<Slot, Corrupt>,
) -> Result<[u8; 2 * MAX_ENDPOINT], Corrupt> {
    let mut buf = [0u8; 2 * MAX_ENDPOINT];
    if n > buf.len() {
        return Err(Corrupt);
    }
    for i in 0..n.div_ceil(16) {
        let s = more()?;
        buf[i * 16..i * 16 + 8].copy_from_slice(&s.0[0].to_le_bytes());
        buf[i * 16 + 8..i * 16 + 16].copy_from_slice(&s.0[1].to_le_bytes());
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(r: &Record) -> Decoded {
        let mut it = r.as_slots().iter().copied();
        let first = it.next().unwrap();
        let d = decode(first, &mut || it.next()).unwrap();
        assert!(it.next().is_none(), "record left slots unread");
        d
    }

    #[test]
    fn ticks_are_sign_extended() {
        assert_eq!(ticks_of(head_word(Kind::Exit, 12345)), 12345);
        assert_eq!(ticks_of(head_word(Kind::Exit, (-7i64) as u64)), -7);
        assert_eq!(head_word(Kind::Exit, 5) >> TICK_BITS, 1);
    }

    #[test]
    fn counter_round_trip() {
        let r = Record::counter(99, 7, -42);
        assert_eq!(r.len, 2);
        assert_eq!(
            round_trip(&r),
            Decoded::Counter {
                t: 99,
                sensor: 7,
                value: -42
            }
        );
    }

    #[test]
    fn comm_round_trip_inet() {
        let a: SocketAddr = "[2001:db8::1]:8080".parse().unwrap();
        let r = Record::comm(
            10,
            30,
            5,
            CommOp::SendTo,
            9,
            -11,
            &RawEndpoint::from_addr(&a),
        );
        assert_eq!(r.len, 3 + 2);
        assert_eq!(
            round_trip(&r),
            Decoded::Comm {
                t: 10,
                end: 30,
                sensor: 5,
                op: Some(CommOp::SendTo),
                fd: 9,
                result: -11,
                peer: Endpoint::Inet(a)
            }
        );
    }

    #[test]
    fn socket_round_trip_from_sockaddr() {
        // A unix path and an IPv4 address, built as C would.
        let mut un: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        un.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for (d, s) in un.sun_path.iter_mut().zip(b"/tmp/p5.sock") {
            *d = *s as libc::c_char;
        }
        let local = unsafe {
            RawEndpoint::from_sockaddr(
                &un as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
            )
        };
        let mut sin: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        sin.sin_family = libc::AF_INET as libc::sa_family_t;
        sin.sin_port = 4242u16.to_be();
        sin.sin_addr.s_addr = u32::from_ne_bytes([10, 1, 2, 3]);
        let peer = unsafe {
            RawEndpoint::from_sockaddr(
                &sin as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        let r = Record::socket(1, 2, 3, SocketProto::UnixStream, &local, &peer);
        assert_eq!(
            round_trip(&r),
            Decoded::Socket {
                t: 1,
                sensor: 2,
                fd: 3,
                proto: SocketProto::UnixStream,
                local: Endpoint::Unix(b"/tmp/p5.sock".to_vec()),
                peer: Endpoint::Inet("10.1.2.3:4242".parse().unwrap()),
            }
        );
        // Null and short sockaddrs are "none".
        let none = unsafe { RawEndpoint::from_sockaddr(std::ptr::null(), 16) };
        assert_eq!(none.as_bytes(), &[0]);
    }

    #[test]
    fn longest_record_fits() {
        let mut un: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        un.sun_family = libc::AF_UNIX as libc::sa_family_t;
        for d in un.sun_path.iter_mut() {
            *d = b'x' as libc::c_char;
        }
        let e = unsafe {
            RawEndpoint::from_sockaddr(
                &un as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
            )
        };
        let r = Record::socket(1, 2, 3, SocketProto::UnixDgram, &e, &e);
        assert!(r.len <= MAX_SLOTS);
        match round_trip(&r) {
            Decoded::Socket { local, peer, .. } => {
                assert_eq!(local, Endpoint::Unix(vec![b'x'; 108]));
                assert_eq!(peer, local);
            }
            d => panic!("unexpected {d:?}"),
        }
    }

    #[test]
    fn truncated_record_is_corrupt() {
        let r = Record::counter(1, 2, 3);
        let mut none = || None;
        assert_eq!(decode(r.slots[0], &mut none), Err(Corrupt));
        assert_eq!(decode(Slot([15 << TICK_BITS, 0]), &mut none), Err(Corrupt));
    }
}
