//! Test support (feature `testing`): a PostgreSQL schema of its own for each test, so tests of
//! several crates can run at once against one server. Not for production use: it panics when
//! PostgreSQL is unreachable, with what to run.

use sqlx::Connection;
use std::sync::atomic::{AtomicU32, Ordering};

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A fresh schema on `$P5_TEST_PG_URL` (default `postgres://postgres@127.0.0.1:5432/test`),
/// dropped with everything in it when this value is dropped.
#[derive(Debug)]
pub struct PgSchema {
    base: String,
    schema: String,
}

impl PgSchema {
    /// Creates schema `PREFIX_PID_N`.
    pub async fn new(prefix: &str) -> PgSchema {
        let base = std::env::var("P5_TEST_PG_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
        let schema = format!(
            "{prefix}_{}_{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut c = sqlx::PgConnection::connect(&base)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "PostgreSQL is needed for these tests and {base} is not reachable ({e}); run \
                     `eval $(bash scripts/pg-test-server.sh)` or set P5_TEST_PG_URL"
                )
            });
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&mut c)
            .await
            .unwrap_or_else(|e| panic!("cannot create schema {schema}: {e}"));
        PgSchema { base, schema }
    }

    /// The URL whose connections use the schema.
    pub fn url(&self) -> String {
        let sep = if self.base.contains('?') { '&' } else { '?' };
        format!("{}{sep}options=-csearch_path%3D{}", self.base, self.schema)
    }
}

impl Drop for PgSchema {
    /// Drops the schema on a thread with its own runtime, so it works inside and outside one.
    fn drop(&mut self) {
        let (base, schema) = (self.base.clone(), self.schema.clone());
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                if let Ok(mut c) = sqlx::PgConnection::connect(&base).await {
                    let sql = format!("DROP SCHEMA IF EXISTS {schema} CASCADE");
                    let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                        .execute(&mut c)
                        .await;
                }
            })
        })
        .join();
    }
}
