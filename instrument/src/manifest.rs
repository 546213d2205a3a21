//! Writing the sensor manifest (`p5-manifest.json`, format in `docs/manifest.md`, types in
//! `p5_wire::manifest`) and the content-addressed source copies (`sources/<sha256>`) that
//! let click-back show the instrumented text after the tree has changed.

use crate::lang::Lang;
use crate::sensor::Sensor;
use p5_wire::manifest::{self as wm, MANIFEST_FILE, MANIFEST_VERSION, SOURCES_DIR};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Collects files and sensors, then writes them.
#[derive(Debug, Default)]
pub struct Builder {
    files: Vec<(wm::SourceFile, String)>,
    sensors: Vec<wm::Sensor>,
    problems: Vec<serde_json::Value>,
}

/// SHA-256 of `text`, lowercase hex.
pub fn sha256_hex(text: &str) -> String {
    let d = Sha256::digest(text.as_bytes());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// A sensor as the manifest and the embedded sensor tables write it.
pub fn wire_sensor(rel: &str, lang: Lang, s: &Sensor) -> wm::Sensor {
    wm::Sensor {
        id: wm::format_id(s.id),
        kind: s.kind.name().to_owned(),
        language: lang.name().to_owned(),
        file: rel.to_owned(),
        function: s.function.clone(),
        name: s.name.clone(),
        line: s.span.line,
        column: s.span.column,
        end_line: s.span.end_line,
        end_column: s.span.end_column,
    }
}

impl Builder {
    /// An empty manifest.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one instrumented file (its original text) and its sensors; returns the text's
    /// SHA-256 (the name of its copy under `sources/`).
    pub fn add(&mut self, rel: &str, lang: Lang, original: &str, sensors: &[Sensor]) -> String {
        let sha = sha256_hex(original);
        self.files.push((
            wm::SourceFile {
                path: rel.to_owned(),
                language: lang.name().to_owned(),
                sha256: sha.clone(),
                lines: crate::edit::line_count(original),
            },
            original.to_owned(),
        ));
        self.sensors
            .extend(sensors.iter().map(|s| wire_sensor(rel, lang, s)));
        sha
    }

    /// Records a problem of file `rel` for the manifest's `problems` list.
    pub fn problem(&mut self, rel: &str, p: &crate::sensor::Problem) {
        self.problems.push(serde_json::json!({
            "file": rel,
            "line": p.line,
            "column": p.column,
            "message": p.message,
        }));
    }

    /// Number of sensors so far.
    pub fn sensor_count(&self) -> usize {
        self.sensors.len()
    }

    /// The manifest for source root `root`.
    pub fn manifest(&self, root: &Path) -> wm::Manifest {
        wm::Manifest {
            version: MANIFEST_VERSION,
            tool: format!("p5-instrument {}", env!("CARGO_PKG_VERSION")),
            root: root.display().to_string(),
            files: self.files.iter().map(|f| f.0.clone()).collect(),
            sensors: self.sensors.clone(),
        }
    }

    /// Writes `p5-manifest.json` and `sources/` into `dir`; returns the manifest's path.
    pub fn write(&self, dir: &Path, root: &Path) -> std::io::Result<PathBuf> {
        let sources = dir.join(SOURCES_DIR);
        std::fs::create_dir_all(&sources)?;
        for (f, text) in &self.files {
            let p = sources.join(&f.sha256);
            if !p.exists() {
                std::fs::write(&p, text)?;
            }
        }
        // The problems ride beside the wire crate's manifest type, as an extra key its readers
        // ignore: what could not be instrumented, one `{file, line, column, message}` each.
        let mut value = serde_json::to_value(self.manifest(root)).map_err(std::io::Error::other)?;
        if let Some(map) = value.as_object_mut() {
            map.insert(
                "problems".into(),
                serde_json::Value::Array(self.problems.clone()),
            );
        }
        let json = serde_json::to_string_pretty(&value).map_err(std::io::Error::other)?;
        let path = dir.join(MANIFEST_FILE);
        std::fs::write(&path, json + "\n")?;
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha_is_standard() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
