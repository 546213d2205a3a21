//! Kernel receive timestamps of socket reads: a clock sample is only as good as its receipt time is close to
//! the packet's arrival, and a process woken from sleep by the packet reads its clock tens of
//! microseconds late — later than the log server, which has just sent, so the two directions'
//! delays differ and the offset estimate is off by half the difference. With `SO_TIMESTAMPNS`
//! the kernel stamps each packet as it is received; [`recv`] returns how long ago that was
//! (`CLOCK_REALTIME` now, read by a raw system call so that a clock-faking `LD_PRELOAD` cannot
//! shift it, less the stamp), which the caller takes off its own clock reading.
//!
//! The runtime reads its log-server connection's acks with [`recv`] (blocking socket), the host
//! agent its uplink's acks and its children's frames (hop samples); the log server wraps it in
//! an async reader; the test relay `p5-jitter-relay` reads its frames with [`recv_packet`].
//! Linux only, as the rest of p5.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};
use std::os::fd::RawFd;

/// Asks the kernel to stamp received packets; false where it cannot.
pub fn enable(fd: RawFd) -> bool {
    let one: libc::c_int = 1;
    // SAFETY: a valid option pointer and length for an int option.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&one as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    rc == 0
}

/// `CLOCK_REALTIME` by a raw system call, ns.
fn realtime_ns() -> Option<i128> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_clock_gettime,
            libc::CLOCK_REALTIME,
            &mut ts as *mut libc::timespec,
        )
    };
    (rc == 0).then(|| ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128)
}

/// Reads into `buf` like `recv`, and returns with the byte count the age of the newest packet
/// read, ns, if the kernel stamped it (below one second: a clock step in between gives none).
pub fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
    // SAFETY: no address is asked for.
    unsafe { recv_stamped(fd, buf, std::ptr::null_mut(), 0) }
}

/// [`recv`] on a packet socket (`AF_PACKET`), with the frame's packet type (`sll_pkttype`:
/// 4 = `PACKET_OUTGOING`, a frame this host sent, seen on its way out).
pub fn recv_packet(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<u64>, u8)> {
    // SAFETY: an all-zero sockaddr_ll is valid, and the kernel writes at most its size.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    // SAFETY: `sll` outlives the call and is as long as the length given.
    let (n, age) = unsafe {
        recv_stamped(
            fd,
            buf,
            (&mut sll as *mut libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )?
    };
    Ok((n, age, sll.sll_pkttype))
}

/// [`recv`] on a datagram socket, with the sender's address (`None` for a family other than
/// IPv4 and IPv6). A datagram that arrived before the kernel turned stamping on is stamped as
/// it is read (an age near zero: a receipt later than the truth, never earlier).
pub fn recv_from(
    fd: RawFd,
    buf: &mut [u8],
) -> io::Result<(usize, Option<u64>, Option<SocketAddr>)> {
    // SAFETY: an all-zero sockaddr_storage is valid, and the kernel writes at most its size.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    // SAFETY: `ss` outlives the call and is as long as the length given.
    let (n, age) = unsafe {
        recv_stamped(
            fd,
            buf,
            (&mut ss as *mut libc::sockaddr_storage).cast(),
            size_of::<libc::sockaddr_storage>() as libc::socklen_t,
        )?
    };
    let addr = match ss.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let a: libc::sockaddr_in = unsafe { std::ptr::read(&ss as *const _ as *const _) };
            Some(SocketAddr::from((
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let a: libc::sockaddr_in6 = unsafe { std::ptr::read(&ss as *const _ as *const _) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    };
    Ok((n, age, addr))
}

/// `recvmsg` into `buf` (and the sender's address into `name`, `name_len` bytes, unless
/// null) with the age of the kernel's receive stamp.
///
/// # Safety
/// `name` is null or valid for writes of `name_len` bytes.
unsafe fn recv_stamped(
    fd: RawFd,
    buf: &mut [u8],
    name: *mut libc::c_void,
    name_len: libc::socklen_t,
) -> io::Result<(usize, Option<u64>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = [0u64; 16];
    // SAFETY: an all-zero msghdr is valid; the pointers set below outlive the call (`name`
    // by the caller's promise).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = name;
    msg.msg_namelen = name_len;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of_val(&control) as _;
    // SAFETY: msg describes valid buffers.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: the CMSG macros walk the control buffer the kernel filled, within
    // msg_controllen; the timespec is read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                stamp = Some(ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    let age = match (stamp, realtime_ns()) {
        (Some(s), Some(now)) if s > 0 && (0..1_000_000_000).contains(&(now - s)) => {
            Some((now - s) as u64)
        }
        _ => None,
    };
    Ok((n as usize, age))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    /// Bytes over loopback come with the kernel's stamp, taken before the read. (The kernel
    /// turns stamping on in a work item after the first socket asks, so the first packets may
    /// have none: a few rounds until one has.)
    #[test]
    fn a_read_returns_the_age_of_the_packet() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (rx, _) = l.accept().unwrap();
        assert!(enable(rx.as_raw_fd()));
        let mut buf = [0u8; 16];
        let age = (0..100)
            .find_map(|_| {
                tx.write_all(b"ping").unwrap();
                std::thread::sleep(std::time::Duration::from_millis(20));
                let (n, age) = recv(rx.as_raw_fd(), &mut buf).unwrap();
                assert_eq!(&buf[..n], b"ping");
                age
            })
            .expect("a kernel receive stamp");
        // The packet waited 20 ms in the socket before the read.
        assert!(age >= 19_000_000, "age {age} ns");
    }

    /// A datagram comes with its sender's address and, once stamping is on, its stamp. (Until
    /// the kernel has turned stamping on, it stamps a datagram when it is read, an age near
    /// zero: a few rounds until one waited its 20 ms.)
    #[test]
    fn a_datagram_comes_with_its_sender_and_age() {
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(enable(rx.as_raw_fd()));
        let mut buf = [0u8; 16];
        let age = (0..100)
            .find_map(|_| {
                tx.send_to(b"ping", rx.local_addr().unwrap()).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(20));
                let (n, age, from) = recv_from(rx.as_raw_fd(), &mut buf).unwrap();
                assert_eq!(&buf[..n], b"ping");
                assert_eq!(from, Some(tx.local_addr().unwrap()));
                age.filter(|&a| a >= 19_000_000)
            })
            .expect("a kernel receive stamp 20 ms before the read");
        assert!(age < 10_000_000_000, "age {age} ns");
    }
}
