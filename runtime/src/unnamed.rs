//! Names for unnamed unix sockets, so merge can tell the two ends of a socketpair apart.
//!
//! Merge pairs a stream's sends and receives by the endpoints each socket description
//! carries (a send on `(local L, peer P)` with a receive on `(local P, peer L)`). Both ends
//! of a `socketpair` — and any unix socket connected to an unnamed peer — have empty paths
//! on both sides, so every such end looked the same: a message was matched to its sender's
//! own thread, and within one thread split into half messages.
//!
//! Such an end is named after its socket inode instead, as `/proc/PID/fd` shows it, with the
//! first 8 hex digits of the boot id so that hosts of one session do not collide:
//! `socket:[48213]@3f2a9c1e`. Its own inode comes from `fstat`; its peer's from the kernel's
//! unix socket diagnostics (`NETLINK_SOCK_DIAG`, `UNIX_DIAG_PEER`: the same query `ss -x`
//! makes), or — for a `socketpair` the interposer saw created — from the other descriptor
//! ([`pair`]). Both ends derive the same two names, swapped, which is what merge pairs on;
//! merge itself is unchanged. An end whose peer cannot be found keeps its empty names.
//!
//! The netlink socket is opened, used and closed with raw system calls, so an interposer's
//! `socket` and `close` never see it; the reply is read without blocking (the kernel answers
//! within the `sendto`).

use crate::record::RawEndpoint;

/// The wire's family byte of a unix endpoint.
const UNIX: u8 = 1;
/// `SOCK_DIAG_BY_FAMILY` (linux/sock_diag.h).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `UDIAG_SHOW_PEER` (linux/unix_diag.h).
const UDIAG_SHOW_PEER: u32 = 0x4;
/// `UNIX_DIAG_PEER` attribute type.
const UNIX_DIAG_PEER: u16 = 2;

/// True for a unix endpoint with an empty path (an unnamed socket).
pub fn is_unnamed(e: &RawEndpoint) -> bool {
    e.as_bytes() == [UNIX, 0]
}

/// The socket inode of descriptor `fd`.
pub fn inode(fd: i32) -> Option<u32> {
    // SAFETY: `st` is a valid out-buffer; fstat writes only into it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return None;
    }
    u32::try_from(st.st_ino).ok()
}

/// The endpoint naming socket inode `ino` on the host with `boot_id`.
pub fn endpoint(ino: u32, boot_id: &str) -> RawEndpoint {
    let host: String = boot_id
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(8)
        .collect();
    let name = format!("socket:[{ino}]@{host}");
    RawEndpoint::unix(name.as_bytes())
}

/// The names of `fd`'s two ends — `(local, peer)` — if `fd` is a unix socket whose peer the
/// kernel can tell.
pub fn identify(fd: i32, boot_id: &str) -> Option<(RawEndpoint, RawEndpoint)> {
    let own = inode(fd)?;
    let peer = peer_inode(own)?;
    Some((endpoint(own, boot_id), endpoint(peer, boot_id)))
}

/// The names of the two ends of a socketpair `(a, b)`: `a`'s and `b`'s inodes.
pub fn pair(a: i32, b: i32, boot_id: &str) -> Option<(RawEndpoint, RawEndpoint)> {
    Some((endpoint(inode(a)?, boot_id), endpoint(inode(b)?, boot_id)))
}

/// The inode of the peer of unix socket `ino`, asked of the kernel's socket diagnostics.
pub fn peer_inode(ino: u32) -> Option<u32> {
    // SAFETY: raw system calls on a socket of our own, with buffers valid for their lengths;
    // the descriptor is closed on every path.
    unsafe {
        let fd = libc::syscall(
            libc::SYS_socket,
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        );
        if fd < 0 {
            return None;
        }
        let req = request(ino);
        let mut kernel: libc::sockaddr_nl = std::mem::zeroed();
        kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        let sent = libc::syscall(
            libc::SYS_sendto,
            fd,
            req.as_ptr(),
            req.len(),
            0,
            &raw const kernel,
            std::mem::size_of::<libc::sockaddr_nl>(),
        );
        let mut buf = [0u8; 512];
        let got = if sent == req.len() as libc::c_long {
            libc::syscall(
                libc::SYS_recvfrom,
                fd,
                buf.as_mut_ptr(),
                buf.len(),
                libc::MSG_DONTWAIT,
                std::ptr::null_mut::<libc::sockaddr>(),
                std::ptr::null_mut::<libc::socklen_t>(),
            )
        } else {
            -1
        };
        libc::syscall(libc::SYS_close, fd);
        let got = usize::try_from(got).ok()?;
        parse_peer(buf.get(..got)?, ino)
    }
}

/// A `SOCK_DIAG_BY_FAMILY` request for unix socket `ino`, showing its peer.
fn request(ino: u32) -> [u8; 40] {
    let mut m = [0u8; 40];
    m[0..4].copy_from_slice(&40u32.to_ne_bytes()); // nlmsg_len
    m[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m[6..8].copy_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    // seq and pid stay 0; then struct unix_diag_req:
    m[16] = libc::AF_UNIX as u8; // sdiag_family
    m[20..24].copy_from_slice(&u32::MAX.to_ne_bytes()); // udiag_states: all
    m[24..28].copy_from_slice(&ino.to_ne_bytes());
    m[28..32].copy_from_slice(&UDIAG_SHOW_PEER.to_ne_bytes());
    m[32..40].copy_from_slice(&[0xff; 8]); // udiag_cookie: none
    m
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The `UNIX_DIAG_PEER` of the reply about `ino` (`None`: an error, another socket, no peer,
/// or a reply cut short).
fn parse_peer(reply: &[u8], ino: u32) -> Option<u32> {
    const HDR: usize = 16;
    const MSG: usize = 16; // struct unix_diag_msg
    let len = (u32_at(reply, 0)? as usize).min(reply.len());
    // An error (`NLMSG_ERROR`: no such socket) or anything else is no answer.
    if u16_at(reply, 4)? != SOCK_DIAG_BY_FAMILY {
        return None;
    }
    if u32_at(reply, HDR + 4)? != ino {
        return None;
    }
    let mut at = HDR + MSG;
    while at + 4 <= len {
        let alen = u16_at(reply, at)? as usize;
        if alen < 4 || at + alen > len {
            return None;
        }
        if u16_at(reply, at + 2)? == UNIX_DIAG_PEER {
            return u32_at(reply, at + 4).filter(|&p| p != 0);
        }
        at += alen.next_multiple_of(4);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two ends of a socketpair: each one's peer is the other, as the kernel says, and
    /// the names derived from either end are the other's, swapped.
    #[test]
    fn a_socketpair_s_ends_name_each_other() {
        let mut sv = [0; 2];
        // SAFETY: socketpair fills both entries.
        let rc = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, sv.as_mut_ptr()) };
        assert_eq!(rc, 0);
        let (a, b) = (inode(sv[0]).unwrap(), inode(sv[1]).unwrap());
        assert_ne!(a, b);
        assert_eq!(
            peer_inode(a),
            Some(b),
            "sock_diag (the unix_diag module) is needed"
        );
        assert_eq!(peer_inode(b), Some(a));
        let boot = "3f2a9c1e-0000-4000-8000-000000000000";
        let (la, pa) = identify(sv[0], boot).unwrap();
        let (lb, pb) = identify(sv[1], boot).unwrap();
        assert_eq!((la, pa), (pb, lb));
        assert_eq!(pair(sv[0], sv[1], boot), Some((la, lb)));
        let text = String::from_utf8_lossy(la.as_bytes());
        assert!(text.ends_with(&format!("socket:[{a}]@3f2a9c1e")), "{text}");
        assert!(!is_unnamed(&la));
        // SAFETY: closing our own descriptors.
        unsafe {
            libc::close(sv[0]);
            libc::close(sv[1]);
        }
        assert_eq!(inode(sv[0]), None, "closed");
    }

    /// Replies that are errors, about another socket, cut short or malformed give no peer.
    #[test]
    fn bad_replies_give_no_peer() {
        let mut r = vec![0u8; 48];
        r[0..4].copy_from_slice(&48u32.to_ne_bytes());
        r[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        r[20..24].copy_from_slice(&7u32.to_ne_bytes());
        r[32..34].copy_from_slice(&8u16.to_ne_bytes());
        r[34..36].copy_from_slice(&UNIX_DIAG_PEER.to_ne_bytes());
        r[36..40].copy_from_slice(&9u32.to_ne_bytes());
        assert_eq!(parse_peer(&r, 7), Some(9));
        assert_eq!(parse_peer(&r, 8), None, "another socket");
        assert_eq!(parse_peer(&r[..38], 7), None, "cut short");
        let mut bad = r.clone();
        bad[32..34].copy_from_slice(&200u16.to_ne_bytes());
        assert_eq!(parse_peer(&bad, 7), None, "attribute past the end");
        let mut err = r.clone();
        err[4..6].copy_from_slice(&(libc::NLMSG_ERROR as u16).to_ne_bytes());
        assert_eq!(parse_peer(&err, 7), None);
        assert_eq!(parse_peer(&[], 7), None);
    }
}
