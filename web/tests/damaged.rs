//! Damaged databases (issue 46): `p5 web` refuses to start on a SQLite file that fails
//! `PRAGMA quick_check`, in one line that says what to do, and a database damaged while the
//! server runs is answered with what went wrong ("database damaged: …; re-merge …"), never
//! a bare "internal error".

mod fixture;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use p5_web::server::{self, Config};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use tower::ServiceExt;

const PAGE: u64 = 4096;

/// The fixture in a rollback-journal database (so that readers notice a changed file by its
/// change counter, as after any write), and the root pages (1-based) of its tables that hold
/// rows.
async fn database(dir: &Path) -> (std::path::PathBuf, Vec<u64>) {
    let db = dir.join("trace.db");
    let pool = fixture::create(&db).await;
    sqlx::raw_sql("PRAGMA journal_mode=DELETE")
        .execute(&pool)
        .await
        .unwrap();
    fixture::small(&pool).await;
    fixture::analyses(&pool).await;
    let tables: Vec<(String, i64)> = sqlx::query_as(
        "SELECT name, rootpage FROM sqlite_master WHERE type = 'table' \
         AND name NOT LIKE 'sqlite_%' AND name NOT IN ('_sqlx_migrations', 'session')",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut pages = Vec::new();
    for (name, root) in tables {
        let q = format!("SELECT COUNT(*) FROM \"{name}\"");
        let (n,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(q))
            .fetch_one(&pool)
            .await
            .unwrap();
        if n > 0 {
            pages.push(u64::try_from(root).unwrap());
        }
    }
    pool.close().await;
    assert!(pages.len() > 5, "tables with rows: {pages:?}");
    (db, pages)
}

/// Overwrites 64 bytes of the cell pointers of each page in `pages` (1-based; page 1's b-tree
/// header after the 100-byte file header), and bumps the file change counter as a
/// write would.
fn damage(db: &Path, pages: &[u64]) {
    let mut f = std::fs::OpenOptions::new().write(true).open(db).unwrap();
    for &p in pages {
        let at = (p - 1) * PAGE + if p == 1 { 100 } else { 12 };
        f.seek(SeekFrom::Start(at)).unwrap();
        f.write_all(&[0xA5; 64]).unwrap();
    }
    f.seek(SeekFrom::Start(24)).unwrap();
    f.write_all(&0x7fff_0001u32.to_be_bytes()).unwrap();
    f.sync_all().unwrap();
}

fn config(db: &Path) -> Config {
    Config {
        db: format!("sqlite:{}", db.display()),
        select_dir: None,
        token: None,
        cache_dir: None,
    }
}

/// Every message of an error's chain, as `p5` prints it (`{:#}`).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        out = format!("{out}: {c}");
        cur = c.source();
    }
    out
}

/// Refused at start: damage to the tables' pages is found by `quick_check`; damage to the
/// catalogue already by opening. Either way one line, each problem said once.
#[tokio::test]
async fn a_damaged_database_is_refused_at_start_in_one_line() {
    for (what, catalogue) in [("data", false), ("catalogue", true)] {
        let dir = tempfile::tempdir().unwrap();
        let (db, data) = database(dir.path()).await;
        damage(&db, if catalogue { &[1] } else { &data });
        let e = server::app(&config(&db)).await.map(|_| ()).unwrap_err();
        let text = chain(&e);
        eprintln!("{what}: {text}");
        assert!(text.contains(" is damaged ("), "{what}: {text}");
        assert!(text.contains("re-merge the session"), "{what}: {text}");
        assert!(!text.contains('\n'), "{what}: one line: {text}");
        assert!(!text.contains("not a p5 database"), "{what}: {text}");
        let problem = text.split(" is damaged (").nth(1).unwrap();
        let problem = problem.split(['(', ';']).nth(1).unwrap();
        assert_eq!(
            text.matches(problem).count(),
            1,
            "{what}: said once: {text}"
        );
        if !catalogue {
            assert!(text.contains("(quick_check: "), "{text}");
        }
    }
}

#[tokio::test]
async fn a_database_damaged_while_serving_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (db, data) = database(dir.path()).await;
    let (app, _) = server::app(&config(&db)).await.unwrap();
    damage(&db, &data);
    let mut damaged = 0;
    for uri in [
        "/api/v1/sessions/1/rows",
        "/api/v1/sessions/1/stats",
        "/api/v1/sessions/1/runs",
    ] {
        let req = Request::get(uri)
            .header(header::HOST, "localhost:8055")
            .body(Body::empty())
            .unwrap();
        let resp = app.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let body = axum::body::to_bytes(resp.into_body(), 1 << 24)
            .await
            .unwrap();
        let body = String::from_utf8_lossy(&body).into_owned();
        assert!(!body.contains("internal error"), "{uri}: {body}");
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            let msg = v["error"].as_str().unwrap();
            assert!(msg.starts_with("database damaged: "), "{uri}: {msg}");
            assert!(msg.contains("re-merge the session"), "{uri}: {msg}");
            assert_eq!(msg.matches("malformed").count(), 1, "{uri}: {msg}");
            eprintln!("{uri}: {msg}");
            damaged += 1;
        }
    }
    assert!(damaged > 0, "some request met the damage");
}

/// A database too large to check before starting (here 65 MiB, most of it a filler table) is
/// checked once the start-up indexing is done; damage found then is what every request gets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_database_is_checked_after_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let (db, data) = database(dir.path()).await;
    let pool = fixture::open(&db).await;
    sqlx::raw_sql(
        "PRAGMA journal_mode=DELETE; CREATE TABLE filler (b BLOB); \
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 65) \
         INSERT INTO filler SELECT zeroblob(1048576) FROM n",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    // Over `p5_web::integrity::CHECK_AT_START_BYTES`.
    assert!(std::fs::metadata(&db).unwrap().len() > 64 << 20);
    damage(&db, &data);
    let (app, state) = server::app(&config(&db))
        .await
        .expect("starts: checked later");
    server::warm(state);
    let started = std::time::Instant::now();
    let msg = loop {
        let req = Request::get("/api/v1/sessions")
            .header(header::HOST, "localhost:8055")
            .body(Body::empty())
            .unwrap();
        let resp = app.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let body = axum::body::to_bytes(resp.into_body(), 1 << 24)
            .await
            .unwrap();
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            // Until the check is done, a query that meets the damage says so too.
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let msg = v["error"].as_str().unwrap().to_owned();
            assert!(msg.starts_with("database damaged: "), "{msg}");
            if msg.contains("quick_check") {
                break msg;
            }
        } else {
            assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the damage was never reported"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(msg.starts_with("database damaged: quick_check: "), "{msg}");
    assert!(msg.contains("re-merge the session"), "{msg}");
    eprintln!("after {:?}: {msg}", started.elapsed());
}
