//! Link layers: from a captured frame to the IP packet inside it.
//!
//! Every link type p5 reads is stripped by hand — the headers are fixed-size or nearly so, and
//! doing it here keeps one code path and no per-packet allocation:
//!
//! | link type | value | header |
//! |---|---|---|
//! | `NULL` (BSD loopback) | 0 | 4-byte address family in the *capturing host's* byte order |
//! | `ETHERNET` | 1 | 14 bytes, then any number of 802.1Q / 802.1ad / QinQ tags (4 bytes each) |
//! | `RAW` | 101, and 12 / 14 (`DLT_RAW` on some BSDs) | none: the IP version nibble decides |
//! | `LOOP` (OpenBSD loopback) | 108 | 4-byte address family, network byte order |
//! | `LINUX_SLL` (cooked v1) | 113 | 16 bytes, protocol at bytes 14–15 |
//! | `IPV4`, `IPV6` | 228, 229 | none |
//! | `LINUX_SLL2` (cooked v2) | 276 | 20 bytes, protocol at bytes 0–1 |
//!
//! Anything else is an unknown link type, and a frame that carries neither IPv4 nor IPv6 is a
//! non-IP frame: both are counted by the caller and skipped.

/// The IP version a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpVersion {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

/// Why a frame yielded no IP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkSkip {
    /// The link type is not one p5 reads.
    UnknownLinkType,
    /// The frame carries something other than IPv4 or IPv6 (ARP, LLDP, …).
    NotIp,
    /// The frame is shorter than its link header.
    Short,
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_VLAN: [u16; 3] = [0x8100, 0x88a8, 0x9100];

/// Address families of IPv6 in the loopback headers of the systems that write them
/// (Linux 10, OpenBSD/NetBSD 24, FreeBSD 28, macOS 30).
const AF_INET6: [u32; 4] = [10, 24, 28, 30];
const AF_INET: u32 = 2;

/// True for the link types [`ip_of`] reads.
pub fn is_known(linktype: i32) -> bool {
    matches!(
        linktype,
        0 | 1 | 12 | 14 | 101 | 108 | 113 | 228 | 229 | 276
    )
}

/// The IP packet in `frame` of link type `linktype`, with its version.
pub fn ip_of(linktype: i32, frame: &[u8]) -> Result<(IpVersion, &[u8]), LinkSkip> {
    match linktype {
        1 => ethernet(frame),
        113 => {
            let proto = be16(frame, 14).ok_or(LinkSkip::Short)?;
            by_ethertype(proto, &frame[16..])
        }
        276 => {
            let proto = be16(frame, 0).ok_or(LinkSkip::Short)?;
            if frame.len() < 20 {
                return Err(LinkSkip::Short);
            }
            by_ethertype(proto, &frame[20..])
        }
        0 => {
            let raw: [u8; 4] = frame
                .get(..4)
                .ok_or(LinkSkip::Short)?
                .try_into()
                .unwrap_or([0; 4]);
            // Host byte order of the capturing machine: a family fits in 16 bits, so a value
            // that does not was written big-endian.
            let le = u32::from_le_bytes(raw);
            let family = if le > 0xffff {
                u32::from_be_bytes(raw)
            } else {
                le
            };
            by_family(family, &frame[4..])
        }
        108 => {
            let raw: [u8; 4] = frame
                .get(..4)
                .ok_or(LinkSkip::Short)?
                .try_into()
                .unwrap_or([0; 4]);
            by_family(u32::from_be_bytes(raw), &frame[4..])
        }
        12 | 14 | 101 => by_nibble(frame),
        228 => Ok((IpVersion::V4, frame)),
        229 => Ok((IpVersion::V6, frame)),
        _ => Err(LinkSkip::UnknownLinkType),
    }
}

fn ethernet(frame: &[u8]) -> Result<(IpVersion, &[u8]), LinkSkip> {
    let mut ty = be16(frame, 12).ok_or(LinkSkip::Short)?;
    let mut at = 14;
    while ETHERTYPE_VLAN.contains(&ty) {
        ty = be16(frame, at + 2).ok_or(LinkSkip::Short)?;
        at += 4;
    }
    by_ethertype(ty, &frame[at..])
}

fn by_ethertype(ty: u16, rest: &[u8]) -> Result<(IpVersion, &[u8]), LinkSkip> {
    match ty {
        ETHERTYPE_IPV4 => Ok((IpVersion::V4, rest)),
        ETHERTYPE_IPV6 => Ok((IpVersion::V6, rest)),
        _ => Err(LinkSkip::NotIp),
    }
}

fn by_family(family: u32, rest: &[u8]) -> Result<(IpVersion, &[u8]), LinkSkip> {
    if family == AF_INET {
        Ok((IpVersion::V4, rest))
    } else if AF_INET6.contains(&family) {
        Ok((IpVersion::V6, rest))
    } else {
        Err(LinkSkip::NotIp)
    }
}

fn by_nibble(frame: &[u8]) -> Result<(IpVersion, &[u8]), LinkSkip> {
    match frame.first().map(|b| b >> 4) {
        Some(4) => Ok((IpVersion::V4, frame)),
        Some(6) => Ok((IpVersion::V6, frame)),
        Some(_) => Err(LinkSkip::NotIp),
        None => Err(LinkSkip::Short),
    }
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at + 2)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ethernet_with_two_vlan_tags() {
        let mut f = vec![0u8; 12];
        f.extend([0x88, 0xa8, 0, 1, 0x81, 0x00, 0, 2, 0x86, 0xdd, 0x60]);
        assert_eq!(ip_of(1, &f), Ok((IpVersion::V6, &[0x60u8][..])));
    }

    #[test]
    fn null_in_either_byte_order() {
        assert_eq!(ip_of(0, &[2, 0, 0, 0, 0x45]).unwrap().0, IpVersion::V4);
        assert_eq!(ip_of(0, &[0, 0, 0, 30, 0x60]).unwrap().0, IpVersion::V6);
        assert_eq!(ip_of(108, &[0, 0, 0, 2, 0x45]).unwrap().0, IpVersion::V4);
        assert_eq!(ip_of(0, &[7, 0, 0, 0]), Err(LinkSkip::NotIp));
    }

    #[test]
    fn short_and_unknown() {
        assert_eq!(ip_of(113, &[0; 10]), Err(LinkSkip::Short));
        assert_eq!(ip_of(276, &[0x08, 0, 0]), Err(LinkSkip::Short));
        assert_eq!(ip_of(147, &[0; 40]), Err(LinkSkip::UnknownLinkType));
        assert_eq!(ip_of(101, &[0x15]), Err(LinkSkip::NotIp));
        assert!(is_known(276) && !is_known(147));
    }
}
