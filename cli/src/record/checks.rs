//! What `p5 record` checks before it creates anything: the program can be run, the log
//! server named by `--logserver` answers, the options parse. Each failure is one line that
//! says what to do.

use std::time::Duration;

/// Fails (one line, saying what to do) unless `program` names an executable file, directly
/// or on `PATH`.
pub fn program(program: &std::ffi::OsStr) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(path) = crate::gate::resolve(program) else {
        anyhow::bail!(
            "cannot find the program {program:?} on PATH (give its path, or check the name)"
        );
    };
    match std::fs::metadata(&path) {
        Err(e) => anyhow::bail!("cannot run {}: {e} (check the path)", path.display()),
        Ok(m) if !m.is_file() => anyhow::bail!("cannot run {}: not a file", path.display()),
        Ok(m) if m.permissions().mode() & 0o111 == 0 => anyhow::bail!(
            "cannot run {}: not executable (chmod +x it, or run it through its interpreter)",
            path.display()
        ),
        Ok(_) => Ok(()),
    }
}

/// Fails unless a log server answers TCP at `addr` (within a second).
pub fn logserver(addr: &str) -> anyhow::Result<()> {
    use std::net::ToSocketAddrs as _;
    let hint = "start one (p5 logserver --listen ADDR --store DIR) or leave out --logserver";
    let addrs: Vec<_> = addr
        .to_socket_addrs()
        .map_err(|e| anyhow::anyhow!("bad --logserver {addr}: {e} (give HOST:PORT)"))?
        .collect();
    let mut last = None;
    for a in &addrs {
        match std::net::TcpStream::connect_timeout(a, Duration::from_secs(1)) {
            Ok(_) => return Ok(()),
            Err(e) => last = Some(e),
        }
    }
    let why = last.map_or_else(|| "no address".to_owned(), |e| e.to_string());
    anyhow::bail!("cannot reach the log server {addr}: {why}; {hint}")
}

/// `--grace` as a duration (`5`, `2.5s`, `500ms`).
pub fn grace(text: &str) -> anyhow::Result<Duration> {
    let t = text.trim();
    let (num, scale) = if let Some(ms) = t.strip_suffix("ms") {
        (ms, 1e-3)
    } else {
        (t.strip_suffix('s').unwrap_or(t), 1.0)
    };
    num.trim()
        .parse::<f64>()
        .ok()
        .and_then(|v| Duration::try_from_secs_f64(v * scale).ok())
        .ok_or_else(|| anyhow::anyhow!("bad --grace {text:?} (give seconds, e.g. 5 or 500ms)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_periods() {
        assert_eq!(grace("5").unwrap(), Duration::from_secs(5));
        assert_eq!(grace("2.5s").unwrap(), Duration::from_millis(2500));
        assert_eq!(grace("500ms").unwrap(), Duration::from_millis(500));
        for bad in ["", "soon", "-1", "inf", "5 m", "1e300"] {
            assert!(grace(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn programs_that_cannot_run_are_named() {
        let e = program(std::ffi::OsStr::new("/nonexistent")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent"), "{e}");
        assert!(program(std::ffi::OsStr::new("/etc")).is_err());
        assert!(program(std::ffi::OsStr::new("sh")).is_ok());
    }
}
