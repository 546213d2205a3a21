//! Function-call intervals from enter/exit events: nesting depth and self time per call.
//!
//! Pure: a stack machine per thread fed in time order. Self time is the duration minus the
//! durations of the direct children. An exit that does not match the innermost open call
//! closes the calls above the matching one as incomplete (a sensor missed its exit, e.g. a
//! `longjmp` or an exception); an exit matching nothing is counted and dropped; calls still
//! open when the thread ends are closed at its end and marked incomplete. The stack is capped
//! ([`MAX_DEPTH`]) so memory stays bounded on runaway recursion; deeper calls are counted.

use p5_wire::SensorId;

/// Deepest nesting kept per thread.
pub const MAX_DEPTH: usize = 4096;

/// One call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    /// Id given at the enter (ids increase with the start within a thread).
    pub id: i64,
    /// Id of the enclosing call, if any.
    pub parent: Option<i64>,
    /// Sensor (function, region).
    pub sensor: SensorId,
    /// Start, ns on the session base.
    pub start: i64,
    /// End.
    pub end: i64,
    /// Nesting depth, 0 = outermost.
    pub depth: u32,
    /// Duration minus the direct children's durations.
    pub self_ns: i64,
    /// False if the exit was not recorded (closed by an outer exit or the thread's end).
    pub complete: bool,
}

#[derive(Debug, Clone, Copy)]
struct Open {
    id: i64,
    sensor: SensorId,
    start: i64,
    children: i64,
}

/// The open calls of one thread.
#[derive(Debug, Default, Clone)]
pub struct Nesting {
    stack: Vec<Open>,
    /// Exits that matched no open call.
    pub unmatched_exits: u64,
    /// Calls closed without their own exit.
    pub incomplete: u64,
    /// Enters dropped beyond [`MAX_DEPTH`] (and their exits).
    pub too_deep: u64,
    skipped: u64,
}

impl Nesting {
    /// A call begins; `id` names it (and its children's `parent`).
    pub fn enter(&mut self, t: i64, sensor: SensorId, id: i64) {
        if self.stack.len() >= MAX_DEPTH {
            self.too_deep += 1;
            self.skipped += 1;
            return;
        }
        self.stack.push(Open {
            id,
            sensor,
            start: t,
            children: 0,
        });
    }

    fn close(&mut self, t: i64, complete: bool, out: &mut impl FnMut(Interval)) {
        let Some(o) = self.stack.pop() else { return };
        let end = t.max(o.start);
        let dur = end.saturating_sub(o.start);
        if let Some(parent) = self.stack.last_mut() {
            parent.children = parent.children.saturating_add(dur);
        }
        if !complete {
            self.incomplete += 1;
        }
        out(Interval {
            id: o.id,
            parent: self.stack.last().map(|p| p.id),
            sensor: o.sensor,
            start: o.start,
            end,
            depth: self.stack.len() as u32,
            self_ns: dur.saturating_sub(o.children).max(0),
            complete,
        });
    }

    /// A call ends; completed intervals go to `out`.
    pub fn exit(&mut self, t: i64, sensor: SensorId, out: &mut impl FnMut(Interval)) {
        if self.skipped > 0 {
            self.skipped -= 1;
            return;
        }
        match self.stack.iter().rposition(|o| o.sensor == sensor) {
            Some(i) => {
                while self.stack.len() > i + 1 {
                    self.close(t, false, out);
                }
                self.close(t, true, out);
            }
            None => self.unmatched_exits += 1,
        }
    }

    /// The thread ended at `t`: closes what is open.
    pub fn finish(&mut self, t: i64, out: &mut impl FnMut(Interval)) {
        while !self.stack.is_empty() {
            self.close(t, false, out);
        }
        self.skipped = 0;
    }

    /// Open calls.
    pub fn depth(&self) -> usize {
        self.stack.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(events: &[(char, i64, u64)], end: i64) -> (Vec<Interval>, Nesting) {
        let mut n = Nesting::default();
        let mut out = Vec::new();
        let mut push = |i| out.push(i);
        for &(k, t, s) in events {
            match k {
                'e' => n.enter(t, s, t),
                _ => n.exit(t, s, &mut push),
            }
        }
        n.finish(end, &mut push);
        (out, n)
    }

    #[test]
    fn nesting_depth_and_self_time() {
        let (iv, n) = run(
            &[
                ('e', 0, 1),
                ('e', 10, 2),
                ('x', 30, 2),
                ('e', 40, 3),
                ('x', 45, 3),
                ('x', 100, 1),
            ],
            100,
        );
        let got: Vec<_> = iv
            .iter()
            .map(|i| (i.sensor, i.start, i.end, i.depth, i.self_ns))
            .collect();
        assert_eq!(
            got,
            vec![(2, 10, 30, 1, 20), (3, 40, 45, 1, 5), (1, 0, 100, 0, 75)]
        );
        assert!(iv.iter().all(|i| i.complete));
        assert_eq!(n.unmatched_exits, 0);
    }

    #[test]
    fn missing_exits_and_stray_exits_are_repaired_and_counted() {
        let (iv, n) = run(
            &[
                ('x', 1, 9),
                ('e', 2, 1),
                ('e', 3, 2),
                ('x', 10, 1),
                ('e', 20, 4),
            ],
            50,
        );
        let got: Vec<_> = iv.iter().map(|i| (i.sensor, i.end, i.complete)).collect();
        assert_eq!(got, vec![(2, 10, false), (1, 10, true), (4, 50, false)]);
        assert_eq!((n.unmatched_exits, n.incomplete), (1, 2));
    }

    #[test]
    fn depth_is_capped() {
        let mut n = Nesting::default();
        for i in 0..(MAX_DEPTH as i64 + 10) {
            n.enter(i, 1, i);
        }
        assert_eq!(n.depth(), MAX_DEPTH);
        assert_eq!(n.too_deep, 10);
        let mut count = 0;
        n.finish(1_000_000, &mut |_| count += 1);
        assert_eq!(count, MAX_DEPTH);
    }
}
