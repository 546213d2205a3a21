//! The session overview: every Gantt lane (a thread's states, each nesting depth of its
//! intervals, its scheduling; a host's IRQs) summarized in [`BUCKETS`] time buckets over the
//! session, so that a viewer can paint a session it has never indexed at once, from a few
//! thousand rows instead of millions (the `overview` table, docs/schema.md).
//!
//! Spans go to the bucket their start falls in. A bucket keeps the extent of its spans (first
//! start, last end), how many there are, the time they cover and the category of the longest
//! one: the same aggregate the viewer's level of detail draws for a pixel column. Spans of a
//! lane do not overlap, so neither do the buckets of a lane.

use p5_tracedb::schema;
use std::collections::HashMap;

/// Buckets across the session (more than the pixel columns of a wide screen).
pub const BUCKETS: i64 = 1024;

/// Lane of a thread's states (`lane` column); interval depth `d` is lane `d + 1`.
pub const LANE_STATES: i64 = 0;
/// Lane of a thread's scheduling intervals.
pub const LANE_SCHED: i64 = -1;
/// Lane of a host's interrupts.
pub const LANE_IRQ: i64 = -2;

/// Who a lane belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Owner {
    /// A thread (states, intervals, scheduling).
    Thread(i64),
    /// A host (interrupts).
    Host(i64),
}

/// A span's category: a number (sensor id, CPU, IRQ) or a state name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// Sensor id, CPU number or IRQ number.
    Number(i64),
    /// A state name.
    State(&'static str),
}

#[derive(Debug, Clone, Copy)]
struct Cell {
    start: i64,
    end: i64,
    spans: i64,
    covered: i64,
    longest: i64,
    cat: Category,
}

/// Accumulates the overview of one session.
#[derive(Debug)]
pub struct Overview {
    t0: i64,
    span: i64,
    cells: HashMap<(Owner, i64, i64), Cell>,
}

impl Overview {
    /// An empty overview of the window `[t0, t1]`.
    pub fn new(t0: i64, t1: i64) -> Overview {
        Overview {
            t0,
            span: t1.saturating_sub(t0).max(1),
            cells: HashMap::new(),
        }
    }

    /// Adds the span `[start, end]` of `lane` of `owner`.
    pub fn add(&mut self, owner: Owner, lane: i64, start: i64, end: i64, cat: Category) {
        let rel = i128::from(start.saturating_sub(self.t0)).clamp(0, i128::from(self.span));
        let bucket = (rel * i128::from(BUCKETS) / i128::from(self.span)).min(BUCKETS as i128 - 1);
        let dur = end.saturating_sub(start).max(0);
        let c = self
            .cells
            .entry((owner, lane, bucket as i64))
            .or_insert(Cell {
                start,
                end,
                spans: 0,
                covered: 0,
                longest: -1,
                cat,
            });
        c.start = c.start.min(start);
        c.end = c.end.max(end);
        c.spans += 1;
        c.covered = c.covered.saturating_add(dur);
        if dur > c.longest {
            c.longest = dur;
            c.cat = cat;
        }
    }

    /// Number of buckets holding spans.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// True when no span was added.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// The `overview` rows of session `sid`, by owner, lane and time.
    pub fn rows(self, sid: i64) -> impl Iterator<Item = schema::Overview> {
        let mut cells: Vec<_> = self.cells.into_iter().collect();
        cells.sort_unstable_by_key(|&((owner, lane, bucket), _)| {
            let key = match owner {
                Owner::Thread(t) => (0, t),
                Owner::Host(h) => (1, h),
            };
            (key, lane, bucket)
        });
        cells.into_iter().map(move |((owner, lane, _), c)| {
            let (thread_id, host_id) = match owner {
                Owner::Thread(t) => (Some(t), None),
                Owner::Host(h) => (None, Some(h)),
            };
            let (category, state) = match c.cat {
                Category::Number(n) => (Some(n), None),
                Category::State(s) => (None, Some(s)),
            };
            schema::Overview {
                session_id: sid,
                thread_id,
                host_id,
                lane,
                t_start: c.start,
                t_end: c.end,
                category,
                state,
                spans: c.spans,
                covered: c.covered,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_aggregate_per_bucket_and_keep_the_longest_category() {
        let mut o = Overview::new(0, 1024);
        let t = Owner::Thread(1);
        o.add(t, 1, 0, 1, Category::Number(7));
        o.add(t, 1, 0, 0, Category::Number(8));
        o.add(t, 1, 5, 9, Category::Number(9)); // bucket 5, spans past it
        o.add(t, LANE_STATES, 0, 1024, Category::State("sending"));
        o.add(Owner::Host(2), LANE_IRQ, 3000, 3000, Category::Number(33)); // clamped to the last
        assert_eq!(o.len(), 4);
        let rows: Vec<_> = o.rows(4).collect();
        assert_eq!(rows[0].lane, LANE_STATES);
        assert_eq!(rows[0].state, Some("sending"));
        assert_eq!(rows[0].covered, 1024);
        // Bucket 0 of lane 1: two spans, extent [0, 1], the longer (sensor 7) named.
        let r = &rows[1];
        assert_eq!(
            (
                r.lane, r.t_start, r.t_end, r.category, r.state, r.spans, r.covered
            ),
            (1, 0, 1, Some(7), None, 2, 1)
        );
        assert_eq!((rows[2].t_start, rows[2].t_end), (5, 9));
        assert_eq!(
            (rows[3].thread_id, rows[3].host_id, rows[3].lane),
            (None, Some(2), LANE_IRQ)
        );
    }
}
