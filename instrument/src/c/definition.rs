//! What a definition is and whether it gets a sensor: its (qualified) name, whether it
//! declares a function at all, whether it interposes on libc, runs before `main` or is
//! `constexpr`, and whether its body's braces are real when error recovery doubts them.

use super::COMM;
use crate::tree::{squash, text};
use tree_sitter::Node;

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

pub(super) fn function_name(def: Node<'_>, src: &str, cpp: bool) -> (String, String) {
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

pub(super) fn interposes_libc(name: &str) -> bool {
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
pub(super) fn preinit_functions(src: &str) -> Vec<String> {
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
pub(super) fn names_comm(def: Node<'_>, src: &str) -> bool {
    let body = text(def, src);
    COMM.iter().any(|(name, _, _)| body.contains(name))
}

/// Whether the declarator chain of a definition declares a function (error recovery can
/// make `MACRO struct s { … } x = …;` look like a function definition).
pub(super) fn has_function_declarator(def: Node<'_>) -> bool {
    let mut d = def.child_by_field_name("declarator");
    while let Some(n) = d {
        if n.kind() == "function_declarator" {
            return true;
        }
        d = inner_declarator(n);
    }
    false
}

pub(super) fn is_constexpr(def: Node<'_>, src: &str) -> bool {
    let end = def
        .child_by_field_name("declarator")
        .map_or(def.start_byte(), |d| d.start_byte());
    src.get(def.start_byte()..end).is_some_and(|head| {
        head.split(|c: char| !c.is_alphanumeric() && c != '_')
            .any(|w| w == "constexpr" || w == "consteval")
    })
}

/// Words error recovery can take for a function's name (`if (x) {` read as a definition).
pub(super) const KEYWORDS: &[&str] = &[
    "if", "else", "while", "for", "do", "switch", "case", "return", "sizeof", "goto",
];

/// Whether a definition's body starts with a real `{` right after its declarator and that
/// brace has its match in the text (skipping comments, strings and character literals):
/// then the body is where its braces say, whatever tree-sitter made of the lines between
/// them, and the scope guard after `{` is in the right place.
pub(super) fn body_braces_intact(def: Node<'_>, body: Node<'_>, src: &str) -> bool {
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
