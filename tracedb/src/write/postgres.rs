//! PostgreSQL: one connection, rows streamed with `COPY … FROM STDIN` in binary format.
//!
//! Binary rather than text: every column is `BIGINT`, `DOUBLE PRECISION` or `TEXT`, so a value
//! is its length and 8 big-endian bytes or its UTF-8 bytes — no number formatting here and no
//! parsing in the server, which was most of the server's work with text COPY. The rows stored
//! are the same as with text: non-finite reals become NULL and NUL characters are dropped
//! (PostgreSQL text cannot hold them).

use crate::error::Error;
use crate::schema::{Table, Value};
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, PgConnection};
use std::str::FromStr;

/// Values buffered per table before one `COPY`.
pub const BATCH_VALUES: usize = 1 << 18;

/// Connects (`postgres://…`; `?options=-csearch_path%3Dname` selects a schema).
pub async fn connect(url: &str) -> Result<PgConnection, sqlx::Error> {
    let opts = PgConnectOptions::from_str(url)?;
    opts.connect().await
}

/// The binary COPY header: signature, flags, header extension length.
const HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";

/// Appends a value as a binary COPY field (length, then bytes; NULL is length -1).
fn put(buf: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => buf.extend_from_slice(&(-1i32).to_be_bytes()),
        Value::Int(i) => {
            buf.extend_from_slice(&8i32.to_be_bytes());
            buf.extend_from_slice(&i.to_be_bytes());
        }
        Value::Real(f) if f.is_finite() => {
            buf.extend_from_slice(&8i32.to_be_bytes());
            buf.extend_from_slice(&f.to_be_bytes());
        }
        Value::Real(_) => buf.extend_from_slice(&(-1i32).to_be_bytes()),
        Value::Text(s) => put_text(buf, s),
        Value::Static(s) => put_text(buf, s),
    }
}

/// Appends text as a binary COPY field (NUL dropped: PostgreSQL text cannot hold it).
fn put_text(buf: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    if bytes.contains(&0) {
        let kept: Vec<u8> = bytes.iter().copied().filter(|&b| b != 0).collect();
        buf.extend_from_slice(&(kept.len() as i32).to_be_bytes());
        buf.extend_from_slice(&kept);
    } else {
        buf.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
        buf.extend_from_slice(bytes);
    }
}

/// Streams rows (flattened) with one binary `COPY`.
pub async fn insert(c: &mut PgConnection, table: Table, values: Vec<Value>) -> Result<(), Error> {
    let cols = table.columns.len();
    let sql = format!(
        "COPY {} ({}) FROM STDIN (FORMAT binary)",
        table.name,
        table.column_list()
    );
    let mut copy = c.copy_in_raw(&sql).await?;
    let mut buf = Vec::with_capacity(1 << 20);
    buf.extend_from_slice(HEADER);
    for row in values.chunks_exact(cols) {
        buf.extend_from_slice(&(cols as i16).to_be_bytes());
        for v in row {
            put(&mut buf, v);
        }
        if buf.len() >= 1 << 20 {
            copy.send(std::mem::take(&mut buf)).await?;
        }
    }
    buf.extend_from_slice(&(-1i16).to_be_bytes());
    copy.send(buf).await?;
    copy.finish().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_binary_fields() {
        let mut b = Vec::new();
        for v in [
            Value::Null,
            Value::Int(-5),
            Value::Real(0.25),
            Value::Real(f64::NAN),
            Value::Text("a\tb\0c".into()),
        ] {
            put(&mut b, &v);
        }
        let mut want = Vec::new();
        want.extend_from_slice(&(-1i32).to_be_bytes());
        want.extend_from_slice(&8i32.to_be_bytes());
        want.extend_from_slice(&(-5i64).to_be_bytes());
        want.extend_from_slice(&8i32.to_be_bytes());
        want.extend_from_slice(&0.25f64.to_be_bytes());
        want.extend_from_slice(&(-1i32).to_be_bytes());
        want.extend_from_slice(&4i32.to_be_bytes());
        want.extend_from_slice(b"a\tbc");
        assert_eq!(b, want);
        assert_eq!(HEADER.len(), 19);
    }
}
