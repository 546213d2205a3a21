//! The sensor manifest: what `p5-instrument` writes beside the instrumented tree and what
//! `p5 merge` loads, so every sensor id in a trace maps back to a file, a line and a function.
//!
//! The manifest is JSON (`p5-manifest.json`); source copies are content-addressed files
//! `sources/<sha256 hex>` beside it, so click-back shows the text that was instrumented even
//! after the tree has changed. Sensor ids are written as `"0x…"` hex strings (JSON numbers lose
//! precision above 2^53). This module holds only the types; reading and writing files is the
//! caller's business (this crate does no I/O). Specified in `docs/manifest.md`.

use serde::{Deserialize, Serialize};

/// Manifest format version written by this implementation.
pub const MANIFEST_VERSION: u32 = 1;
/// File name of the manifest inside an instrumentation output directory.
pub const MANIFEST_FILE: &str = "p5-manifest.json";
/// Directory (beside the manifest) holding content-addressed source copies.
pub const SOURCES_DIR: &str = "sources";

/// The whole manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Format version.
    pub version: u32,
    /// Tool and version that wrote it, e.g. `p5-instrument 0.1.0`.
    pub tool: String,
    /// Absolute path of the instrumented source root (informational).
    pub root: String,
    /// Instrumented files.
    pub files: Vec<SourceFile>,
    /// Every sensor inserted.
    pub sensors: Vec<Sensor>,
}

/// One instrumented source file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceFile {
    /// Path relative to the source root, `/`-separated.
    pub path: String,
    /// Language: `c`, `cpp`, `rust`, `python`, `java`.
    pub language: String,
    /// SHA-256 (hex) of the original text; the copy is `sources/<sha256>`.
    pub sha256: String,
    /// Number of lines.
    pub lines: u32,
}

/// One sensor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sensor {
    /// Stable 64-bit id as `0x` + 16 hex digits.
    pub id: String,
    /// `function`, `call`, `comm`, `region` or `statement`.
    pub kind: String,
    /// Language of the file.
    pub language: String,
    /// File path relative to the source root (as in [`SourceFile::path`]).
    pub file: String,
    /// Enclosing function (qualified where the language has qualification), or empty.
    pub function: String,
    /// Display name: the function for `function`, the callee for `call`/`comm`, the region name.
    pub name: String,
    /// 1-based first line of the span the sensor covers.
    pub line: u32,
    /// 1-based first column.
    pub column: u32,
    /// 1-based last line.
    pub end_line: u32,
    /// 1-based column after the end.
    pub end_column: u32,
}

/// Formats a sensor id the way the manifest writes it.
pub fn format_id(id: u64) -> String {
    format!("{id:#018x}")
}

/// Parses a manifest sensor id (`0x` + hex, or decimal).
pub fn parse_id(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip() {
        for id in [0, 1, 0x5050_0000_0000_0001, u64::MAX] {
            assert_eq!(parse_id(&format_id(id)), Some(id));
        }
        assert_eq!(format_id(1), "0x0000000000000001");
        assert_eq!(parse_id("12"), Some(12));
        assert_eq!(parse_id("0xzz"), None);
    }
}
