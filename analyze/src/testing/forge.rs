//! Capture files written by hand for the tests and the bench: pcap and pcapng writers, link
//! headers around IP packets built with etherparse's `PacketBuilder`, and a TCP conversation
//! that keeps its own sequence numbers.

use etherparse::PacketBuilder;
use std::net::{IpAddr, SocketAddr};

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const ACK: u8 = 0x10;

/// A capture being written.
#[derive(Debug, Clone)]
pub struct Writer {
    pub buf: Vec<u8>,
    ng: bool,
    nanos: bool,
    /// pcapng: timestamp units per second and offset in seconds.
    resol: u128,
    offset_s: i64,
}

impl Writer {
    /// A pcap file of `linktype`, µs or ns timestamps.
    pub fn pcap(linktype: u32, nanos: bool) -> Self {
        let mut buf = Vec::new();
        let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
        buf.extend(magic.to_le_bytes());
        buf.extend(2u16.to_le_bytes());
        buf.extend(4u16.to_le_bytes());
        buf.extend(0i32.to_le_bytes());
        buf.extend(0u32.to_le_bytes());
        buf.extend(262_144u32.to_le_bytes());
        buf.extend(linktype.to_le_bytes());
        Writer {
            buf,
            ng: false,
            nanos,
            resol: 0,
            offset_s: 0,
        }
    }

    /// A pcapng file with one interface of `linktype`; `tsresol` is the raw `if_tsresol`
    /// option byte (absent: µs) and `tsoffset` the `if_tsoffset` option (seconds).
    pub fn pcapng(linktype: u16, tsresol: Option<u8>, tsoffset: Option<i64>) -> Self {
        let mut w = Writer {
            buf: Vec::new(),
            ng: true,
            nanos: false,
            resol: 1_000_000,
            offset_s: tsoffset.unwrap_or(0),
        };
        // Section header block.
        let mut shb = Vec::new();
        shb.extend(0x1a2b_3c4du32.to_le_bytes());
        shb.extend(1u16.to_le_bytes());
        shb.extend(0u16.to_le_bytes());
        shb.extend((-1i64).to_le_bytes());
        w.block(0x0a0d_0d0a, &shb);
        // Interface description block.
        let mut idb = Vec::new();
        idb.extend(linktype.to_le_bytes());
        idb.extend(0u16.to_le_bytes());
        idb.extend(262_144u32.to_le_bytes());
        if let Some(r) = tsresol {
            option(&mut idb, 9, &[r]);
            w.resol = if r & 0x80 == 0 {
                10u128.pow(u32::from(r))
            } else {
                1u128 << (r & 0x7f)
            };
        }
        if let Some(o) = tsoffset {
            option(&mut idb, 14, &o.to_le_bytes());
        }
        if tsresol.is_some() || tsoffset.is_some() {
            option(&mut idb, 0, &[]);
        }
        w.block(1, &idb);
        w
    }

    /// pcapng: adds an interface of `linktype` with microsecond timestamps (the writer keeps
    /// the first interface's resolution for every packet, so only use it with the default).
    pub fn interface(&mut self, linktype: u16) {
        let mut idb = Vec::new();
        idb.extend(linktype.to_le_bytes());
        idb.extend(0u16.to_le_bytes());
        idb.extend(262_144u32.to_le_bytes());
        self.block(1, &idb);
    }

    /// pcapng: a packet on interface `if_id` (µs timestamps).
    pub fn packet_on(&mut self, if_id: u32, ts_ns: i64, frame: &[u8]) {
        let units = (ts_ns / 1000) as u64;
        let mut epb = Vec::new();
        epb.extend(if_id.to_le_bytes());
        epb.extend(((units >> 32) as u32).to_le_bytes());
        epb.extend((units as u32).to_le_bytes());
        epb.extend((frame.len() as u32).to_le_bytes());
        epb.extend((frame.len() as u32).to_le_bytes());
        epb.extend(frame);
        epb.extend(std::iter::repeat_n(0u8, (4 - frame.len() % 4) % 4));
        self.block(6, &epb);
    }

    /// pcapng: a simple packet block (no timestamp).
    pub fn simple_packet(&mut self, frame: &[u8]) {
        let mut spb = Vec::new();
        spb.extend((frame.len() as u32).to_le_bytes());
        spb.extend(frame);
        spb.extend(std::iter::repeat_n(0u8, (4 - frame.len() % 4) % 4));
        self.block(3, &spb);
    }

    fn block(&mut self, ty: u32, body: &[u8]) {
        let pad = (4 - body.len() % 4) % 4;
        let len = (12 + body.len() + pad) as u32;
        self.buf.extend(ty.to_le_bytes());
        self.buf.extend(len.to_le_bytes());
        self.buf.extend(body);
        self.buf.extend(std::iter::repeat_n(0u8, pad));
        self.buf.extend(len.to_le_bytes());
    }

    /// Appends `frame` captured at `ts_ns` (nanoseconds since the epoch, before any offset).
    pub fn packet(&mut self, ts_ns: i64, frame: &[u8]) {
        self.packet_cut(ts_ns, frame, frame.len());
    }

    /// Appends `frame` with only its first `caplen` bytes captured.
    pub fn packet_cut(&mut self, ts_ns: i64, frame: &[u8], caplen: usize) {
        let data = &frame[..caplen.min(frame.len())];
        if self.ng {
            let units = (i128::from(ts_ns) - i128::from(self.offset_s) * 1_000_000_000) as u128
                * self.resol
                / 1_000_000_000;
            let units = units as u64;
            let mut epb = Vec::new();
            epb.extend(0u32.to_le_bytes());
            epb.extend(((units >> 32) as u32).to_le_bytes());
            epb.extend((units as u32).to_le_bytes());
            epb.extend((data.len() as u32).to_le_bytes());
            epb.extend((frame.len() as u32).to_le_bytes());
            epb.extend(data);
            epb.extend(std::iter::repeat_n(0u8, (4 - data.len() % 4) % 4));
            self.block(6, &epb);
        } else {
            let sec = ts_ns.div_euclid(1_000_000_000) as u32;
            let ns = ts_ns.rem_euclid(1_000_000_000) as u32;
            let frac = if self.nanos { ns } else { ns / 1000 };
            self.buf.extend(sec.to_le_bytes());
            self.buf.extend(frac.to_le_bytes());
            self.buf.extend((data.len() as u32).to_le_bytes());
            self.buf.extend((frame.len() as u32).to_le_bytes());
            self.buf.extend(data);
        }
    }
}

fn option(buf: &mut Vec<u8>, code: u16, value: &[u8]) {
    buf.extend(code.to_le_bytes());
    buf.extend((value.len() as u16).to_le_bytes());
    buf.extend(value);
    buf.extend(std::iter::repeat_n(0u8, (4 - value.len() % 4) % 4));
}

/// An IP packet carrying a TCP segment.
pub fn tcp_ip(
    src: SocketAddr,
    dst: SocketAddr,
    seq: u32,
    ack: u32,
    flags: u8,
    payload: &[u8],
) -> Vec<u8> {
    let b = match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => PacketBuilder::ipv4(s.octets(), d.octets(), 64),
        (IpAddr::V6(s), IpAddr::V6(d)) => PacketBuilder::ipv6(s.octets(), d.octets(), 64),
        _ => panic!("mixed address families"),
    };
    let mut b = b.tcp(src.port(), dst.port(), seq, 65535);
    if flags & SYN != 0 {
        b = b.syn();
    }
    if flags & FIN != 0 {
        b = b.fin();
    }
    if flags & RST != 0 {
        b = b.rst();
    }
    if flags & ACK != 0 {
        b = b.ack(ack);
    }
    let mut v = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut v, payload).unwrap();
    v
}

/// An IP packet carrying a UDP datagram.
pub fn udp_ip(src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> Vec<u8> {
    let b = match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => PacketBuilder::ipv4(s.octets(), d.octets(), 64),
        (IpAddr::V6(s), IpAddr::V6(d)) => PacketBuilder::ipv6(s.octets(), d.octets(), 64),
        _ => panic!("mixed address families"),
    };
    let b = b.udp(src.port(), dst.port());
    let mut v = Vec::new();
    b.write(&mut v, payload).unwrap();
    v
}

fn ethertype(ip: &[u8]) -> u16 {
    if ip[0] >> 4 == 6 { 0x86dd } else { 0x0800 }
}

/// The frame of link type `linktype` around the IP packet `ip`. Link type 1 with
/// `vlan` adds an 802.1Q tag.
pub fn frame(linktype: u32, ip: &[u8], vlan: bool) -> Vec<u8> {
    let v6 = ip[0] >> 4 == 6;
    let mut f = Vec::with_capacity(ip.len() + 20);
    match linktype {
        1 => {
            f.extend([2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2]);
            if vlan {
                f.extend([0x81, 0x00, 0x00, 0x07]);
            }
            f.extend(ethertype(ip).to_be_bytes());
        }
        113 => {
            f.extend([0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0]);
            f.extend(ethertype(ip).to_be_bytes());
        }
        276 => {
            f.extend(ethertype(ip).to_be_bytes());
            f.extend([0, 0, 0, 0, 0, 1, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0]);
        }
        0 => f.extend((if v6 { 10u32 } else { 2 }).to_le_bytes()),
        108 => f.extend((if v6 { 24u32 } else { 2 }).to_be_bytes()),
        _ => {}
    }
    f.extend(ip);
    f
}

/// A TCP conversation between a client and a server, with its own sequence numbers and clock.
#[derive(Debug, Clone)]
pub struct Conv {
    pub ends: [SocketAddr; 2],
    pub seq: [u32; 2],
    /// Time of the next packet (ns); each packet advances it by `step`.
    pub t: i64,
    pub step: i64,
    /// Packets: (time, IP packet).
    pub pkts: Vec<(i64, Vec<u8>)>,
}

impl Conv {
    pub fn new(client: &str, server: &str, isn: [u32; 2], t: i64) -> Self {
        Conv {
            ends: [client.parse().unwrap(), server.parse().unwrap()],
            seq: isn,
            t,
            step: 10_000,
            pkts: Vec::new(),
        }
    }

    /// A segment from side `dir` with `seq` as given.
    pub fn raw(&mut self, dir: usize, seq: u32, flags: u8, payload: &[u8]) {
        let ack = self.seq[1 - dir];
        let p = tcp_ip(self.ends[dir], self.ends[1 - dir], seq, ack, flags, payload);
        self.pkts.push((self.t, p));
        self.t += self.step;
    }

    pub fn handshake(&mut self) {
        self.raw(0, self.seq[0], SYN, &[]);
        self.seq[0] = self.seq[0].wrapping_add(1);
        self.raw(1, self.seq[1], SYN | ACK, &[]);
        self.seq[1] = self.seq[1].wrapping_add(1);
        self.raw(0, self.seq[0], ACK, &[]);
    }

    /// `n` bytes from side `dir` in segments of at most `mss`; returns the first sequence
    /// number.
    pub fn send(&mut self, dir: usize, n: usize, mss: usize) -> u32 {
        let first = self.seq[dir];
        let mut left = n;
        while left > 0 {
            let k = left.min(mss);
            let body = vec![b'x'; k];
            self.raw(dir, self.seq[dir], ACK, &body);
            self.seq[dir] = self.seq[dir].wrapping_add(k as u32);
            left -= k;
        }
        first
    }

    /// A pure ACK from side `dir`.
    pub fn ack(&mut self, dir: usize) {
        self.raw(dir, self.seq[dir], ACK, &[]);
    }

    /// FIN from the client, FIN from the server, last ACK.
    pub fn close(&mut self) {
        self.raw(0, self.seq[0], FIN | ACK, &[]);
        self.seq[0] = self.seq[0].wrapping_add(1);
        self.raw(1, self.seq[1], FIN | ACK, &[]);
        self.seq[1] = self.seq[1].wrapping_add(1);
        self.raw(0, self.seq[0], ACK, &[]);
    }

    /// `k` request/response exchanges of `req` and `resp` bytes, each answered by an ACK.
    pub fn rpcs(&mut self, k: usize, req: usize, resp: usize) {
        for _ in 0..k {
            self.send(0, req, 1448);
            self.send(1, resp, 1448);
            self.ack(0);
        }
    }

    /// The whole conversation as a capture of `linktype`.
    pub fn pcap(&self, linktype: u32, nanos: bool) -> Vec<u8> {
        let mut w = Writer::pcap(linktype, nanos);
        for (t, p) in &self.pkts {
            w.packet(*t, &frame(linktype, p, false));
        }
        w.buf
    }
}
