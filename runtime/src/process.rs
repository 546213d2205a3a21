//! The runtime's per-process state and its life cycle: initialisation, exit and fork.
//!
//! All state of one *process incarnation* hangs off one leaked [`Process`], published through
//! an atomic pointer and guarded by a small lock-free state machine (`UNINIT → INITIALIZING →
//! READY → FINISHED`, or `DISABLED`). Nothing here uses a lock that a fork could leave held.
//!
//! - **Initialisation** happens on [`crate::init`] or lazily on the first event: read the
//!   configuration, pick the clock, capture the origin, gather the identity, start the flusher
//!   thread, and (once per address space) register the `atexit` and `pthread_atfork` hooks.
//! - **Exit**: the `atexit` hook (and [`crate::shutdown`]) asks the flusher to drain
//!   everything, wait up to `P5_EXIT_TIMEOUT_MS` for acknowledgements, spool the rest and say
//!   Goodbye, and waits for that with a bound. It is idempotent and never waits on itself.
//! - **Fork**: the child handler runs in the only thread of the child and does only
//!   async-signal-safe work: it captures a new origin, closes the child's copies of the
//!   parent's socket, spool and doorbell descriptors, forgets the parent's incarnation (its
//!   rings and queues belong to the parent and are leaked, i.e. left as copy-on-write pages),
//!   and resets the state to `UNINIT`. The child's own incarnation — new `process_uid`, pid,
//!   ppid and start time, new flusher thread and connection — is created lazily by its first
//!   event (or `init`/`flush`). A child that only `exec`s therefore costs nothing; spawning a
//!   thread inside the atfork handler itself is avoided on purpose.

use crate::clock::{self, Origin};
use crate::config::Config;
use crate::outbox::Fds;
use crate::registry::Registry;
use crate::sensor;
use crate::stats::Counters;
use crate::waker::Waker;
use p5_wire::{Identity, RuntimeKind};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU8, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

const UNINIT: u8 = 0;
const INITIALIZING: u8 = 1;
const READY: u8 = 2;
const DISABLED: u8 = 3;
const FINISHED: u8 = 4;

static STATE: AtomicU8 = AtomicU8::new(UNINIT);
static PROCESS: AtomicPtr<Process> = AtomicPtr::new(std::ptr::null_mut());
static CONFIG: OnceLock<Config> = OnceLock::new();
static HOOKS: AtomicBool = AtomicBool::new(false);
/// Origin captured by the atfork child handler, consumed by the child's initialisation.
static FORK_PENDING: AtomicBool = AtomicBool::new(false);
static FORK_TICKS: AtomicU64 = AtomicU64::new(0);
static FORK_MONO: AtomicU64 = AtomicU64::new(0);
static FORK_WALL: AtomicI64 = AtomicI64::new(0);

thread_local! {
    static IN_INIT: Cell<bool> = const { Cell::new(false) };
}

/// Flusher control: flush tickets and the exit request, with a condition variable for the
/// application threads that wait on them.
#[derive(Debug, Default)]
pub struct Control {
    state: Mutex<Ctl>,
    cv: Condvar,
}

/// The shared control state.
#[derive(Debug, Default, Clone, Copy)]
pub struct Ctl {
    /// Flush requests made so far.
    pub flush_req: u64,
    /// Flush requests completed so far.
    pub flush_done: u64,
    /// The latest flush request that waits for the log server's acknowledgement rather than
    /// the spool ([`flush_acknowledged`]).
    pub acked_req: u64,
    /// Exit (or shutdown) requested.
    pub exit_req: bool,
    /// The exit sequence finished.
    pub exit_done: bool,
    /// The flusher thread is gone.
    pub gone: bool,
}

impl Control {
    fn lock(&self) -> std::sync::MutexGuard<'_, Ctl> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A copy of the state.
    pub fn get(&self) -> Ctl {
        *self.lock()
    }

    fn update(&self, f: impl FnOnce(&mut Ctl)) {
        f(&mut self.lock());
        self.cv.notify_all();
    }

    /// Marks flush tickets up to `ticket` complete.
    pub fn flush_done(&self, ticket: u64) {
        self.update(|c| c.flush_done = c.flush_done.max(ticket));
    }

    /// Marks the exit sequence finished.
    pub fn exit_done(&self) {
        self.update(|c| c.exit_done = true);
    }

    /// Marks the flusher gone (it will complete nothing more).
    pub fn gone(&self) {
        self.update(|c| c.gone = true);
    }

    fn wait(&self, timeout: Duration, done: impl Fn(&Ctl) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut g = self.lock();
        loop {
            if done(&g) {
                return true;
            }
            if g.gone {
                return false;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            g = match self.cv.wait_timeout(g, left) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
    }
}

/// One process incarnation (leaked: a forked child must be able to abandon it).
#[derive(Debug)]
pub struct Process {
    /// Configuration.
    pub config: Config,
    /// Time origin.
    pub origin: Origin,
    /// Identity sent in the handshake.
    pub identity: Identity,
    /// The flusher's doorbell.
    pub waker: Waker,
    /// New thread rings on their way to the flusher.
    pub registry: Registry,
    /// Counters.
    pub counters: Counters,
    /// Descriptors a forked child closes.
    pub fds: Fds,
    /// Flush and exit requests.
    pub control: Control,
}

/// The configuration (read from the environment the first time it is needed).
pub fn config() -> &'static Config {
    CONFIG.get_or_init(Config::from_env)
}

/// The current incarnation, if initialised and not finished.
pub fn current() -> Option<&'static Process> {
    if STATE.load(Ordering::Acquire) != READY {
        return None;
    }
    // SAFETY: a published Process is leaked and never freed.
    unsafe { PROCESS.load(Ordering::Acquire).as_ref() }
}

/// True once initialised (and not finished).
#[inline]
pub fn ready() -> bool {
    STATE.load(Ordering::Acquire) == READY
}

/// The most recent incarnation even if finished (for statistics).
pub fn latest() -> Option<&'static Process> {
    // SAFETY: as above.
    unsafe { PROCESS.load(Ordering::Acquire).as_ref() }
}

/// True if the runtime is, or would be once initialised, recording.
pub fn would_record() -> bool {
    match STATE.load(Ordering::Acquire) {
        READY | INITIALIZING => true,
        UNINIT => config().enabled(),
        _ => false,
    }
}

unsafe extern "C" {
    /// The C library's environment; NULL until it has been set up.
    static environ: *const *const libc::c_char;
}

/// True once the C library has set up the environment. Sensors can fire earlier — from
/// `.preinit_array` functions and what they call — when `getenv` would find nothing and the
/// runtime would start with the wrong configuration (no `P5_DIR`, no `P5_LOGSERVER`).
fn environment_ready() -> bool {
    // SAFETY: reading the pointer value of a libc global; it is only ever set, never freed.
    unsafe { !environ.is_null() }
}

/// Returns the current incarnation, initialising it if needed. `config` applies only if no
/// configuration was fixed yet (the first initialisation wins). Before the C library has set
/// up the environment nothing is initialised and the event is not recorded.
pub fn get_or_init(kind: RuntimeKind, config: Option<Config>) -> Option<&'static Process> {
    if config.is_none() && STATE.load(Ordering::Acquire) == UNINIT && !environment_ready() {
        return None;
    }
    loop {
        match STATE.load(Ordering::Acquire) {
            READY => return current(),
            DISABLED | FINISHED => return None,
            INITIALIZING => {
                if IN_INIT.get() {
                    return None;
                }
                std::thread::yield_now();
            }
            _ => {
                if STATE
                    .compare_exchange(UNINIT, INITIALIZING, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    IN_INIT.set(true);
                    let p = init(kind, config);
                    IN_INIT.set(false);
                    return p;
                }
            }
        }
    }
}

fn init(kind: RuntimeKind, explicit: Option<Config>) -> Option<&'static Process> {
    let config = match explicit {
        Some(c) => CONFIG.get_or_init(|| c),
        None => config(),
    }
    .clone();
    if !config.enabled() {
        sensor::ACTIVE.store(false, Ordering::Relaxed);
        STATE.store(DISABLED, Ordering::Release);
        return None;
    }
    let origin = if FORK_PENDING.swap(false, Ordering::AcqRel) {
        Origin {
            tsc: clock::uses_tsc(),
            ticks0: FORK_TICKS.load(Ordering::Relaxed),
            mono0: FORK_MONO.load(Ordering::Relaxed),
            wall0: FORK_WALL.load(Ordering::Relaxed),
        }
    } else {
        clock::select(config.allow_tsc && clock::invariant_tsc());
        Origin::capture(clock::uses_tsc())
    };
    let identity = crate::identity::gather(&origin, kind, &config.session);
    let p: &'static Process = Box::leak(Box::new(Process {
        config,
        origin,
        identity,
        waker: Waker::new(),
        registry: Registry::default(),
        counters: Counters::default(),
        fds: Fds::default(),
        control: Control::default(),
    }));
    p.fds
        .announce
        .store(announce(p.identity.pid), Ordering::Relaxed);
    PROCESS.store(p as *const Process as *mut Process, Ordering::Release);
    install_hooks();
    let spawned = std::thread::Builder::new()
        .name("p5-flusher".into())
        .spawn(move || crate::flusher::run(p));
    if spawned.is_err() {
        sensor::ACTIVE.store(false, Ordering::Relaxed);
        STATE.store(DISABLED, Ordering::Release);
        return None;
    }
    STATE.store(READY, Ordering::Release);
    Some(p)
}

/// Prefix of the abstract unix socket name every recording process binds.
pub const ANNOUNCE_PREFIX: &str = "p5-runtime-";

/// Announces this process as instrumented: binds the abstract unix socket
/// `@p5-runtime-<pid>`, which lives exactly as long as the process (no file to clean up, gone
/// even after SIGKILL) and shows in `/proc/net/unix` to every user, so a host agent's OS
/// monitor can start with the first instrumented process and stop after the last (CoSMoS
/// §2.3). Returns the descriptor, or −1 if the socket could not be made (nothing else depends
/// on it). A forked child closes its copy and announces its own pid when it initialises.
fn announce(pid: u32) -> i32 {
    // SAFETY: plain socket calls on a zeroed sockaddr_un we fill in; the name fits
    // (`p5-runtime-` plus at most 10 digits, far below sun_path's 108 bytes).
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return -1;
        }
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let name = format!("{ANNOUNCE_PREFIX}{pid}");
        for (i, b) in name.bytes().enumerate() {
            addr.sun_path[i + 1] = b as libc::c_char;
        }
        let len = std::mem::size_of::<libc::sa_family_t>() + 1 + name.len();
        let rc = libc::bind(
            fd,
            (&raw const addr).cast::<libc::sockaddr>(),
            len as libc::socklen_t,
        );
        if rc != 0 {
            libc::close(fd);
            return -1;
        }
        fd
    }
}

fn install_hooks() {
    if HOOKS.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: registering plain extern "C" functions that never unwind.
    unsafe {
        libc::atexit(at_exit);
        libc::pthread_atfork(None, None, Some(at_fork_child));
    }
}

/// Asks a flush of everything recorded so far and waits until it is acknowledged or spooled
/// (bounded by the exit timeout). True if it completed.
pub fn flush() -> bool {
    flush_until(false)
}

/// [`flush`], but a spooled frame does not count until the log server acknowledged it
/// (for `exec`: a spool left behind would belong to no process).
pub fn flush_acknowledged() -> bool {
    flush_until(true)
}

fn flush_until(acked: bool) -> bool {
    let Some(p) = current() else {
        return true;
    };
    if sensor::on_flusher_thread() {
        return false;
    }
    let ticket = {
        let mut c = p.control.lock();
        c.flush_req += 1;
        if acked {
            c.acked_req = c.flush_req;
        }
        c.flush_req
    };
    p.waker.wake();
    p.control
        .wait(p.config.exit_timeout + Duration::from_millis(500), |c| {
            c.flush_done >= ticket
        })
}

/// Runs the exit sequence once (atexit and `shutdown`); later calls return at once.
pub fn finish() {
    if STATE
        .compare_exchange(READY, FINISHED, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        if STATE.load(Ordering::Acquire) == UNINIT {
            STATE.store(FINISHED, Ordering::Release);
        }
        sensor::ACTIVE.store(false, Ordering::Relaxed);
        return;
    }
    sensor::ACTIVE.store(false, Ordering::Relaxed);
    let Some(p) = latest() else {
        return;
    };
    if sensor::on_flusher_thread() {
        return;
    }
    p.control.update(|c| c.exit_req = true);
    p.waker.wake();
    p.control
        .wait(p.config.exit_timeout + Duration::from_millis(1500), |c| {
            c.exit_done
        });
}

/// Turns recording on or off (no effect once disabled by configuration or shut down).
pub fn set_active(on: bool) {
    let ok = matches!(STATE.load(Ordering::Acquire), UNINIT | INITIALIZING | READY);
    sensor::ACTIVE.store(on && ok, Ordering::Relaxed);
}

extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(finish);
}

/// The `pthread_atfork` child handler. Async-signal-safe: atomics, clock reads, `close`.
extern "C" fn at_fork_child() {
    let state = STATE.load(Ordering::Acquire);
    if state == READY || state == INITIALIZING {
        let old = PROCESS.swap(std::ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: leaked, never freed.
        if let Some(p) = unsafe { old.as_ref() } {
            // The connection and the spool live in the flusher's own table when it has one
            // (`fdtable`): their numbers are not the child's to close.
            let elsewhere = crate::fdtable::private();
            for (fd, in_flusher_table) in [
                (&p.fds.conn, elsewhere),
                (&p.fds.spool, elsewhere),
                (&p.fds.announce, false),
                (&p.fds.udp, elsewhere),
            ] {
                let fd = fd.swap(-1, Ordering::Relaxed);
                if fd >= 0 && !in_flusher_table {
                    // SAFETY: closing the child's copy of a descriptor the parent owns.
                    unsafe { libc::close(fd) };
                }
            }
            p.waker.close_inherited();
        }
        let o = Origin::capture(clock::uses_tsc());
        FORK_TICKS.store(o.ticks0, Ordering::Relaxed);
        FORK_MONO.store(o.mono0, Ordering::Relaxed);
        FORK_WALL.store(o.wall0, Ordering::Relaxed);
        FORK_PENDING.store(true, Ordering::Release);
        STATE.store(UNINIT, Ordering::Release);
    }
    sensor::forget_thread_ring();
    crate::comm::reset_after_fork();
}
