//! Who this process is: the identity carried in the handshake and at the head of a spool file.
//!
//! A forked child gets a new identity (new `process_uid`, pid, ppid and start time) so the log
//! server keeps its data apart from its parent's; everything else is re-read because it is
//! cheap and a child may have changed it (argv via `prctl`, for instance). The program's name
//! is chosen by [`program_name`] (interpreters are named after their script).

use crate::clock::Origin;
use p5_wire::hello::ClockKind;
use p5_wire::{Caps, Hello, Identity, PROTOCOL_VERSION, RuntimeKind};

mod program;
pub use program::program_name;

/// A random 64-bit id (getrandom, with a time/pid mix as fallback).
pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: writing at most 8 bytes into `b`.
    let n = unsafe { libc::getrandom(b.as_mut_ptr() as *mut libc::c_void, 8, libc::GRND_NONBLOCK) };
    if n == 8 {
        return u64::from_le_bytes(b);
    }
    let mut x = crate::clock::wall_ns() as u64 ^ (std::process::id() as u64).rotate_left(32);
    x ^= crate::clock::rdtsc().rotate_left(17);
    // splitmix64 finaliser
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn read_trimmed(path: &str) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

/// Splits `/proc/self/cmdline` content into arguments.
pub fn parse_cmdline(raw: &[u8]) -> Vec<String> {
    raw.split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// Most bytes of command line carried in the handshake: the wire bounds each string and the
/// count, not the total, and a Hello must stay far below the frame limit.
pub const MAX_ARGV_BYTES: usize = 64 * 1024;

/// Keeps whole arguments while they fit in `max` bytes; the first one that does not is cut
/// (on a character boundary) and the rest dropped.
pub fn cap_args(argv: &mut Vec<String>, max: usize) {
    let mut left = max;
    for i in 0..argv.len() {
        if argv[i].len() > left {
            let mut end = left;
            while !argv[i].is_char_boundary(end) {
                end -= 1;
            }
            argv[i].truncate(end);
            argv.truncate(i + 1);
            return;
        }
        left -= argv[i].len();
    }
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) };
    if rc == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        return String::from_utf8_lossy(&buf[..end]).into_owned();
    }
    read_trimmed("/proc/sys/kernel/hostname").unwrap_or_default()
}

/// What identifies the host in every p5 `Hello`. Every producer (runtime, host agent) reads
/// it here, so the merge stage groups their processes by the same values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// `/etc/machine-id`, or the boot id where that file is missing.
    pub host_id: String,
    /// `/proc/sys/kernel/random/boot_id`.
    pub boot_id: String,
    /// The host name.
    pub hostname: String,
}

/// Reads this host's identity.
pub fn host() -> Host {
    let boot_id = read_trimmed("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let host_id = read_trimmed("/etc/machine-id").unwrap_or_else(|| boot_id.clone());
    Host {
        host_id,
        boot_id,
        hostname: hostname(),
    }
}

/// Gathers this process's identity.
pub fn gather(origin: &Origin, runtime: RuntimeKind, session: &str) -> Identity {
    let Host {
        host_id,
        boot_id,
        hostname,
    } = host();
    let mut argv = std::fs::read("/proc/self/cmdline")
        .map(|raw| parse_cmdline(&raw))
        .ok()
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| {
            std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        });
    cap_args(&mut argv, MAX_ARGV_BYTES);
    let program = program_name(&argv, || read_trimmed("/proc/self/comm"));
    Identity {
        process_uid: random_u64(),
        // SAFETY: getpid/getppid cannot fail.
        pid: unsafe { libc::getpid() } as u32,
        // SAFETY: as above.
        ppid: unsafe { libc::getppid() } as u32,
        start_wall_ns: origin.wall0,
        start_mono_ns: origin.mono0,
        clock: if origin.tsc {
            ClockKind::Tsc as u8
        } else {
            ClockKind::Monotonic as u8
        },
        runtime: runtime as u8,
        host_id,
        boot_id,
        hostname,
        program,
        session: session.to_string(),
        argv,
    }
}

/// The encoded Hello frame (envelope included) offering every capability we implement.
pub fn hello_frame(identity: &Identity) -> Vec<u8> {
    let hello = Hello {
        version: PROTOCOL_VERSION,
        caps: Caps::ALL,
        identity: identity.clone(),
    };
    let mut out = Vec::new();
    p5_wire::frame::encode(
        &mut out,
        p5_wire::FrameType::Hello as u8,
        &hello.encode_body(),
    );
    out
}

/// OS thread id of the calling thread.
pub fn gettid() -> u64 {
    // SAFETY: gettid cannot fail.
    unsafe { libc::gettid() as u64 }
}

/// The kernel's name for the calling thread (Rust sets it from `thread::Builder::name`, cut
/// to 15 bytes). `std::thread::current()` is avoided on purpose: registration may happen while
/// the thread's other thread-locals are being destroyed, where it would abort.
pub fn thread_name() -> String {
    let mut buf = [0u8; 64];
    // SAFETY: the buffer is valid for its length; pthread_self is the calling thread.
    let rc = unsafe {
        libc::pthread_getname_np(
            libc::pthread_self(),
            buf.as_mut_ptr() as *mut libc::c_char,
            buf.len(),
        )
    };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmdline_split() {
        assert_eq!(parse_cmdline(b"./a\0-x\0\0y\0"), vec!["./a", "-x", "y"]);
        assert!(parse_cmdline(b"").is_empty());
    }

    #[test]
    fn argv_is_capped() {
        let mut a = vec!["abc".to_string(), "défg".to_string(), "x".to_string()];
        cap_args(&mut a, 5);
        assert_eq!(a, ["abc", "d"]);
        let mut b = vec!["ab".to_string(), "cd".to_string()];
        cap_args(&mut b, 4);
        assert_eq!(b, ["ab", "cd"]);
    }

    #[test]
    fn identity_round_trips_through_hello() {
        let o = Origin::capture(false);
        let id = gather(&o, RuntimeKind::C, "sess");
        assert_eq!(id.pid, std::process::id());
        assert_eq!(id.runtime, RuntimeKind::C as u8);
        assert_eq!(id.clock, ClockKind::Monotonic as u8);
        assert!(!id.argv.is_empty());
        assert!(!id.program.contains('/'));
        let frame = hello_frame(&id);
        let (raw, n) = p5_wire::frame::decode(&frame).unwrap();
        assert_eq!(n, frame.len());
        let h = Hello::decode_body(raw.body).unwrap();
        assert_eq!(h.identity, id);
        assert_eq!(h.caps, Caps::ALL);
        assert_ne!(random_u64(), random_u64());
    }
}
