package p5;

import java.io.ByteArrayOutputStream;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32C;

/** The p5 wire format (docs/wire.md): what a runtime sends, byte-exact against the shared vectors. */
public final class Wire {
    private Wire() {}

    public static final int HELLO = 0x01, HELLO_ACK = 0x02, ACK = 0x03;
    public static final int STREAM_OPEN = 0x10, EVENTS = 0x11, STREAM_CLOSE = 0x12;
    public static final int SENSORS = 0x15;
    public static final int PING = 0x20, GOODBYE = 0x21;
    /** The stream Sensors frames travel on (u32 0xFFFFFFFE), apart from the threads'. */
    public static final int SENSORS_STREAM = 0xFFFFFFFE;
    /**
     * Capability flags this client asks for: events, communication events, pings that echo the
     * last ack (two-way clock samples), Sensors frames.
     */
    public static final long CAP_EVENTS = 1L, CAP_COMM = 1L << 1, CAP_PING_ECHO = 1L << 2, CAP_SENSORS = 1L << 8;
    public static final int RUNTIME_JAVA = 4, CLOCK_MONOTONIC = 2;
    static final int SLOT_ESCAPE = 15;

    /** A little-endian byte buffer with the format's integer encodings. */
    public static final class Buf {
        final ByteArrayOutputStream out = new ByteArrayOutputStream();

        public Buf u8(int v) { out.write(v & 0xff); return this; }
        public Buf u16(int v) { u8(v); u8(v >>> 8); return this; }
        public Buf u32(long v) { for (int i = 0; i < 4; i++) u8((int) (v >>> (8 * i))); return this; }
        public Buf u64(long v) { for (int i = 0; i < 8; i++) u8((int) (v >>> (8 * i))); return this; }
        public Buf bytes(byte[] b) { out.write(b, 0, b.length); return this; }

        public Buf varint(long v) {
            while (Long.compareUnsigned(v, 0x80) >= 0) {
                u8((int) ((v & 0x7f) | 0x80));
                v >>>= 7;
            }
            return u8((int) v);
        }

        public Buf ivarint(long v) { return varint((v << 1) ^ (v >> 63)); }

        public Buf str(String s) {
            byte[] b = s.getBytes(StandardCharsets.UTF_8);
            varint(b.length);
            return bytes(b);
        }

        public byte[] toBytes() { return out.toByteArray(); }
        public int size() { return out.size(); }
    }

    /** Wraps a body in the envelope: u32 len | u32 crc32c | u8 type | body. */
    public static byte[] frame(int type, byte[] body) {
        byte[] payload = new byte[body.length + 1];
        payload[0] = (byte) type;
        System.arraycopy(body, 0, payload, 1, body.length);
        CRC32C crc = new CRC32C();
        crc.update(payload, 0, payload.length);
        return new Buf().u32(payload.length).u32(crc.getValue()).bytes(payload).toBytes();
    }

    public static byte[] hello(int version, long caps, long processUid, long pid, long ppid,
            long startWallNs, long startMonoNs, int clock, int runtime, String hostId,
            String bootId, String hostname, String program, String session, List<String> argv) {
        Buf b = new Buf().bytes("P5WIRE".getBytes(StandardCharsets.US_ASCII)).u16(version).u64(caps);
        b.u64(processUid).u32(pid).u32(ppid).u64(startWallNs).u64(startMonoNs).u8(clock).u8(runtime);
        b.str(hostId).str(bootId).str(hostname).str(program).str(session).varint(argv.size());
        for (String a : argv) b.str(a);
        return frame(HELLO, b.toBytes());
    }

    static Buf header(int stream, long seq, long tP) {
        return new Buf().u32(stream).u64(seq).u64(tP);
    }

    public static byte[] streamOpen(int stream, long seq, long tP, int kind, long tid, String name) {
        return frame(STREAM_OPEN, header(stream, seq, tP).u8(kind).u64(tid).str(name).toBytes());
    }

    public static byte[] streamClose(int stream, long seq, long tP, long tEnd, long dropped) {
        return frame(STREAM_CLOSE, header(stream, seq, tP).u64(tEnd).u64(dropped).toBytes());
    }

    /** A Sensors frame: one instrumented file's sensor table, as text (docs/manifest.md). */
    public static byte[] sensors(int stream, long seq, long tP, String table) {
        return frame(SENSORS, header(stream, seq, tP).bytes(table.getBytes(StandardCharsets.UTF_8)).toBytes());
    }

    public static byte[] ping(long tP, long echoTs, long echoTp) {
        return frame(PING, new Buf().u64(tP).u64(echoTs).u64(echoTp).toBytes());
    }

    public static byte[] goodbye(long tP) {
        return frame(GOODBYE, new Buf().u64(tP).toBytes());
    }

    /** Encodes "-", "a.b.c.d:port", "[v6]:port" or "unix:/path". */
    public static byte[] endpoint(String text) {
        Buf b = new Buf();
        if (text == null || text.isEmpty() || text.equals("-")) return b.u8(0).toBytes();
        if (text.startsWith("unix:")) {
            byte[] p = text.substring(5).getBytes(StandardCharsets.UTF_8);
            return b.u8(1).varint(p.length).bytes(p).toBytes();
        }
        int colon = text.lastIndexOf(':');
        String host = text.substring(0, colon).replace("[", "").replace("]", "");
        int port = Integer.parseInt(text.substring(colon + 1));
        try {
            byte[] addr = InetAddress.getByName(host).getAddress();
            b.u8(addr.length == 4 ? 4 : 6).bytes(addr);
        } catch (java.net.UnknownHostException e) {
            return new Buf().u8(0).toBytes();
        }
        return b.u8(port >>> 8).u8(port).toBytes();
    }

    /** One Events batch: a sensor table plus delta-coded events. */
    public static final class Events {
        final Map<Long, Integer> slots = new HashMap<>();
        final Buf table = new Buf();
        final Buf body = new Buf();
        long base, last;
        int count;

        void head(int kind, long t, long sensor) {
            Integer slot = slots.get(sensor);
            if (slot == null) {
                slot = slots.size();
                slots.put(sensor, slot);
                table.u64(sensor);
            }
            if (count == 0) { base = t; last = t; }
            if (slot < SLOT_ESCAPE) {
                body.u8(kind | (slot << 4));
            } else {
                body.u8(kind | (SLOT_ESCAPE << 4));
                body.varint(slot);
            }
            body.ivarint(t - last);
            last = t;
            count++;
        }

        /** kind: 0 enter, 1 exit, 2 mark, 3 counter (with value). */
        public void add(int kind, long t, long sensor, long value) {
            head(kind, t, sensor);
            if (kind == 3) body.ivarint(value);
        }

        public void comm(long t, long sensor, int op, long fd, long duration, long result, String peer) {
            head(4, t, sensor);
            body.u8(op).ivarint(fd).varint(duration).ivarint(result).bytes(endpoint(peer));
        }

        public void socket(long t, long sensor, long fd, int proto, String local, String peer) {
            head(5, t, sensor);
            body.ivarint(fd).u8(proto).bytes(endpoint(local)).bytes(endpoint(peer));
        }

        public int count() { return count; }

        public byte[] encode(int stream, long seq, long tP, long dropped) {
            Buf b = header(stream, seq, tP).u64(dropped).u64(base).u32(count).varint(slots.size());
            b.bytes(table.toBytes()).bytes(body.toBytes());
            return frame(EVENTS, b.toBytes());
        }
    }
}
