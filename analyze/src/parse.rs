//! The textual forms options take, shared by every analysis and the generator: durations
//! (`10ms`, `2.5s`), clock skews (`WS2=+30ms`), top-N lists (`1..40`), probability ranges
//! (`0.3..0.7`) and captures with a clock offset (`front.pcap@+1.2ms`). Pure: each parser
//! returns the value or a message naming what was expected.

use crate::pcap::CaptureFile;
use crate::{Error, Result, Time};
use std::path::PathBuf;

/// Parses `"10ms"`, `"2.5s"`, `"100us"`, `"7ns"`, `"1m"` into nanoseconds (a bare number is
/// seconds).
pub fn parse_duration(s: &str) -> std::result::Result<Time, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().map_err(|_| format!("bad duration {s:?}"))?;
    let scale = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" | "" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        _ => return Err(format!("bad duration unit in {s:?} (ns, us, ms, s, m, h)")),
    };
    let ns = v * scale;
    if !ns.is_finite() || ns.abs() > 9e18 {
        return Err(format!("duration {s:?} out of range"));
    }
    Ok(ns.round() as Time)
}

/// [`parse_duration`] of option `--flag`, as a usage error naming it.
pub fn flag_duration(flag: &str, s: &str) -> Result<Time> {
    parse_duration(s).map_err(|e| Error::Usage(format!("--{flag} {s:?}: {e}")))
}

/// Parses `NODE=+30ms` (a bare number is milliseconds).
pub fn parse_skew(s: &str) -> Result<(String, i64)> {
    let bad = || {
        Error::Usage(format!(
            "--skew {s:?}: expected NODE=±DURATION, e.g. WS2=+30ms"
        ))
    };
    let (node, v) = s.rsplit_once('=').ok_or_else(bad)?;
    let v = v.trim();
    let ns = if v
        .trim_start_matches(['+', '-'])
        .chars()
        .all(|c| c.is_ascii_digit() || c == '.')
    {
        parse_duration(&format!("{v}ms"))
    } else {
        parse_duration(v)
    }
    .map_err(|_| bad())?;
    if node.is_empty() {
        return Err(bad());
    }
    Ok((node.to_owned(), ns))
}

/// Parses `1..40`, `1..=40`, `1,5,10` or `7`.
pub fn parse_top(s: &str) -> Result<Vec<usize>> {
    let bad = || Error::Usage(format!("--top {s:?}: expected 1..40, 1,5,10 or 7"));
    let num = |x: &str| x.trim().parse::<usize>().map_err(|_| bad());
    let v: Vec<usize> = if let Some((a, b)) = s.split_once("..") {
        let b = b.strip_prefix('=').unwrap_or(b);
        (num(a)?..=num(b)?).collect()
    } else {
        s.split(',').map(num).collect::<Result<_>>()?
    };
    if v.is_empty() || v.contains(&0) || v.len() > 100_000 {
        return Err(bad());
    }
    Ok(v)
}

/// Parses a probability range `LOW..HIGH` with `0 ≤ LOW ≤ HIGH ≤ 1` (option `--flag`).
pub fn parse_range(flag: &str, s: &str) -> Result<(f64, f64)> {
    let bad = || Error::Usage(format!("--{flag} {s:?}: LOW..HIGH, 0 ≤ LOW ≤ HIGH ≤ 1"));
    let (lo, hi) = s.split_once("..").ok_or_else(bad)?;
    let (lo, hi): (f64, f64) = (
        lo.trim().parse().map_err(|_| bad())?,
        hi.trim().parse().map_err(|_| bad())?,
    );
    if !(0.0..=1.0).contains(&lo) || !(lo..=1.0).contains(&hi) {
        return Err(bad());
    }
    Ok((lo, hi))
}

/// Parses `FILE` or `FILE@±OFFSET` (an offset needs its sign: `cap.pcap@+2ms`).
pub fn parse_capture(s: &str) -> Result<CaptureFile> {
    if let Some((path, off)) = s.rsplit_once('@')
        && (off.starts_with('+') || off.starts_with('-'))
    {
        let offset_ns =
            parse_duration(off).map_err(|e| Error::Usage(format!("--pcap {s}: {e}")))?;
        return Ok(CaptureFile {
            path: PathBuf::from(path),
            offset_ns,
        });
    }
    Ok(CaptureFile {
        path: PathBuf::from(s),
        offset_ns: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skews_and_tops_parse() {
        assert_eq!(parse_skew("WS2=+30ms").unwrap(), ("WS2".into(), 30_000_000));
        assert_eq!(parse_skew("a=b=-5").unwrap(), ("a=b".into(), -5_000_000));
        assert_eq!(parse_skew("X=1.5s").unwrap().1, 1_500_000_000);
        assert!(parse_skew("WS2").is_err());
        assert!(parse_skew("=5ms").is_err());
        assert_eq!(parse_top("1..40").unwrap().len(), 40);
        assert_eq!(parse_top("1..=3").unwrap(), [1, 2, 3]);
        assert_eq!(parse_top("1,5").unwrap(), [1, 5]);
        assert!(parse_top("0").is_err());
        assert!(parse_top("x").is_err());
    }

    #[test]
    fn try_both_ranges_parse() {
        assert_eq!(parse_range("r", "0.3..0.7").unwrap(), (0.3, 0.7));
        assert_eq!(parse_range("r", " 0 .. 1 ").unwrap(), (0.0, 1.0));
        for bad in ["0.7..0.3", "0.3", "a..b", "-1..0.5", "0.2..1.5"] {
            assert!(parse_range("r", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn capture_offsets_need_a_sign() {
        let f = parse_capture("a.pcap@+1.5ms").unwrap();
        assert_eq!((f.path, f.offset_ns), (PathBuf::from("a.pcap"), 1_500_000));
        assert_eq!(parse_capture("b@-2us").unwrap().offset_ns, -2_000);
        // An `@` in a file name without a signed offset after it is part of the name.
        assert_eq!(
            parse_capture("x@y.pcap").unwrap().path,
            PathBuf::from("x@y.pcap")
        );
        assert!(parse_capture("a.pcap@+zz").is_err());
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("10ms"), Ok(10_000_000));
        assert_eq!(parse_duration("2.5s"), Ok(2_500_000_000));
        assert_eq!(parse_duration("-30ms"), Ok(-30_000_000));
        assert_eq!(parse_duration("7"), Ok(7_000_000_000));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("1e30s").is_err());
    }
}
