//! The bulk message read of `p5 analyze`: every message with both (possibly unknown) ends,
//! streamed without materializing, stepping SQLite's own handle.

use super::{Reader, RowExt};
use crate::domain::Direction;
use crate::error::Error;
use futures_util::TryStreamExt;

/// A message as `p5 analyze` reads it: both ends (either may be unknown), its connection
/// and its place on it. Arrival is `recv_end` (`recv_t` starts a possibly blocked receive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageEnds {
    /// Message id.
    pub id: i64,
    /// Bytes.
    pub bytes: i64,
    /// Sending process (NULL: the send was not recorded).
    pub send_process: Option<i64>,
    /// Sending thread.
    pub send_thread: Option<i64>,
    /// Send call start on the base.
    pub send_t: Option<i64>,
    /// Receiving process.
    pub recv_process: Option<i64>,
    /// Receiving thread.
    pub recv_thread: Option<i64>,
    /// End of the receive that got the last byte on the base.
    pub recv_end: Option<i64>,
    /// → `connection.id`.
    pub connection: Option<i64>,
    /// Call or return on the connection.
    pub direction: Option<Direction>,
    /// 0-based index within the connection and direction.
    pub ordinal: Option<i64>,
}

/// Streams every message of a session (table order) into `each`, without materializing
/// them: loading millions costs only what `each` keeps. Returns the number of rows.
pub async fn for_each_message_end(
    db: &Reader,
    sid: i64,
    mut each: impl FnMut(MessageEnds),
) -> Result<u64, Error> {
    // Few columns and integers only: each value costs SQLite's driver a copy.
    const Q: &str = "SELECT id, bytes, send_process_id, send_thread_id, send_t, \
         recv_process_id, recv_thread_id, recv_end, connection_id, \
         CAST(CASE direction WHEN 'call' THEN 0 WHEN 'return' THEN 1 END AS BIGINT) \
         AS direction_code, ordinal \
         FROM message WHERE session_id = $1";
    fn direction(code: Option<i64>) -> Option<Direction> {
        match code {
            Some(0) => Some(Direction::Call),
            Some(1) => Some(Direction::Return),
            _ => None,
        }
    }
    fn row<R: RowExt>(r: &R) -> Result<MessageEnds, sqlx::Error> {
        let direction = direction(r.oi("direction_code")?);
        Ok(MessageEnds {
            id: r.i("id")?,
            bytes: r.i("bytes")?,
            send_process: r.oi("send_process_id")?,
            send_thread: r.oi("send_thread_id")?,
            send_t: r.oi("send_t")?,
            recv_process: r.oi("recv_process_id")?,
            recv_thread: r.oi("recv_thread_id")?,
            recv_end: r.oi("recv_end")?,
            connection: r.oi("connection_id")?,
            direction,
            ordinal: r.oi("ordinal")?,
        })
    }
    let mut n = 0u64;
    match db {
        // Two million rows through sqlx's SQLite worker take ten seconds: step on the handle.
        // `session_id = ?` alone makes SQLite walk an index and fetch every row by rowid
        // (2.4 s for 2 M); a session's rows were inserted together, so read the rowid range
        // between its first and last message in table order (0.9 s), then through the
        // index whatever lies outside it (none, unless rows were written out of order).
        Reader::Sqlite(pool) => {
            const ENDS: &str = "SELECT \
                 (SELECT rowid FROM message WHERE session_id = $1 ORDER BY id LIMIT 1), \
                 (SELECT rowid FROM message WHERE session_id = $1 ORDER BY id DESC LIMIT 1)";
            let mut ends = (0, -1);
            crate::raw_rows::scan_i64::<2>(pool, ENDS, &[sid], |r| {
                ends = (r[0].unwrap_or(0), r[1].unwrap_or(-1));
            })
            .await?;
            let (lo, hi) = (ends.0.min(ends.1), ends.0.max(ends.1));
            // NOT INDEXED keeps SQLite from preferring the session index over the rowid
            // range; the range's session filter keeps other sessions' rows out.
            let inside = format!("{Q} AND rowid BETWEEN $2 AND $3").replacen(
                "FROM message",
                "FROM message NOT INDEXED",
                1,
            );
            let outside = format!("{Q} AND rowid NOT BETWEEN $2 AND $3");
            // The raw scan reads the columns in the order `Q` selects them.
            let mut one = |r: &[Option<i64>; 11]| {
                each(MessageEnds {
                    id: r[0].unwrap_or(0),
                    bytes: r[1].unwrap_or(0),
                    send_process: r[2],
                    send_thread: r[3],
                    send_t: r[4],
                    recv_process: r[5],
                    recv_thread: r[6],
                    recv_end: r[7],
                    connection: r[8],
                    direction: direction(r[9]),
                    ordinal: r[10],
                })
            };
            n = crate::raw_rows::scan_i64(pool, &inside, &[sid, lo, hi], &mut one).await?;
            n += crate::raw_rows::scan_i64(pool, &outside, &[sid, lo, hi], &mut one).await?;
        }
        Reader::Postgres(pool) => {
            let mut rows = sqlx::query(Q).bind(sid).fetch(pool);
            while let Some(r) = rows.try_next().await? {
                each(row(&r)?);
                n += 1;
            }
        }
    }
    Ok(n)
}
