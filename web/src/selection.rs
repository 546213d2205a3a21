//! The instrumentation selection the source panel edits, rendered as the `p5.select.toml`
//! that `p5-instrument --select` reads (format: `instrument/README.md`; parser:
//! `instrument/src/select.rs`). Closing the CoSMoS tuning cycle (Fig. 3): look at the trace,
//! choose the functions and regions worth measuring, instrument again.
//!
//! The file is rendered here (the only TOML the viewer writes, so no TOML crate) and either
//! downloaded by the browser or written by the server into the directory given with
//! `--select-dir`, always under the fixed name [`FILE_NAME`]: a request never names a path.

use crate::error::ApiError;
use serde::Deserialize;
use std::fmt::Write;

/// The file name written into the selection directory.
pub const FILE_NAME: &str = "p5.select.toml";

/// Limits on a selection from a request.
const MAX_ENTRIES: usize = 10_000;
const MAX_STRING: usize = 4096;

/// A selection as the browser sends it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Selection {
    /// File globs to instrument.
    #[serde(default)]
    pub files: Vec<String>,
    /// File globs to leave alone.
    #[serde(default)]
    pub exclude_files: Vec<String>,
    /// Function globs to instrument.
    #[serde(default)]
    pub functions: Vec<String>,
    /// Function globs to leave alone.
    #[serde(default)]
    pub exclude_functions: Vec<String>,
    /// Regions by line range.
    #[serde(default)]
    pub regions: Vec<Region>,
}

/// A region by line range (inclusive, 1-based).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Region {
    /// Display name.
    pub name: String,
    /// Relative path of the file.
    pub file: String,
    /// First and last line.
    pub lines: [u32; 2],
}

impl Selection {
    /// Checks sizes and line ranges.
    pub fn validate(&self) -> Result<(), ApiError> {
        let lists = [
            &self.files,
            &self.exclude_files,
            &self.functions,
            &self.exclude_functions,
        ];
        let entries: usize = lists.iter().map(|l| l.len()).sum::<usize>() + self.regions.len();
        if entries > MAX_ENTRIES {
            return Err(ApiError::BadRequest(format!(
                "selection has {entries} entries (at most {MAX_ENTRIES})"
            )));
        }
        let strings = lists
            .iter()
            .flat_map(|l| l.iter())
            .chain(self.regions.iter().flat_map(|r| [&r.name, &r.file]));
        for s in strings {
            if s.is_empty() || s.len() > MAX_STRING {
                return Err(ApiError::BadRequest(
                    "selection strings must be 1 to 4096 bytes".into(),
                ));
            }
        }
        for r in &self.regions {
            if r.lines[0] == 0 || r.lines[1] < r.lines[0] {
                return Err(ApiError::BadRequest(format!(
                    "region {:?}: lines must be 1-based and ordered",
                    r.name
                )));
            }
        }
        Ok(())
    }

    /// The TOML text.
    pub fn to_toml(&self) -> String {
        let mut out = String::from("# p5 instrumentation selection, written by `p5 web`\n");
        let lists = [
            ("files", &self.files),
            ("exclude_files", &self.exclude_files),
            ("functions", &self.functions),
            ("exclude_functions", &self.exclude_functions),
        ];
        for (key, list) in lists {
            if list.is_empty() {
                continue;
            }
            let items: Vec<String> = list.iter().map(|s| quote(s)).collect();
            let _ = writeln!(out, "{key} = [{}]", items.join(", "));
        }
        for r in &self.regions {
            let _ = write!(
                out,
                "\n[[region]]\nname = {}\nfile = {}\nlines = [{}, {}]\n",
                quote(&r.name),
                quote(&r.file),
                r.lines[0],
                r.lines[1]
            );
        }
        out
    }
}

/// A TOML basic string.
pub fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\t' => q.push_str("\\t"),
            '\r' => q.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(q, "\\u{:04X}", c as u32);
            }
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_instrumenter_format() {
        let s = Selection {
            functions: vec!["try_word".into(), "net_*".into()],
            exclude_functions: vec!["a\"b\\c".into()],
            regions: vec![Region {
                name: "loop".into(),
                file: "src/cow.c".into(),
                lines: [10, 20],
            }],
            ..Selection::default()
        };
        s.validate().unwrap();
        assert_eq!(
            s.to_toml(),
            "# p5 instrumentation selection, written by `p5 web`\n\
             functions = [\"try_word\", \"net_*\"]\n\
             exclude_functions = [\"a\\\"b\\\\c\"]\n\
             \n[[region]]\nname = \"loop\"\nfile = \"src/cow.c\"\nlines = [10, 20]\n"
        );
    }

    #[test]
    fn rejects_bad_regions_and_control_characters_are_escaped() {
        let s = Selection {
            regions: vec![Region {
                name: "x".into(),
                file: "f".into(),
                lines: [5, 4],
            }],
            ..Selection::default()
        };
        assert!(s.validate().is_err());
        assert_eq!(quote("a\u{1}b"), "\"a\\u0001b\"");
    }
}
