//! When a producer pings the log server: in bursts, each ping after the server's answer to
//! the one before. Shared by the runtime's flusher and the host agent's own uplink, so every
//! producer gives the merge the same density of two-way clock samples (issue 22).

use std::time::{Duration, Instant};

/// Interval between ping bursts.
pub const PING_INTERVAL: Duration = Duration::from_millis(500);
/// Interval between ping bursts in a connection's first [`EARLY`]: a clock estimate needs
/// many round trips near both ends of a run, and a short run has only its start.
pub const EARLY_PING_INTERVAL: Duration = Duration::from_millis(100);
/// How long a connection pings at [`EARLY_PING_INTERVAL`] in bursts of [`EARLY_PING_BURST`]:
/// a run of a few seconds gets dense samples to its end, not only at its start.
pub const EARLY: Duration = Duration::from_secs(10);
/// Pings per burst: each after the server's answer to the one before (an `Ack`), so both
/// sides have just blocked when the next arrives and the two directions' delays are alike —
/// the best two-way clock samples.
pub const PING_BURST: u32 = 8;
/// Pings per burst in a connection's first [`EARLY`]: 320 a second at most (a round trip
/// under 300 µs), fewer on a slow path — behind 3.5 ms round trips the bursts run back to
/// back, about 280 a second. Where delays vary the estimate's error goes as their spread over
/// the samples per direction (issue 22), and a short run has only these.
pub const EARLY_PING_BURST: u32 = 32;
/// A burst whose answer is this late ends (an older server answers no ping).
pub const BURST_TIMEOUT: Duration = Duration::from_millis(50);

/// The ping schedule of one connection.
#[derive(Debug, Clone)]
pub struct PingSchedule {
    /// When the next burst is due.
    next: Instant,
    /// When the connection came up (pings are denser early).
    connected_at: Instant,
    /// How long the dense early phase lasts ([`EARLY`], or zero).
    early: Duration,
    /// The burst under way: pings still to send, and when the last one was sent.
    burst: Option<(u32, Instant)>,
}

impl PingSchedule {
    /// A connection that came up at `now`; its first burst is due at once.
    pub fn new(now: Instant) -> Self {
        Self {
            next: now,
            connected_at: now,
            early: EARLY,
            burst: None,
        }
    }

    /// The same without the dense early phase: bursts of [`PING_BURST`] every
    /// [`PING_INTERVAL`] from the start, for a long-lived producer with a CPU budget (the
    /// host agent: the early phase cost it 0.14 % of a core over its first 10 s).
    pub fn steady(now: Instant) -> Self {
        Self {
            early: Duration::ZERO,
            ..Self::new(now)
        }
    }

    /// When the next burst is due (a caller that sleeps wakes by then).
    pub fn next_due(&self) -> Instant {
        self.next
    }

    /// Whether to send a ping now: the next of the burst under way when an answer came
    /// (`answered`), or the first of a burst that is due. `free` says whether a ping can go
    /// now (a previous control frame has left); a due burst is skipped when it cannot, and
    /// the deadline moves on anyway (a blocked socket must not make the caller spin).
    pub fn poll(&mut self, now: Instant, answered: bool, free: bool) -> bool {
        let mut send = false;
        if let Some((left, at)) = self.burst {
            if left == 0 || now.duration_since(at) > BURST_TIMEOUT {
                self.burst = None;
            } else if answered && free {
                send = true;
                self.burst = Some((left - 1, now));
            }
        }
        if now >= self.next {
            let early = now.duration_since(self.connected_at) < self.early;
            self.next = now
                + if early {
                    EARLY_PING_INTERVAL
                } else {
                    PING_INTERVAL
                };
            if free && !send {
                send = true;
                let burst = if early { EARLY_PING_BURST } else { PING_BURST };
                self.burst = Some((burst - 1, now));
            }
        }
        send
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A burst: a ping when one is due, then one more for each answer until 32 went out (8
    /// after the first 10 s of a connection); an answer later than the burst timeout ends it;
    /// bursts every 100 ms for the first 10 s, then every 500 ms.
    #[test]
    fn pings_go_in_bursts_paced_by_the_answers() {
        let t0 = Instant::now();
        let mut s = PingSchedule::new(t0);
        let ms = Duration::from_millis;
        assert!(s.poll(t0, false, true));
        // No answer yet: nothing more.
        assert!(!s.poll(t0 + ms(1), false, true));
        for k in 1..EARLY_PING_BURST {
            assert!(s.poll(t0 + ms(1 + k as u64), true, true), "answer {k}");
        }
        // The burst is complete: an answer to its last ping sends nothing.
        assert!(!s.poll(t0 + ms(40), true, true));
        assert_eq!(s.next_due(), t0 + EARLY_PING_INTERVAL);
        // The next burst, whose first answer comes too late.
        assert!(s.poll(t0 + EARLY_PING_INTERVAL, false, true));
        assert!(!s.poll(t0 + EARLY_PING_INTERVAL + BURST_TIMEOUT + ms(1), true, true));
        // After the early phase, bursts are PING_INTERVAL apart...
        let late = t0 + EARLY + ms(1);
        assert!(s.poll(late, false, true));
        assert_eq!(s.next_due(), late + PING_INTERVAL);
        // ... and of 8 pings.
        for k in 1..PING_BURST {
            assert!(s.poll(late + ms(k as u64), true, true), "late answer {k}");
        }
        assert!(!s.poll(late + ms(20), true, true));
    }

    /// A steady schedule has no early phase.
    #[test]
    fn a_steady_schedule_pings_8_every_500_ms_from_the_start() {
        let t0 = Instant::now();
        let mut s = PingSchedule::steady(t0);
        assert!(s.poll(t0, false, true));
        assert_eq!(s.next_due(), t0 + PING_INTERVAL);
        for k in 1..PING_BURST {
            assert!(s.poll(t0 + Duration::from_millis(k as u64), true, true));
        }
        assert!(!s.poll(t0 + Duration::from_millis(20), true, true));
    }

    /// A connection that cannot take a ping skips the due burst and does not spin: the
    /// deadline moves on.
    #[test]
    fn a_busy_connection_skips_a_burst() {
        let t0 = Instant::now();
        let mut s = PingSchedule::new(t0);
        assert!(!s.poll(t0, false, false));
        assert_eq!(s.next_due(), t0 + EARLY_PING_INTERVAL);
        assert!(!s.poll(t0 + Duration::from_millis(1), true, true));
    }
}
