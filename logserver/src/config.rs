//! Server configuration and its defaults.
//!
//! The default port is 28725 = 0x7035 = the ASCII bytes `'p' '5'`.
//!
//! Memory is bounded by construction: each connection holds one read buffer
//! ([`ConnLimits::read_buffer`]); a frame's buffer grows only as its bytes arrive, after its
//! length passed the check against [`ConnLimits::max_frame_len`], and every byte is first
//! reserved from the connection's own allowance ([`ConnLimits::allowance`]) or the
//! server-wide pool ([`ServerConfig::inflight_bytes`]) and given back once the record is
//! durable; and the number of connections is capped ([`ServerConfig::max_connections`]). A
//! frame's buffer may have up to twice the capacity of what it holds, so the worst case is
//! about `max_connections × (read_buffer + 2 × allowance) + 2 × inflight_bytes`: 1.25 GiB with
//! the defaults, reached only if every connection holds its whole allowance at once.
//! [`crate::budget`] says who gets the memory when it runs out.

use crate::allow::AllowList;
use crate::error::Error;
use std::path::PathBuf;
use std::time::Duration;

/// The default TCP port: 28725 = 0x7035 = `'p' '5'`.
pub const DEFAULT_PORT: u16 = 28725;
/// The default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:28725";
/// The default store directory.
pub const DEFAULT_STORE: &str = "./p5-store";

/// Per-connection limits.
#[derive(Debug, Clone)]
pub struct ConnLimits {
    /// The whole `Hello` frame must arrive within this time after the connection opened.
    pub hello_timeout: Duration,
    /// A connection that sends no frame for this long is closed.
    pub idle_timeout: Duration,
    /// Once a frame's first byte arrived, the whole frame must arrive within this time
    /// (against slow-loris senders). Time spent waiting for the memory budget is not counted.
    pub frame_timeout: Duration,
    /// The slowest rate at which a frame may arrive, bytes per second: a frame of `len`
    /// bytes must complete within `min(frame_timeout, 5 s + len / min_frame_rate)` (0: no
    /// minimum rate, only `frame_timeout`).
    pub min_frame_rate: u64,
    /// Bytes each connection may hold without drawing on the shared pool
    /// ([`ServerConfig::inflight_bytes`]): its Hello and a few ordinary frames are always
    /// read, whatever other connections hold.
    pub allowance: usize,
    /// Largest accepted frame (`len` field), at most `p5_wire::frame::MAX_FRAME_LEN`.
    pub max_frame_len: u32,
    /// Size of each connection's read buffer.
    pub read_buffer: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        Self {
            hello_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(600),
            frame_timeout: Duration::from_secs(30),
            min_frame_rate: 1 << 20,
            allowance: 256 * 1024,
            max_frame_len: p5_wire::frame::MAX_FRAME_LEN,
            read_buffer: 256 * 1024,
        }
    }
}

/// How the session writers commit.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// A segment is closed and a new one begun once it would grow past this size.
    pub segment_max_bytes: u64,
    /// A group commit takes whatever is queued, up to about this many bytes, before it syncs.
    pub commit_max_bytes: usize,
    /// Extra wait before each sync to let more records join the group (0 = none: the time
    /// the previous sync took is the natural gathering window).
    pub commit_delay: Duration,
    /// Depth of each session writer's queue (records); senders wait when it is full.
    pub queue_depth: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            segment_max_bytes: 256 << 20,
            commit_max_bytes: 16 << 20,
            commit_delay: Duration::ZERO,
            queue_depth: 1024,
        }
    }
}

/// Everything the server needs to run.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on (`host:port`; port 0 picks a free one).
    pub listen: String,
    /// Store directory.
    pub store: PathBuf,
    /// Per-connection limits.
    pub limits: ConnLimits,
    /// Most concurrent connections. At the cap a newcomer evicts the idlest connection that
    /// sent no Hello (or has been silent for a while, see [`crate::budget`]); if there is
    /// none it is answered with an `Error` frame and closed.
    pub max_connections: usize,
    /// Bytes of received frames that may be in flight (read but not yet durable) beyond the
    /// connections' own allowances, server-wide: the shared pool.
    pub inflight_bytes: usize,
    /// Which peers may connect (`None`: the default for the listen address, see
    /// [`crate::allow`]). Others are closed at accept and counted.
    pub allow: Option<AllowList>,
    /// Async worker threads (`None`: one per core).
    pub worker_threads: Option<usize>,
    /// Writer settings.
    pub store_config: StoreConfig,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_LISTEN.to_owned(),
            store: PathBuf::from(DEFAULT_STORE),
            limits: ConnLimits::default(),
            max_connections: 1024,
            inflight_bytes: 256 << 20,
            allow: None,
            worker_threads: None,
            store_config: StoreConfig::default(),
        }
    }
}

impl ServerConfig {
    /// Checks ranges and clamps values that only have to be "large enough".
    pub fn validate(mut self) -> Result<Self, Error> {
        let max = p5_wire::frame::MAX_FRAME_LEN;
        if self.limits.max_frame_len == 0 || self.limits.max_frame_len > max {
            return Err(Error::Config(format!(
                "max frame length must be 1..={max}, not {}",
                self.limits.max_frame_len
            )));
        }
        if self.max_connections == 0 {
            return Err(Error::Config("max connections must be at least 1".into()));
        }
        // Every admissible frame must fit in the budget, or it could never be admitted.
        let need = crate::receiver::STORE_PREFIX + self.limits.max_frame_len as usize;
        self.inflight_bytes = self.inflight_bytes.max(need);
        self.limits.read_buffer = self.limits.read_buffer.clamp(4096, 64 << 20);
        self.limits.allowance = self
            .limits
            .allowance
            .clamp(crate::receiver::STORE_PREFIX + 4096, 64 << 20);
        self.store_config.queue_depth = self.store_config.queue_depth.max(1);
        self.store_config.segment_max_bytes = self.store_config.segment_max_bytes.max(4096);
        Ok(self)
    }
}

/// Parses a duration such as `250ms`, `30s`, `10m`, `2h` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("invalid duration {s:?}: expected e.g. 500ms, 30s, 10m, 1h"))?;
    let d = match unit.trim() {
        "" | "s" => Duration::from_secs(n),
        "ms" => Duration::from_millis(n),
        "us" => Duration::from_micros(n),
        "m" | "min" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        u => return Err(format!("invalid duration unit {u:?} in {s:?}")),
    };
    Ok(d)
}

/// Parses a byte size such as `4096`, `64k`, `256M`, `1G` (binary multiples).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("invalid size {s:?}: expected e.g. 4096, 64k, 256M"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" | "kb" => 10,
        "m" | "mib" | "mb" => 20,
        "g" | "gib" | "gb" => 30,
        u => return Err(format!("invalid size unit {u:?} in {s:?}")),
    };
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("size {s:?} too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_spells_p5() {
        assert_eq!(DEFAULT_PORT, u16::from_be_bytes(*b"p5"));
        assert!(DEFAULT_LISTEN.ends_with(&DEFAULT_PORT.to_string()));
    }

    #[test]
    fn parse_units() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert!(parse_duration("x").is_err());
        assert!(parse_duration("5y").is_err());
        assert_eq!(parse_size("64k"), Ok(65536));
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert!(parse_size("1Q").is_err());
        assert!(parse_size("99999999999999G").is_err());
    }

    #[test]
    fn validate_clamps_budget() {
        let c = ServerConfig {
            inflight_bytes: 1,
            ..ServerConfig::default()
        }
        .validate()
        .unwrap();
        assert!(c.inflight_bytes > p5_wire::frame::MAX_FRAME_LEN as usize);
        let bad = ServerConfig {
            max_connections: 0,
            ..ServerConfig::default()
        };
        assert!(bad.validate().is_err());
    }
}
