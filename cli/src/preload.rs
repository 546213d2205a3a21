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
        anyhow::ensure!(
            p.is_file(),
            "P5_PRELOAD_LIB={} is not a file (point it at libp5_preload.so, or unset it)",
            p.display()
        );
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
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // In a source checkout the library may predate its sources (a pull, a merge): then it is
    // built again; elsewhere it must be beside the executable.
    let in_tree = ws.join("preload").join("Cargo.toml").is_file();
    let fresh = |p: &PathBuf| {
        !in_tree
            || !p5_instrument::runtime::older_than_sources(
                p,
                &p5_instrument::runtime::library_sources(&ws, "preload"),
            )
    };
    if let Some(p) = find().filter(fresh) {
        return Ok(p);
    }
    anyhow::ensure!(
        in_tree,
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
    if section_names(&bytes)?
        .iter()
        .any(|n| n == b".go.buildinfo" || n == b".note.go.buildid")
    {
        return Some(Opaque::Go);
    }
    let dynamic = has_interpreter(&bytes)?;
    (!dynamic).then_some(Opaque::Static)
}

/// Little-endian readers over an ELF image (`None` past its end).
struct Elf<'a> {
    b: &'a [u8],
    wide: bool,
}

impl<'a> Elf<'a> {
    /// `None` unless `b` starts like a little-endian ELF image.
    fn new(b: &'a [u8]) -> Option<Self> {
        if b.get(..4)? != b"\x7fELF" || *b.get(5)? != 1 {
            return None; // not ELF, or big-endian: not this machine's
        }
        Some(Elf {
            b,
            wide: *b.get(4)? == 2,
        })
    }

    fn u16(&self, o: usize) -> Option<usize> {
        let b = self.b.get(o..o.checked_add(2)?)?;
        Some(u16::from_le_bytes(b.try_into().ok()?) as usize)
    }

    fn u32(&self, o: usize) -> Option<usize> {
        let b = self.b.get(o..o.checked_add(4)?)?;
        Some(u32::from_le_bytes(b.try_into().ok()?) as usize)
    }

    /// A word: 8 bytes in a 64-bit image, 4 in a 32-bit one.
    fn word(&self, o: usize) -> Option<usize> {
        if !self.wide {
            return self.u32(o);
        }
        let b = self.b.get(o..o.checked_add(8)?)?;
        usize::try_from(u64::from_le_bytes(b.try_into().ok()?)).ok()
    }
}

/// The names of an ELF image's sections (`None`: not ELF or truncated).
fn section_names(b: &[u8]) -> Option<Vec<Vec<u8>>> {
    let e = Elf::new(b)?;
    let (shoff, shentsize, shnum, shstrndx) = if e.wide {
        (e.word(0x28)?, e.u16(0x3a)?, e.u16(0x3c)?, e.u16(0x3e)?)
    } else {
        (e.word(0x20)?, e.u16(0x2e)?, e.u16(0x30)?, e.u16(0x32)?)
    };
    if shnum == 0 {
        return Some(Vec::new());
    }
    let header = |i: usize| shoff.checked_add(i.checked_mul(shentsize)?);
    let (off_at, size_at) = if e.wide { (0x18, 0x20) } else { (0x10, 0x14) };
    let strtab = header(shstrndx)?;
    let str_off = e.word(strtab.checked_add(off_at)?)?;
    let str_size = e.word(strtab.checked_add(size_at)?)?;
    let strings = b.get(str_off..str_off.checked_add(str_size)?)?;
    let mut names = Vec::new();
    for i in 0..shnum {
        let at = e.u32(header(i)?)?;
        if let Some(rest) = strings.get(at..) {
            names.push(rest.split(|&c| c == 0).next().unwrap_or_default().to_vec());
        }
    }
    Some(names)
}

/// Whether an ELF image has a `PT_INTERP` program header (`None`: not ELF or truncated).
fn has_interpreter(b: &[u8]) -> Option<bool> {
    let e = Elf::new(b)?;
    let (phoff, phentsize, phnum) = if e.wide {
        (e.word(0x20)?, e.u16(0x36)?, e.u16(0x38)?)
    } else {
        (e.word(0x1c)?, e.u16(0x2a)?, e.u16(0x2c)?)
    };
    const PT_INTERP: usize = 3;
    for i in 0..phnum {
        let at = phoff.checked_add(i.checked_mul(phentsize)?)?;
        if e.u32(at)? == PT_INTERP {
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

    /// A 64-bit ELF header with no program headers and one section header table of two
    /// sections (the string table and one named `name`).
    fn elf_with_section(name: &[u8]) -> Vec<u8> {
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        elf[5] = 1;
        let strings_at = elf.len();
        let mut strings = b"\0.shstrtab\0".to_vec();
        let name_at = strings.len() as u32;
        strings.extend_from_slice(name);
        strings.push(0);
        elf.extend_from_slice(&strings);
        let shoff = elf.len();
        elf[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
        elf[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        elf[0x3c..0x3e].copy_from_slice(&2u16.to_le_bytes());
        elf[0x3e..0x40].copy_from_slice(&0u16.to_le_bytes());
        for name in [1u32, name_at] {
            let mut sh = vec![0u8; 64];
            sh[..4].copy_from_slice(&name.to_le_bytes());
            sh[0x18..0x20].copy_from_slice(&(strings_at as u64).to_le_bytes());
            sh[0x20..0x28].copy_from_slice(&(strings.len() as u64).to_le_bytes());
            elf.extend_from_slice(&sh);
        }
        elf
    }

    /// A static ELF (no program headers, so no interpreter) and a Go build (its build-info
    /// section) are caught.
    #[test]
    fn static_and_go_binaries_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("static");
        std::fs::write(&f, elf_with_section(b".text")).unwrap();
        assert_eq!(interposable(&f), Some(Opaque::Static));
        std::fs::write(&f, elf_with_section(b".go.buildinfo")).unwrap();
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
