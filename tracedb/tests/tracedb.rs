//! Integration tests of the trace database: the migrations of both backends create exactly
//! the tables `schema` defines (names, order, types, nullability), on a real SQLite file and
//! a real PostgreSQL (`P5_TEST_PG_URL`, else `postgres://postgres@127.0.0.1:5432/test`; a
//! fresh schema per test); a database written before this crate existed opens and reads;
//! typed analysis writes round-trip; opening fails clearly.

use p5_tracedb::schema::{self, Row};
use p5_tracedb::testing::PgSchema;
use p5_tracedb::{Db, DbUrl, Reader, read};
use sqlx::Connection;
use std::path::Path;

/// `(name, type, nullable)` of a table's columns in order, as the database says.
async fn sqlite_columns(
    c: &mut sqlx::SqliteConnection,
    table: &str,
) -> Vec<(String, String, bool)> {
    let sql = format!(
        "SELECT name, type, \"notnull\", pk FROM pragma_table_info('{table}') ORDER BY cid"
    );
    let rows: Vec<(String, String, i64, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .fetch_all(c)
        .await
        .unwrap();
    rows.into_iter()
        .map(|(n, t, notnull, pk)| (n, t, notnull == 0 && pk == 0))
        .collect()
}

async fn pg_columns(c: &mut sqlx::PgConnection, table: &str) -> Vec<(String, String, bool)> {
    let rows: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT column_name::TEXT, UPPER(data_type)::TEXT, is_nullable::TEXT \
         FROM information_schema.columns WHERE table_schema = current_schema() \
         AND table_name = $1 ORDER BY ordinal_position",
    )
    .bind(table)
    .fetch_all(c)
    .await
    .unwrap();
    rows.into_iter()
        .map(|(n, t, null)| (n, t, null == "YES"))
        .collect()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The migrations and `schema` agree, column by column, on both backends.
#[test]
fn the_migrations_create_exactly_the_defined_tables() {
    let tmp = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let lite = DbUrl::sqlite_file(&tmp.path().join("t.sqlite"));
        Db::open(&lite).await.unwrap().close().await.unwrap();
        let pg = PgSchema::new("p5tracedb").await;
        let pg_url = DbUrl::parse(&pg.url()).unwrap();
        Db::open(&pg_url).await.unwrap().close().await.unwrap();
        let mut l = sqlx::SqliteConnection::connect(lite.as_str())
            .await
            .unwrap();
        let mut p = sqlx::PgConnection::connect(pg_url.as_str()).await.unwrap();
        let mut tables = 0;
        for t in schema::all() {
            let want_l: Vec<_> = t
                .columns
                .iter()
                .map(|c| (c.name.to_owned(), c.ty.sqlite.to_owned(), c.ty.nullable))
                .collect();
            let want_p: Vec<_> = t
                .columns
                .iter()
                .map(|c| (c.name.to_owned(), c.ty.postgres.to_owned(), c.ty.nullable))
                .collect();
            assert_eq!(
                sqlite_columns(&mut l, t.name).await,
                want_l,
                "SQLite {}",
                t.name
            );
            assert_eq!(
                pg_columns(&mut p, t.name).await,
                want_p,
                "PostgreSQL {}",
                t.name
            );
            tables += 1;
        }
        assert_eq!(tables, 32);
        // Nothing in the databases that `schema` does not define (sqlx's own table aside).
        let names: Vec<(String,)> = sqlx::query_as(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name <> '_sqlx_migrations' \
             ORDER BY name",
        )
        .fetch_all(&mut l)
        .await
        .unwrap();
        assert_eq!(names.len(), tables);
        p.close().await.unwrap();
        drop(pg);
    });
}

/// `tracedb/test_data/merged-v0002.sqlite` was written by `p5 merge` before this crate
/// existed (migrations 0001 and 0002): it opens read-only and reads.
#[test]
fn a_database_written_by_older_code_reads() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/merged-v0002.sqlite");
    rt().block_on(async {
        let db = Reader::open(&DbUrl::sqlite_file(&file)).await.unwrap();
        assert_eq!(db.schema_version().await.unwrap(), 2);
        let s = read::sessions(&db).await.unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].name, "skew");
        let sid = s[0].id;
        let procs = read::processes(&db, sid).await.unwrap();
        assert!(procs.iter().any(|p| p.runtime == "os-monitor"));
        assert_eq!(
            read::messages(&db, sid).await.unwrap().len() as i64,
            s[0].matched
        );
        let states = read::states(&db, sid, p5_tracedb::domain::ThreadState::NAMES)
            .await
            .unwrap();
        assert!(
            states.iter().all(|r| (r.state as usize) < 6),
            "every state name is known"
        );
        assert!(!read::intervals(&db, sid).await.unwrap().is_empty());
        assert!(!read::overview(&db, sid, &[]).await.unwrap().is_empty());
        db.close().await;
    });
}

/// Analysis rows are written in one transaction; rows of another run are refused.
#[test]
fn analysis_rows_round_trip_and_mismatched_rows_are_refused() {
    use schema::{AnalysisRun, PathInstance};
    let tmp = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let url = DbUrl::sqlite_file(&tmp.path().join("a.sqlite"));
        let mut db = Db::open(&url).await.unwrap();
        let run = AnalysisRun {
            session_id: 7,
            id: db.next_run_id(7).await.unwrap(),
            algorithm: "nesting".into(),
            params_json: "{\"overlap\":2}".into(),
            source: "sql".into(),
            session_merged_at_wall_ns: 5,
            created_at_wall_ns: 6,
            messages: 0,
        };
        assert_eq!(run.id, 1);
        let inst = |run_id| PathInstance {
            session_id: 7,
            run_id,
            id: 1,
            pattern_id: 1,
            prob: 0.25,
            t_start: 1,
            t_end: 2,
        };
        let bad = p5_tracedb::analysis::RunResults {
            instances: vec![inst(2)],
            ..Default::default()
        };
        assert!(db.write_analysis(run.clone(), bad).await.is_err());
        let good = p5_tracedb::analysis::RunResults {
            instances: vec![inst(1)],
            ..Default::default()
        };
        db.write_analysis(run.clone(), good).await.unwrap();
        assert_eq!(db.next_run_id(7).await.unwrap(), 2);
        db.delete_analysis(7, 1).await.unwrap();
        assert_eq!(db.next_run_id(7).await.unwrap(), 1);
        db.close().await.unwrap();
        let mut v = Vec::new();
        inst(1).push_values(&mut v);
        assert_eq!(v.len(), schema::PATH_INSTANCE.columns.len());
    });
}

/// Flow rows (migration 0009) are written in one transaction with their run, read back
/// equal on SQLite and PostgreSQL, refused when they name another run, and deleted with it.
#[test]
fn flow_rows_round_trip_on_both_backends() {
    use schema::{AnalysisRun, Flow, FlowDiff, FlowPath, FlowSegment};
    let tmp = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let pg = PgSchema::new("p5tracedbflows").await;
        for url in [
            DbUrl::sqlite_file(&tmp.path().join("f.sqlite")),
            DbUrl::parse(&pg.url()).unwrap(),
        ] {
            let mut db = Db::open(&url).await.unwrap();
            let run = AnalysisRun {
                session_id: 3,
                id: db.next_run_id(3).await.unwrap(),
                algorithm: "flows".into(),
                params_json: "{}".into(),
                source: "sql".into(),
                session_merged_at_wall_ns: 1,
                created_at_wall_ns: 2,
                messages: 4,
            };
            let rows = |run_id| p5_tracedb::analysis::FlowResults {
                flows: vec![Flow {
                    session_id: 3,
                    run_id,
                    id: 1,
                    start_ref: "sensor:handle".into(),
                    thread_id: 9,
                    t_start: 10,
                    t_end: 20,
                    events: 5,
                    messages: 2,
                    bytes: 300,
                    suspect_score: Some(1.5),
                    suspect_rank: Some(1),
                    label: None,
                }],
                segments: vec![FlowSegment {
                    session_id: 3,
                    run_id,
                    flow_id: 1,
                    thread_id: 9,
                    t_start: 10,
                    t_end: 20,
                }],
                paths: vec![FlowPath {
                    session_id: 3,
                    run_id,
                    flow_id: 1,
                    path: "main→handle".into(),
                    first_t: 11,
                    time_ns: 9,
                    bytes: 300,
                }],
                diffs: vec![FlowDiff {
                    session_id: 3,
                    run_id,
                    id: 1,
                    side: "anomalous".into(),
                    path: "main".into(),
                    merged_leaves: Some("A,D".into()),
                    first_t: 12,
                    len: 2,
                    rank_time: 1,
                    rank_len: 1,
                }],
            };
            assert!(db.write_flows(run.clone(), rows(run.id + 1)).await.is_err());
            db.write_flows(run.clone(), rows(run.id)).await.unwrap();
            db.close().await.unwrap();
            let r = Reader::open(&url).await.unwrap();
            let want = rows(run.id);
            assert_eq!(read::flows(&r, 3, run.id).await.unwrap(), want.flows);
            assert_eq!(
                read::flow_segments(&r, 3, run.id).await.unwrap(),
                want.segments
            );
            assert_eq!(read::flow_paths(&r, 3, run.id).await.unwrap(), want.paths);
            assert_eq!(read::flow_diffs(&r, 3, run.id).await.unwrap(), want.diffs);
            r.close().await;
            // A large run goes in several chunks, all of it.
            let mut db = Db::open(&url).await.unwrap();
            let mut big = rows(run.id + 1);
            let p = big.paths[0].clone();
            big.paths = (0..100_001)
                .map(|i| FlowPath {
                    first_t: i,
                    ..p.clone()
                })
                .collect();
            let run2 = AnalysisRun {
                id: run.id + 1,
                ..run.clone()
            };
            db.write_flows(run2, big).await.unwrap();
            db.close().await.unwrap();
            let r = Reader::open(&url).await.unwrap();
            assert_eq!(
                read::flow_paths(&r, 3, run.id + 1).await.unwrap().len(),
                100_001
            );
            r.close().await;
            let mut db = Db::open(&url).await.unwrap();
            db.delete_analysis(3, run.id).await.unwrap();
            db.close().await.unwrap();
            let r = Reader::open(&url).await.unwrap();
            assert!(read::flows(&r, 3, run.id).await.unwrap().is_empty());
            assert!(read::flow_diffs(&r, 3, run.id).await.unwrap().is_empty());
            r.close().await;
        }
    });
}

/// Opening fails at once with a message that says what is wrong.
#[test]
fn opening_fails_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let missing = DbUrl::sqlite_file(&tmp.path().join("missing.sqlite"));
        let e = Reader::open(&missing).await.unwrap_err().to_string();
        assert!(e.contains("cannot connect"), "{e}");
        let empty = tmp.path().join("empty.sqlite");
        std::fs::write(&empty, b"").unwrap();
        let e = Reader::open(&DbUrl::sqlite_file(&empty))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not a p5 database") && e.contains("empty"),
            "{e}"
        );
        let junk = tmp.path().join("junk.sqlite");
        std::fs::write(&junk, vec![b'x'; 4096]).unwrap();
        let e = Db::open(&DbUrl::sqlite_file(&junk))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a p5 database"), "{e}");
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let url = DbUrl::parse(&format!("postgres://postgres:pw@127.0.0.1:{port}/test")).unwrap();
        let t = std::time::Instant::now();
        let e = Db::open(&url).await.unwrap_err().to_string();
        assert!(
            t.elapsed() < p5_tracedb::connect::CONNECT_TIMEOUT + std::time::Duration::from_secs(1)
        );
        assert!(e.contains("refused") && !e.contains("pw@"), "{e}");
        let e = Reader::open(&url).await.unwrap_err().to_string();
        assert_eq!(e.matches("refused").count(), 1, "{e}");
    });
}

/// `read::for_each_message_end` returns exactly a session's messages whatever the table
/// holds around them: two sessions whose rows interleave in the table (a session re-merged,
/// rows appended later, an id order unlike the insert order), with NULL ends, on SQLite (read
/// on the raw handle by rowid range plus the rows outside it) and PostgreSQL.
#[test]
fn message_ends_of_one_session_whatever_the_table_order() {
    let tmp = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let pg = PgSchema::new("p5tracedb").await;
        for url in [
            DbUrl::sqlite_file(&tmp.path().join("m.sqlite")),
            DbUrl::parse(&pg.url()).unwrap(),
        ] {
            let db = Db::open(&url).await.unwrap();
            db.close().await.unwrap();
            let insert = |sid: i64, id: i64| {
                let send_t = if id % 3 == 0 {
                    "NULL".to_owned()
                } else {
                    (id * 10).to_string()
                };
                let dir = ["'call'", "'return'", "NULL"][(id % 3) as usize];
                format!(
                    "INSERT INTO message (session_id, id, proto, bytes, send_process_id, \
                     send_thread_id, send_t, recv_process_id, recv_thread_id, recv_end, \
                     recv_calls, violation, connection_id, direction, ordinal) VALUES \
                     ({sid}, {id}, 'tcp', {}, 1, 2, {send_t}, 3, 4, {}, 1, 0, 9, {dir}, {})",
                    id * 7,
                    id * 10 + 5,
                    id / 2
                )
            };
            // Session 2 in the middle of session 1's rows, session 1's ids out of order.
            let mut sql: Vec<String> = Vec::new();
            sql.extend((50..60).map(|id| insert(1, id)));
            sql.extend((1..30).map(|id| insert(2, id)));
            sql.extend((1..50).rev().map(|id| insert(1, id)));
            sql.extend((30..40).map(|id| insert(2, id)));
            sql.extend((60..70).map(|id| insert(1, id)));
            let reader = Reader::open(&url).await.unwrap();
            match &reader {
                Reader::Sqlite(_) => {
                    let mut c = sqlx::SqliteConnection::connect(url.as_str()).await.unwrap();
                    for q in &sql {
                        sqlx::query(sqlx::AssertSqlSafe(q.as_str()))
                            .execute(&mut c)
                            .await
                            .unwrap();
                    }
                }
                Reader::Postgres(p) => {
                    for q in &sql {
                        sqlx::query(sqlx::AssertSqlSafe(q.as_str()))
                            .execute(p)
                            .await
                            .unwrap();
                    }
                }
            }
            for (sid, want) in [(1i64, 1..70), (2, 1..40)] {
                let mut got = Vec::new();
                let n = read::for_each_message_end(&reader, sid, |m| got.push(m))
                    .await
                    .unwrap();
                assert_eq!(n as usize, got.len(), "{url}");
                got.sort_by_key(|m| m.id);
                let ids: Vec<i64> = got.iter().map(|m| m.id).collect();
                assert_eq!(ids, want.collect::<Vec<_>>(), "{url} session {sid}");
                for m in &got {
                    let id = m.id;
                    assert_eq!(m.bytes, id * 7);
                    assert_eq!(m.send_t, (id % 3 != 0).then_some(id * 10), "{url}");
                    assert_eq!(m.recv_end, Some(id * 10 + 5));
                    assert_eq!((m.send_process, m.send_thread), (Some(1), Some(2)));
                    assert_eq!((m.recv_process, m.recv_thread), (Some(3), Some(4)));
                    assert_eq!(m.connection, Some(9));
                    assert_eq!(m.ordinal, Some(id / 2));
                    let dir = [
                        Some(p5_tracedb::domain::Direction::Call),
                        Some(p5_tracedb::domain::Direction::Return),
                        None,
                    ][(id % 3) as usize];
                    assert_eq!(m.direction, dir, "{url}");
                }
            }
            reader.close().await;
        }
    });
}
