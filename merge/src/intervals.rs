//! Function-call intervals from enter/exit events: nesting depth and self time per call.
//!
//! Pure: a stack machine per thread fed in time order. Self time is the duration minus the
//! durations of the direct children. An exit that does not match the innermost open call
//! closes the calls above the matching one as incomplete (a sensor missed its exit, e.g. a
//! `longjmp` or an exception); an exit matching nothing is counted and dropped; calls still
//! open when the thread ends are closed at its end and marked incomplete. The stack is capped
//! ([`MAX_DEPTH`]) so memory stays bounded on runaway recursion; deeper calls are counted.
//!
//! Late calls: a throttled C call site (runtime `site.rs`) learns that a call was long only at
//! its exit, and records its enter and exit then — after the calls inside it. Such an enter
//! comes earlier in time than the events before it in the stream. A nesting built with
//! [`Nesting::holding`] keeps the last closed calls before giving them out, and when a late
//! call closes it takes the held calls that started inside it as its descendants: one level
//! deeper, the direct children's parent set to it, its self time net of them. Calls already
//! given out (more than the held number closed inside it) stay as they were and are counted
//! ([`Nesting::late_partial`]).

use p5_wire::SensorId;
use std::collections::VecDeque;

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
    /// A late enter (earlier than the stream's latest time): the number of calls closed
    /// before it, which it may wrap.
    late: Option<u64>,
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
    /// Late calls that had inner calls already given out (those stay one level shallow).
    pub late_partial: u64,
    skipped: u64,
    /// Latest time seen.
    last: i64,
    /// Closed calls not yet given out, at most `hold` (0: none are held).
    held: VecDeque<Interval>,
    hold: usize,
    /// Calls closed so far (held and given out).
    closed: u64,
}

impl Nesting {
    /// A nesting that holds up to `hold` closed calls, so that late calls can wrap them.
    pub fn holding(hold: usize) -> Self {
        Self {
            hold,
            last: i64::MIN,
            ..Self::default()
        }
    }

    /// A call begins; `id` names it (and its children's `parent`).
    pub fn enter(&mut self, t: i64, sensor: SensorId, id: i64) {
        if self.stack.len() >= MAX_DEPTH {
            self.too_deep += 1;
            self.skipped += 1;
            return;
        }
        let late = (self.hold > 0 && t < self.last).then_some(self.closed);
        self.last = self.last.max(t);
        self.stack.push(Open {
            id,
            sensor,
            start: t,
            children: 0,
            late,
        });
    }

    fn close(&mut self, t: i64, complete: bool, out: &mut impl FnMut(Interval)) {
        let Some(mut o) = self.stack.pop() else {
            return;
        };
        let end = t.max(o.start);
        let dur = end.saturating_sub(o.start);
        let wrapped = match o.late {
            Some(before) => self.wrap(&o, before),
            None => 0,
        };
        o.children = o.children.saturating_add(wrapped);
        if let Some(parent) = self.stack.last_mut() {
            parent.children = parent.children.saturating_add(dur).saturating_sub(wrapped);
        }
        if !complete {
            self.incomplete += 1;
        }
        let i = Interval {
            id: o.id,
            parent: self.stack.last().map(|p| p.id),
            sensor: o.sensor,
            start: o.start,
            end,
            depth: self.stack.len() as u32,
            self_ns: dur.saturating_sub(o.children).max(0),
            complete,
        };
        self.closed += 1;
        if self.hold == 0 {
            return out(i);
        }
        self.held.push_back(i);
        while self.held.len() > self.hold {
            if let Some(old) = self.held.pop_front() {
                out(old);
            }
        }
    }

    /// A late call `o` closes: the held calls that closed before its enter (the first
    /// `before` closed) and started inside it go one level deeper under it; returns the
    /// summed duration of its direct children among them.
    fn wrap(&mut self, o: &Open, before: u64) -> i64 {
        let depth = self.stack.len() as u32;
        let given_out = self.closed - self.held.len() as u64;
        let Some(last) = before.checked_sub(given_out) else {
            self.late_partial += 1;
            return 0;
        };
        let mut children = 0i64;
        let mut idx = last as usize;
        while idx > 0 {
            // Calls close in time order, so those inside `o` are the last to close before
            // its enter: the first that started before it ends them.
            let i = &mut self.held[idx - 1];
            if i.start < o.start {
                return children;
            }
            if i.depth >= depth {
                if i.depth == depth {
                    i.parent = Some(o.id);
                    children = children.saturating_add(i.end - i.start);
                }
                i.depth += 1;
            }
            idx -= 1;
        }
        if given_out > 0 {
            self.late_partial += 1;
        }
        children
    }

    /// A call ends; completed intervals go to `out`.
    pub fn exit(&mut self, t: i64, sensor: SensorId, out: &mut impl FnMut(Interval)) {
        self.last = self.last.max(t);
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
        self.release(out);
        self.skipped = 0;
    }

    /// Gives out the closed calls held back.
    pub fn release(&mut self, out: &mut impl FnMut(Interval)) {
        self.held.drain(..).for_each(out);
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
        run_with(Nesting::default(), events, end)
    }

    fn run_with(mut n: Nesting, events: &[(char, i64, u64)], end: i64) -> (Vec<Interval>, Nesting) {
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

    /// (sensor, start, end, depth, parent's sensor, self time), sorted by start.
    fn tree(iv: &[Interval]) -> Vec<(u64, i64, i64, u32, Option<u64>, i64)> {
        let sensor_of = |id| iv.iter().find(|i| i.id == id).map(|i| i.sensor);
        let mut v: Vec<_> = iv
            .iter()
            .map(|i| {
                (
                    i.sensor,
                    i.start,
                    i.end,
                    i.depth,
                    i.parent.and_then(sensor_of),
                    i.self_ns,
                )
            })
            .collect();
        v.sort_by_key(|x| (x.1, x.3));
        v
    }

    #[test]
    fn a_late_call_wraps_the_calls_recorded_inside_it() {
        // main (1) runs 0..100; a throttled call (9) ran 10..60 and was recorded at its exit,
        // after its child 2 (20..50, with 3 inside at 30..40); 4 comes after it.
        let events = [
            ('e', 0, 1),
            ('e', 5, 7),
            ('x', 8, 7),
            ('e', 20, 2),
            ('e', 30, 3),
            ('x', 40, 3),
            ('x', 50, 2),
            ('e', 10, 9),
            ('x', 60, 9),
            ('e', 70, 4),
            ('x', 80, 4),
            ('x', 100, 1),
        ];
        let (iv, n) = run_with(Nesting::holding(16), &events, 100);
        assert_eq!(
            tree(&iv),
            vec![
                (1, 0, 100, 0, None, 100 - 3 - 50 - 10),
                (7, 5, 8, 1, Some(1), 3),
                (9, 10, 60, 1, Some(1), 50 - 30),
                (2, 20, 50, 2, Some(9), 30 - 10),
                (3, 30, 40, 3, Some(2), 10),
                (4, 70, 80, 1, Some(1), 10),
            ]
        );
        assert_eq!(n.late_partial, 0);
        // Without holding, the late call wraps nothing: its inner calls sit one level up.
        let (iv, _) = run(&events, 100);
        let t = tree(&iv);
        assert!(t.contains(&(2, 20, 50, 1, Some(1), 20)), "{t:?}");
        assert!(t.contains(&(9, 10, 60, 1, Some(1), 50)), "{t:?}");
    }

    #[test]
    fn nested_late_calls_and_calls_already_given_out() {
        // 9 (10..90) and inside it 8 (20..60) are both late; 2 (30..40) inside 8.
        let events = [
            ('e', 0, 1),
            ('e', 30, 2),
            ('x', 40, 2),
            ('e', 20, 8),
            ('x', 60, 8),
            ('e', 10, 9),
            ('x', 90, 9),
            ('x', 100, 1),
        ];
        let (iv, n) = run_with(Nesting::holding(16), &events, 100);
        let t = tree(&iv);
        assert_eq!(
            t.iter().map(|x| (x.0, x.3, x.4)).collect::<Vec<_>>(),
            vec![
                (1, 0, None),
                (9, 1, Some(1)),
                (8, 2, Some(9)),
                (2, 3, Some(8))
            ]
        );
        assert_eq!(n.late_partial, 0);
        // Holding one call: when 9 closes, 2 was already given out; 8 is wrapped, 2 stays.
        let (iv, n) = run_with(Nesting::holding(1), &events, 100);
        let t = tree(&iv);
        assert!(t.contains(&(9, 10, 90, 1, Some(1), 80 - 40)), "{t:?}");
        assert!(t.contains(&(8, 20, 60, 2, Some(9), 40 - 10)), "{t:?}");
        assert_eq!(n.late_partial, 1);
    }

    #[test]
    fn a_call_a_little_out_of_order_wraps_nothing() {
        // Clock noise: 3 enters 1 ns before 2's exit; 3's own children are nested normally.
        let events = [
            ('e', 0, 1),
            ('e', 10, 2),
            ('x', 20, 2),
            ('e', 19, 3),
            ('e', 25, 4),
            ('x', 30, 4),
            ('x', 40, 3),
            ('x', 50, 1),
        ];
        let (iv, n) = run_with(Nesting::holding(16), &events, 50);
        assert_eq!(iv, run(&events, 50).0.into_iter().collect::<Vec<_>>());
        assert_eq!(n.late_partial, 0);
    }
}
