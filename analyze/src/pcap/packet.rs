//! IP packets: from the bytes after the link header to a [`Segment`] — the few fields of a TCP
//! segment or UDP datagram the reader needs, owned and small, with no payload.
//!
//! IPv4 and IPv6 headers (with IPv6 extension headers and IPv4 authentication headers) are
//! sliced by etherparse's lax slicer, which accepts packets cut short by the capture's snap
//! length. The payload length is the one *on the wire* — taken from the IP header's length
//! field, not from the captured bytes — so a capture with a small snap length still sizes its
//! messages right. Fragments are skipped (counted): TCP and UDP over IP fragments are rare and
//! would need reassembly state.

use super::link::IpVersion;
use crate::trace::{Proto, Time};
use etherparse::{IpNumber, LaxIpSlice, TcpHeaderSlice};
use std::net::SocketAddr;

/// TCP FIN flag.
pub const FIN: u8 = 0x01;
/// TCP SYN flag.
pub const SYN: u8 = 0x02;
/// TCP RST flag.
pub const RST: u8 = 0x04;
/// TCP ACK flag.
pub const ACK: u8 = 0x10;

/// One TCP segment or UDP datagram, as read from one capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Capture time on the trace's base (the file's offset applied), in ns.
    pub ts: Time,
    /// Index of the capture it came from.
    pub file: u32,
    /// Packet number in its capture, 1-based.
    pub number: u64,
    /// TCP or UDP.
    pub proto: Proto,
    /// Sender.
    pub src: SocketAddr,
    /// Receiver.
    pub dst: SocketAddr,
    /// TCP sequence number (0 for UDP).
    pub seq: u32,
    /// TCP acknowledgment number (0 for UDP).
    pub ack: u32,
    /// TCP flags ([`FIN`], [`SYN`], [`RST`], [`ACK`]; 0 for UDP).
    pub flags: u8,
    /// Payload bytes on the wire.
    pub len: u32,
    /// A hash of the captured payload's first bytes (UDP only; tells datagrams apart when
    /// removing duplicates seen by two sniffers).
    pub digest: u64,
}

/// Why an IP packet yielded no segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketSkip {
    /// The IP or transport header is cut short or invalid.
    Malformed(&'static str),
    /// An IP fragment.
    Fragment,
    /// Neither TCP nor UDP (ICMP, …).
    OtherProtocol,
}

/// Decodes the IP packet `ip` (version as the link layer announced it) into a segment whose
/// `ts`, `file` and `number` the caller sets.
pub fn decode(version: IpVersion, ip: &[u8]) -> Result<Segment, PacketSkip> {
    let want = match version {
        IpVersion::V4 => 4,
        IpVersion::V6 => 6,
    };
    if ip.first().map(|b| b >> 4) != Some(want) {
        return Err(PacketSkip::Malformed(
            "ip version differs from the link header's",
        ));
    }
    let (slice, _ext_err) =
        LaxIpSlice::from_slice(ip).map_err(|_| PacketSkip::Malformed("bad ip header"))?;
    let payload = slice.payload();
    if payload.fragmented {
        return Err(PacketSkip::Fragment);
    }
    let (src_ip, dst_ip) = (slice.source_addr(), slice.destination_addr());
    // Header bytes before the transport header (IP header plus extensions).
    let head = (payload.payload.as_ptr() as usize).saturating_sub(ip.as_ptr() as usize);
    let wire_total = match version {
        IpVersion::V4 => usize::from(u16::from_be_bytes([ip[2], ip[3]])),
        IpVersion::V6 => 40 + usize::from(u16::from_be_bytes([ip[4], ip[5]])),
    };
    let wire_payload = if payload.incomplete {
        wire_total.saturating_sub(head)
    } else {
        payload.payload.len()
    };
    let data = payload.payload;
    match payload.ip_number {
        IpNumber::TCP => {
            let tcp = TcpHeaderSlice::from_slice(data)
                .map_err(|_| PacketSkip::Malformed("bad tcp header"))?;
            let hl = tcp.slice().len();
            let flags = tcp.slice()[13] & (FIN | SYN | RST | ACK);
            Ok(Segment {
                ts: 0,
                file: 0,
                number: 0,
                proto: Proto::Tcp,
                src: SocketAddr::new(src_ip, tcp.source_port()),
                dst: SocketAddr::new(dst_ip, tcp.destination_port()),
                seq: tcp.sequence_number(),
                ack: tcp.acknowledgment_number(),
                flags,
                len: len32(wire_payload.saturating_sub(hl)),
                digest: 0,
            })
        }
        IpNumber::UDP => {
            let h = data
                .get(..8)
                .ok_or(PacketSkip::Malformed("bad udp header"))?;
            let port = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]);
            Ok(Segment {
                ts: 0,
                file: 0,
                number: 0,
                proto: Proto::Udp,
                src: SocketAddr::new(src_ip, port(0)),
                dst: SocketAddr::new(dst_ip, port(2)),
                seq: 0,
                ack: 0,
                flags: 0,
                len: len32(wire_payload.saturating_sub(8)),
                digest: digest(&data[8..]),
            })
        }
        _ => Err(PacketSkip::OtherProtocol),
    }
}

fn len32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// FNV-1a over the first 64 bytes.
fn digest(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b.iter().take(64) {
        h = (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    #[test]
    fn tcp_payload_length_is_the_wire_length_even_when_snapped() {
        let b = PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(40000, 80, 7, 1000)
            .ack(9)
            .psh();
        let mut v = Vec::new();
        b.write(&mut v, &[1u8; 300]).unwrap();
        let s = decode(IpVersion::V4, &v[..80]).unwrap();
        assert_eq!((s.len, s.seq, s.ack, s.flags), (300, 7, 9, ACK));
        assert_eq!(s.src.to_string(), "10.0.0.1:40000");
    }

    #[test]
    fn udp_over_ipv6() {
        let b = PacketBuilder::ipv6([0; 16], [1; 16], 9).udp(53, 5353);
        let mut v = Vec::new();
        b.write(&mut v, b"hello").unwrap();
        let s = decode(IpVersion::V6, &v).unwrap();
        assert_eq!((s.proto, s.len, s.dst.port()), (Proto::Udp, 5, 5353));
        assert_eq!(
            decode(IpVersion::V4, &v),
            Err(PacketSkip::Malformed(
                "ip version differs from the link header's"
            ))
        );
    }

    #[test]
    fn garbage_is_malformed() {
        assert!(matches!(
            decode(IpVersion::V4, &[0x45, 0, 0]),
            Err(PacketSkip::Malformed(_))
        ));
        assert!(decode(IpVersion::V6, &[]).is_err());
    }
}
