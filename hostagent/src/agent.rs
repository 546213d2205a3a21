//! One agent: the state its threads share ([`Shared`]) and the sampling loop.
//!
//! Threads: the sampling loop (this module; it also turns OS-monitor output and hop clock
//! samples into frames every [`FLUSH_PERIOD`]), the uplink ([`crate::uplink`]), the listener
//! and two threads per relayed child ([`crate::tree`]), and optionally the OS monitor
//! ([`crate::osmon`]).

use crate::clock::AgentClock;
use crate::ctl::{AgentStatus, Message, Op, Reply, Request};
use crate::metric::metric_id;
use crate::osmon::OsmonBatch;
use crate::outbox::Outbox;
use crate::sample::Sampler;
use crate::settings::{Selection, Settings};
use crate::stream::{METRICS_STREAM, OSMON_STREAM, StreamWriter};
use p5_wire::data::Name;
use p5_wire::event::EventEncoder;
use p5_wire::hello::Identity;
use p5_wire::{Event, StreamKind};
use std::collections::{HashMap, HashSet};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often samples are packed into frames.
pub const FLUSH_PERIOD: Duration = Duration::from_millis(500);
/// Most events per `Events` frame.
const MAX_EVENTS_PER_FRAME: u32 = 50_000;
/// Most clock samples kept per peer between flushes.
const MAX_HOP_SAMPLES: usize = 256;

/// Locks a mutex, ignoring poisoning (a panicked thread leaves consistent-enough counters).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A relayed connection, as the control fan-out sees it.
#[derive(Debug, Clone)]
pub struct RelayHandle {
    /// `host/pid` of the connected producer.
    pub peer: String,
    /// True if it is a host agent (only those get control requests).
    pub is_agent: bool,
    /// The write half towards it.
    pub writer: Arc<Mutex<TcpStream>>,
}

/// State shared by the agent's threads.
#[derive(Debug)]
pub struct Shared {
    /// The agent's clock.
    pub clock: AgentClock,
    /// The agent's identity.
    pub identity: Identity,
    /// Its encoded Hello frame.
    pub hello: Vec<u8>,
    /// Upstream address.
    pub upstream: String,
    /// True if the upstream is a parent agent (else the log server).
    pub upstream_is_agent: bool,
    settings: Mutex<Settings>,
    /// Bumped at each settings change.
    pub settings_gen: AtomicU64,
    tree_settings: Mutex<Option<Settings>>,
    /// Frames until acknowledged.
    pub outbox: Mutex<Outbox>,
    /// Samples queued for delivery.
    pub samples_sent: AtomicU64,
    /// Samples lost.
    pub dropped: AtomicU64,
    relays: Mutex<HashMap<u64, RelayHandle>>,
    next_relay: AtomicU64,
    pending: Mutex<HashMap<u64, mpsc::Sender<Reply>>>,
    hops: Mutex<HashMap<u64, Vec<(u64, u64)>>>,
    /// Shutdown requested.
    pub stop: AtomicBool,
    /// The sampling loop wrote its last frames.
    pub finished: AtomicBool,
    finished_at: std::sync::OnceLock<Instant>,
    /// OS monitor state for `status`.
    pub sched_state: Mutex<String>,
}

impl Shared {
    /// Shared state for an agent.
    pub fn new(
        clock: AgentClock,
        identity: Identity,
        upstream: String,
        upstream_is_agent: bool,
        settings: Settings,
        outbox: Outbox,
        hello: Vec<u8>,
    ) -> Self {
        Self {
            clock,
            identity,
            hello,
            upstream,
            upstream_is_agent,
            settings: Mutex::new(settings),
            settings_gen: AtomicU64::new(0),
            tree_settings: Mutex::new(None),
            outbox: Mutex::new(outbox),
            samples_sent: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            relays: Mutex::new(HashMap::new()),
            next_relay: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            hops: Mutex::new(HashMap::new()),
            stop: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            finished_at: std::sync::OnceLock::new(),
            sched_state: Mutex::new("off".to_owned()),
        }
    }

    /// Marks the last frames written: the uplink delivers what is left, bounded by
    /// [`crate::uplink::DRAIN_TIMEOUT`].
    pub fn finish(&self) {
        let _ = self.finished_at.set(Instant::now());
        self.finished.store(true, Ordering::Release);
    }

    /// True once the final delivery attempt has run out of time.
    pub fn drain_expired(&self) -> bool {
        self.finished_at
            .get()
            .is_some_and(|t| t.elapsed() >= crate::uplink::DRAIN_TIMEOUT)
    }

    /// The current settings.
    pub fn settings(&self) -> Settings {
        lock(&self.settings).clone()
    }

    /// This agent's status.
    pub fn status(&self) -> AgentStatus {
        let s = self.settings();
        let now = self.clock.now_ns();
        let o = lock(&self.outbox);
        AgentStatus {
            host: self.identity.hostname.clone(),
            process_uid: format!("{:016x}", self.identity.process_uid),
            pid: self.identity.pid,
            uptime_s: now as f64 / 1e9,
            interval_ms: s.interval_ms,
            recording: s.recording,
            metrics: s.metrics,
            lag_ms: o
                .oldest_pending_time()
                .map_or(0, |t| now.saturating_sub(t) / 1_000_000),
            samples_sent: self.samples_sent.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            unacked_frames: o.unacked_frames() as u64,
            spool_bytes: o.spool_bytes(),
            upstream: format!(
                "{} {}",
                if self.upstream_is_agent {
                    "parent"
                } else {
                    "logserver"
                },
                self.upstream
            ),
            upstream_connected: o.connected(),
            relays: lock(&self.relays).len() as u64,
            sched: lock(&self.sched_state).clone(),
        }
    }

    /// Applies a request's settings change to this agent.
    pub fn apply(&self, req: &Request) -> Result<(), String> {
        if req.op == Op::Status {
            return Ok(());
        }
        let mut cur = lock(&self.settings);
        let new = req.apply_to(&cur).map_err(|e| e.to_string())?;
        if *cur != new {
            tracing::info!(?new, "settings changed");
            *cur = new;
            self.settings_gen.fetch_add(1, Ordering::Release);
        }
        Ok(())
    }

    /// A request from the parent (the top's fan-out): apply, answer with our own status.
    pub fn handle_parent_request(&self, req: &Request) -> Option<Reply> {
        let res = self.apply(req);
        if req.push {
            return None;
        }
        Some(Reply {
            id: req.id,
            ok: res.is_ok(),
            error: res.err(),
            agents: vec![self.status()],
            unanswered: Vec::new(),
        })
    }

    /// A request from `hostagent ctl`: apply here, fan out to every agent below, gather.
    pub fn handle_ctl(&self, req: &Request) -> Reply {
        if let Err(e) = self.apply(req) {
            return Reply {
                id: req.id,
                ok: false,
                error: Some(e),
                ..Reply::default()
            };
        }
        if req.op != Op::Status {
            *lock(&self.tree_settings) = Some(self.settings());
        }
        let (tx, rx) = mpsc::channel();
        let mut waiting: HashMap<u64, String> = HashMap::new();
        let relays: Vec<RelayHandle> = lock(&self.relays).values().cloned().collect();
        for r in relays.into_iter().filter(|r| r.is_agent) {
            let id = crate::identity::random_u64();
            let sub = Request {
                id,
                push: false,
                ..req.clone()
            };
            lock(&self.pending).insert(id, tx.clone());
            let frame = crate::link::control_frame(&Message::Request(sub).to_json());
            let w = lock(&r.writer);
            if crate::link::write_all(&w, &frame).is_ok() {
                waiting.insert(id, r.peer.clone());
            } else {
                lock(&self.pending).remove(&id);
            }
        }
        drop(tx);
        let mut agents = vec![self.status()];
        let mut errors = Vec::new();
        let deadline = Instant::now() + crate::ctl::FANOUT_TIMEOUT;
        while !waiting.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(rep) => {
                    if waiting.remove(&rep.id).is_some() {
                        if let Some(e) = &rep.error {
                            errors.push(e.clone());
                        }
                        agents.extend(rep.agents);
                    }
                }
                Err(_) => break,
            }
        }
        let mut pend = lock(&self.pending);
        for id in waiting.keys() {
            pend.remove(id);
        }
        drop(pend);
        let mut unanswered: Vec<String> = waiting.into_values().collect();
        unanswered.sort();
        Reply {
            id: req.id,
            ok: errors.is_empty(),
            error: (!errors.is_empty()).then(|| errors.join("; ")),
            agents,
            unanswered,
        }
    }

    /// Delivers a reply that came up a relay, if this agent asked for it.
    pub fn deliver_reply(&self, rep: Reply) -> Result<(), Reply> {
        match lock(&self.pending).remove(&rep.id) {
            Some(tx) => {
                let _ = tx.send(rep);
                Ok(())
            }
            None => Err(rep),
        }
    }

    /// Registers a relayed connection; returns its key and, for a newly joined agent, the
    /// tree's settings to push to it.
    pub fn add_relay(&self, h: RelayHandle) -> (u64, Option<Settings>) {
        let key = self.next_relay.fetch_add(1, Ordering::Relaxed);
        let push = if h.is_agent {
            lock(&self.tree_settings).clone()
        } else {
            None
        };
        lock(&self.relays).insert(key, h);
        (key, push)
    }

    /// Forgets a relayed connection.
    pub fn remove_relay(&self, key: u64) {
        lock(&self.relays).remove(&key);
    }

    /// Records one hop clock sample (`t_recv` ours, `t_send` the peer's).
    pub fn hop_sample(&self, peer: u64, t_recv: u64, t_send: u64) {
        let mut h = lock(&self.hops);
        let v = h.entry(peer).or_default();
        if v.len() < MAX_HOP_SAMPLES {
            v.push((t_recv, t_send));
        } else if let Some(worst) = v
            .iter_mut()
            .max_by_key(|(r, s)| r.wrapping_sub(*s) as i64)
            .filter(|(r, s)| (r.wrapping_sub(*s) as i64) > (t_recv.wrapping_sub(t_send) as i64))
        {
            // Keep the samples with the smallest delay: they bound the offset best.
            *worst = (t_recv, t_send);
        }
    }

    fn take_hops(&self) -> Vec<(u64, Vec<(u64, u64)>)> {
        let mut h = lock(&self.hops);
        let mut v: Vec<_> = h.drain().filter(|(_, s)| !s.is_empty()).collect();
        v.sort_by_key(|(p, _)| *p);
        v
    }
}

/// Packs samples, OS-monitor output and hop clock samples into frames.
#[derive(Debug)]
struct Packer {
    metrics: StreamWriter,
    osmon: StreamWriter,
    declared: HashSet<u64>,
    names: Vec<Name>,
    batch: EventEncoder,
    samples_in_batch: u64,
    os_names: Vec<Name>,
    os_batch: EventEncoder,
    os_name: Option<String>,
    os_stream_id: u32,
}

impl Packer {
    fn new() -> Self {
        Self {
            metrics: StreamWriter::new(METRICS_STREAM),
            osmon: StreamWriter::new(OSMON_STREAM),
            declared: HashSet::new(),
            names: Vec::new(),
            batch: EventEncoder::new(),
            samples_in_batch: 0,
            os_names: Vec::new(),
            os_batch: EventEncoder::new(),
            os_name: None,
            os_stream_id: OSMON_STREAM,
        }
    }

    /// Queues one frame of `w`'s stream; if the outbox refuses it (spool full) the frame's
    /// sequence number is taken back, so the stream stays gap-free.
    fn offer(
        shared: &Shared,
        w: &mut StreamWriter,
        make: impl FnOnce(&mut StreamWriter) -> Vec<u8>,
    ) -> bool {
        let f = make(w);
        let ok = lock(&shared.outbox).push(f);
        if !ok {
            w.rollback();
        }
        ok
    }

    fn flush(&mut self, shared: &Shared, last: bool) {
        let now = shared.clock.now_ns();
        let dropped = shared.dropped.load(Ordering::Relaxed);
        if !self.metrics.is_open() {
            Self::offer(shared, &mut self.metrics, |m| {
                m.open(StreamKind::HostMetrics, "host metrics")
            });
        }
        if self.metrics.is_open() {
            if !self.names.is_empty() {
                let names = self.names.clone();
                if Self::offer(shared, &mut self.metrics, |m| m.names(names)) {
                    self.names.clear();
                }
            }
            if !self.batch.is_empty() {
                // Samples are sent only after their names; without room they are dropped.
                let b = &self.batch;
                let sent = self.names.is_empty()
                    && Self::offer(shared, &mut self.metrics, |m| m.events(dropped, b));
                let counter = if sent {
                    &shared.samples_sent
                } else {
                    &shared.dropped
                };
                counter.fetch_add(self.samples_in_batch, Ordering::Relaxed);
                self.batch.clear();
                self.samples_in_batch = 0;
            }
            for (peer, samples) in shared.take_hops() {
                Self::offer(shared, &mut self.metrics, |m| {
                    m.clock_samples(peer, samples)
                });
            }
        } else {
            shared
                .dropped
                .fetch_add(self.samples_in_batch, Ordering::Relaxed);
            self.batch.clear();
            self.samples_in_batch = 0;
        }
        if let Some(name) = &self.os_name {
            if !self.osmon.is_open() {
                Self::offer(shared, &mut self.osmon, |w| {
                    w.open(StreamKind::OsMonitor, name)
                });
            }
            if self.osmon.is_open() && !self.os_names.is_empty() {
                let names = self.os_names.clone();
                if Self::offer(shared, &mut self.osmon, |w| w.names(names)) {
                    self.os_names.clear();
                }
            }
            if self.osmon.is_open() && self.os_names.is_empty() && !self.os_batch.is_empty() {
                let b = &self.os_batch;
                Self::offer(shared, &mut self.osmon, |w| w.events(0, b));
            }
            self.os_batch.clear();
        }
        if last {
            if self.metrics.is_open() {
                Self::offer(shared, &mut self.metrics, |m| m.close(now, dropped));
            }
            if self.osmon.is_open() {
                Self::offer(shared, &mut self.osmon, |w| w.close(now, 0));
            }
        }
    }

    fn os_batch(&mut self, shared: &Shared, b: OsmonBatch) {
        if let Some(n) = b.stream_name
            && self.os_name.as_ref() != Some(&n)
        {
            // The mode changed (tracefs failed): finish the old stream, start a new one.
            if self.osmon.is_open() {
                self.flush(shared, false);
                let now = shared.clock.now_ns();
                Self::offer(shared, &mut self.osmon, |w| w.close(now, 0));
                self.os_stream_id += 1;
                self.osmon = StreamWriter::new(self.os_stream_id);
            }
            self.os_name = Some(n);
        }
        self.os_names.extend(b.names);
        for e in &b.events {
            self.os_batch.push(e);
            if self.os_batch.len() >= MAX_EVENTS_PER_FRAME {
                self.flush(shared, false);
            }
        }
    }
}

/// Runs the sampling loop until `shared.stop` is set or a stop signal arrives; then calls
/// `before_last_flush` (which stops the OS monitor, so its last events make it) and writes the
/// last frames.
pub fn sampling_loop(
    before_last_flush: impl FnOnce(),
    shared: &Shared,
    mut sampler: Sampler,
    osmon: Option<mpsc::Receiver<OsmonBatch>>,
) {
    let mut packer = Packer::new();
    let mut seen_gen = u64::MAX;
    let mut settings = shared.settings();
    let mut sel = Selection::all();
    let mut samples = Vec::with_capacity(512);
    let mut next_tick = Instant::now();
    let mut next_flush = Instant::now() + FLUSH_PERIOD;
    while !shared.stop.load(Ordering::Acquire) && !crate::signal::requested() {
        let g = shared.settings_gen.load(Ordering::Acquire);
        if g != seen_gen {
            seen_gen = g;
            settings = shared.settings();
            if let Ok(s) = settings.validate() {
                sel = s;
            }
            next_tick = Instant::now();
        }
        let now = Instant::now();
        if settings.recording && now >= next_tick {
            let t = shared.clock.now_ns();
            samples.clear();
            sampler.sample(&sel, &mut samples);
            for s in &samples {
                let id = metric_id(&s.name);
                if packer.declared.insert(id) {
                    packer.names.push(s.declaration());
                }
                packer.batch.push(&Event::Counter {
                    t,
                    sensor: id,
                    value: s.value,
                });
            }
            packer.samples_in_batch += 1;
            let interval = Duration::from_millis(settings.interval_ms);
            next_tick += interval;
            let behind = Instant::now().saturating_duration_since(next_tick);
            if behind >= interval {
                // Sampling overran: skip the missed ticks and count them.
                let missed = (behind.as_nanos() / interval.as_nanos()) as u64;
                shared.dropped.fetch_add(missed, Ordering::Relaxed);
                next_tick += interval * missed as u32;
            }
        }
        if let Some(rx) = &osmon {
            while let Ok(b) = rx.try_recv() {
                packer.os_batch(shared, b);
            }
        }
        if Instant::now() >= next_flush || packer.batch.len() >= MAX_EVENTS_PER_FRAME {
            packer.flush(shared, false);
            next_flush = Instant::now() + FLUSH_PERIOD;
        }
        let wake = if settings.recording {
            next_tick.min(next_flush)
        } else {
            next_flush
        };
        let nap = wake
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(100));
        std::thread::sleep(nap);
    }
    before_last_flush();
    if let Some(rx) = &osmon {
        while let Ok(b) = rx.try_recv() {
            packer.os_batch(shared, b);
        }
    }
    packer.flush(shared, true);
    shared.finish();
}

#[cfg(test)]
mod tests {
    use super::*;
    use p5_wire::data::DataHeader;

    fn shared(spool_max: u64, dir: &std::path::Path) -> Shared {
        let clock = AgentClock::start();
        let id = crate::identity::agent_identity(&clock, "t");
        let hello = crate::identity::hello_frame(&id);
        let mut outbox = Outbox::new(hello.clone(), dir.join("s.p5spool"), spool_max);
        outbox.force_spill();
        Shared::new(
            clock,
            id,
            "x:1".into(),
            false,
            Settings::default(),
            outbox,
            hello,
        )
    }

    fn seqs(sh: &Shared) -> Vec<(u8, u64)> {
        let mut o = lock(&sh.outbox);
        o.on_connect();
        o.take_unsent(usize::MAX)
            .iter()
            .map(|f| {
                let (raw, _) = p5_wire::frame::decode(f).unwrap();
                (raw.ty, DataHeader::peek(raw.body).unwrap().seq)
            })
            .collect()
    }

    #[test]
    fn a_full_spool_drops_samples_without_sequence_gaps() {
        let dir = tempfile::tempdir().unwrap();
        let sh = shared(3000, dir.path());
        let mut p = Packer::new();
        for round in 0..20u64 {
            for i in 0..50u64 {
                let name = format!("m.{i}");
                let id = metric_id(&name);
                if p.declared.insert(id) {
                    p.names
                        .push(crate::metric::Sample::new(name, "count", 0).declaration());
                }
                p.batch.push(&Event::Counter {
                    t: round,
                    sensor: id,
                    value: (round * i) as i64,
                });
            }
            p.samples_in_batch += 1;
            p.flush(&sh, false);
        }
        let got = seqs(&sh);
        assert!(!got.is_empty());
        let want: Vec<u64> = (0..got.len() as u64).collect();
        assert_eq!(got.iter().map(|x| x.1).collect::<Vec<_>>(), want);
        assert!(
            sh.dropped.load(Ordering::Relaxed) > 0,
            "nothing was dropped"
        );
        assert_eq!(
            sh.dropped.load(Ordering::Relaxed) + sh.samples_sent.load(Ordering::Relaxed),
            20
        );
    }

    #[test]
    fn control_requests_apply_and_report() {
        let dir = tempfile::tempdir().unwrap();
        let sh = shared(1 << 20, dir.path());
        let req = crate::ctl::parse_command(&["set".into(), "interval=500".into()]).unwrap();
        let rep = sh.handle_parent_request(&req).unwrap();
        assert!(rep.ok);
        assert_eq!(rep.agents[0].interval_ms, 500);
        assert_eq!(sh.settings_gen.load(Ordering::Relaxed), 1);
        let bad = Request {
            interval_ms: Some(1),
            ..req
        };
        let rep = sh.handle_ctl(&bad);
        assert!(!rep.ok && rep.error.unwrap().contains("interval"));
        assert_eq!(sh.settings().interval_ms, 500);
        let push = Request {
            push: true,
            ..crate::ctl::parse_command(&["stop".into()]).unwrap()
        };
        assert!(sh.handle_parent_request(&push).is_none());
        assert!(!sh.settings().recording);
    }
}
