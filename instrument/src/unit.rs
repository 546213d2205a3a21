//! Instrumenting one file: parse, run the language engine, apply its insertions.
//!
//! The engines share [`Unit`]: the text, the modes, the selection, a [`Ledger`] of sensors,
//! the [`Edits`] and the problems met. A file tree-sitter cannot fully parse is still
//! instrumented outside its ERROR regions; each region is reported, and a function containing
//! one gets no sensors at all (its braces may not be what they seem).
//!
//! Large C and C++ files are parsed in chunks on all cores, each walked as soon as it is
//! parsed. A cut follows a line that is exactly `}` outside every `#if` block and block
//! comment. A chunk keeps the syntax errors inside its items (a macro tree-sitter cannot read
//! stays in its chunk); only an error at a chunk's edge, where a wrong cut shows, sends the
//! file to the one-piece parse. Error recovery inside a chunk can still differ from the
//! one-piece parse's (on the SQLite amalgamation the instrumented text is the same either way).

use crate::edit::Edits;
use crate::lang::Lang;
use crate::select::Selection;
use crate::sensor::{Ledger, Problem, Sensor};
use crate::{c, java, python, rust};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use tree_sitter::{Node, ParseOptions, ParseState, Parser, Point, Range, Tree};

/// Files at least this large (C and C++) are parsed in chunks on several threads.
const CHUNK_MIN: usize = 1 << 20;
/// Smallest chunk worth parsing on its own.
const CHUNK_BYTES: usize = 256 << 10;

/// Which automatic sensors to insert (CoSMoS Fig. 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Modes {
    /// Enter/exit sensors on every function body.
    pub functions: bool,
    /// A sensor around every call site.
    pub calls: bool,
    /// Communication calls routed through the runtime's wrappers.
    pub comm: bool,
}

impl Default for Modes {
    fn default() -> Self {
        Modes {
            functions: true,
            calls: false,
            comm: true,
        }
    }
}

/// The result of instrumenting one file.
#[derive(Debug)]
pub struct Outcome {
    /// The instrumented text (the input itself if nothing was inserted).
    pub text: String,
    /// Every sensor, inserted now or found already present.
    pub sensors: Vec<Sensor>,
    /// What could not be instrumented.
    pub problems: Vec<Problem>,
}

/// Shared state of one file's instrumentation.
#[derive(Debug)]
pub struct Unit<'a> {
    /// Language.
    pub lang: Lang,
    /// Relative path.
    pub path: &'a str,
    /// Original text.
    pub src: &'a str,
    /// Modes.
    pub modes: Modes,
    /// Selection.
    pub selection: &'a Selection,
    /// Whether the file's functions are selected for automatic sensors.
    pub file_selected: bool,
    /// Sensors so far.
    pub ledger: Ledger<'a>,
    /// Insertions so far.
    pub edits: Edits,
    /// Problems so far.
    pub problems: Vec<Problem>,
    /// Which of the selection's line regions for this file are placed.
    pub regions_used: Vec<bool>,
    /// The selection's line regions for this file.
    pub line_regions: Vec<crate::select::LineRegion>,
    /// Regions the parser could not read, reported in [`Unit::settle_unreadable`] only where
    /// they cost a sensor.
    pub unreadable: Vec<Unreadable>,
    /// Whether engines may skip subtrees they can tell hold nothing to instrument (off only in
    /// tests that check the shortcut changes nothing).
    pub prune: bool,
}

impl<'a> Unit<'a> {
    /// A unit with nothing done yet; `prune` as in [`Unit::prune`].
    pub fn new(
        lang: Lang,
        path: &'a str,
        src: &'a str,
        modes: Modes,
        selection: &'a Selection,
        prune: bool,
    ) -> Self {
        let line_regions: Vec<_> = selection.regions_in(path).cloned().collect();
        Unit {
            lang,
            path,
            src,
            modes,
            selection,
            file_selected: selection.file(path),
            ledger: Ledger::new(path),
            edits: Edits::new(),
            problems: Vec::new(),
            regions_used: vec![false; line_regions.len()],
            unreadable: Vec::new(),
            line_regions,
            prune,
        }
    }

    /// Reports an ERROR or MISSING node. Returns true if the traversal must not descend
    /// (a MISSING token); an ERROR node is descended into, because tree-sitter's error
    /// recovery often wraps whole stretches of good code (even the root, for a large file
    /// with one macro it cannot read) in one ERROR node: the definitions inside that parsed
    /// without error are complete and get their sensors, the stray tokens stay untouched.
    pub fn check_error(&mut self, node: Node<'_>) -> bool {
        if node.is_error() && node.parent().is_none() {
            // The whole file as one ERROR node (tree-sitter's recovery from one unreadable
            // line in a large file): its definitions are walked, nothing is lost by itself.
            return false;
        }
        if node.is_error() {
            // One stray word is almost always an unknown macro (`SQLITE_API int f(…)`,
            // `EXPORT void g(…)`): nothing around it is lost, so it is not worth a report.
            let t = self.src.get(node.byte_range()).unwrap_or("").trim();
            if !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return false;
            }
            let mut c = node.walk();
            let stray = node
                .children(&mut c)
                .find(|n| n.child_count() == 0)
                .unwrap_or(node);
            let (a, b) = (node.start_position().row + 1, node.end_position().row + 1);
            self.unreadable.push(Unreadable {
                lines: (a as u32, b as u32),
                braces: t.contains('{'),
                problem: Problem::at(
                    stray,
                    format!(
                        "syntax not understood near here (error region lines {a}-{b}); only the \
                         complete definitions inside it are instrumented"
                    ),
                ),
            });
            false
        } else if node.is_missing() {
            let line = node.start_position().row as u32 + 1;
            self.unreadable.push(Unreadable {
                lines: (line, line),
                braces: false,
                problem: Problem::at(
                    node,
                    format!("missing {}; region left untouched", node.kind()),
                ),
            });
            true
        } else {
            false
        }
    }

    /// Turns the unreadable regions into problems where a sensor may be lost: everywhere in
    /// Rust, Python and Java; in C and C++ only where the region holds a `{` (a declaration
    /// such as `SQLITE_API int f(sqlite3*);` loses nothing) and, without `--calls` (whose
    /// sensors inside the region are lost), one of its lines with a `{` lies outside every
    /// function that got its sensor.
    pub fn settle_unreadable(&mut self) {
        if self.unreadable.is_empty() {
            return;
        }
        let c = matches!(self.lang, Lang::C | Lang::Cpp);
        let mut functions: Vec<(u32, u32)> = self
            .ledger
            .sensors
            .iter()
            .filter(|s| s.kind == crate::sensor::Kind::Function)
            .map(|s| (s.span.line, s.span.end_line))
            .collect();
        functions.sort_unstable();
        // Lines (1-based) holding a `{` outside every function that got its sensor.
        let mut open_lines = Vec::new();
        let mut f = 0;
        for (i, line) in self.src.lines().enumerate() {
            let n = i as u32 + 1;
            while functions.get(f).is_some_and(|&(_, end)| end < n) {
                f += 1;
            }
            let covered = functions[f..]
                .iter()
                .take_while(|&&(a, _)| a <= n)
                .any(|&(_, b)| n <= b);
            if !covered && line.contains('{') {
                open_lines.push(n);
            }
        }
        for r in std::mem::take(&mut self.unreadable) {
            let inside = || {
                functions
                    .iter()
                    .any(|&(a, b)| a <= r.lines.0 && r.lines.1 <= b)
            };
            let lost_brace = || {
                let k = open_lines.partition_point(|&l| l < r.lines.0);
                open_lines.get(k).is_some_and(|&l| l <= r.lines.1)
            };
            if c && (!r.braces || (!self.modes.calls && (inside() || !lost_brace()))) {
                continue;
            }
            self.problems.push(r.problem);
        }
    }

    /// The literal of `id` in this file's language.
    pub fn lit(&self, id: u64) -> String {
        self.lang.id_literal(id)
    }

    /// Whether a function is selected.
    pub fn selected(&self, qualified: &str, bare: &str) -> bool {
        self.file_selected && self.selection.function(qualified, bare)
    }

    /// A selected function's pinning (throttling).
    pub fn pin(&self, qualified: &str, bare: &str) -> crate::select::Pin {
        self.selection.pin(qualified, bare)
    }
}

/// A region the parser could not read (an ERROR or MISSING node).
#[derive(Debug)]
pub struct Unreadable {
    /// First and last line (1-based).
    pub lines: (u32, u32),
    /// Whether its text holds a `{` (it may hide a definition's body).
    pub braces: bool,
    /// The report, if it is kept.
    pub problem: Problem,
}

/// Instruments `src`, the text of the file at relative path `path`.
pub fn instrument(
    lang: Lang,
    path: &str,
    src: &str,
    modes: Modes,
    selection: &Selection,
) -> Outcome {
    instrument_with(lang, path, src, modes, selection, true)
}

/// [`instrument`] without its shortcuts (chunked parsing of large C/C++ files, the C engine's
/// pruned walk), for tests that check the shortcuts change nothing.
#[doc(hidden)]
pub fn instrument_plain(
    lang: Lang,
    path: &str,
    src: &str,
    modes: Modes,
    selection: &Selection,
) -> Outcome {
    instrument_with(lang, path, src, modes, selection, false)
}

fn instrument_with(
    lang: Lang,
    path: &str,
    src: &str,
    modes: Modes,
    selection: &Selection,
    fast: bool,
) -> Outcome {
    let unchanged = |problems| Outcome {
        text: src.to_owned(),
        sensors: Vec::new(),
        problems,
    };
    let new_unit = || Unit::new(lang, path, src, modes, selection, fast);
    let mut unit = new_unit();
    let trees = match chunked(&mut unit, fast) {
        Some(trees) => trees,
        None => {
            let tree = match parser(lang).and_then(|mut p| {
                p.parse(src, None)
                    .ok_or("parser gave up; file left untouched")
            }) {
                Ok(t) => t,
                Err(message) => {
                    return unchanged(vec![Problem {
                        line: 1,
                        column: 1,
                        message: message.into(),
                    }]);
                }
            };
            unit = new_unit();
            let root = tree.root_node();
            match lang {
                Lang::C | Lang::Cpp => c::instrument(&mut unit, &[root]),
                Lang::Rust => rust::instrument(&mut unit, root),
                Lang::Python => python::instrument(&mut unit, root),
                Lang::Java => java::instrument(&mut unit, root),
            }
            vec![tree]
        }
    };
    unit.settle_unreadable();
    for (i, r) in unit.line_regions.iter().enumerate() {
        if !unit.regions_used[i] {
            unit.problems.push(Problem {
                line: r.lines[0],
                column: 1,
                message: format!(
                    "region {:?}: no whole statements of one block inside lines {}-{}",
                    r.name, r.lines[0], r.lines[1]
                ),
            });
        }
    }
    let Unit {
        ledger,
        edits,
        mut problems,
        ..
    } = unit;
    if trees.len() > 1 {
        // Freeing a multi-megabyte syntax tree takes a tenth of the run: do it off the
        // caller's path (only large, chunk-parsed files get here).
        std::thread::spawn(move || drop(trees));
    } else {
        drop(trees);
    }
    let text = if edits.is_empty() {
        src.to_owned()
    } else {
        match edits.apply(src) {
            Some(t) => t,
            None => {
                problems.push(Problem {
                    line: 1,
                    column: 1,
                    message: "internal: an insertion would break a line; file left untouched"
                        .into(),
                });
                return Outcome {
                    text: src.to_owned(),
                    sensors: Vec::new(),
                    problems,
                };
            }
        }
    };
    problems.sort_by_key(|p| (p.line, p.column));
    let mut sensors = ledger.sensors;
    sensors.sort_by_key(|s| (s.span.line, s.span.column, s.kind.name(), s.id));
    Outcome {
        text,
        sensors,
        problems,
    }
}

fn parser(lang: Lang) -> Result<Parser, &'static str> {
    let mut p = Parser::new();
    p.set_language(&lang.grammar())
        .map_err(|_| "grammar version not supported by this tree-sitter")?;
    Ok(p)
}

/// Parses and instruments a large C/C++ file in chunks; `None` (with `u` in an unspecified
/// state) if the file is small or the chunks do not parse cleanly: the caller then parses the
/// whole file in one piece with a fresh unit, so errors are reported exactly as for a small
/// file. Chunks end after a line that is exactly `}` (the end of a top-level definition);
/// worker threads parse them with tree-sitter's included ranges, so node offsets stay
/// absolute, and this thread walks each tree, in document order, as soon as it is ready. If a
/// chunk boundary was not at file level after all (inside an `#if`, a comment, a string),
/// that chunk has a syntax error and the file takes the one-piece path; so does a file with
/// real syntax errors, and as the first error stops every chunk's parse, that costs little.
fn chunked(u: &mut Unit<'_>, fast: bool) -> Option<Vec<Tree>> {
    let (lang, src) = (u.lang, u.src);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    if !(fast && matches!(lang, Lang::C | Lang::Cpp) && src.len() >= CHUNK_MIN && threads > 1) {
        return None;
    }
    // Several chunks per thread, so walking the first overlaps with parsing the rest.
    let bounds = chunk_bounds(src, (src.len() / CHUNK_BYTES).clamp(1, 4 * threads));
    if bounds.len() <= 2 {
        return None;
    }
    let points = points_at(src, &bounds);
    let ranges: Vec<Range> = (1..bounds.len())
        .map(|k| Range {
            start_byte: bounds[k - 1],
            end_byte: bounds[k],
            start_point: points[k - 1],
            end_point: points[k],
        })
        .collect();
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel();
        for _ in 0..threads {
            let tx = tx.clone();
            let (ranges, next, stop) = (&ranges, &next, &stop);
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&range) = ranges.get(k) else {
                        break;
                    };
                    if tx.send((k, parse_range(lang, src, range, stop))).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut walker = c::Walker::new(u);
        let mut ready: Vec<Option<Tree>> = ranges.iter().map(|_| None).collect();
        let mut trees = Vec::with_capacity(ranges.len());
        for (k, tree) in rx {
            let Some(tree) = tree else {
                stop.store(true, Ordering::Relaxed);
                return None;
            };
            ready[k] = Some(tree);
            while let Some(slot) = ready.get_mut(trees.len())
                && let Some(tree) = slot.take()
            {
                walker.walk(u, tree.root_node());
                trees.push(tree);
            }
        }
        if trees.len() < ranges.len() {
            return None;
        }
        let roots: Vec<Node<'_>> = trees.iter().map(|t| t.root_node()).collect();
        walker.finish(u, &roots);
        Some(trees)
    })
}

/// The row and column of each of the ascending byte offsets `bytes`.
fn points_at(src: &str, bytes: &[usize]) -> Vec<Point> {
    let (mut row, mut line_start, mut from) = (0, 0, 0);
    bytes
        .iter()
        .map(|&b| {
            for (i, _) in src[from..b].match_indices('\n') {
                row += 1;
                line_start = from + i + 1;
            }
            from = b;
            Point {
                row,
                column: b - line_start,
            }
        })
        .collect()
}

/// Parses one chunk; `None` if `stop` is set or if the chunk's edges are not clean
/// ([`clean_edges`]: its boundary was not at file level), which also sets `stop` so the
/// other chunks' parses end early. Syntax errors inside the chunk are kept: they are where
/// they are, as in the one-piece parse.
fn parse_range(lang: Lang, src: &str, range: Range, stop: &AtomicBool) -> Option<Tree> {
    let mut p = parser(lang).ok()?;
    p.set_included_ranges(&[range]).ok()?;
    let bytes = src.as_bytes();
    let mut progress = |_: &ParseState| {
        if stop.load(Ordering::Relaxed) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    };
    let tree = p
        .parse_with_options(
            &mut |i, _| bytes.get(i..).unwrap_or_default(),
            None,
            Some(ParseOptions::new().progress_callback(&mut progress)),
        )
        .filter(|t| clean_edges(t.root_node(), range.start_byte == 0));
    if tree.is_none() {
        stop.store(true, Ordering::Relaxed);
    }
    tree
}

/// True if a chunk's tree can stand for its part of the one-piece parse: without errors, or
/// with errors that do not touch its edges — its last top-level item ends with the real `}`
/// it was cut after ([`ends_whole`]), and unless it is the file's first chunk, its first item
/// is not an error. A boundary inside an `#if`, a comment or a string leaves an error at an
/// edge; errors elsewhere (a macro tree-sitter cannot read) are the one-piece parse's too.
/// The root itself may be an ERROR node (tree-sitter's recovery wraps a chunk with many
/// unreadable lines so): its children are the chunk's items all the same.
/// (`realcode_sqlite_amalgamation` checks that both give the same output.)
fn clean_edges(root: Node<'_>, first_chunk: bool) -> bool {
    if !root.has_error() {
        return true;
    }
    let mut c = root.walk();
    let items: Vec<Node<'_>> = root.children(&mut c).collect();
    let (Some(first), Some(last)) = (items.first(), items.last()) else {
        return false;
    };
    let bad = |n: &Node<'_>| n.is_error() || n.is_missing();
    (first_chunk || !bad(first)) && !last.is_missing() && (!last.has_error() || ends_whole(*last))
}

/// The last item of a chunk ends with a real `}` (the top-level `}` the chunk was cut after),
/// not a token recovery made up: a definition tree-sitter could not read whole (a macro in
/// a declaration) is an error the one-piece parse has too, but a boundary inside an `#if`,
/// a comment or a string ends the chunk on something else or on a missing token.
fn ends_whole(n: Node<'_>) -> bool {
    let mut last = n;
    while let Some(c) = last.child(last.child_count().saturating_sub(1)) {
        last = c;
    }
    !last.is_missing() && !last.is_error() && last.kind() == "}"
}

/// Chunk boundaries (including 0 and `src.len()`), about `n` chunks: each cut follows a line
/// that is exactly `}` (the end of a top-level definition) outside any `#if` block and any
/// block comment — a cut inside a long `#if` (SQLite wraps thousands of lines in them) would
/// leave both chunks with an unterminated conditional.
fn chunk_bounds(src: &str, n: usize) -> Vec<usize> {
    let cuts = file_level_cuts(src);
    let mut out = vec![0];
    let step = src.len() / n.max(1);
    for k in 1..n {
        let target = (k * step).max(out[out.len() - 1] + 1);
        let i = cuts.partition_point(|&c| c < target);
        if let Some(&cut) = cuts.get(i)
            && cut < src.len()
        {
            out.push(cut);
        }
    }
    out.dedup();
    out.push(src.len());
    out
}

/// Offsets just after each line that is exactly `}` at preprocessor depth 0 and outside a
/// block comment (a rough scan: strings are not tracked; a wrong guess only costs the file
/// its chunked parse, see [`clean_edges`]).
fn file_level_cuts(src: &str) -> Vec<usize> {
    let mut cuts = Vec::new();
    let (mut depth, mut in_comment, mut at) = (0usize, false, 0usize);
    for line in src.split_inclusive('\n') {
        let start = at;
        at += line.len();
        let text = line.trim_end_matches(['\n', '\r']);
        if !in_comment {
            let t = text.trim_start();
            if let Some(d) = t.strip_prefix('#') {
                let word = d.trim_start();
                if word.starts_with("if") {
                    depth += 1;
                } else if word.starts_with("endif") {
                    depth = depth.saturating_sub(1);
                }
            } else if text == "}" && depth == 0 && start > 0 {
                cuts.push(at);
            }
        }
        // Block comments opened and closed on this line (roughly).
        let mut rest = text;
        loop {
            if in_comment {
                match rest.find("*/") {
                    Some(i) => {
                        in_comment = false;
                        rest = &rest[i + 2..];
                    }
                    None => break,
                }
            } else {
                let (open, line_comment) = (rest.find("/*"), rest.find("//"));
                match open {
                    Some(i) if line_comment.is_none_or(|l| i < l) => {
                        in_comment = true;
                        rest = &rest[i + 2..];
                    }
                    _ => break,
                }
            }
        }
    }
    cuts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two equal halves of functions; with `trap`, a comment and an `#if 0` block holding
    /// `}` lines sit in the middle, where the two-chunk split looks for its boundary.
    fn big_c(trap: bool) -> String {
        let mut half = String::new();
        let mut i = 0;
        while half.len() < 3 * CHUNK_MIN / 4 {
            half.push_str(&format!(
                "/* f{i} — ü */\nint f{i}(int fd, char *b)\n{{\n    if (fd < 0)\n        return -1;\n    return (int)write(fd, b, {i});\n}}\n\n"
            ));
            i += 1;
        }
        let middle = if trap {
            "/*\nint fake(void) {\n}\n\nint fake2(void) {\n}\n\nint fake3(void) {\n}\n*/\n"
        } else {
            "\n"
        };
        format!(
            "#include <unistd.h>\n\n{half}{middle}{}",
            half.replace("int f", "int g")
        )
    }

    #[test]
    fn chunked_parsing_gives_the_same_output() {
        for trap in [false, true] {
            let src = big_c(trap);
            let all = Selection::all();
            let a = instrument_with(Lang::C, "big.c", &src, Modes::default(), &all, true);
            let b = instrument_with(Lang::C, "big.c", &src, Modes::default(), &all, false);
            assert!(a.problems.is_empty(), "{:?}", &a.problems[..1]);
            assert_eq!(a.sensors, b.sensors);
            assert!(a.text == b.text, "chunked output differs (trap: {trap})");
            assert!(a.sensors.len() > 10_000);
            if std::thread::available_parallelism().is_ok_and(|n| n.get() > 1) {
                let mut u = Unit::new(Lang::C, "big.c", &src, Modes::default(), &all, true);
                // The `}` lines in the comment and the `#if 0` block are not taken for
                // file-level ends: the file is cut elsewhere and still parses in chunks.
                let trees = chunked(&mut u, true).map_or(1, |t| t.len());
                assert!(trees > 1, "{trees} trees (trap: {trap})");
            }
        }
        let src = big_c(false);
        assert!(chunk_bounds(&src, 4).len() >= 4);
        assert!(chunk_bounds(&src, 4).windows(2).all(|w| w[0] < w[1]));
        let more = src.replace("int f", "int h").replace("write", "send");
        same_both_ways(
            Lang::C,
            "big.c",
            &format!("{src}\n{more}"),
            &Selection::all(),
        );
    }

    /// The fast path (chunked parse, pruned walk) and the plain one agree exactly: output,
    /// sensors (ids, order) and problems, in every mode.
    fn same_both_ways(lang: Lang, path: &str, src: &str, selection: &Selection) {
        for (functions, calls, comm) in [
            (true, false, true),
            (true, true, true),
            (false, false, true),
            (true, false, false),
        ] {
            let modes = Modes {
                functions,
                calls,
                comm,
            };
            let a = instrument_with(lang, path, src, modes, selection, true);
            let b = instrument_with(lang, path, src, modes, selection, false);
            assert!(a.text == b.text, "{path} {modes:?}: output differs");
            assert_eq!(a.sensors, b.sensors, "{path} {modes:?}");
            assert_eq!(a.problems, b.problems, "{path} {modes:?}");
        }
    }

    #[test]
    fn fast_path_matches_on_test_data() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data");
        let mut n = 0;
        for (dir, lang) in [("c", Lang::C), ("cpp", Lang::Cpp)] {
            for case in std::fs::read_dir(root.join(dir)).unwrap() {
                let case = case.unwrap().path();
                let select = case.join("select.toml");
                let selection = if select.exists() {
                    Selection::load(&select).unwrap()
                } else {
                    Selection::all()
                };
                for f in std::fs::read_dir(&case).unwrap() {
                    let f = f.unwrap().path();
                    let name = f.file_name().unwrap().to_string_lossy().into_owned();
                    if name.starts_with("input.") || name.starts_with("expected.") {
                        let src = std::fs::read_to_string(&f).unwrap();
                        same_both_ways(lang, &name.replace("expected", "input"), &src, &selection);
                        n += 1;
                    }
                }
            }
        }
        assert!(n > 20, "{n} files");
    }
}
