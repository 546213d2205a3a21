//! The handshake. A client opens a connection by sending a `Hello` frame; the server answers
//! `HelloAck` (or `Error` and closes).
//!
//! ```text
//! Hello body:    magic "P5WIRE" | u16 version | u64 caps | identity
//! identity:      u64 process_uid | u32 pid | u32 ppid | i64 start_wall_ns | u64 start_mono_ns
//!                | u8 clock | u8 runtime | str host_id | str boot_id | str hostname
//!                | str program | str session | varint argc | argc × str
//! HelloAck body: magic "P5WIRE" | u16 version | u64 caps (accepted) | u64 server_run_id
//!                | u64 t_s (server-relative time at send)
//! ```
//!
//! Peers do not require equal versions: the server accepts any version ≥ 1 and answers with
//! the intersection of capability flags; a client only uses what was accepted.

use crate::codec::{Reader, put_str, put_varint};
use crate::error::{DecodeError, Result};

/// First bytes of every Hello and HelloAck body.
pub const MAGIC: &[u8; 6] = b"P5WIRE";
/// Most argv entries kept.
pub const MAX_ARGS: usize = 4096;
/// Most bytes of argv text kept in a Hello (later arguments are dropped), so a Hello always
/// fits in a frame.
pub const MAX_ARGV_BYTES: usize = 256 * 1024;

/// Capability flags (a bit set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Caps(pub u64);

impl Caps {
    /// Event batches with enter/exit/mark/counter events.
    pub const EVENTS: Caps = Caps(1 << 0);
    /// Communication and socket events.
    pub const COMM: Caps = Caps(1 << 1);
    /// Pings echo the server time of the last ack (two-way clock samples).
    pub const PING_ECHO: Caps = Caps(1 << 2);
    /// OS-monitor events (switch, wakeup, irq).
    pub const SCHED: Caps = Caps(1 << 3);
    /// `Names` frames (metric names, units, scales).
    pub const NAMES: Caps = Caps(1 << 4);
    /// `ClockSamples` frames (per-hop clock samples of the agent tree).
    pub const CLOCK_SAMPLES: Caps = Caps(1 << 5);
    /// `Control` frames.
    pub const CONTROL: Caps = Caps(1 << 6);
    /// `Calls` events (kind 10: throttled sensors' call counts).
    pub const CALLS: Caps = Caps(1 << 7);
    /// `Sensors` frames (the instrumented files' sensor tables).
    pub const SENSORS: Caps = Caps(1 << 8);
    /// Clock pings over UDP to the connection's address (`datagram`).
    pub const DATAGRAM_PINGS: Caps = Caps(1 << 9);
    /// Everything this implementation understands.
    pub const ALL: Caps = Caps(0b11_1111_1111);

    /// True if every flag of `other` is set.
    pub fn contains(self, other: Caps) -> bool {
        self.0 & other.0 == other.0
    }

    /// Flags set in both.
    pub fn intersect(self, other: Caps) -> Caps {
        Caps(self.0 & other.0)
    }
}

/// Which kind of program is speaking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RuntimeKind {
    /// Not said.
    Unknown = 0,
    /// The Rust runtime used from Rust.
    Rust = 1,
    /// The Rust runtime used through the C ABI (C, C++).
    C = 2,
    /// The pure-Python client.
    Python = 3,
    /// The Java client.
    Java = 4,
    /// A host agent.
    HostAgent = 5,
    /// An OS monitor.
    OsMonitor = 6,
}

impl RuntimeKind {
    /// Maps a byte; unknown values become `Unknown` (additive evolution).
    pub fn from_u8(b: u8) -> Self {
        match b {
            1 => Self::Rust,
            2 => Self::C,
            3 => Self::Python,
            4 => Self::Java,
            5 => Self::HostAgent,
            6 => Self::OsMonitor,
            _ => Self::Unknown,
        }
    }
}

/// Which clock stamped the events (informational; times on the wire are always nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ClockKind {
    /// Not said.
    Unknown = 0,
    /// Invariant TSC, converted with (ticks, CLOCK_MONOTONIC) snapshots.
    Tsc = 1,
    /// clock_gettime(CLOCK_MONOTONIC).
    Monotonic = 2,
}

/// Who is sending: one process (or agent) instance.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Identity {
    /// Random id chosen at process start (and anew in a forked child); keys deduplication.
    pub process_uid: u64,
    /// Operating-system process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Wall-clock time of the process start, ns since the Unix epoch (a display label only).
    pub start_wall_ns: i64,
    /// CLOCK_MONOTONIC at the process start, ns: maps kernel `mono` trace times exactly.
    pub start_mono_ns: u64,
    /// `ClockKind` as a byte.
    pub clock: u8,
    /// `RuntimeKind` as a byte.
    pub runtime: u8,
    /// /etc/machine-id (or the boot id where that is missing).
    pub host_id: String,
    /// /proc/sys/kernel/random/boot_id.
    pub boot_id: String,
    /// The host name.
    pub hostname: String,
    /// Program name (argv\[0\] basename or /proc/self/comm).
    pub program: String,
    /// Session name (`P5_SESSION`), or empty for the server's default.
    pub session: String,
    /// Command-line arguments.
    pub argv: Vec<String>,
}

/// The client's opening frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// Protocol version of the client.
    pub version: u16,
    /// Capabilities the client can use.
    pub caps: Caps,
    /// The sender.
    pub identity: Identity,
}

impl Identity {
    /// Appends the encoding.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.process_uid.to_le_bytes());
        out.extend_from_slice(&self.pid.to_le_bytes());
        out.extend_from_slice(&self.ppid.to_le_bytes());
        out.extend_from_slice(&self.start_wall_ns.to_le_bytes());
        out.extend_from_slice(&self.start_mono_ns.to_le_bytes());
        out.push(self.clock);
        out.push(self.runtime);
        for s in [
            &self.host_id,
            &self.boot_id,
            &self.hostname,
            &self.program,
            &self.session,
        ] {
            put_str(out, s);
        }
        // Keep whole arguments while they fit in MAX_ARGV_BYTES (each is also cut at MAX_STRING).
        let mut budget = MAX_ARGV_BYTES;
        let n = self
            .argv
            .iter()
            .take(MAX_ARGS)
            .take_while(|a| {
                let len = a.len().min(crate::codec::MAX_STRING) + 3;
                budget = budget.saturating_sub(len);
                budget > 0
            })
            .count();
        put_varint(out, n as u64);
        for a in &self.argv[..n] {
            put_str(out, a);
        }
    }

    /// Decodes an identity.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self> {
        let mut id = Identity {
            process_uid: r.u64()?,
            pid: r.u32()?,
            ppid: r.u32()?,
            start_wall_ns: r.i64()?,
            start_mono_ns: r.u64()?,
            clock: r.u8()?,
            runtime: r.u8()?,
            host_id: r.str("host_id")?,
            boot_id: r.str("boot_id")?,
            hostname: r.str("hostname")?,
            program: r.str("program")?,
            session: r.str("session")?,
            argv: Vec::new(),
        };
        let argc = r.varint()?;
        // Each argument takes at least one byte, so the input bounds the allocation.
        if argc > MAX_ARGS as u64 || argc > r.remaining() as u64 {
            return Err(DecodeError::Invalid {
                field: "argc",
                value: argc,
            });
        }
        id.argv.reserve(argc as usize);
        for _ in 0..argc {
            id.argv.push(r.str("argv")?);
        }
        Ok(id)
    }
}

fn check_magic(r: &mut Reader<'_>) -> Result<u16> {
    let m = r.take(MAGIC.len())?;
    if m != MAGIC {
        return Err(DecodeError::BadMagic { found: m.to_vec() });
    }
    let version = r.u16()?;
    if version == 0 {
        return Err(DecodeError::Invalid {
            field: "version",
            value: 0,
        });
    }
    Ok(version)
}

impl Hello {
    /// Encodes the body (without the frame envelope).
    pub fn encode_body(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(128);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&self.caps.0.to_le_bytes());
        self.identity.encode(&mut out);
        out
    }

    /// Decodes a body. Bytes after the identity are ignored: newer clients may append fields.
    pub fn decode_body(body: &[u8]) -> Result<Self> {
        let mut r = Reader::new(body);
        let version = check_magic(&mut r)?;
        let caps = Caps(r.u64()?);
        let identity = Identity::decode(&mut r)?;
        Ok(Hello {
            version,
            caps,
            identity,
        })
    }
}

/// The server's answer to a Hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HelloAck {
    /// Protocol version of the server.
    pub version: u16,
    /// Capabilities both sides have; the client uses only these.
    pub caps: Caps,
    /// Random id of this log-server run (a restart changes it).
    pub server_run_id: u64,
    /// Server-relative time at send, ns.
    pub t_s: u64,
}

impl HelloAck {
    /// Encodes the body.
    pub fn encode_body(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&self.caps.0.to_le_bytes());
        out.extend_from_slice(&self.server_run_id.to_le_bytes());
        out.extend_from_slice(&self.t_s.to_le_bytes());
        out
    }

    /// Decodes a body; trailing bytes are ignored (additive evolution).
    pub fn decode_body(body: &[u8]) -> Result<Self> {
        let mut r = Reader::new(body);
        let version = check_magic(&mut r)?;
        Ok(HelloAck {
            version,
            caps: Caps(r.u64()?),
            server_run_id: r.u64()?,
            t_s: r.u64()?,
        })
    }
}
