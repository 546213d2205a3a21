package p5;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketAddress;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.WeakHashMap;

/**
 * The p5 runtime for Java: sensors for code instrumented by p5-instrument.
 *
 * <p>Recording never blocks the program: a sensor appends four longs to its thread's buffer
 * (an uncontended lock); one daemon thread drains the buffers every 20 ms, encodes p5 wire
 * frames ({@link Wire}) and ships them to the log server ({@code P5_LOGSERVER}, default
 * 127.0.0.1:28725), or appends them to {@code $P5_DIR/<session>-<pid>-<uid>.p5spool} in
 * local-file mode ({@code P5_DIR} without {@code P5_LOGSERVER}) or while the server cannot be
 * reached. Times are nanoseconds since this class was loaded. A shutdown hook flushes.
 *
 * <p>Connected, the same thread pings the log server in bursts, each ping after the answer to
 * the one before (16 every 100 ms in the connection's first 10 s, then 8 every 500 ms; an
 * answer 50 ms late or 20 ms of pinging ends a burst), and echoes each answer's server time
 * with the time it was read (Java has no kernel receive stamps): two-way clock samples.
 */
public final class P5 {
    private P5() {}

    static final long START = System.nanoTime();
    static final long START_WALL = System.currentTimeMillis() * 1_000_000L;
    static volatile boolean on = !"1".equals(System.getenv("P5_DISABLE"));
    static final List<Stream> STREAMS = new ArrayList<>();
    private static final ThreadLocal<Stream> LOCAL = ThreadLocal.withInitial(P5::newStream);
    static final long UID = new SecureRandom().nextLong();
    private static Thread shipper;
    private static final Object FLUSHED = new Object();
    private static final Object EMIT = new Object();
    private static long generation;
    private static volatile boolean stopping;
    private static OutputStream spool;
    private static Socket sock;
    private static byte[] hello;
    /** Capability flags the log server accepted (0 until connected). */
    private static volatile long caps;
    /** Longest frame the log server sends a client (acks, errors); longer ends the connection. */
    private static final long MAX_FROM_SERVER = 1 << 16;
    /** Bytes read past the last whole frame from the log server. */
    private static byte[] pending = new byte[0];
    /** The last ack's server time and when it was read (our clock), echoed by the next ping. */
    private static long echoTs, echoTp;
    /** When the next ping burst is due and when the connection was made (System.nanoTime). */
    private static long nextPing, connectedAt;
    /** Sensor tables registered by the instrumented classes, in order, each once. */
    private static final List<String> TABLES = new ArrayList<>();
    private static final java.util.Set<String> TABLE_SET = new java.util.HashSet<>();
    private static int tablesSent;
    private static long tablesSeq = 1;

    static {
        // Every java.net socket recorded, whoever uses it (Sockets); after the fields above.
        if (on) Sockets.install();
    }

    /** The sensors' clock: nanoseconds since this class was loaded. */
    public static long now() { return System.nanoTime() - START; }

    /** Whether this is the runtime's own thread (its log-server connection is not recorded). */
    static boolean onShipper() { return Thread.currentThread() == shipper; }

    /** One thread's events. */
    static final class Stream {
        final int id;
        final long tid;
        final String name;
        long seq;
        boolean opened, closed;
        long[] buf = new long[4 * 256];
        int n;
        /** Details of comm (kind 4) and socket (kind 5) events; the value slot indexes this. */
        List<Object[]> extra = new ArrayList<>();

        Stream(int id, Thread t) {
            this.id = id;
            this.tid = t.getId();
            this.name = t.getName();
        }

        synchronized void add(int kind, long sensor, long value) {
            if (n + 4 > buf.length) buf = Arrays.copyOf(buf, buf.length * 2);
            buf[n++] = kind;
            buf[n++] = now();
            buf[n++] = sensor;
            buf[n++] = value;
        }

        synchronized void addExtra(int kind, long t, long sensor, Object[] details) {
            if (n + 4 > buf.length) buf = Arrays.copyOf(buf, buf.length * 2);
            buf[n++] = kind;
            buf[n++] = t;
            buf[n++] = sensor;
            buf[n++] = extra.size();
            extra.add(details);
        }

        /**
         * Gives the comm and socket events this thread recorded under {@code from} since
         * {@code since} the sensor {@code to} instead (those not shipped yet); returns how
         * many.
         */
        synchronized int relabel(long since, long from, long to) {
            int changed = 0;
            for (int i = n - 4; i >= 0 && buf[i + 1] >= since; i -= 4) {
                if ((buf[i] == 4 || buf[i] == 5) && buf[i + 2] == from) {
                    buf[i + 2] = to;
                    changed++;
                }
            }
            return changed;
        }

        /** Takes the buffered events; their details go to `details`. */
        synchronized long[] take(List<Object[]> details) {
            long[] out = Arrays.copyOf(buf, n);
            n = 0;
            details.addAll(extra);
            extra = new ArrayList<>();
            return out;
        }
    }

    private static Stream newStream() {
        Stream s;
        synchronized (STREAMS) {
            s = new Stream(STREAMS.size() + 1, Thread.currentThread());
            STREAMS.add(s);
        }
        start();
        return s;
    }

    /** Records entering the scope of a sensor. */
    public static void enter(long sensor) { if (on) LOCAL.get().add(0, sensor, 0); }

    /** Records leaving the scope of a sensor. */
    public static void exit(long sensor) { if (on) LOCAL.get().add(1, sensor, 0); }

    /** Records an instant. */
    public static void mark(long sensor) { if (on) LOCAL.get().add(2, sensor, 0); }

    /** Records a counter value. */
    public static void counter(long sensor, long value) { if (on) LOCAL.get().add(3, sensor, value); }

    /** A function that may throw a checked exception of type E (inferred at the call site). */
    @FunctionalInterface
    public interface Getter<T, R, E extends Exception> {
        R get(T owner) throws E;
    }

    /**
     * {@code p5.P5.input(id, s, _p5 -> _p5.getInputStream())}: the stream {@code get} returns,
     * recording every read as a communication event when {@code owner} is a {@link Socket}
     * (any other owner gets its stream untouched).
     */
    @SuppressWarnings("unchecked")
    public static <T, R, E extends Exception> R input(long sensor, T owner, Getter<T, R, E> get) throws E {
        R r = get.get(owner);
        if (on && owner instanceof Socket && r instanceof InputStream) {
            return (R) new Recorded.In((InputStream) r, sensor, (Socket) owner);
        }
        return r;
    }

    /** Like {@link #input} for {@code getOutputStream()}: every write is recorded. */
    @SuppressWarnings("unchecked")
    public static <T, R, E extends Exception> R output(long sensor, T owner, Getter<T, R, E> get) throws E {
        R r = get.get(owner);
        if (on && owner instanceof Socket && r instanceof OutputStream) {
            return (R) new Recorded.Out((OutputStream) r, sensor, (Socket) owner);
        }
        return r;
    }

    /**
     * {@code p5.P5.accept(id, l, _p5 -> _p5.accept())}: what {@code accept()} returns; when
     * {@code owner} is a {@link ServerSocket} or a {@link ServerSocketChannel}, the accept is
     * recorded (with the peer) and the new socket described. Its reads and writes are recorded
     * where its streams are taken ({@link #input}, {@link #output}) or its channel is used
     * ({@link #channel}).
     */
    public static <T, R, E extends Exception> R accept(long sensor, T owner, Getter<T, R, E> get) throws E {
        if (!on || !(owner instanceof ServerSocket || owner instanceof ServerSocketChannel)) return get.get(owner);
        long t = now();
        Sockets.Site site = Sockets.SITE.get();
        long outer = site.sensor;
        boolean outerTaken = site.taken;
        site.sensor = sensor;
        site.taken = false;
        R r;
        boolean taken;
        try {
            r = get.get(owner);
        } finally {
            taken = site.taken;
            site.sensor = outer;
            site.taken = outerTaken;
        }
        if (taken) return r; // recorded by the socket layer, under this site's sensor
        Socket s = r instanceof Socket ? (Socket) r : r instanceof SocketChannel ? ((SocketChannel) r).socket() : null;
        if (s != null) {
            Object listener = owner instanceof ServerSocket ? owner : ((ServerSocketChannel) owner).socket();
            comm(sensor, Recorded.ACCEPT, System.identityHashCode(listener), t, fd(s),
                    endpoint(s.getInetAddress(), s.getPort()));
            noteOnce(sensor, s);
        }
        return r;
    }

    /**
     * {@code p5.P5.connected(id, p5.P5.now(), new Socket(host, port))}: the new socket; when it
     * is a connected {@link Socket}, its connect (begun at {@code start}) is recorded and the
     * socket described.
     */
    public static <T> T connected(long sensor, long start, T socket) {
        // A connect the socket layer recorded since `start` (Sockets) is not recorded again:
        // it is this site's (the constructor ran before this call).
        if (on && socket instanceof Socket && Sockets.SITE.get().connected >= start) {
            LOCAL.get().relabel(start, Sockets.CONNECT, sensor);
            return socket;
        }
        if (on && socket instanceof Socket && ((Socket) socket).isConnected()) {
            Socket s = (Socket) socket;
            comm(sensor, Recorded.CONNECT, fd(s), start, 0, endpoint(s.getInetAddress(), s.getPort()));
            noteOnce(sensor, s);
        }
        return socket;
    }

    /**
     * {@code p5.P5.channel(id, x).read(buf)} (also {@code write}, {@code connect}): {@code x}
     * itself, or — when it is one of the JDK's {@link SocketChannel}s — a stand-in for this
     * one call that records it and passes it on to {@code x}.
     */
    @SuppressWarnings("unchecked")
    public static <T> T channel(long sensor, T owner) {
        if (on && owner instanceof SocketChannel && owner.getClass().getModule() == SocketChannel.class.getModule()) {
            return (T) new Recorded.Channel((SocketChannel) owner, sensor);
        }
        return owner;
    }

    /**
     * {@code p5.P5.selector(id, x).select(timeout)} (also {@code select()}, {@code selectNow()}):
     * {@code x} itself, or — when it is one of the JDK's {@link Selector}s — a stand-in for this
     * one call that records it as a wait (the thread is waiting, not calculating) and passes it
     * on to {@code x}.
     */
    @SuppressWarnings("unchecked")
    public static <T> T selector(long sensor, T owner) {
        if (on && owner instanceof Selector && owner.getClass().getModule() == Selector.class.getModule()) {
            return (T) new Recorded.Waiter((Selector) owner, sensor);
        }
        return owner;
    }

    static String endpoint(java.net.InetAddress a, int port) {
        if (a == null || port <= 0) return "-";
        String h = a.getHostAddress();
        int pct = h.indexOf('%');
        if (pct >= 0) h = h.substring(0, pct);
        return (h.indexOf(':') >= 0 ? "[" + h + "]" : h) + ":" + port;
    }

    /** The descriptor stand-in for a socket (Java hides the fd). */
    static long fd(Socket s) { return System.identityHashCode(s); }

    static void noteSocket(long sensor, Socket s) {
        describeSocket(sensor, fd(s), endpoint(s.getLocalAddress(), s.getLocalPort()),
                endpoint(s.getInetAddress(), s.getPort()));
    }

    /** Queues a socket description (wire kind 5) of the descriptor stand-in {@code fd}. */
    static void describeSocket(long sensor, long fd, String local, String peer) {
        if (on) LOCAL.get().addExtra(5, now(), sensor, new Object[] {fd, local, peer});
    }

    static String endpoint(SocketAddress a) {
        if (!(a instanceof InetSocketAddress)) return "-";
        InetSocketAddress i = (InetSocketAddress) a;
        return i.getAddress() == null ? "-" : endpoint(i.getAddress(), i.getPort());
    }

    private static final Map<Socket, Boolean> NOTED = Collections.synchronizedMap(new WeakHashMap<>());

    /** Describes a socket the first time it is seen. */
    static void noteOnce(long sensor, Socket s) {
        if (on && NOTED.put(s, Boolean.TRUE) == null) noteSocket(sensor, s);
    }

    static void comm(long sensor, int op, Socket s, long start, long result) {
        comm(sensor, op, fd(s), start, result, "-");
    }

    static void comm(long sensor, int op, long fd, long start, long result, String peer) {
        if (on) LOCAL.get().addExtra(4, start, sensor, new Object[] {op, fd, now() - start, result, peer});
    }

    /**
     * Registers sensor tables (docs/manifest.md): p5-instrument puts the call in a static
     * initialiser of every top-level type it instrumented. A table may come in several pieces
     * (a class-file constant holds at most 64 KiB); an empty piece separates two tables. The
     * tables are sent once, with the next batch, so a recording names its sensors without a
     * manifest. Returns 0 (an interface keeps it in a constant).
     */
    public static int describe(String... pieces) {
        StringBuilder cur = new StringBuilder();
        List<String> tables = new ArrayList<>();
        for (String p : pieces) {
            if (p.isEmpty()) {
                if (cur.length() > 0) tables.add(cur.toString());
                cur.setLength(0);
            } else {
                cur.append(p);
            }
        }
        if (cur.length() > 0) tables.add(cur.toString());
        synchronized (TABLES) {
            for (String t : tables) if (TABLE_SET.add(t)) TABLES.add(t);
        }
        return 0;
    }

    /** Sensors frames for the tables registered since the last drain (none for a log server that did not accept them). */
    private static void tableFrames(List<byte[]> frames) {
        if (sock != null && (caps & Wire.CAP_SENSORS) == 0) return;
        List<String> fresh;
        synchronized (TABLES) {
            fresh = new ArrayList<>(TABLES.subList(tablesSent, TABLES.size()));
            tablesSent = TABLES.size();
        }
        for (String t : fresh) frames.add(Wire.sensors(Wire.SENSORS_STREAM, tablesSeq++, now(), t));
    }

    private static synchronized void start() {
        if (shipper != null) return;
        shipper = new Thread(P5::run, "p5-flusher");
        shipper.setDaemon(true);
        shipper.start();
        Runtime.getRuntime().addShutdownHook(new Thread(P5::shutdown, "p5-shutdown"));
    }

    private static String read(String path, String dflt) {
        try {
            return new String(Files.readAllBytes(Paths.get(path))).trim();
        } catch (IOException | RuntimeException e) {
            return dflt;
        }
    }

    private static byte[] helloFrame() {
        if (hello == null) {
            ProcessHandle me = ProcessHandle.current();
            String boot = read("/proc/sys/kernel/random/boot_id", "");
            String command = System.getProperty("sun.java.command", "java");
            List<String> argv = new ArrayList<>(Arrays.asList(command.split(" ")));
            String program = argv.isEmpty() ? "java" : argv.get(0);
            String session = System.getenv().getOrDefault("P5_SESSION", "");
            hello = Wire.hello(1, Wire.CAP_EVENTS | Wire.CAP_COMM | Wire.CAP_PING_ECHO | Wire.CAP_SENSORS, UID, me.pid(), me.parent().map(ProcessHandle::pid).orElse(0L),
                    START_WALL, START, Wire.CLOCK_MONOTONIC, Wire.RUNTIME_JAVA,
                    read("/etc/machine-id", boot), boot, read("/proc/sys/kernel/hostname", ""),
                    program, session, argv);
        }
        return hello;
    }

    private static void openSpool() throws IOException {
        if (spool != null) return;
        String dir = System.getenv("P5_DIR");
        if (dir == null || dir.isEmpty()) dir = System.getProperty("java.io.tmpdir");
        StringBuilder session = new StringBuilder();
        for (char c : System.getenv().getOrDefault("P5_SESSION", "").toCharArray()) {
            if (session.length() >= 64) break;
            session.append(Character.isLetterOrDigit(c) && c < 128 || c == '-' || c == '_' || c == '.' ? c : '_');
        }
        if (session.length() == 0 || session.charAt(0) == '.') session.insert(0, "default");
        Path d = Paths.get(dir);
        Files.createDirectories(d);
        String name = String.format("%s-%d-%016x.p5spool", session, ProcessHandle.current().pid(), UID);
        spool = new FileOutputStream(d.resolve(name).toFile(), true);
        spool.write(helloFrame());
    }

    /** When {@link #connect} last tried (System.nanoTime()). */
    private static long lastConnect;

    private static void connect() {
        lastConnect = System.nanoTime();
        String server = System.getenv("P5_LOGSERVER");
        if (server == null && System.getenv("P5_DIR") != null) return;
        if (server == null) server = "127.0.0.1:28725";
        int colon = server.lastIndexOf(':');
        try {
            Socket s = new Socket();
            s.connect(new InetSocketAddress(server.substring(0, colon).replace("[", "").replace("]", ""),
                    Integer.parseInt(server.substring(colon + 1))), 3000);
            // A busy server may take a while to acknowledge the Hello: the soft timeout
            // only bounds the wait, the shipper retries before it spools anything.
            s.setSoTimeout(5000);
            s.getOutputStream().write(helloFrame());
            InputStream in = s.getInputStream();
            byte[] head = in.readNBytes(9);
            if (head.length < 9 || (head[8] & 0xff) != Wire.HELLO_ACK) {
                s.close();
                return;
            }
            long len = (head[0] & 0xffL) | (head[1] & 0xffL) << 8 | (head[2] & 0xffL) << 16 | (head[3] & 0xffL) << 24;
            byte[] body = in.readNBytes((int) Math.min(len - 1, 1 << 16));
            long accepted = 0;
            for (int i = 0; i < 8 && 8 + i < body.length; i++) accepted |= (body[8 + i] & 0xffL) << (8 * i);
            caps = accepted;
            pending = new byte[0];
            echoTs = echoTp = 0;
            connectedAt = nextPing = System.nanoTime();
            sock = s;
        } catch (IOException | RuntimeException e) {
            sock = null;
        }
    }

    private static void emit(List<byte[]> frames) throws IOException {
        if (frames.isEmpty()) return;
        if (sock != null) {
            boolean sent = false;
            try {
                OutputStream o = sock.getOutputStream();
                for (byte[] f : frames) o.write(f);
                o.flush();
                sent = true;
                readAcks(0);
            } catch (IOException e) {
                try { sock.close(); } catch (IOException ignored) { }
                sock = null;
            }
            if (sent) return; // a connection that breaks while acks are read spools only what comes next
        }
        // Not connected yet and nothing spooled: try again (at most once a second) before
        // the first frame goes to a spool file.
        if (spool == null && System.nanoTime() - lastConnect > 1_000_000_000L) {
            connect();
            if (sock != null) {
                emit(frames);
                return;
            }
        }
        openSpool();
        for (byte[] f : frames) spool.write(f);
        spool.flush();
    }

    /**
     * Reads what the log server sent — waiting up to {@code waitMs} for the first bytes, or
     * only what is there when 0 — and takes each Ack's server time, with the time it was read,
     * as the echo of the next ping. Returns how many acks came.
     */
    private static int readAcks(int waitMs) throws IOException {
        InputStream in = sock.getInputStream();
        int acks = 0;
        byte[] chunk = new byte[4096];
        boolean first = waitMs > 0;
        while (first || in.available() > 0) {
            int n;
            try {
                sock.setSoTimeout(first ? waitMs : 1000);
                n = in.read(chunk);
            } catch (java.net.SocketTimeoutException e) {
                return acks;
            }
            long at = now();
            first = false;
            if (n < 0) throw new IOException("log server closed the connection");
            byte[] all = Arrays.copyOf(pending, pending.length + n);
            System.arraycopy(chunk, 0, all, pending.length, n);
            int off = 0;
            while (all.length - off >= 9) {
                long len = (all[off] & 0xffL) | (all[off + 1] & 0xffL) << 8 | (all[off + 2] & 0xffL) << 16
                        | (all[off + 3] & 0xffL) << 24;
                if (len < 1 || len > MAX_FROM_SERVER) throw new IOException("bad frame from the log server");
                if (all.length - off < 8 + len) break;
                if ((all[off + 8] & 0xff) == Wire.ACK && len >= 17) {
                    long ts = 0;
                    for (int i = 0; i < 8; i++) ts |= (all[off + 17 + i] & 0xffL) << (8 * i);
                    echoTs = ts;
                    echoTp = at;
                    acks++;
                }
                off += (int) (8 + len);
            }
            pending = Arrays.copyOfRange(all, off, all.length);
        }
        return acks;
    }

    /** Pings the log server if a burst is due, each ping after the answer to the one before. */
    private static void pingBurst() {
        long t = System.nanoTime();
        if (sock == null || (caps & Wire.CAP_PING_ECHO) == 0 || t < nextPing) return;
        boolean early = t - connectedAt < 10_000_000_000L;
        nextPing = t + (early ? 100_000_000L : 500_000_000L);
        try {
            OutputStream o = sock.getOutputStream();
            for (int i = 0; i < (early ? 16 : 8); i++) {
                o.write(Wire.ping(now(), echoTs, echoTp));
                o.flush();
                if (readAcks(50) == 0 || System.nanoTime() - t > 20_000_000L) return;
            }
        } catch (IOException e) {
            try { sock.close(); } catch (IOException ignored) { }
            sock = null;
        }
    }

    private static List<byte[]> drain(boolean closing) {
        List<byte[]> frames = new ArrayList<>();
        tableFrames(frames);
        List<Stream> streams;
        synchronized (STREAMS) {
            streams = new ArrayList<>(STREAMS);
        }
        for (Stream s : streams) {
            if (s.closed) continue;
            if (!s.opened) {
                frames.add(Wire.streamOpen(s.id, 0, now(), 1, s.tid, s.name));
                s.seq = 1;
                s.opened = true;
            }
            List<Object[]> details = new ArrayList<>();
            long[] ev = s.take(details);
            Wire.Events batch = new Wire.Events();
            for (int i = 0; i + 3 < ev.length; i += 4) {
                int kind = (int) ev[i];
                if (kind == 4) {
                    Object[] d = details.get((int) ev[i + 3]);
                    batch.comm(ev[i + 1], ev[i + 2], (Integer) d[0], (Long) d[1], (Long) d[2], (Long) d[3],
                            (String) d[4]);
                } else if (kind == 5) {
                    Object[] d = details.get((int) ev[i + 3]);
                    batch.socket(ev[i + 1], ev[i + 2], (Long) d[0], 1, (String) d[1], (String) d[2]);
                } else {
                    batch.add(kind, ev[i + 1], ev[i + 2], ev[i + 3]);
                }
                if (batch.count() >= 4096) {
                    frames.add(batch.encode(s.id, s.seq++, now(), 0));
                    batch = new Wire.Events();
                }
            }
            if (batch.count() > 0) frames.add(batch.encode(s.id, s.seq++, now(), 0));
            if (closing) {
                frames.add(Wire.streamClose(s.id, s.seq++, now(), now(), 0));
                s.closed = true;
            }
        }
        return frames;
    }

    private static void run() {
        long period = 20;
        try {
            period = Math.max(1, Long.parseLong(System.getenv().getOrDefault("P5_FLUSH_MS", "20")));
        } catch (NumberFormatException ignored) { }
        connect();
        while (!stopping) {
            try {
                Thread.sleep(period);
            } catch (InterruptedException e) {
                // woken by flush() or shutdown()
            }
            synchronized (EMIT) {
                try {
                    emit(drain(false));
                    pingBurst();
                } catch (IOException | RuntimeException ignored) {
                    // never let the runtime take the program down
                }
            }
            synchronized (FLUSHED) {
                generation++;
                FLUSHED.notifyAll();
            }
        }
    }

    /** Waits (at most 3 s) until everything recorded so far is shipped or spooled. */
    public static boolean flush() {
        Thread t = shipper;
        if (t == null || !t.isAlive()) return true;
        long deadline = System.currentTimeMillis() + 3000;
        synchronized (FLUSHED) {
            long target = generation + 2;
            t.interrupt();
            while (generation < target) {
                long left = deadline - System.currentTimeMillis();
                if (left <= 0) return false;
                try {
                    FLUSHED.wait(left);
                } catch (InterruptedException e) {
                    return false;
                }
            }
        }
        return true;
    }

    /** Flushes, closes every stream, says goodbye and stops recording. */
    public static void shutdown() {
        synchronized (P5.class) {
            if (shipper == null || stopping) return;
        }
        // A short program can end before its first connect got through: one more try
        // before anything is spooled.
        synchronized (EMIT) {
            if (sock == null && spool == null) connect();
        }
        flush();
        on = false;
        stopping = true;
        synchronized (EMIT) {
            try {
                List<byte[]> frames = drain(true);
                frames.add(Wire.goodbye(now()));
                emit(frames);
                if (spool != null) spool.close();
                if (sock != null) sock.close();
            } catch (IOException | RuntimeException ignored) {
                // best effort at exit
            }
        }
    }
}
