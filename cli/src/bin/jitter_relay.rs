//! `p5-jitter-relay`: a user-space Ethernet bridge between two interfaces that holds every
//! frame for a random time, for testing clock synchronization under delays that vary (this
//! kernel has no `sch_netem`). Being below IP it is invisible to the hosts on either side:
//! their TCP connections keep their endpoints, so messages still match.
//!
//! A raw packet socket (`AF_PACKET`, with virtio-net headers so segmentation and checksum
//! offloads pass through) on each interface; per direction a reader stamps every frame with a
//! release time `now + hold` — `hold` uniform in `[--min-us, --max-us]`, independently per
//! frame, so frames may overtake each other as under netem's jitter — and a writer sends it on
//! the other interface then.
//! The interfaces must be up and promiscuous. Prints `relaying A <-> B` once both sockets are
//! bound; runs until killed. Needs root (CAP_NET_RAW).

use anyhow::{Context as _, bail};
use clap::Parser;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ffi::CString;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(
    version,
    about = "an Ethernet bridge that holds each frame for a random time"
)]
struct Args {
    /// One interface.
    #[arg(long)]
    left: String,
    /// The other interface.
    #[arg(long)]
    right: String,
    /// Shortest hold, µs.
    #[arg(long, default_value_t = 500)]
    min_us: u64,
    /// Longest hold, µs.
    #[arg(long, default_value_t = 3000)]
    max_us: u64,
    /// Seed of the hold times.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// xorshift64*: uniform enough for hold times, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `[lo, hi]` µs.
    fn hold(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_micros(lo + self.next() % (hi.saturating_sub(lo) + 1))
    }
}

const ETH_P_ALL: u16 = 0x0003;
const PACKET_OUTGOING: u8 = 4;

/// A raw packet socket bound to `iface`, with virtio-net headers.
fn packet_socket(iface: &str) -> anyhow::Result<OwnedFd> {
    let name = CString::new(iface)?;
    // SAFETY: plain libc calls on a socket we own; the structs are fully initialized.
    unsafe {
        let index = libc::if_nametoindex(name.as_ptr());
        if index == 0 {
            bail!("no interface {iface}");
        }
        let fd = libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW,
            i32::from(ETH_P_ALL.to_be()),
        );
        if fd < 0 {
            return Err(std::io::Error::last_os_error()).context("packet socket");
        }
        let fd = OwnedFd::from_raw_fd(fd);
        let one: libc::c_int = 1;
        if libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_VNET_HDR,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as u32,
        ) != 0
        {
            return Err(std::io::Error::last_os_error()).context("PACKET_VNET_HDR");
        }
        let mut sll: libc::sockaddr_ll = std::mem::zeroed();
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = index as i32;
        if libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        ) != 0
        {
            return Err(std::io::Error::last_os_error()).with_context(|| format!("bind {iface}"));
        }
        Ok(fd)
    }
}

/// Frames waiting for their release time, earliest first (`seq` keeps equal times in order).
type Queue = (Mutex<BinaryHeap<Reverse<(Instant, u64, Vec<u8>)>>>, Condvar);

/// Sends each queued frame on `to` at its release time.
fn release(queue: &Queue, to: &OwnedFd) {
    let (heap, ready) = queue;
    let mut q = heap.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let now = Instant::now();
        match q.peek() {
            None => q = ready.wait(q).unwrap_or_else(|e| e.into_inner()),
            Some(Reverse((due, _, _))) if *due > now => {
                let wait = *due - now;
                q = ready
                    .wait_timeout(q, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            Some(_) => {
                if let Some(Reverse((_, _, frame))) = q.pop() {
                    // SAFETY: sending our own buffer on a bound packet socket.
                    unsafe { libc::send(to.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
                }
            }
        }
    }
}

/// Reads frames arriving on `from` (not the ones sent from it) and sends each on `to` after
/// its own hold: independent holds, so frames may overtake each other, as under netem's jitter.
fn pump(from: Arc<OwnedFd>, to: Arc<OwnedFd>, mut rng: Rng, lo: u64, hi: u64) {
    let queue: Arc<Queue> = Arc::new((Mutex::new(BinaryHeap::new()), Condvar::new()));
    let q2 = queue.clone();
    std::thread::spawn(move || release(&q2, &to));
    let mut buf = vec![0u8; 70 * 1024];
    let mut seq = 0u64;
    loop {
        // SAFETY: receiving into our own buffer; `sll` is plain data.
        let (n, sll) = unsafe {
            let mut sll: libc::sockaddr_ll = std::mem::zeroed();
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            let n = libc::recvfrom(
                from.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
                (&mut sll as *mut libc::sockaddr_ll).cast(),
                &mut len,
            );
            (n, sll)
        };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if sll.sll_pkttype == PACKET_OUTGOING {
            continue;
        }
        let due = Instant::now() + rng.hold(lo, hi);
        seq += 1;
        let (heap, ready) = &*queue;
        heap.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Reverse((due, seq, buf[..n as usize].to_vec())));
        ready.notify_one();
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let left = Arc::new(packet_socket(&args.left)?);
    let right = Arc::new(packet_socket(&args.right)?);
    let (lo, hi) = (args.min_us, args.max_us.max(args.min_us));
    println!("relaying {} <-> {}", args.left, args.right);
    let (l2, r2) = (left.clone(), right.clone());
    let seed = args.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let back = std::thread::spawn(move || pump(r2, l2, Rng(seed.rotate_left(29) | 1), lo, hi));
    pump(left, right, Rng(seed), lo, hi);
    let _ = back.join();
    Ok(())
}
