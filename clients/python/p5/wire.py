"""The p5 wire format (docs/wire.md): frame envelope, handshake and data frames.

Encoders only produce what a runtime sends; the two frames a runtime receives (HelloAck,
Ack) have decoders. Byte-exact against wire/test_vectors/vectors.json.
"""

import ipaddress
import struct

MAGIC = b"P5WIRE"
VERSION = 1
SLOT_ESCAPE = 15

HELLO, HELLO_ACK, ACK, ERROR = 0x01, 0x02, 0x03, 0x04
STREAM_OPEN, EVENTS, STREAM_CLOSE = 0x10, 0x11, 0x12
SENSORS = 0x15
PING, GOODBYE = 0x20, 0x21
# The stream Sensors frames travel on (their own sequence from 1), apart from the threads'.
SENSORS_STREAM = 0xFFFFFFFE
# Capability flags this client asks for: events, communication events, pings that echo the
# last ack (two-way clock samples), Sensors frames.
CAP_EVENTS, CAP_COMM, CAP_PING_ECHO, CAP_SENSORS = 1 << 0, 1 << 1, 1 << 2, 1 << 8

KIND = {"enter": 0, "exit": 1, "mark": 2, "counter": 3, "comm": 4, "socket": 5}
OPS = {
    "send": 1, "recv": 2, "sendto": 3, "recvfrom": 4, "sendmsg": 5, "recvmsg": 6,
    "read": 7, "write": 8, "connect": 9, "accept": 10, "close": 11, "shutdown": 12,
}
RUNTIME_PYTHON = 3
CLOCK_MONOTONIC = 2


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def varint(v):
    out = bytearray()
    v &= (1 << 64) - 1
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def ivarint(v):
    v = ((v << 1) ^ (v >> 63)) & ((1 << 64) - 1)
    return varint(v)


def string(s):
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return varint(len(b)) + b


def frame(ty, body):
    payload = bytes([ty]) + body
    return struct.pack("<II", len(payload), crc32c(payload)) + payload


def hello(process_uid, pid, ppid, start_wall_ns, start_mono_ns, host_id, boot_id,
          hostname, program, session, argv, caps=0x3, clock=CLOCK_MONOTONIC,
          runtime=RUNTIME_PYTHON, version=VERSION):
    body = MAGIC + struct.pack("<HQ", version, caps)
    body += struct.pack("<QIIqQBB", process_uid, pid, ppid, start_wall_ns, start_mono_ns,
                        clock, runtime)
    for s in (host_id, boot_id, hostname, program, session):
        body += string(s)
    body += varint(len(argv)) + b"".join(string(a) for a in argv)
    return frame(HELLO, body)


def data_header(stream, seq, t_p):
    return struct.pack("<IQQ", stream, seq, t_p)


def stream_open(stream, seq, t_p, kind, tid, name):
    return frame(STREAM_OPEN, data_header(stream, seq, t_p) + struct.pack("<BQ", kind, tid)
                 + string(name))


def stream_close(stream, seq, t_p, t_end, dropped):
    return frame(STREAM_CLOSE, data_header(stream, seq, t_p) + struct.pack("<QQ", t_end, dropped))


def sensors(stream, seq, t_p, table):
    """A Sensors frame: one instrumented file's sensor table, as text (docs/manifest.md)."""
    return frame(SENSORS, data_header(stream, seq, t_p) + table.encode("utf-8"))


def ping(t_p, echo_t_s, echo_t_p):
    return frame(PING, struct.pack("<QQQ", t_p, echo_t_s, echo_t_p))


def goodbye(t_p):
    return frame(GOODBYE, struct.pack("<Q", t_p))


def endpoint(text):
    """Encodes an endpoint given as "-", "a.b.c.d:port", "[v6]:port" or "unix:/path"."""
    if text in (None, "-", ""):
        return b"\x00"
    if text.startswith("unix:"):
        path = text[5:].encode()[:108]
        return b"\x01" + varint(len(path)) + path
    host, _, port = text.rpartition(":")
    host = host.strip("[]")
    addr = ipaddress.ip_address(host)
    fam = b"\x04" if addr.version == 4 else b"\x06"
    return fam + addr.packed + struct.pack(">H", int(port))


class Events:
    """One Events batch: a sensor table plus delta-coded events."""

    def __init__(self):
        self.sensors = []
        self.slots = {}
        self.body = bytearray()
        self.base = 0
        self.last = 0
        self.count = 0

    def _head(self, kind, t, sensor):
        slot = self.slots.get(sensor)
        if slot is None:
            slot = self.slots[sensor] = len(self.sensors)
            self.sensors.append(sensor)
        if self.count == 0:
            self.base = self.last = t
        if slot < SLOT_ESCAPE:
            self.body.append(kind | (slot << 4))
        else:
            self.body.append(kind | (SLOT_ESCAPE << 4))
            self.body += varint(slot)
        d = (t - self.last) & ((1 << 64) - 1)
        if d >= 1 << 63:
            d -= 1 << 64
        self.body += ivarint(d)
        self.last = t
        self.count += 1

    def add(self, kind, t, sensor, value=None):
        """kind: 0 enter, 1 exit, 2 mark, 3 counter (with value)."""
        self._head(kind, t, sensor)
        if kind == 3:
            self.body += ivarint(value)

    def comm(self, t, sensor, op, fd, duration, result, peer="-"):
        tail = bytes([op]) + ivarint(fd) + varint(duration) + ivarint(result) + endpoint(peer)
        self._head(4, t, sensor)
        self.body += tail

    def socket(self, t, sensor, fd, proto, local="-", peer="-"):
        tail = ivarint(fd) + bytes([proto]) + endpoint(local) + endpoint(peer)
        self._head(5, t, sensor)
        self.body += tail

    def encode(self, stream, seq, t_p, dropped):
        head = data_header(stream, seq, t_p) + struct.pack("<QQI", dropped, self.base, self.count)
        table = varint(len(self.sensors)) + b"".join(struct.pack("<Q", s) for s in self.sensors)
        return frame(EVENTS, head + table + bytes(self.body))


def decode_frame(buf):
    """(type, body, total length) of the frame at the start of buf, or None if incomplete."""
    if len(buf) < 8:
        return None
    n, crc = struct.unpack_from("<II", buf)
    if n < 1 or n > 8 << 20:
        raise ValueError("bad frame length")
    if len(buf) < 8 + n:
        return None
    payload = bytes(buf[8:8 + n])
    if crc32c(payload) != crc:
        raise ValueError("bad frame checksum")
    return payload[0], payload[1:], 8 + n


def hello_ack(body):
    if body[:6] != MAGIC or len(body) < 32:
        raise ValueError("bad HelloAck")
    version, caps, run_id, t_s = struct.unpack_from("<HQQQ", body, 6)
    return {"version": version, "caps": caps, "server_run_id": run_id, "t_s": t_s}


def ack(body):
    count, t_s = struct.unpack_from("<QQ", body)
    return {"count": count, "t_s": t_s}
