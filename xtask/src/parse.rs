//! Reading figures out of the benches' printed summaries.

/// The first number (optionally signed, with a fraction) in `s`.
pub fn first_number(s: &str) -> Option<f64> {
    let start = s.find(|c: char| c.is_ascii_digit())?;
    let end = s[start..]
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map_or(s.len(), |e| start + e);
    s[start..end].parse().ok()
}

/// The first number after `key` in `text` (on any line).
pub fn number_after(text: &str, key: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.find(key).and_then(|i| first_number(&l[i + key.len()..])))
}

/// The number that ends just before the first `key` in `text` (`… 13.57 M lines/s`).
pub fn number_before(text: &str, key: &str) -> Option<f64> {
    let head = &text[..text.find(key)?];
    let word = head.split_whitespace().next_back()?;
    word.trim_matches(|c: char| !(c.is_ascii_digit() || c == '.'))
        .parse()
        .ok()
}

/// A `Duration`'s `{:?}` form (`17.23ms`, `4.5µs`, `1.2s`, `850ns`) in milliseconds.
pub fn duration_ms(s: &str) -> Option<f64> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let v: f64 = s[..split].parse().ok()?;
    let unit = s[split..].trim_end_matches([',', ';', ')']);
    let scale = match unit {
        "s" => 1e3,
        "ms" => 1.0,
        "µs" | "us" => 1e-3,
        "ns" => 1e-6,
        _ => return None,
    };
    Some(v * scale)
}

/// The duration following `key` on the first line containing `key`, in milliseconds.
pub fn duration_after(text: &str, key: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        let rest = &l[l.find(key)? + key.len()..];
        duration_ms(rest.split_whitespace().next()?)
    })
}

/// Rows of a whitespace-separated table whose first column is one of `keys`.
pub fn table_row<'a>(text: &'a str, key: &str) -> Option<Vec<&'a str>> {
    text.lines().find_map(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        (cols.first() == Some(&key)).then_some(cols)
    })
}

/// Why a bench failed, from its stderr: the panic message when it panicked (the line after
/// `panicked at`), else the last lines.
pub fn failure(stderr: &str) -> String {
    let mut lines = stderr.lines();
    while let Some(l) = lines.next() {
        if let Some(i) = l.find("panicked at ") {
            let place = l[i + "panicked at ".len()..].trim_end_matches(':');
            let why = lines.next().unwrap_or("").trim();
            return format!("panicked at {place}: {why}");
        }
    }
    tail(stderr, 3)
}

/// The last non-empty lines of `text`, for error messages.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_benches_formats() {
        let sensor = "  rdtsc                       9.22 ns\n  rust enter+exit pair       19.20 ns  = 1.04 × rdtsc per event (budget 1.3)";
        assert_eq!(number_after(sensor, "rdtsc "), Some(9.22));
        assert_eq!(number_after(sensor, "rust enter+exit pair"), Some(19.2));
        assert_eq!(number_after(sensor, "= "), Some(1.04));
        assert_eq!(duration_ms("17.23ms,"), Some(17.23));
        assert!((duration_ms("4.5µs").unwrap() - 0.0045).abs() < 1e-12);
        assert_eq!(duration_ms("1.2s"), Some(1200.0));
        assert_eq!(duration_ms("fast"), None);
        let web = "pan/zoom (9 windows): median 4.50ms, p95 17.00ms, max 20.1ms (at width 5 ns)";
        assert_eq!(duration_after(web, "p95 "), Some(17.0));
        let ingest = "      8   1000000   2.31   0.010  100.0\n      1    2000   2.3";
        assert_eq!(table_row(ingest, "8").map(|r| r[4]), Some("100.0"));
        assert_eq!(table_row(ingest, "64"), None);
        let text = "text read, numeric ids: 864000 lines, 31.7 MB in 0.065 s: 13.57 M lines/s";
        assert_eq!(number_before(text, "M lines/s"), Some(13.57));
        assert_eq!(number_before(text, "nothing"), None);
        let err = "   Running benches/query.rs\n\nthread 'main' (14847) panicked at web/x.rs:41:9:\n\
                   message.send_calls is NOT NULL\nstack backtrace:\n   0: at /rustc/x\n";
        assert_eq!(
            failure(err),
            "panicked at web/x.rs:41:9: message.send_calls is NOT NULL"
        );
        assert_eq!(failure("a\nb\n\nc\nd"), "b | c | d");
    }
}
