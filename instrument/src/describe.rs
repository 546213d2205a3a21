//! Sensor tables embedded in the instrumented files, so a recording names its sensors and
//! finds their source without a manifest (format: `p5_wire::sensors`).
//!
//! Each instrumented file registers its table when the program starts, without moving any
//! original line:
//! - C and C++ (source files, not headers): lines appended at the end — the table as a string
//!   constant and a `__attribute__((constructor))` function calling `p5_describe`. A header's
//!   sensors are described by every instrumented source file that includes it by name
//!   (`#include "x.h"`), since a header is pasted into places where no definition may go.
//! - Rust: lines appended at the end — an `.init_array` entry calling
//!   `p5_runtime::describe` (Linux; needs Rust ≥ 1.82 for `#[unsafe(link_section)]`).
//! - Python: `p5.describe("…")` on the line that imports `p5` (the instrumenter's own import
//!   line: `import p5; p5.describe("…")`), or, where the program imported `p5` itself, as a
//!   last line.
//! - Java: `static { p5.P5.describe(…); }` on the opening line of every top-level class or
//!   record body (an interface gets a constant initialised by the call, an enum a static
//!   block after its constants): the table is registered when the class is initialised.
//!
//! [`strip`] removes an earlier registration, so instrumenting an instrumented file again
//! gives the same text.

use crate::lang::Lang;
use p5_wire::manifest::Sensor;
use p5_wire::sensors::Table;
use std::borrow::Cow;

/// First words of the comment that starts an appended registration (C, C++, Rust).
pub const MARKER: &str = "p5:sensors";
/// Java string constants are cut into pieces of at most this many characters (a class-file
/// constant holds 65,535 bytes of modified UTF-8).
const JAVA_PIECE: usize = 16_000;

/// One file's table as text.
pub fn table(root: &str, rel: &str, lang: Lang, sha256: &str, sensors: Vec<Sensor>) -> String {
    Table {
        root: root.to_owned(),
        file: rel.to_owned(),
        language: lang.name().to_owned(),
        sha256: sha256.to_owned(),
        sensors,
    }
    .to_text()
}

/// True if the crate `file` (a Rust source) belongs to forbids unsafe code, so the
/// `.init_array` entry cannot be compiled there and the crate's sensors are named only with
/// `--manifest` (see [`crate_dir`] and [`crate_forbids_unsafe`]).
pub fn forbids_unsafe(file: &std::path::Path) -> bool {
    crate_dir(file).is_some_and(|d| crate_forbids_unsafe(&d))
}

/// The directory of the nearest `Cargo.toml` above `file`.
pub fn crate_dir(file: &std::path::Path) -> Option<std::path::PathBuf> {
    file.ancestors()
        .skip(1)
        .find(|d| d.join("Cargo.toml").is_file())
        .map(std::path::Path::to_path_buf)
}

/// True if the crate in `dir` has a root (`src/lib.rs` or `src/main.rs`) that says
/// `#![forbid(unsafe_code)]`.
pub fn crate_forbids_unsafe(dir: &std::path::Path) -> bool {
    ["src/lib.rs", "src/main.rs"].iter().any(|root| {
        std::fs::read_to_string(dir.join(root)).is_ok_and(|t| {
            t.lines().any(|l| {
                let l = l.trim_start();
                l.starts_with("#![forbid(") && l.contains("unsafe_code")
            })
        })
    })
}

/// True for C and C++ headers (described by the files that include them).
pub fn is_header(rel: &str) -> bool {
    let ext = rel.rsplit_once('.').map_or("", |(_, e)| e);
    matches!(
        ext,
        "h" | "hh" | "hpp" | "hxx" | "h++" | "inl" | "ipp" | "tcc"
    )
}

/// The names of the headers `text` includes with quotes (`#include "dir/x.h"` gives `x.h`).
pub fn quoted_includes(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for l in text.lines() {
        let l = l.trim_start();
        let Some(rest) = l.strip_prefix('#') else {
            continue;
        };
        let Some(rest) = rest.trim_start().strip_prefix("include") else {
            continue;
        };
        let Some(rest) = rest.trim_start().strip_prefix('"') else {
            continue;
        };
        if let Some((path, _)) = rest.split_once('"') {
            out.push(path.rsplit('/').next().unwrap_or(path));
        }
    }
    out
}

/// `text` with `tables` registered (`None` when the language offers no place for it, e.g. a
/// Java file with no top-level type). `key` makes the C/C++ symbol names unique per file.
pub fn embed(lang: Lang, text: &str, tables: &[String], key: &str) -> Option<String> {
    if tables.is_empty() {
        return Some(text.to_owned());
    }
    match lang {
        Lang::C | Lang::Cpp => Some(append(text, &c_trailer(tables, key))),
        Lang::Rust => Some(append(text, &rust_trailer(tables, key))),
        Lang::Python => Some(python(text, tables)),
        Lang::Java => java(text, tables),
    }
}

/// `text` without a registration [`embed`] added (unchanged if it has none).
pub fn strip(lang: Lang, text: &str) -> Cow<'_, str> {
    match lang {
        Lang::C | Lang::Cpp | Lang::Rust => {
            let comment = if lang == Lang::Rust { "// " } else { "/* " };
            let needle = format!("\n{comment}{MARKER}");
            match text.rfind(&needle) {
                Some(i) => Cow::Owned(text[..=i].to_owned()),
                None => Cow::Borrowed(text),
            }
        }
        Lang::Python => remove_calls(
            text,
            &[("; p5.describe(\"", ""), ("\np5.describe(\"", "\n")],
        ),
        Lang::Java => remove_calls(
            text,
            &[
                (" static { p5.P5.describe(new String[] {\"", "; }"),
                (
                    " int P5_SENSOR_TABLE = p5.P5.describe(new String[] {\"",
                    ";",
                ),
            ],
        ),
    }
}

fn append(text: &str, trailer: &str) -> String {
    let mut out = String::with_capacity(text.len() + trailer.len() + 1);
    out.push_str(text);
    if !text.is_empty() && !text.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(trailer);
    out
}

/// A short hex digest of `key` for symbol names.
fn tag(key: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{:08x}", h as u32)
}

/// A C string literal: escapes `\`, `"`, `?` (trigraphs) and control characters (octal);
/// other characters stay as they are (UTF-8).
fn c_literal(s: &str) -> String {
    literal(s, |c| match c {
        '?' => Some("\\?".to_owned()),
        c if (c as u32) < 0x20 => Some(format!("\\{:03o}", c as u32)),
        _ => None,
    })
}

/// `s` as a double-quoted literal: `\`, `"`, line feed, tab and carriage return escaped the
/// way C, Rust, Python and Java all read them; `other` escapes what else the language needs.
fn literal(s: &str, other: impl Fn(char) -> Option<String>) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c => match other(c) {
                Some(e) => out.push_str(&e),
                None => out.push(c),
            },
        }
    }
    out.push('"');
    out
}

fn c_trailer(tables: &[String], key: &str) -> String {
    let t = tag(key);
    // Declared here too: the file's `#include "p5.h"` may sit inside an `#if` that is off.
    let mut s = format!(
        "/* {MARKER}: written by p5-instrument; registers this file's sensor table at start-up */\n\
         #if defined(__GNUC__) || defined(__clang__)\n\
         #ifdef __cplusplus\n\
         extern \"C\"\n\
         #endif\n\
         void p5_describe(const char *table);\n"
    );
    for (i, table) in tables.iter().enumerate() {
        s.push_str(&format!(
            "static const char p5_sensors_{t}_{i}[] = {};\n",
            c_literal(table)
        ));
    }
    s.push_str(&format!(
        "__attribute__((constructor)) static void p5_describe_{t}(void) {{"
    ));
    for i in 0..tables.len() {
        s.push_str(&format!(" p5_describe(p5_sensors_{t}_{i});"));
    }
    s.push_str(" }\n#endif\n");
    s
}

/// A Rust (or Python, or Java) string literal: besides [`literal`]'s escapes, control and
/// non-ASCII characters as `unicode` writes them.
fn quoted(s: &str, unicode: fn(u32) -> String) -> String {
    literal(s, |c| {
        ((c as u32) < 0x20 || (c as u32) > 0x7e).then(|| unicode(c as u32))
    })
}

fn rust_trailer(tables: &[String], key: &str) -> String {
    let t = tag(key).to_uppercase();
    let mut calls = String::new();
    for table in tables {
        calls.push_str(&format!(
            " p5_runtime::describe({});",
            quoted(table, |c| format!("\\u{{{c:x}}}"))
        ));
    }
    format!(
        "// {MARKER}: written by p5-instrument; registers this file's sensor table at start-up\n\
         #[cfg(target_os = \"linux\")]\n\
         #[allow(unsafe_code)]\n\
         #[used]\n\
         #[unsafe(link_section = \".init_array\")]\n\
         static P5_DESCRIBE_{t}: extern \"C\" fn() = {{\n    \
         extern \"C\" fn describe() {{{calls} }}\n    describe\n}};\n"
    )
}

fn python_literal(s: &str) -> String {
    quoted(s, |c| {
        if c > 0xffff {
            format!("\\U{c:08x}")
        } else {
            format!("\\u{c:04x}")
        }
    })
}

fn python(text: &str, tables: &[String]) -> String {
    let calls: String = tables
        .iter()
        .map(|t| format!("; p5.describe({})", python_literal(t)))
        .collect();
    // The instrumenter's own import line: `import p5`, `import p5; x = 1`,
    // `from __future__ import a; import p5`, `"""doc"""; global p5; import p5[; x = 1]`.
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let l = line.trim_end_matches(['\n', '\r']);
        let at = if l.trim() == "import p5" || l.trim_start().starts_with("import p5;") {
            l.find("import p5").map(|i| i + "import p5".len())
        } else if l.ends_with("; import p5") {
            Some(l.len())
        } else {
            l.find("global p5; import p5")
                .map(|i| i + "global p5; import p5".len())
        };
        if let Some(at) = at {
            let at = offset + at;
            return format!("{}{calls}{}", &text[..at], &text[at..]);
        }
        offset += line.len();
    }
    // The program imports p5 itself: register at the end of the module.
    append(text, &format!("{}\n", &calls[2..]))
}

fn java_call(tables: &[String]) -> String {
    let mut pieces = Vec::new();
    for t in tables {
        let chars: Vec<char> = t.chars().collect();
        for c in chars.chunks(JAVA_PIECE) {
            let s: String = c.iter().collect();
            pieces.push(quoted(&s, |c| {
                if c > 0xffff {
                    // A surrogate pair, as Java writes characters beyond the BMP.
                    let v = c - 0x10000;
                    format!(
                        "\\u{:04x}\\u{:04x}",
                        0xd800 + (v >> 10),
                        0xdc00 + (v & 0x3ff)
                    )
                } else {
                    format!("\\u{c:04x}")
                }
            }));
        }
        // An empty piece separates tables.
        pieces.push("\"\"".to_owned());
    }
    pieces.pop();
    format!("p5.P5.describe(new String[] {{{}}})", pieces.join(", "))
}

fn java(text: &str, tables: &[String]) -> Option<String> {
    let mut parser = tree_sitter::Parser::new();
    parser.set_language(&Lang::Java.grammar()).ok()?;
    let tree = parser.parse(text, None)?;
    let root = tree.root_node();
    let call = java_call(tables);
    let mut inserts: Vec<(usize, String)> = Vec::new();
    let mut c = root.walk();
    for decl in root.named_children(&mut c) {
        let Some(body) = decl.child_by_field_name("body") else {
            continue;
        };
        let at = match decl.kind() {
            "class_declaration" | "record_declaration" => Some(body.start_byte() + 1),
            "interface_declaration" => Some(body.start_byte() + 1),
            // After the constants: the `;` that opens the body declarations.
            "enum_declaration" => {
                let mut bc = body.walk();
                let decls = body
                    .named_children(&mut bc)
                    .find(|n| n.kind() == "enum_body_declarations");
                decls.map(|d| d.start_byte() + 1)
            }
            _ => None,
        };
        let Some(at) = at else { continue };
        let text = if decl.kind() == "interface_declaration" {
            format!(" int P5_SENSOR_TABLE = {call};")
        } else {
            format!(" static {{ {call}; }}")
        };
        inserts.push((at, text));
    }
    if inserts.is_empty() {
        return None;
    }
    let mut out = text.to_owned();
    for (at, s) in inserts.into_iter().rev() {
        out.insert_str(at, &s);
    }
    Some(out)
}

/// Removes every registration call beginning with one of the `(start, closing)` pairs: from
/// `start` to the call's `)` and the `closing` text right after it (the string literals inside
/// are scanned with their escapes, so a quote in a table cannot end the call early). A start
/// beginning with a line feed keeps it.
fn remove_calls<'a>(text: &'a str, forms: &[(&str, &str)]) -> Cow<'a, str> {
    let mut out = Cow::Borrowed(text);
    for (start, closing) in forms {
        let mut from = 0;
        while let Some(i) = out[from..].find(start).map(|i| i + from) {
            let Some(mut end) = call_end(&out, i + start.len() - 1) else {
                break;
            };
            if out[end..].starts_with(closing) {
                end += closing.len();
            }
            let keep = usize::from(start.starts_with('\n'));
            let mut s = out.into_owned();
            s.replace_range(i + keep..end, "");
            from = i + keep;
            out = Cow::Owned(s);
        }
    }
    out
}

/// The end (after its `)`) of a registration call whose first string literal opens at `open`.
fn call_end(s: &str, open: usize) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = open;
    let mut depth = 1; // inside `describe(`
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests;
