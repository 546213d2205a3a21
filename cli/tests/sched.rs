//! Scheduling from the first instant (issue 14 item 2): `p5 record --sched` turns kernel
//! tracing on before the program runs and follows its whole process tree, so a 100 ms program
//! has its first on-CPU segment at its start, and children that record nothing — here a shell
//! busy loop that outlives its parent — get on-CPU rows of their own, under a process named
//! by the kernel.
//!
//! Both tests need root (tracefs); they say so and skip otherwise.

use p5_tracedb::read;
use std::path::Path;
use std::process::Command;

const MS: i64 = 1_000_000;

/// Why a test cannot run here, if it cannot.
fn cannot_trace() -> Option<&'static str> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("kernel scheduling tracing needs root for tracefs");
    }
    let mounted = [
        "/sys/kernel/tracing/events",
        "/sys/kernel/debug/tracing/events",
    ]
    .iter()
    .any(|p| Path::new(p).is_dir());
    (!mounted).then_some("tracefs is not mounted")
}

/// Runs `cmd` under `p5 record --sched` into `dir/store`; returns stderr.
fn record(dir: &Path, cmd: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_p5"))
        .args(["record", "--sched", "--session", "sched", "--store"])
        .arg(dir.join("store"))
        .arg("--")
        .args(cmd)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        o.status.success(),
        "{}\n{stderr}",
        String::from_utf8_lossy(&o.stdout)
    );
    stderr
}

/// The merged session's processes, threads and scheduling rows.
fn session(dir: &Path) -> (Vec<read::Process>, Vec<read::Thread>, Vec<read::SchedRow>) {
    let url = format!("sqlite:{}", dir.join("store/p5.sqlite").display());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let db = read::Reader::open(&p5_tracedb::DbUrl::parse(&url).unwrap())
            .await
            .unwrap();
        let s = read::sessions(&db).await.unwrap().remove(0);
        (
            read::processes(&db, s.id).await.unwrap(),
            read::threads(&db, s.id).await.unwrap(),
            read::sched(&db, s.id).await.unwrap(),
        )
    })
}

/// The on-CPU rows of a process's threads.
fn on_cpu<'a>(
    p: &read::Process,
    threads: &[read::Thread],
    sched: &'a [read::SchedRow],
) -> Vec<&'a read::SchedRow> {
    let ids: Vec<i64> = threads
        .iter()
        .filter(|t| t.process_id == p.id)
        .map(|t| t.id)
        .collect();
    sched.iter().filter(|s| ids.contains(&s.thread)).collect()
}

/// Skips (with the reason) when the OS monitor fell back to /proc sampling.
fn traced(threads: &[read::Thread]) -> bool {
    let os = threads.iter().find(|t| t.kind == "os-monitor");
    let ok = os.is_some_and(|t| t.name.contains("tracefs"));
    if !ok {
        eprintln!(
            "skipped: the OS monitor did not use tracefs: {:?}",
            os.map(|t| &t.name)
        );
    }
    ok
}

#[test]
fn a_100_ms_program_is_on_cpu_from_its_first_event() {
    if let Some(why) = cannot_trace() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Four pauses of 25 ms: about 100 ms.
    let loadgen = env!("CARGO_BIN_EXE_p5-loadgen");
    let args = ["--threads", "1", "--events", "4000", "--pause-us", "25000"];
    let mut cmd = vec![loadgen];
    cmd.extend(args);
    record(dir.path(), &cmd);
    let (procs, threads, sched) = session(dir.path());
    if !traced(&threads) {
        return;
    }
    let p = procs
        .iter()
        .find(|p| p.runtime == "rust")
        .expect("the program");
    let end = p.t_end.expect("an end");
    assert!(
        (80 * MS..2_000 * MS).contains(&(end - p.t_start)),
        "ran {} ms",
        (end - p.t_start) / MS
    );
    let rows = on_cpu(p, &threads, &sched);
    let first = rows.iter().map(|s| s.t_start).min().expect("on-CPU rows");
    eprintln!(
        "first on-CPU segment {:.3} ms after the program's first event ({} segments)",
        (first - p.t_start) as f64 / 1e6,
        rows.len()
    );
    assert!(
        first <= p.t_start + 5 * MS,
        "first on-CPU segment {} ns after the first event",
        first - p.t_start
    );
    // Its threads that recorded nothing (the runtime's flusher, the main thread) have lanes
    // too, named by the kernel.
    let named: Vec<&str> = threads
        .iter()
        .filter(|t| t.process_id == p.id && t.kind == "os-thread")
        .map(|t| t.name.as_str())
        .collect();
    assert!(named.contains(&"p5-flusher"), "{named:?}");
}

#[test]
fn children_that_record_nothing_get_on_cpu_rows() {
    if let Some(why) = cannot_trace() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("child.pid");
    let loadgen = env!("CARGO_BIN_EXE_p5-loadgen");
    // The program (a shell) starts an instrumented load and an uninstrumented busy loop and
    // exits at once: the busy loop starts 1.5 s later, when no process it descends from is
    // left, and is still followed.
    let script = format!(
        "{loadgen} --threads 1 --events 4000 --pause-us 10000 & \
         sh -c 'sleep 1.5; echo $$ > {}; i=0; while [ $i -lt 40000 ]; do i=$((i+1)); done' & \
         exit 0",
        pid_file.display()
    );
    record(dir.path(), &["sh", "-c", &script]);
    let (procs, threads, sched) = session(dir.path());
    if !traced(&threads) {
        return;
    }
    let child: i64 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let p = procs
        .iter()
        .find(|p| p.pid == child)
        .unwrap_or_else(|| panic!("no process row for the child {child}: {procs:?}"));
    assert_eq!(p.runtime, "uninstrumented");
    assert_eq!(p.program, "sh");
    let rows = on_cpu(p, &threads, &sched);
    let busy: i64 = rows.iter().map(|s| s.t_end - s.t_start).sum();
    eprintln!(
        "uninstrumented child: {} on-CPU segments, {:.1} ms",
        rows.len(),
        busy as f64 / 1e6
    );
    assert!(busy >= 5 * MS, "{busy} ns on CPU");
    // The instrumented grandchild and the root shell have theirs too.
    for want in ["rust", "uninstrumented"] {
        let n: usize = procs
            .iter()
            .filter(|q| q.runtime == want && q.pid != child)
            .map(|q| on_cpu(q, &threads, &sched).len())
            .sum();
        assert!(n > 0, "no on-CPU rows for the other {want} processes");
    }
}
