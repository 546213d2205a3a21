//! Causality from what p5 saw ("p5 mode"): which incoming request a thread was serving when
//! it sent each message, from the order of its own receives and sends.
//!
//! A recorded session knows, for every message end it recorded, the thread that sent or
//! received it ([`ThreadEnds`]). Walking all ends in time order on the session's base, each
//! thread keeps the request it serves — its *context*:
//!
//! - receiving a call (or a free-form message) starts serving it;
//! - receiving the return of a call it made goes back to the request that call was made for
//!   (the context the call was sent in: an event loop that interleaves requests — nginx,
//!   redis, a Node-style loop — switches context with every read, and a reply read for
//!   request A brings the thread back to A even if it served B in between);
//! - a call or message the thread sends belongs to its context (caused by the last message
//!   it received in that context), or starts a path when it has none (a client's request);
//!   a request the thread has answered is no context any more (a connection's teardown or
//!   a write-back after the reply starts a path of its own);
//! - the first call on a new connection serves the request the thread was serving when it
//!   connected, when the connect was recorded: an event loop (nginx) connects upstream for
//!   the request it just read and writes the call when the socket becomes writable, after
//!   reading whatever else arrived meanwhile — and connections complete out of order (a
//!   SYN the backend's full accept queue dropped is retried a second later);
//! - a first call whose connect was not recorded, and a call sent with no context, serve the
//!   oldest request the thread received, has not answered and that has sent nothing
//!   downstream yet: an event loop serves requests in arrival order. When several wait, the
//!   choice is counted (`by_arrival`);
//! - a return it sends answers its call whatever the context (the connection says which),
//!   caused by the last message received for that call;
//! - a return that answers no call — a server that speaks first, MySQL's and MariaDB's
//!   greeting on a connection the thread just opened — belongs to the request the thread is
//!   serving when it arrives, and leaves that context as it was.
//!
//! Thread-per-request servers (Python's `ThreadingHTTPServer`, Java, C, Rust) and event loops
//! that handle one ready descriptor at a time are exact. What the order cannot tell is
//! counted as *ambiguous*, not guessed silently: a send after one read completed several
//! messages at once (pipelined requests in one `recv`).
//! A message whose sender was not recorded (an untraced peer) is left [`FREE`] for the
//! statistical algorithms, unless it is the return of a recorded call: an untraced server
//! answers the call it got. Pure: no I/O.

use crate::hash::FxHashMap;
use crate::trace::{CallId, Kind, NO_CALL_ID, NO_TIME, Trace};
use serde::Serialize;

/// A recorded thread (the session's `thread.id`); [`NO_THREAD`] for an end not recorded.
pub type ThreadRef = u32;

/// The thread of an end that was not recorded.
pub const NO_THREAD: ThreadRef = u32::MAX;

/// The threads that sent and received each message, by `msg_ref` (a session's message id):
/// empty for traces that know no threads (text traces, captures).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadEnds {
    first: u64,
    ends: Vec<[ThreadRef; 2]>,
    /// Per connection (the trace's `ConnId`): the thread that connected it, and when.
    connects: FxHashMap<u32, (ThreadRef, i64)>,
}

impl ThreadEnds {
    /// Records the sending and receiving thread of message `msg_ref`.
    pub fn set(&mut self, msg_ref: u64, send: ThreadRef, recv: ThreadRef) {
        if self.ends.is_empty() {
            self.first = msg_ref;
        }
        let Some(i) = msg_ref.checked_sub(self.first) else {
            return;
        };
        // Message ids are dense within a session; a wild one is not worth the memory.
        let Ok(i) = usize::try_from(i) else { return };
        if i > self.ends.len() + (1 << 20) {
            return;
        }
        if i >= self.ends.len() {
            self.ends.resize(i + 1, [NO_THREAD; 2]);
        }
        self.ends[i] = [send, recv];
    }

    /// The sending and receiving thread of message `msg_ref`.
    pub fn of(&self, msg_ref: u64) -> [ThreadRef; 2] {
        msg_ref
            .checked_sub(self.first)
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| self.ends.get(i).copied())
            .unwrap_or([NO_THREAD; 2])
    }

    /// Records that `thread` connected connection `conn` at `t` (session base).
    pub fn set_connect(&mut self, conn: u32, thread: ThreadRef, t: i64) {
        self.connects.insert(conn, (thread, t));
    }

    /// Whether no thread is known.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

/// A message the threads do not place: left to the statistical algorithm.
pub const FREE: u32 = u32::MAX;

/// A message that starts a path (a client's request): caused by nothing.
pub const ROOT: u32 = u32::MAX - 1;

/// What [`from_threads`] found, by message index in the trace.
#[derive(Debug, Clone, Default)]
pub struct Causes {
    /// The message that caused each message (an index), [`ROOT`] or [`FREE`].
    pub cause: Vec<u32>,
    /// For each call or free-form message, the incoming call or message its sender was
    /// serving (an index), [`ROOT`] or [`FREE`]; for a return that answers no call (a
    /// greeting), the request its receiver was serving; [`FREE`] for other returns.
    pub serving: Vec<u32>,
    /// Whether each message's placement is ambiguous (see the module docs).
    pub ambiguous: Vec<bool>,
    /// The counts.
    pub counts: CauseCounts,
}

/// How many messages the threads placed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CauseCounts {
    /// Messages placed by their sender's thread (a cause, or a root).
    pub placed: u64,
    /// Of those, roots.
    pub roots: u64,
    /// Messages left to the statistical algorithm (their sender was not recorded, or sent
    /// them with no context it could tell).
    pub free: u64,
    /// Placed messages whose placement is ambiguous.
    pub ambiguous: u64,
    /// Calls placed with the oldest of several waiting requests (an event loop's order).
    pub by_arrival: u64,
}

impl CauseCounts {
    /// One line for the front end: what the threads placed.
    pub fn summary(&self, name: &str) -> String {
        format!(
            "{name}: causality from the recorded threads (p5 mode): {} messages placed ({} \
             start a path, {} by arrival order), {} ambiguous, {} left to timing (their sender \
             was not recorded)",
            self.placed, self.roots, self.by_arrival, self.ambiguous, self.free
        )
    }
}

#[derive(Debug, Default)]
struct State {
    /// The request served, if any; `None` with `lost`: not known.
    ctx: Option<u32>,
    /// The context comes from a read that could not be placed.
    lost: bool,
    /// The last read completed several messages at once.
    multi: bool,
    /// Time of the last read that completed a message.
    last_read: i64,
    /// Last message received in each context.
    last: FxHashMap<u32, u32>,
    /// Calls this thread received and has not answered, oldest first, each with whether it
    /// has sent anything downstream since; at most [`OPEN`] (a thread whose calls another
    /// thread answers forgets the oldest).
    open: std::collections::VecDeque<(u32, bool)>,
}

/// Open requests a thread keeps (its concurrency; an event loop's is its connections').
const OPEN: usize = 1024;

impl State {
    /// The request a call opening a new connection serves: an event loop connects for a
    /// request and writes its first call when the socket becomes writable, after reading
    /// whatever else came in meanwhile. It serves requests in arrival order, so the oldest
    /// open request that has sent nothing downstream yet is the one it connected for.
    fn waiting(&self) -> Option<u32> {
        self.open.iter().find(|o| !o.1).map(|o| o.0)
    }
}

/// Places every message whose sender was recorded (`None` when the trace knows no threads).
pub fn from_threads(trace: &Trace, ends: &ThreadEnds) -> Option<Causes> {
    if ends.is_empty() {
        return None;
    }
    let n = trace.messages.len();
    let mut calls: FxHashMap<CallId, u32> = FxHashMap::default();
    for (i, m) in trace.messages.iter().enumerate() {
        if m.kind == Kind::Call && m.call_id != NO_CALL_ID {
            calls.entry(m.call_id).or_insert(i as u32);
        }
    }
    // The first call of each connection (the trace is in time order): sent on a socket
    // connected for it.
    let mut opens = vec![false; n];
    let mut seen_conn: crate::hash::FxHashSet<u32> = Default::default();
    for (i, m) in trace.messages.iter().enumerate() {
        if m.kind == Kind::Call && m.conn != crate::trace::NO_CONN && seen_conn.insert(m.conn) {
            opens[i] = true;
        }
    }
    let call_of = |i: usize| {
        let m = &trace.messages[i];
        (m.kind == Kind::Ret && m.call_id != NO_CALL_ID)
            .then(|| calls.get(&m.call_id).copied())
            .flatten()
    };
    // (time, receive 0 / connect 1 / send 2, message or connection, thread): a receive
    // completing when a send starts comes first (it may have caused it).
    let mut events: Vec<(i64, u8, u32, ThreadRef)> = Vec::with_capacity(2 * n);
    for (&conn, &(th, t)) in &ends.connects {
        events.push((t, 1, conn, th));
    }
    // The request each connection was opened for (by its connect).
    let mut opened_for: FxHashMap<u32, Option<u32>> = FxHashMap::default();
    for (i, m) in trace.messages.iter().enumerate() {
        let [s, r] = ends.of(m.msg_ref);
        if s != NO_THREAD && m.t_send != NO_TIME {
            events.push((m.t_send, 2, i as u32, s));
        }
        if r != NO_THREAD && m.t_recv != NO_TIME {
            events.push((m.t_recv, 0, i as u32, r));
        }
    }
    events.sort_unstable();
    let mut c = Causes {
        cause: vec![FREE; n],
        serving: vec![FREE; n],
        ambiguous: vec![false; n],
        counts: CauseCounts::default(),
    };
    let mut by_arrival = 0u64;
    let mut answered = vec![false; n];
    let mut threads: FxHashMap<ThreadRef, State> = FxHashMap::default();
    for (t, dir, i, th) in events {
        let st = threads.entry(th).or_default();
        if dir == 1 {
            let ctx = st.ctx.filter(|&p| !answered[p as usize] && !st.lost);
            opened_for.insert(i, ctx);
            continue;
        }
        let iu = i as usize;
        let kind = trace.messages[iu].kind;
        if dir == 0 {
            st.multi = st.last_read == t && (st.ctx.is_some() || st.lost);
            st.last_read = t;
            if kind == Kind::Ret && c.cause[iu] == FREE && call_of(iu).is_none() {
                // A greeting: part of the request being served, which it does not change.
                if let Some(p) = st.ctx.filter(|&p| !answered[p as usize]) {
                    c.cause[iu] = st.last.get(&p).copied().unwrap_or(p);
                    c.serving[iu] = p;
                    st.last.insert(p, i);
                    continue;
                }
            }
            if kind == Kind::Call {
                if st.open.len() >= OPEN {
                    st.open.pop_front();
                }
                st.open.push_back((i, false));
            }
            let ctx = match kind {
                Kind::Call | Kind::Msg => Some(Some(i)),
                Kind::Ret => match call_of(iu).map(|k| c.serving[k as usize]) {
                    Some(ROOT) => Some(None),
                    Some(FREE) | None => None,
                    Some(p) => Some(Some(p)),
                },
            };
            match ctx {
                Some(x) => {
                    st.ctx = x;
                    st.lost = false;
                    if let Some(p) = x {
                        // Contexts nobody answers (free-form messages) must not pile up.
                        if st.last.len() >= 1 << 16 {
                            st.last.retain(|&k, _| k == p);
                        }
                        st.last.insert(p, i);
                    }
                }
                None => {
                    st.ctx = None;
                    st.lost = true;
                }
            }
            continue;
        }
        match kind {
            Kind::Ret => {
                let Some(k) = call_of(iu) else { continue };
                c.cause[iu] = st.last.get(&k).copied().unwrap_or(k);
                answered[k as usize] = true;
                st.last.remove(&k);
                st.open.retain(|o| o.0 != k);
            }
            Kind::Call | Kind::Msg if st.lost => {}
            Kind::Call | Kind::Msg => {
                // An answered request is no context any more. A first call on a new
                // connection, or a call with no context, serves the oldest request still
                // waiting for one (the event loop connected for it, or comes back to it).
                let ctx = st.ctx.filter(|&p| !answered[p as usize]);
                let connected_for = opens[iu]
                    .then(|| opened_for.get(&trace.messages[iu].conn).copied())
                    .flatten();
                let waiting = match connected_for {
                    Some(Some(p)) if !answered[p as usize] => Some(p),
                    _ if opens[iu] || ctx.is_none() => st.waiting(),
                    _ => None,
                };
                match waiting.or(ctx) {
                    Some(p) => {
                        // Several waiting: the arrival order decided.
                        let guessed = connected_for.is_none()
                            && waiting.is_some_and(|w| Some(w) != ctx)
                            && st.open.iter().filter(|o| !o.1).count() > 1;
                        if let Some(o) = st.open.iter_mut().find(|o| o.0 == p) {
                            o.1 = true;
                        }
                        c.serving[iu] = p;
                        c.cause[iu] = st.last.get(&p).copied().unwrap_or(p);
                        by_arrival += u64::from(guessed);
                        c.ambiguous[iu] = st.multi;
                    }
                    None => {
                        c.serving[iu] = ROOT;
                        c.cause[iu] = ROOT;
                    }
                }
            }
        }
    }
    c.counts.by_arrival = by_arrival;
    // A return nobody recorded sending still answers its call: an untraced server sends the
    // reply because of the request (A → B → A), however long it took (a database's
    // authentication round trips take milliseconds where its queries take microseconds).
    for i in 0..n {
        if c.cause[i] == FREE
            && let Some(k) = call_of(i)
            && ends.of(trace.messages[k as usize].msg_ref)[0] != NO_THREAD
        {
            c.cause[i] = k;
            c.serving[i] = c.serving[k as usize];
        }
    }
    for i in 0..n {
        match c.cause[i] {
            FREE => c.counts.free += 1,
            ROOT => {
                c.counts.placed += 1;
                c.counts.roots += 1;
            }
            _ => c.counts.placed += 1,
        }
        c.counts.ambiguous += u64::from(c.ambiguous[i]);
    }
    Some(c)
}

#[cfg(test)]
mod tests;
