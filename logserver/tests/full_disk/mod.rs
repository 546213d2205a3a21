//! D13: the log server starts on a full file system. A real tmpfs of 1 MiB is mounted for
//! the test (as root; without root the test says so loudly and passes nothing), a session
//! with a torn tail is written to it, the file system is filled, and the server must start
//! with every acknowledged record readable and the torn tail kept in place; once space is
//! back, the next start quarantines and cuts it.

use crate::{
    InProc, Peer, assert_exact, config, inspect, last_segment, render_text, stored, stream_frames,
    write_session,
};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted on a temporary directory, unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (e.g. `1m`), or says why it cannot.
    fn mount(size: &str) -> Result<Self, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root".into());
        }
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "p5-full-disk"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
        }
        Ok(Self { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Writes zeros to `dir/filler` until the file system is full; returns the file.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let block = vec![0u8; 4096];
    while f.write_all(&block).is_ok() {}
    let _ = f.sync_all();
    // Make sure not even one more block fits.
    assert!(
        std::fs::write(dir.join("probe"), &block).is_err(),
        "file system not full"
    );
    let _ = std::fs::remove_file(dir.join("probe"));
    path
}

#[test]
fn on_a_full_disk_the_server_starts_and_keeps_a_torn_tail_until_it_can_quarantine_it() {
    let fs = match Tmpfs::mount("1m") {
        Ok(fs) => fs,
        Err(why) => {
            eprintln!("SKIPPED full-disk recovery test: cannot mount a tmpfs ({why}); run as root");
            return;
        }
    };
    let root = fs.path().join("store");
    let uid = 0xd13;
    let (frames, events) = stream_frames(0, 20, 200);
    write_session(&root, uid, "full", &frames);
    let before = stored(&root);
    let seg = last_segment(&root, "full");
    let clean = std::fs::metadata(&seg).unwrap().len();
    let mut f = std::fs::OpenOptions::new().append(true).open(&seg).unwrap();
    f.write_all(&[0x5a; 300]).unwrap();
    drop(f);
    let filler = fill(fs.path());

    // Full: the server starts, the tail stays where it is, every acknowledged record reads.
    let server = InProc::start(config(&root));
    assert_eq!(
        server.recovery.repairs().count(),
        0,
        "{:?}",
        server.recovery
    );
    let deferred = &server.recovery.sessions[0].deferred;
    assert_eq!(deferred.len(), 1, "{:?}", server.recovery);
    assert_eq!(
        (deferred[0].offset, deferred[0].removed_bytes),
        (clean, 300)
    );
    let why = deferred[0].deferred.as_deref().unwrap_or_default();
    assert!(why.contains("No space left on device"), "{why}");
    assert_eq!(
        std::fs::metadata(&seg).unwrap().len(),
        clean + 300,
        "kept in place"
    );
    let during = stored(&root);
    assert_eq!(
        during.raw, before.raw,
        "every acknowledged record is readable"
    );
    assert_eq!(during.faults, 1, "the torn tail is reported to readers");

    // Still full: a client is told and nothing of it is acknowledged (it keeps its frames).
    let (mut p, _) = Peer::hello(server.addr, uid, "full");
    for f in &frames[8..] {
        p.send(f);
    }
    let closed = p.expect_closed();
    assert_eq!(closed.last_ack, 0);
    let error = closed.error.unwrap_or_default();
    assert!(error.contains("could not be quarantined yet"), "{error}");

    // Space again, the server still running: the next client's first frame makes the
    // writer copy the tail to quarantine and cut it, then its frames are stored.
    std::fs::remove_file(filler).unwrap();
    let (mut p, _) = Peer::hello(server.addr, uid, "full");
    for f in &frames[8..] {
        p.send(f);
    }
    p.wait_ack((frames.len() - 8) as u64);
    p.goodbye((frames.len() - 8) as u64);
    server.stop();
    let q = root.join("full/quarantine").join(format!(
        "{}@{clean}",
        seg.file_name().unwrap().to_string_lossy()
    ));
    assert_eq!(
        std::fs::read(&q).unwrap(),
        vec![0x5a; 300],
        "{}",
        q.display()
    );
    assert_eq!(
        std::fs::metadata(&seg).unwrap().len(),
        clean,
        "cut after the copy"
    );
    let after = stored(&root);
    assert_eq!(after.faults, 0);
    assert_exact(&after, uid, 0, 21, events);

    // The next start finds nothing to repair; inspect shows the repair (the note that it was
    // deferred could not be written: the disk was full).
    let server = InProc::start(config(&root));
    assert_eq!(server.recovery.repairs().count(), 0);
    assert!(server.recovery.sessions[0].deferred.is_empty());
    server.stop();
    let mut text = Vec::new();
    render_text(&inspect(&root).unwrap(), &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("repaired torn tail"), "{text}");
}

/// The documents give the segment header length the code writes (wire.md said 48 bytes).
#[test]
fn docs_give_the_segment_header_length_the_code_writes() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
    let n = p5_wire::store::SEGMENT_HEADER_LEN;
    let wire = std::fs::read_to_string(docs.join("wire.md")).unwrap();
    let section = &wire[wire.find("## Store segments").expect("store section")..];
    assert!(
        section.contains(&format!("a {n}-byte\nheader")),
        "wire.md: {section}"
    );
    let store = std::fs::read_to_string(docs.join("store.md")).unwrap();
    assert!(store.contains(&format!("A segment is a {n}-byte `SegmentHeader`")));
    assert!(store.contains(&format!("u32 header_len ({n})")));
}
