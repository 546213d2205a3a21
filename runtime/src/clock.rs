//! Time: the hot-path tick source and the flusher's tick → nanosecond conversion.
//!
//! The hot path reads the cheapest honest clock there is: the raw time-stamp counter
//! (`rdtsc`, ≈ 9 ns here) when the CPU advertises an invariant TSC (`constant_tsc` and
//! `nonstop_tsc` in `/proc/cpuinfo`, x86-64 only), else `clock_gettime(CLOCK_MONOTONIC)` in
//! nanoseconds. Either way a slot stores *ticks relative to the process origin*
//! ([`Origin`]), so 60 bits are plenty (years) and the top 4 bits are free for the record kind.
//!
//! Converting ticks to nanoseconds happens later, on the flusher thread, Tracy/Perfetto style:
//! each drain takes a `(ticks, CLOCK_MONOTONIC)` [`Snapshot`] *after* reading the rings' heads,
//! so every drained tick lies before the newest snapshot and is converted by interpolating
//! between the two snapshots that bracket it ([`Timebase`]). Each segment's slope is positive
//! and the segments meet exactly at the snapshots, so the conversion is monotone; ticks outside
//! the (bounded) history are extrapolated with the nearest segment. Output times are
//! nanoseconds since the origin on the CLOCK_MONOTONIC time base, which is what the wire
//! carries and what `start_mono_ns` in the handshake anchors.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the hot path reads the TSC (decided once at initialisation).
static USE_TSC: AtomicBool = AtomicBool::new(false);

/// Most snapshots kept for conversion (at one per drain, minutes of history).
pub const MAX_HISTORY: usize = 4096;

/// True if `/proc/cpuinfo`-style text lists both `constant_tsc` and `nonstop_tsc`.
pub fn cpuinfo_has_invariant_tsc(cpuinfo: &str) -> bool {
    let flags = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or_default();
    let mut constant = false;
    let mut nonstop = false;
    for f in flags.split_whitespace() {
        constant |= f == "constant_tsc";
        nonstop |= f == "nonstop_tsc";
    }
    constant && nonstop
}

/// True if this machine has an invariant TSC the hot path may use.
pub fn invariant_tsc() -> bool {
    cfg!(target_arch = "x86_64")
        && std::fs::read_to_string("/proc/cpuinfo")
            .map(|s| cpuinfo_has_invariant_tsc(&s))
            .unwrap_or(false)
}

/// Chooses the tick source for this process (call before any ring is created).
pub fn select(tsc: bool) {
    USE_TSC.store(tsc && cfg!(target_arch = "x86_64"), Ordering::Relaxed);
}

/// Whether ticks are TSC ticks (else CLOCK_MONOTONIC nanoseconds).
#[inline]
pub fn uses_tsc() -> bool {
    USE_TSC.load(Ordering::Relaxed)
}

/// Reads the time-stamp counter (or the monotonic clock off x86-64).
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions on x86-64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        mono_ns()
    }
}

fn clock_ns(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; both clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec)
}

/// CLOCK_MONOTONIC in nanoseconds.
#[inline]
pub fn mono_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC) as u64
}

/// CLOCK_REALTIME in nanoseconds since the Unix epoch (a display label only).
pub fn wall_ns() -> i64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// Current raw ticks of the selected source.
#[inline(always)]
pub fn now(tsc: bool) -> u64 {
    if tsc { rdtsc() } else { mono_ns_outlined() }
}

/// CLOCK_MONOTONIC kept out of line, so the TSC hot path needs no stack frame for it.
#[cold]
#[inline(never)]
fn mono_ns_outlined() -> u64 {
    mono_ns()
}

/// Current raw ticks of this process's tick source (what [`crate::ticks`] returns).
#[inline]
pub fn ticks() -> u64 {
    now(uses_tsc())
}

/// The process origin: the instant all relative times count from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    /// Ticks are TSC ticks.
    pub tsc: bool,
    /// Raw ticks at the origin.
    pub ticks0: u64,
    /// CLOCK_MONOTONIC at the origin, ns.
    pub mono0: u64,
    /// CLOCK_REALTIME at the origin, ns since the epoch.
    pub wall0: i64,
}

impl Origin {
    /// Captures the origin now. Async-signal-safe (used in the atfork child handler).
    pub fn capture(tsc: bool) -> Self {
        let wall0 = wall_ns();
        let raw = raw_pair(tsc);
        Origin {
            tsc,
            ticks0: raw.0,
            mono0: raw.1,
            wall0,
        }
    }

    /// A snapshot relative to this origin.
    pub fn snapshot(&self) -> Snapshot {
        let (t, m) = raw_pair(self.tsc);
        Snapshot {
            ticks: t.wrapping_sub(self.ticks0) as i64,
            ns: m.saturating_sub(self.mono0),
        }
    }

    /// Raw ticks as ticks since this origin (may be negative).
    pub fn rel_ticks(&self, raw: u64) -> i64 {
        raw.wrapping_sub(self.ticks0) as i64
    }

    /// Nanoseconds since the origin on CLOCK_MONOTONIC (used for `t_p` stamps).
    pub fn elapsed_ns(&self) -> u64 {
        mono_ns().saturating_sub(self.mono0)
    }
}

/// Reads (ticks, CLOCK_MONOTONIC) as close together as possible: the TSC is read on both
/// sides of the clock call and the tightest of a few tries is kept, its midpoint used.
fn raw_pair(tsc: bool) -> (u64, u64) {
    if !tsc {
        let m = mono_ns();
        return (m, m);
    }
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..4 {
        let a = rdtsc();
        let m = mono_ns();
        let b = rdtsc();
        let gap = b.wrapping_sub(a);
        if gap < best.0 {
            best = (gap, a.wrapping_add(gap / 2), m);
        }
        if gap < 200 {
            break;
        }
    }
    (best.1, best.2)
}

/// One (ticks, ns) pair, both relative to the origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    /// Ticks since the origin.
    pub ticks: i64,
    /// CLOCK_MONOTONIC ns since the origin.
    pub ns: u64,
}

/// Piecewise-linear tick → ns conversion over a bounded history of snapshots.
#[derive(Debug, Clone)]
pub struct Timebase {
    tsc: bool,
    history: VecDeque<Snapshot>,
}

impl Timebase {
    /// Starts with the origin itself, (0, 0).
    pub fn new(tsc: bool) -> Self {
        let mut history = VecDeque::with_capacity(64);
        history.push_back(Snapshot { ticks: 0, ns: 0 });
        Self { tsc, history }
    }

    /// Number of snapshots held.
    pub fn len(&self) -> usize {
        self.history.len()
    }

    /// Never empty (the origin is always there until pushed out).
    pub fn is_empty(&self) -> bool {
        self.history.is_empty()
    }

    /// Adds a snapshot. Snapshots that do not advance both ticks and ns are ignored, which
    /// keeps every slope positive and the conversion monotone.
    pub fn push(&mut self, s: Snapshot) {
        if let Some(last) = self.history.back()
            && (s.ticks <= last.ticks || s.ns <= last.ns)
        {
            return;
        }
        if self.history.len() == MAX_HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(s);
    }

    /// A converter that caches the last segment used (drained ticks mostly ascend).
    pub fn converter(&self) -> Converter<'_> {
        Converter {
            tb: self,
            seg: None,
        }
    }

    /// Converts one relative tick value (see [`Converter::ns`]).
    pub fn to_ns(&self, ticks: i64) -> u64 {
        self.converter().ns(ticks)
    }

    fn segment(&self, ticks: i64) -> Segment {
        let h = &self.history;
        if h.len() < 2 {
            // Only the origin: no rate known yet; treat ticks as ns (exact for the
            // monotonic source, and never reached for the TSC because each drain pushes a
            // snapshot before converting).
            let a = h.front().copied().unwrap_or(Snapshot { ticks: 0, ns: 0 });
            return Segment::identity(a);
        }
        let i = h.partition_point(|s| s.ticks <= ticks);
        if i >= h.len() {
            // Past the newest snapshot: extrapolate from it with the last segment's slope.
            let (a, b) = (h[h.len() - 2], h[h.len() - 1]);
            return Segment {
                a: b,
                first: false,
                b_ticks: None,
                b_ns: u64::MAX,
                mult: slope(a, b),
            };
        }
        let lo = i.saturating_sub(1);
        let (a, b) = (h[lo], h[lo + 1]);
        Segment {
            a,
            first: lo == 0,
            b_ticks: Some(b.ticks),
            b_ns: b.ns,
            mult: slope(a, b),
        }
    }
}

/// ns per tick between two snapshots, as fixed point with [`FRAC`] fractional bits.
fn slope(a: Snapshot, b: Snapshot) -> u128 {
    let dt = (b.ticks - a.ticks).max(1) as u128;
    let dn = (b.ns.saturating_sub(a.ns) as u128).min(1 << 60);
    (dn << FRAC) / dt
}

/// Fractional bits of a segment's slope (segments span at most 2^60 ns, so `dn << FRAC`
/// and `ticks × slope` stay within 128 bits for any 60-bit tick distance).
const FRAC: u32 = 48;

/// Conversion with a cached segment.
#[derive(Debug)]
pub struct Converter<'a> {
    tb: &'a Timebase,
    seg: Option<Segment>,
}

impl Converter<'_> {
    /// Converts ticks since the origin into ns since the origin. Monotone non-decreasing in
    /// `ticks`; times before the origin clamp to 0.
    #[inline]
    pub fn ns(&mut self, ticks: i64) -> u64 {
        if !self.tb.tsc {
            return ticks.max(0) as u64;
        }
        match self.seg {
            Some(s) if s.covers(ticks) => s.apply(ticks),
            _ => {
                let s = self.tb.segment(ticks);
                self.seg = Some(s);
                s.apply(ticks)
            }
        }
    }
}

/// One interpolation segment: `ns = a.ns + round((t - a.ticks) * mult / 2^FRAC)`, clamped to `b.ns` inside
/// the segment so that rounding can never step past the next snapshot.
#[derive(Debug, Clone, Copy)]
struct Segment {
    a: Snapshot,
    /// End of the segment (exclusive) and its ns; `None` end means open to the right.
    b_ticks: Option<i64>,
    b_ns: u64,
    /// Open to the left (the first segment extrapolates backwards).
    first: bool,
    mult: u128,
}

impl Segment {
    fn identity(a: Snapshot) -> Self {
        Segment {
            a,
            first: true,
            b_ticks: None,
            b_ns: u64::MAX,
            mult: 1 << FRAC,
        }
    }

    #[inline]
    fn covers(&self, t: i64) -> bool {
        (t >= self.a.ticks || self.first) && self.b_ticks.is_none_or(|b| t < b)
    }

    #[inline]
    fn apply(&self, t: i64) -> u64 {
        // Fast path (nearly always: `t` at or after the segment start, a slope below 2^16
        // ns per tick): one widening 64×64 multiplication instead of i128 arithmetic.
        if let (Some(d), Ok(m)) = (t.checked_sub(self.a.ticks), u64::try_from(self.mult))
            && d >= 0
        {
            let off = ((d as u128 * m as u128 + (1 << (FRAC - 1))) >> FRAC).min(u64::MAX as u128);
            return self.a.ns.saturating_add(off as u64).min(self.b_ns);
        }
        let d = t as i128 - self.a.ticks as i128;
        // Round to nearest (monotone, and exact at the snapshots despite a truncated slope).
        let off = (d.saturating_mul(self.mult as i128) + (1 << (FRAC - 1))) >> FRAC;
        let v = self.a.ns as i128 + off;
        v.clamp(0, self.b_ns as i128).min(u64::MAX as i128) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tb(points: &[(i64, u64)]) -> Timebase {
        let mut t = Timebase::new(true);
        for &(ticks, ns) in points {
            t.push(Snapshot { ticks, ns });
        }
        t
    }

    #[test]
    fn cpuinfo_flags() {
        let s = "processor: 0\nflags\t\t: fpu tsc constant_tsc nonstop_tsc rdtscp\n";
        assert!(cpuinfo_has_invariant_tsc(s));
        assert!(!cpuinfo_has_invariant_tsc("flags: fpu tsc constant_tsc\n"));
        assert!(!cpuinfo_has_invariant_tsc(""));
    }

    #[test]
    fn interpolates_between_snapshots() {
        // 3 ticks per ns until 3000 ticks, then 2 ticks per ns.
        let t = tb(&[(3000, 1000), (5000, 2000)]);
        assert_eq!(t.to_ns(0), 0);
        assert_eq!(t.to_ns(1500), 500);
        assert_eq!(t.to_ns(3000), 1000);
        assert_eq!(t.to_ns(4000), 1500);
        assert_eq!(t.to_ns(5000), 2000);
    }

    #[test]
    fn extrapolates_with_nearest_segment() {
        let t = tb(&[(3000, 1000), (5000, 2000)]);
        // After the last snapshot: slope of the last segment (2 ticks/ns).
        assert_eq!(t.to_ns(7000), 3000);
        // Before the origin: clamps at zero.
        assert_eq!(t.to_ns(-300), 0);
        // Before the first kept snapshot once the origin was pushed out: first segment.
        let mut t = Timebase::new(true);
        for i in 1..=(MAX_HISTORY as i64 + 10) {
            t.push(Snapshot {
                ticks: i * 1000,
                ns: i as u64 * 500,
            });
        }
        assert_eq!(t.len(), MAX_HISTORY);
        assert_eq!(t.to_ns(5000), 2500);
        assert_eq!(t.to_ns(0), 0);
    }

    #[test]
    fn only_origin_is_identity() {
        let t = Timebase::new(true);
        assert_eq!(t.to_ns(1234), 1234);
        let m = Timebase::new(false);
        assert_eq!(m.to_ns(777), 777);
        assert_eq!(m.to_ns(-5), 0);
    }

    #[test]
    fn rejects_non_advancing_snapshots() {
        let t = tb(&[(1000, 1000), (900, 1100), (1100, 1000), (2000, 3000)]);
        assert_eq!(t.len(), 3);
        assert_eq!(t.to_ns(1500), 2000);
    }

    #[test]
    fn monotone_over_irregular_history() {
        // Deterministic pseudo-random snapshots with varying rates.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut pts = Vec::new();
        let (mut t, mut n) = (0i64, 0u64);
        for _ in 0..200 {
            t += 1 + (next() % 100_000) as i64;
            n += 1 + next() % 40_000;
            pts.push((t, n));
        }
        let timebase = tb(&pts);
        let mut conv = timebase.converter();
        let mut prev = 0;
        let mut probe = -50_000i64;
        while probe < t + 200_000 {
            let v = conv.ns(probe);
            assert!(v >= prev, "not monotone at {probe}: {v} < {prev}");
            assert_eq!(
                v,
                timebase.to_ns(probe),
                "cached segment disagrees at {probe}"
            );
            prev = v;
            probe += 1 + (next() % 997) as i64;
        }
        // Exact at every snapshot.
        for &(ticks, ns) in &pts {
            assert_eq!(timebase.to_ns(ticks), ns);
        }
    }

    #[test]
    fn real_snapshots_advance() {
        let o = Origin::capture(invariant_tsc());
        let mut tbase = Timebase::new(o.tsc);
        let a = o.snapshot();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = o.snapshot();
        tbase.push(a);
        tbase.push(b);
        assert!(b.ns >= a.ns + 2_000_000);
        assert!(tbase.to_ns(b.ticks) >= 2_000_000);
    }
}
