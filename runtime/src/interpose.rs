//! What an interposing library needs from the runtime: `p5-preload` (`libp5_preload.so`,
//! loaded with `LD_PRELOAD`) replaces libc's socket calls in unmodified programs and records
//! them here, through the same ring and record path as the C ABI's wrappers — but without
//! calling libc's socket functions itself, which would land in the interposer again.
//!
//! The runtime lives inside the interposing library, so its own calls (the flusher's
//! `poll`, the log-server connection's `send`, spool `write`s) reach the interposed symbols
//! too: [`on_runtime_thread`] tells the interposer to pass them straight through.
//!
//! Calls are named after the libc function: each has a fixed sensor id ([`sensor_id`]) and
//! [`manifest`] describes them all (kind `comm`, function = name = the call), so the viewer
//! shows a `send` bar for a `send`, with no source.

use crate::comm;
pub use crate::record::RawEndpoint;
use p5_wire::manifest::{Manifest, Sensor};
use p5_wire::{CommOp, RuntimeKind};

/// How processes recorded through an interposer introduce themselves in the handshake.
const ORIGIN: RuntimeKind = RuntimeKind::C;

/// Every call an interposer records, with the operation it is recorded as.
pub const CALLS: &[(&str, CommOp)] = &[
    ("send", CommOp::Send),
    ("recv", CommOp::Recv),
    ("sendto", CommOp::SendTo),
    ("recvfrom", CommOp::RecvFrom),
    ("sendmsg", CommOp::SendMsg),
    ("recvmsg", CommOp::RecvMsg),
    ("sendmmsg", CommOp::SendMsg),
    ("recvmmsg", CommOp::RecvMsg),
    ("read", CommOp::Read),
    ("write", CommOp::Write),
    ("readv", CommOp::Read),
    ("writev", CommOp::Write),
    ("sendfile", CommOp::Write),
    ("splice", CommOp::Write),
    ("connect", CommOp::Connect),
    ("accept", CommOp::Accept),
    ("accept4", CommOp::Accept),
    ("close", CommOp::Close),
    ("shutdown", CommOp::Shutdown),
    ("poll", CommOp::Wait),
    ("ppoll", CommOp::Wait),
    ("select", CommOp::Wait),
    ("pselect", CommOp::Wait),
    ("epoll_wait", CommOp::Wait),
    ("epoll_pwait", CommOp::Wait),
];

/// Calls an interposer sees that describe sockets without being recorded as calls (their
/// `Socket` events carry the call's sensor id).
pub const DESCRIBING: &[&str] = &["socketpair"];

/// The sensor id of interposed call `name`: FNV-1a of `p5-preload/` and the name.
pub const fn sensor_id(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let prefix = b"p5-preload/";
    let mut i = 0;
    while i < prefix.len() {
        h = (h ^ prefix[i] as u64).wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    let name = name.as_bytes();
    let mut i = 0;
    while i < name.len() {
        h = (h ^ name[i] as u64).wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    h
}

/// A manifest naming every interposed call (for `p5 merge --manifest`).
pub fn manifest() -> Manifest {
    Manifest {
        version: 1,
        tool: format!("p5-preload {}", env!("CARGO_PKG_VERSION")),
        root: String::new(),
        files: Vec::new(),
        sensors: CALLS
            .iter()
            .map(|&(name, _)| name)
            .chain(DESCRIBING.iter().copied())
            .map(|name| Sensor {
                id: p5_wire::manifest::format_id(sensor_id(name)),
                kind: "comm".into(),
                language: "c".into(),
                file: String::new(),
                function: name.into(),
                name: name.into(),
                line: 0,
                column: 0,
                end_line: 0,
                end_column: 0,
            })
            .collect(),
    }
}

/// Reads the configuration from the environment now, without starting anything. An
/// interposer calls it when it is loaded: programs that clear their environment before they
/// first communicate (nginx's workers keep only `TZ`) still record where they were told to,
/// and forked children inherit what was read.
pub fn read_config() {
    let _ = crate::process::config();
}

/// Drains what was recorded and waits until the log server has acknowledged it (not merely
/// spooled it), at most `P5_EXIT_TIMEOUT_MS`; for an interposer's `exec`, after which the
/// process's spool would belong to nobody. Returns whether that completed.
pub fn flush_acknowledged() -> bool {
    crate::process::flush_acknowledged()
}

/// Runs the exit sequence (drain, acknowledgements within `P5_EXIT_TIMEOUT_MS`, spool,
/// Goodbye) for an interposer's `_exit`, if this process is the one recording: a child that
/// shares its parent's memory (`clone` with `CLONE_VM`) must not end its parent's recording,
/// and a process that never recorded has nothing to finish.
pub fn exit_sequence() {
    if let Some(p) = crate::process::current()
        && p.identity.pid == std::process::id()
    {
        crate::process::finish();
    }
}

/// True on the runtime's own threads (flusher, connector): their calls are never recorded.
#[inline]
pub fn on_runtime_thread() -> bool {
    crate::sensor::on_flusher_thread()
}

/// Raw start ticks of a call if recording (initialising the runtime on first use), else
/// `None`. May make system calls; `errno` is preserved.
#[inline]
pub fn start() -> Option<u64> {
    comm::start(ORIGIN)
}

/// Records a finished call that started at `start` ticks: `result` is the byte count (or
/// descriptor) or −errno, `peer` the address for datagram and connect/accept calls.
pub fn record(sensor: u64, op: CommOp, fd: i32, start: u64, result: i64, peer: &RawEndpoint) {
    comm::record(ORIGIN, sensor, op, fd as i64, start, result, peer);
}

/// Describes socket `fd` (a `Socket` event) unless already done since it was opened;
/// `force` describes it again (after connect/accept), `peer_hint` stands in for a peer the
/// kernel does not know yet. Makes system calls (`getsockopt`, `getsockname`, …).
pub fn describe(sensor: u64, fd: i32, force: bool, peer_hint: &RawEndpoint) {
    comm::note_socket(ORIGIN, sensor, fd, force, peer_hint);
}

/// Describes both ends of a new socketpair `(a, b)` of socket type `ty`: each end is named
/// after its inode and its peer after the other's (see [`crate::unnamed`]). Makes `fstat`
/// calls; does nothing while the runtime is not running (it does not start it).
pub fn describe_pair(a: i32, b: i32, ty: i32) {
    comm::note_pair(ORIGIN, sensor_id("socketpair"), a, b, ty);
}

/// Forgets that `fd` was described (it is being closed or replaced).
pub fn forget(fd: i32) {
    comm::forget(fd);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_has_its_own_id_and_a_manifest_entry() {
        let mut ids: Vec<u64> = CALLS.iter().map(|c| sensor_id(c.0)).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), CALLS.len());
        let m = manifest();
        assert_eq!(m.sensors.len(), CALLS.len() + DESCRIBING.len());
        assert!(m.sensors.iter().any(|s| s.function == "socketpair"));
        let send = &m.sensors[0];
        assert_eq!(
            (send.function.as_str(), send.kind.as_str()),
            ("send", "comm")
        );
        assert_eq!(
            p5_wire::manifest::parse_id(&send.id),
            Some(sensor_id("send"))
        );
    }
}
