//! The traversal of a file's trees: which nodes it reacts to (definitions, calls, blocks),
//! when a definition gets a sensor, and what it may skip; the communication calls it finds
//! are rewritten once the whole file is walked.

use super::Frame;
use super::calls::{PendingComm, call};
use super::definition::{
    KEYWORDS, body_braces_intact, function_name, has_function_declarator, interposes_libc,
    is_constexpr, names_comm, preinit_functions,
};
use super::function::{catches_longjmp, function_sensor, setjmp_macros};
use super::regions::regions;
use crate::include;
use crate::lang::Lang;
use crate::sensor::{Kind, Problem};
use crate::tree::{preorder, text};
use crate::unit::Unit;
use std::collections::HashSet;
use tree_sitter::Node;

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

/// The C/C++ engine's state across the consecutive trees of one file: [`Walker::walk`] each
/// tree in document order (as soon as it is parsed), then [`Walker::finish`].
#[derive(Debug)]
pub struct Walker {
    cpp: bool,
    roles: Vec<Role>,
    /// Whether region markers or line regions can occur.
    markers: bool,
    preinit: Vec<String>,
    /// Macros of this file that expand to a `setjmp` (see `function::catches_longjmp`).
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
pub(super) fn walk_hints(src: &str) -> Vec<usize> {
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
