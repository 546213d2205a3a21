//! The Python engine.
//!
//! `--functions`: each `def` (and `async def`) gets a sensor, `p5.sensor(0x…)`, which records
//! enter/exit around calls (one span per resumption of a generator, coroutine or async
//! generator, so time suspended in a `yield` or `await` is not charged) and returns the very
//! function it is given, its `__code__` swapped for a same-signature trampoline: identity,
//! closure and introspection are kept, and a non-function is returned unchanged. Python has no
//! room on a `def` line. An undecorated function gets `@p5.sensor(0x…)` on the blank or
//! comment-only line just above it, or `name = p5.sensor(0x…)(name)` on the blank line after
//! its body, on a later blank line of its block or after a later one-line simple statement
//! of it. A decorated function's sensor goes under its decorators, where the object is still
//! the plain function: `@p5.sensor(0x…)` on a blank/comment line between the last decorator
//! and the `def`, else the innermost decorator `@d` becomes `@p5.sensor_under(0x…, d)`
//! (`d(p5.sensor(0x…)(f))`); never above them, where the object may be a descriptor. A
//! function with none of these is reported. `import p5` goes on an existing line before the
//! first sensor that runs at import time and after the docstring and `from __future__`
//! imports (see `import`); a module with no such line is left unchanged and reported.
//!
//! `--calls`: see `call`.
//!
//! `--comm`: a call of a socket method (`send sendall sendto sendmsg recv recv_into recvfrom
//! recvfrom_into recvmsg connect connect_ex accept close shutdown`) on any receiver becomes
//! `p5.comm(0x…, receiver, "send")(args)`; Python has no static types, so the client decides
//! at run time (a `socket.socket` is recorded, anything else gets its own method back).

use crate::sensor::{Kind, Problem, Span, parse_literal};
use crate::tree::{jumps_out, preorder, text};
use crate::unit::Unit;
use tree_sitter::Node;

const DECORATOR: &str = "@p5.sensor(";

/// Instruments a Python file.
pub fn instrument(u: &mut Unit<'_>, root: Node<'_>) {
    let src = u.src;
    let starts: Vec<usize> = std::iter::once(0)
        .chain(src.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let mut decorated_lines: Vec<usize> = Vec::new();
    // Offsets of insertions that run while the module is imported (decorators, rebindings,
    // module-level sensors): `import p5` must come before the first of them.
    let mut eager: Vec<usize> = Vec::new();
    let mut rebindings: Vec<usize> = Vec::new();
    let markers = !u.line_regions.is_empty() || src.contains("p5:begin");
    preorder(
        root,
        |n| {
            if u.check_error(n) {
                return false;
            }
            if n.kind() == "call" {
                let routed = u.modes.comm && comm(u, n, &mut eager);
                if u.modes.calls && !routed {
                    call(u, n, &mut eager);
                }
                return true;
            }
            if markers && matches!(n.kind(), "block" | "module") {
                regions(u, n, &mut eager);
            }
            if n.kind() != "function_definition" {
                return true;
            }
            let bare = n
                .child_by_field_name("name")
                .map(|x| text(x, src).to_owned())
                .unwrap_or_default();
            let qualified = qualify(n, src, &bare);
            if n.has_error() {
                u.problems.push(Problem::at(
                    n,
                    format!("function {qualified} not instrumented: syntax errors inside"),
                ));
                return false;
            }
            if u.modes.functions
                && u.selected(&qualified, &bare)
                && let Some((at, prefixable)) =
                    function_sensor(u, n, &qualified, &bare, &starts, &mut decorated_lines)
            {
                eager.push(at);
                if prefixable {
                    rebindings.push(at);
                }
            }
            true
        },
        |_| {},
    );
    if !u.edits.is_empty() && !imports_p5(root, src) {
        import(u, root, &starts, &decorated_lines, &eager, &rebindings);
    }
}

/// Callees whose behaviour depends on the calling frame: wrapping them would change it.
const FRAME_SENSITIVE: &[&str] = &[
    "super",
    "locals",
    "globals",
    "vars",
    "eval",
    "exec",
    "dir",
    "breakpoint",
];

/// `--calls`: `f(x)` becomes `p5.call(0x…, f)(x)` (the client records enter/exit around the
/// call). Skipped: calls of `p5.*`, frame-sensitive builtins, calls inside decorators (a call
/// there needs Python ≥ 3.9 syntax) and f-string fields, and communication calls already
/// routed.
fn call(u: &mut Unit<'_>, call: Node<'_>, eager: &mut Vec<usize>) {
    let src = u.src;
    let Some(f) = call.child_by_field_name("function") else {
        return;
    };
    let callee = text(f, src);
    if f.kind() == "call" {
        // `p5.call(id, f)(x)`: already wrapped (keep its id); `p5.comm(…)(x)`: routed.
        let inner = f.child_by_field_name("function").map(|x| text(x, src));
        if inner == Some("p5.call") {
            let args = f.child_by_field_name("arguments");
            let id = args
                .and_then(|a| a.named_child(0))
                .and_then(|a| parse_literal(text(a, src)));
            let name: String = args
                .and_then(|a| a.named_child(1))
                .map(|a| text(a, src).split_whitespace().collect())
                .unwrap_or_default();
            let (function, bare) = enclosing(call, src);
            if id.is_some() && u.selected(&function, &bare) {
                u.ledger
                    .add(Kind::Call, &function, &name, Span::of(call), id);
            }
            return;
        }
        if inner == Some("p5.comm") {
            return;
        }
    }
    if callee.starts_with("p5.") || FRAME_SENSITIVE.contains(&callee) {
        return;
    }
    let mut p = call.parent();
    while let Some(a) = p {
        // Decorators; f-strings (`f"{g(x)=}"` prints the call's text).
        if matches!(a.kind(), "decorator" | "interpolation") {
            return;
        }
        if matches!(a.kind(), "function_definition" | "class_definition") {
            break;
        }
        p = a.parent();
    }
    let (function, bare) = enclosing(call, src);
    if !u.selected(&function, &bare) {
        return;
    }
    let name: String = callee.split_whitespace().collect();
    let id = u
        .ledger
        .add(Kind::Call, &function, &name, Span::of(call), None);
    let lit = u.lit(id);
    if function.is_empty() {
        eager.push(f.start_byte());
    }
    u.edits.open(f.start_byte(), format!("p5.call({lit}, "));
    u.edits.close(f.end_byte(), ")");
}

/// Socket methods routed through `p5.comm`, and the waits (`select` on a selector or the
/// `select` module, `poll` on a `select.poll`/`epoll` object), which the client records as
/// waiting.
const COMM: &[&str] = &[
    "select",
    "poll",
    "send",
    "sendall",
    "sendto",
    "sendmsg",
    "recv",
    "recv_into",
    "recvfrom",
    "recvfrom_into",
    "recvmsg",
    "connect",
    "connect_ex",
    "accept",
    "close",
    "shutdown",
];

/// The enclosing function's qualified name ("" at module level) and its bare name.
fn enclosing(n: Node<'_>, src: &str) -> (String, String) {
    let mut p = n.parent();
    while let Some(f) = p {
        if f.kind() == "function_definition" {
            let bare = f
                .child_by_field_name("name")
                .map(|x| text(x, src).to_owned())
                .unwrap_or_default();
            return (qualify(f, src, &bare), bare);
        }
        p = f.parent();
    }
    (String::new(), String::new())
}

/// `sock.send(data)` becomes `p5.comm(0x…, sock, "send")(data)`: the client records the call
/// if the receiver is a `socket.socket` at run time and otherwise returns the plain method,
/// so receivers of other types (files, connections) behave exactly as before.
/// Returns whether the call was routed now.
fn comm(u: &mut Unit<'_>, call: Node<'_>, eager: &mut Vec<usize>) -> bool {
    let src = u.src;
    let Some(f) = call.child_by_field_name("function") else {
        return false;
    };
    if f.kind() != "attribute" {
        return false;
    }
    let (Some(obj), Some(attr)) = (
        f.child_by_field_name("object"),
        f.child_by_field_name("attribute"),
    ) else {
        return false;
    };
    let name = text(attr, src);
    if text(f, src) == "p5.comm" {
        // Already routed: keep its id and ordinal.
        let mut c = call.walk();
        let args: Vec<Node<'_>> = call
            .child_by_field_name("arguments")
            .map(|a| a.named_children(&mut c).collect())
            .unwrap_or_default();
        if let (Some(id), Some(op)) = (
            args.first().and_then(|a| parse_literal(text(*a, src))),
            args.get(2)
                .map(|a| text(*a, src).trim_matches('"').to_owned()),
        ) {
            let (function, bare) = enclosing(call, src);
            if u.selected(&function, &bare) {
                u.ledger
                    .add(Kind::Comm, &function, &op, Span::of(call), Some(id));
            }
        }
        return false;
    }
    if !COMM.contains(&name) || obj.end_position().row != attr.end_position().row {
        return false;
    }
    let (function, bare) = enclosing(call, src);
    if !u.selected(&function, &bare) {
        return false;
    }
    let id = u
        .ledger
        .add(Kind::Comm, &function, name, Span::of(call), None);
    let lit = u.lit(id);
    if function.is_empty() {
        eager.push(obj.start_byte());
    }
    u.edits.open(obj.start_byte(), format!("p5.comm({lit}, "));
    u.edits
        .replace(obj.end_byte(), attr.end_byte(), format!(", \"{name}\")"));
    true
}

const COMPOUND: &[&str] = &[
    "if_statement",
    "for_statement",
    "while_statement",
    "try_statement",
    "with_statement",
    "match_statement",
    "function_definition",
    "class_definition",
    "decorated_definition",
];

/// The id in `p5.<call>(<id>)` at the start of `text`.
fn p5_call_id(text: &str, call: &str) -> Option<u64> {
    let inner = text
        .trim_start()
        .strip_prefix("p5.")?
        .strip_prefix(call)?
        .strip_prefix('(')?;
    parse_literal(inner.split(')').next()?)
}

/// Regions: `p5.enter(R)` in front of the begin comment (or `p5.enter(R); ` before the first
/// statement of a line region), `p5.mark(S); ` before each simple statement, `p5.exit(R); `
/// before each `return`/`raise` inside, and `p5.exit(R)` in front of the end comment (or
/// `; p5.exit(R)` after the last statement). Python's indentation is syntax, so the marker
/// comments must be indented like the statements, and a line region must start and end with
/// simple statements; otherwise the region is reported and left alone.
fn regions(u: &mut Unit<'_>, block: Node<'_>, eager: &mut Vec<usize>) {
    let src = u.src;
    let found = crate::region::in_block(
        block,
        src,
        |n| n.kind() == "comment",
        |_| true,
        &u.line_regions,
        &mut u.regions_used,
        &mut u.problems,
    );
    if found.is_empty() {
        return;
    }
    let (function, _) = enclosing(block, src);
    for r in found {
        let Some(first) = r.statements.first().copied() else {
            continue;
        };
        let last = r.statements.last().copied().unwrap_or(first);
        let line_start = |at: usize| src[..at].rfind('\n').map_or(0, |i| i + 1);
        let existing = match r.begin {
            Some(b) => p5_call_id(&src[line_start(b.start_byte())..b.start_byte()], "enter"),
            None => p5_call_id(text(first, src), "enter"),
        };
        if let Some(id) = existing {
            u.ledger
                .add(Kind::Region, &function, &r.name, Span::of(first), Some(id));
            for s in &r.statements {
                if let Some(sid) = p5_call_id(text(*s, src), "mark") {
                    u.ledger
                        .add(Kind::Statement, &function, &r.name, Span::of(*s), Some(sid));
                }
            }
            continue;
        }
        let col = first.start_position().column;
        let simple = |n: Node<'_>| !COMPOUND.contains(&n.kind());
        let fits = match (r.begin, r.end) {
            (Some(b), Some(e)) => {
                b.start_position().column == col && e.start_position().column == col
            }
            _ => simple(first) && simple(last),
        };
        if !fits {
            u.problems.push(Problem::at(
                r.begin.unwrap_or(first),
                format!(
                    "region {:?} not instrumented: its markers must be indented like its statements \
                     (a line region must start and end with simple statements)",
                    r.name
                ),
            ));
            continue;
        }
        let span = Span {
            end_line: Span::of(last).end_line,
            end_column: Span::of(last).end_column,
            ..Span::of(first)
        };
        let id = u.ledger.add(Kind::Region, &function, &r.name, span, None);
        let lit = u.lit(id);
        if function.is_empty() {
            eager.push(r.begin.map_or(first.start_byte(), |b| b.start_byte()));
        }
        match r.begin {
            Some(b) => u.edits.open(b.start_byte(), format!("p5.enter({lit})  ")),
            None => u
                .edits
                .open(first.start_byte(), format!("p5.enter({lit}); ")),
        }
        for s in &r.statements {
            if simple(*s) {
                let sid = u
                    .ledger
                    .add(Kind::Statement, &function, &r.name, Span::of(*s), None);
                let slit = u.lit(sid);
                u.edits.open(s.start_byte(), format!("p5.mark({slit}); "));
            }
            let jumps = jumps_out(
                *s,
                &["return_statement", "raise_statement"],
                &["function_definition", "class_definition", "lambda"],
            );
            for j in jumps {
                u.edits.open(j.start_byte(), format!("p5.exit({lit}); "));
            }
        }
        match r.end {
            Some(e) => u.edits.open(e.start_byte(), format!("p5.exit({lit})  ")),
            None => u.edits.close(last.end_byte(), format!("; p5.exit({lit})")),
        }
    }
}

fn qualify(f: Node<'_>, src: &str, bare: &str) -> String {
    let mut parts = vec![bare.to_owned()];
    let mut p = f.parent();
    while let Some(n) = p {
        if matches!(n.kind(), "class_definition" | "function_definition")
            && let Some(name) = n.child_by_field_name("name")
        {
            parts.push(text(name, src).to_owned());
        }
        p = n.parent();
    }
    parts.reverse();
    parts.join(".")
}

fn line_text<'s>(src: &'s str, starts: &[usize], row: usize) -> Option<&'s str> {
    let s = *starts.get(row)?;
    let e = starts.get(row + 1).map_or(src.len(), |&e| e);
    Some(src[s..e].trim_end_matches(['\n', '\r']))
}

/// Simple statements a rebinding can follow on their line (`x = 1; f = p5.sensor(…)(f)`);
/// not `return`, `raise`, `break`, `continue`, after which it would not run.
const SIMPLE: &[&str] = &[
    "expression_statement",
    "pass_statement",
    "import_statement",
    "import_from_statement",
    "assert_statement",
    "delete_statement",
    "global_statement",
    "nonlocal_statement",
    "type_alias_statement",
];

const OVER: &str = "@p5.sensor_over(";
const UNDER: &str = "@p5.sensor_under(";

/// Where a function's sensor goes, in order of preference: the decorator `@p5.sensor(0x…)`
/// on the blank or comment line just above the `def` (below any decorators); for an
/// undecorated function, the rebinding `name = p5.sensor(0x…)(name)` on the blank line just
/// after it, on a later blank line between statements of the same block, or after a later
/// one-line simple statement of the block (`x = 1; name = p5.sensor(…)(name)`); for a
/// decorated one, its innermost decorator `@d` wrapped as `@p5.sensor_under(0x…, d)`. The
/// client instruments the function object in place, so a rebinding also reaches references
/// taken before it; calls made before it run unrecorded. Old outputs' `@p5.sensor_over`
/// decorators are recognised as sensors.
/// Returns the insertion's offset and whether it is a module-level statement `import p5; `
/// can go in front of.
fn function_sensor(
    u: &mut Unit<'_>,
    f: Node<'_>,
    name: &str,
    bare: &str,
    starts: &[usize],
    decorated_lines: &mut Vec<usize>,
) -> Option<(usize, bool)> {
    let src = u.src;
    let outer = f
        .parent()
        .filter(|p| p.kind() == "decorated_definition")
        .unwrap_or(f);
    let mut c = outer.walk();
    let decorators: Vec<Node<'_>> = outer
        .children(&mut c)
        .filter(|d| d.kind() == "decorator")
        .collect();
    // Later statements of the same block.
    let mut later = Vec::new();
    let mut s = outer.next_named_sibling();
    while let Some(n) = s {
        if n.kind() != "comment" {
            later.push(n);
        }
        s = n.next_named_sibling();
    }
    let existing = existing_sensor(src, starts, (outer, &decorators, &later), bare);
    let indent = &src[starts[outer.start_position().row]..outer.start_byte()];
    let indent = if indent.trim().is_empty() { indent } else { "" };
    let free = |r: usize, decorated_lines: &Vec<usize>| {
        line_text(src, starts, r).is_some_and(|l| l.trim().is_empty())
            && !decorated_lines.contains(&r)
    };
    // A decorated function's sensor wraps the function itself, under its decorators (what
    // they return may be anything: a descriptor, a registry entry); an undecorated one's
    // result is the plain function, which the sensor can wrap from anywhere.
    let decorated = !decorators.is_empty();
    let row = f.start_position().row;
    let above = row
        .checked_sub(1)
        .filter(|r| decorators.last().is_none_or(|d| d.end_position().row < *r))
        .and_then(|r| line_text(src, starts, r).map(|l| (r, l)))
        .filter(|(r, l)| {
            let t = l.trim();
            (t.is_empty() || t.starts_with('#')) && !decorated_lines.contains(r)
        });
    let def_indent = &src[starts[row]..f.start_byte()];
    let def_indent = if def_indent.trim().is_empty() {
        def_indent
    } else {
        ""
    };
    let below_row = outer.end_position().row + 1;
    let below = (!decorated && free(below_row, decorated_lines)).then_some(below_row);
    let under = decorators.last().copied();
    // A blank line between two later statements of the block (not inside one of them).
    let gap = if decorated {
        None
    } else {
        let mut prev_end = outer.end_position().row;
        later.iter().find_map(|n| {
            let r = (prev_end + 1..n.start_position().row).find(|&r| free(r, decorated_lines));
            prev_end = n.end_position().row;
            r
        })
    };
    // A later one-line simple statement alone on its line.
    let tail = later.iter().copied().find(|n| {
        !decorated
            && SIMPLE.contains(&n.kind())
            && n.start_position().row == n.end_position().row
            && n.next_sibling().is_none_or(|x| {
                x.start_position().row > n.end_position().row || x.kind() == "comment"
            })
            && n.prev_sibling()
                .is_none_or(|x| x.end_position().row < n.start_position().row)
    });
    if above.is_none()
        && below.is_none()
        && under.is_none()
        && gap.is_none()
        && tail.is_none()
        && existing.is_none()
    {
        u.problems.push(Problem::at(
            f,
            format!(
                "function {name} not instrumented: no line next to or after it in its block to hold the sensor"
            ),
        ));
        return None;
    }
    let id = u
        .ledger
        .add(Kind::Function, name, name, Span::of(f), existing);
    if existing.is_some() {
        return None;
    }
    let lit = u.lit(id);
    if let Some((r, l)) = above {
        let sep = if l.trim().is_empty() { "" } else { " " };
        u.edits
            .open(starts[r], format!("{def_indent}{DECORATOR}{lit}){sep}"));
        decorated_lines.push(r);
        Some((starts[r], false))
    } else if let Some(r) = below.or(gap) {
        u.edits.open(
            starts[r],
            format!("{indent}{bare} = p5.sensor({lit})({bare})"),
        );
        decorated_lines.push(r);
        // A module-level rebinding is a statement: `import p5; ` can go in front of it.
        Some((starts[r], indent.is_empty()))
    } else if let Some(d) = under {
        // `@d` → `@p5.sensor_under(0x…, d)`: `d(p5.sensor(0x…)(f))`.
        let e = d.named_child(0)?;
        u.edits
            .open(e.start_byte(), format!("p5.sensor_under({lit}, "));
        u.edits.close(e.end_byte(), ")");
        Some((d.start_byte(), false))
    } else if let Some(n) = tail {
        u.edits
            .close(n.end_byte(), format!("; {bare} = p5.sensor({lit})({bare})"));
        Some((n.end_byte(), false))
    } else {
        None
    }
}

/// The id of a sensor a function already has: a `p5.sensor`, `p5.sensor_over` or
/// `p5.sensor_under` decorator, or a later rebinding `bare = p5.sensor(0x…)(bare)` among the
/// block's statements after it (`outer`: the function with its decorators).
fn existing_sensor(
    src: &str,
    starts: &[usize],
    (outer, decorators, later): (Node<'_>, &[Node<'_>], &[Node<'_>]),
    bare: &str,
) -> Option<u64> {
    let rebinding = format!("{bare} = p5.sensor(");
    decorators
        .iter()
        .find_map(|d| {
            let t = text(*d, src);
            t.strip_prefix(DECORATOR)
                .and_then(|t| t.split(')').next())
                .or_else(|| t.strip_prefix(OVER).and_then(|t| t.split(',').next()))
                .or_else(|| t.strip_prefix(UNDER).and_then(|t| t.split(',').next()))
                .and_then(parse_literal)
        })
        .or_else(|| {
            let last = later
                .last()
                .map_or(outer.end_position().row + 1, |n| n.end_position().row);
            (outer.end_position().row + 1..=last).find_map(|row| {
                let l = line_text(src, starts, row)?;
                l.match_indices(&rebinding).find_map(|(at, _)| {
                    let before = l[..at].trim_end();
                    let ok = before.is_empty() || before.ends_with(';');
                    ok.then(|| l[at + rebinding.len()..].split(')').next())
                        .flatten()
                        .and_then(parse_literal)
                })
            })
        })
}

fn imports_p5(root: Node<'_>, src: &str) -> bool {
    let mut c = root.walk();
    root.named_children(&mut c).any(|n| {
        n.kind() == "import_statement"
            && text(n, src)
                .trim_start_matches("import")
                .split(',')
                .any(|m| m.trim() == "p5")
    }) || src.lines().any(|l| {
        // The instrumenter's own forms: `import p5; x = 1`, `from __future__ import a; import
        // p5`, `"""doc"""; global p5; import p5`, `global p5; import p5; x = 1`.
        l.trim_start().starts_with("import p5;")
            || l.trim_end().ends_with("; import p5")
            || l.contains("global p5; import p5; ")
    })
}

/// Puts `import p5` on an existing line before the first sensor that runs at import time,
/// after the docstring and the `from __future__` imports (which must stay first), in order of
/// preference: on a blank module-level line; appended to the last of those head statements
/// (`from __future__ import annotations; import p5`); in front of a module-level simple
/// statement or rebinding; in front of the first statement of a leading `class` or `try`
/// body (`global p5; import p5; `, which binds the module's name). Failing all of these, the
/// file is left as it was and reported: a sensor without its import would be a `NameError`.
fn import(
    u: &mut Unit<'_>,
    root: Node<'_>,
    starts: &[usize],
    used: &[usize],
    eager: &[usize],
    rebindings: &[usize],
) {
    let src = u.src;
    // Code inside function bodies runs after the import: only eager insertions count.
    let Some(first) = eager
        .iter()
        .copied()
        .min()
        .or_else(|| u.edits.first_offset())
    else {
        return;
    };
    let first_row = starts.partition_point(|&s| s <= first).saturating_sub(1);
    // Statements that must stay first: the docstring and `from __future__` imports.
    let mut c = root.walk();
    let top: Vec<Node<'_>> = root.named_children(&mut c).collect();
    let mut after = 0usize;
    let mut head: Option<Node<'_>> = None;
    let mut seen_statement = false;
    let mut rest = top.len();
    for (i, n) in top.iter().enumerate() {
        let doc = !seen_statement
            && n.kind() == "expression_statement"
            && n.named_child(0).is_some_and(|s| s.kind() == "string");
        if n.kind() == "comment" {
            after = n.end_position().row + 1;
            continue;
        }
        if doc || n.kind() == "future_import_statement" {
            seen_statement = true;
            after = n.end_position().row + 1;
            head = Some(*n);
        } else {
            rest = i;
            break;
        }
    }
    for row in (after..first_row).rev() {
        if used.contains(&row) {
            continue;
        }
        let Some(l) = line_text(src, starts, row) else {
            continue;
        };
        if !l.trim().is_empty() {
            continue;
        }
        let probe = starts[row];
        let inside = root
            .descendant_for_byte_range(probe, probe + l.len().max(1))
            .is_some_and(|n| n.kind() != "module");
        if !inside {
            u.edits.open(probe, "import p5");
            return;
        }
    }
    if let Some(h) = head.filter(|h| h.end_byte() <= first) {
        u.edits.close(h.end_byte(), "; import p5");
        return;
    }
    if let Some(n) = top[rest..].iter().find(|n| {
        n.start_position().column == 0
            && n.start_byte() < first
            && matches!(
                n.kind(),
                "import_statement" | "import_from_statement" | "expression_statement"
            )
    }) {
        u.edits.open(n.start_byte(), "import p5; ");
        return;
    }
    if rebindings.contains(&first) {
        // A closer sorts before the rebinding opened at the same offset.
        u.edits.close(first, "import p5; ");
        return;
    }
    if let Some((at, doc)) = top.get(rest).and_then(|n| leading_body(*n))
        && at <= first
    {
        if doc {
            u.edits.close(at, "; global p5; import p5");
        } else {
            u.edits.open(at, "global p5; import p5; ");
        }
        return;
    }
    u.edits = crate::edit::Edits::new();
    u.ledger.sensors.retain(|s| !s.inserted);
    u.problems.push(Problem {
        line: 1,
        column: 1,
        message: "file not instrumented: no line before its first sensor can hold `import p5` \
                  (add `import p5` by hand, e.g. on a blank line at the top)"
            .into(),
    });
}

/// Where `global p5; import p5; ` can go in a module's first statement when that is a `class`
/// or a `try`: in front of the first statement of its body when that is a simple statement
/// alone at the start of its line, or after a class's docstring (which must stay first).
/// Returns the offset and whether it is the end of a docstring.
fn leading_body(n: Node<'_>) -> Option<(usize, bool)> {
    if !matches!(n.kind(), "class_definition" | "try_statement") {
        return None;
    }
    let body = n.child_by_field_name("body").or_else(|| {
        let mut c = n.walk();
        n.named_children(&mut c).find(|b| b.kind() == "block")
    })?;
    let mut c = body.walk();
    let s = body
        .named_children(&mut c)
        .find(|s| s.kind() != "comment")?;
    if s.start_position().row == n.start_position().row || !SIMPLE.contains(&s.kind()) {
        return None;
    }
    if s.prev_sibling()
        .is_some_and(|p| p.end_position().row == s.start_position().row)
    {
        return None;
    }
    let doc =
        s.named_child(0).is_some_and(|x| x.kind() == "string") && n.kind() == "class_definition";
    Some(if doc {
        (s.end_byte(), true)
    } else {
        (s.start_byte(), false)
    })
}
