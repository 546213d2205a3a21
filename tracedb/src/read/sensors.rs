//! Sensors (the probes in the source), the source files holding their text, and the call
//! counts of throttled and count-only sensors.

use super::{Reader, RowExt};
use crate::error::Error;
use crate::schema;
use serde::Serialize;

/// A sensor (a probe in the source, from the instrumenter's manifest).
#[derive(Debug, Clone, Serialize)]
pub struct Sensor {
    /// Sensor id (64-bit hash, as stored: signed). Serialized as a string because JSON
    /// numbers lose precision beyond 2^53.
    #[serde(serialize_with = "as_string")]
    pub id: i64,
    /// `0x` + 16 hex digits.
    pub hex: String,
    /// Kind (`function`, `call`, `comm`, `region`, `statement`, …).
    pub kind: Option<String>,
    /// Source file path (relative to the instrumented tree).
    pub file: Option<String>,
    /// `source_file.id` holding the text.
    pub source_file_id: Option<i64>,
    /// Function.
    pub function: Option<String>,
    /// Display name.
    pub name: String,
    /// First line, 1-based.
    pub line: Option<i64>,
    /// Last line.
    pub end_line: Option<i64>,
}

fn as_string<S: serde::Serializer>(v: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// Sensors of a session, ordered by id (the order defines the compact sensor index).
pub async fn sensors(db: &Reader, sid: i64) -> Result<Vec<Sensor>, Error> {
    const Q: &str = "SELECT id, hex, kind, file, source_file_id, function, name, line, end_line \
         FROM sensor WHERE session_id = $1 ORDER BY id";
    Ok(fetch!(db, Q, [sid], |r| Sensor {
        id: r.i("id")?,
        hex: r.s("hex")?,
        kind: r.os("kind")?,
        file: r.os("file")?,
        source_file_id: r.oi("source_file_id")?,
        function: r.os("function")?,
        name: r.s("name")?,
        line: r.oi("line")?,
        end_line: r.oi("end_line")?,
    }))
}

/// A source file with its text.
#[derive(Debug, Clone, Serialize)]
pub struct SourceFile {
    /// Id.
    pub id: i64,
    /// Path (relative to the instrumented tree; a label, never opened).
    pub path: String,
    /// Language.
    pub language: String,
    /// Number of lines.
    pub lines: i64,
    /// Text, if the merge had it.
    pub text: Option<String>,
}

/// One source file, if present.
pub async fn source_file(db: &Reader, sid: i64, id: i64) -> Result<Option<SourceFile>, Error> {
    const Q: &str = "SELECT id, path, language, lines, text FROM source_file \
         WHERE session_id = $1 AND id = $2";
    let mut v = fetch!(db, Q, [sid, id], |r| SourceFile {
        id: r.i("id")?,
        path: r.s("path")?,
        language: r.s("language")?,
        lines: r.i("lines")?,
        text: r.os("text")?,
    });
    Ok(v.pop())
}

/// Throttled and count-only sensors with their call counts, most calls first (empty for a
/// database written before migration 0010).
pub async fn sensor_calls(db: &Reader, sid: i64) -> Result<Vec<schema::SensorCalls>, Error> {
    if db.schema_version().await? < 10 {
        return Ok(Vec::new());
    }
    const Q: &str = "SELECT process_id, sensor_id, t_throttled, calls, timed, timed_ns, \
         recorded, pinned FROM sensor_calls WHERE session_id = $1 \
         ORDER BY calls DESC, sensor_id, process_id";
    Ok(fetch!(db, Q, [sid], |r| schema::SensorCalls {
        session_id: sid,
        process_id: r.i("process_id")?,
        sensor_id: r.i("sensor_id")?,
        t_throttled: r.i("t_throttled")?,
        calls: r.i("calls")?,
        timed: r.i("timed")?,
        timed_ns: r.i("timed_ns")?,
        recorded: r.i("recorded")?,
        pinned: r.i("pinned")?,
    }))
}
