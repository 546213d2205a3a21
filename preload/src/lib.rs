//! `libp5_preload.so`: records the socket calls of unmodified programs — nginx, a Python
//! interpreter, a vendor's binary — loaded with `LD_PRELOAD` (WAP5's LibSockCap; `p5 record
//! --preload -- CMD` sets it up).
//!
//! Each interposed libc function resolves the real one with `dlsym(RTLD_NEXT, …)` once
//! ([`real`]), calls it, and records the call through the runtime's ring and record path
//! (`p5_runtime::interpose`): `send`/`recv` families, `read`/`write`/`readv`/`writev` on
//! sockets, `sendfile`, `splice`, `connect`, `accept`/`accept4`, `close`, `shutdown` ([`io`]
//! and [`conn`]); `poll`, `ppoll`, `select`, `pselect`, `epoll_wait`, `epoll_pwait` as waits
//! ([`waits`]); `socket`, `socketpair`, `dup*` only update what is known about descriptors;
//! `fork`/`vfork` and the `exec` family keep children recording, and `_exit`/`_Exit` flush
//! before the process ends ([`procs`]).
//!
//! Rules:
//! - a thread-local re-entrancy guard ([`guard`]) passes every call made while recording
//!   (the runtime's own system calls, signal handlers) straight to libc, and so do the
//!   runtime's own threads (flusher, connector);
//! - a per-descriptor cache ([`fds`]) decides in one load whether a `read`/`write` is on a
//!   socket, so files and pipes pay almost nothing;
//! - results and `errno` are exactly libc's; a panic in the recording path is caught.
//!
//! Limits: static binaries and runtimes that make raw system calls (Go) never call these
//! symbols and record nothing; calls glibc makes internally (`execl*`, `posix_spawn`,
//! `fclose`, `getaddrinfo`'s sockets) are not seen; a process ended by `exit_group` through
//! `syscall(2)` or by a signal loses what it recorded since the last drain.

// `call_real!` forwards its arguments into the unsafe call of the real function.
#![allow(clippy::macro_metavars_in_unsafe)]

pub mod conn;
pub mod fds;
pub mod guard;
pub mod io;
pub mod procs;
pub mod real;
pub mod waits;
