//! Regions inside a block: enter, exit and statement marks, exits before every `return`
//! inside, and regions instrumented already.

use crate::region;
use crate::sensor::{Kind, Span, parse_literal};
use crate::tree::{jumps_out, text};
use crate::unit::Unit;
use tree_sitter::Node;

pub(super) fn regions(u: &mut Unit<'_>, block: Node<'_>, function: &str, cpp: bool) {
    let src = u.src;
    let found = region::in_block(
        block,
        src,
        |n| n.kind() == "comment",
        |n| {
            !matches!(
                n.kind(),
                "case_statement" | "labeled_statement" | "function_definition"
            )
        },
        &u.line_regions,
        &mut u.regions_used,
        &mut u.problems,
    );
    for r in found {
        if already_instrumented(u, &r, function) {
            continue;
        }
        let (Some(first), Some(last)) = (r.statements.first(), r.statements.last()) else {
            if let (Some(b), Some(e)) = (r.begin, r.end) {
                let span = Span::of(b);
                let id = u.ledger.add(Kind::Region, function, &r.name, span, None);
                let lit = u.lit(id);
                u.edits
                    .open(b.start_byte(), format!("p5_enter_inline({lit}); "));
                u.edits
                    .open(e.start_byte(), format!("p5_exit_inline({lit}); "));
            }
            continue;
        };
        let span = Span {
            end_line: Span::of(*last).end_line,
            end_column: Span::of(*last).end_column,
            ..Span::of(*first)
        };
        let id = u.ledger.add(Kind::Region, function, &r.name, span, None);
        let lit = u.lit(id);
        match r.begin {
            Some(b) => u
                .edits
                .open(b.start_byte(), format!("p5_enter_inline({lit}); ")),
            None => u
                .edits
                .open(first.start_byte(), format!("p5_enter_inline({lit}); ")),
        }
        for s in &r.statements {
            let sid = u
                .ledger
                .add(Kind::Statement, function, &r.name, Span::of(*s), None);
            let slit = u.lit(sid);
            u.edits
                .open(s.start_byte(), format!("p5_mark_inline({slit}); "));
            returns_inside(u, *s, &lit, cpp);
        }
        match r.end {
            Some(e) => u
                .edits
                .open(e.start_byte(), format!("p5_exit_inline({lit}); ")),
            None => u
                .edits
                .close(last.end_byte(), format!(" p5_exit_inline({lit});")),
        }
    }
}

/// The id of `stmt` if it is `<func>(<id>);`.
fn inline_call_id(stmt: Node<'_>, src: &str, func: &str) -> Option<u64> {
    let t = text(stmt, src).trim();
    parse_literal(
        t.strip_prefix(func)?
            .strip_prefix('(')?
            .strip_suffix(");")?,
    )
}

/// A region whose enter call is already there (before its begin comment, or as its first
/// statement) is registered with the ids in the text and left alone.
fn already_instrumented(u: &mut Unit<'_>, r: &region::Region<'_>, function: &str) -> bool {
    let src = u.src;
    let id = match r.begin {
        Some(b) => {
            let line_start = src[..b.start_byte()].rfind('\n').map_or(0, |i| i + 1);
            let before = src[line_start..b.start_byte()].trim();
            before
                .strip_prefix("p5_enter_inline(")
                .and_then(|t| t.strip_suffix(");"))
                .and_then(parse_literal)
        }
        None => r
            .statements
            .first()
            .and_then(|s| inline_call_id(*s, src, "p5_enter_inline")),
    };
    let Some(id) = id else {
        return false;
    };
    let span = r
        .statements
        .first()
        .or(r.begin.as_ref())
        .map(|n| Span::of(*n));
    let Some(span) = span else {
        return true;
    };
    u.ledger
        .add(Kind::Region, function, &r.name, span, Some(id));
    for s in &r.statements {
        if let Some(sid) = inline_call_id(*s, src, "p5_mark_inline") {
            u.ledger
                .add(Kind::Statement, function, &r.name, Span::of(*s), Some(sid));
        }
    }
    true
}

fn returns_inside(u: &mut Unit<'_>, stmt: Node<'_>, lit: &str, _cpp: bool) {
    let found = jumps_out(
        stmt,
        &["return_statement"],
        &["lambda_expression", "function_definition"],
    );
    for r in found {
        u.edits
            .open(r.start_byte(), format!("{{ p5_exit_inline({lit}); "));
        u.edits.close(r.end_byte(), " }");
    }
}
