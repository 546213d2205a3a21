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
//! `--calls`: calls that are a whole statement or `let` initializer get a guard block (see
//! `call_sensor`).
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
    /// A `const fn`: no runtime calls.
    constant: bool,
}

/// Instruments a Rust file.
pub fn instrument(u: &mut Unit<'_>, root: Node<'_>) {
    let src = u.src;
    let mut frames: Vec<Frame> = Vec::new();
    let mut region_no = 0u32;
    let mut net = if u.modes.comm {
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
                    let modifiers = modifiers(n, src);
                    frames.push(Frame {
                        end: n.end_byte(),
                        name: qualified.clone(),
                        selected,
                        constant: modifiers.iter().any(|m| m == "const"),
                    });
                    if n.has_error() {
                        u.problems.push(crate::sensor::Problem::at(
                            n,
                            format!("function {qualified} not instrumented: syntax errors inside"),
                        ));
                        return false;
                    }
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
                    if u.modes.comm {
                        interop(u, n);
                    }
                    if let Some(f) = frames.last()
                        && f.selected
                    {
                        let name = f.name.clone();
                        if u.modes.calls && !f.constant {
                            call_sensor(u, n, &name);
                        }
                        if u.modes.comm {
                            net.call(u, n, &name);
                        }
                    }
                    true
                }
                _ => true,
            }
        },
        |_| {},
    );
    net.apply(u);
}

/// `--comm` replaces std's socket types crate-wide, but another crate's `X::from_std(s)`
/// (tokio, mio, …) takes std's type: its single argument becomes `(s).into()`, which turns a
/// recording socket into std's and leaves a std one as it is (`From<T> for T`), so the call
/// compiles either way. Applies in every function, selected or not, like the type change.
fn interop(u: &mut Unit<'_>, call: Node<'_>) {
    let src = u.src;
    let Some(f) = call.child_by_field_name("function") else {
        return;
    };
    let is_from_std = f.kind() == "scoped_identifier"
        && f.child_by_field_name("name")
            .is_some_and(|n| text(n, src) == "from_std");
    let Some(args) = call.child_by_field_name("arguments") else {
        return;
    };
    let mut c = args.walk();
    let list: Vec<Node<'_>> = args
        .named_children(&mut c)
        .filter(|a| !matches!(a.kind(), "line_comment" | "block_comment"))
        .collect();
    let [arg] = list[..] else {
        return;
    };
    if !is_from_std
        || arg.start_position().row != arg.end_position().row
        || text(arg, src).ends_with(".into()")
    {
        return;
    }
    u.edits.open(arg.start_byte(), "(");
    u.edits.close(arg.end_byte(), ").into()");
}

const CALL_GUARD: &str = "let _p5_call = p5_runtime::scope(";

/// `--calls`: a call that is a whole statement (`f(x);`, `f(x)?;`) becomes
/// `{ let _p5_call = p5_runtime::scope(0x…); f(x); }`, and a call that is a `let`
/// initializer (`let v = f(x);`, `let v = f(x)?;`) becomes
/// `let v = { let _p5_call = p5_runtime::scope(0x…); f(x) };` (parenthesized before a
/// `let … else`): the guard spans the call, its exit is recorded however the call ends, and
/// the value, its type and the `?` are unchanged. Left alone: calls nested in other
/// expressions, tail expressions, tuple-struct and enum-variant constructors (`Some(x)`,
/// `Point(1, 2)`: a capitalized callee), calls in const contexts (`const fn`, `const`/`static`
/// items, `const { … }`), calls whose arguments `.await`, the engine's own calls and macros.
fn call_sensor(u: &mut Unit<'_>, call: Node<'_>, function: &str) {
    let src = u.src;
    let Some(f) = call.child_by_field_name("function") else {
        return;
    };
    let f = match f.kind() {
        "generic_function" => f.child_by_field_name("function").unwrap_or(f),
        _ => f,
    };
    let callee: String = match f.kind() {
        "field_expression" => f
            .child_by_field_name("field")
            .map_or("", |x| text(x, src))
            .to_owned(),
        _ => text(f, src).split_whitespace().collect(),
    };
    let args = call
        .child_by_field_name("arguments")
        .map_or("", |a| text(a, src));
    let last = callee.rsplit("::").next().unwrap_or("");
    if matches!(callee.as_str(), "p5_runtime::scope" | "p5_runtime::mark")
        || callee == "drop" && args.starts_with("(_p5_")
        || last.starts_with(|c: char| c.is_ascii_uppercase())
    {
        return;
    }
    // The statement or `let` the call (or `call?`) is the whole of.
    let mut top = call;
    if let Some(p) = top.parent()
        && p.kind() == "try_expression"
    {
        top = p;
    }
    let Some(parent) = top.parent() else {
        return;
    };
    if let Some(id) = existing_call_guard(parent, top, src) {
        u.ledger
            .add(Kind::Call, function, &callee, Span::of(call), Some(id));
        return;
    }
    let statement = parent.kind() == "expression_statement" && text(parent, src).ends_with(';');
    let initializer = parent.kind() == "let_declaration"
        && parent
            .child_by_field_name("value")
            .is_some_and(|v| v.id() == top.id());
    if !(statement || initializer) || text(call, src).contains(".await") || in_const_context(call) {
        return;
    }
    let id = u
        .ledger
        .add(Kind::Call, function, &callee, Span::of(call), None);
    let lit = u.lit(id);
    if statement {
        u.edits
            .open(parent.start_byte(), format!("{{ {CALL_GUARD}{lit}); "));
        u.edits.close(parent.end_byte(), " }");
    } else {
        let let_else = parent.child_by_field_name("alternative").is_some();
        let (open, close) = if let_else { ("({", "})") } else { ("{", "}") };
        u.edits
            .open(call.start_byte(), format!("{open} {CALL_GUARD}{lit}); "));
        u.edits.close(call.end_byte(), format!(" {close}"));
    }
}

/// The id of the guard block `{ let _p5_call = p5_runtime::scope(0x…); <stmt> }` that `parent`
/// (the statement or block holding `top`) is part of, if any.
fn existing_call_guard(parent: Node<'_>, top: Node<'_>, src: &str) -> Option<u64> {
    let block = if parent.kind() == "expression_statement" {
        parent.parent()?
    } else {
        parent
    };
    if block.kind() != "block" || block.named_child_count() != 2 {
        return None;
    }
    let guard = block.named_child(0)?;
    let payload = block.named_child(1)?;
    if payload.id() != parent.id() && payload.id() != top.id() {
        return None;
    }
    let rest = text(guard, src).strip_prefix(CALL_GUARD)?;
    parse_literal(rest.split(')').next()?)
}

/// Inside a `const`/`static` item or a `const { … }` block (below the enclosing function).
fn in_const_context(n: Node<'_>) -> bool {
    let mut p = n.parent();
    while let Some(x) = p {
        match x.kind() {
            "const_item" | "static_item" | "const_block" => return true,
            "function_item" => return false,
            _ => p = x.parent(),
        }
    }
    false
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
    // After the body's inner attributes (`#![allow(…)]`), which must come first.
    let mut start = body.start_byte() + 1;
    let mut c = body.walk();
    for n in body.named_children(&mut c) {
        match n.kind() {
            "inner_attribute_item" => start = n.end_byte(),
            "line_comment" | "block_comment" => {}
            _ => break,
        }
    }
    let after = u.src.get(start..).unwrap_or("");
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
        u.edits.open(start, format!(" {GUARD}{lit});"));
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
