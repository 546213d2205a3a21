//! Who this agent is on the wire: the `Hello` identity (random process uid, host id, boot id,
//! host name, session, start times). Host facts and random ids come from the runtime's
//! `identity` module, so agents and instrumented processes describe a host identically.

use crate::clock::AgentClock;
use p5_wire::hello::{Caps, ClockKind, Hello, Identity, RuntimeKind};

/// Random 64-bit ids (process uid, control request ids): the runtime's generator.
pub use p5_runtime::identity::random_u64;

/// Builds this agent's identity.
pub fn agent_identity(clock: &AgentClock, session: &str) -> Identity {
    let host = p5_runtime::identity::host();
    Identity {
        process_uid: random_u64(),
        pid: std::process::id(),
        // SAFETY: getppid has no preconditions.
        ppid: unsafe { libc::getppid() } as u32,
        start_wall_ns: clock.start_wall_ns,
        start_mono_ns: clock.start_mono_ns,
        clock: ClockKind::Monotonic as u8,
        runtime: RuntimeKind::HostAgent as u8,
        host_id: host.host_id,
        boot_id: host.boot_id,
        hostname: host.hostname,
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
