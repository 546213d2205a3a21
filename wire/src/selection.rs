//! The selection file, `p5.select.toml`: which files and functions get sensors, and which
//! regions get statement-level sensors — the interactive half of the CoSMoS tuning cycle.
//! `p5 web` builds a [`SelectionFile`] from its source panel and writes it with
//! [`SelectionFile::to_toml`]; `p5-instrument --select` reads it with
//! [`SelectionFile::from_toml`] and compiles its globs. Only the type and its text live here;
//! reading and writing files is the caller's business. Keep it small and stable.
//!
//! ```toml
//! # every key is optional
//! files = ["src/**"]                  # file globs (relative paths); default: every file
//! exclude_files = ["src/vendor/**"]
//! functions = ["net_*", "Server::*"]  # function-name globs; default: every function
//! exclude_functions = ["*_fast"]
//! always = ["parse_*"]                # pinned on: recorded on every call, never throttled
//! count_only = ["hash_*"]             # pinned off: calls only counted (C/C++ `P5_SCOPE_COUNT`)
//!
//! [[region]]                          # a region by line range (inclusive)
//! name = "parse loop"
//! file = "src/parse.c"
//! lines = [120, 148]
//! ```

use serde::{Deserialize, Serialize};

/// The selection file's name.
pub const FILE_NAME: &str = "p5.select.toml";

/// Malformed selection text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad selection file {origin}: {message}")]
pub struct SelectionError {
    /// Where the text came from (a file name).
    pub origin: String,
    /// Why.
    pub message: String,
}

/// The contents of a selection file, as written (by `p5 web`) and read (by the instrumenter,
/// which compiles its globs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectionFile {
    /// File globs to instrument (none: every file).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// File globs to leave alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_files: Vec<String>,
    /// Function globs to instrument (none: every function).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<String>,
    /// Function globs to leave alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_functions: Vec<String>,
    /// Function globs pinned on: every call recorded, never throttled (`P5_SCOPE_ALWAYS`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub always: Vec<String>,
    /// Function globs pinned off: calls counted only, from the first (`P5_SCOPE_COUNT`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub count_only: Vec<String>,
    /// Regions by line range (`[[region]]` tables in the file; `regions` in JSON).
    #[serde(
        default,
        rename = "region",
        alias = "regions",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub regions: Vec<LineRegion>,
}

impl SelectionFile {
    /// Parses the TOML text; `origin` names it in errors. Line ranges are checked.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, SelectionError> {
        let file: SelectionFile = toml::from_str(text).map_err(|e| SelectionError {
            origin: origin.to_owned(),
            message: e.to_string(),
        })?;
        for r in &file.regions {
            if r.lines[0] == 0 || r.lines[0] > r.lines[1] {
                return Err(SelectionError {
                    origin: origin.to_owned(),
                    message: format!("region {:?}: bad line range {:?}", r.name, r.lines),
                });
            }
        }
        Ok(file)
    }

    /// The TOML text, with a header line saying who wrote it.
    pub fn to_toml(&self, writer: &str) -> String {
        // Strings and integer pairs always serialize: the error case cannot occur.
        let body = toml::to_string(self).unwrap_or_default();
        format!("# p5 instrumentation selection, written by {writer}\n{body}")
    }
}

/// A region named by line range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LineRegion {
    /// Display name.
    pub name: String,
    /// Relative path of the file.
    pub file: String,
    /// First and last line, inclusive, 1-based.
    pub lines: [u32; 2],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_file_round_trips_through_toml() {
        let file = SelectionFile {
            files: vec!["src/**".into()],
            exclude_files: vec![],
            functions: vec!["try_word".into(), "a\"b\\c\u{1}".into()],
            exclude_functions: vec!["main".into()],
            always: vec!["parse_*".into()],
            count_only: vec!["hash".into()],
            regions: vec![LineRegion {
                name: "loop \"x\"".into(),
                file: "src/cow.c".into(),
                lines: [10, 20],
            }],
        };
        let text = file.to_toml("a test");
        assert!(text.starts_with("# p5 instrumentation selection, written by a test\n"));
        assert!(text.contains("[[region]]"), "{text}");
        assert_eq!(SelectionFile::from_toml(&text, "t").unwrap(), file);
        // The browser's JSON spells the list `regions`.
        let json = r#"{"functions":["f"],"regions":[{"name":"r","file":"f.c","lines":[1,2]}]}"#;
        let from_json: SelectionFile = serde_json::from_str(json).unwrap();
        assert_eq!(from_json.regions.len(), 1);
        assert_eq!(
            SelectionFile::from_toml(&from_json.to_toml("t"), "t").unwrap(),
            from_json
        );
    }

    #[test]
    fn bad_text_is_an_error_naming_its_origin() {
        let e = SelectionFile::from_toml("files = 3", "p5.select.toml").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("bad selection file p5.select.toml: "),
            "{e}"
        );
        assert!(SelectionFile::from_toml("nonsense = []", "t").is_err());
        let bad = "[[region]]\nname='a'\nfile='b'\nlines=[5,2]";
        assert!(SelectionFile::from_toml(bad, "t").is_err());
    }
}
