//! What a language engine produces: planned sensors (kind, enclosing function, span) and the
//! problems it met, before ids are assigned.
//!
//! Engines record sensors in document order; [`Ledger`] then numbers them per (function,
//! kind) and derives their ids, so ordinals — and therefore ids — depend only on the order of
//! sensors inside one function. A sensor already present in the input (re-instrumentation)
//! keeps the id written in the text and still takes its ordinal slot.

use crate::sensor_id;
use std::collections::HashMap;

/// Sensor kinds, as named in the manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Enter/exit of a function body.
    Function,
    /// A call site.
    Call,
    /// A communication call routed through the runtime's wrappers.
    Comm,
    /// A named region.
    Region,
    /// A statement inside a region.
    Statement,
}

impl Kind {
    /// The manifest name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Function => "function",
            Kind::Call => "call",
            Kind::Comm => "comm",
            Kind::Region => "region",
            Kind::Statement => "statement",
        }
    }
}

/// 1-based line/column span; `end_column` is one past the last character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// First line.
    pub line: u32,
    /// First column.
    pub column: u32,
    /// Last line.
    pub end_line: u32,
    /// Column after the end.
    pub end_column: u32,
}

impl Span {
    /// The span of a tree-sitter node.
    pub fn of(node: tree_sitter::Node<'_>) -> Span {
        let (s, e) = (node.start_position(), node.end_position());
        let n = |x: usize| u32::try_from(x + 1).unwrap_or(u32::MAX);
        Span {
            line: n(s.row),
            column: n(s.column),
            end_line: n(e.row),
            end_column: n(e.column),
        }
    }
}

/// One sensor with its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sensor {
    /// Stable id.
    pub id: u64,
    /// Kind.
    pub kind: Kind,
    /// Enclosing function (qualified), or empty.
    pub function: String,
    /// Display name: function, callee or region name.
    pub name: String,
    /// Source span covered.
    pub span: Span,
    /// False if the sensor was already in the input (re-instrumentation).
    pub inserted: bool,
}

/// Something the engine could not instrument, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
    /// What happened, lowercase.
    pub message: String,
}

impl Problem {
    /// A problem located at `node`.
    pub fn at(node: tree_sitter::Node<'_>, message: impl Into<String>) -> Problem {
        let s = Span::of(node);
        Problem {
            line: s.line,
            column: s.column,
            message: message.into(),
        }
    }
}

/// Numbers sensors per (function, kind) and derives their ids.
#[derive(Debug)]
pub struct Ledger<'p> {
    path: &'p str,
    counters: HashMap<(String, Kind), u32>,
    /// Sensors in document order.
    pub sensors: Vec<Sensor>,
}

impl<'p> Ledger<'p> {
    /// A ledger for the file at relative path `path`.
    pub fn new(path: &'p str) -> Self {
        Ledger {
            path,
            counters: HashMap::new(),
            sensors: Vec::new(),
        }
    }

    /// Records a sensor and returns its id: `existing` if the text already carries one,
    /// otherwise the derived id.
    pub fn add(
        &mut self,
        kind: Kind,
        function: &str,
        name: &str,
        span: Span,
        existing: Option<u64>,
    ) -> u64 {
        let slot = self
            .counters
            .entry((function.to_owned(), kind))
            .or_insert(0);
        let ordinal = *slot;
        *slot += 1;
        let id = existing.unwrap_or_else(|| sensor_id::derive(self.path, function, kind, ordinal));
        self.sensors.push(Sensor {
            id,
            kind,
            function: function.to_owned(),
            name: name.to_owned(),
            span,
            inserted: existing.is_none(),
        });
        id
    }
}

/// Parses a sensor-id literal as the engines write it (`0x…`, optionally with a `ULL`, `u64`
/// or `L` suffix).
pub fn parse_literal(s: &str) -> Option<u64> {
    let s = s.trim();
    let s = s
        .trim_end_matches(['U', 'L', 'u', 'l'])
        .trim_end_matches("u64")
        .trim_end_matches('_');
    p5_wire::manifest::parse_id(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ledger_numbers_per_function_and_kind() {
        let mut l = Ledger::new("a.c");
        let s = Span {
            line: 1,
            column: 1,
            end_line: 1,
            end_column: 2,
        };
        let a = l.add(Kind::Comm, "f", "send", s, None);
        let b = l.add(Kind::Comm, "f", "recv", s, None);
        let c = l.add(Kind::Comm, "g", "send", s, None);
        assert_eq!(a, sensor_id::derive("a.c", "f", Kind::Comm, 0));
        assert_eq!(b, sensor_id::derive("a.c", "f", Kind::Comm, 1));
        assert_eq!(c, sensor_id::derive("a.c", "g", Kind::Comm, 0));
        assert_eq!(l.add(Kind::Comm, "g", "x", s, Some(7)), 7);
        assert!(!l.sensors[3].inserted);
    }

    #[test]
    fn literals_parse_with_suffixes() {
        assert_eq!(parse_literal("0x00000000000000ffULL"), Some(255));
        assert_eq!(parse_literal("0x10L"), Some(16));
        assert_eq!(parse_literal("0x10u64"), Some(16));
        assert_eq!(parse_literal("0x10"), Some(16));
        assert_eq!(parse_literal("nope"), None);
    }
}
