//! `p5-jitter-relay`: a user-space Ethernet bridge between two interfaces that holds every
//! frame for a random time, for testing clock synchronization under delays that vary (this
//! kernel has no `sch_netem`). Being below IP it is invisible to the hosts on either side:
//! their TCP connections keep their endpoints, so messages still match.
//!
//! A raw packet socket (`AF_PACKET`, with virtio-net headers so segmentation and checksum
//! offloads pass through) on each interface; per direction a reader stamps every frame with a
//! release time `arrival + hold` — `hold` uniform in `[--min-us, --max-us]`, independently per
//! frame, so frames may overtake each other as under netem's jitter — and a writer sends it on
//! the other interface then.
//!
//! It is test equipment, so the hold is meant to be exact: the arrival is the kernel's receive
//! stamp (`SO_TIMESTAMPNS`), not the reader's wake-up; the threads run at real-time priority
//! (`SCHED_FIFO`, where allowed: a loaded machine otherwise delays a wake-up by milliseconds);
//! the writer sleeps until 60 µs before the release time and spins the rest. Every 2 s each
//! direction prints to stderr how late its frames went out (since the start).
//! The interfaces must be up and promiscuous. Prints `relaying A <-> B` once both sockets are
//! bound; runs until killed. Needs root (CAP_NET_RAW).

use anyhow::{Context as _, bail};
use clap::Parser;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ffi::CString;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
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

    /// Uniform in `[lo, hi]` µs, to the nanosecond.
    fn hold(&mut self, lo: u64, hi: u64) -> Duration {
        let span = hi.saturating_sub(lo) * 1000 + 1;
        Duration::from_nanos(lo * 1000 + self.next() % span)
    }
}

const ETH_P_ALL: u16 = 0x0003;
const PACKET_OUTGOING: u8 = 4;
/// How long before a frame's release time the writer stops sleeping and spins.
const SPIN: Duration = Duration::from_micros(60);
/// Real-time priority of the relay's threads (below the kernel's own threaded interrupts, 50).
const RT_PRIORITY: i32 = 40;

/// A raw packet socket bound to `iface`, with virtio-net headers and kernel receive stamps.
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
        for (opt_level, opt) in [
            (libc::SOL_PACKET, libc::PACKET_VNET_HDR),
            (libc::SOL_SOCKET, libc::SO_TIMESTAMPNS),
        ] {
            let one: libc::c_int = 1;
            if libc::setsockopt(
                fd.as_raw_fd(),
                opt_level,
                opt,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as u32,
            ) != 0
            {
                return Err(std::io::Error::last_os_error())
                    .with_context(|| format!("socket option {opt}"));
            }
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

/// Puts the calling thread at real-time priority with no timer slack; false if not allowed.
fn realtime() -> bool {
    let p = libc::sched_param {
        sched_priority: RT_PRIORITY,
    };
    // SAFETY: plain system calls on the calling thread with a valid parameter.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
        libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) == 0
    }
}

/// One received frame: its length, whether the kernel saw it leave (not arrive), and its
/// age (now less the kernel's receive stamp), if stamped.
struct Received {
    len: usize,
    outgoing: bool,
    age: Option<Duration>,
}

/// Reads one frame into `buf` with its kernel receive stamp.
fn receive(fd: &OwnedFd, buf: &mut [u8]) -> std::io::Result<Received> {
    let (len, age, pkttype) = p5_rxstamp::recv_packet(fd.as_raw_fd(), buf)?;
    Ok(Received {
        len,
        outgoing: pkttype == PACKET_OUTGOING,
        age: age.map(Duration::from_nanos),
    })
}

/// Frames waiting for their release time, earliest first (`seq` keeps equal times in order).
type Queue = (Mutex<BinaryHeap<Reverse<(Instant, u64, Vec<u8>)>>>, Condvar);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How late frames went out: a histogram in µs (the last bucket takes everything beyond).
struct Lateness {
    label: String,
    counts: Vec<u64>,
    unstamped: u64,
    max: Duration,
    last_report: Instant,
}

impl Lateness {
    fn new(label: String) -> Self {
        Lateness {
            label,
            counts: vec![0; 10_001],
            unstamped: 0,
            max: Duration::ZERO,
            last_report: Instant::now(),
        }
    }

    fn add(&mut self, late: Duration) {
        let us = (late.as_micros() as usize).min(self.counts.len() - 1);
        self.counts[us] += 1;
        self.max = self.max.max(late);
        if self.last_report.elapsed() >= Duration::from_secs(2) {
            self.last_report = Instant::now();
            eprintln!("{}", self.report());
        }
    }

    /// The quantile `q` in whole µs (the bucket's upper edge).
    fn quantile(&self, q: f64) -> usize {
        let n: u64 = self.counts.iter().sum();
        let want = ((n as f64 * q).ceil() as u64).max(1);
        let mut seen = 0;
        for (us, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return us + 1;
            }
        }
        self.counts.len()
    }

    fn report(&self) -> String {
        let n: u64 = self.counts.iter().sum();
        format!(
            "{}: {n} frames, released late by < {} µs (median), < {} µs (90 %), < {} µs (99 %), \
             < {} µs (99.9 %), at most {:.1} µs; {} without a kernel receive stamp",
            self.label,
            self.quantile(0.5),
            self.quantile(0.9),
            self.quantile(0.99),
            self.quantile(0.999),
            self.max.as_secs_f64() * 1e6,
            self.unstamped
        )
    }
}

/// Sends each queued frame on `to` at its release time: sleeps until [`SPIN`] before it, then
/// spins (a wake-up from a timer is late by up to tens of µs, a spin is not).
fn release(queue: &Queue, to: &OwnedFd, late: &Mutex<Lateness>) {
    let (heap, ready) = queue;
    loop {
        let next = {
            let mut q = lock(heap);
            loop {
                let now = Instant::now();
                match q.peek() {
                    None => q = ready.wait(q).unwrap_or_else(|e| e.into_inner()),
                    Some(Reverse((due, _, _))) if *due > now + SPIN => {
                        let wait = *due - SPIN - now;
                        q = ready
                            .wait_timeout(q, wait)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                    }
                    Some(_) => break q.pop(),
                }
            }
        };
        let Some(Reverse((due, _, frame))) = next else {
            continue;
        };
        while Instant::now() < due {
            std::hint::spin_loop();
        }
        let sent = Instant::now();
        // SAFETY: sending our own buffer on a bound packet socket.
        unsafe { libc::send(to.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        lock(late).add(sent - due);
    }
}

/// Reads frames arriving on `from` (not the ones sent from it) and sends each on `to` after
/// its own hold from its arrival: independent holds, so frames may overtake each other, as
/// under netem's jitter.
fn pump(from: Arc<OwnedFd>, to: Arc<OwnedFd>, mut rng: Rng, (lo, hi): (u64, u64), label: String) {
    let queue: Arc<Queue> = Arc::new((Mutex::new(BinaryHeap::new()), Condvar::new()));
    let late = Arc::new(Mutex::new(Lateness::new(label)));
    let (q2, l2) = (queue.clone(), late.clone());
    std::thread::spawn(move || {
        realtime();
        release(&q2, &to, &l2)
    });
    realtime();
    let mut buf = vec![0u8; 70 * 1024];
    let mut seq = 0u64;
    loop {
        let r = match receive(&from, &mut buf) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if r.outgoing {
            continue;
        }
        let now = Instant::now();
        let arrival = match r.age {
            Some(age) => now.checked_sub(age).unwrap_or(now),
            None => {
                lock(&late).unstamped += 1;
                now
            }
        };
        let due = arrival + rng.hold(lo, hi);
        seq += 1;
        let (heap, ready) = &*queue;
        lock(heap).push(Reverse((due, seq, buf[..r.len].to_vec())));
        ready.notify_one();
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let left = Arc::new(packet_socket(&args.left)?);
    let right = Arc::new(packet_socket(&args.right)?);
    let hold = (args.min_us, args.max_us.max(args.min_us));
    if !realtime() {
        eprintln!("note: no real-time priority (SCHED_FIFO): holds are less exact under load");
    }
    println!("relaying {} <-> {}", args.left, args.right);
    let (l2, r2) = (left.clone(), right.clone());
    let seed = args.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let back_label = format!("{} -> {}", args.right, args.left);
    let back =
        std::thread::spawn(move || pump(r2, l2, Rng(seed.rotate_left(29) | 1), hold, back_label));
    let label = format!("{} -> {}", args.left, args.right);
    pump(left, right, Rng(seed), hold, label);
    let _ = back.join();
    Ok(())
}
