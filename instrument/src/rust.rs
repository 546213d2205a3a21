//! The Rust engine.
//!
//! `--functions`: `let _p5_guard = p5_runtime::scope(0x…);` right after the opening brace of
//! every `fn` body; the guard's `Drop` records the exit on every way out — `return`, `?`,
//! `break` out of the body's labelled block, panics while unwinding. Not instrumented: `const
//! fn` (no runtime calls in const context), `async fn` (the guard would live across `.await`
//! and exit on another thread; instrument the synchronous functions it calls), closures, and
//! functions written inside macro invocations (tree-sitter sees only token trees there).
//!
//! Regions (`// p5:begin NAME` … `// p5:end`, or selection line ranges): a guard
//! `let _p5_region_<n> = p5_runtime::scope(R);` before the first statement, dropped with
//! `drop(_p5_region_<n>);` at the end (the block's end drops it too, and unwinding), and
//! `p5_runtime::mark(S);` before each statement.
//!
//! `--comm`: std's sockets are replaced by `p5_runtime::net::compat`'s, which record their
//! connects, accepts, reads, writes and closes (see `net`).
//!
//! The instrumented crate needs the runtime: `p5-runtime = { path = "…/runtime" }` in its
//! `[dependencies]` (the instrumenter adds it to a `Cargo.toml` it copies).

mod net;

use crate::region;
use crate::sensor::{Kind, Span, parse_literal};
use crate::tree::{preorder, squash, text};
use crate::unit::Unit;
use tree_sitter::Node;

const GUARD: &str = "let _p5_guard = p5_runtime::scope(";

struct Frame {
    end: usize,
    name: String,
    selected: bool,
}

/// Instruments a Rust file.
pub fn instrument(u: &mut Unit<'_>, root: Node<'_>) {
    let src = u.src;
    let mut frames: Vec<Frame> = Vec::new();
    let mut region_no = 0u32;
    let net = if u.modes.comm {
        net::Net::scan(u, root)
    } else {
        net::Net::default()
    };
    preorder(
        root,
        |n| {
            while frames.last().is_some_and(|f| n.start_byte() >= f.end) {
                frames.pop();
            }
            if u.check_error(n) {
                return false;
            }
            match n.kind() {
                "function_item" => {
                    let bare = n
                        .child_by_field_name("name")
                        .map(|x| text(x, src).to_owned())
                        .unwrap_or_default();
                    let qualified = qualify(n, src, &bare);
                    let selected = u.selected(&qualified, &bare);
                    frames.push(Frame {
                        end: n.end_byte(),
                        name: qualified.clone(),
                        selected,
                    });
                    if n.has_error() {
                        u.problems.push(crate::sensor::Problem::at(
                            n,
                            format!("function {qualified} not instrumented: syntax errors inside"),
                        ));
                        return false;
                    }
                    let modifiers = modifiers(n, src);
                    if u.modes.functions
                        && !modifiers.iter().any(|m| m == "const" || m == "async")
                        && selected
                    {
                        function_sensor(u, n, &qualified);
                    }
                    true
                }
                "block" => {
                    if let Some(f) = frames.last() {
                        let name = f.name.clone();
                        regions(u, n, &name, &mut region_no);
                    }
                    true
                }
                "call_expression" => {
                    if u.modes.comm
                        && let Some(f) = frames.last()
                        && f.selected
                    {
                        let name = f.name.clone();
                        net.call(u, n, &name);
                    }
                    true
                }
                _ => true,
            }
        },
        |_| {},
    );
}

fn modifiers(f: Node<'_>, src: &str) -> Vec<String> {
    let mut c = f.walk();
    f.children(&mut c)
        .filter(|x| x.kind() == "function_modifiers")
        .flat_map(|m| {
            text(m, src)
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

fn qualify(f: Node<'_>, src: &str, bare: &str) -> String {
    let mut parts = vec![bare.to_owned()];
    let mut p = f.parent();
    while let Some(n) = p {
        let scope = match n.kind() {
            "impl_item" => n.child_by_field_name("type"),
            "trait_item" | "mod_item" => n.child_by_field_name("name"),
            "function_item" => n.child_by_field_name("name"),
            _ => None,
        };
        if let Some(s) = scope {
            parts.push(squash(text(s, src)));
        }
        p = n.parent();
    }
    parts.reverse();
    parts.join("::")
}

fn function_sensor(u: &mut Unit<'_>, f: Node<'_>, name: &str) {
    let Some(body) = f.child_by_field_name("body") else {
        return;
    };
    let after = u.src.get(body.start_byte() + 1..).unwrap_or("");
    let existing = after
        .trim_start()
        .strip_prefix(GUARD)
        .and_then(|t| t.split(')').next())
        .and_then(parse_literal);
    let id = u
        .ledger
        .add(Kind::Function, name, name, Span::of(f), existing);
    if existing.is_none() {
        let lit = u.lit(id);
        u.edits
            .open(body.start_byte() + 1, format!(" {GUARD}{lit});"));
    }
}

fn regions(u: &mut Unit<'_>, block: Node<'_>, function: &str, region_no: &mut u32) {
    let src = u.src;
    let found = region::in_block(
        block,
        src,
        |n| matches!(n.kind(), "line_comment" | "block_comment"),
        |n| !n.kind().ends_with("_item") && n.kind() != "attribute_item",
        &u.line_regions,
        &mut u.regions_used,
        &mut u.problems,
    );
    for r in found {
        let Some(first) = r.statements.first().copied() else {
            continue;
        };
        if let Some(id) = existing_call(first, src, " = p5_runtime::scope(") {
            // Already instrumented: register the ids written in the text.
            *region_no += 1;
            u.ledger
                .add(Kind::Region, function, &r.name, Span::of(first), Some(id));
            for s in &r.statements {
                if let Some(sid) = existing_call(*s, src, "p5_runtime::mark(") {
                    u.ledger
                        .add(Kind::Statement, function, &r.name, Span::of(*s), Some(sid));
                }
            }
            continue;
        }
        let last = r.statements.last().copied().unwrap_or(first);
        let span = Span {
            end_line: Span::of(last).end_line,
            end_column: Span::of(last).end_column,
            ..Span::of(first)
        };
        let id = u.ledger.add(Kind::Region, function, &r.name, span, None);
        let lit = u.lit(id);
        let var = format!("_p5_region_{}", *region_no);
        *region_no += 1;
        u.edits.open(
            first.start_byte(),
            format!("let {var} = p5_runtime::scope({lit}); "),
        );
        for s in &r.statements {
            let sid = u
                .ledger
                .add(Kind::Statement, function, &r.name, Span::of(*s), None);
            let slit = u.lit(sid);
            u.edits
                .open(s.start_byte(), format!("p5_runtime::mark({slit}); "));
        }
        // A tail expression is the block's value: nothing may follow it, and the block's end
        // drops the guard anyway.
        if matches!(last.kind(), "expression_statement" | "let_declaration")
            && text(last, src).trim_end().ends_with(';')
            && !diverges(last, src)
        {
            u.edits.close(last.end_byte(), format!(" drop({var});"));
        }
    }
}

/// The id in a statement `…<marker><id>);` written by this engine.
fn existing_call(stmt: Node<'_>, src: &str, marker: &str) -> Option<u64> {
    let t = text(stmt, src);
    if !t.starts_with("let _p5_region_") && !t.starts_with("p5_runtime::mark(") {
        return None;
    }
    let (_, rest) = t.split_once(marker)?;
    parse_literal(rest.split(')').next()?)
}

fn diverges(stmt: Node<'_>, src: &str) -> bool {
    let t = text(stmt, src).trim_start();
    ["return", "break", "continue", "panic!", "unreachable!"]
        .iter()
        .any(|k| t.starts_with(k))
}
