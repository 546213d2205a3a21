//! Server-side level of detail: a [`Lane`] holds non-overlapping spans of one Gantt row lane
//! (a thread's states, one nesting level of its intervals, its scheduling, a host's IRQs)
//! sorted by start, and [`Lane::query`] answers a window `[t0, t1)` drawn `px` pixels wide
//! with at most about two items per pixel column, whatever the number of spans.
//!
//! A span at least one column wide is sent as it is (`count == 1`): the browser can draw it
//! exactly and click on it. Spans narrower than a column are grouped by the column their start
//! falls in; a group of two or more becomes one aggregate item carrying its extent, the number
//! of spans, the time they cover and the category (state, sensor, CPU) of its longest member
//! (sampled when the group is large), and adjacent aggregates of the same category merge.
//! Because spans do not overlap, ends are sorted too, so the first visible span and each
//! column's last span are binary searches: a query costs O(px · log n), independent of n.

use serde::Serialize;

/// A lane of non-overlapping spans sorted by start.
#[derive(Debug, Default, Clone)]
pub struct Lane {
    start: Vec<i64>,
    end: Vec<i64>,
    cat: Vec<u32>,
    /// `covered[i]` = total duration of spans `0..i` (length n + 1 once non-empty).
    covered: Vec<i64>,
    /// For a lane of groups (an overview): `counts[i]` = spans in groups `0..i`; empty when
    /// every element is one span.
    counts: Vec<u64>,
}

/// One item of a query answer: `[start, end, category, count, covered ns]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Item(pub i64, pub i64, pub u32, pub u32, pub i64);

/// Groups larger than this are sampled when looking for their longest member.
const SAMPLES: usize = 16;

impl Lane {
    /// The end of the last span, if any.
    pub fn last_end(&self) -> Option<i64> {
        self.end.last().copied()
    }

    /// Number of spans.
    pub fn len(&self) -> usize {
        self.start.len()
    }

    /// True without spans.
    pub fn is_empty(&self) -> bool {
        self.start.is_empty()
    }

    /// Appends a span; it must start at or after the previous span's end (returns false and
    /// ignores it otherwise, or when `end < start`).
    pub fn push(&mut self, start: i64, end: i64, cat: u32) -> bool {
        if end < start || self.last_end().is_some_and(|e| start < e) {
            return false;
        }
        if self.covered.is_empty() {
            self.covered.push(0);
        }
        let c = self.covered.last().copied().unwrap_or(0);
        self.covered
            .push(c.saturating_add(end.saturating_sub(start)));
        if let Some(&n) = self.counts.last() {
            self.counts.push(n + 1);
        }
        self.start.push(start);
        self.end.push(end);
        self.cat.push(cat);
        true
    }

    /// Appends a group of `count` spans that cover `covered` ns within `[start, end]` (a
    /// bucket of the session overview); false if it overlaps the previous element. A lane
    /// holds either groups or single spans.
    pub fn push_group(&mut self, start: i64, end: i64, cat: u32, count: u64, covered: i64) -> bool {
        if end < start || self.last_end().is_some_and(|e| start < e) {
            return false;
        }
        if self.covered.is_empty() {
            self.covered.push(0);
            self.counts.push(0);
        }
        let c = self.covered.last().copied().unwrap_or(0);
        self.covered.push(c.saturating_add(covered.max(0)));
        let n = self.counts.last().copied().unwrap_or(0);
        self.counts.push(n.saturating_add(count.max(1)));
        self.start.push(start);
        self.end.push(end);
        self.cat.push(cat);
        true
    }

    /// Spans standing for elements `i..j`.
    fn count(&self, i: usize, j: usize) -> u32 {
        let n = if self.counts.is_empty() {
            (j - i) as u64
        } else {
            self.counts[j] - self.counts[i]
        };
        n.min(u64::from(u32::MAX)) as u32
    }

    /// The start, end and category columns.
    pub fn columns(&self) -> (&[i64], &[i64], &[u32]) {
        (&self.start, &self.end, &self.cat)
    }

    /// A lane from its columns (as [`Lane::columns`] gives them); `None` unless they have
    /// equal lengths and hold non-overlapping spans sorted by start.
    pub fn from_columns(start: Vec<i64>, end: Vec<i64>, cat: Vec<u32>) -> Option<Lane> {
        if start.len() != end.len() || start.len() != cat.len() {
            return None;
        }
        let ordered =
            (0..start.len()).all(|i| start[i] <= end[i] && (i == 0 || end[i - 1] <= start[i]));
        if !ordered {
            return None;
        }
        let mut covered = Vec::with_capacity(start.len() + 1);
        if !start.is_empty() {
            covered.push(0i64);
            let mut c = 0i64;
            for i in 0..start.len() {
                c = c.saturating_add(end[i].saturating_sub(start[i]));
                covered.push(c);
            }
        }
        Some(Lane {
            start,
            end,
            cat,
            covered,
            counts: Vec::new(),
        })
    }

    /// Iterates `(start, end, category)` over every span.
    pub fn spans(&self) -> impl Iterator<Item = (i64, i64, u32)> + '_ {
        (0..self.len()).map(|i| (self.start[i], self.end[i], self.cat[i]))
    }

    /// The span containing `t`, if any: `(start, end, category)`.
    pub fn at(&self, t: i64) -> Option<(i64, i64, u32)> {
        let i = self.end.partition_point(|&e| e <= t);
        (i < self.len() && self.start[i] <= t).then(|| (self.start[i], self.end[i], self.cat[i]))
    }

    /// The spans overlapping `[t0, t1)`, clipped to it: `(start, end, category)`.
    pub fn clipped(&self, t0: i64, t1: i64) -> impl Iterator<Item = (i64, i64, u32)> + '_ {
        let i = self.end.partition_point(|&e| e <= t0);
        let j = self.start.partition_point(|&s| s < t1).max(i);
        (i..j).map(move |k| (self.start[k].max(t0), self.end[k].min(t1), self.cat[k]))
    }

    /// The time spans cover within `[t0, t1)` (prefix sums: O(log n)).
    pub fn covered_within(&self, t0: i64, t1: i64) -> i64 {
        if t1 <= t0 || self.is_empty() || !self.counts.is_empty() {
            return self.clipped(t0, t1).map(|(s, e, _)| e - s).sum();
        }
        let i = self.end.partition_point(|&e| e <= t0);
        let j = self.start.partition_point(|&s| s < t1).max(i);
        if i == j {
            return 0;
        }
        let mut sum = self.covered[j] - self.covered[i];
        sum -= (t0 - self.start[i]).max(0);
        sum -= (self.end[j - 1] - t1).max(0);
        sum.max(0)
    }

    /// The level-of-detail answer for `[t0, t1)` drawn `px` columns wide.
    pub fn query(&self, t0: i64, t1: i64, px: u32) -> Vec<Item> {
        let mut out: Vec<Item> = Vec::new();
        if t1 <= t0 || px == 0 {
            return out;
        }
        let col_w = t1.saturating_sub(t0) as f64 / px as f64;
        let n = self.len();
        let mut i = self.end.partition_point(|&e| e <= t0);
        // Zero-length spans (instants) at t0 are visible too.
        while i > 0 && self.end[i - 1] == t0 && self.start[i - 1] == t0 {
            i -= 1;
        }
        while i < n && self.start[i] < t1 {
            let (s, e) = (self.start[i], self.end[i]);
            let w = e.saturating_sub(s);
            let one = Item(
                s,
                e,
                self.cat[i],
                self.count(i, i + 1),
                self.covered[i + 1] - self.covered[i],
            );
            if w as f64 >= col_w {
                out.push(one);
                i += 1;
                continue;
            }
            let col = (s.max(t0).saturating_sub(t0) as f64 / col_w).floor();
            let col_end = t0.saturating_add(((col + 1.0) * col_w).ceil() as i64);
            let j = gallop(&self.start, i + 1, col_end);
            if j == i + 1 {
                out.push(one);
                i += 1;
                continue;
            }
            let cat = self.dominant(i, j);
            let covered = self.covered[j] - self.covered[i];
            let (gs, ge) = (s, self.end[j - 1]);
            let count = self.count(i, j);
            match out.last_mut() {
                Some(last)
                    if last.3 > 1 && last.2 == cat && gs.saturating_sub(last.1) as f64 <= col_w =>
                {
                    last.1 = last.1.max(ge);
                    last.3 = last.3.saturating_add(count);
                    last.4 = last.4.saturating_add(covered);
                }
                _ => out.push(Item(gs, ge, cat, count, covered)),
            }
            i = j;
        }
        out
    }

    /// Category of the longest span in `i..j` (sampled for large groups).
    fn dominant(&self, i: usize, j: usize) -> u32 {
        let step = ((j - i) / SAMPLES).max(1);
        let mut best = (i64::MIN, self.cat[i]);
        let mut k = i;
        while k < j {
            let d = self.end[k].saturating_sub(self.start[k]);
            if d > best.0 {
                best = (d, self.cat[k]);
            }
            k += step;
        }
        best.1
    }
}

/// The first index `≥ from` whose value is `≥ x` in sorted `v`: exponential search from
/// `from`, then binary search. The next column boundary is usually a few spans ahead, so this
/// touches a few neighbouring cache lines where a binary search over the whole remainder
/// would miss the cache about log₂ n times (measured: 1.5 ms → 0.26 ms per 1600-pixel query
/// of a 250 k-span lane, `benches/query.rs`).
pub fn gallop(v: &[i64], from: usize, x: i64) -> usize {
    let n = v.len();
    let mut lo = from.min(n);
    let mut hi = lo;
    let mut step = 1;
    while hi < n && v[hi] < x {
        lo = hi + 1;
        hi = hi.saturating_add(step);
        step = step.saturating_mul(2);
    }
    let hi = hi.min(n);
    lo + v[lo..hi].partition_point(|&s| s < x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clipped_spans_and_covered_time_of_a_window() {
        let mut l = Lane::default();
        for (s, e) in [(0, 10), (20, 30), (40, 50)] {
            assert!(l.push(s, e, 1));
        }
        let c: Vec<_> = l.clipped(5, 45).collect();
        assert_eq!(c, [(5, 10, 1), (20, 30, 1), (40, 45, 1)]);
        assert_eq!(l.covered_within(5, 45), 20);
        assert_eq!(l.covered_within(10, 20), 0);
        assert_eq!(l.covered_within(22, 25), 3);
        assert_eq!(l.covered_within(-100, 100), 30);
        assert_eq!(l.clipped(50, 60).count(), 0);
    }

    fn lane(spans: &[(i64, i64, u32)]) -> Lane {
        let mut l = Lane::default();
        for &(s, e, c) in spans {
            assert!(l.push(s, e, c));
        }
        l
    }

    #[test]
    fn wide_spans_come_back_exactly() {
        let l = lane(&[(0, 50, 1), (50, 100, 2), (120, 200, 3)]);
        let got = l.query(0, 200, 10);
        assert_eq!(
            got,
            vec![
                Item(0, 50, 1, 1, 50),
                Item(50, 100, 2, 1, 50),
                Item(120, 200, 3, 1, 80)
            ]
        );
        // A window cuts nothing off: items keep their true extent.
        assert_eq!(
            l.query(60, 130, 7),
            vec![Item(50, 100, 2, 1, 50), Item(120, 200, 3, 1, 80)]
        );
    }

    #[test]
    fn narrow_spans_aggregate_per_column_and_merge() {
        let mut l = Lane::default();
        for k in 0..10_000i64 {
            l.push(k * 10, k * 10 + 5, (k % 3 == 0) as u32);
        }
        let got = l.query(0, 100_000, 100);
        assert!(got.len() <= 200, "{} items", got.len());
        let count: u32 = got.iter().map(|i| i.3).sum();
        assert_eq!(count, 10_000);
        let covered: i64 = got.iter().map(|i| i.4).sum();
        assert_eq!(covered, 50_000);
        // Zoomed in far enough, every span is sent on its own.
        let fine = l.query(1000, 1100, 1000);
        assert_eq!(fine.len(), 10);
        assert!(fine.iter().all(|i| i.3 == 1));
    }

    #[test]
    fn overlapping_and_reversed_spans_are_refused() {
        let mut l = lane(&[(0, 10, 0)]);
        assert!(!l.push(5, 20, 0));
        assert!(!l.push(30, 20, 0));
        assert_eq!(l.len(), 1);
        assert_eq!(l.at(3), Some((0, 10, 0)));
        assert_eq!(l.at(10), None);
    }

    #[test]
    fn gallop_agrees_with_binary_search() {
        let v: Vec<i64> = (0..1000).map(|k| k * 3 / 2).collect();
        for from in [0, 1, 7, 500, 999, 1000, 1200] {
            for x in [-1, 0, 1, 2, 100, 749, 750, 1498, 1499, 5000] {
                let want = from.min(v.len()) + v[from.min(v.len())..].partition_point(|&s| s < x);
                assert_eq!(gallop(&v, from, x), want, "from {from} x {x}");
            }
        }
        assert_eq!(gallop(&[], 0, 5), 0);
    }

    #[test]
    fn extreme_values_do_not_panic() {
        let mut l = lane(&[(i64::MIN, -5, 1), (-5, i64::MAX, 2)]);
        assert!(!l.push(0, 1, 3));
        let got = l.query(i64::MIN, i64::MAX, 1000);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].4, i64::MAX - 4);
        assert!(!l.query(-10, 10, 20_000).is_empty());
    }

    #[test]
    fn instants_are_counted() {
        let l = lane(&[(5, 5, 7), (6, 6, 7), (90, 90, 8)]);
        let got = l.query(0, 100, 10);
        assert_eq!(got, vec![Item(5, 6, 7, 2, 0), Item(90, 90, 8, 1, 0)]);
        assert!(l.query(0, 0, 10).is_empty());
        assert!(l.query(0, 100, 0).is_empty());
    }
}
