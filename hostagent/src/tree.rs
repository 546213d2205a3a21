//! The agent tree: the `--listen` side of an agent.
//!
//! A connection opens with either a `Control` frame (a `hostagent ctl` request, answered with
//! one `Control` reply, see [`crate::ctl`]) or a `Hello` (a child agent — or any p5 producer).
//! A `Hello` makes this agent a *relay*: it opens its own upstream connection (to its parent,
//! or to the log server at the top), sends the child's `Hello` there, passes the answer back
//! and from then on forwards the child's frames upstream unchanged and the upstream's `Ack`,
//! `Error` and `Control` frames back down. Consequences:
//!
//! - Acknowledgements are end to end: a child drops a frame only once the log server has it
//!   on disk, so a relay keeps no state worth losing; if either side of a relay fails, both
//!   are closed and the child resends its unacknowledged frames (spooling meanwhile).
//! - Forwarded frames keep the child's `t_p`, so the log server's `t_s − t_p` is still a valid
//!   (upper-bound) offset sample for the child. In addition every relay records the hop's
//!   own pairs (its receive time — the kernel's receive stamp —, the child's `t_p` of each
//!   data frame and ping) and the agent ships them as `ClockSamples` frames in its metrics
//!   stream (peer = the child's uid), so the merge stage can compose offsets along the tree.
//! - Every agent below sees every descendant's connection pass through it, so a control
//!   request fanned out by one agent reaches each descendant exactly once; replies come back
//!   up the same connections and are taken by the agent that asked (by request id).
//! - Input from a child is validated frame by frame (`validate_client_frame`); garbage closes
//!   that child's relay only.

use crate::agent::{RelayHandle, Shared, lock};
use crate::ctl::Message;
use crate::link::{self, Frame, FrameReader, LinkError};
use p5_logserver::allow::Gate;
use p5_wire::FrameType;
use p5_wire::data::{DataHeader, Ping, validate_client_frame};
use p5_wire::hello::{Hello, RuntimeKind};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Time allowed for the first frame of a connection.
const FIRST_FRAME_TIMEOUT: Duration = Duration::from_secs(10);
/// A relayed connection silent for this long is closed (every producer pings at least every
/// second, so a minute of silence is a dead or hostile child; it was 10 minutes).
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a relay thread blocks in a read: only idle detection needs it (a closing side
/// shuts both sockets down, which wakes the other thread at once), so it is long to keep an
/// agent with many children cheap.
const RELAY_POLL: Duration = Duration::from_secs(1);
/// Most concurrent connections handled by default.
pub const MAX_CONNECTIONS: usize = 1024;
/// Longest a newcomer waits for the slot of the connection evicted for it.
const ADMIT_WAIT: Duration = Duration::from_secs(2);
/// Most newcomers waiting at the same time for the slot of a connection evicted for them.
const MAX_ADMISSIONS: usize = 64;

/// Who may connect to the listener and how many at once.
#[derive(Debug)]
pub struct Admission {
    /// The allow-list in force.
    pub gate: Gate,
    /// The connection cap.
    pub max_connections: usize,
}

/// Connection slots: taken by each connection's thread, waited for at the cap.
#[derive(Debug, Default)]
struct Slots {
    state: Mutex<(usize, usize)>,
    freed: Condvar,
}

impl Slots {
    /// Takes a slot if one is free (`live < max`) and nobody waits before us.
    fn try_take(&self, max: usize) -> bool {
        let mut g = lock(&self.state);
        if g.0 < max && g.1 == 0 {
            g.0 += 1;
            return true;
        }
        false
    }

    /// Registers a waiter, unless [`MAX_ADMISSIONS`] already wait.
    fn queue(&self) -> bool {
        let mut g = lock(&self.state);
        if g.1 >= MAX_ADMISSIONS {
            return false;
        }
        g.1 += 1;
        true
    }

    /// A queued waiter takes a slot within `wait`, or leaves the queue.
    fn take_queued(&self, max: usize, wait: Duration) -> bool {
        let end = Instant::now() + wait;
        let mut g = lock(&self.state);
        loop {
            if g.0 < max {
                g.0 += 1;
                g.1 -= 1;
                return true;
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                g.1 -= 1;
                return false;
            }
            g = match self.freed.wait_timeout(g, left) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
    }

    /// A queued waiter leaves the queue without a slot.
    fn leave(&self) {
        lock(&self.state).1 -= 1;
    }

    fn give_back(&self) {
        lock(&self.state).0 -= 1;
        self.freed.notify_one();
    }
}

/// Accepts connections until the agent stops: peers the allow-list refuses are closed at
/// once; at the cap a newcomer evicts an idle connection and waits for its slot (see
/// [`crate::budget`]), or is refused if none may be evicted.
pub fn serve(shared: Arc<Shared>, listener: TcpListener, admission: Admission) {
    let slots = Arc::new(Slots::default());
    let max = admission.max_connections.max(1);
    for conn in listener.incoming() {
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        let s = match conn {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if let Ok(peer) = s.peer_addr()
            && !admission.gate.admits(peer.ip())
        {
            if let Some(n) = admission.gate.refuse() {
                tracing::warn!(
                    %peer,
                    refused = n,
                    "connection refused: peer not in the allow-list ({}); see --allow",
                    admission.gate.list()
                );
            }
            continue;
        }
        let queued = if slots.try_take(max) {
            false
        } else if slots.queue() {
            if !crate::budget::evict_for_slot() {
                // Nothing to evict: leave the queue at once.
                slots.leave();
                refuse_busy(&s);
                continue;
            }
            true
        } else {
            refuse_busy(&s);
            continue;
        };
        let (sh, sl) = (shared.clone(), slots.clone());
        let spawned = std::thread::Builder::new()
            .name("p5ha-conn".into())
            .spawn(move || {
                if queued && !sl.take_queued(max, ADMIT_WAIT) {
                    refuse_busy(&s);
                    return;
                }
                handle(&sh, s);
                sl.give_back();
            });
        if let Err(e) = spawned {
            tracing::error!("cannot start a connection thread: {e}");
            if !queued {
                slots.give_back();
            } else {
                slots.leave();
            }
        }
    }
}

fn refuse_busy(s: &TcpStream) {
    let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
    let _ = link::write_all(s, &error_frame("too many connections"));
}

fn error_frame(msg: &str) -> Vec<u8> {
    let mut b = Vec::new();
    p5_wire::codec::put_str(&mut b, msg);
    link::encode(FrameType::Error, &b)
}

fn peer_of(s: &TcpStream) -> String {
    s.peer_addr()
        .map_or_else(|_| "?".to_owned(), |a| a.to_string())
}

fn handle(shared: &Shared, s: TcpStream) {
    let peer = peer_of(&s);
    let setup = s
        .set_nodelay(true)
        .and_then(|()| s.set_read_timeout(Some(RELAY_POLL)))
        .and_then(|()| s.set_write_timeout(Some(Duration::from_secs(10))));
    if let Err(e) = setup {
        tracing::warn!(%peer, "socket setup failed: {e}");
        return;
    }
    let Ok(w) = s.try_clone() else {
        return;
    };
    // Stamped: a relay's hop samples take each frame's receipt time from the kernel.
    let mut r = FrameReader::new(s).stamped();
    let first = match r.next_within(FIRST_FRAME_TIMEOUT) {
        Ok(Some(f)) => f,
        Ok(None) => {
            let _ = link::write_all(&w, &error_frame("no hello or control request in time"));
            return;
        }
        Err(e) => {
            tracing::warn!(%peer, "dropped a connection before its first frame: {e}");
            let _ = link::write_all(&w, &error_frame(&e.to_string()));
            return;
        }
    };
    r.greet();
    match FrameType::from_u8(first.ty) {
        Some(FrameType::Control) => ctl_session(shared, &w, &first),
        Some(FrameType::Hello) => relay(shared, r, w, first, &peer),
        _ => {
            tracing::warn!(%peer, ty = first.ty, "dropped a connection: neither hello nor control");
            let _ = link::write_all(&w, &error_frame("expected a Hello or a Control frame"));
        }
    }
}

fn ctl_session(shared: &Shared, w: &TcpStream, f: &Frame) {
    let reply = match link::body_str(&f.body).ok().map(|t| Message::parse(&t)) {
        Some(Ok(Message::Request(req))) => shared.handle_ctl(&req),
        Some(Ok(Message::Reply(_))) => crate::ctl::Reply {
            ok: false,
            error: Some("expected a request, got a reply".into()),
            ..Default::default()
        },
        Some(Err(e)) => crate::ctl::Reply {
            ok: false,
            error: Some(format!("malformed control request: {e}")),
            ..Default::default()
        },
        None => crate::ctl::Reply {
            ok: false,
            error: Some("control frame is not a string".into()),
            ..Default::default()
        },
    };
    let _ = link::write_all(w, &link::control_frame(&Message::Reply(reply).to_json()));
    let _ = w.shutdown(Shutdown::Write);
}

/// Closes both sockets so the other thread of the relay notices at once.
fn close_both(a: &TcpStream, b: &TcpStream) {
    let _ = a.shutdown(Shutdown::Both);
    let _ = b.shutdown(Shutdown::Both);
}

fn relay(shared: &Shared, mut child: FrameReader, child_w: TcpStream, hello_f: Frame, peer: &str) {
    let hello = match Hello::decode_body(&hello_f.body) {
        Ok(h) => h,
        Err(e) => {
            tracing::warn!(%peer, "dropped a child with a bad hello: {e}");
            let _ = link::write_all(&child_w, &error_frame(&format!("bad hello: {e}")));
            return;
        }
    };
    child.lift_cap();
    let id = &hello.identity;
    let who = format!("{}/{} ({peer})", id.hostname, id.pid);
    let up = match link::connect(&shared.upstream, Duration::from_secs(3)) {
        Ok(u) => u,
        Err(e) => {
            let msg = format!("upstream {} unavailable: {e}", shared.upstream);
            tracing::info!(child = %who, "refusing a child: {msg}");
            let _ = link::write_all(&child_w, &error_frame(&msg));
            return;
        }
    };
    let setup = up
        .set_read_timeout(Some(RELAY_POLL))
        .and_then(|()| up.set_write_timeout(Some(Duration::from_secs(10))));
    let Ok(up_w) = setup.and_then(|()| up.try_clone()) else {
        return;
    };
    if link::write_all(&up_w, &hello_f.raw).is_err() {
        let _ = link::write_all(
            &child_w,
            &error_frame("upstream failed during the handshake"),
        );
        return;
    }
    let mut up_r = FrameReader::trusted(up);
    match up_r.next_within(Duration::from_secs(5)) {
        Ok(Some(f)) if f.ty == FrameType::HelloAck as u8 => {
            if link::write_all(&child_w, &f.raw).is_err() {
                return;
            }
        }
        Ok(Some(f)) => {
            let _ = link::write_all(&child_w, &f.raw);
            return;
        }
        Ok(None) | Err(_) => {
            let _ = link::write_all(&child_w, &error_frame("upstream did not answer the hello"));
            return;
        }
    }
    let is_agent = id.runtime == RuntimeKind::HostAgent as u8;
    let child_writer = Arc::new(Mutex::new(child_w));
    let Ok(child_sock) = lock(&child_writer).try_clone() else {
        return;
    };
    let (key, push) = shared.add_relay(RelayHandle {
        peer: who.clone(),
        is_agent,
        writer: child_writer.clone(),
    });
    tracing::info!(child = %who, "relaying a child");
    if let Some(settings) = push {
        let req = crate::ctl::Request {
            id: crate::identity::random_u64(),
            op: crate::ctl::Op::Set,
            interval_ms: Some(settings.interval_ms),
            metrics: Some(settings.metrics.clone()),
            push: true,
        };
        let op = if settings.recording {
            crate::ctl::Op::Start
        } else {
            crate::ctl::Op::Stop
        };
        let rec = crate::ctl::Request { op, ..req.clone() };
        let w = lock(&child_writer);
        for r in [req, rec] {
            let _ = link::write_all(&w, &link::control_frame(&Message::Request(r).to_json()));
        }
    }
    let down_writer = child_writer.clone();
    let (cs, us) = (child_sock, up_w.try_clone());
    let up_thread = std::thread::Builder::new()
        .name("p5ha-relay-up".into())
        .spawn(move || {
            // Upstream → child: acks, errors, control requests, unchanged.
            loop {
                match up_r.poll() {
                    Ok(Some(f)) => {
                        let w = lock(&down_writer);
                        if link::write_all(&w, &f.raw).is_err() {
                            break;
                        }
                    }
                    Ok(None) => {}
                    Err(_) => break,
                }
            }
            if let Ok(u) = &us {
                close_both(&cs, u);
            }
        });
    let end = child_to_upstream(shared, &mut child, &up_w, id.process_uid);
    match &end {
        Err(LinkError::Closed) | Ok(()) => tracing::info!(child = %who, "child left"),
        Err(e) => tracing::warn!(child = %who, "dropped a child: {e}"),
    }
    if let Err(LinkError::Garbage(e)) = &end {
        let _ = link::write_all(
            &lock(&child_writer),
            &error_frame(&format!("bad input: {e}")),
        );
    }
    close_both(child.get_ref(), &up_w);
    shared.remove_relay(key);
    if let Ok(t) = up_thread {
        let _ = t.join();
    }
}

/// Child → upstream: validates and forwards frames, takes clock samples, intercepts replies.
fn child_to_upstream(
    shared: &Shared,
    child: &mut FrameReader,
    up: &TcpStream,
    peer_uid: u64,
) -> Result<(), LinkError> {
    let mut last_input = Instant::now();
    loop {
        let Some(f) = child.poll()? else {
            if last_input.elapsed() >= IDLE_TIMEOUT {
                return Err(LinkError::Io(std::io::Error::other("idle child")));
            }
            continue;
        };
        last_input = Instant::now();
        let t_recv = shared
            .clock
            .now_ns()
            .saturating_sub(f.rx_age_ns.unwrap_or(0));
        let ty = FrameType::from_u8(f.ty);
        let bad = |e: p5_wire::DecodeError| LinkError::Garbage(e);
        match ty {
            Some(t) if t.is_data() => {
                validate_client_frame(f.ty, &f.body).map_err(bad)?;
                let h = DataHeader::peek(&f.body).map_err(bad)?;
                shared.hop_sample(peer_uid, t_recv, h.t_p);
            }
            Some(FrameType::Ping) => {
                let p = Ping::decode_body(&f.body).map_err(bad)?;
                shared.hop_sample(peer_uid, t_recv, p.t_p);
            }
            Some(FrameType::Goodbye) => {
                validate_client_frame(f.ty, &f.body).map_err(bad)?;
            }
            Some(FrameType::Control) => {
                let text = link::body_str(&f.body).map_err(bad)?;
                match Message::parse(&text) {
                    Ok(Message::Reply(rep)) => match shared.deliver_reply(rep) {
                        Ok(()) => continue,
                        // Not ours: the agent that asked is further up.
                        Err(_) if shared.upstream_is_agent => {}
                        Err(_) => continue,
                    },
                    _ => {
                        tracing::warn!(
                            "ignoring a control message from a child that is not a reply"
                        );
                        continue;
                    }
                }
            }
            _ => {
                return Err(LinkError::Garbage(p5_wire::DecodeError::Invalid {
                    field: "frame type from a child",
                    value: f.ty as u64,
                }));
            }
        }
        link::write_all(up, &f.raw)?;
    }
}
