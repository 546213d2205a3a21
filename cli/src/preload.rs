//! `p5 record --preload`: the interposing library `libp5_preload.so` for unmodified programs.
//!
//! [`library`] finds it as the runtime library is found: `$P5_PRELOAD_LIB`, then beside the
//! running executable (a cargo build puts both in `target/<profile>/`), then — from the source
//! tree — built with `cargo build -p p5-preload` and searched again. [`write_manifest`] writes
//! the manifest that names each interposed call's sensor after the call, for merge.
//! [`interposable`] tells, before the run, whether a program can be interposed at all: static
//! binaries and Go programs (raw system calls) cannot.

use anyhow::Context as _;
use std::path::{Path, PathBuf};
use std::process::Command;

const LIB_NAME: &str = "libp5_preload.so";

/// What `p5 record --preload` set up for one run.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The `LD_PRELOAD` value CMD runs with.
    pub ld_preload: String,
    /// Directory of the manifest naming the interposed calls.
    pub manifest: PathBuf,
    /// CMD's program name.
    pub program: String,
    /// Why CMD cannot be interposed, if it cannot.
    pub opaque: Option<Opaque>,
}

impl Setup {
    /// Finds (or builds) the library, writes the manifest into `store`, and warns now if
    /// `cmd`'s program cannot be interposed.
    pub fn prepare(store: &Path, cmd: &[std::ffi::OsString]) -> anyhow::Result<Self> {
        let lib = library()?;
        let manifest = write_manifest(&store.join(".preload-manifest"))?;
        let program = cmd.first().map(PathBuf::from).unwrap_or_default();
        let opaque = which(&program).and_then(|p| interposable(&p));
        let program = program
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Some(o) = opaque {
            eprintln!(
                "p5 record: WARNING: {program} cannot be recorded with --preload: {}",
                o.reason()
            );
        }
        Ok(Setup {
            ld_preload: ld_preload(&lib),
            manifest,
            program,
            opaque,
        })
    }

    /// After the merge: says so if the started process (`pid`) recorded nothing.
    pub fn report(&self, pid: u32, summary: &p5_merge::SessionSummary) {
        if summary.clocks.iter().any(|c| c.pid == pid) {
            return;
        }
        let why = match self.opaque {
            Some(o) => o.reason(),
            None => {
                "if it did communicate, it bypasses libc: static binaries and runtimes making \
                 raw system calls (Go) cannot be interposed"
            }
        };
        eprintln!(
            "p5 record: {} (pid {pid}) sent nothing the preload saw; {why}",
            self.program
        );
    }
}

/// `program` itself if it names a path, else the first executable of that name on `PATH`.
fn which(program: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    if program.components().count() > 1 {
        return Some(program.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The path of `libp5_preload.so`, building it if this is a source checkout.
pub fn library() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("P5_PRELOAD_LIB") {
        let p = PathBuf::from(p);
        anyhow::ensure!(p.is_file(), "P5_PRELOAD_LIB={} is not a file", p.display());
        return Ok(p);
    }
    let exe = std::env::current_exe().context("cannot find the running executable")?;
    let exe_dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    let candidates = [exe_dir.join(LIB_NAME), exe_dir.join("..").join(LIB_NAME)];
    let find = || {
        candidates
            .iter()
            .find(|p| p.is_file())
            .map(|p| p.canonicalize().unwrap_or_else(|_| p.clone()))
    };
    if let Some(p) = find() {
        return Ok(p);
    }
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    anyhow::ensure!(
        ws.join("preload").join("Cargo.toml").is_file(),
        "{LIB_NAME} not found next to {}; set P5_PRELOAD_LIB",
        exe.display()
    );
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    // Built together with the package of the running executable, so the runtime's features
    // are that build's and nothing is compiled twice (see p5_instrument::runtime).
    cmd.current_dir(&ws)
        .args(["build", "-q", "-p", "p5-preload", "-p", "p5-cli"]);
    if exe_dir.components().any(|c| c.as_os_str() == "release") {
        cmd.arg("--release");
    }
    let status = cmd
        .status()
        .context("cannot run cargo to build the preload library")?;
    anyhow::ensure!(
        status.success(),
        "cargo build -p p5-preload failed ({status})"
    );
    find().with_context(|| {
        format!(
            "{LIB_NAME} still missing after the build in {}",
            exe_dir.display()
        )
    })
}

/// `LD_PRELOAD` with `lib` first, keeping what the environment already preloads.
pub fn ld_preload(lib: &Path) -> String {
    match std::env::var("LD_PRELOAD") {
        Ok(old) if !old.trim().is_empty() => format!("{} {old}", lib.display()),
        _ => lib.display().to_string(),
    }
}

/// Writes the manifest naming the interposed calls into `dir` (created); returns `dir`.
pub fn write_manifest(dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let json = serde_json::to_string_pretty(&p5_runtime::interpose::manifest())?;
    let file = dir.join(p5_wire::manifest::MANIFEST_FILE);
    std::fs::write(&file, json).with_context(|| format!("cannot write {}", file.display()))?;
    Ok(dir.to_path_buf())
}

/// Why a program cannot be interposed, if it cannot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opaque {
    /// Statically linked: the dynamic loader never runs, so nothing is preloaded.
    Static,
    /// A Go program: its runtime makes system calls itself, not through libc.
    Go,
}

impl Opaque {
    /// The reason, for a warning.
    pub fn reason(self) -> &'static str {
        match self {
            Opaque::Static => "it is statically linked (no dynamic loader, nothing is preloaded)",
            Opaque::Go => "it is a Go program (its runtime makes system calls without libc)",
        }
    }
}

/// Looks at the ELF file `path`: `Some` if the preload cannot see its calls. Anything that
/// is not a readable 64- or 32-bit ELF file (a script: its interpreter is what runs) is
/// taken as interposable.
pub fn interposable(path: &Path) -> Option<Opaque> {
    let bytes = std::fs::read(path).ok()?;
    if bytes.windows(14).any(|w| w == b"\xff Go buildinf:") {
        return Some(Opaque::Go);
    }
    let dynamic = has_interpreter(&bytes)?;
    (!dynamic).then_some(Opaque::Static)
}

/// Whether an ELF image has a `PT_INTERP` program header (`None`: not ELF or truncated).
fn has_interpreter(b: &[u8]) -> Option<bool> {
    if b.get(..4)? != b"\x7fELF" {
        return None;
    }
    let wide = *b.get(4)? == 2;
    if *b.get(5)? != 1 {
        return None; // big-endian: not this machine's
    }
    let u16_at = |o: usize| Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?));
    let (phoff, phentsize, phnum) = if wide {
        (
            u64_at(0x20)? as usize,
            u16_at(0x36)? as usize,
            u16_at(0x38)? as usize,
        )
    } else {
        (
            u32_at(0x1c)? as usize,
            u16_at(0x2a)? as usize,
            u16_at(0x2c)? as usize,
        )
    };
    const PT_INTERP: u32 = 3;
    for i in 0..phnum {
        let at = phoff.checked_add(i.checked_mul(phentsize)?)?;
        if u32_at(at)? == PT_INTERP {
            return Some(true);
        }
    }
    Some(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shell is dynamically linked; the test executable too; a script and garbage are
    /// taken as interposable; a truncated ELF header is not ELF.
    #[test]
    fn dynamic_programs_and_scripts_are_interposable() {
        assert_eq!(interposable(Path::new("/bin/sh")), None);
        let me = std::env::current_exe().unwrap();
        assert_eq!(interposable(&me), None);
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s.sh");
        std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
        assert_eq!(interposable(&script), None);
        assert_eq!(has_interpreter(b"\x7fELF\x02\x01"), None);
        assert_eq!(has_interpreter(b"not elf at all"), None);
    }

    /// A static ELF (a header with no program headers) and a Go build-info blob are caught.
    #[test]
    fn static_and_go_binaries_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        elf[5] = 1;
        let f = dir.path().join("static");
        std::fs::write(&f, &elf).unwrap();
        assert_eq!(interposable(&f), Some(Opaque::Static));
        elf.extend_from_slice(b"\xff Go buildinf:\x08\x02");
        std::fs::write(&f, &elf).unwrap();
        assert_eq!(interposable(&f), Some(Opaque::Go));
    }

    /// The manifest written names every interposed call.
    #[test]
    fn the_manifest_names_the_calls() {
        let dir = tempfile::tempdir().unwrap();
        let d = write_manifest(&dir.path().join("m")).unwrap();
        let text = std::fs::read_to_string(d.join(p5_wire::manifest::MANIFEST_FILE)).unwrap();
        let m: p5_wire::manifest::Manifest = serde_json::from_str(&text).unwrap();
        let names: Vec<&str> = m.sensors.iter().map(|s| s.function.as_str()).collect();
        for call in ["send", "recv", "writev", "epoll_wait", "accept4"] {
            assert!(names.contains(&call), "{call}: {names:?}");
        }
    }
}
