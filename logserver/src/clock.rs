//! The server's clock. Every `t_s` the server records or sends is nanoseconds since this run
//! started, read from CLOCK_MONOTONIC less the run's start on that same clock, so it never
//! jumps with the wall clock and `server_start_mono_ns + t_s` is exactly the monotonic time of
//! the reading (an `Instant` taken beside the start would differ from it by the time between
//! the two reads: microseconds when the thread is preempted there, which made the hosts'
//! ping delays negative). The run's CLOCK_MONOTONIC and wall-clock starts go into every segment
//! header: `server_start_mono_ns + t_s` is a host-wide monotonic time, which lets `p5 merge`
//! put several server runs (and kernel traces from the same host) on one time base; the wall
//! clock is a display label only.

use std::time::{SystemTime, UNIX_EPOCH};

/// One server run's time origin and identity.
#[derive(Debug, Clone)]
pub struct RunClock {
    /// Random id of this run (sent in `HelloAck`, written in segment headers).
    pub server_run_id: u64,
    /// CLOCK_MONOTONIC at `t_s = 0`, ns.
    pub start_mono_ns: u64,
    /// Wall clock at `t_s = 0`, ns since the Unix epoch (label only).
    pub start_wall_ns: i64,
    /// This host's boot id (zero if unreadable): processes on the same boot share the
    /// server's CLOCK_MONOTONIC.
    pub boot_id: [u8; 16],
}

impl RunClock {
    /// Starts a run now, with a fresh random run id.
    pub fn start() -> Self {
        let start_wall_ns = wall_ns();
        let start_mono_ns = monotonic_ns();
        Self {
            server_run_id: random_u64(),
            start_mono_ns,
            start_wall_ns,
            boot_id: std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
                .ok()
                .and_then(|s| p5_wire::store::parse_boot_id(&s))
                .unwrap_or([0; 16]),
        }
    }

    /// Nanoseconds since the run started.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        monotonic_ns().saturating_sub(self.start_mono_ns)
    }
}

/// Wall-clock time, ns since the Unix epoch (0 if the clock is before 1970).
pub fn wall_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// CLOCK_MONOTONIC, ns.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// A random 64-bit number from the kernel (`getrandom`), falling back to a hash of the time
/// and pid if that fails. Used for run ids, which need to be unique, not secret.
pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: `b` is a valid writable buffer of the length passed.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n == b.len() as isize {
        return u64::from_le_bytes(b);
    }
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(monotonic_ns());
    h.write_i64(wall_ns());
    h.write_u32(std::process::id());
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_is_monotonic_and_ids_differ() {
        let c = RunClock::start();
        let a = c.now_ns();
        let b = c.now_ns();
        assert!(b >= a);
        assert!(c.start_mono_ns > 0);
        assert!(c.start_wall_ns > 0);
        assert_ne!(random_u64(), random_u64());
    }

    /// `start_mono_ns + t_s` is the host's monotonic time of the reading itself, bracketed by
    /// monotonic reads on either side (what every same-host delay in the store relies on).
    #[test]
    fn start_plus_relative_time_is_the_monotonic_time() {
        let c = RunClock::start();
        for _ in 0..1000 {
            let before = monotonic_ns();
            let t = c.start_mono_ns + c.now_ns();
            let after = monotonic_ns();
            assert!((before..=after).contains(&t), "{before} <= {t} <= {after}");
        }
    }
}
