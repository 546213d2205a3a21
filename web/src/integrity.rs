//! Damaged databases: `p5 web` checks a SQLite file with `PRAGMA quick_check` (page structure,
//! record formats, index consistency; SQLite's fast check, without the full `integrity_check`'s
//! cross-checks) and refuses to serve one that fails it, rather than starting and answering
//! every request with an error.
//!
//! The check reads the whole file: on a 10 M-event database (626 MB, `cargo bench -p p5-web
//! --bench query`'s) it took 2.4 s from the page cache and 9–11 s cold on this machine (2
//! shared cores), far over the first-paint budget of 1 s. So files up to
//! [`CHECK_AT_START_BYTES`] (≈ 0.25 s warm) are checked before the server starts, and larger
//! ones in the background once the start-up indexing is done; if that later check fails, every
//! API request from then on answers 500 with the damage (and the log says it once). Until then
//! a query that meets a damaged page answers "database damaged: …" too ([`crate::error`]).
//! PostgreSQL keeps its own pages' integrity and is not checked.

use p5_tracedb::Reader;

/// Largest SQLite file checked before the server starts.
pub const CHECK_AT_START_BYTES: u64 = 64 << 20;

/// How many of `quick_check`'s problems a report names.
const NAMED: usize = 3;

/// Runs `PRAGMA quick_check` on a SQLite database: `Ok(None)` when it is sound, `Ok(Some(why))`
/// with the first problems in one line when it is not (a file too damaged to be checked at all
/// is damaged too), `Err` when the database cannot be asked. PostgreSQL: `Ok(None)`.
pub async fn quick_check(db: &Reader) -> Result<Option<String>, p5_tracedb::Error> {
    let Reader::Sqlite(pool) = db else {
        return Ok(None);
    };
    let rows: Vec<(String,)> = match sqlx::query_as("PRAGMA quick_check").fetch_all(pool).await {
        Ok(rows) => rows,
        Err(e) if damage(&e).is_some() => {
            return Ok(damage(&e).map(|d| format!("quick_check: {d}")));
        }
        Err(e) => return Err(e.into()),
    };
    Ok(summary(rows.into_iter().map(|(r,)| r).collect()))
}

/// The one-line summary of `quick_check`'s rows (`None` for "ok"). SQLite may put several
/// problems in one row, one a line, after a `*** in database main ***` line.
fn summary(rows: Vec<String>) -> Option<String> {
    if rows.len() == 1 && rows[0] == "ok" || rows.is_empty() {
        return None;
    }
    let problems: Vec<&str> = rows
        .iter()
        .flat_map(|r| r.lines())
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("*** in database"))
        .collect();
    let named = problems.len().min(NAMED);
    let mut out = format!("quick_check: {}", problems[..named].join("; "));
    if problems.is_empty() {
        out.push_str("damage found");
    }
    if problems.len() > named {
        // quick_check stops listing at 100 problems.
        let at_least = if problems.len() >= 100 {
            "at least "
        } else {
            ""
        };
        out.push_str(&format!("; and {at_least}{} more", problems.len() - named));
    }
    Some(out)
}

/// The damage a driver error reports (SQLite's "database disk image is malformed", "file is
/// not a database"), if it reports damage.
pub fn damage(e: &sqlx::Error) -> Option<String> {
    let sqlx::Error::Database(d) = e else {
        return None;
    };
    let m = d.message();
    let lower = m.to_ascii_lowercase();
    (lower.contains("malformed") || lower.contains("not a database") || lower.contains("corrupt"))
        .then(|| m.to_owned())
}

/// True when the database at `url` is a SQLite file small enough to check before starting.
pub fn check_at_start(url: &p5_tracedb::DbUrl) -> bool {
    match url {
        p5_tracedb::DbUrl::Sqlite(u) => {
            let path = u
                .trim_start_matches("sqlite://")
                .trim_start_matches("sqlite:");
            let path = path.split('?').next().unwrap_or(path);
            std::fs::metadata(path).map_or(true, |m| m.len() <= CHECK_AT_START_BYTES)
        }
        p5_tracedb::DbUrl::Postgres(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::summary;

    #[test]
    fn problems_are_summarized_in_one_line() {
        assert_eq!(summary(vec!["ok".into()]), None);
        let rows: Vec<String> = [
            "*** in database main ***\nOn tree page 201 cell 24: Extends off end of page",
            "On tree page 145 cell 41: Rowid 10614 out of order",
            "Fragmentation of 14 bytes reported as 0 on page 145",
            "On tree page 130 cell 23: Extends off end of page\nrow 3 missing from index x",
        ]
        .map(String::from)
        .into();
        let s = summary(rows).unwrap();
        assert!(
            s.starts_with("quick_check: On tree page 201 cell 24"),
            "{s}"
        );
        assert!(s.ends_with("; and 2 more") && !s.contains('\n'), "{s}");
    }
}
