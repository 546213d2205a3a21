//! What the flow analysis reads from a session (analysis.md §6 WP4: the PDG's events are
//! communication calls and interval enter/exit per thread) and the user's rules: start
//! events and join directives. Plain data, filled by [`super::load`] from the trace database
//! (or by hand in tests).

use crate::hash::FxHashMap;
use crate::{Error, Result};
use p5_tracedb::domain::Direction;

/// A thread of the session and the program it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadInfo {
    /// `thread.id`.
    pub id: i64,
    /// `process.id`.
    pub process: i64,
    /// The program (`process.program`).
    pub program: String,
}

/// A sensor's names: a start or join names it by any of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SensorInfo {
    /// `sensor.id`.
    pub id: i64,
    /// Display name (a function's name for function sensors): what call paths show.
    pub name: String,
    /// Enclosing function.
    pub function: Option<String>,
    /// `0x` + 16 hex digits.
    pub hex: String,
}

/// A function call or region on one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    /// `thread.id`.
    pub thread: i64,
    /// `sensor.id`.
    pub sensor: i64,
    /// Enter.
    pub t_start: i64,
    /// Exit.
    pub t_end: i64,
    /// Nesting depth, 0 = outermost.
    pub depth: i64,
}

/// A message with whichever ends were recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Msg {
    /// `message.id`.
    pub id: i64,
    /// Bytes.
    pub bytes: i64,
    /// Sending thread and the start of its send call.
    pub send: Option<(i64, i64)>,
    /// Receiving thread and the end of the receive that completed it.
    pub recv: Option<(i64, i64)>,
    /// Call or return on its connection.
    pub direction: Option<Direction>,
}

/// An instant of a sensor on a thread: a mark, or a counter sample with its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instant {
    /// `thread.id`.
    pub thread: i64,
    /// `sensor.id`.
    pub sensor: i64,
    /// Time.
    pub t: i64,
    /// A counter's value (0 for marks).
    pub value: i64,
}

/// Everything the flow analysis reads of one session.
#[derive(Debug, Clone, Default)]
pub struct Events {
    /// Session name.
    pub session: String,
    /// Threads.
    pub threads: Vec<ThreadInfo>,
    /// Sensors.
    pub sensors: Vec<SensorInfo>,
    /// Intervals.
    pub intervals: Vec<Interval>,
    /// Messages.
    pub messages: Vec<Msg>,
    /// Marks.
    pub marks: Vec<Instant>,
    /// Counter samples.
    pub counters: Vec<Instant>,
}

impl Events {
    /// Events of the program-dependence graph: enters, exits, sends, receives, marks and
    /// counter samples.
    pub fn count(&self) -> u64 {
        let ends: usize = self
            .messages
            .iter()
            .map(|m| usize::from(m.send.is_some()) + usize::from(m.recv.is_some()))
            .sum();
        (2 * self.intervals.len() + ends + self.marks.len() + self.counters.len()) as u64
    }

    /// Ids of the sensors called `name` (display name, function or hex id).
    pub fn sensors_named(&self, name: &str) -> Vec<i64> {
        self.sensors
            .iter()
            .filter(|s| s.name == name || s.function.as_deref() == Some(name) || s.hex == name)
            .map(|s| s.id)
            .collect()
    }

    /// Display name of each sensor.
    pub fn sensor_names(&self) -> FxHashMap<i64, &str> {
        self.sensors
            .iter()
            .map(|s| (s.id, s.name.as_str()))
            .collect()
    }
}

/// What starts a flow (`--start`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// Each enter of this function or region (`sensor:NAME`).
    Sensor(String),
    /// Each mark of this sensor (`mark:NAME`).
    Mark(String),
    /// Each message this program sends that no message it received caused
    /// (`messages-from:PROGRAM`; [`super::rules`] says when a send is caused).
    MessagesFrom(String),
}

impl Start {
    /// Parses `sensor:NAME`, `mark:NAME` or `messages-from:PROGRAM`.
    pub fn parse(s: &str) -> Result<Start> {
        let bad = || {
            Error::Usage(format!(
                "--start {s:?}: expected sensor:NAME, mark:NAME or messages-from:PROGRAM"
            ))
        };
        let (kind, name) = s.split_once(':').ok_or_else(bad)?;
        if name.is_empty() {
            return Err(bad());
        }
        Ok(match kind {
            "sensor" => Start::Sensor(name.to_owned()),
            "mark" => Start::Mark(name.to_owned()),
            "messages-from" => Start::MessagesFrom(name.to_owned()),
            _ => return Err(bad()),
        })
    }
}

impl std::fmt::Display for Start {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Start::Sensor(n) => write!(f, "sensor:{n}"),
            Start::Mark(n) => write!(f, "mark:{n}"),
            Start::MessagesFrom(n) => write!(f, "messages-from:{n}"),
        }
    }
}

/// A mapping directive (`--join A=B`, seed 002 §3.2): a counter sample of sensor `B` joins
/// the flow of the earlier sample of sensor `A` with the same value in the same process —
/// a queue's enqueue (`p5_counter(ENQ, (int64_t)item)`) and dequeue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Join {
    /// The earlier event's sensor.
    pub from: String,
    /// The later event's sensor.
    pub to: String,
}

impl Join {
    /// Parses `SENSOR_A=SENSOR_B`.
    pub fn parse(s: &str) -> Result<Join> {
        match s.split_once('=') {
            Some((a, b)) if !a.is_empty() && !b.is_empty() => Ok(Join {
                from: a.to_owned(),
                to: b.to_owned(),
            }),
            _ => Err(Error::Usage(format!(
                "--join {s:?}: expected SENSOR_A=SENSOR_B"
            ))),
        }
    }
}

/// The rules of one flow construction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// Start events; none: every message sent by a thread in no flow (or after a reply)
    /// starts one, whatever its program.
    pub starts: Vec<Start>,
    /// Directives.
    pub joins: Vec<Join>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_and_joins_parse() {
        assert_eq!(
            Start::parse("sensor:handle").unwrap(),
            Start::Sensor("handle".into())
        );
        assert_eq!(
            Start::parse("mark:click").unwrap(),
            Start::Mark("click".into())
        );
        assert_eq!(
            Start::parse("messages-from:client").unwrap(),
            Start::MessagesFrom("client".into())
        );
        assert_eq!(
            Start::parse("messages-from:client").unwrap().to_string(),
            "messages-from:client"
        );
        for bad in ["sensor:", "x:y", "handle"] {
            assert!(Start::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            Join::parse("enq=deq").unwrap(),
            Join {
                from: "enq".into(),
                to: "deq".into()
            }
        );
        assert!(Join::parse("enq").is_err());
        assert!(Join::parse("=deq").is_err());
    }
}
