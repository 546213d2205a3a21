//! Taking one sample of the host: memory and swap through sysinfo; CPU (total and per core)
//! and load, paging, network, disk I/O and interrupts from `/proc` (see [`crate::proc_stat`]);
//! CPU time and RSS of the monitored processes from `/proc/PID/stat` (the name scan runs
//! once a second).
//!
//! Cost: the agent reads the same handful of files ten times a second, so the `/proc` files
//! are kept open and re-read from offset 0 ([`proc_stat::ProcFile`]); sysinfo's per-process
//! refresh (several files per pid, reopened each time) cost more than everything else
//! together and is not used. CPU usage is computed from `/proc/stat` deltas because sysinfo
//! refreshes CPU usage at most every 200 ms (`MINIMUM_CPU_UPDATE_INTERVAL`): at the default
//! 100 ms interval every other value would be a repeat.
//!
//! Groups nobody selected are not read at all, so interactive mode is also cheaper.

use crate::metric::{Sample, component};
use crate::proc_stat;
use crate::settings::Selection;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use sysinfo::{MemoryRefreshKind, System};

/// How often monitored processes are looked up by name.
const NAME_SCAN: Duration = Duration::from_secs(1);

/// Which processes to monitor (CPU/RSS metrics and the OS monitor).
#[derive(Debug, Clone, Default)]
pub struct ProcessFilter {
    /// Explicit pids.
    pub pids: Vec<u32>,
    /// `comm` names (exact, or globs).
    pub names: Vec<String>,
    /// Every process that announces the p5 runtime ([`proc_stat::instrumented_pids`]).
    pub instrumented: bool,
}

impl ProcessFilter {
    /// True if nothing is to be monitored.
    pub fn is_empty(&self) -> bool {
        self.pids.is_empty() && self.names.is_empty() && !self.instrumented
    }
}

/// Finds the monitored processes: listed pids still alive plus name matches.
#[derive(Debug)]
pub struct ProcessFinder {
    filter: ProcessFilter,
    names: Option<globset::GlobSet>,
    last_scan: Option<Instant>,
    /// Explicit and name-matched pids of the last name scan.
    listed: Vec<u32>,
    instrumented_every: Duration,
    last_instrumented: Option<Instant>,
    /// Instrumented pids of the last `/proc/net/unix` scan.
    instrumented: Vec<u32>,
    found: Vec<u32>,
}

impl ProcessFinder {
    /// Compiles the name patterns (a bad pattern is matched literally).
    pub fn new(filter: ProcessFilter) -> Self {
        let names = if filter.names.is_empty() {
            None
        } else {
            let mut b = globset::GlobSetBuilder::new();
            for n in &filter.names {
                let g = globset::Glob::new(n).or_else(|_| globset::Glob::new(&globset::escape(n)));
                if let Ok(g) = g {
                    b.add(g);
                }
            }
            b.build().ok()
        };
        Self {
            filter,
            names,
            last_scan: None,
            listed: Vec::new(),
            instrumented_every: NAME_SCAN,
            last_instrumented: None,
            instrumented: Vec::new(),
            found: Vec::new(),
        }
    }

    /// Looks for instrumented processes at most once per `every` (default: once a second): one
    /// read of `/proc/net/unix`, ≈ 75 µs here. The OS monitor asks often, so that it starts
    /// tracing within a fraction of a second of a program's start.
    pub fn scan_instrumented_every(mut self, every: Duration) -> Self {
        self.instrumented_every = every;
        self
    }

    /// Makes the next [`ProcessFinder::pids`] look for instrumented processes at once (a
    /// process just bound a socket: perhaps the runtime's announcement).
    pub fn rescan_instrumented(&mut self) {
        self.last_instrumented = None;
    }

    /// True if processes announcing the p5 runtime are monitored.
    pub fn watches_instrumented(&self) -> bool {
        self.filter.instrumented
    }

    /// The monitored pids now: explicit pids and `comm` names are looked up at most once a
    /// second (walking `/proc` costs), instrumented processes as set with
    /// [`ProcessFinder::scan_instrumented_every`].
    pub fn pids(&mut self) -> &[u32] {
        if self.filter.is_empty() {
            return &[];
        }
        let due = self.last_scan.is_none_or(|t| t.elapsed() >= NAME_SCAN);
        if due {
            self.last_scan = Some(Instant::now());
            let mut v: Vec<u32> = self
                .filter
                .pids
                .iter()
                .copied()
                .filter(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
                .collect();
            if let Some(set) = &self.names {
                v.extend(proc_stat::pids_by_comm(&|c| set.is_match(c)));
            }
            self.listed = v;
        }
        let instrumented_due = self
            .last_instrumented
            .is_none_or(|t| t.elapsed() >= self.instrumented_every);
        if !due && !instrumented_due {
            return &self.found;
        }
        if self.filter.instrumented && instrumented_due {
            self.last_instrumented = Some(Instant::now());
            self.instrumented = proc_stat::instrumented_pids()
                .into_iter()
                .filter(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
                .collect();
        }
        let mut v = self.listed.clone();
        v.extend_from_slice(&self.instrumented);
        v.sort_unstable();
        v.dedup();
        self.found = v;
        &self.found
    }
}

/// The sampler: keeps sysinfo state between samples (CPU usage needs two refreshes).
#[derive(Debug)]
pub struct Sampler {
    sys: System,
    finder: ProcessFinder,
    page_size: u64,
    ns_per_tick: u64,
    stat: proc_stat::ProcFile,
    cpu_prev: Vec<proc_stat::CpuTimes>,
    loadavg: proc_stat::ProcFile,
    vmstat: proc_stat::ProcFile,
    net_dev: proc_stat::ProcFile,
    diskstats: proc_stat::ProcFile,
    interrupts: proc_stat::ProcFile,
    pid_stat: HashMap<u32, proc_stat::ProcFile>,
}

/// A counter as the signed value a sample holds.
fn clamp(v: u64) -> i64 {
    v.min(i64::MAX as u64) as i64
}

impl Sampler {
    /// A sampler for the host and the given processes.
    pub fn new(filter: ProcessFilter) -> Result<Self, sysinfo::Error> {
        let sys = System::new()?;
        let mut stat = proc_stat::ProcFile::new("/proc/stat");
        let cpu_prev = proc_stat::parse_cpu_times(stat.read());
        // SAFETY: sysconf has no preconditions.
        let ps = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        Ok(Self {
            sys,
            finder: ProcessFinder::new(filter),
            page_size: if ps > 0 { ps as u64 } else { 4096 },
            ns_per_tick: 1_000_000_000 / proc_stat::clock_ticks(),
            stat,
            cpu_prev,
            loadavg: proc_stat::ProcFile::new("/proc/loadavg"),
            vmstat: proc_stat::ProcFile::new("/proc/vmstat"),
            net_dev: proc_stat::ProcFile::new("/proc/net/dev"),
            diskstats: proc_stat::ProcFile::new("/proc/diskstats"),
            interrupts: proc_stat::ProcFile::new("/proc/interrupts"),
            pid_stat: HashMap::new(),
        })
    }

    /// The monitored pids now.
    pub fn monitored(&mut self) -> Vec<u32> {
        self.finder.pids().to_vec()
    }

    /// Takes one sample of everything `sel` wants, appending to `out`.
    pub fn sample(&mut self, sel: &Selection, out: &mut Vec<Sample>) {
        let mut push = |s: Sample| {
            if sel.wants(&s.name) {
                out.push(s);
            }
        };
        if sel.wants_group("cpu") {
            self.cpu(&mut push);
        }
        if sel.wants_group("load") {
            self.load(&mut push);
        }
        if sel.wants_group("mem") || sel.wants_group("swap") {
            self.memory(&mut push);
        }
        if sel.wants_group("vm") {
            self.vm(&mut push);
        }
        if sel.wants_group("net") {
            self.net(&mut push);
        }
        if sel.wants_group("disk") {
            self.disk(&mut push);
        }
        if sel.wants_group("irq") {
            self.irq(&mut push);
        }
        if sel.wants_group("proc") {
            self.processes(&mut push);
        }
    }

    /// Busy shares per CPU and in all, since the last reading.
    fn cpu(&mut self, push: &mut impl FnMut(Sample)) {
        let now = proc_stat::parse_cpu_times(self.stat.read());
        if now.len() != self.cpu_prev.len() {
            // CPUs came or went: start over from this reading.
            self.cpu_prev = now.clone();
        }
        let cores = now.len().saturating_sub(1) as u64;
        for (i, (b, a)) in self.cpu_prev.iter_mut().zip(&now).enumerate() {
            let (name, cpus) = match i {
                0 => ("cpu.total.busy".to_owned(), cores),
                n => (format!("cpu.{}.busy", n - 1), 1),
            };
            // Too short since the last share: this interval joins the next one.
            if let Some(p) = proc_stat::busy_percent(*b, *a, cpus) {
                push(Sample::centi(name, "%", p));
                *b = *a;
            }
        }
    }

    /// Load averages.
    fn load(&mut self, push: &mut impl FnMut(Sample)) {
        if let Some(l) = proc_stat::parse_loadavg(self.loadavg.read()) {
            push(Sample::centi("load.1".into(), "", l[0]));
            push(Sample::centi("load.5".into(), "", l[1]));
            push(Sample::centi("load.15".into(), "", l[2]));
        }
    }

    /// Memory and swap.
    fn memory(&mut self, push: &mut impl FnMut(Sample)) {
        self.sys
            .refresh_memory_specifics(MemoryRefreshKind::everything());
        push(Sample::new(
            "mem.total".into(),
            "bytes",
            clamp(self.sys.total_memory()),
        ));
        push(Sample::new(
            "mem.used".into(),
            "bytes",
            clamp(self.sys.used_memory()),
        ));
        push(Sample::new(
            "mem.available".into(),
            "bytes",
            clamp(self.sys.available_memory()),
        ));
        push(Sample::new(
            "swap.total".into(),
            "bytes",
            clamp(self.sys.total_swap()),
        ));
        push(Sample::new(
            "swap.used".into(),
            "bytes",
            clamp(self.sys.used_swap()),
        ));
    }

    /// Paging and faults (cumulative).
    fn vm(&mut self, push: &mut impl FnMut(Sample)) {
        let v = proc_stat::parse_vmstat(self.vmstat.read());
        push(Sample::new(
            "vm.pgpgin_total".into(),
            "KiB",
            clamp(v.pgpgin),
        ));
        push(Sample::new(
            "vm.pgpgout_total".into(),
            "KiB",
            clamp(v.pgpgout),
        ));
        push(Sample::new(
            "vm.pswpin_total".into(),
            "pages",
            clamp(v.pswpin),
        ));
        push(Sample::new(
            "vm.pswpout_total".into(),
            "pages",
            clamp(v.pswpout),
        ));
        push(Sample::new(
            "vm.pgfault_total".into(),
            "count",
            clamp(v.pgfault),
        ));
        push(Sample::new(
            "vm.pgmajfault_total".into(),
            "count",
            clamp(v.pgmajfault),
        ));
    }

    /// Per interface: bytes, packets, errors, drops each way (cumulative).
    fn net(&mut self, push: &mut impl FnMut(Sample)) {
        const Q: [(&str, &str); 4] = [
            ("bytes", "bytes"),
            ("packets", "count"),
            ("errors", "count"),
            ("drops", "count"),
        ];
        for d in proc_stat::parse_net_dev(self.net_dev.read()) {
            let i = component(&d.name);
            for (k, (q, unit)) in Q.iter().enumerate() {
                push(Sample::new(
                    format!("net.{i}.rx_{q}_total"),
                    unit,
                    clamp(d.rx[k]),
                ));
                push(Sample::new(
                    format!("net.{i}.tx_{q}_total"),
                    unit,
                    clamp(d.tx[k]),
                ));
            }
        }
    }

    /// Per disk: operations, bytes, busy time (cumulative).
    fn disk(&mut self, push: &mut impl FnMut(Sample)) {
        for d in proc_stat::parse_diskstats(self.diskstats.read()) {
            let n = component(&d.name);
            push(Sample::new(
                format!("disk.{n}.reads_total"),
                "count",
                clamp(d.reads),
            ));
            push(Sample::new(
                format!("disk.{n}.writes_total"),
                "count",
                clamp(d.writes),
            ));
            push(Sample::new(
                format!("disk.{n}.read_bytes_total"),
                "bytes",
                clamp(d.read_sectors.saturating_mul(512)),
            ));
            push(Sample::new(
                format!("disk.{n}.write_bytes_total"),
                "bytes",
                clamp(d.write_sectors.saturating_mul(512)),
            ));
            push(Sample::new(
                format!("disk.{n}.io_ms_total"),
                "ms",
                clamp(d.io_ms),
            ));
        }
    }

    /// Interrupts per line (cumulative).
    fn irq(&mut self, push: &mut impl FnMut(Sample)) {
        for l in proc_stat::parse_interrupts(self.interrupts.read()) {
            push(Sample::new(
                format!("irq.{}.interrupts_total", component(&l.irq)),
                "count",
                clamp(l.count),
            ));
        }
    }

    /// CPU time and resident memory of the followed processes.
    fn processes(&mut self, push: &mut impl FnMut(Sample)) {
        let pids = self.finder.pids().to_vec();
        self.pid_stat.retain(|p, _| pids.contains(p));
        for pid in pids {
            let f = self
                .pid_stat
                .entry(pid)
                .or_insert_with(|| proc_stat::ProcFile::new(format!("/proc/{pid}/stat")));
            let Some(st) = proc_stat::parse_task_stat(f.read()) else {
                continue;
            };
            let name = component(&st.comm);
            push(Sample::new(
                format!("proc.{name}.{pid}.cpu_ns_total"),
                "ns",
                clamp(st.cpu_ticks.saturating_mul(self.ns_per_tick)),
            ));
            push(Sample::new(
                format!("proc.{name}.{pid}.rss"),
                "bytes",
                clamp(st.rss_pages.saturating_mul(self.page_size)),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{Selection, split_patterns};

    /// Two readings a moment apart give no CPU share (the kernel has counted no tick between
    /// them, and 0 % would be invented); the interval joins the next one, which then covers
    /// both.
    #[test]
    fn a_too_short_cpu_interval_joins_the_next() {
        let mut s = Sampler::new(ProcessFilter::default()).unwrap();
        let cpu = Selection::new(&split_patterns("cpu.*")).unwrap();
        let mut out = Vec::new();
        std::thread::sleep(std::time::Duration::from_millis(100));
        s.sample(&cpu, &mut out);
        assert!(out.iter().any(|x| x.name == "cpu.total.busy"), "{out:?}");
        out.clear();
        s.sample(&cpu, &mut out);
        assert!(!out.iter().any(|x| x.name == "cpu.total.busy"), "{out:?}");
        let kept = s.cpu_prev.clone();
        std::thread::sleep(std::time::Duration::from_millis(100));
        s.sample(&cpu, &mut out);
        assert!(out.iter().any(|x| x.name == "cpu.total.busy"), "{out:?}");
        assert_ne!(
            kept, s.cpu_prev,
            "the merged interval ends at the last reading"
        );
    }

    #[test]
    fn samples_everything_and_respects_selection() {
        let mut s = Sampler::new(ProcessFilter {
            pids: vec![std::process::id()],
            names: vec![],
            instrumented: false,
        })
        .unwrap();
        let all = Selection::new(&[]).unwrap();
        let mut out = Vec::new();
        // CPU shares need a few clock ticks since the last reading (Sampler::new).
        std::thread::sleep(std::time::Duration::from_millis(100));
        s.sample(&all, &mut out);
        let has = |p: &str| out.iter().any(|x| x.name.starts_with(p));
        for p in [
            "cpu.total.busy",
            "cpu.0.busy",
            "load.1",
            "mem.used",
            "vm.pgfault_total",
            "net.lo.rx_bytes_total",
            "irq.",
            "proc.",
        ] {
            assert!(
                has(p),
                "missing {p}: {:?}",
                out.iter().map(|x| &x.name).collect::<Vec<_>>()
            );
        }
        let rss = out.iter().find(|x| x.name.ends_with(".rss")).unwrap();
        assert!(rss.value > 1_000_000, "{rss:?}");
        let sel = Selection::new(&split_patterns("mem.*")).unwrap();
        out.clear();
        s.sample(&sel, &mut out);
        assert!(!out.is_empty());
        assert!(out.iter().all(|x| x.name.starts_with("mem.")));
    }

    #[test]
    fn finds_processes_by_name() {
        let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
        let mut f = ProcessFinder::new(ProcessFilter {
            pids: vec![],
            names: vec![comm.trim().to_owned()],
            instrumented: false,
        });
        assert!(f.pids().contains(&std::process::id()));
        let mut none = ProcessFinder::new(ProcessFilter {
            pids: vec![u32::MAX - 1],
            names: vec![],
            instrumented: false,
        });
        assert!(none.pids().is_empty());
    }
}
