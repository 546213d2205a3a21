//! Who this agent is on the wire: the `Hello` identity (random process uid, host id, boot id,
//! host name, session, start times).

use crate::clock::AgentClock;
use p5_wire::hello::{Caps, ClockKind, Hello, Identity, RuntimeKind};

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// The host name (`gethostname`), or `unknown`.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it or
    // truncates, and we stop at the first NUL or the end.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".to_owned();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// A random 64-bit id (from the kernel's random pool, mixed with time and pid as a fallback).
pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read as _;
        if f.read_exact(&mut b).is_ok() {
            let v = u64::from_le_bytes(b);
            if v != 0 {
                return v;
            }
        }
    }
    let t = crate::clock::mono_now_ns() ^ (std::process::id() as u64).rotate_left(32);
    crate::metric::fnv1a(&t.to_le_bytes()) | 1
}

/// Builds this agent's identity.
pub fn agent_identity(clock: &AgentClock, session: &str) -> Identity {
    let boot_id = read_trimmed("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let host_id = read_trimmed("/etc/machine-id").unwrap_or_else(|| boot_id.clone());
    Identity {
        process_uid: random_u64(),
        pid: std::process::id(),
        // SAFETY: getppid has no preconditions.
        ppid: unsafe { libc::getppid() } as u32,
        start_wall_ns: clock.start_wall_ns,
        start_mono_ns: clock.start_mono_ns,
        clock: ClockKind::Monotonic as u8,
        runtime: RuntimeKind::HostAgent as u8,
        host_id,
        boot_id,
        hostname: hostname(),
        program: "hostagent".to_owned(),
        session: session.to_owned(),
        argv: std::env::args().take(64).collect(),
    }
}

/// The encoded `Hello` frame (envelope included) for an identity.
pub fn hello_frame(identity: &Identity) -> Vec<u8> {
    let hello = Hello {
        version: p5_wire::PROTOCOL_VERSION,
        caps: Caps(
            Caps::EVENTS.0
                | Caps::PING_ECHO.0
                | Caps::SCHED.0
                | Caps::NAMES.0
                | Caps::CLOCK_SAMPLES.0
                | Caps::CONTROL.0,
        ),
        identity: identity.clone(),
    };
    let mut out = Vec::with_capacity(256);
    p5_wire::frame::encode(
        &mut out,
        p5_wire::FrameType::Hello as u8,
        &hello.encode_body(),
    );
    out
}
