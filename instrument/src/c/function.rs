//! Function sensors: the scope guard placed after a body's `{` (or the one already there),
//! and `P5_SCOPE_ALWAYS` for functions where a `longjmp` lands.

use crate::select::Pin;
use crate::sensor::{Kind, Span, parse_literal};
use crate::tree::text;
use crate::unit::Unit;
use tree_sitter::Node;

/// The id in `P5_SCOPE(<id>)` (or `P5_SCOPE_ALWAYS`, `P5_SCOPE_COUNT`) if `stmt` is such a
/// statement.
pub(super) fn scope_id(stmt: Node<'_>, src: &str) -> Option<u64> {
    let t = text(stmt, src).trim();
    let rest = t.strip_prefix("P5_SCOPE")?;
    let rest = rest
        .strip_prefix("_ALWAYS")
        .or_else(|| rest.strip_prefix("_COUNT"))
        .unwrap_or(rest);
    let inner = rest.strip_prefix('(')?.strip_suffix(");")?;
    parse_literal(inner)
}

fn first_statement(block: Node<'_>) -> Option<Node<'_>> {
    let mut c = block.walk();
    block.named_children(&mut c).find(|n| n.kind() != "comment")
}

/// `setjmp` and its kin: a function calling one of these is where a `longjmp` lands.
const SETJMP: &[&str] = &[
    "setjmp",
    "_setjmp",
    "sigsetjmp",
    "__sigsetjmp",
    "__builtin_setjmp",
];

/// Names of the function-like macros this file defines that expand to a `setjmp` (directly
/// or through another such macro), e.g. Lua's `LUAI_TRY`.
pub(super) fn setjmp_macros(src: &str) -> Vec<String> {
    if !src.contains("setjmp") {
        return Vec::new();
    }
    // (name, body) of every `#define NAME(` with its continuation lines.
    let mut defs = Vec::new();
    let mut lines = src.lines();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        let Some(rest) = t.strip_prefix('#').map(str::trim_start) else {
            continue;
        };
        let Some(rest) = rest.strip_prefix("define") else {
            continue;
        };
        let rest = rest.trim_start();
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let mut body = rest[name.len()..].to_owned();
        let mut last = line;
        while last.trim_end().ends_with('\\') {
            let Some(next) = lines.next() else { break };
            body.push_str(next);
            last = next;
        }
        if !name.is_empty() && body.starts_with('(') {
            defs.push((name, body));
        }
    }
    let mut found: Vec<String> = Vec::new();
    loop {
        let before = found.len();
        for (name, body) in &defs {
            if !found.contains(name)
                && (calls_any(body, SETJMP.iter().copied())
                    || calls_any(body, found.iter().map(String::as_str)))
            {
                found.push(name.clone());
            }
        }
        if found.len() == before {
            return found;
        }
    }
}

/// Whether `text` calls (`name(` as a whole word) one of `names`.
fn calls_any<'a>(text: &str, names: impl IntoIterator<Item = &'a str>) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    names.into_iter().any(|name| {
        text.match_indices(name).any(|(i, _)| {
            let before = text[..i].chars().next_back();
            let after = text[i + name.len()..].trim_start();
            !before.is_some_and(word) && after.starts_with('(')
        })
    })
}

/// Whether a function's text calls `setjmp` (or a macro of `catchers` that does): a
/// `longjmp` may land there, leaving the scopes it skipped without their exits. Such a
/// function is recorded on every call (`P5_SCOPE_ALWAYS`, unless the selection file pins it),
/// so its exit closes the abandoned scopes even when everything around it is throttled.
pub(super) fn catches_longjmp(def_text: &str, catchers: &[String]) -> bool {
    (def_text.contains("jmp") && calls_any(def_text, SETJMP.iter().copied()))
        || (!catchers.is_empty() && calls_any(def_text, catchers.iter().map(String::as_str)))
}

pub(super) fn function_sensor(u: &mut Unit<'_>, def: Node<'_>, name: &str, catches: bool) {
    let Some(body) = def.child_by_field_name("body") else {
        return;
    };
    if body.kind() != "compound_statement" {
        return;
    }
    let existing = first_statement(body).and_then(|s| scope_id(s, u.src));
    let id = u
        .ledger
        .add(Kind::Function, name, name, Span::of(def), existing);
    if existing.is_none() {
        let lit = u.lit(id);
        let pin = match u.pin(name, bare_name(name)) {
            Pin::Auto if catches => Pin::Always,
            pin => pin,
        };
        let guard = pin.c_macro();
        u.edits
            .open(body.start_byte() + 1, format!(" {guard}({lit});"));
    }
}

/// The last `::`-separated part of a qualified name.
fn bare_name(name: &str) -> &str {
    name.rsplit("::").next().unwrap_or(name)
}
