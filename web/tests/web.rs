//! Integration tests of `p5 web`: API JSON snapshots on a fixture database made from the merge
//! migrations (`tests/snapshots/*.json`; `P5_BLESS=1` rewrites them), bad input (400/404),
//! access control, selection saving, and the browser test (headless Chromium via
//! playwright-core, `tests/browser/test.mjs`).

mod fixture;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use p5_web::server::{self, Config};
use serde_json::Value;
use std::path::{Path, PathBuf};
use tower::ServiceExt;

struct Fixture {
    _dir: tempfile::TempDir,
    db: PathBuf,
    select: PathBuf,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("trace.db");
    let pool = fixture::create(&db).await;
    fixture::small(&pool).await;
    fixture::analyses(&pool).await;
    pool.close().await;
    let select = dir.path().join("select");
    std::fs::create_dir(&select).unwrap();
    Fixture {
        _dir: dir,
        db,
        select,
    }
}

fn config(f: &Fixture, token: Option<&str>) -> Config {
    Config {
        db: format!("sqlite:{}", f.db.display()),
        select_dir: Some(f.select.clone()),
        token: token.map(str::to_owned),
        cache_dir: None,
    }
}

async fn call(app: &axum::Router, method: &str, uri: &str, body: &str) -> (StatusCode, Vec<u8>) {
    let json = [(header::CONTENT_TYPE.as_str(), "application/json")];
    let headers: &[(&str, &str)] = if method == "GET" { &[] } else { &json };
    call_with(app, method, uri, body, headers).await
}

async fn call_with(
    app: &axum::Router,
    method: &str,
    uri: &str,
    body: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, Vec<u8>) {
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::HOST, "localhost:8055");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Body::from(body.to_owned())).unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 26)
        .await
        .unwrap();
    (status, bytes.to_vec())
}

async fn get_json(app: &axum::Router, uri: &str) -> (StatusCode, Value) {
    let (s, b) = call(app, "GET", uri, "").await;
    let v = serde_json::from_slice(&b)
        .unwrap_or_else(|e| panic!("{uri}: not JSON ({e}): {}", String::from_utf8_lossy(&b)));
    (s, v)
}

fn snapshot(name: &str, v: &Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/snapshots/{name}.json"));
    let text = serde_json::to_string_pretty(v).unwrap() + "\n";
    if std::env::var_os("P5_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("missing snapshot {} (run with P5_BLESS=1)", path.display()));
    assert!(
        want == text,
        "snapshot {name} differs (P5_BLESS=1 rewrites it); got:\n{text}"
    );
}

#[tokio::test]
async fn api_snapshots() {
    let f = fixture().await;
    let (app, _) = server::app(&config(&f, None)).await.unwrap();
    let cases = [
        ("sessions", "/api/v1/sessions"),
        ("config", "/api/v1/config"),
        ("rows", "/api/v1/sessions/1/rows"),
        ("rows_empty_session", "/api/v1/sessions/2/rows"),
        ("sensors", "/api/v1/sessions/1/sensors"),
        ("gantt_overview", "/api/v1/sessions/1/gantt?px=40"),
        (
            "gantt_zoomed",
            "/api/v1/sessions/1/gantt?t0=1000000&t1=2000000&px=800",
        ),
        ("messages", "/api/v1/sessions/1/messages?t0=0&t1=8000000"),
        ("messages_thinned", "/api/v1/sessions/1/messages?limit=5"),
        (
            "metrics",
            "/api/v1/sessions/1/metrics?t0=0&t1=10000000&px=100",
        ),
        ("stats", "/api/v1/sessions/1/stats"),
        (
            "source_try_word",
            "/api/v1/sessions/1/sensors/0xa000000000000001/source",
        ),
    ];
    for (name, uri) in cases {
        let (s, v) = get_json(&app, uri).await;
        assert_eq!(s, StatusCode::OK, "{uri}: {v}");
        snapshot(name, &v);
    }
}

/// The routes whose answers are snapshotted, with their snapshot names.
const ROUTES: &[(&str, &str)] = &[
    ("sessions", "/api/v1/sessions"),
    ("config", "/api/v1/config"),
    ("rows", "/api/v1/sessions/1/rows"),
    ("rows_empty_session", "/api/v1/sessions/2/rows"),
    ("sensors", "/api/v1/sessions/1/sensors"),
    ("gantt_overview", "/api/v1/sessions/1/gantt?px=40"),
    (
        "gantt_zoomed",
        "/api/v1/sessions/1/gantt?t0=1000000&t1=2000000&px=800",
    ),
    ("messages", "/api/v1/sessions/1/messages?t0=0&t1=8000000"),
    ("messages_thinned", "/api/v1/sessions/1/messages?limit=5"),
    (
        "metrics",
        "/api/v1/sessions/1/metrics?t0=0&t1=10000000&px=100",
    ),
    ("stats", "/api/v1/sessions/1/stats"),
    (
        "source_try_word",
        "/api/v1/sessions/1/sensors/0xa000000000000001/source",
    ),
];

/// The analysis routes whose answers are snapshotted (the fixture's `analyses`).
const ANALYSIS_ROUTES: &[(&str, &str)] = &[
    ("runs", "/api/v1/sessions/1/runs"),
    ("paths_linking", "/api/v1/sessions/1/runs/2/paths"),
    (
        "paths_by_total",
        "/api/v1/sessions/1/runs/2/paths?sort=total",
    ),
    (
        "paths_filtered",
        "/api/v1/sessions/1/runs/2/paths?q=cow%2C&limit=1",
    ),
    ("pattern", "/api/v1/sessions/1/runs/2/paths/2?limit=3"),
    ("graph", "/api/v1/sessions/1/runs/2/graph"),
    ("instance", "/api/v1/sessions/1/runs/1/instances/2"),
    ("flows", "/api/v1/sessions/1/runs/3/flows"),
    ("flow", "/api/v1/sessions/1/runs/3/flows/2"),
    ("diff", "/api/v1/sessions/1/runs/4/flows"),
    ("compare_paths", "/api/v1/compare/paths?a=1:1&b=1:2"),
    ("compare_stats", "/api/v1/compare/stats?a=1&b=1"),
];

#[tokio::test]
async fn analysis_api_snapshots() {
    let f = fixture().await;
    let (app, _) = server::app(&config(&f, None)).await.unwrap();
    for (name, uri) in ANALYSIS_ROUTES {
        let (s, v) = get_json(&app, uri).await;
        assert_eq!(s, StatusCode::OK, "{uri}: {v}");
        snapshot(name, &v);
    }
}

/// What the analysis views must say, checked on the fixture's numbers.
#[tokio::test]
async fn analysis_answers_say_what_the_runs_hold() {
    let f = fixture().await;
    let (app, _) = server::app(&config(&f, None)).await.unwrap();
    let sigs = |v: &Value| -> Vec<String> {
        v["patterns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["signature"].as_str().unwrap().to_owned())
            .collect()
    };
    // Every sort orders differently: expectation 9.5, 2.4, 1.2; count 12, 3, 20; total.
    let base = "/api/v1/sessions/1/runs/2/paths?sort=";
    let (_, v) = get_json(&app, &format!("{base}expectation")).await;
    assert_eq!(sigs(&v), ["cpw>cow", "cpw>cow,cow", "cow>cpw"]);
    let (_, v) = get_json(&app, &format!("{base}count")).await;
    assert_eq!(sigs(&v), ["cow>cpw", "cpw>cow", "cpw>cow,cow"]);
    let (_, v) = get_json(&app, &format!("{base}expectation_per_count")).await;
    assert_eq!(sigs(&v), ["cpw>cow,cow", "cpw>cow", "cow>cpw"]);
    let (_, v) = get_json(&app, &format!("{base}total")).await;
    assert_eq!(v["patterns"][0]["signature"], "cpw>cow");
    assert_eq!(v["total"], 3);
    // The tree of cpw>cow,cow: the second cow enters 3.2 ms after cpw and ends last: critical.
    let (_, v) = get_json(&app, "/api/v1/sessions/1/runs/2/paths/2").await;
    let nodes = v["nodes"].as_array().unwrap();
    let crit: Vec<bool> = nodes
        .iter()
        .map(|n| n["critical"].as_bool().unwrap())
        .collect();
    assert_eq!(crit, [true, false, true]);
    assert_eq!(nodes[2]["start_ns"], 3_200_000);
    assert_eq!(nodes[0]["end_ns"], 8_300_000);
    // An instance: job 0 of worker 2 (thread 3): its window and the split add up; the worker
    // spent it mostly in try_word.
    let (_, v) = get_json(&app, "/api/v1/sessions/1/runs/1/instances/2").await;
    assert_eq!(v["messages"].as_array().unwrap().len(), 2);
    let w = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["thread"] == 3)
        .expect("the worker's thread");
    let span = w["t1"].as_i64().unwrap() - w["t0"].as_i64().unwrap();
    let parts: i64 = ["on_cpu_ns", "runnable_ns", "blocked_ns", "unknown_ns"]
        .iter()
        .map(|k| w[*k].as_i64().unwrap_or(0))
        .sum();
    assert_eq!(parts, span, "{w}");
    assert!(w["top"][0]["name"].as_str().is_some(), "{w}");
    // The worker stood for the pattern's cow node: the job it received entered it.
    assert_eq!(w["nodes"], serde_json::json!(["cow"]));
    // Flows: the most suspect first; diff: both sides with both ranks and sensors to click.
    let (_, v) = get_json(&app, "/api/v1/sessions/1/runs/3/flows").await;
    assert_eq!(v["flows"][0]["id"], 2);
    let (_, v) = get_json(&app, "/api/v1/sessions/1/runs/4/flows").await;
    assert_eq!(v["anomalous"].as_array().unwrap().len(), 2);
    let calls = &v["anomalous"][0]["calls"]["functions"];
    assert_eq!(calls[1]["name"], "try_word");
    assert!(calls[1]["sensor"].is_u64(), "{calls}");
    // Compare: cow's own delay grew by 200 µs.
    let (_, v) = get_json(&app, "/api/v1/compare/paths?a=1:1&b=1:2").await;
    assert_eq!(v["largest"]["node"], "cow");
    assert_eq!(v["largest"]["own_delta_ns"], 200_000);
    assert_eq!(v["only_b"].as_array().unwrap().len(), 2);
    // Bad requests are JSON errors.
    for (uri, code) in [
        (
            "/api/v1/sessions/1/runs/2/paths?sort=sideways",
            StatusCode::BAD_REQUEST,
        ),
        ("/api/v1/sessions/1/runs/9/paths", StatusCode::NOT_FOUND),
        ("/api/v1/sessions/1/runs/x/paths", StatusCode::BAD_REQUEST),
        ("/api/v1/sessions/1/runs/2/paths/99", StatusCode::NOT_FOUND),
        (
            "/api/v1/sessions/1/runs/1/instances/999",
            StatusCode::NOT_FOUND,
        ),
        ("/api/v1/sessions/1/runs/1/flows", StatusCode::BAD_REQUEST),
        ("/api/v1/compare/paths?a=1:1", StatusCode::BAD_REQUEST),
        ("/api/v1/compare/paths?a=1&b=1:2", StatusCode::BAD_REQUEST),
        ("/api/v1/compare/stats?a=1&b=77", StatusCode::NOT_FOUND),
    ] {
        let (s, v) = get_json(&app, uri).await;
        assert_eq!(s, code, "{uri}: {v}");
        assert!(v["error"].is_string(), "{uri}: {v}");
    }
}

/// PostgreSQL answers exactly as SQLite does. Like the merge tests: `P5_TEST_PG_URL`, else
/// `postgres://postgres@127.0.0.1:5432/test` (`scripts/pg-test-server.sh` starts one), with a
/// throwaway schema.
#[tokio::test]
async fn postgres_gives_the_same_answers() {
    use sqlx::Connection;
    let base = std::env::var("P5_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let schema = format!("p5web_{}", std::process::id());
    let mut c = match sqlx::PgConnection::connect(&base).await {
        Ok(c) => c,
        Err(e) => panic!(
            "PostgreSQL is needed for this test and {base} is not reachable ({e}); run \
             `eval $(bash scripts/pg-test-server.sh)` or set P5_TEST_PG_URL"
        ),
    };
    let ddl = |q: String| sqlx::raw_sql(sqlx::AssertSqlSafe(q));
    ddl(format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
    ))
    .execute(&mut c)
    .await
    .unwrap();
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-csearch_path%3D{schema}");
    fixture::migrate(&url).await;
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    fixture::small(&pool).await;
    fixture::analyses(&pool).await;
    pool.close().await;

    let f = fixture().await;
    let (lite, _) = server::app(&config(&f, None)).await.unwrap();
    let mut cfg = config(&f, None);
    cfg.db = url;
    let (pg, _) = server::app(&cfg).await.unwrap();
    for (_, uri) in ROUTES.iter().chain(ANALYSIS_ROUTES) {
        let a = get_json(&lite, uri).await;
        let b = get_json(&pg, uri).await;
        assert_eq!(a, b, "{uri}: SQLite and PostgreSQL differ");
    }
    let (s, _) = get_json(&pg, "/api/v1/sessions/99/rows").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    ddl(format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&mut c)
        .await
        .unwrap();
}

#[tokio::test]
async fn gantt_answers_are_consistent() {
    let f = fixture().await;
    let (app, _) = server::app(&config(&f, None)).await.unwrap();
    // Zoomed out, the worker threads' try_word level aggregates nothing it should not: the
    // counts over all items equal the interval counts.
    let (_, v) = get_json(&app, "/api/v1/sessions/1/gantt?px=10").await;
    let mut intervals = 0;
    for t in v["threads"].as_array().unwrap() {
        for level in t["levels"].as_array().unwrap() {
            for item in level.as_array().unwrap() {
                intervals += item[3].as_u64().unwrap();
                assert!(item[0].as_i64() <= item[1].as_i64());
            }
        }
        // States cover the thread's whole life: covered ns sum to 40 ms.
        let covered: i64 = t["states"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i[4].as_i64().unwrap())
            .sum();
        assert_eq!(covered, 40_000_000, "thread {}", t["id"]);
    }
    assert_eq!(intervals, 3 + 12 * 2 + 12 * 6);
    // The sensor index in the items names try_word for the worker's level 1.
    let (_, sensors) = get_json(&app, "/api/v1/sessions/1/sensors").await;
    let (_, z) = get_json(
        &app,
        "/api/v1/sessions/1/gantt?t0=1000000&t1=5000000&px=1000",
    )
    .await;
    let worker = z["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == 2)
        .unwrap();
    let first = &worker["levels"][1][1];
    let idx = first[2].as_u64().unwrap() as usize;
    assert_eq!(sensors[idx]["name"], "try_word");
    assert_eq!(first[0], 1_400_000);
    assert_eq!(first[1], 4_400_000);
}

#[tokio::test]
async fn snapshots_give_the_same_answers() {
    let f = fixture().await;
    let cache = f.select.join("cache");
    let mut cfg = config(&f, None);
    cfg.cache_dir = Some(cache.clone());
    let uris = [
        "/api/v1/sessions/1/gantt?px=300",
        "/api/v1/sessions/1/gantt?t0=1000000&t1=2000000&px=800",
        "/api/v1/sessions/1/messages",
        "/api/v1/sessions/1/stats",
        "/api/v1/sessions/1/rows",
    ];
    let (app, _) = server::app(&cfg).await.unwrap();
    let mut first = Vec::new();
    for u in uris {
        first.push(get_json(&app, u).await.1);
    }
    // An older merge's snapshot of the same session is removed when the new one is written;
    // another database's is not.
    let files: Vec<_> = std::fs::read_dir(&cache).unwrap().collect();
    assert_eq!(files.len(), 1, "one snapshot for session 1");
    let name = files[0]
        .as_ref()
        .unwrap()
        .file_name()
        .into_string()
        .unwrap();
    let stale = cache.join(format!("{}-0000000000000000.idx", &name[..name.len() - 21]));
    let other = cache.join("p5-web-0000000000000000-s1-0000000000000000.idx");
    std::fs::write(&stale, b"old").unwrap();
    std::fs::write(&other, b"other").unwrap();
    // A new server reads the snapshot instead of the tables: prove it by emptying them.
    let pool = sqlx::SqlitePool::connect(&format!("sqlite:{}", f.db.display()))
        .await
        .unwrap();
    for t in ["interval", "state", "sched", "message", "irq"] {
        sqlx::query(sqlx::AssertSqlSafe(format!("DELETE FROM {t}")))
            .execute(&pool)
            .await
            .unwrap();
    }
    pool.close().await;
    let (app, _) = server::app(&cfg).await.unwrap();
    for (u, want) in uris.iter().zip(&first) {
        assert_eq!(&get_json(&app, u).await.1, want, "{u}");
    }
    // A damaged snapshot is ignored and rebuilt (from the now empty tables).
    let snap = files[0].as_ref().unwrap().path();
    let len = std::fs::metadata(&snap).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&snap)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let (app, _) = server::app(&cfg).await.unwrap();
    let (s, v) = get_json(&app, "/api/v1/sessions/1/messages").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["total"], 0);
    assert!(std::fs::metadata(&snap).unwrap().len() < len);
    assert!(!stale.exists(), "stale snapshot pruned");
    assert!(other.exists(), "other database's snapshot kept");
}

#[tokio::test]
async fn bad_input_is_a_json_error() {
    let f = fixture().await;
    let (app, _) = server::app(&config(&f, None)).await.unwrap();
    let cases = [
        ("/api/v1/sessions/99/rows", 404),
        ("/api/v1/sessions/99/gantt", 404),
        ("/api/v1/sessions/x/rows", 400),
        ("/api/v1/sessions/1/gantt?t0=abc", 400),
        ("/api/v1/sessions/1/gantt?t0=10&t1=5", 400),
        ("/api/v1/sessions/1/gantt?px=0", 400),
        (
            "/api/v1/sessions/1/gantt?t0=-9223372036854775808&t1=9223372036854775807",
            400,
        ),
        ("/api/v1/sessions/1/gantt?t0=99999999999999999999", 400),
        ("/api/v1/sessions/1/gantt?px=1000000", 400),
        ("/api/v1/sessions/1/messages?limit=-1", 400),
        ("/api/v1/sessions/1/metrics?t1=1e9", 400),
        ("/api/v1/sessions/1/sensors/0x1234/source", 404),
        (
            "/api/v1/sessions/1/sensors/..%2F..%2Fetc%2Fpasswd/source",
            400,
        ),
        ("/api/v1/sessions/1%27%20OR%201=1/rows", 400),
        ("/api/v1/nope", 404),
    ];
    for (uri, want) in cases {
        let (s, v) = get_json(&app, uri).await;
        assert_eq!(s.as_u16(), want, "{uri}: {v}");
        assert!(
            v["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{uri}: {v}"
        );
    }
    let (s, b) = call(&app, "POST", "/api/v1/selection", "{\"functions\": 3}").await;
    assert_eq!(
        s,
        StatusCode::BAD_REQUEST,
        "{}",
        String::from_utf8_lossy(&b)
    );
    let (s, _) = call(&app, "POST", "/api/v1/selection", "{\"path\": \"/etc/x\"}").await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    // A body over the limit is refused before it is held in memory, as JSON.
    // 9,000 names of 40 characters: within the selection's own limits, over the body's.
    let names: Vec<String> = (0..9_000).map(|i| format!("\"{i:040}\"")).collect();
    let big = format!("{{\"functions\": [{}]}}", names.join(","));
    assert!(big.len() > 300 * 1024);
    let (s, b) = call(&app, "POST", "/api/v1/selection/toml", &big).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    let v: Value = serde_json::from_slice(&b).expect("a JSON error");
    assert!(
        v["error"].as_str().is_some_and(|e| e.contains("limit")),
        "{v}"
    );
    // The index of an unknown session is not kept.
    let (s, _) = get_json(&app, "/api/v1/sessions/1/rows").await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn selection_is_rendered_and_saved_under_a_fixed_name() {
    let f = fixture().await;
    let (app, _) = server::app(&config(&f, None)).await.unwrap();
    let body = r#"{"functions":["try_word"],"exclude_functions":["main"],
        "regions":[{"name":"salt","file":"src/cow.c","lines":[12,13]}]}"#;
    let (s, toml) = call(&app, "POST", "/api/v1/selection/toml", body).await;
    assert_eq!(s, StatusCode::OK);
    let toml = String::from_utf8(toml).unwrap();
    assert!(toml.contains("functions = [\"try_word\"]\n"), "{toml}");
    assert!(toml.contains("lines = [12, 13]"), "{toml}");
    let (s, b) = call(&app, "POST", "/api/v1/selection", body).await;
    assert_eq!(s, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
    let saved = std::fs::read_to_string(f.select.join("p5.select.toml")).unwrap();
    assert_eq!(saved, toml);
    // Without --select-dir, saving is refused.
    let mut cfg = config(&f, None);
    cfg.select_dir = None;
    let (app, _) = server::app(&cfg).await.unwrap();
    let (s, _) = call(&app, "POST", "/api/v1/selection", body).await;
    assert_eq!(s, StatusCode::CONFLICT);
}

#[tokio::test]
async fn token_and_host_are_checked() {
    let f = fixture().await;
    let (app, _) = server::app(&config(&f, Some("s3cret"))).await.unwrap();
    let (s, _) = call(&app, "GET", "/api/v1/sessions", "").await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, _) = call(&app, "GET", "/api/v1/sessions?token=wrong", "").await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let req = Request::get("/?token=s3cret").body(Body::empty()).unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let cookie = resp.headers()[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(cookie.starts_with("p5_token=s3cret;"));
    let req = Request::get("/api/v1/sessions")
        .header(header::AUTHORIZATION, "Bearer s3cret")
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        app.clone().oneshot(req).await.unwrap().status(),
        StatusCode::OK
    );
    let req = Request::get("/api/v1/sessions")
        .header(header::COOKIE, "a=b; p5_token=s3cret")
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        app.clone().oneshot(req).await.unwrap().status(),
        StatusCode::OK
    );
    // Without a token, only loopback Host headers are served (no DNS rebinding).
    let (app, _) = server::app(&config(&f, None)).await.unwrap();
    let req = Request::get("/api/v1/sessions")
        .header(header::HOST, "attacker.example")
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        app.clone().oneshot(req).await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    let (s, page) = call(&app, "GET", "/", "").await;
    assert_eq!(s, StatusCode::OK);
    assert!(String::from_utf8_lossy(&page).contains("<canvas"));
    let (s, _) = call(&app, "GET", "/assets/..%2FCargo.toml", "").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

/// The browser test: starts the server on the fixture and runs `tests/browser/test.mjs` in
/// headless Chromium. Needs `scripts/install-browser.sh` to have run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let browser_dir = root.join("tests/browser");
    let missing: Vec<&str> = [
        (Path::new("/usr/bin/chromium").exists(), "/usr/bin/chromium"),
        (
            browser_dir
                .join("node_modules/playwright-core/package.json")
                .exists(),
            "web/tests/browser/node_modules/playwright-core",
        ),
        (
            std::process::Command::new("node")
                .arg("--version")
                .output()
                .is_ok(),
            "node",
        ),
    ]
    .into_iter()
    .filter(|(ok, _)| !ok)
    .map(|(_, what)| what)
    .collect();
    assert!(
        missing.is_empty(),
        "browser test prerequisites missing ({}): run `bash scripts/install-browser.sh`",
        missing.join(", ")
    );
    let f = fixture().await;
    let pool = fixture::open(&f.db).await;
    fixture::overview(&pool).await;
    pool.close().await;
    let (app, state) = server::app(&config(&f, None)).await.unwrap();
    // The page first gets the overview preview, then finds the index ready.
    state.cache.set_preview_min_events(0);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(p5_web::serve::serve(
        listener,
        app,
        p5_web::serve::Limits::default(),
        std::future::pending(),
    ));
    let shot = root.join("../docs/screenshot.png");
    let mut child = std::process::Command::new("node")
        .arg(browser_dir.join("test.mjs"))
        .arg(format!("http://{addr}/"))
        .arg(&shot)
        .arg(fixture::TRY_WORD_LINE.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run node");
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(150) {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "browser test timed out after 150 s:\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "browser test failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("browser test: ok"), "{stdout}\n{stderr}");
}

/// Sums `[count, covered]` of a list of Gantt items.
fn totals(items: &Value) -> (u64, i64) {
    items.as_array().unwrap().iter().fold((0, 0), |(n, c), i| {
        (n + i[3].as_u64().unwrap(), c + i[4].as_i64().unwrap())
    })
}

/// Thread id and its (states, all interval levels, scheduling) `(count, covered)` totals.
type LaneTotals = (i64, (u64, i64), (u64, i64), (u64, i64));

/// Per thread: the lane totals of a Gantt answer.
fn gantt_totals(g: &Value) -> Vec<LaneTotals> {
    g["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let levels = t["levels"].as_array().unwrap().iter().map(totals);
            let lv = levels.fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
            let id = t["id"].as_i64().unwrap();
            (id, totals(&t["states"]), lv, totals(&t["sched"]))
        })
        .collect()
}

/// A session the viewer has not indexed yet is answered at once from the merge's overview
/// (`"partial": true`), and from the index once it is built; the preview holds the same
/// threads and, per lane, the same span counts and covered time as the index.
#[tokio::test]
async fn preview_answers_until_the_index_is_built() {
    let f = fixture().await;
    let pool = fixture::open(&f.db).await;
    fixture::overview(&pool).await;
    pool.close().await;
    let (app, state) = server::app(&config(&f, None)).await.unwrap();
    state.cache.set_preview_min_events(0);
    let (s, rows) = get_json(&app, "/api/v1/sessions/1/rows").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(rows["partial"], true, "the first answer is the preview");
    // The index is built meanwhile; then the same questions get full answers.
    let mut full = None;
    for _ in 0..200 {
        let (_, r) = get_json(&app, "/api/v1/sessions/1/rows").await;
        if r["partial"] == false {
            full = Some(r);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let full = full.expect("the index is built within 10 s");
    let strip = |v: &Value| -> Vec<(Value, Value)> {
        let ps = v["processes"].as_array().unwrap();
        let t = |p: &Value| {
            let ts = p["threads"].as_array().unwrap();
            ts.iter().map(|t| t["id"].clone()).collect()
        };
        ps.iter().map(|p| (p["label"].clone(), t(p))).collect()
    };
    assert_eq!(strip(&rows), strip(&full), "same processes and threads");
    let (_, m) = get_json(&app, "/api/v1/sessions/1/messages").await;
    assert!(!m["messages"].as_array().unwrap().is_empty());

    // The preview against the index, lane by lane.
    let preview = p5_web::index::SessionIndex::preview(&state.db, 1)
        .await
        .unwrap()
        .expect("the fixture has an overview");
    assert!(preview.preview && preview.messages.is_empty());
    let ix = state.cache.get(&state.db, 1).await.unwrap();
    let (t0, t1) = ix.span();
    let sum = |items: Vec<p5_web::lod::Item>| {
        items
            .iter()
            .fold((0u64, 0i64), |a, i| (a.0 + u64::from(i.3), a.1 + i.4))
    };
    let mut compared = 0;
    for (thread, lanes) in &ix.lanes {
        let p = &preview.lanes[thread];
        assert_eq!(
            sum(p.states.query(t0, t1, 40)),
            sum(lanes.states.query(t0, t1, 40))
        );
        assert_eq!(
            sum(p.sched.query(t0, t1, 40)),
            sum(lanes.sched.query(t0, t1, 40))
        );
        let levels = |l: &[p5_web::lod::Lane]| {
            l.iter()
                .map(|l| sum(l.query(t0, t1, 40)))
                .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
        };
        assert_eq!(levels(&p.levels), levels(&lanes.levels), "thread {thread}");
        compared += usize::from(!lanes.levels.is_empty() && !lanes.sched.is_empty());
    }
    assert!(compared > 0, "some thread has intervals and scheduling");
    assert_eq!(preview.lanes.len(), ix.lanes.len());
}

/// Without an overview (a database merged before it existed) the answer waits for the index.
#[tokio::test]
async fn without_an_overview_the_answer_waits_for_the_index() {
    let f = fixture().await;
    let (app, state) = server::app(&config(&f, None)).await.unwrap();
    state.cache.set_preview_min_events(0);
    let (_, rows) = get_json(&app, "/api/v1/sessions/1/rows").await;
    assert_eq!(rows["partial"], false);
}

/// A session merged again while the viewer runs is indexed anew (checked once a second).
#[tokio::test]
async fn a_session_merged_again_is_indexed_anew() {
    let f = fixture().await;
    let (app, _) = server::app(&config(&f, None)).await.unwrap();
    let (_, before) = get_json(&app, "/api/v1/sessions/1/gantt?px=40").await;
    let intervals = |g: &Value| gantt_totals(g).iter().map(|t| (t.2).0).sum::<u64>();
    let n = intervals(&before);
    assert!(n > 0);
    // "Re-merge": one thread's intervals are gone and the merge time changed.
    let pool = fixture::open(&f.db).await;
    sqlx::raw_sql(
        "DELETE FROM interval WHERE thread_id = 2; \
         UPDATE session SET merged_at_wall_ns = merged_at_wall_ns + 1 WHERE id = 1",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (_, after) = get_json(&app, "/api/v1/sessions/1/gantt?px=40").await;
    assert!(intervals(&after) < n, "{} !< {n}", intervals(&after));
}

/// The start-up warm-up loads the previews before it builds any index: a preloaded session
/// answers from its preview until its index is built, then from the index.
#[tokio::test]
async fn preloaded_previews_answer_until_the_index_is_built() {
    let f = fixture().await;
    let pool = fixture::open(&f.db).await;
    fixture::overview(&pool).await;
    pool.close().await;
    let (app, state) = server::app(&config(&f, None)).await.unwrap();
    state.cache.set_preview_min_events(0);
    state.cache.preload(&state.db, 1).await.unwrap();
    assert!(
        state.cache.preload(&state.db, 99).await.is_err(),
        "unknown session"
    );
    let ix = state.cache.view(&state.db, 1).await.unwrap();
    assert!(ix.preview, "answered from the preloaded preview");
    let full = state.cache.get(&state.db, 1).await.unwrap();
    assert!(!full.preview);
    let (_, rows) = get_json(&app, "/api/v1/sessions/1/rows").await;
    assert_eq!(rows["partial"], false);
}

/// Start-up refuses what it cannot serve, at once and clearly: an empty file and a file of
/// another program are "not a p5 database" (not an "internal error" on the page), a URL of
/// another database names the accepted forms, and a closed PostgreSQL port is reported once
/// within seconds (not after a 30 s pool timeout).
#[tokio::test]
async fn start_up_refuses_what_is_not_a_p5_database() {
    let tmp = tempfile::tempdir().unwrap();
    let start = |db: String| {
        let cfg = Config {
            db,
            select_dir: None,
            token: None,
            cache_dir: None,
        };
        async move { server::app(&cfg).await.map(|_| ()).unwrap_err().to_string() }
    };
    let empty = tmp.path().join("empty.sqlite");
    std::fs::write(&empty, b"").unwrap();
    let e = start(format!("sqlite:{}", empty.display())).await;
    assert!(e.contains("not a p5 database"), "{e}");
    let text = tmp.path().join("notes.txt");
    std::fs::write(
        &text,
        "this is not a database at all, just some text\n".repeat(200),
    )
    .unwrap();
    let e = start(format!("sqlite:{}", text.display())).await;
    assert!(e.contains("not a p5 database"), "{e}");
    let other = tmp.path().join("other.sqlite");
    let pool = fixture::open(&other).await;
    sqlx::raw_sql("CREATE TABLE t (x INTEGER)")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let e = start(format!("sqlite:{}", other.display())).await;
    assert!(e.contains("not a p5 database"), "{e}");
    let e = start("mysql://root@127.0.0.1/test".into()).await;
    assert!(
        e.contains("sqlite:PATH") && e.contains("postgres://"),
        "{e}"
    );
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let t = std::time::Instant::now();
    let e = start(format!("postgres://postgres@127.0.0.1:{port}/test")).await;
    assert!(
        t.elapsed() < std::time::Duration::from_secs(6),
        "{:?}",
        t.elapsed()
    );
    assert!(e.contains("cannot connect") && e.contains("refused"), "{e}");
    assert_eq!(e.matches("refused").count(), 1, "reported once: {e}");
}

/// D5 (issue 12): a page on another origin cannot overwrite `p5.select.toml`: state-changing
/// requests need `application/json` and a same-origin `Origin` (or none, as curl sends).
#[tokio::test]
async fn cross_origin_and_non_json_writes_are_forbidden() {
    let f = fixture().await;
    let (app, _) = server::app(&config(&f, None)).await.unwrap();
    let body = r#"{"functions":["evil"]}"#;
    let saved = f.select.join("p5.select.toml");
    let json = "application/json";
    let cases: [(&[(&str, &str)], StatusCode); 6] = [
        // A cross-site form post (no preflight): text/plain, foreign origin.
        (
            &[
                ("content-type", "text/plain"),
                ("origin", "http://evil.example"),
            ],
            StatusCode::FORBIDDEN,
        ),
        // JSON from a foreign origin.
        (
            &[("content-type", json), ("origin", "http://evil.example")],
            StatusCode::FORBIDDEN,
        ),
        // Same port, other host.
        (
            &[("content-type", json), ("origin", "http://127.0.0.1:8055")],
            StatusCode::FORBIDDEN,
        ),
        // No content type at all.
        (&[], StatusCode::FORBIDDEN),
        // The page itself.
        (
            &[
                ("content-type", "application/json; charset=utf-8"),
                ("origin", "http://localhost:8055"),
            ],
            StatusCode::OK,
        ),
        // curl: JSON, no Origin.
        (&[("content-type", json)], StatusCode::OK),
    ];
    for (i, (headers, want)) in cases.iter().enumerate() {
        let _ = std::fs::remove_file(&saved);
        let (s, b) = call_with(&app, "POST", "/api/v1/selection", body, headers).await;
        assert_eq!(
            s,
            *want,
            "case {i} {headers:?}: {}",
            String::from_utf8_lossy(&b)
        );
        assert_eq!(saved.exists(), *want == StatusCode::OK, "case {i}");
    }
    // Reads stay open to plain GETs.
    let (s, _) = call_with(&app, "GET", "/api/v1/sessions", "", &[]).await;
    assert_eq!(s, StatusCode::OK);
}

/// D6 (issue 12): idle and slow sockets cannot stop the service. Sockets that never finish a
/// request header are dropped after the header timeout, idle keep-alive connections too, and at
/// most `max_connections` are served at once; a real client opening its connection after 24
/// such sockets is still answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_idle_sockets_cannot_stop_the_service() {
    use std::time::{Duration, Instant};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    let f = fixture().await;
    let (app, _) = server::app(&config(&f, None)).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let limits = p5_web::serve::Limits {
        header_timeout: Duration::from_secs(1),
        max_connections: 8,
        ..p5_web::serve::Limits::default()
    };
    tokio::spawn(p5_web::serve::serve(
        listener,
        app,
        limits,
        std::future::pending(),
    ));
    let request = format!("GET /api/v1/sessions HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    // Read until the peer closes (Ok(true)) or `limit` passes (Ok(false)); the bytes read.
    async fn until_closed(s: &mut TcpStream, limit: Duration) -> (bool, Vec<u8>) {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let end = Instant::now() + limit;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return (true, got),
                Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
                Err(_) => return (false, got),
            }
        }
    }
    // 24 slow sockets: each sends half a request header and nothing more.
    let mut slow = Vec::new();
    for _ in 0..24 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /api/v1/sessions HTTP/1.1\r\nHost: 12")
            .await
            .unwrap();
        slow.push(s);
    }
    // A real client behind them is answered once the slow ones time out.
    let t = Instant::now();
    let mut real = TcpStream::connect(addr).await.unwrap();
    real.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), real.read(&mut buf))
            .await
            .expect("the real client is answered while the slow sockets are open")
            .unwrap();
        assert!(n > 0, "closed before answering");
        head.extend_from_slice(&buf[..n]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    eprintln!(
        "real client answered after {:?} behind 24 slow sockets",
        t.elapsed()
    );
    // The slow sockets were dropped by the server, silent or not.
    for (i, s) in slow.iter_mut().enumerate().take(2) {
        let (closed, _) = until_closed(s, Duration::from_secs(5)).await;
        assert!(closed, "slow socket {i} (silent: {}) is closed", i % 2 == 0);
    }
    // The real client's keep-alive connection, idle after its answer, is closed too.
    let (closed, _) = until_closed(&mut real, Duration::from_secs(5)).await;
    assert!(closed, "an idle keep-alive connection is closed");
    // The server is still serving.
    let mut again = TcpStream::connect(addr).await.unwrap();
    again.write_all(request.as_bytes()).await.unwrap();
    let (_, got) = until_closed(&mut again, Duration::from_secs(3)).await;
    assert!(
        got.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&got)
    );
}

/// A database written before the analysis tables existed (migration 0002, kept by
/// `p5-tracedb` as test data) still answers the analysis routes: no runs, clear 404s.
#[tokio::test]
async fn an_older_database_has_no_runs_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("old.sqlite");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tracedb/test_data/merged-v0002.sqlite"),
        &db,
    )
    .unwrap();
    let cfg = Config {
        db: format!("sqlite:{}", db.display()),
        select_dir: None,
        token: None,
        cache_dir: None,
    };
    let (app, _) = server::app(&cfg).await.unwrap();
    let (s, sessions) = get_json(&app, "/api/v1/sessions").await;
    assert_eq!(s, StatusCode::OK, "{sessions}");
    let sid = sessions[0]["id"].as_i64().unwrap();
    let (s, v) = get_json(&app, &format!("/api/v1/sessions/{sid}/runs")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["runs"], serde_json::json!([]));
    for uri in [
        format!("/api/v1/sessions/{sid}/runs/1/paths"),
        format!("/api/v1/sessions/{sid}/runs/1/graph"),
        format!("/api/v1/compare/paths?a={sid}:1&b={sid}:1"),
    ] {
        let (s, v) = get_json(&app, &uri).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{uri}: {v}");
        assert!(
            v["error"].as_str().unwrap().contains("no analysis run"),
            "{v}"
        );
    }
    let (s, v) = get_json(&app, &format!("/api/v1/compare/stats?a={sid}&b={sid}")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
}
