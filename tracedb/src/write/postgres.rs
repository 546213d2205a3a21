//! PostgreSQL: one connection, rows streamed with `COPY … FROM STDIN` (text format).

use crate::error::Error;
use crate::schema::{Table, Value};
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, PgConnection};
use std::io::Write;
use std::str::FromStr;

/// Values buffered per table before one `COPY`.
pub const BATCH_VALUES: usize = 1 << 18;

/// Connects (`postgres://…`; `?options=-csearch_path%3Dname` selects a schema).
pub async fn connect(url: &str) -> Result<PgConnection, sqlx::Error> {
    let opts = PgConnectOptions::from_str(url)?;
    opts.connect().await
}

/// Appends a value in COPY text format.
fn put(buf: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => buf.extend_from_slice(b"\\N"),
        Value::Int(i) => {
            let _ = write!(buf, "{i}");
        }
        Value::Real(f) if f.is_finite() => {
            let _ = write!(buf, "{f:?}");
        }
        Value::Real(_) => buf.extend_from_slice(b"\\N"),
        Value::Text(s) => put_text(buf, s),
        Value::Static(s) => put_text(buf, s),
    }
}

/// Appends text in COPY text format (backslash escapes; NUL dropped).
fn put_text(buf: &mut Vec<u8>, s: &str) {
    for &b in s.as_bytes() {
        match b {
            b'\\' => buf.extend_from_slice(b"\\\\"),
            b'\t' => buf.extend_from_slice(b"\\t"),
            b'\n' => buf.extend_from_slice(b"\\n"),
            b'\r' => buf.extend_from_slice(b"\\r"),
            0 => {} // text cannot hold NUL in PostgreSQL
            _ => buf.push(b),
        }
    }
}

/// Streams rows (flattened) with one `COPY`.
pub async fn insert(c: &mut PgConnection, table: Table, values: Vec<Value>) -> Result<(), Error> {
    let cols = table.columns.len();
    let sql = format!("COPY {} ({}) FROM STDIN", table.name, table.column_list());
    let mut copy = c.copy_in_raw(&sql).await?;
    let mut buf = Vec::with_capacity(1 << 20);
    for (i, v) in values.iter().enumerate() {
        put(&mut buf, v);
        buf.push(if (i + 1) % cols == 0 { b'\n' } else { b'\t' });
        if buf.len() >= 1 << 20 && (i + 1) % cols == 0 {
            copy.send(std::mem::take(&mut buf)).await?;
        }
    }
    if !buf.is_empty() {
        copy.send(buf).await?;
    }
    copy.finish().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_text_escapes() {
        let mut b = Vec::new();
        for v in [
            Value::Null,
            Value::Int(-5),
            Value::Real(0.25),
            Value::Text("a\tb\\c\nd\0".into()),
        ] {
            put(&mut b, &v);
            b.push(b'|');
        }
        assert_eq!(String::from_utf8(b).unwrap(), "\\N|-5|0.25|a\\tb\\\\c\\nd|");
    }
}
