//! The Java engine.
//!
//! `--functions`: every method and constructor body becomes
//! `{ p5.P5.enter(0x…L); try { … } finally { p5.P5.exit(0x…L); } }`, the `try {` on the
//! opening brace's line and the `} finally { … }` on the closing brace's line, so the exit is
//! recorded on every return and exception. In a constructor the sensor starts after an explicit
//! `super(...)`/`this(...)` call, which Java requires to come first. Fully qualified names
//! (`p5.P5`) mean no import is added; the build needs the p5 Java client on its classpath.
//! Not instrumented: lambdas, initializer blocks, abstract and native methods (no body).
//!
//! `--comm`: socket streams, listeners' accepts, socket channels and selectors are routed through the
//! client (see `comm`). `--calls`: statement calls and local initializers (see `call_sensor`).
//! Regions: see `regions`.

use crate::sensor::{Kind, Span, parse_literal};
use crate::tree::{jumps_out, preorder, squash, text};
use crate::unit::Unit;
use tree_sitter::Node;

const ENTER: &str = "p5.P5.enter(";

/// Instruments a Java file.
pub fn instrument(u: &mut Unit<'_>, root: Node<'_>) {
    let src = u.src;
    let package = {
        let mut c = root.walk();
        root.named_children(&mut c)
            .find(|n| n.kind() == "package_declaration")
            .and_then(|p| p.named_child(0))
            .map(|n| squash(text(n, src)))
    };
    let markers = !u.line_regions.is_empty() || src.contains("p5:begin");
    preorder(
        root,
        |n| {
            if u.check_error(n) {
                return false;
            }
            if n.kind() == "method_invocation" {
                if u.modes.calls {
                    call_sensor(u, n, package.as_deref());
                }
                if u.modes.comm {
                    comm(u, n, package.as_deref());
                }
                return true;
            }
            if n.kind() == "object_creation_expression" {
                if u.modes.comm {
                    new_socket(u, n, package.as_deref());
                }
                return true;
            }
            if matches!(n.kind(), "block" | "constructor_body") && markers {
                if let Some((_, (qualified, _))) = enclosing(n, src, package.as_deref()) {
                    regions(u, n, &qualified);
                }
                return true;
            }
            if !matches!(
                n.kind(),
                "method_declaration"
                    | "constructor_declaration"
                    | "compact_constructor_declaration"
            ) {
                return true;
            }
            let bare = n
                .child_by_field_name("name")
                .map(|x| text(x, src).to_owned())
                .unwrap_or_default();
            let qualified = qualify(n, src, &bare, package.as_deref());
            if n.has_error() {
                u.problems.push(crate::sensor::Problem::at(
                    n,
                    format!("method {qualified} not instrumented: syntax errors inside"),
                ));
                return false;
            }
            if u.modes.functions && u.selected(&qualified, &bare) {
                method_sensor(u, n, &qualified);
            }
            true
        },
        |_| {},
    );
}

/// Socket streams: `x.getInputStream()` becomes `p5.P5.input(0x…L, x, _p5 -> _p5.getInputStream())`
/// (and `getOutputStream` → `p5.P5.output`); listeners: `x.accept()` becomes
/// `p5.P5.accept(0x…L, x, _p5 -> _p5.accept())`. The receiver is evaluated once, the static
/// type is unchanged (the client's generic signature infers it, checked exceptions included),
/// and the client records only when the receiver is a `java.net.Socket` (a `ServerSocket` or
/// `ServerSocketChannel` for `accept`) at run time.
///
/// Channels: `x.read(…)`, `x.write(…)` and `x.connect(a)` become `p5.P5.channel(0x…L, x).read(…)`:
/// `channel` returns `x` itself unless it is a JDK `SocketChannel`, for which it returns a
/// recording stand-in for this one call. The arguments are untouched (no lambda, so they need
/// not be effectively final). Receivers that look like class names (static calls), `this` and
/// `super` are left alone.
///
/// Selectors: `x.select(…)` and `x.selectNow(…)` become `p5.P5.selector(0x…L, x).select(…)` in
/// the same way: a JDK `Selector` gets a stand-in that records the call as a wait.
fn comm(u: &mut Unit<'_>, call: Node<'_>, package: Option<&str>) {
    let src = u.src;
    let (Some(obj), Some(name), Some(args)) = (
        call.child_by_field_name("object"),
        call.child_by_field_name("name"),
        call.child_by_field_name("arguments"),
    ) else {
        return;
    };
    let method = text(name, src);
    let Some((_, owner_context)) = enclosing(call, src, package) else {
        return;
    };
    let (qualified, bare) = owner_context;
    let selected = u.selected(&qualified, &bare);
    let existing = |n: Node<'_>| {
        n.child_by_field_name("arguments")
            .and_then(|a| a.named_child(0))
            .and_then(|a| parse_literal(text(a, src)))
    };
    if text(obj, src) == "p5.P5" {
        let op = match method {
            "input" => "getInputStream",
            "output" => "getOutputStream",
            "accept" => "accept",
            _ => return,
        };
        if let Some(id) = existing(call).filter(|_| selected) {
            u.ledger
                .add(Kind::Comm, &qualified, op, Span::of(call), Some(id));
        }
        return;
    }
    let wrapper = match method {
        "read" | "write" if args.named_child_count() > 0 => Some("channel"),
        "connect" if args.named_child_count() == 1 => Some("channel"),
        "select" | "selectNow" if args.named_child_count() <= 2 => Some("selector"),
        _ => None,
    };
    if let Some(wrapper) = wrapper {
        if obj.kind() == "method_invocation"
            && obj
                .child_by_field_name("object")
                .is_some_and(|o| text(o, src) == "p5.P5")
            && obj
                .child_by_field_name("name")
                .is_some_and(|n| text(n, src) == wrapper)
        {
            if let Some(id) = existing(obj).filter(|_| selected) {
                u.ledger
                    .add(Kind::Comm, &qualified, method, Span::of(call), Some(id));
            }
            return;
        }
        // A stream taken from a socket is recorded already and is no channel.
        let stream = obj.kind() == "method_invocation"
            && obj.child_by_field_name("name").is_some_and(|n| {
                matches!(
                    text(n, src),
                    "getInputStream" | "getOutputStream" | "input" | "output"
                )
            });
        if !selected || stream || !plain_receiver(obj, src) {
            return;
        }
        let id = u
            .ledger
            .add(Kind::Comm, &qualified, method, Span::of(call), None);
        let lit = u.lit(id);
        u.edits
            .open(obj.start_byte(), format!("p5.P5.{wrapper}({lit}, "));
        u.edits.close(obj.end_byte(), ")");
        return;
    }
    let wrapper = match method {
        "getInputStream" => "input",
        "getOutputStream" => "output",
        "accept" => "accept",
        _ => return,
    };
    if args.named_child_count() != 0
        || !plain_receiver(obj, src)
        || obj.end_position().row != call.end_position().row
        || !selected
    {
        return;
    }
    let id = u
        .ledger
        .add(Kind::Comm, &qualified, method, Span::of(call), None);
    let lit = u.lit(id);
    u.edits
        .open(obj.start_byte(), format!("p5.P5.{wrapper}({lit}, "));
    u.edits.replace(
        obj.end_byte(),
        call.end_byte(),
        format!(", _p5 -> _p5.{method}())"),
    );
}

/// `new Socket(host, port)` (the constructors that connect: two arguments or more) becomes
/// `p5.P5.connected(0x…L, p5.P5.now(), new Socket(host, port))`: the clock is read before the
/// arguments are evaluated and the socket connects, and the client records the connect.
fn new_socket(u: &mut Unit<'_>, new: Node<'_>, package: Option<&str>) {
    let src = u.src;
    let (Some(ty), Some(args)) = (
        new.child_by_field_name("type"),
        new.child_by_field_name("arguments"),
    ) else {
        return;
    };
    if !matches!(text(ty, src), "Socket" | "java.net.Socket")
        || args.named_child_count() < 2
        || new
            .named_children(&mut new.walk())
            .any(|c| c.kind() == "class_body")
    {
        return;
    }
    let Some((_, (qualified, bare))) = enclosing(new, src, package) else {
        return;
    };
    if !u.selected(&qualified, &bare) {
        return;
    }
    let wrapper = new
        .parent()
        .filter(|a| a.kind() == "argument_list")
        .and_then(|a| a.parent())
        .filter(|m| {
            m.kind() == "method_invocation"
                && m.child_by_field_name("object")
                    .is_some_and(|o| text(o, src) == "p5.P5")
                && m.child_by_field_name("name")
                    .is_some_and(|n| text(n, src) == "connected")
        });
    if let Some(m) = wrapper {
        let existing = m
            .child_by_field_name("arguments")
            .and_then(|a| a.named_child(0))
            .and_then(|a| parse_literal(text(a, src)));
        if existing.is_some() {
            u.ledger
                .add(Kind::Comm, &qualified, "connect", Span::of(new), existing);
        }
        return;
    }
    let id = u
        .ledger
        .add(Kind::Comm, &qualified, "connect", Span::of(new), None);
    let lit = u.lit(id);
    u.edits.open(
        new.start_byte(),
        format!("p5.P5.connected({lit}, p5.P5.now(), "),
    );
    u.edits.close(new.end_byte(), ")");
}

/// A receiver that is an object (not `this`, `super`, `_p5` or what looks like a class name:
/// `Files.write(…)` is a static call).
fn plain_receiver(obj: Node<'_>, src: &str) -> bool {
    let t = text(obj, src);
    let last = match obj.kind() {
        "identifier" => t,
        "field_access" => obj
            .child_by_field_name("field")
            .map_or("", |f| text(f, src)),
        _ => "",
    };
    !matches!(t, "super" | "this" | "_p5")
        && !last.starts_with(|c: char| c.is_ascii_uppercase())
        && !matches!(last, "this" | "super")
}

/// `--calls`: a call that is a whole statement, `f(x);`, becomes
/// `{ p5.P5.enter(0x…L); try { f(x); } finally { p5.P5.exit(0x…L); } }`, and a local variable
/// initialized by a call, `T v = f(x);`, becomes
/// `T v; { p5.P5.enter(0x…L); try { v = f(x); } finally { p5.P5.exit(0x…L); } }` (still
/// definitely assigned once, so `final` and effectively final stay so). Left alone: calls
/// nested in other expressions, `var` declarations and declarations of several variables,
/// `for` initializers, switch-rule arms (`case X -> f();`, maybe a value), calls outside
/// methods and constructors (field initializers, initializer blocks) and `p5.P5` itself.
fn call_sensor(u: &mut Unit<'_>, call: Node<'_>, package: Option<&str>) {
    let src = u.src;
    if call
        .child_by_field_name("object")
        .is_some_and(|o| matches!(text(o, src), "p5.P5" | "_p5"))
    {
        return;
    }
    let (Some(name), Some(parent)) = (call.child_by_field_name("name"), call.parent()) else {
        return;
    };
    let Some((_, (qualified, bare))) = enclosing(call, src, package) else {
        return;
    };
    if !u.selected(&qualified, &bare) {
        return;
    }
    let method = text(name, src);
    if let Some(id) = existing_call_wrapper(call, src) {
        u.ledger
            .add(Kind::Call, &qualified, method, Span::of(call), Some(id));
        return;
    }
    let statement = parent.kind() == "expression_statement"
        && parent.parent().is_some_and(|p| {
            matches!(
                p.kind(),
                "block"
                    | "constructor_body"
                    | "switch_block_statement_group"
                    | "if_statement"
                    | "while_statement"
                    | "for_statement"
                    | "enhanced_for_statement"
                    | "do_statement"
                    | "labeled_statement"
            )
        });
    let declaration = parent.kind() == "variable_declarator"
        && parent
            .child_by_field_name("value")
            .is_some_and(|v| v.id() == call.id())
        && parent.parent().is_some_and(|d| {
            d.kind() == "local_variable_declaration"
                && d.child_by_field_name("type")
                    .is_some_and(|t| text(t, src) != "var")
                && d.named_children(&mut d.walk())
                    .filter(|c| c.kind() == "variable_declarator")
                    .count()
                    == 1
                && d.parent().is_some_and(|b| {
                    matches!(
                        b.kind(),
                        "block" | "constructor_body" | "switch_block_statement_group"
                    )
                })
        });
    if !statement && !declaration {
        return;
    }
    let id = u
        .ledger
        .add(Kind::Call, &qualified, method, Span::of(call), None);
    let lit = u.lit(id);
    let close = format!(" }} finally {{ p5.P5.exit({lit}); }} }}");
    if statement {
        u.edits.open(
            parent.start_byte(),
            format!("{{ p5.P5.enter({lit}); try {{ "),
        );
        u.edits.close(parent.end_byte(), close);
    } else if let (Some(var), Some(decl)) = (parent.child_by_field_name("name"), parent.parent()) {
        let at = parent
            .child_by_field_name("dimensions")
            .map_or(var.end_byte(), |d| d.end_byte());
        u.edits.open(
            at,
            format!("; {{ p5.P5.enter({lit}); try {{ {}", text(var, src)),
        );
        u.edits.close(decl.end_byte(), close);
    }
}

/// The id of the call wrapper `{ p5.P5.enter(0x…L); try { [v = ]call; } finally { … } }`
/// around `call`, if it is in one.
fn existing_call_wrapper(call: Node<'_>, src: &str) -> Option<u64> {
    let mut stmt = call.parent()?;
    if stmt.kind() == "assignment_expression" {
        if stmt.child_by_field_name("right")?.id() != call.id() {
            return None;
        }
        stmt = stmt.parent()?;
    }
    let body = stmt.parent()?;
    let tr = body.parent()?;
    let wrapper = tr.parent()?;
    if stmt.kind() != "expression_statement"
        || body.named_child_count() != 1
        || tr.kind() != "try_statement"
        || wrapper.kind() != "block"
        || wrapper.named_child_count() != 2
        || wrapper.parent().is_none_or(|p| {
            matches!(
                p.kind(),
                "method_declaration" | "lambda_expression" | "constructor_declaration"
            )
        })
    {
        return None;
    }
    p5_call_id(text(wrapper.named_child(0)?, src), "enter")
}

const JUMPS: &[&str] = &[
    "return_statement",
    "throw_statement",
    "break_statement",
    "continue_statement",
    "yield_statement",
];

/// The id in `p5.P5.<call>(<id>);` if `stmt` is that statement.
fn p5_call_id(stmt: &str, call: &str) -> Option<u64> {
    let inner = stmt
        .trim()
        .strip_prefix("p5.P5.")?
        .strip_prefix(call)?
        .strip_prefix('(')?;
    parse_literal(inner.strip_suffix(");")?)
}

/// Regions: `p5.P5.enter(R);` before the begin comment (or first statement), `p5.P5.mark(S);`
/// before each statement, `{ p5.P5.exit(R); … }` around each `return`/`throw` inside, and
/// `p5.P5.exit(R);` before the end comment (or after the last statement) unless the region
/// ends in a jump (javac rejects unreachable statements).
fn regions(u: &mut Unit<'_>, block: Node<'_>, function: &str) {
    let src = u.src;
    let found = crate::region::in_block(
        block,
        src,
        |n| matches!(n.kind(), "line_comment" | "block_comment"),
        |n| {
            !matches!(
                n.kind(),
                "explicit_constructor_invocation"
                    | "class_declaration"
                    | "record_declaration"
                    | "interface_declaration"
                    | "enum_declaration"
            )
        },
        &u.line_regions,
        &mut u.regions_used,
        &mut u.problems,
    );
    for r in found {
        let Some(first) = r.statements.first().copied() else {
            continue;
        };
        let last = r.statements.last().copied().unwrap_or(first);
        let existing = match r.begin {
            Some(b) => {
                let line_start = src[..b.start_byte()].rfind('\n').map_or(0, |i| i + 1);
                p5_call_id(&src[line_start..b.start_byte()], "enter")
            }
            None => p5_call_id(text(first, src), "enter"),
        };
        if let Some(id) = existing {
            u.ledger
                .add(Kind::Region, function, &r.name, Span::of(first), Some(id));
            for s in &r.statements {
                if let Some(sid) = p5_call_id(text(*s, src), "mark") {
                    u.ledger
                        .add(Kind::Statement, function, &r.name, Span::of(*s), Some(sid));
                }
            }
            continue;
        }
        let span = Span {
            end_line: Span::of(last).end_line,
            end_column: Span::of(last).end_column,
            ..Span::of(first)
        };
        let id = u.ledger.add(Kind::Region, function, &r.name, span, None);
        let lit = u.lit(id);
        let at = r.begin.map_or(first.start_byte(), |b| b.start_byte());
        u.edits.open(at, format!("p5.P5.enter({lit}); "));
        for s in &r.statements {
            let sid = u
                .ledger
                .add(Kind::Statement, function, &r.name, Span::of(*s), None);
            let slit = u.lit(sid);
            u.edits
                .open(s.start_byte(), format!("p5.P5.mark({slit}); "));
            let jumps = jumps_out(
                *s,
                &["return_statement", "throw_statement"],
                &["lambda_expression", "class_body", "method_declaration"],
            );
            for j in jumps {
                u.edits
                    .open(j.start_byte(), format!("{{ p5.P5.exit({lit}); "));
                u.edits.close(j.end_byte(), " }");
            }
        }
        if JUMPS.contains(&last.kind()) {
            continue;
        }
        match r.end {
            Some(e) => u.edits.open(e.start_byte(), format!("p5.P5.exit({lit}); ")),
            None => u
                .edits
                .close(last.end_byte(), format!(" p5.P5.exit({lit});")),
        }
    }
}

/// The enclosing method or constructor and its (qualified, bare) name.
fn enclosing<'t>(
    n: Node<'t>,
    src: &str,
    package: Option<&str>,
) -> Option<(Node<'t>, (String, String))> {
    let mut p = n.parent();
    while let Some(m) = p {
        if matches!(
            m.kind(),
            "method_declaration" | "constructor_declaration" | "compact_constructor_declaration"
        ) {
            let bare = m
                .child_by_field_name("name")
                .map(|x| text(x, src).to_owned())
                .unwrap_or_default();
            return Some((m, (qualify(m, src, &bare, package), bare)));
        }
        p = m.parent();
    }
    None
}

fn qualify(m: Node<'_>, src: &str, bare: &str, package: Option<&str>) -> String {
    let mut parts = vec![bare.to_owned()];
    let mut p = m.parent();
    while let Some(n) = p {
        if matches!(
            n.kind(),
            "class_declaration"
                | "interface_declaration"
                | "enum_declaration"
                | "record_declaration"
                | "annotation_type_declaration"
        ) && let Some(name) = n.child_by_field_name("name")
        {
            parts.push(text(name, src).to_owned());
        }
        p = n.parent();
    }
    if let Some(pkg) = package {
        parts.push(pkg.to_owned());
    }
    parts.reverse();
    parts.join(".")
}

fn method_sensor(u: &mut Unit<'_>, m: Node<'_>, name: &str) {
    let Some(body) = m.child_by_field_name("body") else {
        return;
    };
    let src = u.src;
    let mut start = body.start_byte() + 1;
    let mut c = body.walk();
    if let Some(first) = body
        .named_children(&mut c)
        .find(|n| !matches!(n.kind(), "line_comment" | "block_comment"))
        && first.kind() == "explicit_constructor_invocation"
    {
        start = first.end_byte();
    }
    let existing = src
        .get(start..)
        .and_then(|t| t.trim_start().strip_prefix(ENTER))
        .and_then(|t| t.split(')').next())
        .and_then(parse_literal);
    let id = u
        .ledger
        .add(Kind::Function, name, name, Span::of(m), existing);
    if existing.is_some() {
        return;
    }
    let lit = u.lit(id);
    let open = format!(" {ENTER}{lit}); try {{");
    let close = format!("}} finally {{ p5.P5.exit({lit}); }} ");
    let end = body.end_byte() - 1;
    if start >= end {
        u.edits.open(end, format!("{open} {close}"));
    } else {
        u.edits.open(start, open);
        u.edits.close(end, close);
    }
}
