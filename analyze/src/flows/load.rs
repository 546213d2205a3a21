//! The trace database at the flow analysis's edge: a session's threads, sensors, intervals,
//! messages, marks and counter samples read into [`Events`] through `p5_tracedb::read`, and
//! the results written as an analysis run (`p5_tracedb::analysis::FlowResults`).

use super::model::{Events, Instant, Interval, Msg, SensorInfo, ThreadInfo};
use crate::Result;
use p5_tracedb::read::{self, Reader, Session};
use std::collections::HashMap;

/// Reads what the flow analysis needs of session `s`.
pub async fn read_events(db: &Reader, s: &Session) -> Result<Events> {
    let programs: HashMap<i64, String> = read::processes(db, s.id)
        .await?
        .into_iter()
        .map(|p| (p.id, p.program))
        .collect();
    let threads = read::threads(db, s.id)
        .await?
        .into_iter()
        .map(|t| ThreadInfo {
            id: t.id,
            process: t.process_id,
            program: programs.get(&t.process_id).cloned().unwrap_or_default(),
        })
        .collect();
    let sensors = read::sensors(db, s.id)
        .await?
        .into_iter()
        .map(|x| SensorInfo {
            id: x.id,
            name: x.name,
            function: x.function,
            hex: x.hex,
        })
        .collect();
    let intervals = read::intervals(db, s.id)
        .await?
        .into_iter()
        .map(|i| Interval {
            thread: i.thread,
            sensor: i.sensor,
            t_start: i.t_start,
            t_end: i.t_end,
            depth: i.depth,
        })
        .collect();
    let mut messages = Vec::with_capacity(usize::try_from(s.messages).unwrap_or(0));
    read::for_each_message_end(db, s.id, |m| {
        messages.push(Msg {
            id: m.id,
            bytes: m.bytes,
            send: m.send_thread.zip(m.send_t),
            recv: m.recv_thread.zip(m.recv_end),
            direction: m.direction,
        });
    })
    .await?;
    messages.sort_unstable_by_key(|m| m.id);
    let marks = read::marks(db, s.id)
        .await?
        .into_iter()
        .map(|m| Instant {
            thread: m.thread,
            sensor: m.sensor,
            t: m.t,
            value: 0,
        })
        .collect();
    let counters = read::counter_samples(db, s.id)
        .await?
        .into_iter()
        .map(|c| Instant {
            thread: c.thread,
            sensor: c.sensor,
            t: c.t,
            value: c.value,
        })
        .collect();
    Ok(Events {
        session: s.name.clone(),
        threads,
        sensors,
        intervals,
        messages,
        marks,
        counters,
    })
}
