//! The region of clock lines consistent with two-way samples, and the estimate at its centre.
//!
//! A clock that drifts linearly maps a source time `x` to an offset `O(x) = a + b·x`. Each
//! forward sample `(x, y)` says `a + b·x ≤ y`, each backward sample `a + b·x ≥ y` (delays are
//! never negative). Together they cut a convex polygon out of the `(a, b)` plane: every line
//! in it is consistent with every sample, and so is the true clock. This is the joint offset
//! and drift estimator of Duda ("Transformation of the clock to a global time scale", 1985)
//! and of Clément & Dagenais's trace synchronization (2006): both directions' convex hulls
//! bound the line, and only the hull points cut the polygon.
//!
//! The estimate is the line through the middle of the polygon's value range at the two ends
//! of the span it is used over: at each end every consistent line lies within half that
//! range of it, and the difference of two lines is largest at an end, so the larger half
//! range is a bound on the error over the whole span — minimal for a bound of that kind, and
//! honest: it holds whatever the delays were, as long as none was negative and the clock was
//! linear. Delays that are alike in both directions put the estimate close to the truth well
//! inside the bound.
//!
//! Coordinates are scaled for precision: `u` in seconds from the span's middle, `v` in ns
//! from a reference offset, the slope `s` in ns per second (ppm × 1000).

/// A point of the `(a, s)` plane: offset (ns, at `u = 0`) and slope (ns per second).
type Pt = (f64, f64);

/// A convex polygon of consistent clock lines, in scaled coordinates.
#[derive(Debug, Clone)]
pub(crate) struct Region {
    vertices: Vec<Pt>,
    /// The half-planes that cut it, `k0 + k1·a + k2·s ≤ 0`.
    cuts: Vec<(f64, f64, f64)>,
}

/// One sample in scaled coordinates: `u` s, `v` ns.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cut {
    pub u: f64,
    pub v: f64,
}

impl Region {
    /// The lines with `|s| ≤ max_slope` and `a` within `a_range`, cut by forward samples
    /// (`a + s·u ≤ v`) and backward samples (`a + s·u ≥ v`). `None` if no line fits.
    pub(crate) fn new(
        forward: &[Cut],
        backward: &[Cut],
        max_slope: f64,
        a_range: (f64, f64),
    ) -> Option<Region> {
        let (lo, hi) = a_range;
        let mut vertices = vec![
            (lo, -max_slope),
            (hi, -max_slope),
            (hi, max_slope),
            (lo, max_slope),
        ];
        let cuts: Vec<(f64, f64, f64)> = forward
            .iter()
            .map(|c| (-c.v, 1.0, c.u))
            .chain(backward.iter().map(|c| (c.v, -1.0, -c.u)))
            .collect();
        for &k in &cuts {
            vertices = clip(&vertices, k);
            if vertices.is_empty() {
                return None;
            }
        }
        Some(Region { vertices, cuts })
    }

    /// The smallest and largest value `a + s·u` a consistent line takes at `u`.
    pub(crate) fn range_at(&self, u: f64) -> (f64, f64) {
        self.vertices
            .iter()
            .map(|&(a, s)| a + s * u)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                (lo.min(v), hi.max(v))
            })
    }

    /// The smallest and largest slope of a consistent line.
    pub(crate) fn slopes(&self) -> (f64, f64) {
        self.vertices
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &(_, s)| {
                (lo.min(s), hi.max(s))
            })
    }

    /// True if the line `(a, s)` is consistent with every sample (to a thousandth of a ns).
    fn contains(&self, (a, s): Pt) -> bool {
        self.cuts.iter().all(|k| k.0 + k.1 * a + k.2 * s <= 1e-3)
    }

    /// Largest distance over `[u0, u1]` between `line` and a consistent line.
    pub(crate) fn bound_of(&self, (a, s): Pt, u0: f64, u1: f64) -> f64 {
        self.vertices
            .iter()
            .flat_map(|&(va, vs)| [u0, u1].map(|u| ((a - va) + (s - vs) * u).abs()))
            .fold(0.0, f64::max)
    }

    /// The estimate over `[u0, u1]`: `(a, s, bound)`. Of the `preferred` lines consistent with
    /// the samples (consistent lines cannot put a message sampled here before its send), the
    /// first whose bound is not more than twice the least bound any line can have; else the
    /// line through the middle of the value ranges at both ends, if consistent; else the
    /// consistent preferred line with the smallest bound; else the mean of the region's
    /// vertices (inside, by convexity). The bound is
    /// the chosen line's largest distance to the region.
    pub(crate) fn estimate(&self, u0: f64, u1: f64, preferred: &[Pt]) -> (f64, f64, f64) {
        let (a, s, least) = self.centre(u0, u1);
        let consistent: Vec<(Pt, f64)> = preferred
            .iter()
            .filter(|&&p| self.contains(p))
            .map(|&p| (p, self.bound_of(p, u0, u1)))
            .collect();
        // The first preferred line whose bound is not more than twice the least possible, or
        // the one with the smallest bound when the centre itself is not consistent.
        let first = consistent.iter().find(|c| c.1 <= 2.0 * least);
        let best = first.or_else(|| {
            (!self.contains((a, s)))
                .then(|| consistent.iter().min_by(|x, y| x.1.total_cmp(&y.1)))
                .flatten()
        });
        if let Some(&((pa, ps), b)) = best {
            return (pa, ps, b);
        }
        let line = if self.contains((a, s)) {
            (a, s)
        } else {
            let n = self.vertices.len() as f64;
            let (sa, ss) = self
                .vertices
                .iter()
                .fold((0.0, 0.0), |(x, y), &(va, vs)| (x + va, y + vs));
            (sa / n, ss / n)
        };
        (line.0, line.1, self.bound_of(line, u0, u1))
    }

    /// The line through the middle of the value ranges at both ends of `[u0, u1]`, and the
    /// larger half range: `(a, s, bound)`.
    fn centre(&self, u0: f64, u1: f64) -> (f64, f64, f64) {
        let (l0, h0) = self.range_at(u0);
        let (l1, h1) = self.range_at(u1);
        let (m0, m1) = ((l0 + h0) / 2.0, (l1 + h1) / 2.0);
        let bound = ((h0 - l0) / 2.0).max((h1 - l1) / 2.0);
        if u1 - u0 > 1e-9 {
            let s = (m1 - m0) / (u1 - u0);
            (m0 - s * u0, s, bound)
        } else {
            let (sl, sh) = self.slopes();
            let s = (sl + sh) / 2.0;
            (m0 - s * u0, s, bound)
        }
    }
}

/// Sutherland–Hodgman: the part of a convex polygon where `k0 + k1·a + k2·s ≤ 0` (with a
/// tolerance of a thousandth of a nanosecond, so a line touching a vertex keeps it).
fn clip(poly: &[Pt], k: (f64, f64, f64)) -> Vec<Pt> {
    let f = |p: Pt| k.0 + k.1 * p.0 + k.2 * p.1;
    const EPS: f64 = 1e-3;
    let mut out = Vec::with_capacity(poly.len() + 1);
    for i in 0..poly.len() {
        let (p, q) = (poly[i], poly[(i + 1) % poly.len()]);
        let (fp, fq) = (f(p), f(q));
        if fp <= EPS {
            out.push(p);
        }
        if (fp < -EPS && fq > EPS) || (fp > EPS && fq < -EPS) {
            let t = fp / (fp - fq);
            out.push((p.0 + t * (q.0 - p.0), p.1 + t * (q.1 - p.1)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cuts(v: &[(f64, f64)]) -> Vec<Cut> {
        v.iter().map(|&(u, v)| Cut { u, v }).collect()
    }

    #[test]
    fn a_band_of_width_two_gives_a_bound_of_one() {
        // Forward at v = 1, backward at v = −1 at both ends: flat lines between, s bounded.
        let f = cuts(&[(-1.0, 1.0), (1.0, 1.0)]);
        let b = cuts(&[(-1.0, -1.0), (1.0, -1.0)]);
        let r = Region::new(&f, &b, 1e6, (-1e9, 1e9)).unwrap();
        let (a, s, bound) = r.centre(-1.0, 1.0);
        assert!(a.abs() < 1e-6 && s.abs() < 1e-6, "{a} {s}");
        assert!((bound - 1.0).abs() < 1e-6, "{bound}");
        // Extrapolating doubles the width at twice the distance.
        let (_, _, far) = r.centre(-3.0, 3.0);
        assert!((far - 3.0).abs() < 1e-6, "{far}");
    }

    #[test]
    fn crossing_samples_leave_nothing() {
        let f = cuts(&[(0.0, 0.0)]);
        let b = cuts(&[(0.0, 1.0)]);
        assert!(Region::new(&f, &b, 1e6, (-1e9, 1e9)).is_none());
    }
}
