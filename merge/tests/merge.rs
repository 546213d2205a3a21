//! Integration tests of `p5 merge`: fixture stores built from the wire encoders are merged
//! into SQLite and PostgreSQL, and SQL queries (`test_data/<case>/<name>.sql`) are compared
//! with expected CSV files (`<name>.csv`; `P5_BLESS=1` rewrites them). Both backends must
//! give the same CSV. PostgreSQL: `P5_TEST_PG_URL`, else `postgres://postgres@127.0.0.1:5432/test`
//! (`scripts/pg-test-server.sh` starts a throwaway server and prints the URL to export).

mod fixture;

use fixture::*;
use p5_merge::{MergeOptions, SessionSummary};
use p5_tracedb::testing::PgSchema;
use p5_wire::data::Name;
use p5_wire::manifest::{Manifest, Sensor, SourceFile};
use p5_wire::{CommOp, Endpoint, Event, SocketProto};
use sqlx::{Column, Connection, Row, TypeInfo};
use std::path::{Path, PathBuf};

const S_MAIN: u64 = 0x5050_0000_0000_0001;
const S_SERVE: u64 = 0x5050_0000_0000_0002;
const S_COMPUTE: u64 = 0x5050_0000_0000_0004;
const S_HELPER: u64 = 0x5050_0000_0000_0008;
const S_REQUEST: u64 = 0x5050_0000_0000_0006;
const C_SEND: u64 = 0x5050_0000_0000_0105;
const C_RECV: u64 = 0x5050_0000_0000_0106;
const C_SRECV: u64 = 0x5050_0000_0000_0102;
const C_SSEND: u64 = 0x5050_0000_0000_0103;
const C_UDP: u64 = 0x5050_0000_0000_0110;
const M_REPLIES: u64 = 0x5050_0000_0000_0201;
const S_UNKNOWN: u64 = 0x7777_0000_0000_0001;

fn ep(s: &str) -> Endpoint {
    Endpoint::Inet(s.parse().unwrap())
}

fn comm(t: i64, sensor: u64, op: CommOp, fd: i64, dur: i64, result: i64, peer: Endpoint) -> Event {
    Event::Comm {
        t: t as u64,
        sensor,
        op,
        fd,
        duration: dur as u64,
        result,
        peer,
    }
}

fn sock(t: i64, fd: i64, proto: SocketProto, local: &str, peer: &str) -> Event {
    Event::Socket {
        t: t as u64,
        sensor: 0,
        fd,
        proto,
        local: ep(local),
        peer: ep(peer),
    }
}

/// True clocks of the skew scenario.
const CLIENT: Clock = Clock {
    offset: 500_000_000,
    drift: 80e-6,
};
const SERVER: Clock = Clock {
    offset: 200_000_000,
    drift: -50e-6,
};
const MS: i64 = 1_000_000;
const US: i64 = 1_000;

fn on(c: Clock, evs: Vec<(i64, Event)>) -> Vec<Event> {
    // Events are given in true time; convert each to the process's local clock.
    let mut out: Vec<Event> = evs
        .into_iter()
        .map(|(t, e)| {
            let local = c.to_local(t) as u64;
            let d = |dur: u64| (c.to_local(t + dur as i64) as u64).saturating_sub(local);
            match e {
                Event::Enter { sensor, .. } => Event::Enter { t: local, sensor },
                Event::Exit { sensor, .. } => Event::Exit { t: local, sensor },
                Event::Mark { sensor, .. } => Event::Mark { t: local, sensor },
                Event::Counter { sensor, value, .. } => Event::Counter {
                    t: local,
                    sensor,
                    value,
                },
                Event::Comm {
                    sensor,
                    op,
                    fd,
                    duration,
                    result,
                    peer,
                    ..
                } => Event::Comm {
                    t: local,
                    sensor,
                    op,
                    fd,
                    duration: d(duration),
                    result,
                    peer,
                },
                Event::Socket {
                    sensor,
                    fd,
                    proto,
                    local: l,
                    peer,
                    ..
                } => Event::Socket {
                    t: local,
                    sensor,
                    fd,
                    proto,
                    local: l,
                    peer,
                },
                Event::Switch {
                    cpu,
                    prev_tid,
                    prev_state,
                    next_tid,
                    ..
                } => Event::Switch {
                    t: local,
                    cpu,
                    prev_tid,
                    prev_state,
                    next_tid,
                },
                Event::Wakeup { cpu, tid, .. } => Event::Wakeup { t: local, cpu, tid },
                Event::Irq {
                    cpu,
                    irq,
                    duration,
                    handled,
                    ..
                } => Event::Irq {
                    t: local,
                    cpu,
                    irq,
                    duration: d(duration),
                    handled,
                },
                other => other,
            }
        })
        .collect();
    out.sort_by_key(|e| e.time());
    out
}

const REQUESTS: i64 = 60;

fn request_time(i: i64) -> i64 {
    700 * MS + i * 40 * MS
}

/// Client on host alpha, server and OS monitor on host beta, a host agent on alpha with
/// metrics, and a spool-imported process without receipt times.
fn skew_processes() -> Vec<SimProcess> {
    let none = || Endpoint::None;
    // Client.
    let mut c: Vec<(i64, Event)> = vec![
        (
            600 * MS,
            Event::Enter {
                t: 0,
                sensor: S_MAIN,
            },
        ),
        (
            610 * MS,
            comm(
                0,
                C_SEND,
                CommOp::Connect,
                3,
                50 * US,
                0,
                ep("10.0.0.2:7000"),
            ),
        ),
        (
            610 * MS + 50 * US,
            sock(0, 3, SocketProto::Tcp, "10.0.0.1:40000", "10.0.0.2:7000"),
        ),
        (
            611 * MS,
            sock(0, 4, SocketProto::Udp, "0.0.0.0:5000", "0.0.0.0:0"),
        ),
    ];
    for i in 0..REQUESTS {
        let t = request_time(i);
        c.push((
            t,
            Event::Enter {
                t: 0,
                sensor: S_REQUEST,
            },
        ));
        c.push((t + US, comm(0, C_SEND, CommOp::Send, 3, 5 * US, 60, none())));
        c.push((
            t + 10 * US,
            comm(0, C_SEND, CommOp::Send, 3, 4 * US, 40, none()),
        ));
        if i % 5 == 0 {
            c.push((
                t + 15 * US,
                comm(0, C_UDP, CommOp::SendTo, 4, 3 * US, 32, ep("10.0.0.2:9000")),
            ));
        }
        c.push((
            t + 20 * US,
            comm(0, C_RECV, CommOp::Recv, 3, 2 * MS + 40 * US, 100, none()),
        ));
        c.push((
            t + 2 * MS + 65 * US,
            comm(0, C_RECV, CommOp::Recv, 3, US, 100, none()),
        ));
        c.push((
            t + 2 * MS + 70 * US,
            comm(0, C_RECV, CommOp::Recv, 3, US, 100, none()),
        ));
        c.push((
            t + 2 * MS + 80 * US,
            Event::Exit {
                t: 0,
                sensor: S_REQUEST,
            },
        ));
        c.push((
            t + 2 * MS + 90 * US,
            Event::Counter {
                t: 0,
                sensor: M_REPLIES,
                value: i + 1,
            },
        ));
    }
    let end = request_time(REQUESTS);
    c.push((
        end,
        Event::Mark {
            t: 0,
            sensor: S_MAIN,
        },
    ));
    c.push((
        end + MS,
        Event::Exit {
            t: 0,
            sensor: S_MAIN,
        },
    ));

    // Server: one thread serving TCP, one receiving UDP.
    let mut s1: Vec<(i64, Event)> = vec![
        (
            550 * MS,
            Event::Enter {
                t: 0,
                sensor: S_SERVE,
            },
        ),
        (
            560 * MS,
            comm(
                0,
                C_SRECV,
                CommOp::Accept,
                5,
                50 * MS + 100 * US,
                7,
                ep("10.0.0.1:40000"),
            ),
        ),
        (
            610 * MS + 200 * US,
            sock(0, 7, SocketProto::Tcp, "10.0.0.2:7000", "10.0.0.1:40000"),
        ),
    ];
    let mut s2: Vec<(i64, Event)> = vec![(
        555 * MS,
        sock(0, 8, SocketProto::Udp, "0.0.0.0:9000", "0.0.0.0:0"),
    )];
    let mut mon: Vec<(i64, Event)> = Vec::new();
    for i in 0..REQUESTS {
        let t = request_time(i);
        let from = if i == 0 {
            611 * MS
        } else {
            request_time(i - 1) + 2 * MS + 20 * US
        };
        // One read gets both sends (several messages per read).
        s1.push((
            from,
            comm(0, C_SRECV, CommOp::Recv, 7, t + 70 * US - from, 100, none()),
        ));
        s1.push((
            t + 80 * US,
            Event::Enter {
                t: 0,
                sensor: S_COMPUTE,
            },
        ));
        s1.push((
            t + 100 * US,
            Event::Enter {
                t: 0,
                sensor: S_HELPER,
            },
        ));
        s1.push((
            t + 900 * US,
            Event::Exit {
                t: 0,
                sensor: S_HELPER,
            },
        ));
        s1.push((
            t + 1900 * US,
            Event::Exit {
                t: 0,
                sensor: S_COMPUTE,
            },
        ));
        s1.push((
            t + 2 * MS,
            comm(0, C_SSEND, CommOp::Write, 7, 10 * US, 300, none()),
        ));
        if i % 5 == 0 && i != 10 {
            s2.push((
                t + 30 * US,
                comm(
                    0,
                    C_UDP,
                    CommOp::RecvFrom,
                    8,
                    40 * US,
                    32,
                    ep("10.0.0.1:5000"),
                ),
            ));
        }
        mon.push((
            t + 55 * US,
            Event::Irq {
                t: 0,
                cpu: 0,
                irq: 24,
                duration: 3 * US as u64,
                handled: 1,
            },
        ));
        mon.push((
            t + 58 * US,
            Event::Wakeup {
                t: 0,
                cpu: 0,
                tid: 2001,
            },
        ));
        mon.push((
            t + 60 * US,
            Event::Switch {
                t: 0,
                cpu: 0,
                prev_tid: 0,
                prev_state: b'R',
                next_tid: 2001,
            },
        ));
        mon.push((
            t + 2 * MS + 20 * US,
            Event::Switch {
                t: 0,
                cpu: 0,
                prev_tid: 2001,
                prev_state: b'S',
                next_tid: 0,
            },
        ));
    }
    s1.push((
        request_time(REQUESTS) + 3 * MS,
        Event::Exit {
            t: 0,
            sensor: S_SERVE,
        },
    ));

    // Host agent metrics every 100 ms.
    let mut h: Vec<(i64, Event)> = Vec::new();
    for k in 0..30 {
        let t = 650 * MS + k * 100 * MS;
        h.push((
            t,
            Event::Counter {
                t: 0,
                sensor: 1,
                value: 1000 + 37 * k,
            },
        ));
        h.push((
            t,
            Event::Counter {
                t: 0,
                sensor: 2,
                value: 5000 * k,
            },
        ));
    }

    let monitor = Clock {
        offset: SERVER.to_true(100 * MS),
        drift: SERVER.drift,
    };
    let agent = Clock {
        offset: CLIENT.to_true(-1000 * MS),
        drift: CLIENT.drift,
    };
    // Spool-imported process: no receipt times, one unknown sensor.
    let lone = vec![
        Event::Enter {
            t: 1_000,
            sensor: S_UNKNOWN,
        },
        Event::Exit {
            t: 9_000,
            sensor: S_UNKNOWN,
        },
        Event::Exit {
            t: 9_500,
            sensor: S_MAIN,
        },
    ];
    vec![
        SimProcess {
            identity: identity(0xC1, 100, "boot-a", "alpha", "client", 5_000_000_000, 2),
            clock: CLIENT,
            streams: vec![(1, 1, 1001, "client".into(), on(CLIENT, c))],
            names: vec![],
            tree: vec![],
            pings: true,
            timed: true,
        },
        SimProcess {
            identity: identity(0x51, 200, "boot-b", "beta", "server", 9_000_000_000, 2),
            clock: SERVER,
            streams: vec![
                (1, 1, 2001, "server".into(), on(SERVER, s1)),
                (2, 1, 2002, "udp".into(), on(SERVER, s2)),
            ],
            names: vec![],
            tree: vec![],
            pings: true,
            timed: true,
        },
        SimProcess {
            identity: identity(0x52, 201, "boot-b", "beta", "osmon", 9_100_000_000, 6),
            clock: monitor,
            streams: vec![(1, 3, 0, "kernel".into(), on(monitor, mon))],
            names: vec![],
            tree: vec![],
            pings: false,
            timed: true,
        },
        SimProcess {
            identity: identity(0xA2, 101, "boot-a", "alpha", "hostagent", 4_000_000_000, 5),
            clock: agent,
            streams: vec![(1, 2, 0, "metrics".into(), on(agent, h))],
            names: vec![
                Name {
                    id: 1,
                    name: "cpu.total.busy".into(),
                    unit: "%".into(),
                    scale_exp: -2,
                },
                Name {
                    id: 2,
                    name: "net.eth0.rx_bytes".into(),
                    unit: "bytes".into(),
                    scale_exp: 0,
                },
            ],
            tree: vec![],
            pings: false,
            timed: true,
        },
        SimProcess {
            identity: identity(0xD1, 300, "", "", "lone", 0, 1),
            clock: Clock {
                offset: 0,
                drift: 0.0,
            },
            streams: vec![(1, 1, 3001, "lone".into(), lone)],
            names: vec![],
            tree: vec![],
            pings: false,
            timed: false,
        },
    ]
}

/// A manifest for some of the sensors, with one source copy.
fn write_manifest(dir: &Path) {
    let text = "int main(void) {\n    serve();\n}\n";
    std::fs::create_dir_all(dir.join("sources")).unwrap();
    std::fs::write(dir.join("sources").join("ab12"), text).unwrap();
    let sensor = |id: u64, kind: &str, name: &str, line: u32| Sensor {
        id: p5_wire::manifest::format_id(id),
        kind: kind.into(),
        language: "c".into(),
        file: "pingpong.c".into(),
        function: name.into(),
        name: name.into(),
        line,
        column: 1,
        end_line: line + 2,
        end_column: 2,
    };
    let m = Manifest {
        version: 1,
        tool: "test".into(),
        root: "/src".into(),
        files: vec![
            SourceFile {
                path: "pingpong.c".into(),
                language: "c".into(),
                sha256: "ab12".into(),
                lines: 3,
            },
            SourceFile {
                path: "gone.c".into(),
                language: "c".into(),
                sha256: "cd34".into(),
                lines: 9,
            },
        ],
        sensors: vec![
            sensor(S_MAIN, "function", "main", 1),
            sensor(S_SERVE, "function", "serve", 2),
            sensor(S_REQUEST, "function", "request", 2),
            sensor(S_COMPUTE, "function", "compute", 3),
            sensor(C_SEND, "comm", "send", 2),
        ],
    };
    std::fs::write(
        dir.join("p5-manifest.json"),
        serde_json::to_string(&m).unwrap(),
    )
    .unwrap();
}

fn skew_store(root: &Path) -> PathBuf {
    let store = root.join("store");
    let mut b = StoreBuilder::new(&store, "skew", 7, 1_000_000_000_000);
    write_sim(&mut b, &skew_processes(), 8, 42);
    b.finish();
    store
}

// ---------------------------------------------------------------------------------------
// Database plumbing.

fn cell_sqlite(row: &sqlx::sqlite::SqliteRow, i: usize) -> String {
    if let Ok(v) = row.try_get::<Option<i64>, _>(i) {
        return v.map_or(String::new(), |v| v.to_string());
    }
    if let Ok(v) = row.try_get::<Option<f64>, _>(i) {
        return v.map_or(String::new(), |v| format!("{v:.3}"));
    }
    row.try_get::<Option<String>, _>(i)
        .ok()
        .flatten()
        .unwrap_or_default()
}

fn cell_pg(row: &sqlx::postgres::PgRow, i: usize) -> String {
    match row.column(i).type_info().name() {
        "INT8" => row
            .try_get::<Option<i64>, _>(i)
            .ok()
            .flatten()
            .map_or(String::new(), |v| v.to_string()),
        "INT4" => row
            .try_get::<Option<i32>, _>(i)
            .ok()
            .flatten()
            .map_or(String::new(), |v| v.to_string()),
        "FLOAT8" => row
            .try_get::<Option<f64>, _>(i)
            .ok()
            .flatten()
            .map_or(String::new(), |v| format!("{v:.3}")),
        "NUMERIC" => panic!("cast NUMERIC results in test queries"),
        _ => row
            .try_get::<Option<String>, _>(i)
            .ok()
            .flatten()
            .unwrap_or_default(),
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// Runs a query and renders header + rows as CSV.
async fn query_csv(url: &str, sql: &str) -> String {
    let sql = sqlx::AssertSqlSafe(sql.to_owned());
    let mut out = String::new();
    let mut push = |cols: Vec<String>| {
        out.push_str(
            &cols
                .iter()
                .map(|c| csv_field(c))
                .collect::<Vec<_>>()
                .join(","),
        );
        out.push('\n');
    };
    if url.starts_with("sqlite:") {
        let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
        let rows = sqlx::query(sql).fetch_all(&mut c).await.unwrap();
        if let Some(r) = rows.first() {
            push(r.columns().iter().map(|c| c.name().to_owned()).collect());
        }
        for r in &rows {
            push((0..r.len()).map(|i| cell_sqlite(r, i)).collect());
        }
    } else {
        let mut c = sqlx::PgConnection::connect(url).await.unwrap();
        let rows = sqlx::query(sql).fetch_all(&mut c).await.unwrap();
        if let Some(r) = rows.first() {
            push(r.columns().iter().map(|c| c.name().to_owned()).collect());
        }
        for r in &rows {
            push((0..r.len()).map(|i| cell_pg(r, i)).collect());
        }
    }
    out
}

fn test_data(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("test_data")
        .join(case)
}

/// Compares every `<case>/*.sql` query's result with `<case>/*.csv`.
async fn check_queries(case: &str, url: &str) {
    let dir = test_data(case);
    let mut sqls: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .collect();
    sqls.sort();
    assert!(!sqls.is_empty(), "no queries in {}", dir.display());
    let bless = std::env::var_os("P5_BLESS").is_some() && url.starts_with("sqlite:");
    let mut failures = Vec::new();
    for sql_path in sqls {
        let sql = std::fs::read_to_string(&sql_path).unwrap();
        let got = query_csv(url, &sql).await;
        let csv = sql_path.with_extension("csv");
        if bless {
            std::fs::write(&csv, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&csv).unwrap_or_default();
        if got != want {
            failures.push(format!(
                "--- {} ({url})\n{}",
                csv.display(),
                diff(&want, &got)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "query results differ (P5_BLESS=1 rewrites):\n{}",
        failures.join("\n")
    );
}

fn diff(want: &str, got: &str) -> String {
    let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    let mut out = String::new();
    for i in 0..w.len().max(g.len()) {
        let (a, b) = (w.get(i).copied(), g.get(i).copied());
        if a != b {
            out.push_str(&format!(
                "line {}:\n  want {}\n  got  {}\n",
                i + 1,
                a.unwrap_or("<none>"),
                b.unwrap_or("<none>")
            ));
            if out.len() > 4000 {
                break;
            }
        }
    }
    out
}

async fn merge(store: &Path, url: &str, manifests: Vec<PathBuf>) -> Vec<SessionSummary> {
    let mut args = MergeOptions::new(store);
    args.db = Some(url.to_owned());
    args.manifests = manifests;
    p5_merge::merge_store(&args).await.unwrap()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

// ---------------------------------------------------------------------------------------
// Tests.

/// Skewed clocks with drift on two hosts: every estimate is within its stated bound of the
/// truth, tightening leaves no message received before it was sent, and the tables match
/// the expected CSV on SQLite and PostgreSQL alike.
#[test]
fn skewed_clocks_merge_identically_on_sqlite_and_postgres() {
    let tmp = tempfile::tempdir().unwrap();
    let store = skew_store(tmp.path());
    let mdir = tmp.path().join("manifest");
    write_manifest(&mdir);
    rt().block_on(async {
        let url = format!("sqlite:{}", tmp.path().join("t.sqlite").display());
        let sums = merge(&store, &url, vec![mdir.clone()]).await;
        assert_eq!(sums.len(), 1);
        let s = &sums[0];
        // Truth check: client and server (two-way fits) within their bound before tightening.
        for (uid, clock) in [(0xC1u64, CLIENT), (0x51, SERVER)] {
            let c = s.clocks.iter().find(|c| c.uid == uid).unwrap();
            let bound = c.fit.error_bound_ns.expect("two-way fit has a bound");
            assert!(bound < 400_000, "bound {bound} ns too loose: {c:?}");
            for local in [700 * MS, 1500 * MS, 2800 * MS] {
                let local = clock.to_local(local);
                let est = c.fit.map(local) - c.tighten_ns;
                let err = (est - clock.to_true(local)).abs();
                assert!(
                    err <= bound + 1,
                    "uid {uid:#x}: error {err} > bound {bound}: {c:?}"
                );
            }
            assert!(
                (c.fit.drift_ppm() - clock.drift * 1e6).abs() < 20.0,
                "{c:?}"
            );
        }
        // The OS monitor shares the server's host clock: mapped exactly like the server.
        let srv = s.clocks.iter().find(|c| c.uid == 0x51).unwrap();
        let mon = s.clocks.iter().find(|c| c.uid == 0x52).unwrap();
        let mono_gap = 100 * MS;
        assert!((mon.fit.map(0) - srv.fit.map(mono_gap)).abs() <= 1);
        assert_eq!(s.violations, 0);
        // Each request is written in two sends (one message), its reply in one.
        assert_eq!(s.matched, (REQUESTS * 2 + 11) as u64, "{s:?}");
        check_queries("skew", &url).await;

        let pg = PgSchema::new("p5test").await;
        let sums_pg = merge(&store, &pg.url(), vec![mdir.clone()]).await;
        assert_eq!(sums_pg[0].matched, s.matched);
        check_queries("skew", &pg.url()).await;
    });
}

/// Merging a session again replaces it (same id, same rows), on both backends: alone in the
/// database (tables emptied, indexes rebuilt) and beside another session (its rows deleted,
/// the other session untouched).
#[test]
fn re_merging_a_session_replaces_it() {
    let tmp = tempfile::tempdir().unwrap();
    let store = skew_store(tmp.path());
    rt().block_on(async {
        let pg = PgSchema::new("p5test").await;
        for url in [format!("sqlite:{}", tmp.path().join("t.sqlite").display()), pg.url()] {
            let count = "SELECT session_id, COUNT(*) AS n FROM interval GROUP BY session_id ORDER BY session_id";
            let a = merge(&store, &url, vec![]).await;
            let before = query_csv(&url, count).await;
            let b = merge(&store, &url, vec![]).await;
            assert_eq!(a[0].id, b[0].id);
            assert_eq!(before, query_csv(&url, count).await);
            assert_ne!(before, "session_id,n\n1,0\n");
            // A second session, then re-merge only the first.
            let mut other = StoreBuilder::new(&store, "other", 3, 1_000_000_000_000);
            write_sim(&mut other, &skew_processes()[1..2], 8, 5);
            other.finish();
            let both = merge(&store, &url, vec![]).await;
            assert_eq!(both.iter().map(|s| s.id).collect::<Vec<_>>(), vec![2, 1], "{url}");
            let counts = query_csv(&url, count).await;
            let mut args = MergeOptions::new(&store);
            args.db = Some(url.clone());
            args.session = Some("skew".into());
            let again = p5_merge::merge_store(&args).await.unwrap();
            assert_eq!(again[0].id, 1);
            assert_eq!(counts, query_csv(&url, count).await, "{url}");
            let sessions = query_csv(&url, "SELECT id, name FROM session ORDER BY id").await;
            assert_eq!(sessions, "id,name\n1,skew\n2,other\n", "{url}");
            std::fs::remove_dir_all(store.join("other")).unwrap();
        }
    });
}

/// Damaged input: a segment cut in the middle of a record, a corrupt record checksum, a
/// segment with a bad header, data from a process whose handshake is missing, unknown
/// sensors and a process without clock samples: the merge completes and says so.
#[test]
fn damaged_store_merges_what_it_can_with_diagnostics() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let mut b = StoreBuilder::new(&store, "damaged", 9, 50_000_000_000);
    let procs = skew_processes();
    write_sim(&mut b, &procs[..2], 8, 7);
    // Data from a process whose handshake was lost.
    let evs = [
        Event::Enter {
            t: 10,
            sensor: S_UNKNOWN,
        },
        Event::Exit {
            t: 20,
            sensor: S_UNKNOWN,
        },
    ];
    b.data(
        900_000_000,
        0xEE,
        p5_wire::frame::FrameType::Events,
        &events(1, 1, 30, 0, &evs),
    );
    // A record with a bad checksum in the middle: skipped (or a torn tail), not fatal.
    let mut rec = Vec::new();
    p5_wire::store::encode_data(
        &mut rec,
        900_000_100,
        0xEE,
        p5_wire::frame::FrameType::Events as u8,
        &events(1, 2, 40, 0, &evs),
    );
    rec[5] ^= 0xff;
    b.raw(&rec);
    // A second run whose segment is cut mid-record.
    b.new_run(10, 60_000_000_000);
    let mut rec = Vec::new();
    p5_wire::store::encode_data(
        &mut rec,
        5,
        0xEE,
        p5_wire::frame::FrameType::Events as u8,
        &events(1, 3, 50, 0, &evs),
    );
    b.raw(&rec[..rec.len() / 2]);
    let dir = b.finish();
    std::fs::write(dir.join("00000005.p5seg"), b"not a segment at all").unwrap();
    rt().block_on(async {
        let url = format!("sqlite:{}", tmp.path().join("t.sqlite").display());
        let s = merge(&store, &url, vec![]).await;
        assert!(s[0].events > 0);
        check_queries("damaged", &url).await;
        let pg = PgSchema::new("p5test").await;
        merge(&store, &pg.url(), vec![]).await;
        check_queries("damaged", &pg.url()).await;
    });
}

/// A store with no sessions, an empty session and a session of only a handshake merge
/// cleanly; a missing session name is an error, not a panic.
#[test]
fn empty_inputs_merge_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    std::fs::create_dir_all(store.join("empty")).unwrap();
    let mut b = StoreBuilder::new(&store, "hello-only", 1, 1);
    b.process(5, &identity(1, 2, "boot", "h", "p", 3, 1));
    b.finish();
    rt().block_on(async {
        let url = format!("sqlite:{}", tmp.path().join("t.sqlite").display());
        let s = merge(&store, &url, vec![]).await;
        assert_eq!(s.len(), 2);
        assert_eq!(s.iter().map(|s| s.events).sum::<u64>(), 0);
        let mut args = MergeOptions::new(&store);
        args.db = Some(url.clone());
        args.session = Some("nope".into());
        let e = p5_merge::merge_store(&args).await.unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        args.session = None;
        args.db = Some("mysql://x".into());
        assert!(p5_merge::merge_store(&args).await.is_err());
    });
}

/// An example of this crate built beside this test binary (`cargo test` builds examples;
/// with `--test merge` alone it is built here).
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["build", "-p", "p5-merge", "--example", name])
            .status()
            .unwrap();
        assert!(status.success(), "building example {name}");
    }
    path
}

/// End to end: two real processes recorded through the runtime by a real log server (in this
/// process), then merged: every request and reply is matched by byte counting, nothing is
/// received before it was sent, and both clocks were fitted from samples.
#[test]
fn real_processes_recorded_by_a_log_server_merge() {
    let exe = example("pingpong");
    assert!(
        exe.exists(),
        "{} not built (cargo test builds examples)",
        exe.display()
    );
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let config = p5_logserver::ServerConfig {
        listen: "127.0.0.1:0".into(),
        store: store.clone(),
        ..p5_logserver::ServerConfig::default()
    };
    let server = server_rt
        .block_on(p5_logserver::Server::bind(config))
        .unwrap();
    let addr = server.local_addr().to_string();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let serving = server_rt.spawn(server.run(async move {
        let _ = stop_rx.await;
    }));
    const N: usize = 50;
    let port_file = tmp.path().join("port");
    let env = [
        ("P5_LOGSERVER", addr.as_str()),
        ("P5_SESSION", "e2e"),
        ("P5_DIR", tmp.path().to_str().unwrap()),
    ];
    let mut srv = std::process::Command::new(&exe)
        .args(["server", port_file.to_str().unwrap(), &N.to_string()])
        .envs(env)
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let port = loop {
        if let Ok(p) = std::fs::read_to_string(&port_file)
            && !p.is_empty()
        {
            break p;
        }
        assert!(std::time::Instant::now() < deadline, "server did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let client = std::process::Command::new(&exe)
        .args(["client", port.trim(), &N.to_string()])
        .envs(env)
        .status()
        .unwrap();
    assert!(client.success());
    assert!(srv.wait().unwrap().success());
    let _ = stop_tx.send(());
    server_rt.block_on(serving).unwrap().unwrap();
    drop(server_rt);

    rt().block_on(async {
        let pg = PgSchema::new("p5test").await;
        let mut results = Vec::new();
        for url in [format!("sqlite:{}", tmp.path().join("t.sqlite").display()), pg.url()] {
            let s = merge(&store, &url, vec![]).await;
            assert_eq!(s.len(), 1);
            let s = &s[0];
            assert_eq!(s.clocks.len(), 2, "{s:?}");
            for c in &s.clocks {
                // Same host as the log server: one CLOCK_MONOTONIC, an exact map.
                assert_eq!(c.fit.method, p5_merge::clock::Method::Exact, "{c:?}");
                assert_eq!(c.fit.drift, 0.0, "{c:?}");
                assert_eq!(c.fit.error_bound_ns, Some(0), "{c:?}");
            }
            // Requests: two writes each (one message), one read on the server; replies: one
            // write, 3 reads.
            assert_eq!(s.matched, (2 * N) as u64, "{s:?}");
            assert_eq!(s.folded, N as u64, "{s:?}");
            assert_eq!((s.unmatched_sends, s.unmatched_recvs), (0, 0), "{s:?}");
            assert_eq!(s.violations, 0, "{s:?}");
            let q = "SELECT COUNT(*) AS n, CAST(SUM(violation) AS BIGINT) AS v, \
                     COUNT(DISTINCT send_thread_id) AS senders FROM message";
            let got = query_csv(&url, q).await;
            results.push(got);
            let states = query_csv(&url, "SELECT state, COUNT(*) AS n FROM state WHERE state IN ('sending', 'receiving') GROUP BY state ORDER BY state").await;
            assert!(states.contains("receiving,") && states.contains("sending,"), "{states}");
            // The runtime recorded the client's connect: it is the initiator; requests are
            // calls (two writes each), replies returns.
            let conns = query_csv(
                &url,
                "SELECT proto, initiator_from, call_messages, call_bytes, return_messages, \
                 return_bytes, CASE WHEN initiator_process_id <> acceptor_process_id THEN 1 \
                 ELSE 0 END AS two_processes FROM connection",
            )
            .await;
            let want = format!(
                "proto,initiator_from,call_messages,call_bytes,return_messages,return_bytes,\
                 two_processes\ntcp,connect,{},{},{},{},1\n",
                N,
                100 * N,
                N,
                300 * N
            );
            assert_eq!(conns, want, "{url}");
        }
        assert_eq!(results[0], results[1]);
        assert_eq!(results[0], format!("n,v,senders\n{},0,2\n", 2 * N));
    });
}

/// Mutated records with valid checksums (so the bodies reach the decoders and the merge's own
/// logic: absurd times, durations, byte counts, sensor ids): every merge completes.
#[test]
fn resealed_random_mutations_never_stop_a_merge() {
    let tmp = tempfile::tempdir().unwrap();
    let store = skew_store(tmp.path());
    let seg = store.join("skew").join("00000000.p5seg");
    let original = std::fs::read(&seg).unwrap();
    // Record offsets.
    let mut offsets = Vec::new();
    let mut at = p5_wire::store::SEGMENT_HEADER_LEN;
    while at + 8 <= original.len() {
        let len = u32::from_le_bytes(original[at..at + 4].try_into().unwrap()) as usize;
        offsets.push((at, 8 + len));
        at += 8 + len;
    }
    let mut rng = Rng(99);
    rt().block_on(async {
        let url = format!("sqlite:{}", tmp.path().join("t.sqlite").display());
        for round in 0..40 {
            let mut bytes = original.clone();
            for _ in 0..(1 + round % 4) * 8 {
                let (start, len) = offsets[rng.range(0, offsets.len() as u64) as usize];
                // Past the envelope, record type, t_s and process uid: into the frame body.
                let lo = (start + 9 + 16).min(start + len - 1) as u64;
                let i = rng.range(lo, (start + len) as u64) as usize;
                bytes[i] = rng.range(0, 256) as u8;
                p5_wire::frame::reseal(&mut bytes[start..start + len]);
            }
            std::fs::write(&seg, &bytes).unwrap();
            let s = merge(&store, &url, vec![]).await;
            assert_eq!(s.len(), 1, "round {round}");
        }
    });
}

/// Agent tree: a child agent's frames reach the store without receipt times (relayed), but
/// its parent reports `ClockSamples` of the child's sends: the child's clock is composed
/// through the parent's and lands within the delays of the truth.
#[test]
fn agent_tree_samples_compose_offsets() {
    let parent = Clock {
        offset: 300 * MS,
        drift: 40e-6,
    };
    let child = Clock {
        offset: 900 * MS,
        drift: -70e-6,
    };
    // The parent received the child's frames: t_recv on the parent's clock, t_send on the
    // child's, 30–130 µs apart in true time.
    let mut rng = Rng(3);
    let samples: Vec<(u64, u64)> = (0..60)
        .map(|i| {
            let send_local = 10 * MS + i * 50 * MS;
            let arrive = child.to_true(send_local) + rng.range(30_000, 130_000) as i64;
            (parent.to_local(arrive) as u64, send_local as u64)
        })
        .collect();
    let metrics = |c: Clock| {
        on(
            c,
            (0..30)
                .map(|k| {
                    (
                        1000 * MS + k * 100 * MS,
                        Event::Counter {
                            t: 0,
                            sensor: 1,
                            value: k,
                        },
                    )
                })
                .collect(),
        )
    };
    let procs = vec![
        SimProcess {
            identity: identity(0xAA, 10, "boot-p", "parent", "hostagent", 1_000_000_000, 5),
            clock: parent,
            streams: vec![(1, 2, 0, "metrics".into(), metrics(parent))],
            names: vec![],
            tree: vec![(0xBB, samples)],
            pings: true,
            timed: true,
        },
        SimProcess {
            identity: identity(0xBB, 11, "boot-c", "child", "hostagent", 2_000_000_000, 5),
            clock: child,
            streams: vec![(1, 2, 0, "metrics".into(), metrics(child))],
            names: vec![],
            tree: vec![],
            pings: false,
            timed: false,
        },
    ];
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let mut b = StoreBuilder::new(&store, "tree", 1, 1_000_000_000_000);
    write_sim(&mut b, &procs, 8, 11);
    b.finish();
    rt().block_on(async {
        let url = format!("sqlite:{}", tmp.path().join("t.sqlite").display());
        let s = merge(&store, &url, vec![]).await;
        let c = s[0].clocks.iter().find(|c| c.uid == 0xBB).unwrap();
        let p = s[0].clocks.iter().find(|c| c.uid == 0xAA).unwrap();
        assert_eq!(c.fit.method, p5_merge::clock::Method::Tree, "{c:?}");
        assert_eq!(c.domain, "tree");
        let parent_err = p.fit.error_bound_ns.unwrap();
        for local in [10 * MS, 1500 * MS, 2900 * MS] {
            let err = (c.fit.map(local) - child.to_true(local)).abs();
            assert!(
                err <= parent_err + 260_000,
                "child error {err} ns (parent bound {parent_err}): {c:?}"
            );
        }
        let rows = query_csv(
            &url,
            "SELECT process_id, method, domain FROM clock_estimate ORDER BY process_id",
        )
        .await;
        assert_eq!(
            rows,
            "process_id,method,domain\n1,tree,tree\n2,two-way,host:boot-p\n"
        );
    });
}

/// Issue 14 item 2: an OS monitor that followed a process tree says which threads it met
/// (`Task` events); threads no recorded stream stands for get `os-thread` rows — under the
/// recorded process with their pid, else under an `uninstrumented` process named by its main
/// thread — and their scheduling rows point at them. A thread seen leaving a CPU it was
/// woken onto, with no switch into it recorded, is on that CPU from its wakeup.
#[test]
fn followed_threads_that_recorded_nothing_get_rows_and_their_scheduling() {
    let task = |t: i64, tid: u32, pid: u32, comm: &str| Event::Task {
        t: t as u64,
        tid,
        pid,
        comm: comm.into(),
    };
    let switch = |t: i64, cpu: u32, prev_tid: u32, next_tid: u32| Event::Switch {
        t: t as u64,
        cpu,
        prev_tid,
        prev_state: b'S',
        next_tid,
    };
    let wakeup = |t: i64, cpu: u32, tid: u32| Event::Wakeup {
        t: t as u64,
        cpu,
        tid,
    };
    // The agent started at mono 1 s, the program at 1.1 s: on one boot, exactly mapped.
    let os = vec![
        task(10 * MS, 400, 400, "app"),
        task(20 * MS, 401, 400, "p5-flusher"),
        task(30 * MS, 500, 500, "app"),
        task(31 * MS, 500, 500, "busy"),
        task(40 * MS, 501, 500, "busy-helper"),
        switch(100 * MS, 0, 0, 400),
        switch(101 * MS, 0, 400, 401),
        switch(102 * MS, 0, 401, 500),
        // 401 woken onto CPU 1 and leaving it at 107 ms with no switch in recorded (kernel
        // 6.18 leaves out switches from idle): the stretch starts at the wakeup, or at the
        // CPU's last recorded switch if that is later (106 ms: 1 ms on CPU). 777, woken onto
        // CPU 0 but seen leaving CPU 1: no stretch is made up.
        wakeup(104 * MS, 1, 401),
        wakeup(105 * MS, 0, 777),
        switch(106 * MS, 1, 777, 0),
        switch(107 * MS, 1, 401, 0),
        switch(110 * MS, 0, 500, 501),
        switch(115 * MS, 0, 501, 0),
        // Woken, then switched in: the stretch starts at the switch.
        wakeup(116 * MS, 1, 400),
        switch(117 * MS, 1, 0, 400),
        switch(118 * MS, 1, 400, 0),
        switch(120 * MS, 1, 0, 777),
        switch(121 * MS, 1, 777, 0),
    ];
    let app = vec![
        Event::Enter {
            t: 0,
            sensor: S_MAIN,
        },
        Event::Exit {
            t: 50 * MS as u64,
            sensor: S_MAIN,
        },
    ];
    let exact = Clock {
        offset: 0,
        drift: 0.0,
    };
    let procs = vec![
        SimProcess {
            identity: identity(0xAA, 300, "boot-1", "h", "hostagent", 1_000_000_000, 5),
            clock: exact,
            streams: vec![(2, 3, 0, "os monitor: tracefs".into(), os)],
            names: vec![],
            tree: vec![],
            pings: true,
            timed: true,
        },
        SimProcess {
            identity: identity(0xBB, 400, "boot-1", "h", "app", 1_100_000_000, 1),
            clock: exact,
            streams: vec![(1, 1, 400, "main".into(), app)],
            names: vec![],
            tree: vec![],
            pings: true,
            timed: true,
        },
    ];
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let mut b = StoreBuilder::new(&store, "tree", 1, 1_000_000_000);
    write_sim(&mut b, &procs, 4, 5);
    b.finish();
    rt().block_on(async {
        let url = format!("sqlite:{}", tmp.path().join("t.sqlite").display());
        merge(&store, &url, vec![]).await;
        let processes = query_csv(
            &url,
            "SELECT id, pid, program, runtime FROM process ORDER BY id",
        )
        .await;
        assert_eq!(
            processes,
            "id,pid,program,runtime\n1,300,hostagent,host-agent\n2,400,app,rust\n\
             3,500,busy,uninstrumented\n"
        );
        let threads = query_csv(
            &url,
            "SELECT process_id, kind, tid, name FROM thread WHERE kind <> 'os-monitor' ORDER BY id",
        )
        .await;
        assert_eq!(
            threads,
            "process_id,kind,tid,name\n2,thread,400,main\n2,os-thread,401,p5-flusher\n\
             3,os-thread,500,busy\n3,os-thread,501,busy-helper\n"
        );
        // On-CPU rows: the agent's monitor time + 1 s is the program's + 1.1 s. Lengths in
        // units of 0.1 ms: the clock fit of these few randomly delayed frames is off by
        // about 0.05 %.
        let sched = query_csv(
            &url,
            "SELECT s.tid, t.name, (s.t_end - s.t_start + 50000) / 100000 AS tenths_ms \
             FROM sched s \
             LEFT JOIN thread t ON t.id = s.thread_id AND t.session_id = s.session_id \
             ORDER BY s.t_start",
        )
        .await;
        assert_eq!(
            sched,
            "tid,name,tenths_ms\n400,main,10\n401,p5-flusher,10\n500,busy,80\n\
             401,p5-flusher,10\n501,busy-helper,50\n400,main,10\n777,,10\n"
        );
    });
}

// ---------------------------------------------------------------------------------------
// The trace database: old files, connections, analysis rows, errors.

/// A database written by the merge before `p5-tracedb` existed (migrations 0001–0002 only,
/// `tracedb/test_data/merged-v0002.sqlite`, the skew fixture) still opens and reads; merging
/// the session again applies the new migrations, keeps its id, fills the connections and
/// gives the same tables as a fresh database.
#[test]
fn a_database_merged_by_older_code_opens_re_merges_and_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let old =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tracedb/test_data/merged-v0002.sqlite");
    let file = tmp.path().join("old.sqlite");
    std::fs::copy(&old, &file).unwrap();
    let store = skew_store(tmp.path());
    let mdir = tmp.path().join("manifest");
    write_manifest(&mdir);
    let url = format!("sqlite:{}", file.display());
    rt().block_on(async {
        use p5_tracedb::read;
        let db = read::Reader::open(&p5_tracedb::DbUrl::parse(&url).unwrap())
            .await
            .unwrap();
        assert_eq!(db.schema_version().await.unwrap(), 2);
        let sessions = read::sessions(&db).await.unwrap();
        assert_eq!(sessions.len(), 1);
        let before = read::messages(&db, sessions[0].id).await.unwrap();
        assert!(!before.is_empty());
        db.close().await;

        let sums = merge(&store, &url, vec![mdir]).await;
        assert_eq!(sums[0].id, sessions[0].id);
        let db = read::Reader::open(&p5_tracedb::DbUrl::parse(&url).unwrap())
            .await
            .unwrap();
        assert_eq!(
            db.schema_version().await.unwrap(),
            p5_tracedb::migrate::latest()
        );
        let after = read::messages(&db, sums[0].id).await.unwrap();
        // The same messages as the old code wrote; their times on the base moved only as far
        // as the clock estimator changed since, within the clocks' stated bounds.
        let slack: i64 = sums[0]
            .clocks
            .iter()
            .filter_map(|c| c.fit.error_bound_ns)
            .max()
            .unwrap_or(0);
        // The old code wrote one row per send; a request written in two sends is one
        // message now: the old rows with the pieces folded, the same bytes between the same
        // threads, each message starting where one of the old rows did.
        assert!(
            sums[0].folded > 0,
            "the fixture writes requests in two sends"
        );
        assert_eq!(after.len() as u64, before.len() as u64 - sums[0].folded);
        let bytes = |v: &[read::MatchedMessage]| {
            let mut t = std::collections::BTreeMap::new();
            for m in v {
                *t.entry((m.send_thread, m.recv_thread)).or_insert(0) += m.bytes;
            }
            t
        };
        assert_eq!(bytes(&before), bytes(&after));
        for a in &after {
            assert!(
                before.iter().any(|b| (b.send_thread, b.recv_thread)
                    == (a.send_thread, a.recv_thread)
                    && (b.send_t - a.send_t).abs() <= 2 * slack),
                "message {} starts where no old row did ({slack} ns): {a:?}",
                a.id
            );
        }
        let conns = read::connections(&db, sums[0].id).await.unwrap();
        assert_eq!(conns.len(), 2);
        let roles = read::message_roles(&db, sums[0].id).await.unwrap();
        assert_eq!(
            roles.len() as u64,
            sums[0].messages,
            "every message has a role"
        );
        db.close().await;
        check_queries("skew", &url).await;
    });
}

/// `connection` rows are merge's in-memory connections: every message's sender and receiver
/// endpoints, as their socket descriptions say, are its connection's ends in the order its
/// direction says; the counts per direction add up to the messages.
#[test]
fn connection_rows_match_the_in_memory_flows() {
    let tmp = tempfile::tempdir().unwrap();
    let store = skew_store(tmp.path());
    let dir = p5_logserver::reader::StoreDir::open(&store)
        .unwrap()
        .session("skew")
        .unwrap();
    let scan = p5_merge::load::scan(&dir, |_| {}).unwrap();
    let mut m = p5_merge::matching::match_calls(&scan.sockets, &scan.calls);
    p5_merge::coalesce::coalesce(&mut m, &scan.calls);
    let url = format!("sqlite:{}", tmp.path().join("t.sqlite").display());
    rt().block_on(async {
        merge(&store, &url, vec![]).await;
        let rows = query_csv(
            &url,
            "SELECT m.id, m.direction, c.initiator_endpoint, c.acceptor_endpoint FROM message m \
             JOIN connection c ON c.session_id = m.session_id AND c.id = m.connection_id \
             ORDER BY m.id",
        )
        .await;
        let rows: Vec<Vec<String>> = rows
            .lines()
            .skip(1)
            .map(|l| l.split(',').map(str::to_owned).collect())
            .collect();
        assert_eq!(rows.len(), m.messages.len());
        for (msg, row) in m.messages.iter().zip(&rows) {
            let c = &m.connections[msg.conn as usize];
            let (src, dst) = if row[1] == "call" {
                (&row[2], &row[3])
            } else {
                (&row[3], &row[2])
            };
            assert_eq!(&c.ends[usize::from(msg.side)], src, "{row:?}");
            assert_eq!(&c.ends[usize::from(1 - msg.side)], dst, "{row:?}");
            // The sender's own socket description agrees (stream sockets).
            if let Some(s) = msg.send
                && row[2].contains(":7000")
            {
                let call = &scan.calls[s];
                let d = scan
                    .sockets
                    .iter()
                    .rfind(|d| d.process == call.process && d.fd == call.fd && d.t <= call.t)
                    .unwrap();
                assert_eq!(&d.local.to_string(), src);
                assert_eq!(&d.peer.to_string(), dst);
            }
        }
        let totals = query_csv(
            &url,
            "SELECT CAST(SUM(call_messages + return_messages) AS BIGINT) AS n FROM connection",
        )
        .await;
        assert_eq!(totals, format!("n\n{}\n", m.messages.len()));
    });
}

/// Every table keyed by session — the analysis tables included — is cleared when the
/// session is merged again, on both backends, and another session's rows stay.
#[test]
fn re_merging_clears_the_analysis_of_that_session() {
    use p5_tracedb::schema::*;
    let tmp = tempfile::tempdir().unwrap();
    let store = skew_store(tmp.path());
    let mut other = StoreBuilder::new(&store, "other", 3, 1_000_000_000_000);
    write_sim(&mut other, &skew_processes()[1..2], 8, 5);
    other.finish();
    rt().block_on(async {
        let pg = PgSchema::new("p5test").await;
        for url in [
            format!("sqlite:{}", tmp.path().join("t.sqlite").display()),
            pg.url(),
        ] {
            let sums = merge(&store, &url, vec![]).await;
            let mut db = p5_tracedb::Db::open(&p5_tracedb::DbUrl::parse(&url).unwrap())
                .await
                .unwrap();
            for s in &sums {
                let run = db.next_run_id(s.id).await.unwrap();
                let results = p5_tracedb::analysis::RunResults {
                    patterns: vec![PathPattern {
                        session_id: s.id,
                        run_id: run,
                        id: 1,
                        signature: "a(b)".into(),
                        root_node: "a".into(),
                        instances: 3,
                        expected: None,
                        max_prob: Some(0.5),
                        mean_total_ns: 10,
                        p50_total_ns: 9,
                        p90_total_ns: 12,
                        rank: 1,
                    }],
                    nodes: vec![PathNode {
                        session_id: s.id,
                        run_id: run,
                        pattern_id: 1,
                        id: 1,
                        parent_id: None,
                        ord: 0,
                        node: "a".into(),
                        kind: p5_tracedb::domain::NodeKind::Node,
                        visit: p5_tracedb::domain::Visit::Call,
                        call_delay_mean_ns: None,
                        latency_mean_ns: Some(10),
                        net_delay_mean_ns: None,
                        samples: 3,
                    }],
                    hist: vec![PathNodeHist {
                        session_id: s.id,
                        run_id: run,
                        node_id: 1,
                        bin: 0,
                        weight: 1.0,
                    }],
                    instances: vec![PathInstance {
                        session_id: s.id,
                        run_id: run,
                        id: 1,
                        pattern_id: 1,
                        prob: 1.0,
                        t_start: 0,
                        t_end: 10,
                    }],
                    instance_messages: vec![PathInstanceMessage {
                        session_id: s.id,
                        run_id: run,
                        instance_id: 1,
                        message_id: 1,
                        node_id: 1,
                    }],
                    ..Default::default()
                };
                let run_row = AnalysisRun {
                    session_id: s.id,
                    id: run,
                    algorithm: "nesting".into(),
                    params_json: "{}".into(),
                    source: "sql".into(),
                    session_merged_at_wall_ns: 0,
                    created_at_wall_ns: 0,
                    messages: 1,
                };
                db.write_analysis(run_row, results).await.unwrap();
            }
            db.close().await.unwrap();
            let reader = p5_tracedb::Reader::open(&p5_tracedb::DbUrl::parse(&url).unwrap())
                .await
                .unwrap();
            let runs = p5_tracedb::read::analysis_runs(&reader, 1).await.unwrap();
            assert_eq!(runs.len(), 1, "{url}");
            let pats = p5_tracedb::read::path_patterns(&reader, 1, runs[0].id)
                .await
                .unwrap();
            assert_eq!((pats.len(), pats[0].max_prob), (1, Some(0.5)), "{url}");
            let nodes = p5_tracedb::read::path_nodes(&reader, 1, runs[0].id, 1)
                .await
                .unwrap();
            assert_eq!(nodes[0].latency_mean_ns, Some(10), "{url}");
            reader.close().await;
            let count = "SELECT session_id, COUNT(*) AS n FROM path_instance_message \
                         GROUP BY session_id ORDER BY session_id";
            assert_eq!(
                query_csv(&url, count).await,
                "session_id,n\n1,1\n2,1\n",
                "{url}"
            );
            let mut args = MergeOptions::new(&store);
            args.db = Some(url.clone());
            args.session = Some("skew".into());
            let again = p5_merge::merge_store(&args).await.unwrap();
            let sid = again[0].id;
            let keep = 3 - sid;
            for t in ANALYSIS {
                let sql = format!(
                    "SELECT session_id, COUNT(*) AS n FROM {} GROUP BY session_id",
                    t.name
                );
                assert_eq!(
                    query_csv(&url, &sql).await,
                    format!("session_id,n\n{keep},1\n"),
                    "{} on {url}",
                    t.name
                );
            }
        }
    });
}

/// Database URLs and connections fail at once and clearly; a directory without a store is
/// an error, not "merged 0 session(s)"; a SQLite file of another program is not written to.
#[test]
fn database_and_store_errors_are_clear() {
    let tmp = tempfile::tempdir().unwrap();
    let store = skew_store(tmp.path());
    let err = |args: MergeOptions| async move {
        p5_merge::merge_store(&args).await.unwrap_err().to_string()
    };
    rt().block_on(async {
        let mut args = MergeOptions::new(&store);
        args.db = Some("mysql://root@127.0.0.1/test".into());
        let e = err(args).await;
        assert!(
            e.contains("sqlite:PATH") && e.contains("postgres://"),
            "{e}"
        );

        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let mut args = MergeOptions::new(&store);
        args.db = Some(format!("postgres://postgres@127.0.0.1:{port}/test"));
        let t = std::time::Instant::now();
        let e = err(args).await;
        assert!(t.elapsed() < std::time::Duration::from_secs(6));
        assert!(
            e.contains("cannot connect") && e.matches("refused").count() == 1,
            "{e}"
        );

        let foreign = tmp.path().join("foreign.sqlite");
        {
            let mut c =
                sqlx::SqliteConnection::connect(&format!("sqlite:{}?mode=rwc", foreign.display()))
                    .await
                    .unwrap();
            sqlx::raw_sql("CREATE TABLE notes (x TEXT)")
                .execute(&mut c)
                .await
                .unwrap();
        }
        let mut args = MergeOptions::new(&store);
        args.db = Some(format!("sqlite:{}", foreign.display()));
        let e = err(args).await;
        assert!(e.contains("not a p5 database"), "{e}");

        let empty = tmp.path().join("no-store");
        std::fs::create_dir_all(empty.join("src")).unwrap();
        let e = err(MergeOptions::new(&empty)).await;
        assert!(e.contains("holds no p5 session"), "{e}");
    });
}

/// A segment copied by hand next to the original (a backup restored into the store, a
/// botched rsync) holds frames stored already: merge skips them by (process, stream,
/// sequence) as the log server does, in both passes, and says so; nothing is counted twice.
#[test]
fn a_copied_segment_is_not_counted_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let store = skew_store(tmp.path());
    rt().block_on(async {
        let url = format!("sqlite:{}", tmp.path().join("a.sqlite").display());
        let a = merge(&store, &url, vec![]).await;
        let session = store.join("skew");
        let mut segs: Vec<_> = std::fs::read_dir(&session)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "p5seg"))
            .collect();
        segs.sort();
        assert!(!segs.is_empty());
        let next = segs.len() as u64;
        for (i, seg) in segs.iter().enumerate() {
            let copy = session.join(format!("{:08}.p5seg", next + i as u64));
            std::fs::copy(seg, copy).unwrap();
        }
        let url = format!("sqlite:{}", tmp.path().join("b.sqlite").display());
        let b = merge(&store, &url, vec![]).await;
        assert_eq!(a[0].events, b[0].events);
        assert_eq!(a[0].messages, b[0].messages);
        assert_eq!(a[0].matched, b[0].matched);
        let (mut ra, mut rb) = (a[0].rows.clone(), b[0].rows.clone());
        let (da, db) = (ra.remove("diagnostic"), rb.remove("diagnostic"));
        assert_eq!(ra, rb);
        assert_eq!(da.map(|n| n + 1), db, "one more diagnostic: the duplicates");
        let dup = b[0]
            .diagnostics
            .iter()
            .find(|d| d.kind == "duplicate-frame")
            .expect("a duplicate-frame diagnostic");
        assert!(dup.count > 0, "{dup:?}");
        assert!(!a[0].diagnostics.iter().any(|d| d.kind == "duplicate-frame"));
    });
}

/// Events a runtime lost to a full buffer are never silent: each batch that reports new
/// losses gives a `drop_range` row from the last event shipped before it to the batch's last
/// event (the close reports the rest), the thread row has the total, and the summary warns.
#[test]
fn lost_events_become_ranges_and_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let mut b = StoreBuilder::new(&store, "drops", 4, 1_000_000_000_000);
    let uid = 0xD0D0;
    b.process(
        1_000,
        &identity(uid, 4242, "", "h", "lossy", 1_000_000_000_000, 1),
    );
    let open = stream_open(1, 10, 1, 4242, "main");
    b.data(2_000, uid, p5_wire::frame::FrameType::StreamOpen, &open);
    // Batches: events at 1..=3 ms, 10..=12 ms, 20 ms, 30..=31 ms; cumulative losses 0, 100,
    // 100, 250; the close (at 40 ms) reports 300.
    let batches: [(&[i64], u64); 4] = [
        (&[1, 2, 3], 0),
        (&[10, 12], 100),
        (&[20], 100),
        (&[30, 31], 250),
    ];
    for (k, (ms, dropped)) in batches.iter().enumerate() {
        let evs: Vec<Event> = ms
            .iter()
            .map(|&t| Event::Mark {
                t: (t * MS) as u64,
                sensor: S_MAIN,
            })
            .collect();
        let body = events(
            1,
            k as u64 + 1,
            (ms[ms.len() - 1] * MS) as u64,
            *dropped,
            &evs,
        );
        let t_s = 1_000_000_000_000 + (ms[ms.len() - 1] * MS) as u64;
        b.data(t_s, uid, p5_wire::frame::FrameType::Events, &body);
    }
    let close = stream_close_dropped(1, 5, (40 * MS) as u64, (40 * MS) as u64, 300);
    b.data(
        1_000_000_000_000 + (40 * MS) as u64,
        uid,
        p5_wire::frame::FrameType::StreamClose,
        &close,
    );
    b.finish();
    rt().block_on(async {
        let url = format!("sqlite:{}", tmp.path().join("d.sqlite").display());
        let s = merge(&store, &url, vec![]).await;
        assert_eq!(s[0].dropped, (300, 1));
        let text = p5_merge::render(&s[0]);
        assert!(
            text.contains("WARNING: 300 events were lost to full buffers in 1 thread(s)"),
            "{text}"
        );
        let rows = query_csv(
            &url,
            "SELECT d.t_start - t.t_start AS a, d.t_end - t.t_start AS b, d.events \
             FROM drop_range d JOIN thread t ON t.session_id = d.session_id AND t.id = d.thread_id \
             ORDER BY d.t_start",
        )
        .await;
        // Relative to the thread's first event (1 ms): 3 → 12 ms, 20 → 31 ms, 31 → 40 ms.
        let ms = |t: i64| (t - 1) * MS;
        let want = format!(
            "a,b,events\n{},{},100\n{},{},150\n{},{},50\n",
            ms(3),
            ms(12),
            ms(20),
            ms(31),
            ms(31),
            ms(40)
        );
        assert_eq!(rows, want);
        let dropped = query_csv(&url, "SELECT dropped FROM thread").await;
        assert_eq!(dropped, "dropped\n300\n");
    });
}

/// A thread that waits in poll/select/epoll_wait (op 13) is *waiting* for exactly the span of
/// the call, with its descriptor and ready count; the rest of its time stays calculating.
#[test]
fn a_wait_becomes_a_waiting_state() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let mut b = StoreBuilder::new(&store, "waits", 4, 1_000_000_000_000);
    let uid = 0xAA17;
    b.process(
        1_000,
        &identity(uid, 4343, "", "h", "loop", 1_000_000_000_000, 1),
    );
    let open = stream_open(1, 10, 1, 4343, "main");
    b.data(2_000, uid, p5_wire::frame::FrameType::StreamOpen, &open);
    let wait = |t: i64, fd: i64, dur: i64, result: i64| Event::Comm {
        t: t as u64,
        sensor: S_MAIN,
        op: CommOp::Wait,
        fd,
        duration: dur as u64,
        result,
        peer: Endpoint::None,
    };
    // 1 ms: mark; 2 ms: an idle 420 ms epoll_wait on fd 5; 423 ms: a poll that finds one
    // descriptor after 1 ms; 430 ms: mark.
    let evs = vec![
        Event::Mark {
            t: MS as u64,
            sensor: S_MAIN,
        },
        wait(2 * MS, 5, 420 * MS, 0),
        wait(423 * MS, -1, MS, 1),
        Event::Mark {
            t: (430 * MS) as u64,
            sensor: S_MAIN,
        },
    ];
    let body = events(1, 1, (430 * MS) as u64, 0, &evs);
    b.data(
        1_000_000_000_000 + (430 * MS) as u64,
        uid,
        p5_wire::frame::FrameType::Events,
        &body,
    );
    let close = stream_close_dropped(1, 2, (440 * MS) as u64, (440 * MS) as u64, 0);
    b.data(
        1_000_000_000_000 + (440 * MS) as u64,
        uid,
        p5_wire::frame::FrameType::StreamClose,
        &close,
    );
    b.finish();
    rt().block_on(async {
        let url = format!("sqlite:{}", tmp.path().join("w.sqlite").display());
        merge(&store, &url, vec![]).await;
        let rows = query_csv(
            &url,
            "SELECT s.t_start - t.t_start AS a, s.t_end - t.t_start AS b, s.state, s.op, s.fd, \
             s.result FROM state s JOIN thread t ON t.session_id = s.session_id \
             AND t.id = s.thread_id ORDER BY s.t_start",
        )
        .await;
        // Relative to the thread's first event (1 ms); calculating rows carry no call.
        let ms = |t: i64| (t - 1) * MS;
        let want = format!(
            "a,b,state,op,fd,result\n\
             0,{},calculating,,,\n\
             {},{},waiting,wait,5,0\n\
             {},{},calculating,,,\n\
             {},{},waiting,wait,-1,1\n\
             {},{},calculating,,,\n",
            ms(2),
            ms(2),
            ms(422),
            ms(422),
            ms(423),
            ms(423),
            ms(424),
            ms(424),
            ms(440),
        );
        assert_eq!(rows, want);
    });
}

/// Issue 21 item 1: a runtime's `Calls` reports (event kind 10) become one `sensor_calls` row
/// per process and sensor — the latest report, on the session's base — are not counted as
/// timeline events, and the summary lists the throttled sensor.
#[test]
fn throttled_sensors_are_stored_with_their_calls() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let mut b = StoreBuilder::new(&store, "hot", 4, 1_000_000_000_000);
    let uid = 0x7A7A;
    b.process(
        1_000,
        &identity(uid, 4343, "", "h", "hot", 1_000_000_000_000, 1),
    );
    let open = stream_open(1, 10, 1, 4343, "main");
    b.data(2_000, uid, p5_wire::frame::FrameType::StreamOpen, &open);
    let calls = |calls: u64, recorded: u64| Event::Calls {
        t: (5 * MS) as u64,
        sensor: S_MAIN,
        calls,
        timed: 1_000 + calls / 64,
        timed_ns: 250_000,
        recorded,
        pinned: 0,
    };
    let batches: [Vec<Event>; 2] = [
        vec![
            Event::Enter {
                t: MS as u64,
                sensor: S_MAIN,
            },
            Event::Exit {
                t: 2 * MS as u64,
                sensor: S_MAIN,
            },
            calls(40_000, 1),
        ],
        vec![calls(90_000, 3)],
    ];
    for (k, evs) in batches.iter().enumerate() {
        let body = events(1, k as u64 + 1, (10 * MS) as u64 * (k as u64 + 1), 0, evs);
        let t_s = 1_000_000_000_000 + (10 * MS) as u64 * (k as u64 + 1);
        b.data(t_s, uid, p5_wire::frame::FrameType::Events, &body);
    }
    b.finish();
    rt().block_on(async {
        let url = format!("sqlite:{}", tmp.path().join("d.sqlite").display());
        let s = merge(&store, &url, vec![]).await;
        assert_eq!(s[0].events, 2, "reports are not timeline events");
        assert_eq!(s[0].throttled.len(), 1);
        assert_eq!((s[0].throttled[0].calls, s[0].throttled[0].recorded), (90_000, 3));
        let text = p5_merge::render(&s[0]);
        assert!(text.contains("throttled: 1 sensor(s)"), "{text}");
        let rows = query_csv(
            &url,
            "SELECT c.process_id, c.calls, c.timed, c.timed_ns, c.recorded, c.pinned, \
             c.t_throttled - t.t_start AS after_first FROM sensor_calls c \
             JOIN thread t ON t.session_id = c.session_id",
        )
        .await;
        // Throttled at 5 ms, the thread's first event at 1 ms.
        assert_eq!(
            rows,
            format!(
                "process_id,calls,timed,timed_ns,recorded,pinned,after_first\n1,90000,2406,250000,3,0,{}\n",
                4 * MS
            )
        );
    });
}
