//! What the machine was doing when the figures were taken: core count, CPU, kernel, load
//! average, the commit measured and the time (UTC), so a figure in `docs/performance.md` can
//! be judged against the conditions it was measured under.

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

/// The facts printed at the top of the report.
#[derive(Debug, Clone, Default)]
pub struct Machine {
    pub cores: usize,
    pub cpu: String,
    pub kernel: String,
    pub commit: String,
    /// `YYYY-MM-DD HH:MM UTC`.
    pub when: String,
}

impl Machine {
    pub fn now(root: &Path) -> Machine {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|m| m.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown CPU".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "unknown".into());
        let commit = Command::new("git")
            .current_dir(root)
            .args(["rev-parse", "--short=12", "HEAD"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_else(|| "unknown".into());
        let dirty = Command::new("git")
            .current_dir(root)
            // The page itself, left by an earlier run, is no change to the code measured.
            .args(["status", "--porcelain", "--untracked-files=no", "--", "."])
            .arg(":!docs/performance.md")
            .output()
            .is_ok_and(|o| !o.stdout.is_empty());
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Machine {
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu,
            kernel,
            commit: if dirty {
                format!("{commit} (with local changes)")
            } else {
                commit
            },
            when: utc(secs),
        }
    }
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` gives them.
pub fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM UTC` (the civil calendar from days,
/// Howard Hinnant's algorithm).
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let (h, m) = ((secs % 86_400) / 3600, (secs % 3600) / 60);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{m:02} UTC")
}

#[cfg(test)]
mod tests {
    #[test]
    fn civil_dates() {
        assert_eq!(super::utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(super::utc(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(super::utc(1_798_765_432), "2027-01-01 01:03 UTC");
    }
}
