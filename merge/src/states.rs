//! Thread states for the Gantt chart (CoSMoS Fig. 7): *sending*, *receiving*, *connecting*,
//! *accepting*, *closing* while a communication call runs, *waiting* while the thread waits
//! for descriptors (poll, select, epoll_wait, a selector), *calculating* in between.
//!
//! Pure: fed one thread's events in time order (already on the session base). A thread is
//! alive from its first event to its stream's end (or its last event); every instant of that
//! span is covered by exactly one state row.

use p5_wire::CommOp;

/// A state: the one list of state names is [`p5_tracedb::domain::ThreadState`].
pub use p5_tracedb::domain::ThreadState as State;

/// One state interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateSpan {
    /// Start, ns on the session base.
    pub start: i64,
    /// End.
    pub end: i64,
    /// State.
    pub state: State,
    /// The call, for communication states.
    pub op: Option<CommOp>,
    /// Its descriptor.
    pub fd: i64,
    /// Its result (bytes or −errno).
    pub result: i64,
}

/// The state timeline of one thread.
#[derive(Debug, Default, Clone)]
pub struct Timeline {
    /// End of the last emitted span (or the thread's first event).
    cursor: Option<i64>,
}

impl Timeline {
    /// Any event: the thread is alive at `t`.
    pub fn touch(&mut self, t: i64) {
        self.cursor.get_or_insert(t);
    }

    /// A communication call `[t, t + duration)`.
    pub fn call(
        &mut self,
        t: i64,
        duration: i64,
        op: CommOp,
        fd: i64,
        result: i64,
        out: &mut impl FnMut(StateSpan),
    ) {
        let from = *self.cursor.get_or_insert(t);
        // Calls of one thread do not overlap; clamp clock noise.
        let start = t.max(from);
        let end = t.saturating_add(duration.max(0)).max(start);
        if start > from {
            out(StateSpan {
                start: from,
                end: start,
                state: State::Calculating,
                op: None,
                fd: -1,
                result: 0,
            });
        }
        out(StateSpan {
            start,
            end,
            state: State::of(op),
            op: Some(op),
            fd,
            result,
        });
        self.cursor = Some(end);
    }

    /// The thread ended at `t`.
    pub fn finish(&mut self, t: i64, out: &mut impl FnMut(StateSpan)) {
        if let Some(from) = self.cursor.take()
            && t > from
        {
            out(StateSpan {
                start: from,
                end: t,
                state: State::Calculating,
                op: None,
                fd: -1,
                result: 0,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_split_the_thread_into_states() {
        let mut tl = Timeline::default();
        let mut out = Vec::new();
        let mut push = |s: StateSpan| out.push((s.start, s.end, s.state));
        tl.touch(0);
        tl.call(10, 5, CommOp::Send, 3, 100, &mut push);
        tl.call(15, 20, CommOp::Recv, 3, 100, &mut push);
        tl.call(34, 2, CommOp::Close, 3, 0, &mut push); // overlaps by clock noise: clamped
        tl.finish(50, &mut push);
        assert_eq!(
            out,
            vec![
                (0, 10, State::Calculating),
                (10, 15, State::Sending),
                (15, 35, State::Receiving),
                (35, 36, State::Closing),
                (36, 50, State::Calculating),
            ]
        );
    }

    #[test]
    fn a_wait_is_waiting_not_calculating() {
        let mut tl = Timeline::default();
        let mut out = Vec::new();
        let mut push = |s: StateSpan| out.push((s.start, s.end, s.state, s.op, s.fd, s.result));
        tl.touch(0);
        tl.call(5, 420, CommOp::Wait, 7, 1, &mut push);
        tl.call(425, 3, CommOp::Recv, 9, 64, &mut push);
        tl.finish(430, &mut push);
        assert_eq!(
            out,
            vec![
                (0, 5, State::Calculating, None, -1, 0),
                (5, 425, State::Waiting, Some(CommOp::Wait), 7, 1),
                (425, 428, State::Receiving, Some(CommOp::Recv), 9, 64),
                (428, 430, State::Calculating, None, -1, 0),
            ]
        );
    }
}
