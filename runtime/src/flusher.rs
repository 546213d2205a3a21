//! The flusher thread: drains every ring, converts ticks, builds frames, drives the outbox.
//!
//! It wakes every `P5_FLUSH_MS` (20 ms), when a ring passes half full or a thread exits (the
//! doorbell), when a flush or exit is requested, and when the log-server socket is readable
//! or writable. A drain:
//!
//! 1. adopts newly registered rings;
//! 2. reads each ring's `closed` flag, then its published head (so a closed ring's head is
//!    final);
//! 3. takes a `(ticks, CLOCK_MONOTONIC)` snapshot — after the heads, so every tick drained
//!    now lies between two snapshots and converts by interpolation;
//! 4. per ring: a `StreamOpen` first (seq 0), then `Events` frames (split near 64 KiB,
//!    each carrying the ring's cumulative drop count), and a `StreamClose` once a closed
//!    ring is empty, after which the ring is freed.
//!
//! A flush request ([`crate::flush`]) completes once the frames produced before it are
//! acknowledged or spooled; one made before an `exec` (`interpose::flush_acknowledged`)
//! waits, up to `P5_EXIT_TIMEOUT_MS`, until they are acknowledged and the spool is gone, so a
//! child that records and execs before its first connection is up still delivers.
//!
//! Allocation is fine here (frames are owned `Vec`s); the application threads never wait
//! for this thread.

use crate::clock::Timebase;
use crate::config::Mode;
use crate::outbox::Outbox;
use crate::process::Process;
use crate::record::{self, Decoded, Kind};
use crate::registry::RingPtr;
use crate::ring::Ring;
use crate::stats::add;
use p5_wire::data::{self, DataHeader, StreamClose, StreamKind, StreamOpen};
use p5_wire::frame::{self, FrameType};
use p5_wire::{Caps, Event, EventEncoder};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Events frames are closed once their encoding passes this size.
pub const FRAME_TARGET: usize = 64 * 1024;
/// How far ahead of the slot being read the flusher prefetches (4 slots per cache line).
const PREFETCH_SLOTS: u64 = 32;
/// A drain that took at least this many slots from one ring is followed by another at once.
const BUSY_SLOTS: u64 = 4096;
/// How long the flusher waits for the first connection before its first drain.
const STARTUP_CONNECT_WAIT: Duration = Duration::from_millis(20);

/// Entry point of the flusher thread.
pub fn run(p: &'static Process) {
    crate::sensor::mark_flusher_thread();
    // Before anything of ours is opened: the program's table gets its single user back.
    crate::fdtable::separate(&p.waker.fd().into_iter().collect::<Vec<_>>());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Flusher::new(p).run()));
    if r.is_err() {
        // A bug in here must not leave rings filling forever.
        crate::sensor::ACTIVE.store(false, std::sync::atomic::Ordering::Relaxed);
    }
    p.waker.set_consumer_gone(true);
    p.control.gone();
}

/// A ring being drained, with the stream's sending state.
#[derive(Debug)]
struct Stream {
    ring: RingPtr,
    next_seq: u64,
    dropped_seen: u64,
    /// Full-ring waits and their ns already added to the counters.
    waits_seen: (u64, u64),
}

impl Stream {
    fn ring(&self) -> &Ring {
        // SAFETY: the flusher frees a ring only after removing its Stream.
        unsafe { self.ring.0.as_ref() }
    }
}

/// A flush request being served: complete once the frames produced before it are settled
/// (acknowledged or spooled) — or, if asked for, acknowledged and not merely spooled, which
/// it waits for until `acked_until`.
#[derive(Debug, Clone, Copy)]
struct PendingFlush {
    ticket: u64,
    target: u64,
    acked_until: Option<Instant>,
}

impl PendingFlush {
    fn done(&self, outbox: &Outbox, now: Instant) -> bool {
        outbox.settled() >= self.target
            && (!outbox.spooling() || self.acked_until.is_none_or(|d| now >= d))
    }
}

struct Flusher {
    p: &'static Process,
    timebase: Timebase,
    outbox: Outbox,
    streams: Vec<Stream>,
    enc: EventEncoder,
    next_drain: Instant,
    flush_seen: u64,
    flush_pending: Option<PendingFlush>,
    /// Calls of each listed site at its last report.
    reported: HashMap<u64, u64>,
    /// The sensor tables sent so far.
    tables: crate::describe::Sender,
}

impl Flusher {
    fn new(p: &'static Process) -> Self {
        let hello = crate::identity::hello_frame(&p.identity);
        let path = p.config.dir.join(crate::spool::file_name(
            &p.config.session,
            p.identity.pid,
            p.identity.process_uid,
        ));
        Flusher {
            p,
            timebase: Timebase::new(p.origin.tsc),
            outbox: Outbox::new(
                p.config.mode.clone(),
                hello,
                path,
                p.origin,
                &p.counters,
                &p.fds,
            ),
            streams: Vec::new(),
            enc: EventEncoder::new(),
            next_drain: Instant::now(),
            flush_seen: 0,
            flush_pending: None,
            reported: HashMap::new(),
            tables: crate::describe::Sender::default(),
        }
    }

    fn run(mut self) {
        self.calibrate_early();
        // Give the connection a moment before the first drain, so frames go straight to a
        // server that is there rather than through the spool; a hung one costs only this.
        self.outbox.service(Instant::now());
        let until = Instant::now() + STARTUP_CONNECT_WAIT;
        let mut woken = false;
        while !woken && self.outbox.connecting() && Instant::now() < until {
            // A ring passing half full (the doorbell) ends the wait: draining comes first.
            woken = self.wait(until.min(Instant::now() + Duration::from_millis(1)));
            self.outbox.service(Instant::now());
        }
        loop {
            let ctl = self.p.control.get();
            if ctl.exit_req {
                self.exit();
                self.p.control.exit_done();
                return;
            }
            let now = Instant::now();
            let flush_asked = ctl.flush_req > self.flush_seen;
            let mut busy = false;
            if woken || flush_asked || now >= self.next_drain {
                // A ring that held many slots belongs to a hot producer: drain again right
                // away instead of sleeping, so the ring never fills while we nap.
                busy = self.drain() >= BUSY_SLOTS;
                self.next_drain = now + self.p.config.flush_interval;
                if flush_asked {
                    let acked = ctl.acked_req > self.flush_seen;
                    let until = now + self.p.config.exit_timeout;
                    let before = self.flush_pending.and_then(|f| f.acked_until);
                    self.flush_seen = ctl.flush_req;
                    self.flush_pending = Some(PendingFlush {
                        ticket: ctl.flush_req,
                        target: self.outbox.produced(),
                        acked_until: before.or(acked.then_some(until)),
                    });
                }
            }
            self.outbox.service(Instant::now());
            if let Some(f) = self.flush_pending
                && f.done(&self.outbox, Instant::now())
            {
                self.p.control.flush_done(f.ticket);
                self.flush_pending = None;
            }
            let mut deadline = self.next_drain;
            if let Some(d) = self.flush_pending.and_then(|f| f.acked_until) {
                deadline = deadline.min(d);
            }
            for d in [self.outbox.next_ping(), self.outbox.next_connect()]
                .into_iter()
                .flatten()
            {
                deadline = deadline.min(d);
            }
            if busy {
                self.wait(Instant::now());
                woken = true;
            } else {
                woken = self.wait(deadline);
            }
        }
    }

    /// Arms the throttling rule within a fraction of a millisecond of the start (a short
    /// program is over before the first regular drain): spins ~200 µs on this thread
    /// measuring the tick rate, which each drain's snapshot then refines.
    fn calibrate_early(&self) {
        if !self.p.origin.tsc {
            return;
        }
        let start = Instant::now();
        let a = self.p.origin.snapshot();
        while start.elapsed() < Duration::from_micros(200) {
            std::hint::spin_loop();
        }
        let b = self.p.origin.snapshot();
        crate::site::calibrate_over(self.p.config.throttle, b.ticks - a.ticks, b.ns - a.ns);
    }

    /// Sleeps until `deadline`, the doorbell or socket activity; returns whether the
    /// doorbell rang.
    fn wait(&mut self, deadline: Instant) -> bool {
        // To the microsecond (`ppoll`): datagram pings on a slow path go every 500 µs.
        let left = deadline
            .saturating_duration_since(Instant::now())
            .min(Duration::from_secs(1));
        let timeout = libc::timespec {
            tv_sec: left.as_secs() as libc::time_t,
            tv_nsec: left.subsec_nanos() as libc::c_long,
        };
        let mut fds = [
            libc::pollfd {
                fd: self.p.waker.fd().unwrap_or(-1),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: -1,
                events: 0,
                revents: 0,
            },
        ];
        if let Some((fd, ev)) = self.outbox.poll_interest() {
            fds[1].fd = fd;
            fds[1].events = ev;
        }
        // SAFETY: two valid pollfd entries (negative fds are ignored by ppoll), a valid
        // timeout, no signal mask (as poll).
        unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &timeout, std::ptr::null()) };
        if fds[1].revents & libc::POLLIN != 0 {
            // An ack first, before any drain: its receipt time is a clock sample, and the
            // answer to a ping burst goes straight on to the next ping.
            self.outbox.service(Instant::now());
        }
        (fds[0].revents != 0 || fds[0].fd < 0) && self.p.waker.take()
    }

    /// Drains every ring; returns the most slots taken from one ring.
    fn drain(&mut self) -> u64 {
        for r in self.p.registry.take() {
            add(&self.p.counters.streams, 1);
            self.streams.push(Stream {
                ring: r,
                next_seq: 0,
                dropped_seen: 0,
                waits_seen: (0, 0),
            });
        }
        let bounds: Vec<(bool, u64)> = self
            .streams
            .iter()
            .map(|s| {
                let closed = s.ring().is_closed();
                (closed, s.ring().published())
            })
            .collect();
        let snap = self.p.origin.snapshot();
        self.timebase.push(snap);
        if self.p.origin.tsc {
            crate::site::calibrate(self.p.config.throttle, snap.ticks, snap.ns);
        }
        let discard = self.p.config.mode == Mode::Discard;
        if !discard && self.outbox.caps().contains(Caps::SENSORS) {
            for f in self.tables.new_frames() {
                self.outbox.push(f);
            }
        }
        let mut calls = if discard || !self.outbox.caps().contains(Caps::CALLS) {
            Vec::new()
        } else {
            self.site_reports(snap)
        };
        let mut most = 0;
        for (s, &(closed, head)) in self.streams.iter_mut().zip(&bounds) {
            most = most.max(head - s.ring().consumed());
            if discard {
                let ring = s.ring();
                add(&self.p.counters.events, head - ring.consumed());
                ring.release(head);
            } else {
                drain_stream(
                    s,
                    (head, closed),
                    &self.timebase,
                    &mut self.enc,
                    &mut self.outbox,
                    self.p,
                    &std::mem::take(&mut calls),
                );
            }
            let d = s.ring().dropped();
            add(&self.p.counters.dropped, d - s.dropped_seen);
            s.dropped_seen = d;
            let w = s.ring().waits();
            add(&self.p.counters.waits, w.0 - s.waits_seen.0);
            add(&self.p.counters.held_ns, w.1 - s.waits_seen.1);
            s.waits_seen = w;
        }
        let mut k = 0;
        let mut gone = Vec::new();
        self.streams.retain(|s| {
            let closed = bounds[k].0;
            k += 1;
            if closed {
                gone.push(s.ring);
            }
            !closed
        });
        for r in gone {
            // SAFETY: the thread closed the ring (it will never touch it again), its last
            // slots were drained above, and its Stream was just removed.
            drop(unsafe { Box::from_raw(r.0.as_ptr()) });
        }
        most
    }

    /// `Calls` events for the throttled and count-only sites whose counts changed since
    /// their last report (sent with the first stream drained).
    fn site_reports(&mut self, snap: crate::clock::Snapshot) -> Vec<Event> {
        let mut conv = self.timebase.converter();
        let mut out = Vec::new();
        for r in crate::site::listed() {
            if self.reported.get(&r.sensor) == Some(&r.calls) {
                continue;
            }
            self.reported.insert(r.sensor, r.calls);
            let timed_ns = if snap.ticks > 0 {
                (r.ticks as u128 * snap.ns as u128 / snap.ticks as u128) as u64
            } else {
                r.ticks
            };
            out.push(Event::Calls {
                t: conv.ns(self.p.origin.rel_ticks(r.since)),
                sensor: r.sensor,
                calls: r.calls,
                timed: r.timed,
                timed_ns,
                recorded: r.recorded,
                pinned: r.pinned as u8,
            });
        }
        out
    }

    fn exit(&mut self) {
        let start = Instant::now();
        let deadline = start + self.p.config.exit_timeout;
        self.drain();
        report_waits(&self.p.counters.snapshot());
        // Nothing is drained after this: `P5_FULL=wait` producers drop from now on.
        self.p.waker.set_consumer_gone(true);
        // One wait, bounded by the deadline: at most one connection attempt of its own. An
        // attempt already running may predate a server that came up since (it then fails):
        // only after that one is over does exit make its own.
        let mut own_attempt = false;
        if !self.outbox.all_acked() && !self.outbox.connecting() {
            self.outbox.connect(Instant::now());
            own_attempt = true;
        }
        while !self.outbox.all_acked() && Instant::now() < deadline {
            self.outbox.service(Instant::now());
            // The last acknowledgement may have just arrived: no 10 ms nap after it (a short
            // program's exit paid it every time).
            if self.outbox.all_acked() {
                break;
            }
            if !self.outbox.connected() && !self.outbox.connecting() {
                if own_attempt {
                    break;
                }
                self.outbox.connect(Instant::now());
                own_attempt = true;
                if !self.outbox.connecting() {
                    break;
                }
            }
            // The connector thread does not ring the doorbell: look again soon while it runs.
            let slice = if self.outbox.connecting() { 1 } else { 10 };
            self.wait(deadline.min(Instant::now() + Duration::from_millis(slice)));
        }
        self.outbox
            .close(deadline.max(Instant::now() + Duration::from_millis(100)));
    }
}

/// Tells the user, once at exit, how long full rings held the program (the price of a
/// complete trace under `P5_FULL=grace` or `wait`), and how many events were lost.
fn report_waits(st: &crate::stats::Stats) {
    if st.waits == 0 && st.dropped == 0 {
        return;
    }
    let mut msg = String::from("p5:");
    if st.waits > 0 {
        msg += &format!(
            " full event buffers held the program {:.1} ms in {} waits for the flusher;",
            st.held_ns as f64 / 1e6,
            st.waits
        );
    }
    if st.dropped > 0 {
        msg += &format!(" {} events were lost to full buffers;", st.dropped);
    }
    msg += " P5_RING sets the buffer size (P5_FULL=drop never waits, P5_FULL=wait never drops)";
    crate::fdtable::warn(&msg);
}

/// Drains one ring up to `head` into frames.
fn drain_stream(
    s: &mut Stream,
    (head, closed): (u64, bool),
    timebase: &Timebase,
    enc: &mut EventEncoder,
    outbox: &mut Outbox,
    p: &Process,
    extra: &[Event],
) {
    // SAFETY: see Stream::ring; borrowing through the pointer keeps `s` mutable.
    let ring: &Ring = unsafe { s.ring.0.as_ref() };
    let stream = ring.meta.stream;
    if s.next_seq == 0 {
        open_stream(ring, outbox);
        s.next_seq = 1;
    }
    let comm_ok = outbox.caps().contains(Caps::COMM);
    let mut conv = timebase.converter();
    let mut i = ring.consumed();
    let mut events = 0u64;
    enc.clear();
    while i < head {
        // SAFETY: consumed() <= i < head <= published().
        let first = unsafe { ring.slot(i) };
        ring.prefetch(i + PREFETCH_SLOTS);
        i += 1;
        // Fast path: enter and exit, nearly every slot of a hot trace, without the general
        // decoder (whose result type is large).
        let w0 = first.0[0];
        if w0 >> record::TICK_BITS <= Kind::Exit as u64 {
            let t = conv.ns(record::ticks_of(w0));
            if w0 >> record::TICK_BITS == Kind::Enter as u64 {
                enc.enter(t, first.0[1]);
            } else {
                enc.exit(t, first.0[1]);
            }
            events += 1;
            if enc.encoded_len() >= FRAME_TARGET {
                emit_events(s, stream, ring.dropped(), enc, outbox);
                ring.release(i);
            }
            continue;
        }
        let mut next = || {
            (i < head).then(|| {
                i += 1;
                // SAFETY: as above.
                unsafe { ring.slot(i - 1) }
            })
        };
        let Ok(d) = record::decode(first, &mut next) else {
            // A torn record (only a signal handler racing its own thread can cause one):
            // the rest of this batch is skipped.
            break;
        };
        if !encode_decoded(d, &mut conv, comm_ok, enc) {
            continue;
        }
        events += 1;
        if enc.encoded_len() >= FRAME_TARGET {
            emit_events(s, stream, ring.dropped(), enc, outbox);
            ring.release(i);
        }
    }
    ring.release(head);
    add(&p.counters.events, events);
    for e in extra {
        enc.push(e);
    }
    let dropped = ring.dropped();
    if !enc.is_empty() || dropped != s.dropped_seen {
        emit_events(s, stream, dropped, enc, outbox);
    }
    if closed {
        close_stream(
            ring,
            s.next_seq,
            conv.ns(record::ticks_of(ring.close_ticks())),
            outbox,
        );
        s.next_seq += 1;
    }
}

/// Announces a thread's stream (its first frame).
fn open_stream(ring: &Ring, outbox: &mut Outbox) {
    let open = StreamOpen {
        header: DataHeader {
            stream: ring.meta.stream,
            seq: 0,
            t_p: 0,
        },
        kind_raw: StreamKind::Thread as u8,
        tid: ring.meta.tid,
        name: ring.meta.name.clone(),
    };
    let mut f = Vec::new();
    frame::encode(&mut f, FrameType::StreamOpen as u8, &open.encode_body());
    outbox.push(f);
}

/// Ends a thread's stream (frame `seq`) at `t_end` with its dropped count.
fn close_stream(ring: &Ring, seq: u64, t_end: u64, outbox: &mut Outbox) {
    let close = StreamClose {
        header: DataHeader {
            stream: ring.meta.stream,
            seq,
            t_p: 0,
        },
        t_end,
        dropped: ring.dropped(),
    };
    let mut f = Vec::new();
    frame::encode(&mut f, FrameType::StreamClose as u8, &close.encode_body());
    outbox.push(f);
}

/// Encodes a record the fast path left to the general decoder; false if it is not sent
/// (communication records to a log server that did not accept them).
#[inline]
fn encode_decoded(
    d: Decoded,
    conv: &mut crate::clock::Converter<'_>,
    comm_ok: bool,
    enc: &mut EventEncoder,
) -> bool {
    match d {
        Decoded::Simple { kind, t, sensor } => {
            let t = conv.ns(t);
            match kind {
                Kind::Enter => enc.enter(t, sensor),
                Kind::Exit => enc.exit(t, sensor),
                _ => enc.push(&Event::Mark { t, sensor }),
            }
        }
        Decoded::Counter { t, sensor, value } => enc.push(&Event::Counter {
            t: conv.ns(t),
            sensor,
            value,
        }),
        Decoded::Comm {
            t,
            end,
            sensor,
            op,
            fd,
            result,
            peer,
        } => {
            let (Some(op), true) = (op, comm_ok) else {
                return false;
            };
            let start = conv.ns(t);
            enc.push(&Event::Comm {
                t: start,
                sensor,
                op,
                fd,
                duration: conv.ns(end).saturating_sub(start),
                result,
                peer,
            });
        }
        Decoded::Socket {
            t,
            sensor,
            fd,
            proto,
            local,
            peer,
        } => {
            if !comm_ok {
                return false;
            }
            enc.push(&Event::Socket {
                t: conv.ns(t),
                sensor,
                fd,
                proto,
                local,
                peer,
            });
        }
    }
    true
}

fn emit_events(
    s: &mut Stream,
    stream: u32,
    dropped: u64,
    enc: &mut EventEncoder,
    outbox: &mut Outbox,
) {
    let mut f = Vec::with_capacity(enc.encoded_len() + 48);
    let header = DataHeader {
        stream,
        seq: s.next_seq,
        t_p: 0,
    };
    data::encode_events(&mut f, header, dropped, enc);
    outbox.push(f);
    s.next_seq += 1;
    enc.clear();
}
