//! Stopping a recording early: SIGINT or SIGTERM to `p5 record`.
//!
//! The first signal stops the program tree and the recording goes on to its end — merge and
//! summary — with what was recorded: the signal is forwarded to every process of the tree
//! (this process is their child subreaper, so orphans count), then after the grace period
//! the survivors get SIGKILL. A signal the terminal sent (Ctrl-C: `si_code` `SI_KERNEL`)
//! has already reached the processes of the foreground process group, so only the others
//! get it again — a program does not see its Ctrl-C twice. The host agent runs in a process
//! group of its own, so Ctrl-C does not stop it before the program it watches.
//!
//! The second signal skips what is left: the tree is killed at once, the agent and the log
//! server are stopped (so what they hold is stored), and instead of merging `p5 record`
//! prints the `p5 merge` command that would. A signal during the merge itself ends the
//! process with that line (a merge is atomic: an interrupted one leaves no database). A
//! third signal ends the process at once.
//!
//! The handler only counts (atomics, async-signal-safe); the waiting loops look at the count.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::time::{Duration, Instant};

static COUNT: AtomicU32 = AtomicU32::new(0);
static SIGNAL: AtomicI32 = AtomicI32::new(0);
static FROM_TERMINAL: AtomicBool = AtomicBool::new(false);
/// Set while merging: a second signal then ends the process (see the module docs).
static MERGING: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let code = unsafe { info.as_ref() }.map_or(0, |i| i.si_code);
    SIGNAL.store(sig, Ordering::SeqCst);
    FROM_TERMINAL.store(code == libc::SI_KERNEL, Ordering::SeqCst);
    let n = COUNT.fetch_add(1, Ordering::SeqCst) + 1;
    if n >= 3 {
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(128 + sig) };
    }
}

/// Installs the handler for SIGINT and SIGTERM (before anything is started).
pub fn install() {
    // SAFETY: a zeroed sigaction with our handler and an empty mask is valid; sigaction only
    // reads it.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        for sig in [libc::SIGINT, libc::SIGTERM] {
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Signals received so far.
pub fn count() -> u32 {
    COUNT.load(Ordering::SeqCst)
}

/// The last signal received, by name.
pub fn name() -> &'static str {
    match SIGNAL.load(Ordering::SeqCst) {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}

/// Marks the merge as running (`line`: what to print if a second signal ends it) or done.
pub fn merging(line: Option<String>) {
    MERGING.store(line.is_some(), Ordering::SeqCst);
    let Some(line) = line else {
        return;
    };
    let seen = count();
    let _ = std::thread::Builder::new()
        .name("p5-stop-watch".into())
        .spawn(move || {
            while MERGING.load(Ordering::SeqCst) {
                if count() > seen {
                    eprintln!("p5 record: merge interrupted, nothing written; {line}");
                    std::process::exit(128 + SIGNAL.load(Ordering::SeqCst));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
}

/// The processes of the program tree: every descendant of this process except `except`
/// (the host agent) and its own descendants.
pub fn tree(except: Option<u32>) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = children_of(std::process::id());
    while let Some(p) = todo.pop() {
        if Some(p) == except || out.contains(&p) {
            continue;
        }
        out.push(p);
        todo.extend(children_of(p));
    }
    out
}

/// Children of every thread of process `pid`.
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for t in tasks.flatten() {
        if let Ok(s) = std::fs::read_to_string(t.path().join("children")) {
            out.extend(s.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
        }
    }
    out
}

/// Sends `sig` to the processes of the tree (see [`tree`]); with `skip_own_group`, not to
/// those in this process's group (the terminal signalled them already). Returns how many.
pub fn signal_tree(sig: i32, except: Option<u32>, skip_own_group: bool) -> usize {
    // SAFETY: getpgrp has no preconditions.
    let own = unsafe { libc::getpgrp() };
    let mut n = 0;
    for p in tree(except) {
        // SAFETY: getpgid and kill on a pid of our own tree.
        unsafe {
            if skip_own_group && libc::getpgid(p as i32) == own {
                continue;
            }
            if libc::kill(p as i32, sig) == 0 {
                n += 1;
            }
        }
    }
    n
}

/// What the wait for the program tree is doing about signals.
#[derive(Debug)]
pub struct Stopping {
    /// Signals already acted on.
    handled: u32,
    /// When the survivors get SIGKILL.
    kill_at: Option<Instant>,
    grace: Duration,
    /// The host agent (not part of the tree).
    agent: Option<u32>,
}

impl Stopping {
    /// Nothing received yet; `grace` between the forwarded signal and SIGKILL.
    pub fn new(grace: Duration, agent: Option<u32>) -> Self {
        Stopping {
            handled: 0,
            kill_at: None,
            grace,
            agent,
        }
    }

    /// True once a second signal asked to skip the merge.
    pub fn skip_merge(&self) -> bool {
        self.handled >= 2
    }

    /// Acts on signals received since the last call, and on the grace period's end. Called
    /// every few milliseconds while the program tree runs.
    pub fn poll(&mut self) {
        let n = count();
        if n > self.handled && self.handled == 0 {
            self.handled = 1;
            let sig = SIGNAL.load(Ordering::SeqCst);
            let tty = FROM_TERMINAL.load(Ordering::SeqCst);
            let sent = signal_tree(sig, self.agent, tty);
            let g = self.grace.as_secs_f64();
            let forwarded = if tty {
                format!("the terminal sent it; {sent} more process(es) got it from here")
            } else {
                format!("forwarded to {sent} process(es)")
            };
            eprintln!(
                "p5 record: {} received: stopping the program ({forwarded}; SIGKILL in {g:.0} s), \
                 then merging what was recorded; again to stop at once without merging",
                name()
            );
            self.kill_at = Some(Instant::now() + self.grace);
        }
        if n > self.handled && self.handled == 1 && n >= 2 {
            self.handled = 2;
            let k = signal_tree(libc::SIGKILL, self.agent, false);
            eprintln!("p5 record: stopping at once: {k} process(es) killed; no merge");
            self.kill_at = None;
        }
        if self.kill_at.is_some_and(|t| Instant::now() >= t) {
            let k = signal_tree(libc::SIGKILL, self.agent, false);
            if k > 0 {
                eprintln!(
                    "p5 record: {k} process(es) still running after {:.0} s: killed",
                    self.grace.as_secs_f64()
                );
            }
            self.kill_at = Some(Instant::now() + Duration::from_secs(1));
        }
    }
}
