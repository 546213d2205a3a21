//! The C and C++ engine.
//!
//! - `--functions`: `P5_SCOPE(0x…ULL);` right after the opening brace of every function body.
//!   The macro declares a guard with `__attribute__((cleanup))` (GCC, Clang; in C++ it acts as
//!   an RAII object), so the exit is recorded on every way out: `return`, falling off the end,
//!   `goto` out, C++ exceptions. Not covered: `longjmp` past the frame, `exit()`/`abort()`, and
//!   threads killed while inside. A function that calls `setjmp` (or a macro of the file that
//!   expands to one, like Lua's `LUAI_TRY`) is where a `longjmp` lands: it gets
//!   `P5_SCOPE_ALWAYS`, never throttled, so its exit closes the scopes the jump skipped.
//!   C++ `constexpr`/`consteval` functions are left alone, and so are definitions of C
//!   library functions (`malloc`, `memcmp`, `write`, … — see `INTERPOSED`): a program defines
//!   those to interpose on libc, and they run before `main` and inside the runtime itself; so
//!   are functions the file registers in `.preinit_array`.
//! - `--comm`: `send(fd, …)` becomes `p5_send(0x…ULL, fd, …)` for `send recv sendto recvfrom
//!   sendmsg recvmsg read write connect accept accept4 close` — only real calls of a
//!   plain (or `::`-qualified) name with the libc arity, inside functions, and not in files that
//!   define a function of that name themselves.
//! - `--calls`: a call `f(x)` becomes `({ P5_SCOPE(0x…ULL); f(x); })` in C (a GNU statement
//!   expression: same value, same type) and `[&]() -> decltype(auto) { P5_SCOPE(0x…ULL); return
//!   f(x); }()` in C++ (keeps references and guaranteed elision). Skipped: calls outside function
//!   bodies, in unevaluated or constant contexts (`sizeof`, `case`, array sizes, `decltype`,
//!   template arguments, …), of ALL-CAPS names (macros by convention), `setjmp`-like and
//!   builtin names, and communication calls already recorded by `--comm`.
//! - Regions: `p5_enter_inline(R);` before the begin comment (or first statement),
//!   `p5_exit_inline(R);` before the end comment (or after the last statement), a
//!   `p5_mark_inline(S);` before each statement in between, and `{ p5_exit_inline(R); … }`
//!   around each `return` inside. Leaving a region by `break`/`goto` is not recorded.
//! - `#include "p5.h"` is placed by [`crate::include`].
//!
//! Existing sensors (`P5_SCOPE` first in a body, `p5_send(0x…` etc., wrapped calls) are
//! recognised, so instrumenting instrumented output changes nothing.

use crate::include;
use crate::lang::Lang;
use crate::region;
use crate::select::Pin;
use crate::sensor::{Kind, Problem, Span, parse_literal};
use crate::tree::{jumps_out, preorder, squash, text};
use crate::unit::Unit;
use std::collections::HashSet;
use tree_sitter::Node;

/// Communication calls: (libc name, arity, runtime wrapper).
const COMM: &[(&str, usize, &str)] = &[
    ("send", 4, "p5_send"),
    ("recv", 4, "p5_recv"),
    ("sendto", 6, "p5_sendto"),
    ("recvfrom", 6, "p5_recvfrom"),
    ("sendmsg", 3, "p5_sendmsg"),
    ("recvmsg", 3, "p5_recvmsg"),
    ("read", 3, "p5_read"),
    ("write", 3, "p5_write"),
    ("connect", 3, "p5_connect"),
    ("accept", 3, "p5_accept"),
    ("accept4", 4, "p5_accept4"),
    ("close", 1, "p5_close"),
    ("poll", 3, "p5_poll"),
    ("ppoll", 4, "p5_ppoll"),
    ("select", 5, "p5_select"),
    ("pselect", 6, "p5_pselect"),
    ("epoll_wait", 4, "p5_epoll_wait"),
    ("epoll_pwait", 5, "p5_epoll_pwait"),
];

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

#[derive(Debug)]
struct Frame {
    end: usize,
    name: String,
    /// Whether its calls get sensors and its communication calls are routed: selected, and
    /// no unreadable lines in its body.
    calls: bool,
}

/// A communication call found by the walk; rewritten once the whole file is walked (a
/// file that defines a function of that name keeps its calls).
#[derive(Debug)]
struct PendingComm {
    function: String,
    span: Span,
    /// Where the callee's name starts (`p5_` goes there).
    name_start: usize,
    /// Just after the `(` of the arguments (the id goes there).
    args_start: Option<usize>,
    name: String,
    wrapper: &'static str,
}

/// What the traversal reacts to, by node kind id (built once per grammar, aliases included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Other,
    Function,
    Call,
    Block,
}

fn roles(lang: &tree_sitter::Language) -> Vec<Role> {
    (0..lang.node_kind_count())
        .map(|id| {
            match u16::try_from(id)
                .ok()
                .and_then(|id| lang.node_kind_for_id(id))
            {
                Some("function_definition") => Role::Function,
                Some("call_expression") => Role::Call,
                Some("compound_statement") => Role::Block,
                _ => Role::Other,
            }
        })
        .collect()
}

/// Instruments a C or C++ file given as one or more consecutive parse trees (a large file is
/// parsed in chunks, see [`crate::unit`]).
pub fn instrument(u: &mut Unit<'_>, roots: &[Node<'_>]) {
    let mut w = Walker::new(u);
    for &root in roots {
        w.walk(u, root);
    }
    w.finish(u, roots);
}

/// The C/C++ engine's state across the consecutive trees of one file: [`Walker::walk`] each
/// tree in document order (as soon as it is parsed), then [`Walker::finish`].
#[derive(Debug)]
pub struct Walker {
    cpp: bool,
    roles: Vec<Role>,
    /// Whether region markers or line regions can occur.
    markers: bool,
    preinit: Vec<String>,
    /// Macros of this file that expand to a `setjmp` (see [`catches_longjmp`]).
    catchers: Vec<String>,
    frames: Vec<Frame>,
    defined: HashSet<String>,
    comm: Vec<PendingComm>,
    /// See [`walk_hints`]; `None` when every node must be visited.
    hints: Option<Vec<usize>>,
    next_hint: usize,
}

impl Walker {
    /// A walker for the file of `u`.
    pub fn new(u: &Unit<'_>) -> Self {
        let src = u.src;
        let cpp = u.lang == Lang::Cpp;
        let markers = !u.line_regions.is_empty() || src.contains("p5:begin");
        // In C without call wrapping and regions, only three things inside a definition
        // matter: errors, nested definitions (GCC) and communication calls. A subtree without
        // an error, a `{` and a communication name in its text holds none of them and is not
        // walked.
        let hints = (u.prune && !cpp && !u.modes.calls && !markers).then(|| walk_hints(src));
        Walker {
            cpp,
            roles: roles(&u.lang.grammar()),
            markers,
            preinit: preinit_functions(src),
            catchers: setjmp_macros(src),
            frames: Vec::new(),
            defined: HashSet::new(),
            comm: Vec::new(),
            hints,
            next_hint: 0,
        }
    }

    /// Walks one tree; trees must come in document order.
    pub fn walk(&mut self, u: &mut Unit<'_>, root: Node<'_>) {
        let src = u.src;
        let cpp = self.cpp;
        let markers = self.markers;
        let Walker {
            roles,
            preinit,
            catchers,
            frames,
            defined,
            comm,
            hints,
            next_hint,
            ..
        } = self;
        let errors = root.has_error();
        // The definitions of this tree among `frames` (the last ones), for ancestor lookups.
        let mut defs: Vec<Node<'_>> = Vec::new();
        preorder(
            root,
            |n| {
                while frames.last().is_some_and(|f| n.start_byte() >= f.end) {
                    frames.pop();
                }
                while defs.last().is_some_and(|d| n.start_byte() >= d.end_byte()) {
                    defs.pop();
                }
                if errors && n.has_error() && u.check_error(n) {
                    return false;
                }
                if let Some(h) = &hints {
                    // Nodes come in document order: their starts never decrease.
                    let start = n.start_byte();
                    while h.get(*next_hint).is_some_and(|&p| p < start) {
                        *next_hint += 1;
                    }
                    if h.get(*next_hint).is_none_or(|&p| p >= n.end_byte()) && !n.has_error() {
                        return false;
                    }
                }
                match roles
                    .get(usize::from(n.kind_id()))
                    .copied()
                    .unwrap_or(Role::Other)
                {
                    Role::Function => {
                        let (qualified, bare) = function_name(n, src, cpp);
                        defined.insert(bare.clone());
                        // Errors only in front of an intact declarator and body (an unknown
                        // macro among the specifiers) do not stop the body's sensor.
                        let intact =
                            |f: &str| n.child_by_field_name(f).is_some_and(|x| !x.has_error());
                        let body_ok = n
                            .child_by_field_name("body")
                            .is_some_and(|b| b.kind() == "compound_statement");
                        // Errors inside a body whose braces are real and balanced (an
                        // unreadable macro line) do not stop its sensor either: the scope
                        // guard after `{` needs nothing from the rest of the body.
                        let braces_ok = || {
                            n.child_by_field_name("body")
                                .is_some_and(|b| body_braces_intact(n, b, src))
                        };
                        // Error recovery reads `switch (op(i)) {`, `case_label(X) {` or
                        // `if (x) {` inside a body as a definition: C has no nested functions
                        // (barring a GCC extension), so such a definition is none.
                        let nested =
                            !cpp && defs.last().is_some_and(|d| d.end_byte() >= n.end_byte());
                        if n.has_error()
                            && (nested
                                || KEYWORDS.contains(&bare.as_str())
                                || !has_function_declarator(n))
                        {
                            return true;
                        }
                        // A macro in a parameter list (`f(void *p ARG_PDECL)`) leaves the
                        // declarator with an error but still one line of names and types.
                        let declarator_plain = || {
                            n.child_by_field_name("declarator")
                                .is_some_and(|d| !text(d, src).contains(['{', '}', ';']))
                        };
                        if n.has_error()
                            && !(body_ok
                                && (intact("declarator") || declarator_plain())
                                && has_function_declarator(n)
                                && !bare.is_empty()
                                && (intact("body") || braces_ok()))
                        {
                            u.problems.push(Problem::at(
                                n,
                                format!(
                                    "function {qualified} not instrumented: syntax errors inside"
                                ),
                            ));
                            return true;
                        }
                        let constexpr = cpp && is_constexpr(n, src);
                        // Error recovery and C++ brace initialisation (`T table[] { … }`) can make a
                        // definition without a function declarator: not a function.
                        let selected = !constexpr
                            && has_function_declarator(n)
                            && !interposes_libc(&qualified)
                            && !preinit.contains(&bare)
                            && u.selected(&qualified, &bare);
                        if selected && u.modes.functions {
                            let catches = catches_longjmp(text(n, src), catchers);
                            function_sensor(u, n, &qualified, catches);
                        }
                        defs.push(n);
                        // Calls in a body with unreadable lines are left alone: error
                        // recovery can read a preprocessor line or a macro as a call.
                        frames.push(Frame {
                            end: n.end_byte(),
                            name: qualified,
                            calls: selected && !n.has_error(),
                        });
                        // A C body holds nothing more to instrument unless calls are wrapped,
                        // regions are marked or a communication call is named in it: then the
                        // traversal can skip its nodes (C has no nested definitions, barring a
                        // GCC extension; C++ bodies can hold local classes, and an
                        // error-recovered definition can swallow its neighbours: both are walked).
                        cpp || n.has_error()
                            || u.modes.calls
                            || markers
                            || (u.modes.comm && names_comm(n, src))
                    }
                    Role::Call => {
                        if let Some(f) = frames.last() {
                            let top = defs.last().copied().unwrap_or(root);
                            call(u, n, top, f, cpp, comm);
                        }
                        true
                    }
                    Role::Block => {
                        if markers && let Some(f) = frames.last() {
                            let name = f.name.clone();
                            regions(u, n, &name, cpp);
                        }
                        true
                    }
                    Role::Other => true,
                }
            },
            |_| {},
        );
    }

    /// Rewrites the communication calls and places the `#include`; `roots` are all trees.
    pub fn finish(self, u: &mut Unit<'_>, roots: &[Node<'_>]) {
        for p in self.comm {
            if self.defined.contains(&p.name) {
                continue;
            }
            let id = u.ledger.add(Kind::Comm, &p.function, &p.name, p.span, None);
            let prefix_len = p.wrapper.len() - p.name.len();
            u.edits.open(p.name_start, &p.wrapper[..prefix_len]);
            if let Some(at) = p.args_start {
                u.edits.open(at, format!("{}, ", u.lit(id)));
            }
        }
        if !u.edits.is_empty() && !include::present(u.src) {
            include::insert(u, roots);
        }
    }
}

/// Offsets in `src` of every `{` and every start of a communication function's name (which
/// also finds the runtime's wrappers, `p5_send` holding `send`), ascending. A node whose
/// text holds none of them contains neither a definition nor a communication call. Every
/// name in `COMM` holds one of the words looked for here (a test checks it): most begin with
/// one, the waits hold `poll` or `select` (`ppoll`, `epoll_wait`, `pselect`).
fn walk_hints(src: &str) -> Vec<usize> {
    let b = src.as_bytes();
    let at = |i: usize, word: &[u8]| b[i..].starts_with(word);
    (0..b.len())
        .filter(|&i| match b[i] {
            b'{' => true,
            b's' => at(i, b"send") || at(i, b"select"),
            b'p' => at(i, b"poll"),
            b'r' => at(i, b"recv") || at(i, b"read"),
            b'w' => at(i, b"write"),
            b'c' => at(i, b"connect") || at(i, b"close"),
            b'a' => at(i, b"accept"),
            _ => false,
        })
        .collect()
}

/// The declarator inside `n` (`(…)` and C++'s `&`/`&&` declarators have no field for it).
fn inner_declarator(n: Node<'_>) -> Option<Node<'_>> {
    n.child_by_field_name("declarator")
        .or_else(|| match n.kind() {
            "reference_declarator" => {
                n.named_child(u32::try_from(n.named_child_count().checked_sub(1)?).ok()?)
            }
            "parenthesized_declarator" => {
                let mut c = n.walk();
                n.named_children(&mut c)
                    .find(|x| x.kind().ends_with("declarator") || x.kind().ends_with("identifier"))
            }
            _ => None,
        })
}

fn function_name(def: Node<'_>, src: &str, cpp: bool) -> (String, String) {
    let mut d = def.child_by_field_name("declarator");
    let mut last = None;
    while let Some(n) = d {
        last = Some(n);
        d = inner_declarator(n);
    }
    let name = last.map(|n| squash(text(n, src))).unwrap_or_default();
    let bare = name.rsplit("::").next().unwrap_or(&name).to_owned();
    if !cpp {
        return (name.clone(), name);
    }
    let mut scopes = Vec::new();
    let mut p = def.parent();
    while let Some(n) = p {
        if matches!(
            n.kind(),
            "class_specifier" | "struct_specifier" | "union_specifier" | "namespace_definition"
        ) && let Some(nm) = n.child_by_field_name("name")
        {
            scopes.push(squash(text(nm, src)));
        }
        p = n.parent();
    }
    scopes.reverse();
    scopes.push(name);
    (scopes.join("::"), bare)
}

/// C library functions a program may define to interpose on libc (allocators, `mem*`/`str*`,
/// the socket calls). They can run before `main` — even before the environment is set up, from
/// the dynamic loader — and inside the runtime itself, so they get no sensors.
const INTERPOSED: &[&str] = &[
    "malloc",
    "free",
    "calloc",
    "realloc",
    "reallocarray",
    "aligned_alloc",
    "posix_memalign",
    "memalign",
    "valloc",
    "pvalloc",
    "malloc_usable_size",
    "memcmp",
    "memcpy",
    "memmove",
    "memset",
    "memchr",
    "memrchr",
    "memmem",
    "bcmp",
    "strcmp",
    "strncmp",
    "strcasecmp",
    "strncasecmp",
    "strlen",
    "strnlen",
    "strchr",
    "strrchr",
    "strstr",
    "strcasestr",
    "strcpy",
    "strncpy",
    "strdup",
    "strndup",
    "getenv",
    "setenv",
    "unsetenv",
    "pthread_create",
    "pthread_join",
    "dlopen",
    "dlsym",
    "dlclose",
    "fork",
    "clock_gettime",
    "gettimeofday",
    "socket",
    "shutdown",
];

fn interposes_libc(name: &str) -> bool {
    let name = name.trim_start_matches("::");
    INTERPOSED.contains(&name)
        || COMM.iter().any(|c| c.0 == name)
        || [
            "__interceptor_",
            "__sanitizer_",
            "__wrap_",
            "__real_",
            "__libc_",
            "__cxa_",
        ]
        .iter()
        .any(|p| name.starts_with(p))
}

/// Functions this file registers in `.preinit_array` (`__attribute__((section(
/// ".preinit_array"))) static void (*p)(void) = f;`, as libFuzzer does): they run before the C
/// library has set up the environment, so a sensor there would start the runtime blind to
/// `P5_*` settings.
fn preinit_functions(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in src.match_indices(".preinit_array") {
        let decl = &src[i..src[i..].find(';').map_or(src.len(), |e| i + e)];
        if let Some((_, init)) = decl.split_once('=') {
            out.extend(
                init.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .filter(|w| !w.is_empty() && !w.starts_with(|c: char| c.is_ascii_digit()))
                    .map(str::to_owned),
            );
        }
    }
    out
}

/// Whether the text of `def` mentions one of the communication functions.
fn names_comm(def: Node<'_>, src: &str) -> bool {
    let body = text(def, src);
    COMM.iter().any(|(name, _, _)| body.contains(name))
}

/// Whether the declarator chain of a definition declares a function (error recovery can
/// make `MACRO struct s { … } x = …;` look like a function definition).
fn has_function_declarator(def: Node<'_>) -> bool {
    let mut d = def.child_by_field_name("declarator");
    while let Some(n) = d {
        if n.kind() == "function_declarator" {
            return true;
        }
        d = inner_declarator(n);
    }
    false
}

fn is_constexpr(def: Node<'_>, src: &str) -> bool {
    let end = def
        .child_by_field_name("declarator")
        .map_or(def.start_byte(), |d| d.start_byte());
    src.get(def.start_byte()..end).is_some_and(|head| {
        head.split(|c: char| !c.is_alphanumeric() && c != '_')
            .any(|w| w == "constexpr" || w == "consteval")
    })
}

/// The id in `P5_SCOPE(<id>)` (or `P5_SCOPE_ALWAYS`, `P5_SCOPE_COUNT`) if `stmt` is such a
/// statement.
fn scope_id(stmt: Node<'_>, src: &str) -> Option<u64> {
    let t = text(stmt, src).trim();
    let rest = t.strip_prefix("P5_SCOPE")?;
    let rest = rest
        .strip_prefix("_ALWAYS")
        .or_else(|| rest.strip_prefix("_COUNT"))
        .unwrap_or(rest);
    let inner = rest.strip_prefix('(')?.strip_suffix(");")?;
    parse_literal(inner)
}

/// Words error recovery can take for a function's name (`if (x) {` read as a definition).
const KEYWORDS: &[&str] = &[
    "if", "else", "while", "for", "do", "switch", "case", "return", "sizeof", "goto",
];

/// Whether a definition's body starts with a real `{` right after its declarator and that
/// brace has its match in the text (skipping comments, strings and character literals):
/// then the body is where its braces say, whatever tree-sitter made of the lines between
/// them, and the scope guard after `{` is in the right place.
fn body_braces_intact(def: Node<'_>, body: Node<'_>, src: &str) -> bool {
    let (Some(open), Some(decl)) = (body.child(0), def.child_by_field_name("declarator")) else {
        return false;
    };
    if open.kind() != "{" || open.is_missing() || decl.end_byte() > open.start_byte() {
        return false;
    }
    if !src[decl.end_byte()..open.start_byte()].trim().is_empty() {
        return false;
    }
    let b = &src.as_bytes()[open.start_byte()..];
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 1;
            }
            q @ (b'"' | b'\'') => {
                i += 1;
                while i < b.len() && b[i] != q && b[i] != b'\n' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return true;
                }
            }
            _ => {}
        }
        i += 1;
    }
    false
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
fn setjmp_macros(src: &str) -> Vec<String> {
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
fn catches_longjmp(def_text: &str, catchers: &[String]) -> bool {
    (def_text.contains("jmp") && calls_any(def_text, SETJMP.iter().copied()))
        || (!catchers.is_empty() && calls_any(def_text, catchers.iter().map(String::as_str)))
}

fn function_sensor(u: &mut Unit<'_>, def: Node<'_>, name: &str, catches: bool) {
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

fn arg_count(call: Node<'_>) -> usize {
    call.child_by_field_name("arguments").map_or(0, |a| {
        let mut c = a.walk();
        a.named_children(&mut c)
            .filter(|n| n.kind() != "comment")
            .count()
    })
}

/// A call `n` inside the definition `top` (or anywhere below `top`, an ancestor of `n`).
fn call<'t>(
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

fn regions(u: &mut Unit<'_>, block: Node<'_>, function: &str, cpp: bool) {
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

#[cfg(test)]
mod tests {
    use crate::{Lang, Modes, Selection, instrument};

    #[test]
    fn hints_find_every_communication_name() {
        for (name, _, wrapper) in super::COMM {
            let h = super::walk_hints(name);
            assert!(h.len() == 1 && h[0] < 2, "{name}: {h:?}");
            assert_eq!(super::walk_hints(wrapper), [h[0] + 3], "{wrapper}");
        }
        assert_eq!(super::walk_hints("a{b}{"), [1, 4]);
    }

    fn names(lang: Lang, src: &str) -> Vec<String> {
        instrument(lang, "t", src, Modes::default(), &Selection::all())
            .sensors
            .into_iter()
            .map(|s| s.function)
            .collect()
    }

    #[test]
    fn function_names_see_through_declarators() {
        assert_eq!(
            names(
                Lang::Cpp,
                "int &r(int &x) { return x; }\nint *p(void) { return 0; }\nint (*q(int a))(int) { return 0; }\n\
                 namespace n { struct S { void m() {} }; }\nint n::S2::k() const { return 1; }\n"
            ),
            ["r", "p", "q", "n::S::m", "n::S2::k"]
        );
        // Not functions, whatever error recovery says.
        assert!(names(Lang::Cpp, "static const int table[] { 1, 2 };\n").is_empty());
        assert!(names(Lang::C, "MACRO struct s { int a; } x = { 1 };\n").is_empty());
        // Interposed libc functions and pre-init functions run before the runtime can.
        assert_eq!(
            names(
                Lang::C,
                "int memcmp(const void *a, const void *b, unsigned long n) { return 0; }\n\
                 static void early(void) {}\n\
                 __attribute__((section(\".preinit_array\"), used)) static void (*p)(void) = early;\n\
                 int late(void) { return 1; }\n"
            ),
            ["late"]
        );
    }

    #[test]
    fn functions_where_a_longjmp_lands_are_never_throttled() {
        let src = "#include <setjmp.h>\n\
                   #define TRY(c, a) if (_setjmp((c)->b) == 0) { a }\n\
                   #define TRY2(c, a) \\\n  TRY(c, a)\n\
                   struct jb { jmp_buf b; };\n\
                   static int leaf(int x) { return x + 1; }\n\
                   int guarded(struct jb *c) { TRY(c, leaf(1);); return 0; }\n\
                   int guarded2(struct jb *c) { TRY2(c, leaf(2);); return 0; }\n\
                   int direct(void) { jmp_buf b; if (sigsetjmp(b, 1) == 0) return 1; return 0; }\n\
                   int mentions(void) { int TRYX = 1, mysetjmp = 2; return TRYX + mysetjmp; }\n";
        let out = instrument(
            Lang::C,
            "t.c",
            src,
            Modes {
                functions: true,
                ..Modes::default()
            },
            &Selection::all(),
        );
        let guard_of = |f: &str| {
            let line = out
                .text
                .lines()
                .find(|l| l.contains(&format!(" {f}(")))
                .unwrap();
            line.split(['{', ';'])
                .nth(1)
                .unwrap()
                .trim()
                .split('(')
                .next()
                .unwrap()
                .to_owned()
        };
        assert_eq!(guard_of("leaf"), "P5_SCOPE");
        assert_eq!(guard_of("guarded"), "P5_SCOPE_ALWAYS");
        assert_eq!(guard_of("guarded2"), "P5_SCOPE_ALWAYS");
        assert_eq!(guard_of("direct"), "P5_SCOPE_ALWAYS");
        assert_eq!(guard_of("mentions"), "P5_SCOPE");
        assert_eq!(super::setjmp_macros(src), ["TRY", "TRY2"]);
    }
}
