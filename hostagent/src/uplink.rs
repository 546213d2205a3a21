//! The agent's own connection upstream (its parent agent, or the log server for the top
//! agent): handshake, transmission of the outbox with `t_p` stamped at each send, acks,
//! pings with the echo of the last ack (two-way clock samples: 8 every 500 ms, each after the
//! answer to the one before, `p5_runtime::pings`, with each ack's receipt time from the
//! kernel's receive stamp), control requests from the parent, and reconnection with backoff.
//! While the link is down the outbox spools.

use crate::agent::{Shared, lock};
use crate::ctl::Message;
use crate::link::{self, FrameReader};
use p5_runtime::pings::PingSchedule;
use p5_wire::FrameType;
use p5_wire::data::{Ack, Ping, stamp_send_time};
use p5_wire::hello::HelloAck;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long one wait for input lasts, and so the longest delay before a new frame is sent
/// (input — acks, control requests — is handled as soon as it arrives). Each idle wake-up
/// costs tens of microseconds, a visible share of the agent's 0.5 % budget.
const POLL: Duration = Duration::from_millis(250);
/// Reconnect backoff bounds.
const MIN_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// How long a clean shutdown waits for the last acknowledgements.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs until the agent stops and its frames are delivered (or the drain timeout passed;
/// then whatever is undelivered is left in a spool file for `p5-logserver import`).
pub fn run(shared: &Shared) {
    let mut backoff = MIN_BACKOFF;
    let mut was_up = true;
    loop {
        if shared.drain_expired() {
            let mut o = lock(&shared.outbox);
            match o.persist_remaining() {
                Ok(Some(p)) => tracing::warn!(
                    spool = %p.display(),
                    "upstream unreachable: undelivered frames left in the spool (load them with `p5-logserver import`)"
                ),
                Ok(None) => {}
                Err(e) => tracing::error!("undelivered frames lost: cannot write the spool: {e}"),
            }
            return;
        }
        match session(shared) {
            Ok(()) => return,
            Err(e) => {
                lock(&shared.outbox).on_disconnect();
                if was_up {
                    tracing::warn!(upstream = %shared.upstream, "upstream link down: {e}");
                    was_up = false;
                } else {
                    tracing::debug!("reconnect failed: {e}");
                }
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
        if lock(&shared.outbox).connected() {
            backoff = MIN_BACKOFF;
            was_up = true;
        }
    }
}

/// One connection; `Ok` after a clean goodbye.
fn session(shared: &Shared) -> Result<(), String> {
    let s = link::connect(&shared.upstream, Duration::from_secs(2))
        .map_err(|e| format!("cannot connect to {}: {e}", shared.upstream))?;
    s.set_write_timeout(Some(Duration::from_secs(10)))
        .and_then(|()| s.set_read_timeout(Some(POLL)))
        .map_err(|e| e.to_string())?;
    link::write_all(&s, &shared.hello).map_err(|e| format!("hello: {e}"))?;
    let w = s.try_clone().map_err(|e| e.to_string())?;
    let mut r = FrameReader::trusted(s).stamped();
    let f = r
        .next_within(Duration::from_secs(5))
        .map_err(|e| format!("handshake: {e}"))?
        .ok_or("no answer to hello")?;
    match FrameType::from_u8(f.ty) {
        Some(FrameType::HelloAck) => {
            HelloAck::decode_body(&f.body).map_err(|e| format!("bad hello ack: {e}"))?;
        }
        Some(FrameType::Error) => {
            return Err(format!(
                "refused: {}",
                link::body_str(&f.body).unwrap_or_default()
            ));
        }
        _ => {
            return Err(format!(
                "unexpected frame {:#04x} instead of a hello ack",
                f.ty
            ));
        }
    }
    lock(&shared.outbox).on_connect();
    tracing::info!(upstream = %shared.upstream, "upstream link up");
    let mut pings = PingSchedule::steady(Instant::now());
    let mut answered = false;
    let mut timeout = POLL;
    let mut echo = (0u64, 0u64);
    let mut out = Vec::with_capacity(256 * 1024);
    loop {
        out.clear();
        // The ping first, so that its send time is stamped right before the write.
        if pings.poll(Instant::now(), answered, true) {
            let p = Ping {
                t_p: shared.clock.now_ns(),
                echo_t_s: echo.0,
                echo_t_p: echo.1,
            };
            out.extend_from_slice(&link::encode(FrameType::Ping, &p.encode_body()));
        }
        answered = false;
        let frames = lock(&shared.outbox).take_unsent(256 * 1024);
        let now = shared.clock.now_ns();
        for mut f in frames {
            stamp_send_time(&mut f, now);
            out.extend_from_slice(&f);
        }
        let done = shared.finished.load(Ordering::Acquire) && lock(&shared.outbox).is_empty();
        if !done && shared.drain_expired() {
            return Err("the last frames were not acknowledged in time".into());
        }
        if done {
            let t = shared.clock.now_ns().to_le_bytes();
            out.extend_from_slice(&link::encode(FrameType::Goodbye, &t));
        }
        if !out.is_empty() {
            link::write_all(&w, &out).map_err(|e| format!("send: {e}"))?;
        }
        if done {
            return Ok(());
        }
        // Wake for the next ping burst, or after POLL at the latest (whole milliseconds, so
        // that the socket's timeout is set again only when it changes).
        let left = pings.next_due().saturating_duration_since(Instant::now());
        let wait =
            Duration::from_millis(left.as_millis() as u64).clamp(Duration::from_millis(1), POLL);
        if wait != timeout {
            timeout = wait;
            r.get_ref()
                .set_read_timeout(Some(wait))
                .map_err(|e| e.to_string())?;
        }
        let Some(f) = r.poll().map_err(|e| e.to_string())? else {
            continue;
        };
        match FrameType::from_u8(f.ty) {
            Some(FrameType::Ack) => {
                let a = Ack::decode_body(&f.body).map_err(|e| format!("bad ack: {e}"))?;
                let received = shared.clock.now_ns();
                echo = (a.t_s, received.saturating_sub(f.rx_age_ns.unwrap_or(0)));
                answered = true;
                lock(&shared.outbox).ack(a.count);
            }
            Some(FrameType::Control) => {
                let text = link::body_str(&f.body).map_err(|e| format!("bad control: {e}"))?;
                match Message::parse(&text) {
                    Ok(Message::Request(req)) => {
                        if let Some(rep) = shared.handle_parent_request(&req) {
                            let j = Message::Reply(rep).to_json();
                            link::write_all(&w, &link::control_frame(&j))
                                .map_err(|e| format!("send: {e}"))?;
                        }
                    }
                    Ok(Message::Reply(_)) => {}
                    Err(e) => tracing::warn!("ignoring a malformed control message: {e}"),
                }
            }
            Some(FrameType::Error) => {
                return Err(format!(
                    "upstream closed the link: {}",
                    link::body_str(&f.body).unwrap_or_default()
                ));
            }
            _ => tracing::debug!(ty = f.ty, "ignoring an unexpected frame from upstream"),
        }
    }
}
