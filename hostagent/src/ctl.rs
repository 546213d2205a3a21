//! Steering the agent tree: the JSON messages carried in `Control` frames and the
//! `hostagent ctl` client.
//!
//! `hostagent ctl --agent HOST:PORT <command>` connects to an agent's `--listen` port and
//! sends one `Control` frame *instead of* a `Hello`; the agent applies the request to itself,
//! fans it out to every agent below it (each descendant's connection passes through it, see
//! [`crate::tree`]), gathers their replies for up to [`FANOUT_TIMEOUT`] and answers with one
//! `Control` frame listing every agent. Sent to the top agent it steers the whole tree.
//!
//! ```text
//! request: {"kind":"request","id":7,"op":"set","interval_ms":200,"metrics":["cpu.*"]}
//! reply:   {"kind":"reply","id":7,"ok":true,"agents":[{…status…}],"unanswered":[]}
//! ```

use crate::link::{self, FrameReader, LinkError};
use crate::settings::{Settings, SettingsError, split_patterns};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How long an agent waits for the agents below it to answer.
pub const FANOUT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long `ctl` waits for the reply.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// What a request asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// Report every agent's state.
    Status,
    /// Change interval and/or metric selection.
    Set,
    /// Resume recording.
    Start,
    /// Stop recording (agents stay connected).
    Stop,
}

/// A steering request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Correlates the reply.
    pub id: u64,
    /// What to do.
    pub op: Op,
    /// New interval (`set`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_ms: Option<u64>,
    /// New metric patterns (`set`; empty = automatic mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Vec<String>>,
    /// True when an agent pushes the tree's settings to a newly joined child: no reply.
    #[serde(default)]
    pub push: bool,
}

/// One agent's state, as `status` reports it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentStatus {
    /// Host name.
    pub host: String,
    /// The agent's process uid (hex).
    pub process_uid: String,
    /// Its pid.
    pub pid: u32,
    /// Seconds since it started.
    pub uptime_s: f64,
    /// Sampling interval.
    pub interval_ms: u64,
    /// Recording or stopped.
    pub recording: bool,
    /// Metric patterns (empty = everything).
    pub metrics: Vec<String>,
    /// Age of the oldest sample not yet acknowledged upstream, ms (0 = all delivered).
    pub lag_ms: u64,
    /// Samples taken and queued for delivery.
    pub samples_sent: u64,
    /// Samples lost (spool full, sampling overran its interval).
    pub dropped: u64,
    /// Frames in memory waiting for an acknowledgement.
    pub unacked_frames: u64,
    /// Bytes waiting in the spool.
    pub spool_bytes: u64,
    /// Where it delivers (`parent HOST:PORT` or `logserver HOST:PORT`).
    pub upstream: String,
    /// Whether that link is up.
    pub upstream_connected: bool,
    /// Connections relayed through it (agents and other producers below it).
    pub relays: u64,
    /// OS monitor state (`off`, `tracefs`, `proc (lower fidelity)`, …).
    pub sched: String,
}

/// A reply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// The request's id.
    pub id: u64,
    /// False if the request was refused.
    pub ok: bool,
    /// Why it was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Every agent that answered (the addressed one first).
    pub agents: Vec<AgentStatus>,
    /// Agents below that did not answer in time.
    #[serde(default)]
    pub unanswered: Vec<String>,
}

/// Any control message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Message {
    /// A request.
    Request(Request),
    /// A reply.
    Reply(Reply),
}

impl Message {
    /// Parses a control frame's JSON.
    pub fn parse(json: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(json)
    }

    /// Serializes.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }
}

impl Request {
    /// The settings after applying this request to `cur`.
    pub fn apply_to(&self, cur: &Settings) -> Result<Settings, SettingsError> {
        let mut s = cur.clone();
        match self.op {
            Op::Status => {}
            Op::Start => s.recording = true,
            Op::Stop => s.recording = false,
            Op::Set => {
                if let Some(i) = self.interval_ms {
                    s.interval_ms = i;
                }
                if let Some(m) = &self.metrics {
                    s.metrics = m.iter().filter(|p| *p != "all").cloned().collect();
                }
            }
        }
        s.validate()?;
        Ok(s)
    }
}

/// `ctl` failures, worded for the person at the terminal.
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    /// Bad command words.
    #[error("{0}")]
    Usage(String),
    /// Cannot connect.
    #[error("cannot reach the agent at {addr}: {cause} (is `hostagent --listen {addr}` running?)")]
    Connect {
        /// Address.
        addr: String,
        /// Cause (in the message, so not a `source`: printers that print the chain would say
        /// it twice).
        cause: std::io::Error,
    },
    /// The link failed.
    #[error("connection to the agent at {addr} failed: {cause}")]
    Link {
        /// Address.
        addr: String,
        /// Cause (in the message, not a `source`).
        cause: LinkError,
    },
    /// No reply in time.
    #[error("the agent at {0} did not answer within {CLIENT_TIMEOUT:?}")]
    Timeout(String),
    /// The peer answered with something else.
    #[error("the agent at {addr} answered unexpectedly: {what}")]
    Protocol {
        /// Address.
        addr: String,
        /// What came.
        what: String,
    },
    /// The agent refused the request.
    #[error("the agent refused the request: {0}")]
    Refused(String),
}

/// Parses the command words of `hostagent ctl` (`status`, `start`, `stop`,
/// `set interval=200ms metrics=cpu.*,mem.*`).
pub fn parse_command(words: &[String]) -> Result<Request, CtlError> {
    let usage = || {
        CtlError::Usage(
            "usage: hostagent ctl --agent HOST:PORT status | start | stop | set [interval=MS] [metrics=GLOB,…|all]"
                .to_owned(),
        )
    };
    let (first, rest) = words.split_first().ok_or_else(usage)?;
    let op = match first.as_str() {
        "status" => Op::Status,
        "start" => Op::Start,
        "stop" => Op::Stop,
        "set" => Op::Set,
        other => {
            return Err(CtlError::Usage(format!(
                "unknown command {other:?}; {}",
                usage()
            )));
        }
    };
    let mut req = Request {
        id: crate::identity::random_u64(),
        op,
        interval_ms: None,
        metrics: None,
        push: false,
    };
    if op != Op::Set && !rest.is_empty() {
        return Err(CtlError::Usage(format!("`{first}` takes no arguments")));
    }
    for w in rest {
        let (k, v) = w
            .split_once('=')
            .ok_or_else(|| CtlError::Usage(format!("expected key=value, got {w:?}")))?;
        match k {
            "interval" => req.interval_ms = Some(parse_interval(v)?),
            "metrics" => req.metrics = Some(split_patterns(v)),
            _ => {
                return Err(CtlError::Usage(format!(
                    "unknown setting {k:?} (known: interval, metrics)"
                )));
            }
        }
    }
    if op == Op::Set && req.interval_ms.is_none() && req.metrics.is_none() {
        return Err(CtlError::Usage(
            "`set` needs interval=… and/or metrics=…".to_owned(),
        ));
    }
    let check = req.apply_to(&Settings::default());
    check.map_err(|e| CtlError::Usage(e.to_string()))?;
    Ok(req)
}

/// Parses `250`, `250ms`, `2s`.
pub fn parse_interval(v: &str) -> Result<u64, CtlError> {
    let bad = || CtlError::Usage(format!("bad interval {v:?}: use e.g. 100, 100ms or 2s"));
    if let Some(s) = v.strip_suffix("ms") {
        s.trim().parse().map_err(|_| bad())
    } else if let Some(s) = v.strip_suffix('s') {
        s.trim()
            .parse::<u64>()
            .map_err(|_| bad())?
            .checked_mul(1000)
            .ok_or_else(bad)
    } else {
        v.trim().parse().map_err(|_| bad())
    }
}

/// Sends one request to the agent at `addr` and returns its reply.
pub fn send(addr: &str, req: &Request) -> Result<Reply, CtlError> {
    let s = link::connect(addr, Duration::from_secs(3)).map_err(|cause| CtlError::Connect {
        addr: addr.to_owned(),
        cause,
    })?;
    let link_err = |cause: LinkError| CtlError::Link {
        addr: addr.to_owned(),
        cause,
    };
    s.set_write_timeout(Some(Duration::from_secs(5)))
        .and_then(|()| s.set_read_timeout(Some(Duration::from_millis(200))))
        .map_err(|e| link_err(e.into()))?;
    let msg = Message::Request(req.clone()).to_json();
    link::write_all(&s, &link::control_frame(&msg)).map_err(|e| link_err(e.into()))?;
    let mut r = FrameReader::trusted(s);
    let f = r
        .next_within(CLIENT_TIMEOUT)
        .map_err(link_err)?
        .ok_or_else(|| CtlError::Timeout(addr.to_owned()))?;
    let text = link::body_str(&f.body).map_err(|e| link_err(e.into()))?;
    match p5_wire::FrameType::from_u8(f.ty) {
        Some(p5_wire::FrameType::Control) => {}
        Some(p5_wire::FrameType::Error) => return Err(CtlError::Refused(text)),
        _ => {
            return Err(CtlError::Protocol {
                addr: addr.to_owned(),
                what: format!("frame type {:#04x}", f.ty),
            });
        }
    }
    match Message::parse(&text) {
        Ok(Message::Reply(rep)) if rep.ok => Ok(rep),
        Ok(Message::Reply(rep)) => Err(CtlError::Refused(
            rep.error.unwrap_or_else(|| "no reason given".to_owned()),
        )),
        Ok(Message::Request(_)) | Err(_) => Err(CtlError::Protocol {
            addr: addr.to_owned(),
            what: text.chars().take(200).collect(),
        }),
    }
}

/// Renders a reply as a table.
pub fn render(rep: &Reply) -> String {
    let mut out = format!(
        "{:<20} {:<6} {:>9} {:>9} {:>5} {:>8} {:>8} {:>7} {:>6}  {}\n",
        "HOST",
        "PID",
        "UPTIME",
        "INTERVAL",
        "REC",
        "LAG",
        "SAMPLES",
        "DROPPED",
        "SPOOL",
        "UPSTREAM"
    );
    for a in &rep.agents {
        out.push_str(&format!(
            "{:<20} {:<6} {:>8.0}s {:>7}ms {:>5} {:>6}ms {:>8} {:>7} {:>5}K  {}{}{}\n",
            a.host,
            a.pid,
            a.uptime_s,
            a.interval_ms,
            if a.recording { "on" } else { "off" },
            a.lag_ms,
            a.samples_sent,
            a.dropped,
            a.spool_bytes / 1024,
            a.upstream,
            if a.upstream_connected { "" } else { " (down)" },
            if a.metrics.is_empty() {
                String::new()
            } else {
                format!("  metrics={}", a.metrics.join(","))
            },
        ));
    }
    for u in &rep.unanswered {
        out.push_str(&format!("{u}: no answer\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn commands_parse_and_errors_are_clear() {
        let r = parse_command(&w("set interval=250ms metrics=cpu.*,mem.*")).unwrap();
        assert_eq!(r.op, Op::Set);
        assert_eq!(r.interval_ms, Some(250));
        assert_eq!(
            r.metrics.as_deref(),
            Some(&["cpu.*".to_owned(), "mem.*".to_owned()][..])
        );
        assert_eq!(parse_command(&w("status")).unwrap().op, Op::Status);
        assert_eq!(parse_interval("2s").unwrap(), 2000);
        for (bad, needle) in [
            ("", "usage"),
            ("frobnicate", "unknown command"),
            ("set", "needs"),
            ("set interval=fast", "bad interval"),
            ("set interval=1", "interval must be"),
            ("set colour=red", "unknown setting"),
            ("status now", "no arguments"),
        ] {
            let e = parse_command(&w(bad)).unwrap_err().to_string();
            assert!(e.contains(needle), "{bad:?}: {e}");
        }
    }

    #[test]
    fn messages_round_trip() {
        let m = Message::Request(parse_command(&w("stop")).unwrap());
        assert_eq!(Message::parse(&m.to_json()).unwrap(), m);
        let rep = Message::Reply(Reply {
            id: 3,
            ok: true,
            agents: vec![AgentStatus::default()],
            ..Reply::default()
        });
        assert_eq!(Message::parse(&rep.to_json()).unwrap(), rep);
        assert!(Message::parse("{\"kind\":\"nope\"}").is_err());
        assert!(render(&Reply::default()).starts_with("HOST"));
    }

    #[test]
    fn unreachable_agent_is_a_clear_error() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        drop(l);
        let e = send(&addr, &parse_command(&w("status")).unwrap()).unwrap_err();
        assert!(e.to_string().contains("cannot reach the agent"), "{e}");
    }
}

#[cfg(test)]
mod error_tests {
    use super::*;
    use p5_logserver::error::assert_said_once;

    /// Every error of this crate says each thing once when printed with its chain (as the
    /// `hostagent` binary and `p5` print errors).
    #[test]
    fn no_error_repeats_its_cause() {
        let io = || std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let decode = p5_wire::DecodeError::Invalid {
            field: "len",
            value: 1,
        };
        let errors: Vec<Box<dyn std::error::Error>> = vec![
            Box::new(LinkError::Io(io())),
            Box::new(LinkError::Garbage(decode.clone())),
            Box::new(CtlError::Connect {
                addr: "h:1".into(),
                cause: io(),
            }),
            Box::new(CtlError::Link {
                addr: "h:1".into(),
                cause: LinkError::Garbage(decode),
            }),
            Box::new(crate::tracefs::TraceError::Io {
                path: "/sys/kernel/tracing/x".into(),
                cause: io(),
            }),
            Box::new(crate::start::RunError::Ctl(CtlError::Connect {
                addr: "h:1".into(),
                cause: io(),
            })),
            Box::new(crate::start::RunError::Listen {
                addr: "h:1".into(),
                source: io(),
            }),
        ];
        for e in &errors {
            assert_said_once(e.as_ref());
        }
    }
}
