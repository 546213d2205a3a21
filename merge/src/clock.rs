//! Clock synchronization: maps each source's relative times onto the session's time base.
//!
//! Pure: no I/O. Inputs are offset samples, outputs are linear clock maps with an error bound.
//!
//! A *forward* sample is a data frame or ping: the sender stamped `t_p` on its clock, the log
//! server its receipt `t_s`, so `y = t_s − t_p = O(t_p) + d` with a delay `d ≥ 0` (CoSMoS §3).
//! A *backward* sample is an echoed ack: the server sent it at `t_s`, the client saw it at
//! `t_p`, so `y = t_s − t_p = O(t_p) − d' ≤ O(t_p)`. With a clock that drifts linearly,
//! `O(x) = a + b·x`:
//!
//! - CoSMoS takes `min y` over the forward samples ([`Fit::cosmos_min_ns`]);
//! - we take the lower convex hull of the forward points and pick the hull edge spanning their
//!   mean `x` — the line minimizing the total delay `Σ (y − O(x))` subject to `O(x) ≤ y` for all
//!   samples (the classic linear-programming estimator of offset and skew);
//! - with backward samples (ping echoes; matched messages against other hosts, see
//!   [`crate::domain`]) offset and drift are estimated jointly from both hulls: the lines
//!   consistent with every sample form a convex polygon in the (offset, drift) plane
//!   (`region`: Duda's and Clément & Dagenais's method), the truth among them. The estimate
//!   is a line that follows both directions' delay floors — one slope shared by both sides'
//!   linear-programming estimators (the clock drifts alike whichever way a sample went, so
//!   each side's samples steady the other's), else the midline of the two sides' own lines,
//!   else their slopes weighted by hull-edge length — the first that is consistent and
//!   whose bound is within twice the least possible, else the polygon's centre;
//!   [`Fit::error_bound_ns`] is its largest distance to any consistent line from the source's
//!   start to the last sample — honest whatever the delays, as long as none is negative and the
//!   clock is linear. One-way fits have none. [`fit_strict_loose`] takes the line from one set
//!   of samples and the bound from a widened one (messages against an estimate known to ± its
//!   bound).
//!
//! Processes on one host share CLOCK_MONOTONIC, so their samples are pooled in monotonic
//! coordinates (`start_mono_ns + t`): one fit per host, exact relative alignment of the
//! processes and of kernel (OS monitor) events there. Offsets compose along agent trees
//! ([`Fit::compose`]). An offset-only [`tighten`] is the last resort for messages still
//! received before their send.
//!
//! A few samples no clock line can satisfy (a glitched timestamp) are dropped rather than the
//! two-way fit: at most 1 % of one side; more say the clock is not linear, and the fit stays
//! one-way. Two-way samples are only as good as the two directions' fastest deliveries are
//! alike — the offset is off by half their difference, which no two-way method can see — so the
//! producers stamp receipts in the kernel and ping in bursts (`p5_runtime::pings`).

mod region;

/// Largest plausible drift; a steeper hull edge (too few or too close samples) falls back to
/// the CoSMoS minimum without drift.
pub const MAX_DRIFT: f64 = 1e-3;

/// How an estimate was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// The source shares the log server's CLOCK_MONOTONIC (same boot): offset known exactly
    /// from the two monotonic starts, no drift, error bound 0.
    Exact,
    /// Forward and backward hulls (offset, drift and an error bound).
    TwoWay,
    /// Lower hull of forward samples only (offset and drift, no bound).
    Hull,
    /// The CoSMoS minimum (one sample, or an implausible hull slope).
    Min,
    /// Samples plus matched messages against already-fitted clocks.
    Messages,
    /// Composed through an agent's `ClockSamples`.
    Tree,
    /// No samples at all: times stay relative to the source's start.
    None,
}

impl Method {
    /// Name stored in the database.
    pub fn name(self) -> &'static str {
        match self {
            Method::Exact => "exact",
            Method::TwoWay => "two-way",
            Method::Hull => "hull",
            Method::Min => "min",
            Method::Messages => "messages",
            Method::Tree => "tree",
            Method::None => "none",
        }
    }
}

/// A linear clock map `base(t) = t + offset + drift·t`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    /// Offset at `t = 0`, ns (where the source's zero lies on the base).
    pub offset: f64,
    /// Drift as a ratio (1e-6 = 1 ppm); positive: the source's clock runs slow.
    pub drift: f64,
    /// How it was obtained.
    pub method: Method,
    /// Forward samples used.
    pub forward: u64,
    /// Backward samples used.
    pub backward: u64,
    /// Matched application messages used as samples (against other hosts' fits).
    pub messages: u64,
    /// Bound on |estimate − truth| over the sampled range, ns (two-way fits only).
    pub error_bound_ns: Option<i64>,
    /// The CoSMoS estimate, `min(t_s − t_p)`, for comparison.
    pub cosmos_min_ns: Option<i64>,
}

impl Fit {
    /// The identity map (no samples).
    pub const NONE: Fit = Fit {
        offset: 0.0,
        drift: 0.0,
        method: Method::None,
        forward: 0,
        backward: 0,
        messages: 0,
        error_bound_ns: None,
        cosmos_min_ns: None,
    };

    /// Maps a source time onto the base.
    pub fn map(&self, t: i64) -> i64 {
        let v = t as f64 + self.offset + self.drift * t as f64;
        if v.is_finite() { v.round() as i64 } else { t }
    }

    /// Drift in parts per million.
    pub fn drift_ppm(&self) -> f64 {
        self.drift * 1e6
    }

    /// Re-expresses a fit made in coordinates `x = t + shift` for times `t`.
    pub fn shifted(&self, shift: i64) -> Fit {
        Fit {
            offset: self.offset + shift as f64 * (1.0 + self.drift),
            ..*self
        }
    }

    /// `self ∘ inner`: `inner` maps a child's clock onto this source's clock.
    pub fn compose(&self, inner: &Fit) -> Fit {
        Fit {
            offset: inner.offset * (1.0 + self.drift) + self.offset,
            drift: (1.0 + inner.drift) * (1.0 + self.drift) - 1.0,
            method: Method::Tree,
            forward: inner.forward,
            backward: inner.backward,
            messages: inner.messages,
            error_bound_ns: None,
            cosmos_min_ns: inner.cosmos_min_ns,
        }
    }
}

/// Offset samples of one clock domain: `(x, y)` with `y = t_s − t_p` at `x = t_p`.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    /// Forward (`y ≥ O(x)`).
    pub forward: Vec<(i64, i64)>,
    /// Backward (`y ≤ O(x)`).
    pub backward: Vec<(i64, i64)>,
    /// Range of `x` the fit is used over besides the samples' own and `x = 0` (the source's
    /// start); the error bound covers all of it.
    pub span: Option<(i64, i64)>,
}

impl Samples {
    /// True if there is nothing to fit.
    pub fn is_empty(&self) -> bool {
        self.forward.is_empty()
    }
}

fn cross(o: (f64, f64), a: (f64, f64), b: (f64, f64)) -> f64 {
    (a.0 - o.0) * (b.1 - o.1) - (a.1 - o.1) * (b.0 - o.0)
}

/// Lower convex hull of points (`upper = false`) or upper hull (`upper = true`), sorted by x;
/// points relative to `x0` for precision.
fn hull(points: &[(i64, i64)], upper: bool) -> Vec<(f64, f64)> {
    let mut p: Vec<(i64, i64)> = points.to_vec();
    p.sort_unstable();
    // Keep the extreme y per x.
    let mut q: Vec<(i64, i64)> = Vec::with_capacity(p.len());
    for (x, y) in p {
        match q.last_mut() {
            Some(last) if last.0 == x => {
                if (upper && y > last.1) || (!upper && y < last.1) {
                    last.1 = y;
                }
            }
            _ => q.push((x, y)),
        }
    }
    let sign = if upper { -1.0 } else { 1.0 };
    let mut h: Vec<(f64, f64)> = Vec::new();
    for (x, y) in q {
        let pt = (x as f64, y as f64);
        while h.len() >= 2 && sign * cross(h[h.len() - 2], h[h.len() - 1], pt) <= 0.0 {
            h.pop();
        }
        h.push(pt);
    }
    h
}

/// The hull edge spanning `mean`: `(a, b)` with `y = a + b·x`.
fn edge_line(h: &[(f64, f64)], mean: f64) -> (f64, f64) {
    match h {
        [] => (0.0, 0.0),
        [p] => (p.1, 0.0),
        _ => {
            let i = h
                .windows(2)
                .position(|w| mean <= w[1].0)
                .unwrap_or(h.len() - 2);
            let (p, q) = (h[i], h[i + 1]);
            let b = (q.1 - p.1) / (q.0 - p.0);
            (p.1 - b * p.0, b)
        }
    }
}

/// Length in `x` of the hull edge spanning `mean` (0 for fewer than two points).
fn edge_span(h: &[(f64, f64)], mean: f64) -> f64 {
    if h.len() < 2 {
        return 0.0;
    }
    let i = h
        .windows(2)
        .position(|w| mean <= w[1].0)
        .unwrap_or(h.len() - 2);
    h[i + 1].0 - h[i].0
}

/// The preferred two-way lines, each following the floor of both directions' delays: the
/// midline of the two directions' least-delay lines (each side's linear-programming line),
/// and one with their slopes weighted by the square of their hull edges' lengths (a slope
/// from points far apart is the surer: its error goes as the delays' spread over that length,
/// so a side with few samples, e.g. sparse ping echoes, weighs little) and the offset midway
/// between the hulls at that slope.
fn preferred_lines(
    lower: &[(f64, f64)],
    upper: &[(f64, f64)],
    (fw, bw): (Centroid, Centroid),
) -> Vec<(f64, f64)> {
    if lower.len() < 2 || upper.len() < 2 {
        return Vec::new();
    }
    let ((af, bf), (ab, bb)) = (edge_line(lower, fw.x), edge_line(upper, bw.x));
    let mut out = Vec::with_capacity(3);
    out.extend(joint_line(lower, upper, fw, bw));
    out.push(((af + ab) / 2.0, (bf + bb) / 2.0));
    let (lf, lb) = (
        edge_span(lower, fw.x).powi(2),
        edge_span(upper, bw.x).powi(2),
    );
    if lf + lb > 0.0 {
        let b = (bf * lf + bb * lb) / (lf + lb);
        let top = lower
            .iter()
            .map(|p| p.1 - b * p.0)
            .fold(f64::INFINITY, f64::min);
        let bottom = upper
            .iter()
            .map(|p| p.1 - b * p.0)
            .fold(f64::NEG_INFINITY, f64::max);
        out.push(((top + bottom) / 2.0, b));
    }
    out.retain(|(a, b)| a.is_finite() && b.abs() <= MAX_DRIFT);
    out
}

/// The mean point of one direction's samples, and how many there are.
#[derive(Debug, Clone, Copy)]
struct Centroid {
    x: f64,
    y: f64,
    n: f64,
}

impl Centroid {
    fn of(points: &[(i64, i64)]) -> Self {
        let n = points.len().max(1) as f64;
        let (sx, sy) = points
            .iter()
            .fold((0.0, 0.0), |(sx, sy), p| (sx + p.0 as f64, sy + p.1 as f64));
        Centroid {
            x: sx / n,
            y: sy / n,
            n: points.len() as f64,
        }
    }
}

/// One slope for both directions (the clock drifts the same whichever way a sample went):
/// the slope minimizing the total delay of every sample of both sides, `Σ_fwd (y − a_f − b·x)
/// + Σ_bwd (a_b + b·x − y)` with `a_f` the forward floor and `a_b` the backward ceiling at
/// that slope — the linear-programming estimator of each side with the slope shared, so each
/// side's samples steady the other's — and the offset midway between floor and ceiling. The
/// total is convex and piecewise linear in `b`, its corners at the hulls' edge slopes.
fn joint_line(
    lower: &[(f64, f64)],
    upper: &[(f64, f64)],
    fw: Centroid,
    bw: Centroid,
) -> Option<(f64, f64)> {
    let floor = |b: f64| {
        lower
            .iter()
            .map(|p| p.1 - b * p.0)
            .fold(f64::INFINITY, f64::min)
    };
    let ceiling = |b: f64| {
        upper
            .iter()
            .map(|p| p.1 - b * p.0)
            .fold(f64::NEG_INFINITY, f64::max)
    };
    let total =
        |b: f64| fw.n * (fw.y - b * fw.x - floor(b)) + bw.n * (ceiling(b) - bw.y + b * bw.x);
    let slopes = |h: &[(f64, f64)]| -> Vec<f64> {
        h.windows(2)
            .map(|w| (w[1].1 - w[0].1) / (w[1].0 - w[0].0))
            .collect()
    };
    let b = slopes(lower)
        .into_iter()
        .chain(slopes(upper))
        .filter(|b| b.is_finite() && b.abs() <= MAX_DRIFT)
        .map(|b| (total(b), b))
        .min_by(|x, y| x.0.total_cmp(&y.0))?
        .1;
    Some(((floor(b) + ceiling(b)) / 2.0, b))
}

/// Fits offset and drift to a domain's samples (in the domain's coordinates).
pub fn fit(s: &Samples) -> Fit {
    // Work relative to the first sample time: hull tests multiply coordinates, and absolute
    // times of hours would cost f64 precision.
    let Some(x0) = s.forward.iter().map(|p| p.0).min() else {
        return Fit::NONE;
    };
    let rel = |v: &[(i64, i64)]| -> Vec<(i64, i64)> {
        v.iter().map(|&(x, y)| (x.saturating_sub(x0), y)).collect()
    };
    let (lo, hi) = s.span.unwrap_or((0, 0));
    let mut f = fit_relative(&Samples {
        forward: rel(&s.forward),
        backward: rel(&s.backward),
        span: Some((lo.min(0).saturating_sub(x0), hi.saturating_sub(x0))),
    });
    // y = a + b·(x − x0) = (a − b·x0) + b·x
    f.offset -= f.drift * x0 as f64;
    f
}

fn fit_relative(s: &Samples) -> Fit {
    fit_relative_with(s, 2)
}

/// Where the hull `h` (sorted by x) passes `x`, if within its range.
fn envelope(h: &[(f64, f64)], x: f64) -> Option<f64> {
    let i = h.windows(2).position(|w| w[0].0 <= x && x <= w[1].0)?;
    let (p, q) = (h[i], h[i + 1]);
    Some(p.1 + (q.1 - p.1) * (x - p.0) / (q.0 - p.0))
}

/// The samples less the few that no clock line can satisfy: backward samples above the
/// forward samples' lower hull (every consistent line passes below it), or forward samples
/// below the backward samples' upper hull — whichever side has fewer, if at most 1 % of that
/// side (one glitched timestamp must not cost a host its two-way fit, many say the clock is
/// not linear). `None` if there are none or too many.
fn without_outliers(s: &Samples, lower: &[(f64, f64)], upper: &[(f64, f64)]) -> Option<Samples> {
    let above = |&&(x, y): &&(i64, i64)| envelope(lower, x as f64).is_some_and(|v| y as f64 > v);
    let below = |&&(x, y): &&(i64, i64)| envelope(upper, x as f64).is_some_and(|v| (y as f64) < v);
    let bad_b: Vec<(i64, i64)> = s.backward.iter().filter(above).copied().collect();
    let bad_f: Vec<(i64, i64)> = s.forward.iter().filter(below).copied().collect();
    let allowed = |n: usize| (n / 100).max(1);
    let (drop_f, drop_b) = match (bad_f.len(), bad_b.len()) {
        (0, 0) => return None,
        (f, b) if b > 0 && (f == 0 || b <= f) && b <= allowed(s.backward.len()) => (vec![], bad_b),
        (f, _) if f > 0 && f <= allowed(s.forward.len()) => (bad_f, vec![]),
        _ => return None,
    };
    let keep = |v: &[(i64, i64)], out: Vec<(i64, i64)>| -> Vec<(i64, i64)> {
        let out: std::collections::BTreeSet<(i64, i64)> = out.into_iter().collect();
        v.iter().filter(|p| !out.contains(p)).copied().collect()
    };
    Some(Samples {
        forward: keep(&s.forward, drop_f),
        backward: keep(&s.backward, drop_b),
        span: s.span,
    })
}

fn fit_relative_with(s: &Samples, retries: u8) -> Fit {
    if s.forward.is_empty() {
        return Fit::NONE;
    }
    let cosmos = s.forward.iter().map(|p| p.1).min();
    let lower = hull(&s.forward, false);
    let fw = Centroid::of(&s.forward);
    let (mut a, mut b) = edge_line(&lower, fw.x);
    let mut method = Method::Hull;
    if lower.len() < 2 || b.abs() > MAX_DRIFT || !a.is_finite() {
        (a, b) = (cosmos.unwrap_or(0) as f64, 0.0);
        method = Method::Min;
    }
    let f = Fit {
        offset: a,
        drift: b,
        method,
        forward: s.forward.len() as u64,
        backward: 0,
        messages: 0,
        error_bound_ns: None,
        cosmos_min_ns: cosmos,
    };
    if s.backward.is_empty() {
        return f;
    }
    let upper = hull(&s.backward, true);
    // Inconsistent samples (no line fits between them) give no bound: one-way fit.
    // The preferred lines follow the floor of each direction's delays; the first consistent
    // with every sample whose bound is within twice the least possible is taken.
    let mid = preferred_lines(&lower, &upper, (fw, Centroid::of(&s.backward)));
    match two_way(&lower, &upper, s.span, &mid) {
        Some((offset, drift, bound)) => Fit {
            offset,
            drift,
            method: Method::TwoWay,
            backward: s.backward.len() as u64,
            error_bound_ns: Some(bound),
            ..f
        },
        None => match without_outliers(s, &lower, &upper) {
            Some(clean) if retries > 0 => fit_relative_with(&clean, retries - 1),
            _ => f,
        },
    }
}

/// Rounding of the samples' integer nanoseconds and of the fit's arithmetic, added to every
/// bound, ns.
const BOUND_MARGIN_NS: f64 = 2.0;

/// The region of lines consistent with both hulls (see [`region`]) in scaled coordinates,
/// with the frame: `(region, xc, yr, u0, u1)` — `u = (x − xc)/1e9`, `v = y − yr`, and the span
/// `[u0, u1]`: the samples' range widened to `span`. `None` when no line fits between the hulls.
fn two_way_region(
    lower: &[(f64, f64)],
    upper: &[(f64, f64)],
    span: Option<(i64, i64)>,
) -> Option<(region::Region, f64, f64, f64, f64)> {
    let (first, last) = (lower.first()?, lower.last()?);
    let (ufirst, ulast) = (upper.first()?, upper.last()?);
    let mut x0 = first.0.min(ufirst.0);
    let mut x1 = last.0.max(ulast.0);
    if let Some((lo, hi)) = span {
        x0 = x0.min(lo as f64);
        x1 = x1.max(hi as f64);
    }
    let xc = (x0 + x1) / 2.0;
    let yr = lower.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let cut = |&(x, y): &(f64, f64)| region::Cut {
        u: (x - xc) / 1e9,
        v: y - yr,
    };
    let fwd: Vec<region::Cut> = lower.iter().map(cut).collect();
    let bwd: Vec<region::Cut> = upper.iter().map(cut).collect();
    let umax = fwd
        .iter()
        .chain(&bwd)
        .map(|c| c.u.abs())
        .fold((x1 - x0) / 2e9, f64::max);
    let max_slope = MAX_DRIFT * 1e9;
    let vmin = bwd.iter().map(|c| c.v).fold(f64::INFINITY, f64::min);
    let vmax = fwd.iter().map(|c| c.v).fold(f64::NEG_INFINITY, f64::max);
    let reach = max_slope * umax + 1.0;
    let r = region::Region::new(&fwd, &bwd, max_slope, (vmin - reach, vmax + reach))?;
    Some((r, xc, yr, (x0 - xc) / 1e9, (x1 - xc) / 1e9))
}

/// The joint offset and drift estimate from both hulls: `(offset at x = 0, drift, error bound
/// in ns over the span)`, `preferred` if it is consistent (see [`region::Region::estimate`]).
fn two_way(
    lower: &[(f64, f64)],
    upper: &[(f64, f64)],
    span: Option<(i64, i64)>,
    preferred: &[(f64, f64)],
) -> Option<(f64, f64, i64)> {
    let (r, xc, yr, u0, u1) = two_way_region(lower, upper, span)?;
    // y = a + b·x  ⇔  v = (a + b·xc − yr) + (b·1e9)·u
    let pref: Vec<(f64, f64)> = preferred
        .iter()
        .map(|&(a, b)| (a + b * xc - yr, b * 1e9))
        .collect();
    let (a, sl, bound) = r.estimate(u0, u1, &pref);
    let drift = sl / 1e9;
    let offset = yr + a - drift * xc;
    let bound = bound + BOUND_MARGIN_NS;
    (offset.is_finite() && drift.is_finite() && bound.is_finite())
        .then(|| (offset, drift, bound.ceil() as i64))
}

/// A fit whose line comes from `strict` samples and whose bound from `loose` ones: matched
/// messages against another host's *estimate* (strict: the line cannot put them before their
/// send) and against that estimate widened by its bound (loose: the truth is surely
/// consistent with them). Falls back to the loose fit where the strict samples admit no
/// line; `None` where neither gives a two-way fit.
pub fn fit_strict_loose(strict: &Samples, loose: &Samples) -> Option<Fit> {
    let lf = fit(loose);
    if lf.method != Method::TwoWay {
        return None;
    }
    let sf = fit(strict);
    if sf.method != Method::TwoWay {
        return Some(lf);
    }
    let bound = bound_of_line(&sf, loose)?;
    Some(Fit {
        error_bound_ns: Some(bound),
        ..sf
    })
}

/// The largest distance over `s`'s span (widened to `x = 0`) between `line` and a line
/// consistent with `s`, ns.
fn bound_of_line(line: &Fit, s: &Samples) -> Option<i64> {
    let x0 = s.forward.iter().map(|p| p.0).min()?;
    let rel = |v: &[(i64, i64)]| -> Vec<(i64, i64)> {
        v.iter().map(|&(x, y)| (x.saturating_sub(x0), y)).collect()
    };
    let (lo, hi) = s.span.unwrap_or((0, 0));
    let span = (lo.min(0).saturating_sub(x0), hi.saturating_sub(x0));
    let lower = hull(&rel(&s.forward), false);
    let upper = hull(&rel(&s.backward), true);
    let (r, xc, yr, u0, u1) = two_way_region(&lower, &upper, Some(span))?;
    // y = offset + drift·x = (offset + drift·x0) + drift·x_rel
    let a = line.offset + line.drift * x0 as f64 + line.drift * xc - yr;
    let b = r.bound_of((a, line.drift * 1e9), u0, u1) + BOUND_MARGIN_NS;
    b.is_finite().then(|| b.ceil() as i64)
}

/// True if some clock line fits between the forward samples and the backward samples.
/// Messages against another clock's estimate can make the two sides cross.
pub fn consistent(s: &Samples) -> bool {
    if s.forward.is_empty() || s.backward.is_empty() {
        return true;
    }
    let x0 = s.forward.iter().map(|p| p.0).min().unwrap_or(0);
    let rel = |v: &[(i64, i64)]| -> Vec<(i64, i64)> {
        v.iter().map(|&(x, y)| (x.saturating_sub(x0), y)).collect()
    };
    let lower = hull(&rel(&s.forward), false);
    let upper = hull(&rel(&s.backward), true);
    two_way(&lower, &upper, None, &[]).is_some()
}

/// A causality constraint from one matched message between clock domains: after mapping,
/// `recv_end − send_start` must be ≥ 0; `slack` is that difference under the current fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Constraint {
    /// Sending domain.
    pub from: usize,
    /// Receiving domain.
    pub to: usize,
    /// `recv_end − send_start` on the base, ns (negative: a violation).
    pub slack: i64,
}

/// Tightens domain offsets with message constraints (Trace Compass-style): finds shifts
/// `δ` so that `slack + δ[to] − δ[from] ≥ 0` for as many messages as possible, moving each
/// domain in proportion to its `weight` (its uncertainty; 0 pins it) and never beyond
/// `limit[d]` (its error bound; `None` = unlimited). Returns the shifts; run
/// [`violations`] afterwards to count what remains.
pub fn tighten(
    constraints: &[Constraint],
    weight: &[f64],
    limit: &[Option<i64>],
    rounds: usize,
) -> Vec<i64> {
    let n = weight.len();
    let mut delta = vec![0i64; n];
    // Only the tightest constraint per ordered pair matters for a pure offset shift.
    let mut worst: std::collections::BTreeMap<(usize, usize), i64> = Default::default();
    for c in constraints {
        if c.from >= n || c.to >= n || c.from == c.to {
            continue;
        }
        let e = worst.entry((c.from, c.to)).or_insert(c.slack);
        *e = (*e).min(c.slack);
    }
    let clamp = |d: usize, v: i64| match limit[d] {
        Some(l) => v.clamp(-l, l),
        None => v,
    };
    for _ in 0..rounds {
        let mut changed = false;
        for (&(from, to), &slack) in &worst {
            let cur = slack + delta[to] - delta[from];
            if cur >= 0 {
                continue;
            }
            let need = -cur;
            let (wf, wt) = (weight[from].max(0.0), weight[to].max(0.0));
            if wf + wt <= 0.0 {
                continue;
            }
            let share_to = ((need as f64) * wt / (wf + wt)).ceil() as i64;
            let share_from = need - share_to;
            let nt = clamp(to, delta[to] + share_to);
            let nf = clamp(from, delta[from] - share_from);
            if nt != delta[to] || nf != delta[from] {
                changed = true;
            }
            delta[to] = nt;
            delta[from] = nf;
        }
        if !changed {
            break;
        }
    }
    delta
}

/// Messages still received before they were sent after shifting domains by `delta`.
pub fn violations(constraints: &[Constraint], delta: &[i64]) -> u64 {
    constraints
        .iter()
        .filter(|c| {
            let d = |i: usize| delta.get(i).copied().unwrap_or(0);
            c.slack + d(c.to) - d(c.from) < 0
        })
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A synthetic source: true offset `o` and drift `b`; forward samples every `step` ns with
    /// delays drawn by the caller; backward samples likewise.
    fn synth(o: f64, b: f64, delays: &[(u32, u32)], step: i64, base: i64) -> Samples {
        let mut s = Samples::default();
        for (i, &(df, db)) in delays.iter().enumerate() {
            let x = base + i as i64 * step;
            let truth = o + b * x as f64;
            s.forward.push((x, (truth + df as f64).round() as i64));
            let xb = x + step / 2;
            let tb = o + b * xb as f64;
            s.backward.push((xb, (tb - db as f64).round() as i64));
        }
        s
    }

    #[test]
    fn one_sample_is_the_cosmos_minimum() {
        let s = Samples {
            forward: vec![(10, 500)],
            backward: vec![],
            span: None,
        };
        let f = fit(&s);
        assert_eq!(f.method, Method::Min);
        assert_eq!(f.map(10), 510);
        assert_eq!(f.cosmos_min_ns, Some(500));
        assert_eq!(fit(&Samples::default()).method, Method::None);
    }

    #[test]
    fn exact_samples_recover_offset_and_drift() {
        let delays = vec![(0, 0); 50];
        let f = fit(&synth(5e9, 50e-6, &delays, 20_000_000, 1_000_000));
        assert!((f.drift_ppm() - 50.0).abs() < 0.01, "{f:?}");
        assert!((f.offset - 5e9).abs() < 2.0, "{f:?}");
        assert!(f.error_bound_ns.unwrap() <= 3, "{f:?}");
    }

    /// Uniform delays of 0.5–3 ms (the multi-host test's jitter relay), 1,000 samples a side
    /// over 7 s, 100 seeds: the slope both sides share is nearer the true drift than the
    /// midline of each side's own least-delay line, and `fit` takes it.
    #[test]
    fn a_shared_slope_steadies_the_drift_under_uniform_jitter() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut uniform = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let (drift, span) = (100e-6, 7e9);
        let (mut shared, mut midline) = (0.0, 0.0);
        for _ in 0..100 {
            let mut s = Samples::default();
            for _ in 0..1000 {
                let (x, d) = (uniform() * span, 5e5 + 2.5e6 * uniform());
                s.forward.push((x as i64, (drift * x + d) as i64));
                let (x, d) = (uniform() * span, 5e5 + 2.5e6 * uniform());
                s.backward.push((x as i64, (drift * x - d) as i64));
            }
            let (lower, upper) = (hull(&s.forward, false), hull(&s.backward, true));
            let (fw, bw) = (Centroid::of(&s.forward), Centroid::of(&s.backward));
            let (_, b) = joint_line(&lower, &upper, fw, bw).expect("a shared slope");
            let f = fit(&s);
            assert_eq!(f.method, Method::TwoWay);
            assert!((f.drift - b).abs() < 1e-12, "fit takes the shared slope");
            shared += (b - drift).abs();
            let ((_, bf), (_, bb)) = (edge_line(&lower, fw.x), edge_line(&upper, bw.x));
            midline += ((bf + bb) / 2.0 - drift).abs();
        }
        eprintln!(
            "mean drift error: shared {:.3} ppm, midline {:.3} ppm",
            shared / 100.0 * 1e6,
            midline / 100.0 * 1e6
        );
        assert!(shared < 0.9 * midline, "{shared} vs {midline}");
    }

    #[test]
    fn composition_and_shift_agree_with_direct_maps() {
        let outer = Fit {
            offset: 1000.0,
            drift: 1e-4,
            ..Fit::NONE
        };
        let inner = Fit {
            offset: -300.0,
            drift: -5e-5,
            ..Fit::NONE
        };
        let c = outer.compose(&inner);
        for t in [0i64, 1_000_000, 3_000_000_000] {
            assert!((c.map(t) - outer.map(inner.map(t))).abs() <= 1);
            let s = outer.shifted(777);
            assert!((s.map(t) - outer.map(t + 777)).abs() <= 1);
        }
    }

    #[test]
    fn crossing_hulls_are_inconsistent() {
        let mut s = Samples {
            forward: vec![(0, 100), (10, 100)],
            backward: vec![(5, 90)],
            span: None,
        };
        assert!(consistent(&s));
        s.backward.push((6, 120));
        assert!(!consistent(&s));
    }

    #[test]
    fn tightening_removes_violations_within_limits() {
        // Domain 1 is 1 ms early: its receipts appear before the sends of domain 0.
        let cs = vec![
            Constraint {
                from: 0,
                to: 1,
                slack: -1_000_000,
            },
            Constraint {
                from: 0,
                to: 1,
                slack: -400_000,
            },
            Constraint {
                from: 1,
                to: 0,
                slack: 3_000_000,
            },
        ];
        assert_eq!(violations(&cs, &[0, 0]), 2);
        let d = tighten(&cs, &[0.0, 1.0], &[None, None], 50);
        assert_eq!(d, vec![0, 1_000_000]);
        assert_eq!(violations(&cs, &d), 0);
        // A limit that forbids the full shift leaves violations to count.
        let d = tighten(&cs, &[0.0, 1.0], &[None, Some(500_000)], 50);
        assert_eq!(violations(&cs, &d), 1);
        // Contradictory constraints (a round trip shorter than zero) cannot be met.
        let bad = vec![
            Constraint {
                from: 0,
                to: 1,
                slack: -10,
            },
            Constraint {
                from: 1,
                to: 0,
                slack: -10,
            },
        ];
        let d = tighten(&bad, &[1.0, 1.0], &[None, None], 50);
        assert!(violations(&bad, &d) >= 1);
    }

    /// Delays whose floor `d` is reached in both directions at both ends of the run: the
    /// bound is half the smallest round trip (2d/2 = d, plus 1 %: the ends are pinned 12.5 ms
    /// apart) — tight — and the
    /// estimate, between symmetric floors, is on the truth.
    #[test]
    fn symmetric_floors_give_a_bound_of_half_the_round_trip() {
        let (o, b, d) = (2.5e9, -80e-6, 20_000.0);
        let mut s = Samples::default();
        for i in 0..200i64 {
            let x = i * 25_000_000;
            let truth = o + b * x as f64;
            // Every tenth sample and the last at the floor, the others up to 300 µs above it.
            let extra = if i % 10 == 0 || i == 199 {
                0.0
            } else {
                ((i * 7919) % 300_000) as f64
            };
            s.forward.push((x, (truth + d + extra).round() as i64));
            let xb = x + 12_500_000;
            let tb = o + b * xb as f64;
            s.backward.push((xb, (tb - d - extra).round() as i64));
        }
        let f = fit(&s);
        assert_eq!(f.method, Method::TwoWay);
        let bound = f.error_bound_ns.unwrap();
        assert!(bound >= d as i64 && bound <= d as i64 + 200, "{f:?}");
        for x in [0i64, 2_500_000_000, 4_975_000_000] {
            let err = (f.map(x) as f64 - (x as f64 + o + b * x as f64)).abs();
            assert!(err <= 60.0, "err {err} at {x}: {f:?}");
        }
    }

    /// One backward sample 30 µs above the forward floor (a glitched timestamp) leaves no
    /// consistent line; it is dropped, and the fit is two-way again, its bound holding.
    #[test]
    fn one_impossible_sample_is_dropped() {
        let delays = vec![(5_000, 5_000); 200];
        let (o, b) = (2e9, 100e-6);
        let mut s = synth(o, b, &delays, 10_000_000, 0);
        let x = 1_000_000_000i64;
        s.backward.push((x, (o + b * x as f64 + 30_000.0) as i64));
        let f = fit(&s);
        assert_eq!(f.method, Method::TwoWay, "{f:?}");
        assert_eq!(f.backward, 200);
        let err = (f.map(x) as f64 - (x as f64 + o + b * x as f64)).abs();
        assert!(err <= f.error_bound_ns.unwrap() as f64, "{err} {f:?}");
        // Many impossible samples are not outliers: no two-way fit.
        for i in 0..5i64 {
            let x = 100_000_000 * (i + 1);
            s.backward.push((x, (o + b * x as f64 + 30_000.0) as i64));
        }
        assert_ne!(fit(&s).method, Method::TwoWay);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Messages against another host's estimate that is off by up to its bound: the line
        /// from the strict samples with the bound from the loose ones still contains the truth,
        /// and the line is consistent with every strict sample (no message before its send).
        #[test]
        fn strict_line_loose_bound_contains_the_truth(
            o in -1e9f64..1e9,
            ppm in -100.0f64..100.0,
            other_err in -50_000i64..50_000,
            other_bound in 50_000i64..80_000,
            delays in prop::collection::vec((5_000u32..400_000, 5_000u32..400_000), 4..80),
        ) {
            let b = ppm * 1e-6;
            let (mut strict, mut loose) = (Samples::default(), Samples::default());
            for (i, &(df, db)) in delays.iter().enumerate() {
                let x = 1_000_000 + i as i64 * 40_000_000;
                let t = o + b * x as f64;
                // The counterpart's estimate is `other_err` off the truth.
                let yf = (t + df as f64) as i64 + other_err;
                strict.forward.push((x, yf));
                loose.forward.push((x, yf + other_bound));
                let xb = x + 20_000_000;
                let tb = o + b * xb as f64;
                let yb = (tb - db as f64) as i64 + other_err;
                strict.backward.push((xb, yb));
                loose.backward.push((xb, yb - other_bound));
            }
            let f = fit_strict_loose(&strict, &loose).expect("a two-way fit");
            let bound = f.error_bound_ns.unwrap() as f64 + 1.0;
            let last = 1_000_000 + delays.len() as i64 * 40_000_000;
            for x in [0, 1_000_000, last / 2, last] {
                let err = (f.map(x) as f64 - (x as f64 + o + b * x as f64)).abs();
                prop_assert!(err <= bound, "x {} err {} bound {} {:?}", x, err, bound, f);
            }
            if consistent(&strict) {
                for &(x, y) in &strict.forward {
                    prop_assert!((f.map(x) - x) <= y + 2, "forward ({}, {}) {:?}", x, y, f);
                }
                for &(x, y) in &strict.backward {
                    prop_assert!((f.map(x) - x) >= y - 2, "backward ({}, {}) {:?}", x, y, f);
                }
            }
        }

        /// Known offsets, drifts up to ±100 ppm, sessions starting up to ~3 h into the source's
        /// life and random positive delays in both
        /// directions: the two-way estimate is within its stated bound everywhere in the
        /// sampled range, and the one-way estimate (whose edge may be extrapolated over up to half
        /// the range) within twice the largest delay.
        #[test]
        fn offsets_are_recovered_within_the_stated_bound(
            o in -5e9f64..5e9,
            ppm in -100.0f64..100.0,
            delays in prop::collection::vec((0u32..200_000, 0u32..200_000), 2..120),
            step in 1_000_000i64..500_000_000,
            base in 0i64..10_000_000_000_000,
        ) {
            let b = ppm * 1e-6;
            let s = synth(o, b, &delays, step, base);
            let f = fit(&s);
            prop_assert_eq!(f.method, Method::TwoWay);
            let bound = f.error_bound_ns.unwrap() as f64 + 1.0;
            let xs: Vec<i64> = s.forward.iter().map(|p| p.0).collect();
            let (lo, hi) = (xs[0] + step / 2, xs[xs.len() - 1]);
            for x in [0, lo, (lo + hi) / 2, hi] {
                let truth = x as f64 + o + b * x as f64;
                let err = (f.map(x) as f64 - truth).abs();
                prop_assert!(err <= bound, "x {} err {} bound {} fit {:?}", x, err, bound, f);
            }
            let one = fit(&Samples { forward: s.forward.clone(), ..Samples::default() });
            let max_delay = delays.iter().map(|d| d.0).max().unwrap() as f64;
            for &x in &xs {
                let truth = x as f64 + o + b * x as f64;
                let err = (one.map(x) as f64 - truth).abs();
                prop_assert!(err <= 2.0 * max_delay + 2.0, "one-way err {} > {}", err, max_delay);
            }
        }
    }
}
