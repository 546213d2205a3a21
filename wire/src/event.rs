//! The compact event encoding inside an `Events` frame.
//!
//! Each event starts with a tag byte and a time delta:
//!
//! ```text
//! u8 tag       bits 0-3 kind, bits 4-7 sensor slot (0..=14 index into the frame's sensor
//!              table; 15 = a varint slot index follows the tag)
//! ivarint dt   zigzag varint: ns since the previous event of the frame (the first: since
//!              the frame's base time)
//! kind-specific fields:
//!   0 Enter, 1 Exit, 2 Mark: none
//!   3 Counter:  ivarint value
//!   4 Comm:     u8 op | ivarint fd | varint duration_ns | ivarint result | Endpoint peer
//!   5 Socket:   ivarint fd | u8 proto | Endpoint local | Endpoint peer
//!   6 Switch:   varint cpu | varint prev_tid | u8 prev_state | varint next_tid   (sensor 0)
//!   7 Wakeup:   varint cpu | varint tid                                          (sensor 0)
//!   8 Irq:      varint cpu | varint irq | varint duration_ns | u8 handled        (sensor 0)
//!   9 Task:     varint tid | varint pid | string comm                            (sensor 0)
//!  10 Calls:    varint calls | varint timed | varint timed_ns | varint recorded | u8 pinned
//! ```
//!
//! Kind 10 reports a throttled (or count-only) scope sensor's cumulative call counts; `t`
//! is when it was throttled. A runtime sends it only when the server accepted the `CALLS`
//! capability.
//!
//! Kinds 6–9 come from OS monitors (kernel scheduling and interrupt events, stamped relative
//! to the monitor's start like every other time) and need the `SCHED` capability. Host
//! metrics use `Counter` events whose sensor is a metric id declared in a `Names` frame.
//!
//! Enter/exit pairs of a realistic trace take 2–3 bytes per event. Sensor ids are 64-bit and
//! stable (the instrumenter derives them); the frame carries each id once in its table.

use crate::codec::{Reader, put_ivarint, put_str, put_varint};
use crate::endpoint::Endpoint;
use crate::error::{DecodeError, Result};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A stable 64-bit sensor id. 0 means "no sensor".
pub type SensorId = u64;

/// Slot value in the tag meaning "the slot index follows as a varint".
const SLOT_ESCAPE: u8 = 15;

/// Communication operations recorded by the runtime's wrappers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CommOp {
    /// send(2)
    Send = 1,
    /// recv(2)
    Recv = 2,
    /// sendto(2)
    SendTo = 3,
    /// recvfrom(2)
    RecvFrom = 4,
    /// sendmsg(2)
    SendMsg = 5,
    /// recvmsg(2)
    RecvMsg = 6,
    /// read(2) on a socket
    Read = 7,
    /// write(2) on a socket
    Write = 8,
    /// connect(2)
    Connect = 9,
    /// accept(2)
    Accept = 10,
    /// close(2)
    Close = 11,
    /// shutdown(2)
    Shutdown = 12,
    /// Waiting for descriptors to become ready: poll(2), ppoll, select(2), pselect,
    /// epoll_wait(2), epoll_pwait, and the clients' selectors. `fd` is the epoll descriptor
    /// (−1 for poll and select), the result the number of ready descriptors or −errno.
    Wait = 13,
}

impl CommOp {
    /// Maps a byte to an operation.
    pub fn from_u8(b: u8) -> Option<Self> {
        use CommOp::*;
        Some(match b {
            1 => Send,
            2 => Recv,
            3 => SendTo,
            4 => RecvFrom,
            5 => SendMsg,
            6 => RecvMsg,
            7 => Read,
            8 => Write,
            9 => Connect,
            10 => Accept,
            11 => Close,
            12 => Shutdown,
            13 => Wait,
            _ => return None,
        })
    }

    /// True if data flows out of the process.
    pub fn is_send(self) -> bool {
        matches!(
            self,
            Self::Send | Self::SendTo | Self::SendMsg | Self::Write
        )
    }

    /// True if data flows into the process.
    pub fn is_recv(self) -> bool {
        matches!(
            self,
            Self::Recv | Self::RecvFrom | Self::RecvMsg | Self::Read
        )
    }

    /// Lower-case name, as in the C function.
    pub fn name(self) -> &'static str {
        use CommOp::*;
        match self {
            Send => "send",
            Recv => "recv",
            SendTo => "sendto",
            RecvFrom => "recvfrom",
            SendMsg => "sendmsg",
            RecvMsg => "recvmsg",
            Read => "read",
            Write => "write",
            Connect => "connect",
            Accept => "accept",
            Close => "close",
            Shutdown => "shutdown",
            Wait => "wait",
        }
    }
}

/// Sensors a runtime records under on its own, for calls no instrumented call site made: the
/// id is the FNV-1a (64-bit) hash of the name, the name what merge stores for it.
/// `p5:python:selectors.select`: a Python selector's `select` (asyncio's event loop,
/// `socketserver`), recorded as a wait by the Python client (`p5.SELECTOR_SENSOR`);
/// `p5:python:socket.<method>`: a `socket.socket` method no instrumented site routed
/// (`makefile` readers and writers, `http.client`, asyncio's transports), recorded by the
/// Python client's wrapped socket layer; `p5:java:socket.<call>`: a `java.net.Socket` or
/// `ServerSocket` call no instrumented site routed, recorded by the Java client's socket
/// implementation factories.
pub const RUNTIME_SENSORS: &[(SensorId, &str)] = &[
    (0x745f_a9f5_20e4_6458, "p5:python:selectors.select"),
    (0xc201_ce4c_9e9d_1e3d, "p5:python:socket.accept"),
    (0x50f1_df6f_b554_9e37, "p5:python:socket.close"),
    (0x514c_8203_2993_014d, "p5:python:socket.connect"),
    (0x7c3c_2706_e08b_8363, "p5:python:socket.connect_ex"),
    (0xe73a_cce2_3e0a_5501, "p5:python:socket.recv"),
    (0x0b1c_dd4b_bd01_6404, "p5:python:socket.recv_into"),
    (0xafb2_7ac3_329e_8a99, "p5:python:socket.recvfrom"),
    (0x626e_6fc6_d9fd_cdac, "p5:python:socket.recvfrom_into"),
    (0xf18b_4c56_7768_73d6, "p5:python:socket.recvmsg"),
    (0x61b9_43aa_967e_f031, "p5:python:socket.recvmsg_into"),
    (0x69dd_0edc_3ff5_2e9b, "p5:python:socket.send"),
    (0x852b_798d_4879_325e, "p5:python:socket.sendall"),
    (0x1c1c_832a_4bb3_99b5, "p5:python:socket.sendfile"),
    (0x6494_cc8d_3699_95ec, "p5:python:socket.sendmsg"),
    (0x53cd_bce7_04c1_01b6, "p5:python:socket.sendto"),
    (0x04e5_e467_b3d3_1a8f, "p5:python:socket.shutdown"),
    (0xda68_daaf_f823_e3cb, "p5:java:socket.accept"),
    (0xc0d8_e967_58c8_877d, "p5:java:socket.close"),
    (0xacbb_fe3a_7f11_d1eb, "p5:java:socket.connect"),
    (0xab90_ccaf_18a2_136b, "p5:java:socket.read"),
    (0x43b1_49b6_2234_cb7d, "p5:java:socket.shutdown"),
    (0x8d47_5767_8696_b38a, "p5:java:socket.write"),
];

/// Socket protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum SocketProto {
    /// Not known.
    Unknown = 0,
    /// TCP.
    Tcp = 1,
    /// UDP.
    Udp = 2,
    /// Unix stream socket.
    UnixStream = 3,
    /// Unix datagram socket.
    UnixDgram = 4,
}

impl SocketProto {
    /// Maps a byte; unknown values become `Unknown`.
    pub fn from_u8(b: u8) -> Self {
        match b {
            1 => Self::Tcp,
            2 => Self::Udp,
            3 => Self::UnixStream,
            4 => Self::UnixDgram,
            _ => Self::Unknown,
        }
    }
}

/// Softirqs are recorded as [`Event::Irq`] with `irq = SOFTIRQ_BASE + vector` (0x10002 NET_TX,
/// 0x10003 NET_RX), above any hard IRQ line number, so they share the `irq` table and the
/// viewer's IRQ row with the NIC's interrupts.
pub const SOFTIRQ_BASE: u32 = 0x1_0000;
/// The kernel's NET_TX softirq vector (sending: completions and queued transmits).
pub const NET_TX_SOFTIRQ: u32 = 2;
/// The kernel's NET_RX softirq vector (receiving: on loopback, the whole receive path).
pub const NET_RX_SOFTIRQ: u32 = 3;

/// One decoded event. `t` is ns since the process start. New kinds may be added (the
/// capability flags say which a peer understands), hence `non_exhaustive`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A sensor's scope was entered (function body, region).
    Enter {
        /// Time.
        t: u64,
        /// Sensor.
        sensor: SensorId,
    },
    /// A sensor's scope was left.
    Exit {
        /// Time.
        t: u64,
        /// Sensor.
        sensor: SensorId,
    },
    /// An instant.
    Mark {
        /// Time.
        t: u64,
        /// Sensor.
        sensor: SensorId,
    },
    /// A counter value.
    Counter {
        /// Time.
        t: u64,
        /// Sensor.
        sensor: SensorId,
        /// The value.
        value: i64,
    },
    /// A communication call; `t` is its start, `duration` how long it took.
    Comm {
        /// Start time.
        t: u64,
        /// Call-site sensor.
        sensor: SensorId,
        /// Operation.
        op: CommOp,
        /// File descriptor.
        fd: i64,
        /// Duration of the call, ns.
        duration: u64,
        /// Bytes transferred, or −errno on failure.
        result: i64,
        /// Peer for datagram calls (sendto/recvfrom) and connect/accept; else `None`.
        peer: Endpoint,
    },
    /// What a socket descriptor is connected to (recorded once per descriptor).
    Socket {
        /// Time.
        t: u64,
        /// Call-site sensor.
        sensor: SensorId,
        /// File descriptor.
        fd: i64,
        /// Protocol.
        proto: SocketProto,
        /// Local address.
        local: Endpoint,
        /// Peer address.
        peer: Endpoint,
    },
    /// The kernel switched a CPU from one thread to another (`sched_switch`).
    Switch {
        /// Time.
        t: u64,
        /// CPU.
        cpu: u32,
        /// Thread that left the CPU (0 = idle).
        prev_tid: u32,
        /// Its state as the kernel letter (`R`, `S`, `D`, ...) in ASCII.
        prev_state: u8,
        /// Thread that got the CPU (0 = idle).
        next_tid: u32,
    },
    /// A thread became runnable (`sched_wakeup`).
    Wakeup {
        /// Time.
        t: u64,
        /// Target CPU.
        cpu: u32,
        /// The thread.
        tid: u32,
    },
    /// An interrupt handler ran from `t` for `duration` ns (`irq_handler_entry`/`exit`), or a
    /// softirq (`softirq_entry`/`exit`, numbered `0x10000 + vector`).
    Irq {
        /// Entry time.
        t: u64,
        /// CPU.
        cpu: u32,
        /// IRQ line (below [`SOFTIRQ_BASE`]), or [`SOFTIRQ_BASE`] + softirq vector (0x10002
        /// NET_TX, 0x10003 NET_RX).
        irq: u32,
        /// Handler duration, ns.
        duration: u64,
        /// 1 if the handler reported it handled the interrupt.
        handled: u8,
    },
    /// An OS monitor met a thread it follows (a process it was told about, a child or thread
    /// created under one, `task_newtask`) or the thread's name changed (`exec`,
    /// `prctl(PR_SET_NAME)`, `task_rename`): thread `tid` belongs to process `pid` and is
    /// called `comm` from `t` on. Merge names processes that never announced themselves by it.
    Task {
        /// Time.
        t: u64,
        /// The thread.
        tid: u32,
        /// Its process (thread group id).
        pid: u32,
        /// The kernel's name of the thread (at most 15 bytes there).
        comm: String,
    },
    /// A scope sensor that was throttled at `t` (TAU's rule) or pinned count-only by the
    /// selection file: its cumulative calls since the process start. Later reports of the same
    /// sensor supersede earlier ones.
    Calls {
        /// When the sensor was throttled (or first counted).
        t: u64,
        /// Sensor.
        sensor: SensorId,
        /// Calls begun.
        calls: u64,
        /// Calls timed (all calls before throttling, sampled ones after).
        timed: u64,
        /// Their summed duration, ns.
        timed_ns: u64,
        /// Long calls recorded as enter/exit while throttled.
        recorded: u64,
        /// 1 if pinned count-only by the selection file rather than throttled by the rule.
        pinned: u8,
    },
}

impl Event {
    /// The event's time.
    pub fn time(&self) -> u64 {
        match self {
            Event::Enter { t, .. }
            | Event::Exit { t, .. }
            | Event::Mark { t, .. }
            | Event::Counter { t, .. }
            | Event::Comm { t, .. }
            | Event::Socket { t, .. }
            | Event::Switch { t, .. }
            | Event::Wakeup { t, .. }
            | Event::Irq { t, .. }
            | Event::Task { t, .. }
            | Event::Calls { t, .. } => *t,
        }
    }

    /// The event's sensor.
    pub fn sensor(&self) -> SensorId {
        match self {
            Event::Enter { sensor, .. }
            | Event::Exit { sensor, .. }
            | Event::Mark { sensor, .. }
            | Event::Counter { sensor, .. }
            | Event::Comm { sensor, .. }
            | Event::Socket { sensor, .. }
            | Event::Calls { sensor, .. } => *sensor,
            Event::Switch { .. }
            | Event::Wakeup { .. }
            | Event::Irq { .. }
            | Event::Task { .. } => 0,
        }
    }

    fn kind(&self) -> u8 {
        match self {
            Event::Enter { .. } => 0,
            Event::Exit { .. } => 1,
            Event::Mark { .. } => 2,
            Event::Counter { .. } => 3,
            Event::Comm { .. } => 4,
            Event::Socket { .. } => 5,
            Event::Switch { .. } => 6,
            Event::Wakeup { .. } => 7,
            Event::Irq { .. } => 8,
            Event::Task { .. } => 9,
            Event::Calls { .. } => 10,
        }
    }
}

/// Hashes a sensor id with one multiplication (Fibonacci hashing): ids are either hashes
/// already or small numbers, and SipHash per event was most of the encoder's cost.
#[derive(Debug, Default, Clone, Copy)]
struct SensorHasher(u64);

impl Hasher for SensorHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// log2 of the encoder's direct-mapped sensor cache size.
const CACHE_BITS: u32 = 8;

/// Builds the sensor table and event bytes of one `Events` frame.
#[derive(Debug, Default)]
pub struct EventEncoder {
    sensors: Vec<SensorId>,
    slots: HashMap<SensorId, u32, BuildHasherDefault<SensorHasher>>,
    /// Direct-mapped cache in front of `slots` (hot sensors repeat): `(sensor, slot)`, slot
    /// `u32::MAX` for empty; allocated on first use.
    cache: Vec<(SensorId, u32)>,
    bytes: Vec<u8>,
    base: u64,
    last: u64,
    count: u32,
}

impl EventEncoder {
    /// A new, empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of events so far.
    pub fn len(&self) -> u32 {
        self.count
    }

    /// True if no event was added.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Encoded size so far (table + events), a guide for splitting frames.
    pub fn encoded_len(&self) -> usize {
        self.bytes.len() + self.sensors.len() * 8 + 16
    }

    /// Forgets everything, keeping the allocations.
    pub fn clear(&mut self) {
        self.sensors.clear();
        self.slots.clear();
        self.cache.fill((0, u32::MAX));
        self.bytes.clear();
        self.base = 0;
        self.last = 0;
        self.count = 0;
    }

    #[inline]
    fn slot_of(&mut self, sensor: SensorId) -> u32 {
        let h = (sensor.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - CACHE_BITS)) as usize;
        match self.cache.get(h) {
            Some(&(s, slot)) if s == sensor && slot != u32::MAX => slot,
            _ => self.slot_slow(sensor, h),
        }
    }

    #[inline(never)]
    fn slot_slow(&mut self, sensor: SensorId, h: usize) -> u32 {
        if self.cache.is_empty() {
            self.cache = vec![(0, u32::MAX); 1 << CACHE_BITS];
        }
        let next = self.sensors.len() as u32;
        let slot = *self.slots.entry(sensor).or_insert(next);
        if slot == next {
            self.sensors.push(sensor);
        }
        self.cache[h] = (sensor, slot);
        slot
    }

    fn head(&mut self, kind: u8, t: u64, sensor: SensorId) {
        let slot = self.slot_of(sensor);
        if self.count == 0 {
            self.base = t;
            self.last = t;
        }
        if slot < SLOT_ESCAPE as u32 {
            self.bytes.push(kind | ((slot as u8) << 4));
        } else {
            self.bytes.push(kind | (SLOT_ESCAPE << 4));
            put_varint(&mut self.bytes, slot as u64);
        }
        put_ivarint(&mut self.bytes, t.wrapping_sub(self.last) as i64);
        self.last = t;
        self.count += 1;
    }

    /// Appends an enter event.
    #[inline]
    pub fn enter(&mut self, t: u64, sensor: SensorId) {
        self.head(0, t, sensor);
    }

    /// Appends an exit event.
    #[inline]
    pub fn exit(&mut self, t: u64, sensor: SensorId) {
        self.head(1, t, sensor);
    }

    /// Appends any event.
    pub fn push(&mut self, e: &Event) {
        self.head(e.kind(), e.time(), e.sensor());
        match e {
            Event::Enter { .. } | Event::Exit { .. } | Event::Mark { .. } => {}
            Event::Counter { value, .. } => put_ivarint(&mut self.bytes, *value),
            Event::Comm {
                op,
                fd,
                duration,
                result,
                peer,
                ..
            } => {
                self.bytes.push(*op as u8);
                put_ivarint(&mut self.bytes, *fd);
                put_varint(&mut self.bytes, *duration);
                put_ivarint(&mut self.bytes, *result);
                peer.encode(&mut self.bytes);
            }
            Event::Socket {
                fd,
                proto,
                local,
                peer,
                ..
            } => {
                put_ivarint(&mut self.bytes, *fd);
                self.bytes.push(*proto as u8);
                local.encode(&mut self.bytes);
                peer.encode(&mut self.bytes);
            }
            Event::Switch {
                cpu,
                prev_tid,
                prev_state,
                next_tid,
                ..
            } => {
                put_varint(&mut self.bytes, *cpu as u64);
                put_varint(&mut self.bytes, *prev_tid as u64);
                self.bytes.push(*prev_state);
                put_varint(&mut self.bytes, *next_tid as u64);
            }
            Event::Wakeup { cpu, tid, .. } => {
                put_varint(&mut self.bytes, *cpu as u64);
                put_varint(&mut self.bytes, *tid as u64);
            }
            Event::Irq {
                cpu,
                irq,
                duration,
                handled,
                ..
            } => {
                put_varint(&mut self.bytes, *cpu as u64);
                put_varint(&mut self.bytes, *irq as u64);
                put_varint(&mut self.bytes, *duration);
                self.bytes.push(*handled);
            }
            Event::Task { tid, pid, comm, .. } => {
                put_varint(&mut self.bytes, *tid as u64);
                put_varint(&mut self.bytes, *pid as u64);
                put_str(&mut self.bytes, comm);
            }
            Event::Calls {
                calls,
                timed,
                timed_ns,
                recorded,
                pinned,
                ..
            } => {
                put_varint(&mut self.bytes, *calls);
                put_varint(&mut self.bytes, *timed);
                put_varint(&mut self.bytes, *timed_ns);
                put_varint(&mut self.bytes, *recorded);
                self.bytes.push(*pinned);
            }
        }
    }

    /// Appends `base | count | table | events` to `out` (the part of an `Events` body after
    /// the data header and the dropped counter).
    pub fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.base.to_le_bytes());
        out.extend_from_slice(&self.count.to_le_bytes());
        put_varint(out, self.sensors.len() as u64);
        for s in &self.sensors {
            out.extend_from_slice(&s.to_le_bytes());
        }
        out.extend_from_slice(&self.bytes);
    }
}

/// Iterates the events of an `Events` frame without allocating (except for unix paths).
/// Yields at most `count` events; after the last one, trailing bytes are an error.
#[derive(Debug, Clone)]
pub struct EventDecoder<'a> {
    table: &'a [u8],
    r: Reader<'a>,
    left: u32,
    last: u64,
    failed: bool,
}

impl<'a> EventDecoder<'a> {
    /// Parses `base | count | table` and positions at the first event.
    pub fn new(buf: &'a [u8]) -> Result<Self> {
        let mut r = Reader::new(buf);
        let base = r.u64()?;
        let count = r.u32()?;
        let n = r.varint()?;
        if n > (r.remaining() / 8) as u64 {
            return Err(DecodeError::Invalid {
                field: "sensor table length",
                value: n,
            });
        }
        let table = r.take(n as usize * 8)?;
        // Every event takes at least two bytes.
        if count as u64 > (r.remaining() / 2) as u64 {
            return Err(DecodeError::Invalid {
                field: "event count",
                value: count as u64,
            });
        }
        Ok(Self {
            table,
            r,
            left: count,
            last: base,
            failed: false,
        })
    }

    /// Events not yet decoded.
    pub fn remaining(&self) -> u32 {
        self.left
    }

    /// Number of distinct sensors in the frame's table.
    pub fn sensor_count(&self) -> usize {
        self.table.len() / 8
    }

    fn sensor(&self, slot: u64) -> Result<SensorId> {
        let i = usize::try_from(slot).unwrap_or(usize::MAX);
        match self
            .table
            .get(i.saturating_mul(8)..i.saturating_mul(8).saturating_add(8))
        {
            Some(b) => Ok(u64::from_le_bytes(b.try_into().unwrap_or([0; 8]))),
            None => Err(DecodeError::Invalid {
                field: "sensor slot",
                value: slot,
            }),
        }
    }

    fn one(&mut self) -> Result<Event> {
        let tag = self.r.u8()?;
        let kind = tag & 0x0f;
        let mut slot = (tag >> 4) as u64;
        if slot == SLOT_ESCAPE as u64 {
            slot = self.r.varint()?;
        }
        let sensor = self.sensor(slot)?;
        let dt = self.r.ivarint()?;
        let t = self.last.wrapping_add(dt as u64);
        self.last = t;
        Ok(match kind {
            0 => Event::Enter { t, sensor },
            1 => Event::Exit { t, sensor },
            2 => Event::Mark { t, sensor },
            3 => Event::Counter {
                t,
                sensor,
                value: self.r.ivarint()?,
            },
            4 => {
                let b = self.r.u8()?;
                let op = CommOp::from_u8(b).ok_or(DecodeError::Invalid {
                    field: "comm op",
                    value: b as u64,
                })?;
                Event::Comm {
                    t,
                    sensor,
                    op,
                    fd: self.r.ivarint()?,
                    duration: self.r.varint()?,
                    result: self.r.ivarint()?,
                    peer: Endpoint::decode(&mut self.r)?,
                }
            }
            5 => Event::Socket {
                t,
                sensor,
                fd: self.r.ivarint()?,
                proto: SocketProto::from_u8(self.r.u8()?),
                local: Endpoint::decode(&mut self.r)?,
                peer: Endpoint::decode(&mut self.r)?,
            },
            6 => Event::Switch {
                t,
                cpu: self.r.varint_u32("cpu")?,
                prev_tid: self.r.varint_u32("prev_tid")?,
                prev_state: self.r.u8()?,
                next_tid: self.r.varint_u32("next_tid")?,
            },
            7 => Event::Wakeup {
                t,
                cpu: self.r.varint_u32("cpu")?,
                tid: self.r.varint_u32("tid")?,
            },
            8 => Event::Irq {
                t,
                cpu: self.r.varint_u32("cpu")?,
                irq: self.r.varint_u32("irq")?,
                duration: self.r.varint()?,
                handled: self.r.u8()?,
            },
            9 => Event::Task {
                t,
                tid: self.r.varint_u32("tid")?,
                pid: self.r.varint_u32("pid")?,
                comm: self.r.str("comm")?,
            },
            10 => Event::Calls {
                t,
                sensor,
                calls: self.r.varint()?,
                timed: self.r.varint()?,
                timed_ns: self.r.varint()?,
                recorded: self.r.varint()?,
                pinned: self.r.u8()?,
            },
            k => {
                return Err(DecodeError::Invalid {
                    field: "event kind",
                    value: k as u64,
                });
            }
        })
    }
}

impl Iterator for EventDecoder<'_> {
    type Item = Result<Event>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.left == 0 {
            return match self.r.finish() {
                Ok(()) => None,
                Err(e) => {
                    self.failed = true;
                    Some(Err(e))
                }
            };
        }
        self.left -= 1;
        let r = self.one();
        if r.is_err() {
            self.failed = true;
        }
        Some(r)
    }
}

/// Decodes all events of a batch into a vector (convenience for tests and tools).
pub fn decode_all(buf: &[u8]) -> Result<Vec<Event>> {
    EventDecoder::new(buf)?.collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache_index(sensor: SensorId) -> u64 {
        sensor.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - CACHE_BITS)
    }

    /// Sensors that share a slot of the encoder's direct-mapped cache still get their own
    /// table entries, within a batch and after `clear`.
    #[test]
    fn colliding_sensors_keep_their_own_slots() {
        let a = 1u64;
        let b = (2..).find(|&s| cache_index(s) == cache_index(a)).unwrap();
        let c = (b + 1..)
            .find(|&s| cache_index(s) == cache_index(a))
            .unwrap();
        let mut enc = EventEncoder::new();
        for round in 0..2 {
            enc.clear();
            let mut want = Vec::new();
            for (i, s) in [a, b, a, c, b, c, a].into_iter().enumerate() {
                let t = 1000 * round + i as u64;
                enc.enter(t, s);
                want.push(Event::Enter { t, sensor: s });
            }
            let mut buf = Vec::new();
            enc.write_to(&mut buf);
            assert_eq!(decode_all(&buf).unwrap(), want, "round {round}");
        }
    }
}
