//! Sensor manifests (`--manifest DIR`): `p5-manifest.json` and the source copies beside it.
//!
//! Several manifests may be given (one per instrumented tree); a sensor id found in more than
//! one keeps the first. The sensor tables the recorded processes sent themselves
//! (`p5_wire::sensors`) come after the given manifests, which therefore override them. Source
//! text is read when the rows are written, one file at a time, from the `sources/` directory
//! beside the manifest — for a sensor table, the one under the table's `root`.

use crate::error::Error;
use p5_wire::manifest::{MANIFEST_FILE, Manifest, SOURCES_DIR, Sensor, SourceFile, parse_id};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Largest source copy loaded into the database.
pub const MAX_SOURCE_BYTES: u64 = 16 << 20;

/// The loaded manifests.
#[derive(Debug, Default, Clone)]
pub struct Manifests {
    /// Source files: (directory holding `sources/`, file).
    pub files: Vec<(PathBuf, SourceFile)>,
    /// Sensors by id, with the index of their file in `files` when known.
    pub sensors: HashMap<u64, (Sensor, Option<usize>)>,
    /// Sensor entries whose id does not parse.
    pub bad_ids: u64,
}

impl Manifests {
    /// Reads `DIR/p5-manifest.json` for every directory (a path to the JSON file works too).
    pub fn load(dirs: &[PathBuf]) -> Result<Self, Error> {
        let mut m = Manifests::default();
        for d in dirs {
            let (dir, file) = if d.is_file() {
                (
                    d.parent().unwrap_or(Path::new(".")).to_path_buf(),
                    d.clone(),
                )
            } else {
                (d.clone(), d.join(MANIFEST_FILE))
            };
            let text = std::fs::read_to_string(&file).map_err(|source| Error::Manifest {
                path: file.clone(),
                source,
            })?;
            let parsed: Manifest =
                serde_json::from_str(&text).map_err(|source| Error::ManifestJson {
                    path: file.clone(),
                    source,
                })?;
            m.add(&dir, parsed);
        }
        Ok(m)
    }

    /// Adds one parsed manifest whose source copies live under `dir/sources`.
    pub fn add(&mut self, dir: &Path, manifest: Manifest) {
        let first = self.files.len();
        let mut by_path = HashMap::new();
        for (i, f) in manifest.files.into_iter().enumerate() {
            by_path.insert(f.path.clone(), first + i);
            self.files.push((dir.to_path_buf(), f));
        }
        for s in manifest.sensors {
            let Some(id) = parse_id(&s.id) else {
                self.bad_ids += 1;
                continue;
            };
            let file = by_path.get(&s.file).copied();
            self.sensors.entry(id).or_insert((s, file));
        }
    }

    /// These manifests plus the sensor tables a session's processes sent: a sensor or a file
    /// the manifests already hold keeps the manifest's entry.
    pub fn with_tables(&self, tables: &[p5_wire::sensors::Table]) -> Manifests {
        let mut m = self.clone();
        let mut files: HashMap<(String, String, String), usize> = HashMap::new();
        for (i, (dir, f)) in m.files.iter().enumerate() {
            let key = (dir.display().to_string(), f.path.clone(), f.sha256.clone());
            files.entry(key).or_insert(i);
        }
        for t in tables {
            let key = (t.root.clone(), t.file.clone(), t.sha256.clone());
            let i = *files.entry(key).or_insert_with(|| {
                m.files.push((
                    PathBuf::from(&t.root),
                    SourceFile {
                        path: t.file.clone(),
                        language: t.language.clone(),
                        sha256: t.sha256.clone(),
                        lines: 0,
                    },
                ));
                m.files.len() - 1
            });
            for s in &t.sensors {
                if let Some(id) = parse_id(&s.id) {
                    m.sensors.entry(id).or_insert_with(|| (s.clone(), Some(i)));
                }
            }
        }
        m
    }

    /// The text of source file `i` (`None` if the copy is missing, too large or not UTF-8).
    pub fn source_text(&self, i: usize) -> Option<String> {
        let (dir, f) = self.files.get(i)?;
        if f.sha256.is_empty() || !f.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let path = dir.join(SOURCES_DIR).join(&f.sha256);
        let meta = std::fs::metadata(&path).ok()?;
        if meta.len() > MAX_SOURCE_BYTES {
            return None;
        }
        String::from_utf8(std::fs::read(path).ok()?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p5_wire::manifest::format_id;
    use p5_wire::sensors::Table;

    fn sensor(id: u64, name: &str, file: &str) -> Sensor {
        Sensor {
            id: format_id(id),
            kind: "function".into(),
            language: "c".into(),
            file: file.into(),
            function: name.into(),
            name: name.into(),
            line: 2,
            column: 1,
            end_line: 3,
            end_column: 2,
        }
    }

    #[test]
    fn tables_name_what_no_manifest_does_and_read_their_sources() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(SOURCES_DIR)).unwrap();
        let sha = "ab".repeat(32);
        std::fs::write(
            dir.path().join(SOURCES_DIR).join(&sha),
            "int x;\nint f(void) {}\n",
        )
        .unwrap();
        let given = Manifests {
            files: vec![(
                PathBuf::from("/elsewhere"),
                SourceFile {
                    path: "m.c".into(),
                    language: "c".into(),
                    sha256: "cd".repeat(32),
                    lines: 9,
                },
            )],
            sensors: [(1, (sensor(1, "from-manifest", "m.c"), Some(0)))].into(),
            bad_ids: 0,
        };
        let table = Table {
            root: dir.path().display().to_string(),
            file: "a.c".into(),
            language: "c".into(),
            sha256: sha,
            sensors: vec![sensor(1, "from-table", "a.c"), sensor(2, "f", "a.c")],
        };
        // The same table sent by two processes adds its file once.
        let m = given.with_tables(&[table.clone(), table]);
        assert_eq!(m.files.len(), 2);
        assert_eq!(
            m.sensors[&1].0.name, "from-manifest",
            "--manifest overrides"
        );
        let (s, file) = &m.sensors[&2];
        assert_eq!((s.name.as_str(), *file), ("f", Some(1)));
        assert_eq!(
            m.source_text(1).as_deref(),
            Some("int x;\nint f(void) {}\n")
        );
    }
}
