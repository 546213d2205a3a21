//! A program started and held before `exec` until it is released, so its pid is known — and
//! kernel tracing can follow it — before it runs its first instruction (`p5 record --sched`).
//!
//! `std::process::Command` cannot do this: with a `pre_exec` hook it waits in `spawn` until the
//! child has exec'd. So the child is forked here: everything it needs (path, argv, envp) is
//! built before `fork`, and between `fork` and `execve` it calls only async-signal-safe
//! functions (`close`, `read`, `sigprocmask`, `signal`, `execve`, `_exit`). It waits for one
//! byte on a pipe; end of file (this process died) releases it too.

use anyhow::Context as _;
use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

/// A forked program waiting at the gate (until [`Held::release`]), then running.
#[derive(Debug)]
pub struct Held {
    pid: libc::pid_t,
    write: libc::c_int,
    /// Read end of a close-on-exec pipe on which the child reports a failed `execve`.
    exec_err: libc::c_int,
}

fn cstr(s: &OsStr) -> anyhow::Result<CString> {
    CString::new(s.as_bytes()).context("an argument or variable contains a NUL byte")
}

/// `program` itself if it names a path, else the first executable file of that name on
/// `PATH` (as `execvp` would find it).
pub fn resolve(program: &OsStr) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    if program.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

impl Held {
    /// Forks `cmd` (program and arguments) with the current environment plus `env`, held.
    pub fn spawn(cmd: &[OsString], env: &[(&str, &str)]) -> anyhow::Result<Self> {
        let program = cmd.first().context("no program")?;
        let path = resolve(program).with_context(|| format!("cannot find {program:?}"))?;
        if !Path::new(&path).exists() {
            anyhow::bail!(
                "cannot start {program:?}: {} does not exist",
                path.display()
            );
        }
        let path = cstr(path.as_os_str())?;
        let argv: Vec<CString> = cmd.iter().map(|a| cstr(a)).collect::<Result<_, _>>()?;
        let mut envp = Vec::new();
        for (k, v) in std::env::vars_os() {
            if env.iter().any(|(n, _)| OsStr::new(n) == k) {
                continue;
            }
            let mut kv = k;
            kv.push("=");
            kv.push(v);
            envp.push(cstr(&kv)?);
        }
        for (k, v) in env {
            envp.push(cstr(OsStr::new(&format!("{k}={v}")))?);
        }
        let argv_p: Vec<*const libc::c_char> = argv
            .iter()
            .map(|a| a.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect();
        let envp_p: Vec<*const libc::c_char> = envp
            .iter()
            .map(|a| a.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect();
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into the array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error()).context("cannot make a pipe");
        }
        let [read, write] = fds;
        let mut efds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into the array.
        if unsafe { libc::pipe2(efds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            let e = std::io::Error::last_os_error();
            // SAFETY: closing our own descriptors.
            unsafe {
                libc::close(read);
                libc::close(write);
            }
            return Err(e).context("cannot make a pipe");
        }
        let [err_read, err_write] = efds;
        // SAFETY: the child calls only async-signal-safe functions on memory prepared above
        // and never returns (execve or _exit).
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let e = std::io::Error::last_os_error();
            // SAFETY: closing our own descriptors.
            unsafe {
                for fd in [read, write, err_read, err_write] {
                    libc::close(fd);
                }
            }
            return Err(e).context("cannot fork");
        }
        if pid == 0 {
            // SAFETY: async-signal-safe calls only (see above).
            unsafe {
                libc::close(write);
                libc::close(err_read);
                let mut b = 0u8;
                while libc::read(read, (&raw mut b).cast(), 1) < 0
                    && *libc::__errno_location() == libc::EINTR
                {}
                let mut none: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut none);
                libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                libc::execve(path.as_ptr(), argv_p.as_ptr(), envp_p.as_ptr());
                let errno = (*libc::__errno_location()).to_ne_bytes();
                libc::write(err_write, errno.as_ptr().cast(), errno.len());
                libc::_exit(127);
            }
        }
        // SAFETY: the parent's copies of these ends are not needed.
        unsafe {
            libc::close(read);
            libc::close(err_write);
        }
        Ok(Self {
            pid,
            write,
            exec_err: err_read,
        })
    }

    /// The program's pid.
    pub fn id(&self) -> u32 {
        self.pid as u32
    }

    /// Lets the program run (also when dropped) and waits until it has exec'd; returns why
    /// `execve` failed, if it did (the child then exits with status 127).
    pub fn release(&mut self) -> Option<std::io::Error> {
        if self.write < 0 {
            return None;
        }
        // SAFETY: writing one byte to and closing a descriptor we own.
        unsafe {
            libc::write(self.write, [1u8].as_ptr().cast(), 1);
            libc::close(self.write);
        }
        self.write = -1;
        let mut errno = [0u8; 4];
        let mut got = 0;
        while got < errno.len() {
            // SAFETY: reading into our own buffer from a descriptor we own.
            let n = unsafe {
                libc::read(
                    self.exec_err,
                    errno[got..].as_mut_ptr().cast(),
                    errno.len() - got,
                )
            };
            if n > 0 {
                got += n as usize;
            } else if n == 0
                || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
            {
                break;
            }
        }
        // SAFETY: closing a descriptor we own.
        unsafe { libc::close(self.exec_err) };
        (got == errno.len()).then(|| std::io::Error::from_raw_os_error(i32::from_ne_bytes(errno)))
    }

    /// Its exit status if it has ended (reaping it), else `None`. Never blocks.
    pub fn try_wait(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        let mut status = 0;
        // SAFETY: waiting (without blocking) for our own child.
        let r = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
        if r == self.pid {
            return Ok(Some(ExitStatus::from_raw(status)));
        }
        let e = std::io::Error::last_os_error();
        if r == 0 || e.kind() == std::io::ErrorKind::Interrupted {
            return Ok(None);
        }
        Err(e).context("cannot wait for the program")
    }

    /// Kills a program still held at the gate (the recording was interrupted before it ran)
    /// and reaps it.
    pub fn kill_held(&mut self) {
        if self.write < 0 {
            return;
        }
        // SAFETY: signalling and reaping our own child; closing descriptors we own.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            let mut status = 0;
            libc::waitpid(self.pid, &mut status, 0);
            libc::close(self.write);
            libc::close(self.exec_err);
        }
        self.write = -1;
    }

    /// Releases the program if held and waits for it.
    pub fn wait(&mut self) -> anyhow::Result<ExitStatus> {
        if let Some(e) = self.release() {
            eprintln!("p5 record: cannot start the program: {e}");
        }
        let mut status = 0;
        loop {
            // SAFETY: waiting for our own child.
            let r = unsafe { libc::waitpid(self.pid, &mut status, 0) };
            if r == self.pid {
                return Ok(ExitStatus::from_raw(status));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e).context("cannot wait for the program");
            }
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.release();
    }
}
