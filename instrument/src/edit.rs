//! Text edits and the line-preservation guarantee.
//!
//! Engines insert strings at byte offsets of the original and, rarely, replace a short span
//! inside one line (a callee path). [`Edits::apply`] refuses any insertion containing a line
//! break and any replaced span that contains one, so every original line keeps its number and
//! compiler errors and click-back point at the user's own lines.
//! Insertions at the same offset are ordered: closers (e.g. `; })` ending a wrapped call)
//! before openers, inner closers before outer ones, openers in the order they were made.

/// A set of insertions into one text.
#[derive(Debug, Default)]
pub struct Edits {
    items: Vec<(usize, u8, i64, String)>,
    /// Replaced spans: (start, end, sequence number of the replacement text's item).
    spans: Vec<(usize, usize, i64)>,
    seq: i64,
}

impl Edits {
    /// No edits.
    pub fn new() -> Self {
        Self::default()
    }

    /// Inserts `text` at byte `at` (opening side: after earlier openers at the same offset).
    pub fn open(&mut self, at: usize, text: impl Into<String>) {
        self.seq += 1;
        self.items.push((at, 1, self.seq, text.into()));
    }

    /// Inserts `text` at byte `at` as a closer: before openers at the same offset, and before
    /// closers made earlier (which belong to enclosing constructs).
    pub fn close(&mut self, at: usize, text: impl Into<String>) {
        self.seq += 1;
        self.items.push((at, 0, -self.seq, text.into()));
    }

    /// Replaces `start..end` (within one line) with `text`; sorts as an opener at `start`.
    pub fn replace(&mut self, start: usize, end: usize, text: impl Into<String>) {
        self.open(start, text);
        self.spans.push((start, end, self.seq));
    }

    /// True if nothing is to be inserted.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Byte offset of the first insertion.
    pub fn first_offset(&self) -> Option<usize> {
        self.items.iter().map(|e| e.0).min()
    }

    /// Byte offset of the last insertion.
    pub fn last_offset(&self) -> Option<usize> {
        self.items.iter().map(|e| e.0).max()
    }

    /// Applies the insertions. Returns `None` if an insertion contains a line break or does
    /// not fall on a character boundary of `src` (an engine bug; the file is then left as is).
    pub fn apply(mut self, src: &str) -> Option<String> {
        self.items.sort_by_key(|e| (e.0, e.1, e.2));
        let extra: usize = self.items.iter().map(|e| e.3.len()).sum();
        let mut out = String::with_capacity(src.len() + extra);
        let mut pos = 0;
        let mut spans = self.spans;
        spans.sort_unstable();
        let mut spans = spans.into_iter().peekable();
        for (at, _, seq, text) in &self.items {
            if text.contains(['\n', '\r']) || !src.is_char_boundary(*at) || *at < pos {
                return None;
            }
            out.push_str(&src[pos..*at]);
            out.push_str(text);
            pos = *at;
            if spans.peek().is_some_and(|s| s.2 == *seq) {
                let (_, end, _) = spans.next()?;
                let cut = src.get(*at..end)?;
                if cut.contains(['\n', '\r']) {
                    return None;
                }
                pos = end;
            }
        }
        if spans.next().is_some() {
            return None;
        }
        out.push_str(&src[pos..]);
        Some(out)
    }
}

/// Number of lines of `text` as editors count them (a final line without `\n` counts).
pub fn line_count(text: &str) -> u32 {
    let n = text.bytes().filter(|&b| b == b'\n').count();
    let n = if text.is_empty() || text.ends_with('\n') {
        n
    } else {
        n + 1
    };
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_wraps_order_correctly() {
        let src = "g(x)";
        let mut e = Edits::new();
        e.open(0, "[");
        e.close(4, "]");
        e.open(0, "(");
        e.close(4, ")");
        assert_eq!(e.apply(src).as_deref(), Some("[(g(x))]"));
    }

    #[test]
    fn replacements_stay_on_their_line() {
        let mut e = Edits::new();
        e.open(2, "[");
        e.replace(2, 5, "XY");
        e.open(6, "<");
        assert_eq!(e.apply("a.bcd(e)").as_deref(), Some("a.[XY(<e)"));
        let mut e = Edits::new();
        e.replace(0, 3, "x");
        assert_eq!(e.apply("a\nb"), None);
        let mut e = Edits::new();
        e.replace(0, 3, "x");
        e.open(1, "y");
        assert_eq!(e.apply("abcd"), None);
    }

    #[test]
    fn line_breaks_are_refused() {
        let mut e = Edits::new();
        e.open(0, "a\n");
        assert_eq!(e.apply("x"), None);
        assert_eq!(line_count("a\nb"), 2);
        assert_eq!(line_count("a\nb\n"), 2);
        assert_eq!(line_count(""), 0);
    }
}
