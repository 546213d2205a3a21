//! Benchmark of the analysis views' queries (budget: a list of 10 k patterns ≤ 200 ms;
//! issue 20). `cargo bench -p p5-web --bench paths` writes a SQLite database holding the
//! web tests' small session and two analysis runs of `P5_BENCH_PATTERNS` patterns (default
//! 10,000; 5 nodes, 4 histogram rows per node and 10 instances each), then measures through
//! the real router and JSON encoding, median of 5 after one warm-up: the pattern list
//! under every sort, one pattern's detail, the run's graph and the comparison of the runs.

#[path = "../tests/fixture/mod.rs"]
#[allow(unused_macros)]
mod fixture;

use axum::body::Body;
use axum::http::{Request, header};
use fixture::V;
use std::time::{Duration, Instant};
use tower::ServiceExt;

const MERGED: i64 = 1_790_000_000_000_000_000;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: i64 = std::env::var("P5_BENCH_PATTERNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let dir = tempfile::tempdir().expect("temp dir");
    // P5_BENCH_DB keeps the database where it says (to look at the query plans).
    let path = std::env::var_os("P5_BENCH_DB")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| dir.path().join("paths.db"));
    let _ = std::fs::remove_file(&path);
    let t = Instant::now();
    let pool = fixture::create(&path).await;
    fixture::small(&pool).await;
    for run in [1, 2] {
        generate(&pool, run, n).await;
    }
    pool.close().await;
    println!("generated 2 runs of {n} patterns in {:.1?}", t.elapsed());
    let cfg = p5_web::server::Config {
        db: format!("sqlite:{}", path.display()),
        select_dir: None,
        token: None,
        cache_dir: None,
    };
    let (app, _) = p5_web::server::app(&cfg).await.expect("open");
    for sort in p5_web::paths::SORTS {
        let uri = format!("/api/v1/sessions/1/runs/1/paths?sort={sort}&limit=10000");
        let (d, kib) = median(&app, &uri).await;
        let verdict = if d <= Duration::from_millis(200) {
            "met"
        } else {
            "NOT MET"
        };
        println!(
            "list of {n} patterns by {sort:<27} {d:>9.2?} ({kib} KiB)  budget 200 ms: {verdict}"
        );
    }
    for (what, uri) in [
        (
            "one pattern's detail",
            format!("/api/v1/sessions/1/runs/1/paths/{}", n.min(17)),
        ),
        (
            "the run's graph (200 heaviest)",
            "/api/v1/sessions/1/runs/1/graph".to_string(),
        ),
        (
            "compare the two runs (50 matched)",
            "/api/v1/compare/paths?a=1:1&b=1:2".to_string(),
        ),
        (
            "an instance on the Gantt",
            "/api/v1/sessions/1/runs/1/instances/3".to_string(),
        ),
    ] {
        let (d, kib) = median(&app, &uri).await;
        println!("{what:<42} {d:>9.2?} ({kib} KiB)");
    }
}

/// Median of 5 answers after a warm-up, and the answer's size.
async fn median(app: &axum::Router, uri: &str) -> (Duration, usize) {
    let mut times = Vec::new();
    let mut size = 0;
    for i in 0..6 {
        let req = Request::builder()
            .uri(uri)
            .header(header::HOST, "localhost")
            .body(Body::empty())
            .expect("request");
        let t = Instant::now();
        let resp = app.clone().oneshot(req).await.expect("answer");
        assert!(resp.status().is_success(), "{uri}: {}", resp.status());
        let b = axum::body::to_bytes(resp.into_body(), 1 << 30)
            .await
            .expect("body");
        if i > 0 {
            times.push(t.elapsed());
        }
        size = b.len() / 1024;
    }
    times.sort();
    (times[times.len() / 2], size)
}

/// Run `run` of session 1: `n` patterns of 5 nodes (a client, a front end, two back ends, a
/// database) whose weights fall off like a real run's; 10 instances each over the
/// fixture's 24 messages.
async fn generate(pool: &sqlx::SqlitePool, run: i64, n: i64) {
    use p5_tracedb::schema::{
        ANALYSIS_RUN, PATH_INSTANCE, PATH_INSTANCE_MESSAGE, PATH_NODE, PATH_NODE_HIST, PATH_PATTERN,
    };
    let r = vec![
        V::I(1),
        V::I(run),
        V::T("linking".into()),
        V::T("{}".into()),
        V::T("sql".into()),
        V::I(MERGED),
        V::I(MERGED + run),
        V::I(24),
    ];
    fixture::insert(pool, "analysis_run", &ANALYSIS_RUN.names(), &[r]).await;
    let (mut pats, mut nodes, mut hist, mut inst, mut msgs) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let names = ["client", "front", "back1", "back2", "db"];
    for p in 1..=n {
        let count = 1 + 100_000 / p;
        let e = count as f64 * (0.3 + 0.7 * ((p * 7919) % 100) as f64 / 100.0);
        let mean = 1_000_000 + (p * 104_729) % 9_000_000 + run * 1000;
        pats.push(vec![
            V::I(1),
            V::I(run),
            V::I(p),
            V::T(format!("client>front(back1(db),back2#{p})")),
            V::T("client".into()),
            V::I(count),
            V::F(e),
            V::F(0.9),
            V::I(mean),
            V::I(mean),
            V::I(mean * 2),
            V::I(p),
        ]);
        for (k, name) in names.iter().enumerate() {
            let id = (p - 1) * 5 + k as i64 + 1;
            let parent = match k {
                0 => V::N,
                1 => V::I(id - 1),
                2 | 3 => V::I(id - k as i64 + 1),
                _ => V::I(id - 2),
            };
            let lat = mean / (k as i64 + 1);
            nodes.push(vec![
                V::I(1),
                V::I(run),
                V::I(p),
                V::I(id),
                parent,
                V::I(k as i64),
                V::T((*name).into()),
                V::T("node".into()),
                V::T("call".into()),
                V::I(k as i64 * 10_000),
                V::I(lat),
                V::I(20_000),
                V::I(count),
            ]);
            for (j, w) in [0.5, 0.4, 0.1, 0.0].iter().enumerate() {
                hist.push(vec![
                    V::I(1),
                    V::I(run),
                    V::I(id),
                    V::I(lat / 2 * (j as i64 + 1)),
                    V::F(*w),
                ]);
            }
        }
        for i in 0..10 {
            let id = (p - 1) * 10 + i + 1;
            let t = 1_000_000 + i * 3_000_000;
            inst.push(vec![
                V::I(1),
                V::I(run),
                V::I(id),
                V::I(p),
                V::F(0.5),
                V::I(t),
                V::I(t + mean),
            ]);
            for m in [2 * i + 1, 2 * i + 2] {
                msgs.push(vec![
                    V::I(1),
                    V::I(run),
                    V::I(id),
                    V::I(m),
                    V::I((p - 1) * 5 + 1),
                ]);
            }
        }
    }
    fixture::insert(pool, "path_pattern", &PATH_PATTERN.names(), &pats).await;
    fixture::insert(pool, "path_node", &PATH_NODE.names(), &nodes).await;
    fixture::insert(pool, "path_node_hist", &PATH_NODE_HIST.names(), &hist).await;
    fixture::insert(pool, "path_instance", &PATH_INSTANCE.names(), &inst).await;
    fixture::insert(
        pool,
        "path_instance_message",
        &PATH_INSTANCE_MESSAGE.names(),
        &msgs,
    )
    .await;
}
