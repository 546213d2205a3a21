//! A packet sniffer with a peak capture rate and a finite queue (\[P5\] §7.5.5): each packet
//! takes 1/rate to capture; a packet that arrives while `queue` packets are waiting or
//! being captured is dropped. Losses therefore come in bursts, as a real sniffer's do.

use crate::trace::Time;
use std::collections::VecDeque;

/// The sniffer's state.
#[derive(Debug, Clone)]
pub struct Sniffer {
    service_ns: Time,
    queue: usize,
    done_at: VecDeque<Time>,
}

impl Sniffer {
    /// A sniffer capturing at most `rate` packets/s with room for `queue` packets.
    pub fn new(rate: f64, queue: usize) -> Self {
        let service_ns = if rate.is_finite() && rate > 0.0 {
            (1e9 / rate).round().max(1.0) as Time
        } else {
            1
        };
        Sniffer {
            service_ns,
            queue: queue.max(1),
            done_at: VecDeque::new(),
        }
    }

    /// Offers a packet arriving at `t` (non-decreasing); true if it is captured.
    pub fn offer(&mut self, t: Time) -> bool {
        while self.done_at.front().is_some_and(|&d| d <= t) {
            self.done_at.pop_front();
        }
        if self.done_at.len() >= self.queue {
            return false;
        }
        let start = self.done_at.back().map_or(t, |&b| b.max(t));
        self.done_at.push_back(start + self.service_ns);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_beyond_the_queue_is_dropped() {
        let mut s = Sniffer::new(1000.0, 4);
        let kept = (0..10).filter(|_| s.offer(0)).count();
        assert_eq!(kept, 4);
        // After 1 ms one has been captured: room for one more.
        assert!(s.offer(1_000_000));
        assert!(!s.offer(1_000_000));
    }
}
