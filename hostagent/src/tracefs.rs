//! The kernel's tracefs: finding (or, as root, mounting) it and driving a private tracing
//! *instance* (`instances/p5-hostagent-PID`), so the agent neither disturbs nor is disturbed
//! by other users of the global trace buffer. The instance is removed when dropped.
//!
//! The instance uses `trace_clock=mono` (CLOCK_MONOTONIC), which is what the agent's and the
//! instrumented processes' relative times are based on. Events are read from the per-CPU
//! binary pipes (`trace_pipe_raw`, see [`crate::ringbuf`]) or, failing that, as text from
//! `trace_pipe` (microsecond timestamps).

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Where tracefs is normally mounted.
pub const TRACEFS: &str = "/sys/kernel/tracing";
/// Older location (through debugfs).
pub const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";

/// Why tracing is unavailable or failed.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// Not mounted and cannot be mounted (not root, or no kernel support).
    #[error("tracefs is not available: {0}")]
    Unavailable(String),
    /// A tracefs file operation failed.
    #[error("tracefs {path}: {cause}")]
    Io {
        /// The file.
        path: String,
        /// The error (in the message, not a `source`).
        cause: io::Error,
    },
}

fn io_err(path: &Path, cause: io::Error) -> TraceError {
    TraceError::Io {
        path: path.display().to_string(),
        cause,
    }
}

/// True if running as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Finds tracefs, mounting it at [`TRACEFS`] when it is missing and we are root.
pub fn find_or_mount() -> Result<PathBuf, TraceError> {
    for p in [TRACEFS, DEBUGFS_TRACING] {
        if Path::new(p).join("events").is_dir() {
            return Ok(PathBuf::from(p));
        }
    }
    if !is_root() {
        return Err(TraceError::Unavailable(format!(
            "{TRACEFS} is not mounted and mounting it needs root"
        )));
    }
    let c = |s: &str| std::ffi::CString::new(s).unwrap_or_default();
    let (src, target, fstype) = (c("nodev"), c(TRACEFS), c("tracefs"));
    // SAFETY: all pointers are valid NUL-terminated strings; data may be NULL.
    let rc = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(TraceError::Unavailable(format!(
            "mount -t tracefs nodev {TRACEFS} failed: {}",
            io::Error::last_os_error()
        )));
    }
    if Path::new(TRACEFS).join("events").is_dir() {
        Ok(PathBuf::from(TRACEFS))
    } else {
        Err(TraceError::Unavailable(
            "tracefs mounted but has no events".into(),
        ))
    }
}

/// Removes instances named `<prefix><pid>` whose process is gone (left by a killed agent).
pub fn remove_stale_instances(root: &Path, prefix: &str) {
    let Ok(dir) = std::fs::read_dir(root.join("instances")) else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        // `<prefix><pid>` or `<prefix><pid>-<role>` (the OS monitor's IRQ and watch instances).
        let Some(pid) = name
            .strip_prefix(prefix)
            .and_then(|p| p.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            match std::fs::remove_dir(e.path()) {
                Ok(()) => tracing::info!(instance = %name, "removed a stale trace instance"),
                Err(err) => {
                    tracing::warn!(instance = %name, "cannot remove a stale trace instance: {err}")
                }
            }
        }
    }
}

/// A private tracing instance.
#[derive(Debug)]
pub struct Instance {
    dir: PathBuf,
}

impl Instance {
    /// Creates `instances/<name>` under `root` (an existing one is reused).
    pub fn create(root: &Path, name: &str) -> Result<Self, TraceError> {
        let dir = root.join("instances").join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_err(&dir, e)),
        }
        Ok(Self { dir })
    }

    /// Writes a control file of the instance.
    pub fn write(&self, rel: &str, value: &str) -> Result<(), TraceError> {
        let p = self.dir.join(rel);
        let mut f = OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&p)
            .map_err(|e| io_err(&p, e))?;
        f.write_all(value.as_bytes()).map_err(|e| io_err(&p, e))
    }

    /// Appends to a control file without truncating it: for `set_event_pid`, adds pids to the
    /// list (opening with `O_TRUNC` would clear it, children the kernel added included).
    pub fn append(&self, rel: &str, value: &str) -> Result<(), TraceError> {
        let p = self.dir.join(rel);
        let mut f = OpenOptions::new()
            .append(true)
            .open(&p)
            .map_err(|e| io_err(&p, e))?;
        f.write_all(value.as_bytes()).map_err(|e| io_err(&p, e))
    }

    /// Sets `trace_clock` (e.g. `mono`).
    pub fn set_clock(&self, clock: &str) -> Result<(), TraceError> {
        self.write("trace_clock", clock)
    }

    /// Sets an event's filter (`"0"` clears it) and enables or disables it.
    pub fn event(&self, event: &str, filter: Option<&str>, enable: bool) -> Result<(), TraceError> {
        self.write(&format!("events/{event}/filter"), filter.unwrap_or("0"))?;
        self.write(
            &format!("events/{event}/enable"),
            if enable { "1" } else { "0" },
        )
    }

    /// Opens every CPU's binary pipe (`per_cpu/cpuN/trace_pipe_raw`) non-blocking.
    pub fn raw_pipes(&self) -> Result<Vec<(u32, File)>, TraceError> {
        let dir = self.dir.join("per_cpu");
        let mut out = Vec::new();
        for e in std::fs::read_dir(&dir)
            .map_err(|e| io_err(&dir, e))?
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(cpu) = name.strip_prefix("cpu").and_then(|c| c.parse::<u32>().ok()) else {
                continue;
            };
            let p = e.path().join("trace_pipe_raw");
            let f = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&p)
                .map_err(|e| io_err(&p, e))?;
            out.push((cpu, f));
        }
        out.sort_by_key(|(c, _)| *c);
        Ok(out)
    }

    /// Opens `trace_pipe` non-blocking.
    pub fn pipe(&self) -> Result<File, TraceError> {
        let p = self.dir.join("trace_pipe");
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&p)
            .map_err(|e| io_err(&p, e))
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.write("tracing_on", "0");
        let _ = self.write("events/enable", "0");
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            tracing::warn!(dir = %self.dir.display(), "cannot remove the trace instance: {e}");
        }
    }
}

/// A filter expression `field == a || field == b …` (None for an empty list or a list too
/// long for the kernel's filter parser; then filtering happens in user space only).
pub fn or_filter(field: &str, values: &[u32]) -> Option<String> {
    if values.is_empty() || values.len() > 64 {
        return None;
    }
    Some(
        values
            .iter()
            .map(|v| format!("{field} == {v}"))
            .collect::<Vec<_>>()
            .join(" || "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters() {
        assert_eq!(or_filter("pid", &[]), None);
        assert_eq!(or_filter("pid", &[1, 2]).unwrap(), "pid == 1 || pid == 2");
        assert_eq!(or_filter("pid", &(0..65).collect::<Vec<_>>()), None);
    }
}
