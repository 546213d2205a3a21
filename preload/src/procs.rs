//! Keeping a process tree recording: `fork`/`vfork` and the `exec` family.
//!
//! A forked child inherits the interposer; the runtime's fork handler resets its state and
//! the child records anew (its own process, streams and connection) from its first recorded
//! call. `vfork` is served by `fork` — a `vfork` child shares its parent's memory, so it must
//! not record, and running it as a real fork is what POSIX allows. `fork` holds the
//! re-entrancy guard, so the runtime's fork handler (which closes the parent's descriptors)
//! is not recorded.
//!
//! Before `execve`, `execv`, `execvp` and `execvpe` replace the image, what was recorded is
//! flushed (bounded by `P5_EXIT_TIMEOUT_MS`); the new program loads the interposer again and
//! records under its own name. An environment passed without `LD_PRELOAD` gets the one this
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

/// Flushes what this process recorded (its image is about to be replaced).
fn before_exec() {
    guard::held(|| {
        let _ = std::panic::catch_unwind(p5_runtime::flush);
    });
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
