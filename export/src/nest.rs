//! Slices to begin/end events: Perfetto's track events have no durations (a slice is a
//! `TYPE_SLICE_BEGIN` and a later `TYPE_SLICE_END` on its track, nested like a call stack),
//! so a track's slices, read by start, are turned into events in time order with a stack of
//! the open ones: before a slice begins, every open slice that ended before it (or, with
//! depths, every open slice at its depth or deeper) ends.
//!
//! The stack holds only the open slices (a call depth, a few for IRQs), whatever the track's
//! length. A slice that would outlast the slice enclosing it is cut at its parent's end and
//! counted: Perfetto cannot draw a child that ends after its parent.

/// The open slices of one track, innermost last: (end, depth).
#[derive(Debug, Default)]
pub struct Nest {
    open: Vec<(u64, i64)>,
    /// Slices cut at their parent's end.
    pub clipped: u64,
}

/// How slices of a track nest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nesting {
    /// By the stored depth (calls): a slice closes the open ones at its depth or deeper.
    Depth(i64),
    /// By time only (interrupts): a slice is inside every open slice that has not ended.
    Time,
    /// Never (a thread on a CPU): a slice closes every open one.
    Flat,
}

impl Nest {
    /// Opens the slice `[start, end]`: appends to `closed` the end of each open slice that
    /// ends first (innermost first), and returns the slice's end (cut at its parent's).
    pub fn open(&mut self, start: u64, end: u64, how: Nesting, closed: &mut Vec<u64>) -> u64 {
        while let Some(&(e, d)) = self.open.last() {
            let done = match how {
                Nesting::Depth(depth) => d >= depth || e < start,
                Nesting::Time => e <= start,
                Nesting::Flat => true,
            };
            if !done {
                break;
            }
            self.open.pop();
            closed.push(e);
        }
        let mut end = end.max(start);
        if let Some(&(e, _)) = self.open.last()
            && end > e
        {
            end = e;
            self.clipped += 1;
        }
        let depth = match how {
            Nesting::Depth(d) => d,
            _ => 0,
        };
        self.open.push((end, depth));
        end
    }

    /// Closes every open slice: appends their ends, innermost first.
    pub fn close_all(&mut self, closed: &mut Vec<u64>) {
        while let Some((e, _)) = self.open.pop() {
            closed.push(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(slices: &[(u64, u64, Nesting)]) -> (Vec<String>, u64) {
        let mut n = Nest::default();
        let mut out = Vec::new();
        let mut closed = Vec::new();
        for &(s, e, how) in slices {
            let end = n.open(s, e, how, &mut closed);
            out.extend(closed.drain(..).map(|t| format!("E{t}")));
            out.push(format!("B{s}-{end}"));
        }
        n.close_all(&mut closed);
        out.extend(closed.drain(..).map(|t| format!("E{t}")));
        (out, n.clipped)
    }

    #[test]
    fn calls_nest_by_depth_even_at_equal_times() {
        use Nesting::Depth;
        // main [0,10] { a [0,5] { b [5,5] }, c [5,10] }, d [10,12]
        let (ev, clipped) = events(&[
            (0, 10, Depth(0)),
            (0, 5, Depth(1)),
            (5, 5, Depth(2)),
            (5, 10, Depth(1)),
            (10, 12, Depth(0)),
        ]);
        assert_eq!(
            ev,
            [
                "B0-10", "B0-5", "B5-5", "E5", "E5", "B5-10", "E10", "E10", "B10-12", "E12"
            ]
        );
        assert_eq!(clipped, 0);
    }

    #[test]
    fn a_child_outlasting_its_parent_is_cut_and_counted() {
        let (ev, clipped) = events(&[(0, 10, Nesting::Time), (5, 15, Nesting::Time)]);
        assert_eq!(ev, ["B0-10", "B5-10", "E10", "E10"]);
        assert_eq!(clipped, 1);
    }

    #[test]
    fn flat_slices_never_nest() {
        let (ev, _) = events(&[(0, 10, Nesting::Flat), (5, 15, Nesting::Flat)]);
        assert_eq!(ev, ["B0-10", "E10", "B5-15", "E15"]);
    }
}
