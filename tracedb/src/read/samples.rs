//! Instants and sampled values: interrupts, sensor marks, host metrics with their samples,
//! and application counters.

use super::{Reader, RowExt};
use crate::error::Error;
use serde::Serialize;

/// An interrupt instant.
#[derive(Debug, Clone, Copy)]
pub struct IrqRow {
    /// Host.
    pub host: i64,
    /// IRQ number.
    pub irq: i64,
    /// Time.
    pub t: i64,
}

/// Interrupts of a session (table order).
pub async fn irqs(db: &Reader, sid: i64) -> Result<Vec<IrqRow>, Error> {
    const Q: &str = "SELECT host_id, irq, t FROM irq WHERE session_id = $1";
    Ok(fetch!(db, Q, [sid], |r| IrqRow {
        host: r.i("host_id")?,
        irq: r.i("irq")?,
        t: r.i("t")?,
    }))
}

/// A host metric.
#[derive(Debug, Clone, Serialize)]
pub struct Metric {
    /// Metric id.
    pub id: i64,
    /// Host.
    pub host_id: i64,
    /// Name (`cpu.total.busy`, `net.eth0.rx_bytes_total`, …).
    pub name: String,
    /// Unit.
    pub unit: String,
    /// Stored value × 10^scale_exp is the value in `unit`.
    pub scale_exp: i64,
}

/// Host metrics of a session.
pub async fn host_metrics(db: &Reader, sid: i64) -> Result<Vec<Metric>, Error> {
    const Q: &str = "SELECT id, host_id, name, unit, scale_exp FROM metric \
         WHERE session_id = $1 AND kind = 'host' ORDER BY host_id, name";
    Ok(fetch!(db, Q, [sid], |r| Metric {
        id: r.i("id")?,
        host_id: r.i("host_id")?,
        name: r.s("name")?,
        unit: r.s("unit")?,
        scale_exp: r.i("scale_exp")?,
    }))
}

/// Samples of one metric, by time: `(t, stored value)`.
pub async fn metric_samples(db: &Reader, sid: i64, metric: i64) -> Result<Vec<(i64, i64)>, Error> {
    const Q: &str = "SELECT t, value FROM metric_sample WHERE session_id = $1 AND metric_id = $2 \
         ORDER BY t";
    Ok(fetch!(db, Q, [sid, metric], |r| (r.i("t")?, r.i("value")?)))
}

/// An instant of a sensor (`mark`) as the flow analysis reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkRow {
    /// Thread.
    pub thread: i64,
    /// Sensor id.
    pub sensor: i64,
    /// Time.
    pub t: i64,
}

/// Every mark of a session (table order).
pub async fn marks(db: &Reader, sid: i64) -> Result<Vec<MarkRow>, Error> {
    const Q: &str = "SELECT thread_id, sensor_id, t FROM mark WHERE session_id = $1";
    Ok(fetch!(db, Q, [sid], |r| MarkRow {
        thread: r.i("thread_id")?,
        sensor: r.i("sensor_id")?,
        t: r.i("t")?,
    }))
}

/// A sample of an application counter (`metric.kind = 'counter'`), with the counter's
/// name and sensor id (`metric.key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterSample {
    /// The thread that recorded it.
    pub thread: i64,
    /// The counter's sensor id.
    pub sensor: i64,
    /// Time.
    pub t: i64,
    /// Value.
    pub value: i64,
}

/// Every sample of the session's application counters (table order).
pub async fn counter_samples(db: &Reader, sid: i64) -> Result<Vec<CounterSample>, Error> {
    const Q: &str = "SELECT s.thread_id AS thread_id, m.key AS sensor, s.t AS t, s.value AS value \
         FROM metric_sample s JOIN metric m ON m.session_id = s.session_id \
         AND m.id = s.metric_id WHERE s.session_id = $1 AND m.kind = 'counter'";
    Ok(fetch!(db, Q, [sid], |r| CounterSample {
        thread: r.i("thread_id")?,
        sensor: r.i("sensor")?,
        t: r.i("t")?,
        value: r.i("value")?,
    }))
}
