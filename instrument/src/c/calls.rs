//! Calls inside instrumented definitions: communication calls routed through the runtime
//! (`--comm`), and other calls wrapped in a scope (`--calls`) where that is allowed.

use super::function::scope_id;
use super::{COMM, Frame};
use crate::sensor::{Kind, Span, parse_literal};
use crate::tree::{squash, text};
use crate::unit::Unit;
use tree_sitter::Node;

/// A communication call found by the walk; rewritten once the whole file is walked (a
/// file that defines a function of that name keeps its calls).
#[derive(Debug)]
pub(super) struct PendingComm {
    pub(super) function: String,
    pub(super) span: Span,
    /// Where the callee's name starts (`p5_` goes there).
    pub(super) name_start: usize,
    /// Just after the `(` of the arguments (the id goes there).
    pub(super) args_start: Option<usize>,
    pub(super) name: String,
    pub(super) wrapper: &'static str,
}

/// Contexts in which a call must not be wrapped (unevaluated or constant expressions).
const NO_WRAP_CONTEXT: &[&str] = &[
    "sizeof_expression",
    "alignof_expression",
    "offsetof_expression",
    "typeof_specifier",
    "array_declarator",
    "enumerator",
    "bitfield_clause",
    "static_assert_declaration",
    "attribute_specifier",
    "attribute_declaration",
    "attribute",
    "decltype",
    "template_argument_list",
    "requires_clause",
    "requires_expression",
    "noexcept",
    "field_initializer_list",
    "preproc_arg",
    "gnu_asm_expression",
    "generic_expression",
];

const NO_WRAP_CALLEE: &[&str] = &[
    "setjmp",
    "_setjmp",
    "sigsetjmp",
    "__sigsetjmp",
    "offsetof",
    "sizeof",
    "alloca",
    "__asm__",
    "asm",
];

fn arg_count(call: Node<'_>) -> usize {
    call.child_by_field_name("arguments").map_or(0, |a| {
        let mut c = a.walk();
        a.named_children(&mut c)
            .filter(|n| n.kind() != "comment")
            .count()
    })
}

/// A call `n` inside the definition `top` (or anywhere below `top`, an ancestor of `n`).
pub(super) fn call<'t>(
    u: &mut Unit<'_>,
    n: Node<'t>,
    top: Node<'t>,
    f: &Frame,
    cpp: bool,
    comm: &mut Vec<PendingComm>,
) {
    if !f.calls {
        return;
    }
    let Some(callee) = n.child_by_field_name("function") else {
        return;
    };
    let callee_text = text(callee, u.src);
    let plain = match callee.kind() {
        "identifier" => Some(callee_text),
        "qualified_identifier" if callee_text.starts_with("::") => {
            Some(callee_text.trim_start_matches("::").trim())
        }
        _ => None,
    };
    if let Some(name) = plain {
        if let Some(&(op, arity, wrapper)) = COMM.iter().find(|c| c.0 == name) {
            if u.modes.comm && arg_count(n) == arity {
                let name_node = if callee.kind() == "qualified_identifier" {
                    callee.child_by_field_name("name").unwrap_or(callee)
                } else {
                    callee
                };
                comm.push(PendingComm {
                    function: f.name.clone(),
                    span: Span::of(n),
                    name_start: name_node.start_byte(),
                    args_start: n
                        .child_by_field_name("arguments")
                        .map(|a| a.start_byte() + 1),
                    name: op.to_owned(),
                    wrapper,
                });
                return;
            }
        } else if let Some(&(op, _, _)) = COMM.iter().find(|c| c.2 == name) {
            // Already routed through the runtime: keep its id and ordinal.
            if u.modes.comm {
                let id = n
                    .child_by_field_name("arguments")
                    .and_then(|a| a.named_child(0))
                    .and_then(|a| parse_literal(text(a, u.src)));
                if id.is_some() {
                    u.ledger.add(Kind::Comm, &f.name, op, Span::of(n), id);
                }
            }
            return;
        }
    }
    if u.modes.calls {
        wrap_call(u, n, top, callee, f, cpp);
    }
}

fn macro_like(name: &str) -> bool {
    name.chars().any(|c| c.is_ascii_uppercase())
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// The ancestors of `n` from `top` (included) down to its parent. Cheaper than repeated
/// [`Node::parent`], which starts from the root every time (and a root holds thousands of
/// definitions).
fn ancestors<'t>(top: Node<'t>, n: Node<'t>) -> Vec<Node<'t>> {
    let mut path = Vec::new();
    let mut a = top;
    while a.id() != n.id() {
        path.push(a);
        match a.child_with_descendant(n) {
            Some(c) => a = c,
            None => break,
        }
    }
    path
}

fn wrap_call<'t>(
    u: &mut Unit<'_>,
    n: Node<'t>,
    top: Node<'t>,
    callee: Node<'t>,
    f: &Frame,
    cpp: bool,
) {
    let name = squash(text(callee, u.src));
    let last = name.rsplit("::").next().unwrap_or(&name);
    // Only what names a function: error recovery can turn `"a" MACRO("b")` into a "call".
    if !matches!(
        callee.kind(),
        "identifier"
            | "field_expression"
            | "qualified_identifier"
            | "template_function"
            | "parenthesized_expression"
            | "subscript_expression"
            | "call_expression"
    ) || last.ends_with("_cast")
        || last.contains("_cast<")
        || macro_like(last)
        || NO_WRAP_CALLEE.contains(&last)
        || last.starts_with("__builtin")
        || last.starts_with("__sync")
        || last.starts_with("__atomic")
        || last.starts_with("p5_")
        || last.starts_with("va_")
    {
        return;
    }
    let path = ancestors(top, n);
    // The `k`-th ancestor of `n` (`k` = 1: its parent).
    let up = |k: usize| path.len().checked_sub(k).map(|i| path[i]);
    let mut existing = None;
    // A wrapped call sits in a block `{ P5_SCOPE(id); [return] call; }` of two statements.
    if let Some(stmt) = up(1)
        && matches!(stmt.kind(), "expression_statement" | "return_statement")
        && let Some(block) = up(2)
        && block.kind() == "compound_statement"
        && block.named_child_count() == 2
        && up(3).is_some_and(|b| {
            matches!(
                b.kind(),
                "parenthesized_expression" | "lambda_expression" | "statement_expression"
            )
        })
    {
        existing = block.named_child(0).and_then(|s| scope_id(s, u.src));
    }
    for &a in path.iter().rev() {
        if NO_WRAP_CONTEXT.contains(&a.kind()) {
            return;
        }
        // A `case` label is a constant expression; the statements after it are not.
        if a.kind() == "case_statement"
            && a.child_by_field_name("value")
                .is_some_and(|v| v.start_byte() <= n.start_byte() && n.end_byte() <= v.end_byte())
        {
            return;
        }
        if a.kind() == "function_definition" {
            break;
        }
        // Inside a macro's arguments anything goes (`#x`, `x = …`, `&x`): leave them alone.
        if a.kind() == "call_expression"
            && a.id() != n.id()
            && a.child_by_field_name("function")
                .is_some_and(|c| c.kind() == "identifier" && macro_like(text(c, u.src)))
        {
            return;
        }
        // A static local's initializer must be constant in C (and is run once in C++).
        if a.kind() == "declaration" && {
            let mut c = a.walk();
            a.children(&mut c).any(|ch| {
                ch.kind() == "storage_class_specifier"
                    && matches!(text(ch, u.src), "static" | "thread_local" | "_Thread_local")
            })
        } {
            return;
        }
    }
    if !cpp && existing.is_none() && lvalue_use(n, &path) {
        return;
    }
    let id = u
        .ledger
        .add(Kind::Call, &f.name, &name, Span::of(n), existing);
    if existing.is_some() {
        return;
    }
    let lit = u.lit(id);
    if cpp {
        u.edits.open(
            n.start_byte(),
            format!("([&]() -> decltype(auto) {{ P5_SCOPE({lit}); return "),
        );
        u.edits.close(n.end_byte(), "; }())");
    } else {
        u.edits
            .open(n.start_byte(), format!("({{ P5_SCOPE({lit}); "));
        u.edits.close(n.end_byte(), "; })");
    }
}

/// Whether a C "call" is used as an lvalue (`&m(x)`, `m(x) = v`, `m(x)++`, `m(x).f = v`);
/// `ancestors` are those of `call` (down to its parent) as far up as needed.
/// A C function never returns an lvalue, so such a call is a function-like macro, and a
/// statement expression around it would not compile.
fn lvalue_use<'t>(call: Node<'t>, ancestors: &[Node<'t>]) -> bool {
    let mut n = call;
    for &p in ancestors.iter().rev() {
        match p.kind() {
            "parenthesized_expression" => n = p,
            "field_expression"
                if p.child_by_field_name("operator")
                    .is_some_and(|o| o.kind() == ".") =>
            {
                n = p
            }
            "pointer_expression" => {
                return p
                    .child_by_field_name("operator")
                    .is_some_and(|o| o.kind() == "&");
            }
            "update_expression" => return true,
            "assignment_expression" => {
                return p
                    .child_by_field_name("left")
                    .is_some_and(|l| l.id() == n.id());
            }
            _ => return false,
        }
    }
    false
}
