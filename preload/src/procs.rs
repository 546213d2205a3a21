//! Keeping a process tree recording: `fork`/`vfork`, the `exec` family and `_exit`.
//!
//! A forked child inherits the interposer; the runtime's fork handler resets its state and
//! the child records anew (its own process, streams and connection) from its first recorded
//! call. `vfork` is served by `fork` — a `vfork` child shares its parent's memory, so it must
//! not record, and running it as a real fork is what POSIX allows. `fork` holds the
//! re-entrancy guard, so the runtime's fork handler (which closes the parent's descriptors)
//! is not recorded.
//!
//! Before `execve`, `execv`, `execvp` and `execvpe` replace the image, what was recorded is
//! flushed until the log server has acknowledged it (bounded by `P5_EXIT_TIMEOUT_MS`): a
//! forked child that records and `exec`s at once is often still connecting, and a flush that
//! settled for the spool left its events in a file of a process that no longer exists. The
//! new program loads the interposer again and records under its own name.
//!
//! `_exit` and `_Exit` end a process without `atexit` handlers — prefork servers' workers,
//! Python's `os._exit` (`multiprocessing`), `daemon()`'s parent —, so they run the runtime's
//! exit sequence first (drain, wait for acknowledgements within `P5_EXIT_TIMEOUT_MS`, spool
//! the rest, Goodbye). Not seen: `exit_group` made with `syscall(2)` or inline assembly,
//! glibc's internal calls of `_exit` (after a failed `posix_spawn`), and death by a signal;
//! what those processes recorded since the last drain (every `P5_FLUSH_MS`) is lost. A
//! `_exit` from a signal handler that interrupted the runtime's own exit or flush could wait
//! on the lock that code holds: the exit sequence is bounded, the lock is not. An environment passed without `LD_PRELOAD` gets the one this
//! process started with (and its `P5_*` variables), so the program stays recorded. The
//! runtime's configuration is read when the library is loaded, for the same reason: nginx
//! clears its workers' environment before they first communicate.
//! `execl*`, `posix_spawn`, `system` and `popen` call the kernel from inside glibc: they are
//! not flushed, but their programs inherit the environment and record.

use crate::call_real;
use crate::guard;
use crate::real::Real;
use libc::{c_char, c_int, pid_t};
use std::ffi::{CStr, CString};
use std::sync::OnceLock;

static FORK: Real = Real::new(c"fork");
static EXECVE: Real = Real::new(c"execve");
static EXECVPE: Real = Real::new(c"execvpe");
static EXIT_NOW: Real = Real::new(c"_exit");
static EXIT_C99: Real = Real::new(c"_Exit");

/// `LD_PRELOAD=…` and `P5_*=…` as this process started.
static INHERITED: OnceLock<Vec<CString>> = OnceLock::new();

unsafe extern "C" {
    static environ: *const *const c_char;
}

fn inherited() -> &'static [CString] {
    INHERITED.get_or_init(|| {
        std::env::vars_os()
            .filter(|(k, _)| {
                let k = k.to_string_lossy();
                k == "LD_PRELOAD" || k.starts_with("P5_")
            })
            .filter_map(|(k, v)| {
                use std::os::unix::ffi::OsStrExt as _;
                let mut kv = k.as_bytes().to_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                CString::new(kv).ok()
            })
            .collect()
    })
}

extern "C" fn snapshot_environment() {
    let _ = std::panic::catch_unwind(|| {
        inherited();
        if std::env::var("P5_PRELOAD").is_ok_and(|v| guard::off_by(&v)) {
            guard::set_passive();
        }
        p5_runtime::interpose::read_config();
    });
}

/// Takes the snapshot (and the runtime's configuration) while the environment is the one the
/// process started with.
#[used]
#[unsafe(link_section = ".init_array")]
static SNAPSHOT: extern "C" fn() = snapshot_environment;

/// The entries of a NULL-terminated environment.
///
/// # Safety
/// `envp` must be null or a valid NULL-terminated array of C strings.
unsafe fn entries<'a>(envp: *const *const c_char) -> Vec<&'a CStr> {
    let mut out = Vec::new();
    if envp.is_null() {
        return out;
    }
    let mut i = 0;
    loop {
        // SAFETY: per the contract, entries up to the terminating NULL are valid.
        let p = unsafe { *envp.add(i) };
        if p.is_null() {
            return out;
        }
        // SAFETY: as above.
        out.push(unsafe { CStr::from_ptr(p) });
        i += 1;
    }
}

/// `envp` plus the inherited `LD_PRELOAD` and `P5_*` variables it lacks, if it lacks
/// `LD_PRELOAD`; `None` to use `envp` as it is.
///
/// # Safety
/// As for [`entries`].
unsafe fn completed(envp: *const *const c_char) -> Option<Vec<*const c_char>> {
    let keep = inherited();
    // SAFETY: per the contract.
    let have = unsafe { entries(envp) };
    let name = |e: &[u8]| e.split(|&b| b == b'=').next().map(<[u8]>::to_vec);
    if keep.is_empty()
        || have
            .iter()
            .any(|e| e.to_bytes().starts_with(b"LD_PRELOAD="))
    {
        return None;
    }
    let names: Vec<Vec<u8>> = have.iter().filter_map(|e| name(e.to_bytes())).collect();
    let mut out: Vec<*const c_char> = have.iter().map(|e| e.as_ptr()).collect();
    for k in keep {
        if !name(k.to_bytes()).is_some_and(|n| names.contains(&n)) {
            out.push(k.as_ptr());
        }
    }
    out.push(std::ptr::null());
    Some(out)
}

/// Flushes what this process recorded to the log server (its image is about to be replaced).
fn before_exec() {
    guard::held(|| {
        let _ = std::panic::catch_unwind(p5_runtime::interpose::flush_acknowledged);
    });
}

/// Runs the exit sequence and ends the process through `real` (`_exit` or `_Exit`), or the
/// `exit_group` system call if it cannot be found.
fn exit_through(real: &Real, status: c_int) -> ! {
    guard::held(|| {
        let _ = std::panic::catch_unwind(p5_runtime::interpose::exit_sequence);
    });
    type F = unsafe extern "C" fn(c_int) -> !;
    let p = real.get();
    if !p.is_null() {
        // SAFETY: `p` is libc's function of this name, whose C signature is `F`.
        let f: F = unsafe { std::mem::transmute::<*mut std::ffi::c_void, F>(p) };
        // SAFETY: as `_exit(2)`.
        unsafe { f(status) }
    }
    // SAFETY: ends the process; no return.
    unsafe { libc::syscall(libc::SYS_exit_group, status) };
    unreachable!("exit_group returned")
}

/// `_exit(2)`, after the runtime's exit sequence.
///
/// # Safety
/// As for `_exit(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _exit(status: c_int) -> ! {
    exit_through(&EXIT_NOW, status)
}

/// `_Exit(3)`, after the runtime's exit sequence.
///
/// # Safety
/// As for `_Exit(3)`.
#[allow(non_snake_case)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _Exit(status: c_int) -> ! {
    exit_through(&EXIT_C99, status)
}

/// `fork(2)`, with the guard held through the fork handlers.
///
/// # Safety
/// As for `fork(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fork() -> pid_t {
    type F = unsafe extern "C" fn() -> pid_t;
    guard::held(|| call_real!(FORK, F, -1, ()))
}

/// `vfork(2)`, run as `fork`.
///
/// # Safety
/// As for `vfork(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn vfork() -> pid_t {
    // SAFETY: a fork is a valid vfork.
    unsafe { fork() }
}

type Execve =
    unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;

/// `execve(2)`.
///
/// # Safety
/// As for `execve(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    before_exec();
    // SAFETY: `envp` is a valid environment, as execve requires.
    let env = unsafe { completed(envp) };
    let envp = env.as_ref().map_or(envp, |e| e.as_ptr());
    call_real!(EXECVE, Execve, -1, (path, argv, envp))
}

/// `execv(3)`.
///
/// # Safety
/// As for `execv(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    // SAFETY: `environ` is the process's environment.
    unsafe { execve(path, argv, environ) }
}

/// `execvpe(3)`.
///
/// # Safety
/// As for `execvpe(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    before_exec();
    // SAFETY: `envp` is a valid environment, as execvpe requires.
    let env = unsafe { completed(envp) };
    let envp = env.as_ref().map_or(envp, |e| e.as_ptr());
    call_real!(EXECVPE, Execve, -1, (file, argv, envp))
}

/// `execvp(3)`.
///
/// # Safety
/// As for `execvp(3)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    // SAFETY: `environ` is the process's environment.
    unsafe { execvpe(file, argv, environ) }
}
