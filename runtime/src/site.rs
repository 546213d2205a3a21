//! Call sites of scope sensors and their adaptive throttling (TAU's rule).
//!
//! `p5.h`'s `P5_SCOPE(id)` gives each instrumented scope a static [`Site`] in the program's
//! own data: the sensor id, calls, timed calls and their ticks, and a state. The guard runs
//! inline in the instrumented code (see `p5.h`): a recorded call stamps the TSC and writes
//! its enter and exit slots straight into the thread's ring; only a full ring, the first
//! event of a thread and the rare transitions below call into the runtime (with
//! `-DP5_CALL_RECORD`, recorded calls use [`p5_site_enter`] and [`p5_site_exit`]).
//!
//! ```text
//! state AUTO       record every call; at exit, once `timed ≥ N` and `ticks < timed·T`
//!                  (mean below T): p5_site_throttle → THROTTLED
//! state ALWAYS     pinned on by the selection file: record every call, never throttle
//! state THROTTLED  count the call (no clock read); every 64th call is timed, and a timed
//!                  call longer than T is recorded (enter and exit) — the mean stays known;
//!                  for 4096 calls after a call longer than T (before throttling, or a
//!                  timed one after) the site times every call instead, so long calls
//!                  that come in runs are each recorded
//! state COUNT      pinned off by the selection file: THROTTLED from the first call, and
//!                  always only every 64th call timed
//! ```
//!
//! With `P5_THROTTLE=N,T,all` the sample mask ([`SAMPLE_MASK_NOW`]) is 0: every throttled
//! (and count-only) call is timed, so every call longer than T is recorded, at two clock
//! reads per call.
//!
//! A long call of a throttled site is recorded at its exit (enter and exit together), after
//! the calls recorded inside it; merge nests those under it (`merge::intervals`, late calls).
//!
//! Why no clock read on most throttled calls: on this machine one `rdtsc` costs about as
//! much as a tiny function (≈ 9 ns a read against ≈ 4 ns for a leaf call); timing every
//! throttled call takes the Lua workload from 2.6× to 4.1× its uninstrumented time on a
//! quiet machine (`-DP5_SAMPLE_MASK=0`, `cargo bench -p p5-runtime --bench lua`). So only a
//! site that has just shown a long call pays for timing every call, and only for a while: a
//! tiny function preempted once (a long call too) goes back to sampling after 4096 calls.
//! The price: a long call that is neither sampled nor within 4096 calls after another long
//! one (or a long call before throttling) goes unrecorded, unless `,all` is asked for.
//!
//! Counters are updated with relaxed loads and stores, not locked read-modify-writes: exact
//! for a site used by one thread, possibly short by a few calls when threads race on it.
//! Throttled and count-only sites are put on a lock-free list ([`listed`]) that the flusher
//! reports as `Calls` events (wire event kind 10), so merge can store each sensor's calls and
//! when it was throttled.

use crate::record::Kind;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

/// Record every call; throttle when the rule says so.
pub const AUTO: u32 = 0;
/// Pinned on: record every call, never throttle.
pub const ALWAYS: u32 = 1;
/// Throttled by the rule: count calls, record long sampled ones.
pub const THROTTLED: u32 = 2;
/// Pinned off: counted from the first call like a throttled site.
pub const COUNT: u32 = 3;
/// Throttled calls with `calls & SAMPLE_MASK == 0` are timed.
pub const SAMPLE_MASK: u64 = 63;
/// After a call longer than the bound a throttled site times every call for this many calls.
pub const LONG_WINDOW: u64 = 4096;

/// One scope sensor's call site; layout shared with `struct p5_site` in `p5.h`.
#[repr(C)]
#[derive(Debug)]
pub struct Site {
    /// Sensor id (set by the guard's first call).
    pub sensor: AtomicU64,
    /// Calls begun.
    pub calls: AtomicU64,
    /// Calls timed (every recorded call, and the sampled throttled ones).
    pub timed: AtomicU64,
    /// Summed duration of the timed calls, in clock ticks.
    pub ticks: AtomicU64,
    /// [`AUTO`], [`ALWAYS`], [`THROTTLED`] or [`COUNT`].
    pub state: AtomicU32,
    /// Non-zero once on the report list.
    pub listed: AtomicU32,
    /// Raw ticks when throttled (or first counted).
    pub since: AtomicU64,
    /// Calls longer than the bound recorded (before throttling, and timed ones after).
    pub recorded: AtomicU64,
    /// A throttled site times every call while `calls` is below this: [`LONG_WINDOW`] calls
    /// past the last call longer than the bound.
    pub long_until: AtomicU64,
    /// Next site on the report list.
    pub next: AtomicPtr<Site>,
}

impl Site {
    /// A site in state `state`.
    pub const fn new(sensor: u64, state: u32) -> Self {
        Site {
            sensor: AtomicU64::new(sensor),
            calls: AtomicU64::new(0),
            timed: AtomicU64::new(0),
            ticks: AtomicU64::new(0),
            state: AtomicU32::new(state),
            listed: AtomicU32::new(0),
            since: AtomicU64::new(0),
            recorded: AtomicU64::new(0),
            long_until: AtomicU64::new(0),
            next: AtomicPtr::new(std::ptr::null_mut()),
        }
    }
}

/// Calls before the rule applies (0: throttling off, or the tick rate not measured yet).
/// Read by `p5.h`'s inline guards.
#[unsafe(export_name = "p5_throttle_calls")]
pub static THROTTLE_CALLS: AtomicU64 = AtomicU64::new(0);
/// The rule's mean-duration bound in ticks (`u64::MAX` until the flusher has measured the
/// tick rate, so nothing is throttled or recorded as long before then).
#[unsafe(export_name = "p5_throttle_ticks")]
pub static THROTTLE_TICKS: AtomicU64 = AtomicU64::new(u64::MAX);

/// Throttled calls with `calls & mask == 0` are timed: [`SAMPLE_MASK`], or 0 with
/// `P5_THROTTLE=N,T,all`. Read by `p5.h`'s inline guards (unless built with
/// `-DP5_SAMPLE_MASK=…`).
#[unsafe(export_name = "p5_sample_mask")]
pub static SAMPLE_MASK_NOW: AtomicU64 = AtomicU64::new(SAMPLE_MASK);

/// Head of the report list (sites are static, never freed).
static LIST: AtomicPtr<Site> = AtomicPtr::new(std::ptr::null_mut());

/// Sets the bound in ticks from the configured rule and a measured tick rate (`ticks` in
/// `elapsed_ns`), then arms the rule (flusher, after each clock snapshot). Without a rule
/// (`P5_THROTTLE=off`) only pinned count-only sites count, with TAU's 10 µs as their bound.
pub fn calibrate(rule: Option<crate::config::Throttle>, ticks: i64, elapsed_ns: u64) {
    if ticks <= 0 || elapsed_ns < 1_000_000 {
        return;
    }
    calibrate_over(rule, ticks, elapsed_ns);
}

/// [`calibrate`] over any interval of at least 100 µs (the flusher's first, short one).
pub fn calibrate_over(rule: Option<crate::config::Throttle>, ticks: i64, elapsed_ns: u64) {
    if ticks <= 0 || elapsed_ns < 100_000 {
        return;
    }
    let ns = rule.unwrap_or_default().ns;
    let t = (ns as u128 * ticks as u128 / elapsed_ns as u128).min(u32::MAX as u128) as u64;
    let mask = match rule.is_some_and(|r| r.all) {
        true => 0,
        false => SAMPLE_MASK,
    };
    SAMPLE_MASK_NOW.store(mask, Ordering::Relaxed);
    THROTTLE_TICKS.store(t.max(1), Ordering::Relaxed);
    THROTTLE_CALLS.store(rule.map_or(0, |r| r.calls), Ordering::Relaxed);
}

/// Puts `site` on the report list once.
fn list(site: &'static Site) {
    if site.listed.swap(1, Ordering::AcqRel) != 0 {
        return;
    }
    let p = site as *const Site as *mut Site;
    let mut head = LIST.load(Ordering::Acquire);
    loop {
        site.next.store(head, Ordering::Relaxed);
        match LIST.compare_exchange_weak(head, p, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(h) => head = h,
        }
    }
}

/// One reported site: what a `Calls` event carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// Sensor id.
    pub sensor: u64,
    /// Raw ticks when throttled.
    pub since: u64,
    /// Calls begun.
    pub calls: u64,
    /// Calls timed.
    pub timed: u64,
    /// Their summed ticks.
    pub ticks: u64,
    /// Long calls recorded while throttled.
    pub recorded: u64,
    /// Pinned count-only by the selection file (not throttled by the rule).
    pub pinned: bool,
}

/// The listed sites, newest first.
pub fn listed() -> Vec<Report> {
    let mut out = Vec::new();
    let mut p = LIST.load(Ordering::Acquire);
    // SAFETY: only `&'static Site`s are ever put on the list.
    while let Some(s) = unsafe { p.as_ref() } {
        out.push(Report {
            sensor: s.sensor.load(Ordering::Relaxed),
            since: s.since.load(Ordering::Relaxed),
            calls: s.calls.load(Ordering::Relaxed),
            timed: s.timed.load(Ordering::Relaxed),
            ticks: s.ticks.load(Ordering::Relaxed),
            recorded: s.recorded.load(Ordering::Relaxed),
            pinned: s.state.load(Ordering::Relaxed) == COUNT,
        });
        p = s.next.load(Ordering::Acquire);
    }
    out
}

/// Valid `&'static Site` from a C pointer, or `None`.
///
/// # Safety
/// `site` is null or points at a `struct p5_site` with static storage.
unsafe fn site_ref(site: *mut Site) -> Option<&'static Site> {
    // SAFETY: per the contract.
    unsafe { site.cast_const().as_ref() }
}

/// The rule fired at the exit of a recorded call: AUTO → THROTTLED (idempotent).
///
/// # Safety
/// `site` is null or a static `struct p5_site`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_site_throttle(site: *mut Site) {
    // SAFETY: per the contract.
    let Some(s) = (unsafe { site_ref(site) }) else {
        return;
    };
    throttle(s);
}

/// Throttles `s` if it is still in state AUTO.
pub fn throttle(s: &'static Site) {
    if s.state
        .compare_exchange(AUTO, THROTTLED, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok()
    {
        s.since.store(crate::clock::rdtsc(), Ordering::Relaxed);
        list(s);
    }
}

/// First call of a count-only (pinned off) site: note the time and list it.
///
/// # Safety
/// `site` is null or a static `struct p5_site`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_site_list(site: *mut Site) {
    // SAFETY: per the contract.
    let Some(s) = (unsafe { site_ref(site) }) else {
        return;
    };
    if s.listed.load(Ordering::Acquire) == 0 {
        let _ = s.since.compare_exchange(
            0,
            crate::clock::rdtsc(),
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
        list(s);
    }
}

/// A timed throttled call lasted longer than the bound: records it as an enter at `t0` and
/// an exit at `t1` (raw TSC ticks).
///
/// # Safety
/// `site` is null or a static `struct p5_site`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_site_long(site: *mut Site, t0: u64, t1: u64) {
    // SAFETY: per the contract.
    let Some(s) = (unsafe { site_ref(site) }) else {
        return;
    };
    saw_long(s);
    let id = s.sensor.load(Ordering::Relaxed);
    crate::sensor::emit_raw(Kind::Enter, t0, id);
    crate::sensor::emit_raw(Kind::Exit, t1, id);
}

/// A recorded call of an unthrottled site lasted longer than the bound: counts it, and opens
/// the window of [`LONG_WINDOW`] calls in which the site, once throttled, times every call.
///
/// # Safety
/// `site` is null or a static `struct p5_site`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_site_saw_long(site: *mut Site) {
    // SAFETY: per the contract.
    if let Some(s) = unsafe { site_ref(site) } {
        saw_long(s);
    }
}

fn saw_long(s: &Site) {
    s.recorded
        .store(s.recorded.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    let calls = s.calls.load(Ordering::Relaxed);
    s.long_until.store(calls + LONG_WINDOW, Ordering::Relaxed);
}

/// A recorded call of a site begins (guards built with `-DP5_CALL_RECORD`): stamps the TSC,
/// records the enter, returns the stamp.
///
/// # Safety
/// `site` is null or a static `struct p5_site`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_site_enter(site: *mut Site, sensor: u64) -> u64 {
    let _ = site;
    let t = crate::clock::rdtsc();
    crate::sensor::emit_raw(Kind::Enter, t, sensor);
    t
}

/// A recorded call of a site ends (`-DP5_CALL_RECORD`): records the exit, adds the call's duration to the site and
/// applies the throttling rule.
///
/// # Safety
/// `site` is null or a static `struct p5_site`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn p5_site_exit(site: *mut Site, sensor: u64, t0: u64) {
    let t = crate::clock::rdtsc();
    crate::sensor::emit_raw(Kind::Exit, t, sensor);
    // SAFETY: per the contract.
    let Some(s) = (unsafe { site_ref(site) }) else {
        return;
    };
    let timed = s.timed.load(Ordering::Relaxed) + 1;
    let dt = t.wrapping_sub(t0);
    if dt > THROTTLE_TICKS.load(Ordering::Relaxed) {
        saw_long(s);
    }
    let ticks = s.ticks.load(Ordering::Relaxed).wrapping_add(dt);
    s.timed.store(timed, Ordering::Relaxed);
    s.ticks.store(ticks, Ordering::Relaxed);
    let n = THROTTLE_CALLS.load(Ordering::Relaxed);
    if n != 0
        && timed >= n
        && (ticks as u128) < timed as u128 * THROTTLE_TICKS.load(Ordering::Relaxed) as u128
        && s.state.load(Ordering::Relaxed) == AUTO
    {
        throttle(s);
    }
}

/// The ring slow path of `p5.h`'s inline guards (ring past its limit, or no ring yet):
/// records a one-slot event stamped with raw TSC ticks `t`. Never panics.
#[unsafe(no_mangle)]
pub extern "C" fn p5_push_slow(kind: u32, t: u64, sensor: u64) {
    let kind = match kind {
        0 => Kind::Enter,
        1 => Kind::Exit,
        _ => Kind::Mark,
    };
    crate::sensor::emit_raw(kind, t, sensor);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttling_lists_once_and_reports_counts() {
        static S: Site = Site::new(0xabc, AUTO);
        static P: Site = Site::new(0xdef, ALWAYS);
        S.calls.store(10, Ordering::Relaxed);
        S.timed.store(9, Ordering::Relaxed);
        S.ticks.store(90, Ordering::Relaxed);
        throttle(&S);
        throttle(&S);
        throttle(&P);
        assert_eq!(S.state.load(Ordering::Relaxed), THROTTLED);
        assert_eq!(
            P.state.load(Ordering::Relaxed),
            ALWAYS,
            "pinned on stays on"
        );
        let mine: Vec<Report> = listed().into_iter().filter(|r| r.sensor == 0xabc).collect();
        assert_eq!(mine.len(), 1, "listed once");
        assert_eq!((mine[0].calls, mine[0].timed, mine[0].ticks), (10, 9, 90));
        assert!(mine[0].since > 0 && !mine[0].pinned);
        assert!(listed().iter().all(|r| r.sensor != 0xdef));
    }

    #[test]
    fn calibration_needs_a_millisecond() {
        let rule = Some(crate::config::Throttle {
            calls: 500,
            ns: 10_000,
            all: false,
        });
        calibrate(rule, 1000, 10);
        assert_eq!(THROTTLE_TICKS.load(Ordering::Relaxed), u64::MAX);
        assert_eq!(THROTTLE_CALLS.load(Ordering::Relaxed), 0);
        calibrate(rule, 3_000_000_000, 1_000_000_000);
        assert_eq!(THROTTLE_TICKS.load(Ordering::Relaxed), 30_000);
        assert_eq!(THROTTLE_CALLS.load(Ordering::Relaxed), 500);
    }
}
