//! Walk hints, function names through declarators, where a `longjmp` lands.

use crate::{Lang, Modes, Selection, instrument};

#[test]
fn hints_find_every_communication_name() {
    for (name, _, wrapper) in super::COMM {
        let h = super::walker::walk_hints(name);
        assert!(h.len() == 1 && h[0] < 2, "{name}: {h:?}");
        assert_eq!(super::walker::walk_hints(wrapper), [h[0] + 3], "{wrapper}");
    }
    assert_eq!(super::walker::walk_hints("a{b}{"), [1, 4]);
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
    assert_eq!(super::function::setjmp_macros(src), ["TRY", "TRY2"]);
}
