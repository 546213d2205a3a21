//! Sensor tables: how an instrumented file describes its own sensors, so a recording names
//! every sensor and finds its source without a manifest.
//!
//! `p5-instrument` embeds one table per instrumented file in the file itself (a string
//! literal registered at start-up: `p5_describe` in C and C++, `p5_runtime::describe` in
//! Rust, `p5.describe` in Python, `p5.P5.describe` in Java). The runtime sends each table it
//! was given once per process, as the body of a `Sensors` frame ([`crate::data::Sensors`]);
//! the log server stores it like any data frame and `p5 merge` takes sensor names, kinds and
//! locations from it, and the source text from `<root>/sources/<sha256>` (the copy the
//! instrumenter wrote beside its manifest). Specified in `docs/manifest.md`.
//!
//! The table is UTF-8 text, one record per line, fields separated by tabs:
//!
//! ```text
//! p5-sensors <TAB> 1 <TAB> root <TAB> file <TAB> language <TAB> sha256
//! id <TAB> kind <TAB> line <TAB> column <TAB> end_line <TAB> end_column <TAB> function <TAB> name
//! ...
//! ```
//!
//! `root` is the absolute directory holding `p5-manifest.json` and `sources/`, `file` the
//! path relative to the instrumented source root, `id` 16 hex digits, `kind` one of
//! `function call comm region statement`. In the text fields `\` is written `\\`, a tab `\t`,
//! a line feed `\n` and a carriage return `\r`. A runtime may split a long table into several
//! frames: each part repeats the first line.

use crate::manifest::{Sensor, format_id, parse_id};

/// First field of a table's first line.
pub const MAGIC: &str = "p5-sensors";
/// Table format version written by this implementation.
pub const VERSION: u32 = 1;
/// Sensor kinds a table may name.
pub const KINDS: &[&str] = &["function", "call", "comm", "region", "statement"];

/// One file's sensor table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// Directory holding `p5-manifest.json` and `sources/` (absolute, as instrumented).
    pub root: String,
    /// Source path relative to the instrumented root, `/`-separated.
    pub file: String,
    /// `c`, `cpp`, `rust`, `python` or `java`.
    pub language: String,
    /// SHA-256 (hex) of the original text: its copy is `root/sources/<sha256>`.
    pub sha256: String,
    /// The file's sensors (`language` and `file` as above).
    pub sensors: Vec<Sensor>,
}

/// Why a table does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// The first line is not `p5-sensors <TAB> 1 <TAB> …` with six fields.
    #[error("not a p5 sensor table (first line {0:?})")]
    Header(String),
    /// A version this implementation does not read.
    #[error("sensor table version {0} is not supported (this reads version 1)")]
    Version(String),
    /// A sensor line is malformed.
    #[error("sensor table line {line}: {why}")]
    Line {
        /// 1-based line number within the table.
        line: usize,
        /// What is wrong.
        why: &'static str,
    },
}

/// Escapes a text field: `\` `\t` `\n` `\r`.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

/// Undoes [`escape`]; an unknown escape keeps its character.
pub fn unescape(s: &str) -> String {
    if !s.contains('\\') {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some(o) => out.push(o),
            None => out.push('\\'),
        }
    }
    out
}

impl Table {
    /// The table's first line (without its line feed).
    pub fn header_line(&self) -> String {
        format!(
            "{MAGIC}\t{VERSION}\t{}\t{}\t{}\t{}",
            escape(&self.root),
            escape(&self.file),
            escape(&self.language),
            escape(&self.sha256)
        )
    }

    /// The table as text.
    pub fn to_text(&self) -> String {
        let mut out = self.header_line();
        out.push('\n');
        for s in &self.sensors {
            out.push_str(&sensor_line(s));
            out.push('\n');
        }
        out
    }

    /// Parses a table (or one part of a split table).
    pub fn parse(text: &str) -> Result<Table, TableError> {
        let mut lines = text.split('\n');
        let first = lines.next().unwrap_or_default();
        let f: Vec<&str> = first.split('\t').collect();
        if f.len() != 6 || f[0] != MAGIC {
            return Err(TableError::Header(first.chars().take(60).collect()));
        }
        if f[1] != "1" {
            return Err(TableError::Version(f[1].chars().take(20).collect()));
        }
        let mut t = Table {
            root: unescape(f[2]),
            file: unescape(f[3]),
            language: unescape(f[4]),
            sha256: unescape(f[5]),
            sensors: Vec::new(),
        };
        for (i, l) in lines.enumerate() {
            if l.is_empty() {
                continue;
            }
            let s = parse_sensor(l, &t).map_err(|why| TableError::Line { line: i + 2, why })?;
            t.sensors.push(s);
        }
        Ok(t)
    }

    /// The table cut into texts of at most about `max` bytes each, every part starting with
    /// the header line (a single sensor line longer than `max` still makes its own part).
    pub fn parts(&self, max: usize) -> Vec<String> {
        let head = self.header_line();
        let mut parts = Vec::new();
        let mut cur = format!("{head}\n");
        let mut n = 0;
        for s in &self.sensors {
            let l = sensor_line(s);
            if n > 0 && cur.len() + l.len() + 1 > max {
                parts.push(std::mem::replace(&mut cur, format!("{head}\n")));
                n = 0;
            }
            cur.push_str(&l);
            cur.push('\n');
            n += 1;
        }
        parts.push(cur);
        parts
    }
}

fn sensor_line(s: &Sensor) -> String {
    let id = parse_id(&s.id).map_or_else(|| s.id.clone(), |v| format!("{v:016x}"));
    format!(
        "{id}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
        escape(&s.kind),
        s.line,
        s.column,
        s.end_line,
        s.end_column,
        escape(&s.function),
        escape(&s.name)
    )
}

fn parse_sensor(l: &str, t: &Table) -> Result<Sensor, &'static str> {
    let f: Vec<&str> = l.split('\t').collect();
    if f.len() != 8 {
        return Err("expected 8 tab-separated fields");
    }
    if f[0].len() != 16 {
        return Err("the id is not 16 hex digits");
    }
    let id = u64::from_str_radix(f[0], 16).map_err(|_| "the id is not 16 hex digits")?;
    let kind = unescape(f[1]);
    if !KINDS.contains(&kind.as_str()) {
        return Err("unknown sensor kind");
    }
    let num = |s: &str| {
        s.parse::<u32>()
            .map_err(|_| "a line or column is not a number")
    };
    Ok(Sensor {
        id: format_id(id),
        kind,
        language: t.language.clone(),
        file: t.file.clone(),
        function: unescape(f[6]),
        name: unescape(f[7]),
        line: num(f[2])?,
        column: num(f[3])?,
        end_line: num(f[4])?,
        end_column: num(f[5])?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let s = |id: u64, name: &str| Sensor {
            id: format_id(id),
            kind: "function".into(),
            language: "c".into(),
            file: "src/a b.c".into(),
            function: name.into(),
            name: name.into(),
            line: 3,
            column: 1,
            end_line: 9,
            end_column: 2,
        };
        Table {
            root: "/tmp/out\twith tab\\".into(),
            file: "src/a b.c".into(),
            language: "c".into(),
            sha256: "ab".repeat(32),
            sensors: vec![s(1, "main"), s(u64::MAX, "operator<<\n"), s(7, "")],
        }
    }

    #[test]
    fn tables_round_trip_through_text_and_parts() {
        let t = table();
        assert_eq!(Table::parse(&t.to_text()).unwrap(), t);
        let parts = t.parts(120);
        assert!(parts.len() > 1, "{parts:?}");
        let mut all = Vec::new();
        for p in &parts {
            let q = Table::parse(p).unwrap();
            assert_eq!((&q.root, &q.file), (&t.root, &t.file));
            all.extend(q.sensors);
        }
        assert_eq!(all, t.sensors);
    }

    #[test]
    fn bad_tables_say_why() {
        assert!(matches!(Table::parse("hello"), Err(TableError::Header(_))));
        assert!(matches!(
            Table::parse("p5-sensors\t2\ta\tb\tc\td"),
            Err(TableError::Version(_))
        ));
        let head = "p5-sensors\t1\t/r\tf.c\tc\tsha\n";
        for (bad, why) in [
            ("0000000000000001\tfunction\t1\t1\t1\t1\tf", "expected 8"),
            ("1\tfunction\t1\t1\t1\t1\tf\tf", "16 hex"),
            ("000000000000000g\tfunction\t1\t1\t1\t1\tf\tf", "16 hex"),
            ("0000000000000001\tbogus\t1\t1\t1\t1\tf\tf", "kind"),
            ("0000000000000001\tcall\tx\t1\t1\t1\tf\tf", "number"),
        ] {
            let e = Table::parse(&format!("{head}{bad}\n")).unwrap_err();
            assert!(e.to_string().contains(why), "{e}");
            assert!(e.to_string().contains("line 2"), "{e}");
        }
    }
}
