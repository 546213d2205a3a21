//! The languages p5-instrument understands, chosen by file extension, and their tree-sitter
//! grammars.
//!
//! Extensions: `.c .h` → C, `.cc .cpp .cxx .hpp .hh .hxx` → C++, `.rs` → Rust, `.py` → Python,
//! `.java` → Java. A `.h` file is parsed as C: the C grammar accepts the C subset that headers
//! shared with C++ use; in a tree that also holds C++ sources, `.h` is parsed as C++
//! ([`Lang::from_path_in`]).

use std::path::Path;

/// A source language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lang {
    /// C (GCC and Clang dialects).
    C,
    /// C++.
    Cpp,
    /// Rust.
    Rust,
    /// Python 3.
    Python,
    /// Java.
    Java,
}

impl Lang {
    /// All languages.
    pub const ALL: [Lang; 5] = [Lang::C, Lang::Cpp, Lang::Rust, Lang::Python, Lang::Java];

    /// The language of `path`, by extension.
    pub fn from_path(path: &Path) -> Option<Lang> {
        let ext = path.extension()?.to_str()?;
        Some(match ext {
            "c" | "h" => Lang::C,
            "cc" | "cpp" | "cxx" | "c++" | "hpp" | "hh" | "hxx" => Lang::Cpp,
            "rs" => Lang::Rust,
            "py" => Lang::Python,
            "java" => Lang::Java,
            _ => return None,
        })
    }

    /// The language of `path` in a tree that contains C++ sources (`cpp_tree`): there a `.h`
    /// header is C++ too.
    pub fn from_path_in(path: &Path, cpp_tree: bool) -> Option<Lang> {
        match Lang::from_path(path)? {
            Lang::C if cpp_tree && path.extension().is_some_and(|e| e == "h") => Some(Lang::Cpp),
            l => Some(l),
        }
    }

    /// The manifest's language name.
    pub fn name(self) -> &'static str {
        match self {
            Lang::C => "c",
            Lang::Cpp => "cpp",
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Java => "java",
        }
    }

    /// The tree-sitter grammar.
    pub fn grammar(self) -> tree_sitter::Language {
        match self {
            Lang::C => tree_sitter_c::LANGUAGE.into(),
            Lang::Cpp => tree_sitter_cpp::LANGUAGE.into(),
            Lang::Rust => tree_sitter_rust::LANGUAGE.into(),
            Lang::Python => tree_sitter_python::LANGUAGE.into(),
            Lang::Java => tree_sitter_java::LANGUAGE.into(),
        }
    }

    /// How a sensor id is written as a literal in this language.
    pub fn id_literal(self, id: u64) -> String {
        match self {
            Lang::C | Lang::Cpp => format!("{id:#018x}ULL"),
            Lang::Rust | Lang::Python => format!("{id:#018x}"),
            Lang::Java => format!("{id:#018x}L"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_pick_languages() {
        assert_eq!(Lang::from_path(Path::new("a/b.c")), Some(Lang::C));
        assert_eq!(Lang::from_path(Path::new("x.hpp")), Some(Lang::Cpp));
        assert_eq!(Lang::from_path(Path::new("lib.rs")), Some(Lang::Rust));
        assert_eq!(Lang::from_path(Path::new("m.py")), Some(Lang::Python));
        assert_eq!(Lang::from_path(Path::new("A.java")), Some(Lang::Java));
        assert_eq!(Lang::from_path(Path::new("README")), None);
        assert_eq!(Lang::from_path_in(Path::new("a.h"), true), Some(Lang::Cpp));
        assert_eq!(Lang::from_path_in(Path::new("a.c"), true), Some(Lang::C));
        assert_eq!(Lang::C.id_literal(1), "0x0000000000000001ULL");
        assert_eq!(Lang::Java.id_literal(255), "0x00000000000000ffL");
    }
}
