//! Where `#include "p5.h"` goes in an instrumented C or C++ file: at the start of the last
//! blank or comment-only line at file level before the first sensor, outside any preprocessor
//! conditional that does not enclose every sensor (a header guard does). The header must come
//! after the program's own includes and feature-test macros (`_GNU_SOURCE` must precede the
//! first system header), and a directive cannot share a line with code, so no new line is
//! needed. A file without such a line is reported; build it with `-include p5.h`.

use crate::sensor::Problem;
use crate::unit::Unit;
use tree_sitter::Node;

/// Whether the file already includes `p5.h`.
pub fn present(src: &str) -> bool {
    src.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with('#')
            && l[1..].trim_start().starts_with("include")
            && (l.contains("\"p5.h\"") || l.contains("<p5.h>"))
    })
}

const FILE_LEVEL: &[&str] = &[
    "translation_unit",
    "preproc_if",
    "preproc_ifdef",
    "preproc_else",
    "preproc_elif",
    "preproc_elifdef",
];

/// Inserts `#include "p5.h"` for the sensors in `u.edits`, or reports why it cannot.
pub fn insert(u: &mut Unit<'_>, roots: &[Node<'_>]) {
    let src = u.src;
    let (Some(first), Some(last)) = (u.edits.first_offset(), u.edits.last_offset()) else {
        return;
    };
    // Line starts up to the first insertion.
    let mut starts = vec![0usize];
    starts.extend(
        src[..first]
            .match_indices('\n')
            .map(|(i, _)| i + 1)
            .filter(|&i| i <= first),
    );
    // The line holding the first insertion cannot host a directive.
    starts.pop();
    for (k, &s) in starts.iter().enumerate().rev() {
        let line_end = src[s..].find('\n').map_or(src.len(), |i| s + i);
        let line = &src[s..line_end];
        let trimmed = line.trim_start();
        let probe = s + (line.len() - trimmed.len());
        let blank = trimmed.trim().is_empty();
        if !(blank || trimmed.starts_with("//") || trimmed.starts_with("/*")) {
            continue;
        }
        if k > 0
            && src[..s.saturating_sub(1)]
                .trim_end_matches('\r')
                .ends_with('\\')
        {
            continue;
        }
        // Between two chunk trees is file level by construction (chunks end at top-level `}`).
        let Some(root) = roots
            .iter()
            .find(|r| r.start_byte() <= probe && probe < r.end_byte())
        else {
            if blank {
                u.edits.open(probe, "#include \"p5.h\"");
                return;
            }
            continue;
        };
        let Some(mut node) = root.descendant_for_byte_range(probe, probe + 1) else {
            continue;
        };
        if !blank {
            if node.kind() != "comment" || node.start_byte() != probe {
                continue;
            }
            match node.parent() {
                Some(p) => node = p,
                None => continue,
            }
        }
        let mut ok = true;
        let mut a = Some(node);
        while let Some(n) = a {
            // An ERROR root stands for the translation unit (see `Unit::check_error`).
            let root_error = n.is_error() && n.parent().is_none();
            if !(FILE_LEVEL.contains(&n.kind()) || root_error)
                || (n.kind() != "translation_unit"
                    && !root_error
                    && (n.start_byte() > first || n.end_byte() < last))
            {
                ok = false;
                break;
            }
            a = n.parent();
        }
        if ok {
            let text = if blank {
                "#include \"p5.h\""
            } else {
                "#include \"p5.h\" "
            };
            u.edits.open(probe, text);
            return;
        }
    }
    u.problems.push(Problem {
        line: 1,
        column: 1,
        message: "no blank or comment-only file-level line before the first sensor to hold \
                  #include \"p5.h\"; compile this file with -include p5.h"
            .into(),
    });
}
