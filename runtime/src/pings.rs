//! When a producer pings the log server: in bursts, each ping after the server's answer to
//! the one before. Shared by the runtime's flusher and the host agent's own uplink, so every
//! producer gives the merge the same density of two-way clock samples.
//!
//! Schedule: bursts of [`EARLY_PING_BURST`] every [`EARLY_PING_INTERVAL`] in a connection's
//! first [`EARLY`], then [`PING_BURST`] every [`PING_INTERVAL`]. Only acks that acknowledge
//! nothing new count as answers (a ping's, for sure). A path whose burst's fastest answer took
//! [`SLOW_ANSWER`] or more is slow, and is pinged densely again in each later dense window,
//! over UDP where the server answers datagrams (`crate::datagram_pings`).

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
/// A burst whose fastest answer took this long marks a slow path (a busy host answers some
/// pings late, but not its fastest): after one, a connection pings as densely as in its first
/// [`EARLY`] in every later dense window (see [`in_dense_window`]), over UDP where the server
/// answers datagrams. There the estimate's error goes as the delays' spread over the samples
/// near each end of the run (issue 22).
pub const SLOW_ANSWER: Duration = Duration::from_millis(1);
/// After [`EARLY`], a slow path's pings are dense for the first [`DENSE_SPAN`] of every
/// `DENSE_PERIOD`: a run that ends at any time has dense samples within this much of its end,
/// at a tenth of the cost of pinging densely throughout (each sample is a record in the store).
pub const DENSE_PERIOD: Duration = Duration::from_secs(10);
/// See [`DENSE_PERIOD`].
pub const DENSE_SPAN: Duration = Duration::from_secs(1);

/// Whether a connection up for `since` is in a dense window: its first [`EARLY`], then the
/// first [`DENSE_SPAN`] of every [`DENSE_PERIOD`].
pub fn in_dense_window(since: Duration) -> bool {
    since < EARLY || since.as_millis() % DENSE_PERIOD.as_millis() < DENSE_SPAN.as_millis()
}

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
    /// The fastest answer of the burst under way.
    burst_fastest: Option<Duration>,
    /// Whether the last complete burst's fastest answer took [`SLOW_ANSWER`] or more (the
    /// next one is dense then, in a dense window).
    slow: bool,
    /// Whether a slow path makes bursts dense (not when pings over UDP do that job).
    dense_when_slow: bool,
}

impl PingSchedule {
    /// A connection that came up at `now`; its first burst is due at once.
    pub fn new(now: Instant) -> Self {
        Self {
            next: now,
            connected_at: now,
            early: EARLY,
            burst: None,
            burst_fastest: None,
            slow: false,
            dense_when_slow: true,
        }
    }

    /// The same without the dense early phase: bursts of [`PING_BURST`] every
    /// [`PING_INTERVAL`] from the start, slow path or not, for a long-lived producer with a
    /// CPU budget (the host agent: the early phase cost it 0.14 % of a core over its first
    /// 10 s).
    pub fn steady(now: Instant) -> Self {
        Self {
            early: Duration::ZERO,
            ..Self::new(now)
        }
    }

    /// Whether the last complete burst's fastest answer took [`SLOW_ANSWER`] or more: a slow
    /// path.
    pub fn slow_path(&self) -> bool {
        self.slow
    }

    /// Notes an answer that can only be a ping's (an ack that acknowledged nothing new; one
    /// for data frames says nothing about the path): the burst's fastest answer decides
    /// whether the path is slow.
    pub fn timed_answer(&mut self, now: Instant) {
        if let Some((_, at)) = self.burst {
            let waited = now.duration_since(at);
            if waited <= BURST_TIMEOUT {
                self.burst_fastest = Some(self.burst_fastest.map_or(waited, |f| f.min(waited)));
            }
        }
    }

    /// Whether a slow path makes later bursts dense (true unless told otherwise).
    pub fn set_dense_when_slow(&mut self, on: bool) {
        self.dense_when_slow = on;
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
            let waited = now.duration_since(at);
            if left == 0 || waited > BURST_TIMEOUT {
                self.burst = None;
                self.slow = self.burst_fastest.is_some_and(|f| f >= SLOW_ANSWER);
            } else if answered && free {
                send = true;
                self.burst = Some((left - 1, now));
            }
        }
        if now >= self.next {
            let since = now.duration_since(self.connected_at);
            let early = !self.early.is_zero()
                && (since < self.early
                    || (self.slow && self.dense_when_slow && in_dense_window(since)));
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
                self.burst_fastest = None;
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

    /// After the early phase, a burst with an answer of a millisecond or more keeps the next
    /// one dense; a burst with none lets the schedule fall back; a steady schedule never
    /// goes dense.
    #[test]
    fn a_slow_path_keeps_pinging_densely() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let us = Duration::from_micros;
        let burst = |s: &mut PingSchedule, start: Instant, n: u32, answer: Duration| {
            assert!(s.poll(start, false, true));
            let mut t = start;
            for k in 1..n {
                t += answer;
                s.timed_answer(t);
                assert!(s.poll(t, true, true), "answer {k}");
            }
            t += answer;
            s.timed_answer(t);
            assert!(!s.poll(t, true, true), "the burst is complete");
        };
        let mut s = PingSchedule::new(t0);
        // A burst after the early phase whose answers take 2 ms...
        let late = t0 + EARLY + ms(1);
        burst(&mut s, late, PING_BURST, ms(2));
        assert_eq!(s.next_due(), late + PING_INTERVAL);
        // ... makes the next one dense within the dense window: 32 pings, the next burst
        // 100 ms later.
        let dense = late + PING_INTERVAL;
        burst(&mut s, dense, EARLY_PING_BURST, us(200));
        assert_eq!(s.next_due(), dense + EARLY_PING_INTERVAL);
        // Its answers were fast: the next burst is a plain one again.
        let plain = dense + EARLY_PING_INTERVAL;
        burst(&mut s, plain, PING_BURST, us(200));
        assert_eq!(s.next_due(), plain + PING_INTERVAL);
        // A busy host: slow answers but a fast one among them. Not a slow path.
        let busy = plain + PING_INTERVAL;
        assert!(s.poll(busy, false, true));
        let mut t = busy;
        for k in 1..PING_BURST {
            t += if k == 3 { us(150) } else { ms(3) };
            s.timed_answer(t);
            assert!(s.poll(t, true, true));
        }
        assert!(!s.poll(t + ms(3), true, true));
        assert!(!s.slow_path());
        // A slow path whose bursts also see acks for data frames soon after a ping: those
        // pace the burst but say nothing about the path.
        let acks = busy + PING_INTERVAL;
        assert!(s.poll(acks, false, true));
        let (mut t, mut left) = (acks, PING_BURST - 1);
        while left > 0 {
            t += us(100);
            assert!(
                s.poll(t, true, true),
                "an ack for data frames paces the burst"
            );
            left -= 1;
            if left > 0 {
                t += ms(3);
                s.timed_answer(t);
                assert!(s.poll(t, true, true), "a ping's answer");
                left -= 1;
            }
        }
        t += ms(3);
        s.timed_answer(t);
        assert!(!s.poll(t, true, true));
        assert!(s.slow_path());
        // Outside a dense window the next burst is plain anyway; its fast answers end the
        // slow path.
        let calm = acks + PING_INTERVAL;
        burst(&mut s, calm, PING_BURST, us(200));
        assert!(!s.slow_path());
        // Slow again, outside the window (15 s): plain; in the next window (20.2 s): dense.
        let outside = t0 + Duration::from_secs(15);
        burst(&mut s, outside, PING_BURST, ms(2));
        burst(&mut s, outside + PING_INTERVAL, PING_BURST, ms(2));
        assert_eq!(s.next_due(), outside + 2 * PING_INTERVAL);
        let window = t0 + Duration::from_millis(20_200);
        burst(&mut s, window, EARLY_PING_BURST, ms(2));
        assert_eq!(s.next_due(), window + EARLY_PING_INTERVAL);
        // Told that pings over UDP are dense instead: plain.
        s.set_dense_when_slow(false);
        let udp = window + EARLY_PING_INTERVAL;
        burst(&mut s, udp, PING_BURST, ms(2));
        assert_eq!(s.next_due(), udp + PING_INTERVAL);
        assert!(in_dense_window(ms(9_999)) && !in_dense_window(ms(12_000)));
        assert!(in_dense_window(ms(30_500)) && !in_dense_window(ms(31_000)));
        // A steady schedule stays steady on a slow path.
        let mut s = PingSchedule::steady(t0);
        burst(&mut s, t0, PING_BURST, ms(2));
        burst(&mut s, t0 + PING_INTERVAL, PING_BURST, ms(2));
        assert_eq!(s.next_due(), t0 + 2 * PING_INTERVAL);
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
