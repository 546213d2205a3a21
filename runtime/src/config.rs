//! Configuration, read once from the environment at initialisation (a forked child reuses
//! its parent's, so nothing is read from the environment in the child handler).
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `P5_DISABLE=1` | record nothing: no thread, no file, sensors cost one load | off |
//! | `P5_LOGSERVER` | `host:port` of the log server | `127.0.0.1:28725` |
//! | `P5_DIR` | spool directory; without `P5_LOGSERVER`: local-file mode (never connect) | `$TMPDIR/p5` |
//! | `P5_SESSION` | session name sent in the handshake and used in file names | empty |
//! | `P5_EXIT_TIMEOUT_MS` | how long exit and [`crate::flush`] wait for acknowledgements | 3000 |
//! | `P5_RING` (or `P5_RING_SLOTS`) | slots per thread ring (rounded up to a power of two, 16 bytes each; `K`/`M` suffixes multiply by 1024 / 1024²) | 1M (16 MiB, touched only as it fills) |
//! | `P5_FULL=grace[,D]\|drop\|wait` | a full ring waits for the flusher while it frees room, and drops and counts once it has freed nothing for `D` (default 50 ms; the wait is reported at exit); drops at once (the application never waits); or waits however long (a complete trace, perturbed) | `grace,50ms` |
//! | `P5_THROTTLE=N,T[,all]` or `off` | a scope sensor (`P5_SCOPE`) that fired `N` times with a mean below `T` (`10us`, `500ns`, plain numbers are µs) only counts calls from then on; the calls it times that take longer than `T` are still recorded — every 64th call and, for 4,096 calls after a long one, every call; with `all` it times every call, so every call longer than `T` is recorded (two clock reads per call) | `1000,10us` |
//! | `P5_FLUSH_MS` | flusher period | 20 |
//! | `P5_CLOCK=mono` | use CLOCK_MONOTONIC even where the TSC is invariant | TSC if invariant |
//! | `P5_DISCARD=1` | drain rings but keep nothing (overhead measurements) | off |
//! | `P5_SHARED_FDS=1` | the flusher shares the program's descriptor table instead of taking its own ([`crate::fdtable`]) | off |

use crate::ring::Full;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// Default log-server address.
pub const DEFAULT_LOGSERVER: &str = "127.0.0.1:28725";

/// Where recorded frames go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Nothing is recorded.
    Disabled,
    /// Connect to a log server at `host:port`, spooling to disk while it is away.
    Server(String),
    /// Write everything to the spool file in [`Config::dir`]; never connect.
    Local,
    /// Drain rings and throw the contents away.
    Discard,
}

/// Runtime configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Where data goes.
    pub mode: Mode,
    /// Spool directory.
    pub dir: PathBuf,
    /// Session name (may be empty: the server's default).
    pub session: String,
    /// Bound on waiting for acknowledgements at exit and in `flush`.
    pub exit_timeout: Duration,
    /// Slots per thread ring.
    pub ring_slots: usize,
    /// Flusher period.
    pub flush_interval: Duration,
    /// Allow the TSC as tick source (if invariant).
    pub allow_tsc: bool,
    /// What a full ring does.
    pub full: Full,
    /// Adaptive throttling of hot tiny scope sensors (`None`: off).
    pub throttle: Option<Throttle>,
}

/// TAU's throttling rule: after `calls` calls with a mean duration below `ns`, a scope sensor
/// only counts calls (and the time of every 64th); a sampled call longer than `ns` is still
/// recorded.
///
/// The default keeps TAU's 10 µs but lowers TAU's 100,000 calls to 1,000: a fully recorded
/// call costs ≈ 45–50 ns here (two `rdtsc` at ≈ 22 ns each on this VM), so 100,000 recorded
/// calls per hot sensor cost ≈ 5 ms each — more than the whole 15–20 ms Lua workload of
/// issue 21, which ran 9–11× slower with 100,000, 5–7× with 10,000 and 2.2–2.7× with 1,000
/// (`runtime/benches/lua.rs`, loaded machine).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Throttle {
    /// Calls before the rule is applied (TAU: 100,000; here 1,000, see above).
    pub calls: u64,
    /// Mean duration below which a sensor is throttled, in ns (TAU: 10 µs).
    pub ns: u64,
    /// Time every throttled call (`P5_THROTTLE=N,T,all`), so that every call longer than
    /// `ns` is recorded, at two clock reads per call; by default every 64th is timed (and
    /// every call for a while after a long one, `site.rs`).
    pub all: bool,
}

impl Default for Throttle {
    fn default() -> Self {
        Throttle {
            calls: 1_000,
            ns: 10_000,
            all: false,
        }
    }
}

/// Default slots per ring: 1 Mi slots (16 MiB, faulted in only as the ring fills) absorb
/// about 40 ms of a producer at 25 M events/s while the flusher is descheduled.
pub const DEFAULT_RING_SLOTS: usize = 1 << 20;

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::Server(DEFAULT_LOGSERVER.to_string()),
            dir: default_dir(None),
            session: String::new(),
            exit_timeout: Duration::from_millis(3000),
            ring_slots: DEFAULT_RING_SLOTS,
            flush_interval: Duration::from_millis(20),
            allow_tsc: true,
            full: Full::default(),
            throttle: Some(Throttle::default()),
        }
    }
}

fn default_dir(tmpdir: Option<OsString>) -> PathBuf {
    match tmpdir {
        Some(t) if !t.is_empty() => PathBuf::from(t).join("p5"),
        _ => PathBuf::from("/tmp/p5"),
    }
}

fn truthy(v: &Option<OsString>) -> bool {
    v.as_ref()
        .and_then(|v| v.to_str())
        .is_some_and(|v| !matches!(v.trim(), "" | "0" | "false" | "no" | "off"))
}

fn number(v: Option<OsString>) -> Option<u64> {
    v?.to_str()?.trim().parse().ok()
}

/// A slot count with an optional `K` or `M` suffix (×1024, ×1024²).
fn slots(v: Option<OsString>) -> Option<u64> {
    let v = v?.into_string().ok()?;
    let v = v.trim();
    let (digits, mul) = match v.char_indices().last()? {
        (i, 'k' | 'K') => (&v[..i], 1 << 10),
        (i, 'm' | 'M') => (&v[..i], 1 << 20),
        _ => (v, 1),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(mul)
}

/// A duration in ns from `10us`, `10µs`, `500ns`, `1ms`, `2.5` (µs).
fn duration_ns(v: &str) -> Option<u64> {
    let v = v.trim();
    let (num, scale) = if let Some(n) = v.strip_suffix("ns") {
        (n, 1.0)
    } else if let Some(n) = v.strip_suffix("us").or_else(|| v.strip_suffix("µs")) {
        (n, 1e3)
    } else if let Some(n) = v.strip_suffix("ms") {
        (n, 1e6)
    } else {
        (v, 1e3)
    };
    let x: f64 = num.trim().parse().ok()?;
    (x.is_finite() && x >= 0.0).then(|| (x * scale).round() as u64)
}

/// `P5_THROTTLE`: `off` (or `0`), `N`, `N,T`, `N,T,all`. `None` inside means off; an
/// unparsable value keeps the default.
fn throttle(v: Option<OsString>) -> Option<Option<Throttle>> {
    let v = v?.into_string().ok()?;
    let v = v.trim();
    if matches!(v, "off" | "0" | "no" | "false") {
        return Some(None);
    }
    let mut parts = v.split(',').map(str::trim);
    let calls: u64 = parts.next()?.parse().ok()?;
    let ns = match parts.next() {
        Some(t) => duration_ns(t)?,
        None => Throttle::default().ns,
    };
    let all = match parts.next() {
        Some("all") => true,
        Some(_) => return None,
        None => false,
    };
    if parts.next().is_some() {
        return None;
    }
    Some((calls > 0).then_some(Throttle { calls, ns, all }))
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Self {
        Self::from_lookup(|k| std::env::var_os(k))
    }

    /// Builds a configuration from any variable lookup (the environment, or a map in tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<OsString>) -> Self {
        let mut c = Config::default();
        let nonempty = |k: &str| get(k).filter(|v| !v.is_empty());
        let dir = nonempty("P5_DIR");
        let server = nonempty("P5_LOGSERVER").and_then(|v| v.into_string().ok());
        c.dir = match &dir {
            Some(d) => PathBuf::from(d),
            None => default_dir(get("TMPDIR")),
        };
        c.mode = if truthy(&get("P5_DISABLE")) {
            Mode::Disabled
        } else if truthy(&get("P5_DISCARD")) {
            Mode::Discard
        } else {
            match (server, dir) {
                (Some(s), _) => Mode::Server(s),
                (None, Some(_)) => Mode::Local,
                (None, None) => Mode::Server(DEFAULT_LOGSERVER.to_string()),
            }
        };
        c.session = get("P5_SESSION")
            .and_then(|v| v.into_string().ok())
            .unwrap_or_default();
        if let Some(ms) = number(get("P5_EXIT_TIMEOUT_MS")) {
            c.exit_timeout = Duration::from_millis(ms);
        }
        if let Some(n) = slots(get("P5_RING")).or_else(|| slots(get("P5_RING_SLOTS"))) {
            c.ring_slots = n.clamp(64, 1 << 28) as usize;
        }
        c.full = match get("P5_FULL").as_ref().and_then(|v| v.to_str()) {
            Some(v) if v.trim() == "wait" => Full::Wait,
            Some(v) if v.trim() == "drop" => Full::Drop,
            Some(v) => v
                .trim()
                .strip_prefix("grace")
                .and_then(|d| d.strip_prefix([',', ':']))
                .and_then(duration_ns)
                .map_or(Full::default(), |ns| Full::Grace(Duration::from_nanos(ns))),
            None => Full::default(),
        };
        if let Some(t) = throttle(get("P5_THROTTLE")) {
            c.throttle = t;
        }
        if let Some(ms) = number(get("P5_FLUSH_MS")) {
            c.flush_interval = Duration::from_millis(ms.clamp(1, 10_000));
        }
        c.allow_tsc = get("P5_CLOCK").is_none_or(|v| v != "mono");
        c
    }

    /// True unless the mode is [`Mode::Disabled`].
    pub fn enabled(&self) -> bool {
        self.mode != Mode::Disabled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(vars: &[(&str, &str)]) -> Config {
        let m: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        Config::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn modes() {
        assert_eq!(cfg(&[]).mode, Mode::Server(DEFAULT_LOGSERVER.into()));
        assert_eq!(cfg(&[]).dir, PathBuf::from("/tmp/p5"));
        assert_eq!(cfg(&[("TMPDIR", "/x")]).dir, PathBuf::from("/x/p5"));
        let local = cfg(&[("P5_DIR", "/d")]);
        assert_eq!(local.mode, Mode::Local);
        assert_eq!(local.dir, PathBuf::from("/d"));
        let both = cfg(&[("P5_DIR", "/d"), ("P5_LOGSERVER", "h:1")]);
        assert_eq!(both.mode, Mode::Server("h:1".into()));
        assert_eq!(both.dir, PathBuf::from("/d"));
        assert_eq!(
            cfg(&[("P5_DISABLE", "1"), ("P5_DIR", "/d")]).mode,
            Mode::Disabled
        );
        assert_eq!(
            cfg(&[("P5_DISABLE", "0")]).mode,
            Mode::Server(DEFAULT_LOGSERVER.into())
        );
        assert_eq!(cfg(&[("P5_DISCARD", "1")]).mode, Mode::Discard);
    }

    #[test]
    fn numbers_and_bounds() {
        let c = cfg(&[
            ("P5_EXIT_TIMEOUT_MS", "250"),
            ("P5_RING_SLOTS", "3"),
            ("P5_FLUSH_MS", "junk"),
            ("P5_CLOCK", "mono"),
            ("P5_SESSION", "s1"),
        ]);
        assert_eq!(c.exit_timeout, Duration::from_millis(250));
        assert_eq!(c.ring_slots, 64);
        assert_eq!(c.flush_interval, Duration::from_millis(20));
        assert!(!c.allow_tsc);
        assert_eq!(c.session, "s1");
    }

    #[test]
    fn ring_full_and_throttle() {
        let d = cfg(&[]);
        assert_eq!(d.ring_slots, DEFAULT_RING_SLOTS);
        assert_eq!(d.full, Full::Grace(crate::ring::GRACE));
        assert_eq!(d.throttle, Some(Throttle::default()));
        assert_eq!(cfg(&[("P5_RING", "256K")]).ring_slots, 256 << 10);
        assert_eq!(cfg(&[("P5_RING", "2m")]).ring_slots, 2 << 20);
        assert_eq!(cfg(&[("P5_RING_SLOTS", "4096")]).ring_slots, 4096);
        assert_eq!(
            cfg(&[("P5_RING", "128"), ("P5_RING_SLOTS", "4096")]).ring_slots,
            128
        );
        assert_eq!(cfg(&[("P5_RING", "x")]).ring_slots, DEFAULT_RING_SLOTS);
        assert_eq!(cfg(&[("P5_FULL", "wait")]).full, Full::Wait);
        assert_eq!(cfg(&[("P5_FULL", "drop")]).full, Full::Drop);
        assert_eq!(cfg(&[("P5_FULL", "grace")]).full, Full::default());
        assert_eq!(
            cfg(&[("P5_FULL", "grace,5ms")]).full,
            Full::Grace(Duration::from_millis(5))
        );
        assert_eq!(cfg(&[("P5_THROTTLE", "off")]).throttle, None);
        let t = |v: &str| cfg(&[("P5_THROTTLE", v)]).throttle;
        assert_eq!(
            t("500,2us"),
            Some(Throttle {
                calls: 500,
                ns: 2000,
                all: false
            })
        );
        assert_eq!(
            t("500,250ns"),
            Some(Throttle {
                calls: 500,
                ns: 250,
                all: false
            })
        );
        let t7 = |ns, all| Some(Throttle { calls: 7, ns, all });
        assert_eq!(t("7,1.5"), t7(1500, false));
        assert_eq!(t("7, 2us, all"), t7(2000, true));
        assert_eq!(t("7,2us,most"), Some(Throttle::default()));
        assert_eq!(
            t("7"),
            Some(Throttle {
                calls: 7,
                ns: 10_000,
                all: false
            })
        );
        assert_eq!(t("junk"), Some(Throttle::default()));
    }
}
