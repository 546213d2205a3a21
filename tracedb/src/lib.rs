//! The p5 trace database: the contract every stage after `p5 merge` reads.
//!
//! - [`schema`]: every table defined once — columns, their SQL types on SQLite and
//!   PostgreSQL, and a typed row struct per table; [`migrate`]: the migrations of both
//!   backends (documented column by column in `docs/schema.md`);
//! - [`DbUrl`]: the one parser of `--db` values; [`connect`]: failing fast and clearly;
//! - [`write`](mod@write): open (create, migrate), replace a session, bulk writes of typed rows
//!   (multi-row `VALUES` into SQLite, `COPY` into PostgreSQL) — what merge writes through, and
//!   [`analysis`] for what `p5 analyze` writes;
//! - [`import`]: a whole session written from outside merge (`p5 analyze import`);
//! - [`read`]: typed read queries — what the viewer, the demo and the analysis read through;
//! - [`domain`]: the names stored for thread states, runtimes, protocols, directions.
//!
//! Only this crate contains SQL DDL and migrations; errors are [`Error`] (thiserror).

pub mod analysis;
pub mod connect;
pub mod domain;
pub mod error;
pub mod import;
pub mod migrate;
pub mod raw_rows;
pub mod read;
pub mod schema;
pub mod stream;
#[cfg(feature = "testing")]
pub mod testing;
pub mod url;
pub mod write;

pub use error::Error;
pub use migrate::Backend;
pub use read::Reader;
pub use url::DbUrl;
pub use write::{Db, Writer};
