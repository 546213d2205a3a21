//! `p5-loadgen`: an instrumented load generator. Each of `--threads` threads records
//! `--events` enter/exit events (nested two deep, so per-thread order is checkable) through the
//! p5 runtime, then the process flushes and exits. With `--fork`, the process forks first and
//! the child records the same load as its own process. Used by the end-to-end tests and as a
//! quick check that a log server is reachable: `P5_SESSION=check p5-loadgen`.

use clap::Parser;
use std::time::Duration;

/// Sensor ids used by the generator: outer scope, inner scope.
const OUTER: u64 = 0x10ad_0000_0000_0001;
const INNER: u64 = 0x10ad_0000_0000_0002;

#[derive(Parser, Debug)]
#[command(version, about = "record a synthetic load through the p5 runtime")]
struct Args {
    /// Threads recording events.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Events per thread (rounded down to a multiple of 4: outer enter, inner enter/exit, outer exit).
    #[arg(long, default_value_t = 100_000)]
    events: u64,
    /// Microseconds to sleep after every 1,000 events (spreads the run over time).
    #[arg(long, default_value_t = 0)]
    pause_us: u64,
    /// Fork before recording; parent and child both record the load.
    #[arg(long)]
    fork: bool,
}

fn main() {
    let args = Args::parse();
    p5_runtime::init();
    if args.fork {
        // SAFETY: fork in a process whose only other thread is the runtime's flusher; the
        // runtime's atfork handlers make the child a fresh p5 process.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            eprintln!("p5-loadgen: fork failed");
            std::process::exit(1);
        }
        if pid > 0 {
            run(&args);
            let mut status = 0;
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            println!("parent done");
            return;
        }
    }
    run(&args);
}

fn run(args: &Args) {
    let quads = args.events / 4;
    let pause = args.pause_us;
    let handles: Vec<_> = (0..args.threads)
        .map(|i| {
            std::thread::Builder::new()
                .name(format!("load-{i}"))
                .spawn(move || {
                    for q in 0..quads {
                        let _outer = p5_runtime::scope(OUTER);
                        p5_runtime::enter(INNER);
                        p5_runtime::exit(INNER);
                        if pause > 0 && q % 250 == 249 {
                            std::thread::sleep(Duration::from_micros(pause));
                        }
                    }
                })
                .expect("spawn thread")
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
    p5_runtime::flush();
    let s = p5_runtime::stats();
    // One line per process, `key=value` pairs, for scripts and tests.
    println!(
        "pid={} events={} dropped={} frames={} sent={} acked={} spooled={} lost={} connects={} disconnects={}",
        std::process::id(),
        s.events,
        s.dropped,
        s.frames,
        s.frames_sent,
        s.frames_acked,
        s.frames_spooled,
        s.frames_lost,
        s.connects,
        s.disconnects
    );
}
