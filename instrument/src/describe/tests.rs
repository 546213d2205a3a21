use super::*;

fn sensor(id: u64, name: &str) -> Sensor {
    Sensor {
        id: p5_wire::manifest::format_id(id),
        kind: "function".into(),
        language: "c".into(),
        file: "a.c".into(),
        function: name.into(),
        name: name.into(),
        line: 1,
        column: 1,
        end_line: 2,
        end_column: 2,
    }
}

fn tables() -> Vec<String> {
    vec![
        table(
            "/out \"q\" ??/ é 𝄞",
            "a.c",
            Lang::C,
            "ab",
            vec![sensor(1, "main"), sensor(2, "f\t\\")],
        ),
        table("/out", "b.h", Lang::C, "cd", vec![sensor(3, "g")]),
    ]
}

/// Every literal form reads back as the table it was made from.
fn round_trip(lang: Lang, text: &str) {
    let t = tables();
    let out = embed(lang, text, &t, "a.c").unwrap();
    assert_ne!(out, text);
    assert_eq!(strip(lang, &out), text, "{lang:?}:\n{out}");
    if matches!(lang, Lang::Python | Lang::Java) && !text.starts_with("import os, p5") {
        assert_eq!(out.lines().count(), text.lines().count(), "{out}");
    } else {
        assert!(out.starts_with(text));
    }
}

#[test]
fn registrations_strip_back_to_the_text() {
    round_trip(Lang::C, "int main(void) { return 0; }\n");
    round_trip(Lang::Cpp, "int main() { return 0; }\n");
    round_trip(Lang::Rust, "fn main() {}\n");
    round_trip(Lang::Python, "import p5\nx = 1\n");
    round_trip(Lang::Python, "import p5; x = 1\n");
    round_trip(
        Lang::Python,
        "\"\"\"d\"\"\"\nfrom __future__ import a; import p5\n",
    );
    round_trip(
        Lang::Python,
        "class A:\n    \"\"\"d\"\"\"; global p5; import p5\n",
    );
    round_trip(Lang::Python, "import os, p5\nx = 1\n");
    round_trip(Lang::Java, "class A { void f() {} }\nclass B {}\n");
    round_trip(Lang::Java, "interface I { default void f() {} }\n");
    round_trip(Lang::Java, "enum E { X, Y; void f() {} }\n");
}

#[test]
fn python_registers_on_the_import_line() {
    let t = vec!["p5-sensors\t1\t/r\ta.py\tpython\tab\n".to_owned()];
    let out = embed(
        Lang::Python,
        "\"\"\"doc\"\"\"\nimport p5; x = 1\ny = 2\n",
        &t,
        "k",
    )
    .unwrap();
    assert_eq!(
        out,
        "\"\"\"doc\"\"\"\nimport p5; p5.describe(\"p5-sensors\\t1\\t/r\\ta.py\\tpython\\tab\\n\"); x = 1\ny = 2\n"
    );
    let own = embed(Lang::Python, "import os, p5\n", &t, "k").unwrap();
    assert!(own.ends_with("\np5.describe(\"p5-sensors\\t1\\t/r\\ta.py\\tpython\\tab\\n\")\n"));
}

#[test]
fn c_symbols_differ_per_file_and_java_needs_a_type() {
    let t = tables();
    let a = embed(Lang::C, "", &t, "a.c").unwrap();
    let b = embed(Lang::C, "", &t, "b.c").unwrap();
    assert_ne!(a, b, "a unity build includes both");
    assert!(a.contains("\\?\\?/"), "trigraph escaped: {a}");
    assert_eq!(embed(Lang::Java, "// nothing\n", &t, "k"), None);
    assert_eq!(embed(Lang::C, "x\n", &[], "k").as_deref(), Some("x\n"));
}

#[test]
fn headers_and_their_includes() {
    assert!(is_header("src/x.h") && is_header("a.hpp") && !is_header("a.c"));
    let inc =
        quoted_includes("#include \"lua.h\"\n  # include \"sub/ltm.h\" // x\n#include <stdio.h>\n");
    assert_eq!(inc, ["lua.h", "ltm.h"]);
}

#[test]
fn crates_that_forbid_unsafe_code_are_recognised() {
    let d = tempfile::tempdir().unwrap();
    let k = d.path().join("k");
    std::fs::create_dir_all(k.join("src/net")).unwrap();
    std::fs::write(k.join("Cargo.toml"), "[package]\nname = \"k\"\n").unwrap();
    std::fs::write(k.join("src/lib.rs"), "//! doc\n#![deny(missing_docs)]\n").unwrap();
    assert!(!forbids_unsafe(&k.join("src/net/a.rs")));
    std::fs::write(
        k.join("src/lib.rs"),
        "//! doc\n#![forbid(missing_docs, unsafe_code)]\n",
    )
    .unwrap();
    assert!(forbids_unsafe(&k.join("src/net/a.rs")));
    assert!(!forbids_unsafe(&d.path().join("loose.rs")));
}
