//! The agent's clock: CLOCK_MONOTONIC nanoseconds relative to the agent's start.
//!
//! Every sample, every kernel event and every frame's `t_p` is stamped on this clock. The
//! start instant (`start_mono_ns`) goes into the agent's `Hello`, so kernel `mono` trace times
//! (`ftrace` with `trace_clock=mono`) map exactly: `t = t_kernel − start_mono_ns`.

use p5_runtime::clock::{mono_ns, wall_ns};

/// The agent's start and its relative time.
#[derive(Debug, Clone, Copy)]
pub struct AgentClock {
    /// CLOCK_MONOTONIC at the agent's start, ns.
    pub start_mono_ns: u64,
    /// Wall clock at the agent's start (label).
    pub start_wall_ns: i64,
}

impl AgentClock {
    /// Starts the clock now.
    pub fn start() -> Self {
        Self {
            start_mono_ns: mono_ns(),
            start_wall_ns: wall_ns(),
        }
    }

    /// Nanoseconds since the start.
    pub fn now_ns(&self) -> u64 {
        mono_ns().saturating_sub(self.start_mono_ns)
    }

    /// Maps a CLOCK_MONOTONIC time (e.g. a kernel trace time) to agent-relative ns; times
    /// before the start map to 0.
    pub fn from_mono(&self, mono_ns: u64) -> u64 {
        mono_ns.saturating_sub(self.start_mono_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_time_advances_and_maps_mono() {
        let c = AgentClock::start();
        let a = c.now_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = c.now_ns();
        assert!(b >= a + 2_000_000, "{a} {b}");
        assert_eq!(c.from_mono(c.start_mono_ns + 5), 5);
        assert_eq!(c.from_mono(c.start_mono_ns.saturating_sub(5)), 0);
    }
}
