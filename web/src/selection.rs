//! The instrumentation selection the source panel edits, saved as the `p5.select.toml` that
//! `p5-instrument --select` reads. Closing the CoSMoS tuning cycle (Fig. 3): look at the
//! trace, choose the functions and regions worth measuring, instrument again.
//!
//! The file's type is [`Selection`] (`p5_wire::selection::SelectionFile`), the one the
//! instrumenter reads, so what the viewer writes is what the instrumenter reads. Here: the limits on a selection
//! from a request. The file is either downloaded by the browser or written by the server into
//! the directory given with `--select-dir`, always under the fixed name [`FILE_NAME`]: a
//! request never names a path.

use crate::error::ApiError;
pub use p5_wire::selection::{FILE_NAME, LineRegion, SelectionFile as Selection};

/// Limits on a selection from a request.
const MAX_ENTRIES: usize = 10_000;
const MAX_STRING: usize = 4096;

/// Who writes the file (its header line).
pub const WRITER: &str = "`p5 web`";

/// Checks a selection from a request: sizes and line ranges.
pub fn validate(sel: &Selection) -> Result<(), ApiError> {
    let lists = [
        &sel.files,
        &sel.exclude_files,
        &sel.functions,
        &sel.exclude_functions,
    ];
    let entries: usize = lists.iter().map(|l| l.len()).sum::<usize>() + sel.regions.len();
    if entries > MAX_ENTRIES {
        return Err(ApiError::BadRequest(format!(
            "selection has {entries} entries (at most {MAX_ENTRIES})"
        )));
    }
    let strings = lists
        .iter()
        .flat_map(|l| l.iter())
        .chain(sel.regions.iter().flat_map(|r| [&r.name, &r.file]));
    for s in strings {
        if s.is_empty() || s.len() > MAX_STRING {
            return Err(ApiError::BadRequest(
                "selection strings must be 1 to 4096 bytes".into(),
            ));
        }
    }
    for r in &sel.regions {
        if r.lines[0] == 0 || r.lines[1] < r.lines[0] {
            return Err(ApiError::BadRequest(format!(
                "region {:?}: lines must be 1-based and ordered",
                r.name
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_what_the_instrumenter_reads() {
        let s = Selection {
            functions: vec!["try_word".into(), "net_*".into()],
            exclude_functions: vec!["a\"b\\c".into()],
            regions: vec![LineRegion {
                name: "loop".into(),
                file: "src/cow.c".into(),
                lines: [10, 20],
            }],
            ..Selection::default()
        };
        validate(&s).unwrap();
        let text = s.to_toml(WRITER);
        assert!(text.starts_with("# p5 instrumentation selection, written by `p5 web`\n"));
        assert_eq!(Selection::from_toml(&text, "t").unwrap(), s);
    }

    #[test]
    fn rejects_bad_regions() {
        let s = Selection {
            regions: vec![LineRegion {
                name: "x".into(),
                file: "f".into(),
                lines: [5, 4],
            }],
            ..Selection::default()
        };
        assert!(validate(&s).is_err());
    }
}
