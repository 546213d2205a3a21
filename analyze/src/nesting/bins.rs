//! The scoreboard (\[P5\] §5.1 ScoreNestings): per (parent caller, node, child callee), a
//! histogram of the delay from the parent call's arrival to the child call, in exponential
//! bins. Its size depends on the nodes, not on the trace's length. Votes are summed in a
//! [`Scoreboard`] and read from its finished [`Scores`]; [`BinLut`] gives a delay's bin.

use crate::hash::FxHashMap;
use crate::trace::{NodeId, Time};
use std::hash::Hash;

/// Exponential delay bins: bin `k` holds delays in `[d0·1.05^k, d0·1.05^(k+1))`; delays
/// below `d0` fall in bin 0 and delays beyond the last bin in the last.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bins {
    /// The first bin's lower edge (ns).
    pub first_ns: f64,
    /// How many bins.
    pub count: usize,
}

impl Bins {
    /// The paper's bins: 340 from 1 ms (to about 4.5 h; the paper says 2 h).
    pub const PAPER: Bins = Bins {
        first_ns: 1e6,
        count: 340,
    };
    /// Ours: from 1 µs, so that p5's microsecond delays resolve; 466 bins reach 2.3 h.
    pub const FINE: Bins = Bins {
        first_ns: 1e3,
        count: 466,
    };

    /// The bin of a delay.
    pub fn of(&self, delay: Time) -> usize {
        let d = delay as f64;
        if d <= self.first_ns {
            return 0;
        }
        let k = (ln(d / self.first_ns) * (1.0 / 1.05f64.ln())) as usize;
        k.min(self.count - 1)
    }

    /// The table [`BinLut::of`] reads: the same bin as [`Bins::of`] for every delay, faster.
    pub fn lut(&self) -> BinLut {
        // The smallest delay of every bin, by a binary search on `of`, which grows with it.
        let bounds: Vec<Time> = (0..self.count)
            .map(|k| {
                let (mut lo, mut hi): (Time, Time) = (0, Time::MAX / 2);
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if self.of(mid) >= k {
                        hi = mid;
                    } else {
                        lo = mid + 1;
                    }
                }
                lo
            })
            .collect();
        let first = (self.first_ns.max(1.0) as Time).max(1);
        let base = cell_of(first);
        let top = cell_of(bounds[self.count - 1].max(first)) + 1;
        let cells = (base..=top)
            .map(|c| {
                // The smallest whole delay in cell `c`.
                let lo = f64::from_bits(c << CELL_SHIFT).ceil() as Time;
                self.of(lo) as u16
            })
            .collect();
        BinLut {
            first,
            base,
            cells,
            bounds,
        }
    }
}

/// How many low bits of a delay's `f64` a [`BinLut`] cell ignores: it keeps the exponent
/// and the mantissa's first 7 bits, so a cell spans a ratio of at most 1 + 1/128, less than
/// a bin's 1.05: at most one bin edge falls inside a cell.
const CELL_SHIFT: u32 = 45;

fn cell_of(delay: Time) -> u64 {
    (delay as f64).to_bits() >> CELL_SHIFT
}

/// [`Bins::of`] as a table (nesting takes a bin per candidate and pass; a logarithm each
/// was a third of the assignment's time): the bin at the start of the delay's cell, and
/// one comparison with the next bin's smallest delay.
#[derive(Debug, Clone)]
pub struct BinLut {
    first: Time,
    base: u64,
    cells: Vec<u16>,
    /// The smallest delay of each bin.
    bounds: Vec<Time>,
}

impl BinLut {
    /// How many bins.
    pub fn count(&self) -> usize {
        self.bounds.len()
    }

    /// The smallest delay (ns) of each bin.
    pub fn bounds(&self) -> &[Time] {
        &self.bounds
    }

    /// The bin of a delay: exactly [`Bins::of`]'s.
    #[inline]
    pub fn of(&self, delay: Time) -> usize {
        if delay <= self.first {
            return 0;
        }
        let last = self.bounds.len() - 1;
        let Some(&k) = self.cells.get((cell_of(delay) - self.base) as usize) else {
            return last;
        };
        let k = k as usize;
        if k < last && delay >= self.bounds[k + 1] {
            k + 1
        } else {
            k
        }
    }
}

/// Mantissa table of [`ln`]: for `m0 = 1 + j/128`, `(ln m0, 1/m0)`.
static LN_TABLE: std::sync::LazyLock<[(f64, f64); 128]> = std::sync::LazyLock::new(|| {
    std::array::from_fn(|j| {
        let m0 = 1.0 + j as f64 / 128.0;
        (m0.ln(), 1.0 / m0)
    })
});

/// The natural logarithm of a finite `x` > 1 (what the bins need), within 1e-12 of
/// `f64::ln` and faster (nesting takes one per candidate and pass; the whole run is 2–6 %
/// faster with it): `x = m·2^e`,
/// `ln x = e·ln 2 + ln m0 + ln(1 + r)` with `m0` the mantissa's first 7 bits from a table,
/// `r = m/m0 − 1 < 1/128`, and five terms of the series.
fn ln(x: f64) -> f64 {
    let bits = x.to_bits();
    let e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let m = f64::from_bits((bits & ((1u64 << 52) - 1)) | (1023u64 << 52));
    let (ln_m0, inv_m0) = LN_TABLE[((bits >> 45) & 127) as usize];
    let r = m * inv_m0 - 1.0;
    let series = r * (1.0 - r * (0.5 - r * (1.0 / 3.0 - r * (0.25 - r * 0.2))));
    e as f64 * std::f64::consts::LN_2 + ln_m0 + series
}

/// A scoreboard's key: (parent's caller, node, child's callee).
pub type Key = (NodeId, NodeId, NodeId);

/// Histograms of delays per (parent's caller, node, child's callee): of the call delays
/// and, made with `returns`, of the return gaps too, in one row per key — call
/// bins, then return bins and the row's total votes — so that a candidate costs one lookup.
#[derive(Debug, Clone, Default)]
pub struct Scoreboard<K = Key> {
    bins: usize,
    returns: bool,
    slots: FxHashMap<K, Vec<f64>>,
}

impl<K: Hash + Eq + Copy> Scoreboard<K> {
    /// An empty scoreboard of `bins` call-delay bins per histogram and, with `returns`, as
    /// many return-gap bins.
    pub fn new(bins: usize, returns: bool) -> Scoreboard<K> {
        Scoreboard {
            bins,
            returns,
            slots: FxHashMap::default(),
        }
    }

    fn width(&self) -> usize {
        if self.returns {
            2 * self.bins + 1
        } else {
            self.bins
        }
    }

    fn row_mut(&mut self, key: K) -> &mut Vec<f64> {
        let w = self.width();
        self.slots.entry(key).or_insert_with(|| vec![0.0; w])
    }

    /// Adds `w` at `bin` of the call-delay histogram of `key` (and to its total).
    pub fn add(&mut self, key: K, bin: usize, w: f64) {
        let (bins, returns) = (self.bins, self.returns);
        let row = self.row_mut(key);
        row[bin] += w;
        if returns {
            row[2 * bins] += w;
        }
    }

    /// Adds `w` at `bin` of the call delays and at `ret_bin` of the return gaps of `key`.
    pub fn add_with_return(&mut self, key: K, bin: usize, ret_bin: usize, w: f64) {
        let bins = self.bins;
        debug_assert!(self.returns);
        let row = self.row_mut(key);
        row[bin] += w;
        row[bins + ret_bin] += w;
        row[2 * bins] += w;
    }

    /// The value at `bin` of the call-delay histogram of `key` (0 if none).
    pub fn get(&self, key: K, bin: usize) -> f64 {
        self.slots.get(&key).map_or(0.0, |h| h[bin])
    }

    /// What scoring reads ([`Scores`]): each histogram smoothed with a Gaussian of `sigma`
    /// bins cut at 3 sigma (\[P5\] §7.5.6: it helps under clock skew; 0: as it is), call
    /// delays and return gaps each on their own, the return gaps as shares of the key's
    /// votes, and each half's typical value.
    pub fn scores(self, sigma: f64) -> Scores<K> {
        let kernel = (sigma > 0.0).then(|| gaussian(sigma));
        let (bins, returns) = (self.bins, self.returns);
        let halves = if returns { 2 } else { 1 };
        let mut buf = vec![0.0; bins];
        let rows = self
            .slots
            .into_iter()
            .map(|(k, h)| {
                let mut out = Vec::with_capacity(halves * (bins + 1));
                let total = if returns { h[2 * bins] } else { 1.0 };
                let share = if total > 0.0 { 1.0 / total } else { 0.0 };
                let mut typical = [0.0f32; 2];
                let parts = h.chunks_exact(bins).zip([1.0, share]);
                for ((half, scale), typ) in parts.zip(&mut typical) {
                    let half = match &kernel {
                        Some(kernel) => {
                            smooth_into(half, kernel, &mut buf);
                            &buf[..]
                        }
                        None => half,
                    };
                    let (sum, squares) = half
                        .iter()
                        .fold((0.0, 0.0), |(s, q), &v| (s + v, q + v * v));
                    if sum > 0.0 {
                        *typ = (squares / sum * scale) as f32;
                    }
                    out.extend(half.iter().map(|&v| (v * scale) as f32));
                }
                out.extend_from_slice(&typical[..halves]);
                (k, out.into_boxed_slice())
            })
            .collect();
        Scores {
            bins,
            returns,
            rows,
        }
    }
}

/// A finished [`Scoreboard`] as scoring reads it, in single precision (half the cache a
/// candidate's lookup touches; the votes were summed in double): per key the call-delay
/// histogram, with return gaps each return bin's share of the key's votes, then each half's
/// typical value.
#[derive(Debug, Clone, Default)]
pub struct Scores<K = Key> {
    bins: usize,
    returns: bool,
    rows: FxHashMap<K, Box<[f32]>>,
}

impl<K: Hash + Eq + Copy> Scores<K> {
    /// The row of `key`: call bins, then, with return gaps, return shares; then the typical
    /// values.
    #[inline]
    pub fn row(&self, key: K) -> Option<&[f32]> {
        self.rows.get(&key).map(|r| &r[..])
    }

    /// The value at call bin `bin` of `key`'s row (0 if none).
    pub fn get(&self, key: K, bin: usize) -> f64 {
        self.row(key).map_or(0.0, |r| r[bin] as f64)
    }

    /// The share of `row`'s votes at return bin `ret_bin` (a row of [`Scores::row`] of a
    /// scoreboard with return gaps).
    #[inline]
    pub fn return_share(&self, row: &[f32], ret_bin: usize) -> f64 {
        row[self.bins + ret_bin] as f64
    }

    /// What a candidate typically reads at the call delays of `row` — their values' mean
    /// weighted by themselves, Σv² / Σv. A candidate whose call delay is not known (a half
    /// the trace lost, [`super::repair`]) scores a share of it
    /// ([`super::assign::UNKNOWN_SHARE`]); `root_below` compares with it.
    #[inline]
    pub fn typical(&self, row: &[f32]) -> f64 {
        let halves = if self.returns { 2 } else { 1 };
        row[halves * self.bins] as f64
    }

    /// [`Scores::typical`] of the return shares of `row` (a scoreboard with return gaps).
    #[inline]
    pub fn typical_share(&self, row: &[f32]) -> f64 {
        row[2 * self.bins + 1] as f64
    }

    /// What a candidate typically scores in `row`: [`Scores::typical`], times
    /// [`Scores::typical_share`] when the scoreboard has return gaps.
    pub fn typical_score(&self, row: &[f32]) -> f64 {
        let share = if self.returns {
            self.typical_share(row)
        } else {
            1.0
        };
        self.typical(row) * share
    }
}

/// A Gaussian of `sigma` bins cut at 3 sigma, normalised to sum 1 (`2r + 1` weights).
pub fn gaussian(sigma: f64) -> Vec<f64> {
    let r = (3.0 * sigma).ceil() as usize;
    let k: Vec<f64> = (0..=2 * r)
        .map(|i| {
            let x = i as f64 - r as f64;
            (-x * x / (2.0 * sigma * sigma)).exp()
        })
        .collect();
    let sum: f64 = k.iter().sum();
    k.into_iter().map(|w| w / sum).collect()
}

/// `row` convolved with `kernel` (from [`gaussian`]) into `out` (same length, zeroed here);
/// mass beyond either end is dropped.
pub fn smooth_into(row: &[f64], kernel: &[f64], out: &mut [f64]) {
    let r = kernel.len() / 2;
    out.iter_mut().for_each(|o| *o = 0.0);
    for (i, &v) in row.iter().enumerate().filter(|(_, v)| **v != 0.0) {
        for (j, &k) in kernel.iter().enumerate() {
            if let Some(o) = (i + j).checked_sub(r).and_then(|a| out.get_mut(a)) {
                *o += v * k;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_logarithm_agrees_with_the_library() {
        let mut x = 1.0 + 1e-9;
        while x < 1e16 {
            let (ours, std) = (ln(x), x.ln());
            assert!(
                (ours - std).abs() < 1e-12 * std.max(1.0),
                "{x}: {ours} {std}"
            );
            x *= 1.000_37;
        }
        // Every bin edge of ours lands in its bin, a hair below it in the one before.
        let b = Bins::FINE;
        for k in 1..b.count {
            let edge = b.first_ns * 1.05f64.powi(k as i32);
            assert_eq!(b.of((edge * (1.0 + 1e-9)).ceil() as Time), k, "edge {k}");
            assert_eq!(
                b.of((edge * (1.0 - 1e-9)).floor() as Time),
                k - 1,
                "below {k}"
            );
        }
    }

    /// The table gives `of`'s bin for every delay: around every bin's edge, across each
    /// octave and beyond both ends, for both kinds of bins.
    #[test]
    fn the_table_agrees_with_the_bins() {
        for b in [Bins::FINE, Bins::PAPER] {
            let lut = b.lut();
            let mut delays: Vec<Time> = vec![Time::MIN, -5, 0, 1, 999, 1000, 1001, Time::MAX];
            for &e in &lut.bounds {
                delays.extend((e - 3..=e + 3).filter(|&d| d >= 0));
            }
            let mut d = 1.0f64;
            while d < 1e18 {
                delays.push(d as Time);
                d *= 1.0037;
            }
            for d in delays {
                assert_eq!(lut.of(d), b.of(d), "{b:?} at {d}");
            }
        }
    }

    #[test]
    fn bins_are_exponential_and_clamped() {
        let b = Bins::PAPER;
        assert_eq!(b.of(-5), 0);
        assert_eq!(b.of(500_000), 0);
        assert_eq!(b.of(1_000_000), 0);
        assert_eq!(b.of(1_060_000), 1);
        assert_eq!(b.of(1_000_000_000_000_000), 339);
        // 2 h: bin 323 of the paper's 340 (they reach 4.5 h), 465 of our 466.
        assert_eq!(b.of(7_200_000_000_000), 323);
        assert_eq!(Bins::FINE.of(7_200_000_000_000), 465);
        assert_eq!(Bins::FINE.of(1_100), 1);
    }

    #[test]
    fn return_gaps_share_a_row_with_the_call_delays() {
        let mut s = Scoreboard::new(10, true);
        s.add_with_return((0, 1, 2), 3, 5, 3.0);
        s.add_with_return((0, 1, 2), 4, 6, 1.0);
        s.add_with_return((5, 1, 2), 3, 5, 1.0);
        assert_eq!(s.get((0, 1, 2), 3), 3.0);
        let raw = s.clone().scores(0.0);
        let row = raw.row((0, 1, 2)).unwrap();
        assert_eq!((row[3], row[4]), (3.0, 1.0));
        assert_eq!(raw.return_share(row, 5), 0.75);
        assert_eq!(raw.return_share(row, 3), 0.0);
        assert_eq!(raw.return_share(raw.row((5, 1, 2)).unwrap(), 5), 1.0);
        assert!(raw.row((9, 9, 9)).is_none());
        // Smoothing keeps each half's mass in that half (the return shares still sum to 1).
        let smooth = s.scores(1.0);
        let row = smooth.row((0, 1, 2)).unwrap();
        let (calls, shares) = (
            row[..10].iter().sum::<f32>(),
            row[10..20].iter().sum::<f32>(),
        );
        assert!(
            (calls - 4.0).abs() < 1e-5 && (shares - 1.0).abs() < 1e-6,
            "{calls} {shares}"
        );
        assert!(smooth.return_share(row, 5) < 0.75 && smooth.return_share(row, 8) > 0.0);
    }

    #[test]
    fn smoothing_keeps_the_mass_and_spreads_it() {
        let mut s = Scoreboard::new(40, false);
        s.add((0, 1, 2), 20, 1.0);
        let s = s.scores(2.0);
        let h: Vec<f64> = (0..40).map(|i| s.get((0, 1, 2), i)).collect();
        assert!((h.iter().sum::<f64>() - 1.0).abs() < 1e-6);
        assert!(h[20] > h[21] && h[21] > h[23] && h[23] > 0.0);
        assert!((h[19] - h[21]).abs() < 1e-7);
    }
}
