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
//!
//! The engine's parts: `walker` traverses the trees and decides which definitions get a
//! sensor with `definition`; `function` places the function sensors, `calls` the
//! communication and call sensors, `regions` the region markers.

use crate::unit::Unit;
use tree_sitter::Node;

mod calls;
mod definition;
mod function;
mod regions;
#[cfg(test)]
mod tests;
mod walker;

pub use walker::Walker;

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

/// A definition being walked.
#[derive(Debug)]
struct Frame {
    end: usize,
    name: String,
    /// Whether its calls get sensors and its communication calls are routed: selected, and
    /// no unreadable lines in its body.
    calls: bool,
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
