//! Parsers for the `/proc` files sysinfo does not cover (or covers at a higher cost):
//! `/proc/vmstat` (paging), `/proc/net/dev` (one read for every interface's bytes, packets,
//! errors *and drops*; sysinfo reads eight sysfs files per interface and has no drops),
//! `/proc/diskstats` (block-device I/O), `/proc/interrupts` (per IRQ line) and
//! `/proc/PID/stat` / `/proc/PID/task/TID/stat` (CPU time of processes and threads).
//!
//! Every parser takes the file's text and skips lines it cannot read: the kernel's format is
//! input from outside, and a strange line never stops sampling.

/// A `/proc` file kept open and re-read from offset 0 at each sample: a cold `open` of a
/// procfs path costs about as much as the read itself (path walk, dentry, seq_file setup),
/// and the agent reads the same few files ten times a second.
#[derive(Debug)]
pub struct ProcFile {
    file: Option<std::fs::File>,
    path: String,
    buf: Vec<u8>,
}

impl ProcFile {
    /// A handle for `path` (opened lazily).
    pub fn new(path: impl Into<String>) -> Self {
        Self {
            file: None,
            path: path.into(),
            buf: Vec::with_capacity(4096),
        }
    }

    /// The file's current content ("" if it cannot be read, e.g. the process ended).
    pub fn read(&mut self) -> &str {
        use std::os::unix::fs::FileExt as _;
        self.buf.clear();
        if self.file.is_none() {
            self.file = std::fs::File::open(&self.path).ok();
        }
        let Some(f) = &self.file else {
            return "";
        };
        let mut off = 0u64;
        loop {
            if self.buf.capacity() - self.buf.len() < 4096 {
                self.buf.reserve(self.buf.capacity().max(4096));
            }
            let len = self.buf.len();
            let cap = self.buf.capacity();
            self.buf.resize(cap, 0);
            match f.read_at(&mut self.buf[len..], off) {
                Ok(0) => {
                    self.buf.truncate(len);
                    break;
                }
                Ok(n) => {
                    self.buf.truncate(len + n);
                    off += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => self.buf.truncate(len),
                Err(_) => {
                    self.buf.clear();
                    self.file = None;
                    break;
                }
            }
        }
        std::str::from_utf8(&self.buf).unwrap_or("")
    }
}

/// Busy and total jiffies of one CPU line of `/proc/stat` (`cpu` = all, `cpuN` = one core).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// Everything but idle and iowait.
    pub busy: u64,
    /// Everything (guest time is already part of user time and is not added again).
    pub total: u64,
}

/// Parses the `cpu` lines of `/proc/stat`: the total first, then each core in order.
pub fn parse_cpu_times(text: &str) -> Vec<CpuTimes> {
    let mut out = Vec::new();
    for line in text.lines() {
        if !line.starts_with("cpu") {
            break;
        }
        let mut f = line.split_ascii_whitespace();
        f.next();
        let v: Vec<u64> = f.take(8).filter_map(|x| x.parse().ok()).collect();
        if v.len() < 4 {
            continue;
        }
        let total: u64 = v.iter().sum();
        let idle = v[3] + v.get(4).copied().unwrap_or(0);
        out.push(CpuTimes {
            busy: total - idle,
            total,
        });
    }
    out
}

/// Fewest clock ticks per CPU a busy share is computed over. The kernel counts CPU time in
/// ticks (10 ms at the usual 100 Hz), so two readings a fraction of a millisecond apart
/// differ by nothing and would read 0 % however busy the CPU was; such a short interval is
/// merged with the next one instead.
pub const MIN_TICKS_PER_CPU: u64 = 2;

/// Busy share between two readings of a line covering `cpus` CPUs, in percent; `None` when
/// fewer than [`MIN_TICKS_PER_CPU`] ticks per CPU lie between them (keep `before` and try
/// again with a later reading).
pub fn busy_percent(before: CpuTimes, after: CpuTimes, cpus: u64) -> Option<f64> {
    let total = after.total.saturating_sub(before.total);
    if total < MIN_TICKS_PER_CPU * cpus.max(1) {
        return None;
    }
    Some(after.busy.saturating_sub(before.busy) as f64 * 100.0 / total as f64)
}

/// The 1, 5 and 15 minute load averages from `/proc/loadavg`.
pub fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let mut f = text.split_ascii_whitespace().map(|x| x.parse::<f64>().ok());
    Some([f.next()??, f.next()??, f.next()??])
}

/// Paging counters from `/proc/vmstat` (cumulative since boot).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VmStat {
    /// KiB paged in.
    pub pgpgin: u64,
    /// KiB paged out.
    pub pgpgout: u64,
    /// Pages swapped in.
    pub pswpin: u64,
    /// Pages swapped out.
    pub pswpout: u64,
    /// Page faults (minor and major).
    pub pgfault: u64,
    /// Major page faults.
    pub pgmajfault: u64,
}

/// Parses `/proc/vmstat`.
pub fn parse_vmstat(text: &str) -> VmStat {
    let mut v = VmStat::default();
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        let (Some(k), Some(n)) = (it.next(), it.next().and_then(|n| n.parse::<u64>().ok())) else {
            continue;
        };
        match k {
            "pgpgin" => v.pgpgin = n,
            "pgpgout" => v.pgpgout = n,
            "pswpin" => v.pswpin = n,
            "pswpout" => v.pswpout = n,
            "pgfault" => v.pgfault = n,
            "pgmajfault" => v.pgmajfault = n,
            _ => {}
        }
    }
    v
}

/// One interface's counters from `/proc/net/dev` (cumulative).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetDev {
    /// Interface name.
    pub name: String,
    /// Bytes, packets, errors, drops received.
    pub rx: [u64; 4],
    /// Bytes, packets, errors, drops transmitted.
    pub tx: [u64; 4],
}

/// Parses `/proc/net/dev`.
pub fn parse_net_dev(text: &str) -> Vec<NetDev> {
    let mut out = Vec::new();
    for line in text.lines().skip(2) {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let f: Vec<u64> = rest
            .split_ascii_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        if f.len() < 12 {
            continue;
        }
        out.push(NetDev {
            name: name.trim().to_owned(),
            rx: [f[0], f[1], f[2], f[3]],
            tx: [f[8], f[9], f[10], f[11]],
        });
    }
    out
}

/// One block device's counters from `/proc/diskstats` (cumulative).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiskStat {
    /// Device name.
    pub name: String,
    /// Reads completed.
    pub reads: u64,
    /// Sectors (512 bytes) read.
    pub read_sectors: u64,
    /// Writes completed.
    pub writes: u64,
    /// Sectors written.
    pub write_sectors: u64,
    /// Milliseconds spent doing I/O.
    pub io_ms: u64,
}

/// Parses `/proc/diskstats`, skipping loop and RAM devices.
pub fn parse_diskstats(text: &str) -> Vec<DiskStat> {
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        if f.len() < 13 {
            continue;
        }
        let name = f[2];
        if name.starts_with("loop") || name.starts_with("ram") {
            continue;
        }
        let n = |i: usize| f[i].parse::<u64>().unwrap_or(0);
        out.push(DiskStat {
            name: name.to_owned(),
            reads: n(3),
            read_sectors: n(5),
            writes: n(7),
            write_sectors: n(9),
            io_ms: n(12),
        });
    }
    out
}

/// One line of `/proc/interrupts`: the IRQ (number or name such as `LOC`), the count summed
/// over CPUs, and the description (chip, hardware IRQ, device names).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IrqLine {
    /// `24`, `LOC`, `NMI`, ...
    pub irq: String,
    /// Sum over CPUs.
    pub count: u64,
    /// Rest of the line (device names are at the end).
    pub desc: String,
}

/// Parses `/proc/interrupts`.
pub fn parse_interrupts(text: &str) -> Vec<IrqLine> {
    let mut lines = text.lines();
    let ncpu = lines
        .next()
        .map(|h| h.split_ascii_whitespace().count())
        .unwrap_or(0);
    let mut out = Vec::new();
    for line in lines {
        let Some((irq, rest)) = line.split_once(':') else {
            continue;
        };
        let mut count = 0u64;
        let mut words = rest.split_ascii_whitespace();
        let mut desc = Vec::new();
        for (i, w) in words.by_ref().enumerate() {
            match w.parse::<u64>() {
                Ok(n) if i < ncpu => count = count.saturating_add(n),
                _ => {
                    desc.push(w);
                    break;
                }
            }
        }
        desc.extend(words);
        out.push(IrqLine {
            irq: irq.trim().to_owned(),
            count,
            desc: desc.join(" "),
        });
    }
    out
}

/// The IRQ numbers whose device names mention one of `ifaces` (the NIC's interrupt lines;
/// e.g. `eth0`, `eth0-TxRx-0`, `virtio0-input.0` matched via the interface's driver name).
pub fn nic_irqs(lines: &[IrqLine], ifaces: &[String]) -> Vec<u32> {
    let mut out: Vec<u32> = lines
        .iter()
        .filter(|l| {
            let last = l.desc.rsplit(' ').next().unwrap_or("");
            ifaces
                .iter()
                .any(|i| !i.is_empty() && last.contains(i.as_str()))
                || last.starts_with("virtio") && (last.contains("input") || last.contains("output"))
        })
        .filter_map(|l| l.irq.parse().ok())
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// CPU time and memory of a process or thread from its `stat` file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskStat {
    /// `comm` (without the parentheses).
    pub comm: String,
    /// State letter.
    pub state: u8,
    /// User + system CPU time in clock ticks.
    pub cpu_ticks: u64,
    /// Resident set size in pages.
    pub rss_pages: u64,
}

/// Parses `/proc/PID/stat` (or a task's). The comm may contain spaces and parentheses, so the
/// fields are counted from the last `)`.
pub fn parse_task_stat(text: &str) -> Option<TaskStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_owned();
    let f: Vec<&str> = text.get(close + 1..)?.split_ascii_whitespace().collect();
    // After the comm: state is field 3 of the man page (index 0 here); utime 14 → 11,
    // stime 15 → 12, rss 24 → 21.
    let n = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok());
    Some(TaskStat {
        comm,
        state: f.first()?.bytes().next()?,
        cpu_ticks: n(11)?.saturating_add(n(12)?),
        rss_pages: n(21).unwrap_or(0),
    })
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`, normally 100).
pub fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

/// Reads a task's `stat`.
pub fn read_task_stat(pid: u32, tid: Option<u32>) -> Option<TaskStat> {
    let path = match tid {
        Some(t) => format!("/proc/{pid}/task/{t}/stat"),
        None => format!("/proc/{pid}/stat"),
    };
    parse_task_stat(&std::fs::read_to_string(path).ok()?)
}

/// The thread ids of a process (empty if it is gone).
pub fn threads(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// The process (thread group) of thread `tid`, from `/proc/TID/status`.
pub fn tgid(tid: u32) -> Option<u32> {
    let s = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))?
        .trim()
        .parse()
        .ok()
}

/// These processes and all their descendants (`/proc/PID/task/TID/children`), sorted.
pub fn with_descendants(pids: &[u32]) -> Vec<u32> {
    let mut seen: std::collections::BTreeSet<u32> = pids.iter().copied().collect();
    let mut todo: Vec<u32> = pids.to_vec();
    while let Some(p) = todo.pop() {
        for t in threads(p) {
            let Ok(c) = std::fs::read_to_string(format!("/proc/{p}/task/{t}/children")) else {
                continue;
            };
            for child in c.split_whitespace().filter_map(|x| x.parse::<u32>().ok()) {
                if seen.insert(child) {
                    todo.push(child);
                }
            }
        }
    }
    seen.into_iter().collect()
}

/// Every pid whose `comm` matches `wanted`.
pub fn pids_by_comm(wanted: &dyn Fn(&str) -> bool) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out: Vec<u32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map(|c| wanted(c.trim_end()))
                .unwrap_or(false)
        })
        .collect();
    out.sort_unstable();
    out
}

/// Pids of the processes that announce the p5 runtime: the abstract unix sockets
/// `@p5-runtime-<pid>` listed in `/proc/net/unix` (the runtime binds one while it records).
pub fn instrumented_pids() -> Vec<u32> {
    std::fs::read_to_string("/proc/net/unix")
        .map(|t| parse_instrumented(&t))
        .unwrap_or_default()
}

/// Parses `/proc/net/unix` for `@p5-runtime-<pid>` names.
pub fn parse_instrumented(text: &str) -> Vec<u32> {
    let mut out: Vec<u32> = text
        .lines()
        .filter_map(|l| {
            l.split_whitespace()
                .last()?
                .strip_prefix("@p5-runtime-")?
                .parse()
                .ok()
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instrumented_processes_from_proc_net_unix() {
        let t = "Num       RefCount Protocol Flags    Type St Inode Path\n\
                 0000000000000000: 00000002 00000000 00000000 0002 01 31337 @p5-runtime-4242\n\
                 0000000000000000: 00000002 00000000 00010000 0001 01 12 /run/systemd/notify\n\
                 0000000000000000: 00000002 00000000 00000000 0002 01 31338 @p5-runtime-17\n\
                 0000000000000000: 00000002 00000000 00000000 0002 01 31339 @p5-runtime-x\n";
        assert_eq!(parse_instrumented(t), vec![17, 4242]);
    }

    #[test]
    fn cpu_times_and_load() {
        let t = "cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 50 0 50 350 50 0 0 0 0 0\ncpu1 50 0 50 350 50 0 0 0 0 0\nintr 5 6\n";
        let c = parse_cpu_times(t);
        assert_eq!(c.len(), 3);
        assert_eq!(
            c[0],
            CpuTimes {
                busy: 200,
                total: 1000
            }
        );
        let later = CpuTimes {
            busy: 250,
            total: 1100,
        };
        assert_eq!(busy_percent(c[0], later, 2), Some(50.0));
        // No tick between two readings: no share, not 0 %.
        assert_eq!(busy_percent(later, later, 2), None);
        let one_tick = CpuTimes {
            busy: 251,
            total: 1103,
        };
        assert_eq!(busy_percent(later, one_tick, 2), None);
        assert_eq!(busy_percent(later, one_tick, 1), Some(100.0 / 3.0));
        assert_eq!(
            parse_loadavg("0.50 1.00 2.25 1/100 42\n"),
            Some([0.5, 1.0, 2.25])
        );
        assert_eq!(parse_loadavg("x"), None);
    }

    #[test]
    fn vmstat() {
        let v = parse_vmstat(
            "nr_free_pages 5\npgpgin 10\npgpgout 20\npswpin 1\npswpout 2\npgfault 300\npgmajfault 4\nbogus\npgfault x\n",
        );
        assert_eq!(
            v,
            VmStat {
                pgpgin: 10,
                pgpgout: 20,
                pswpin: 1,
                pswpout: 2,
                pgfault: 300,
                pgmajfault: 4
            }
        );
    }

    #[test]
    fn net_dev() {
        let t = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo: 100 2 0 0 0 0 0 0 100 2 0 0 0 0 0 0\n  eth0: 5000 40 1 2 0 0 0 0 7000 50 3 4 0 0 0 0\n garbage\n";
        let d = parse_net_dev(t);
        assert_eq!(d.len(), 2);
        assert_eq!(d[1].name, "eth0");
        assert_eq!(d[1].rx, [5000, 40, 1, 2]);
        assert_eq!(d[1].tx, [7000, 50, 3, 4]);
    }

    #[test]
    fn diskstats() {
        let t = "   8       0 sda 100 0 800 50 200 0 1600 70 0 120 130 0 0 0 0\n   7       0 loop0 1 0 2 0 0 0 0 0 0 0 0 0 0 0 0\n short\n";
        let d = parse_diskstats(t);
        assert_eq!(d.len(), 1);
        assert_eq!(
            (
                d[0].reads,
                d[0].read_sectors,
                d[0].writes,
                d[0].write_sectors,
                d[0].io_ms
            ),
            (100, 800, 200, 1600, 120)
        );
    }

    #[test]
    fn interrupts_and_nic_lines() {
        let t = "           CPU0       CPU1\n  0:         10          0   IO-APIC   2-edge      timer\n 24:        100        200   PCI-MSI 49152-edge      virtio0-input.0\n 25:          5          6   PCI-MSI 1-edge      eth1-TxRx-0\nNMI:          1          2   Non-maskable interrupts\nERR:          0\n";
        let l = parse_interrupts(t);
        assert_eq!(l.len(), 5);
        assert_eq!((l[1].irq.as_str(), l[1].count), ("24", 300));
        assert_eq!(l[3].count, 3);
        assert!(l[3].desc.starts_with("Non-maskable"));
        assert_eq!(nic_irqs(&l, &["eth1".into()]), vec![24, 25]);
    }

    #[test]
    fn task_stat_with_odd_comm() {
        let t = "123 (a (b) c) R 1 123 123 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 1000 10000000 2500 18446744073709551615";
        let s = parse_task_stat(t).unwrap();
        assert_eq!(s.comm, "a (b) c");
        assert_eq!(s.state, b'R');
        assert_eq!(s.cpu_ticks, 300);
        assert_eq!(s.rss_pages, 2500);
        assert!(parse_task_stat("garbage").is_none());
        assert!(parse_task_stat("1 (x) R 1").is_none());
    }

    #[test]
    fn proc_file_rereads_fresh_content() {
        let mut f = ProcFile::new(format!("/proc/{}/stat", std::process::id()));
        let a = parse_task_stat(f.read()).unwrap();
        // Burn CPU until the re-read (same descriptor) shows it; a stale re-read never would.
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let b = loop {
            let b = parse_task_stat(f.read()).unwrap();
            if b.cpu_ticks > a.cpu_ticks || std::time::Instant::now() > end {
                break b;
            }
        };
        assert!(b.cpu_ticks > a.cpu_ticks, "{a:?} {b:?}");
        // Other test threads map and unmap memory meanwhile, so the file is read whole
        // before and after, and the ProcFile's read must lie between (give or take a line).
        let mut big = ProcFile::new("/proc/self/smaps");
        let before = std::fs::read_to_string("/proc/self/smaps").unwrap().len();
        let got = big.read().len();
        let after = std::fs::read_to_string("/proc/self/smaps").unwrap().len();
        let (lo, hi) = (before.min(after), before.max(after));
        assert!(
            got > 4096 && got + 2048 >= lo && got <= hi + 2048,
            "{got} vs {before}..{after}"
        );
        let mut gone = ProcFile::new("/proc/does-not-exist");
        assert_eq!(gone.read(), "");
    }

    #[test]
    fn own_process_is_readable() {
        let me = std::process::id();
        assert!(read_task_stat(me, None).is_some());
        assert!(threads(me).contains(&me));
    }

    #[test]
    fn threads_belong_to_their_process_and_descendants_are_found() {
        let me = std::process::id();
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() } as u32).unwrap();
            let _ = stop_rx.recv();
        });
        let tid = rx.recv().unwrap();
        assert_ne!(tid, me);
        assert_eq!(tgid(tid), Some(me));
        assert_eq!(tgid(me), Some(me));
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 1 & wait"])
            .spawn()
            .unwrap();
        let sh = child.id();
        let mut found = Vec::new();
        for _ in 0..100 {
            found = with_descendants(&[me]);
            if found.len() >= 3 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        drop(stop_tx);
        t.join().unwrap();
        // Us, the shell (a child of the test thread's process) and its `sleep`.
        assert!(found.contains(&me) && found.contains(&sh), "{found:?}");
        assert!(found.len() >= 3, "{found:?}");
    }
}
