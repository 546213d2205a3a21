package p5;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ConnectException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NoRouteToHostException;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketAddress;
import java.net.SocketException;
import java.net.SocketImpl;
import java.net.SocketOption;
import java.net.SocketTimeoutException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.Set;

/**
 * Every {@code java.net.Socket} and {@code ServerSocket} recorded, whoever uses it: the JDK's
 * {@code HttpURLConnection}, JDBC drivers, RMI, libraries, code the instrumenter never saw.
 *
 * <p>How: socket implementation factories ({@link Socket#setSocketImplFactory},
 * {@link ServerSocket#setSocketFactory}), installed when the runtime starts. A custom
 * {@code SocketImpl} cannot delegate to the JDK's own (its methods are protected and
 * {@code java.base} is closed to reflection since JDK 16), so each socket's implementation
 * here is a public {@code SocketChannel}'s socket adaptor ({@code SocketChannel.open().socket()}
 * and {@code ServerSocketChannel}'s), which the JDK builds without the factories and which
 * supports timeouts, options, shutdown and {@code available()} — everything a platform socket
 * does but urgent data. Both factories are set or neither (a custom server implementation
 * accepts only onto custom client implementations); a program that set its own keeps it.
 *
 * <p>What is recorded is what the other runtimes record (docs/wire.md): each connect (op 9)
 * and accept (op 10, on the listener, its result the new socket) with the peer, a
 * description of each connected or accepted socket, every read (op 2) and write (op 1) of
 * its streams, shutdowns (op 12) and closes (op 11). Java hides descriptors: a socket's
 * stands-in is the identity hash of its implementation. A call an instrumented site routed
 * ({@code P5.input}/{@code output}/{@code accept}) is recorded once, here, under the site's
 * sensor: the site says which it is for the duration of the call ({@link Site}) and records
 * itself only for a socket made before the factories were installed. The runtime's own
 * connection to the log server is never recorded.
 *
 * <p>Not covered: {@code java.nio} channels ({@code SocketChannel.open()}, the JDK's
 * {@code HttpClient}, {@code com.sun.net.httpserver}, Netty): a channel's implementation is
 * the JDK's own {@code SelectorProvider}'s, and a replacement would have to reimplement
 * selectors; the instrumenter routes channel calls written in the program
 * ({@code P5.channel}) instead. Off with {@code P5_SOCKETS=0}, and under the preload
 * ({@code libp5_preload} in {@code LD_PRELOAD}), which records the JVM's libc calls already,
 * unless {@code P5_PRELOAD=0} told the preload to leave this process to its own runtime.
 */
final class Sockets {
    private Sockets() {}

    static final long CONNECT = fnv("p5:java:socket.connect"), ACCEPT = fnv("p5:java:socket.accept"),
            READ = fnv("p5:java:socket.read"), WRITE = fnv("p5:java:socket.write"),
            CLOSE = fnv("p5:java:socket.close"), SHUTDOWN = fnv("p5:java:socket.shutdown");
    static final int SEND = 1, RECV = 2, CONNECT_OP = 9, ACCEPT_OP = 10, CLOSE_OP = 11, SHUTDOWN_OP = 12;

    static volatile boolean installed;

    static long fnv(String name) {
        long h = 0xcbf29ce484222325L;
        for (byte b : name.getBytes(java.nio.charset.StandardCharsets.UTF_8)) {
            h = (h ^ (b & 0xff)) * 0x100000001b3L;
        }
        return h;
    }

    /** The instrumented site whose call is under way on this thread (0: none). */
    static final class Site {
        long sensor;
        /** Whether the socket layer recorded the site's call (the site then does not). */
        boolean taken;
        /** When this thread's last connect through the factories finished. */
        long connected = Long.MIN_VALUE;
    }

    static final ThreadLocal<Site> SITE = ThreadLocal.withInitial(Site::new);

    /** The sensor to record a call under: the site's, if one is under way (it is then taken). */
    static long sensor(long own) {
        Site s = SITE.get();
        if (s.sensor == 0) return own;
        s.taken = true;
        return s.sensor;
    }

    /** Installs the factories, once, unless turned off or already set by the program. */
    @SuppressWarnings("deprecation")
    static synchronized void install() {
        if (installed || "0".equals(System.getenv("P5_SOCKETS"))) return;
        String preload = System.getenv("LD_PRELOAD");
        String passive = System.getenv("P5_PRELOAD");
        boolean preloadOff =
                passive != null && java.util.Set.of("0", "false", "no", "off")
                        .contains(passive.trim().toLowerCase(java.util.Locale.ROOT));
        if (preload != null && preload.contains("p5_preload") && !preloadOff) return;
        try {
            Socket.setSocketImplFactory(Client::new);
        } catch (IOException | RuntimeException e) {
            return; // the program has its own factory: its sockets stay its own
        }
        try {
            ServerSocket.setSocketFactory(Server::new);
        } catch (IOException | RuntimeException e) {
            // a server factory of the program's own, accepting onto our client sockets
        }
        installed = true;
    }

    /** −errno for what a failed call threw (Java gives no errno). */
    static long failed(IOException e) {
        if (e instanceof SocketTimeoutException) return -11; // EAGAIN, as a receive timeout
        if (e instanceof ConnectException) return -111; // ECONNREFUSED
        if (e instanceof NoRouteToHostException) return -113;
        if (e instanceof ClosedChannelException) return -9; // EBADF
        String m = String.valueOf(e.getMessage());
        if (m.contains("reset")) return -104;
        if (m.contains("Broken pipe")) return -32;
        if (m.contains("closed")) return -9;
        return -5; // EIO
    }

    static String endpoint(InetAddress a, int port) { return P5.endpoint(a, port); }

    /** A client socket's implementation: a socket channel's adaptor, recorded. */
    static final class Client extends SocketImpl {
        private final boolean quiet = P5.onShipper();
        private final long fd = System.identityHashCode(this);
        private Socket d;
        private InputStream in;
        private OutputStream out;

        private Socket d() throws IOException {
            if (d == null) d = SocketChannel.open().socket();
            return d;
        }

        private boolean recording() { return P5.on && !quiet; }

        /** Takes over an accepted connection (from {@link Server#accept}). */
        void accepted(Socket a) {
            d = a;
            address = a.getInetAddress();
            port = a.getPort();
            localport = a.getLocalPort();
        }

        long fd() { return fd; }

        void describe(long sensor) {
            if (recording()) P5.describeSocket(sensor, fd, endpoint(d.getLocalAddress(), d.getLocalPort()),
                    endpoint(d.getInetAddress(), d.getPort()));
        }

        @Override
        protected void create(boolean stream) throws IOException {
            if (!stream) throw new IOException("datagram java.net.Sockets are not supported while p5 records");
        }

        @Override
        protected void connect(String host, int port) throws IOException {
            connect(new InetSocketAddress(host, port), 0);
        }

        @Override
        protected void connect(InetAddress a, int port) throws IOException {
            connect(new InetSocketAddress(a, port), 0);
        }

        @Override
        protected void connect(SocketAddress to, int timeout) throws IOException {
            long t = P5.now();
            String peer = to instanceof InetSocketAddress ? P5.endpoint(to) : "-";
            try {
                d().connect(to, timeout);
            } catch (IOException e) {
                if (recording()) P5.comm(sensor(CONNECT), CONNECT_OP, fd, t, failed(e), peer);
                throw e;
            }
            accepted(d);
            if (recording()) {
                long sensor = sensor(CONNECT);
                describe(sensor);
                P5.comm(sensor, CONNECT_OP, fd, t, 0, endpoint(address, port));
                SITE.get().connected = P5.now();
            }
        }

        @Override
        protected void bind(InetAddress host, int port) throws IOException {
            d().bind(new InetSocketAddress(host, port));
            localport = d.getLocalPort();
        }

        @Override
        protected void listen(int backlog) throws IOException {
            throw new SocketException("a client socket does not listen");
        }

        @Override
        protected void accept(SocketImpl s) throws IOException {
            throw new SocketException("a client socket does not accept");
        }

        @Override
        protected InputStream getInputStream() throws IOException {
            if (in == null) {
                InputStream raw = d().getInputStream();
                in = quiet ? raw : new In(raw, this);
            }
            return in;
        }

        @Override
        protected OutputStream getOutputStream() throws IOException {
            if (out == null) {
                OutputStream raw = d().getOutputStream();
                out = quiet ? raw : new Out(raw, this);
            }
            return out;
        }

        @Override
        protected int available() throws IOException {
            return d().getInputStream().available();
        }

        @Override
        protected void close() throws IOException {
            if (d == null) return;
            long t = P5.now();
            boolean open = !d.isClosed();
            d.close();
            if (open && recording()) P5.comm(sensor(CLOSE), CLOSE_OP, fd, t, 0, "-");
        }

        @Override
        protected void shutdownInput() throws IOException {
            long t = P5.now();
            d().shutdownInput();
            if (recording()) P5.comm(sensor(SHUTDOWN), SHUTDOWN_OP, fd, t, 0, "-");
        }

        @Override
        protected void shutdownOutput() throws IOException {
            long t = P5.now();
            d().shutdownOutput();
            if (recording()) P5.comm(sensor(SHUTDOWN), SHUTDOWN_OP, fd, t, 0, "-");
        }

        @Override
        protected void sendUrgentData(int data) throws IOException {
            d().sendUrgentData(data);
        }

        @Override
        protected <T> void setOption(SocketOption<T> name, T value) throws IOException {
            d().setOption(name, value);
        }

        @Override
        protected <T> T getOption(SocketOption<T> name) throws IOException {
            return d().getOption(name);
        }

        @Override
        protected Set<SocketOption<?>> supportedOptions() {
            try {
                return d().supportedOptions();
            } catch (IOException e) {
                return Set.of();
            }
        }

        @Override
        public void setOption(int id, Object v) throws SocketException {
            Socket s;
            try {
                s = d();
            } catch (IOException e) {
                throw new SocketException(e.getMessage());
            }
            Options.set(s, id, v);
        }

        @Override
        public Object getOption(int id) throws SocketException {
            Socket s;
            try {
                s = d();
            } catch (IOException e) {
                throw new SocketException(e.getMessage());
            }
            return Options.get(s, id);
        }
    }

    /** A listening socket's implementation: a server socket channel's adaptor, recorded. */
    static final class Server extends SocketImpl {
        private final long fd = System.identityHashCode(this);
        private ServerSocketChannel ch;
        private InetSocketAddress bindTo;
        private int timeout;
        private Boolean reuse = Boolean.TRUE;
        private Integer rcvbuf;

        @Override
        protected void create(boolean stream) throws IOException {
            if (!stream) throw new IOException("datagram server sockets do not exist");
        }

        @Override
        protected void connect(String host, int port) throws IOException { throw new SocketException("listening"); }

        @Override
        protected void connect(InetAddress a, int port) throws IOException { throw new SocketException("listening"); }

        @Override
        protected void connect(SocketAddress a, int timeout) throws IOException { throw new SocketException("listening"); }

        @Override
        protected void bind(InetAddress host, int port) throws IOException {
            bindTo = new InetSocketAddress(host, port); // bound with its backlog by listen()
        }

        @Override
        protected void listen(int backlog) throws IOException {
            ch = ServerSocketChannel.open();
            ch.socket().setReuseAddress(reuse);
            if (rcvbuf != null) ch.socket().setReceiveBufferSize(rcvbuf);
            ch.bind(bindTo, backlog);
            ch.socket().setSoTimeout(timeout);
            address = ch.socket().getInetAddress();
            localport = ch.socket().getLocalPort();
        }

        @Override
        protected void accept(SocketImpl s) throws IOException {
            if (!(s instanceof Client)) throw new SocketException("p5 accepts onto its own socket implementations only");
            Client c = (Client) s;
            long t = P5.now();
            Socket a;
            try {
                a = ch.socket().accept();
            } catch (IOException e) {
                if (P5.on) P5.comm(sensor(ACCEPT), ACCEPT_OP, fd, t, failed(e), "-");
                throw e;
            }
            c.accepted(a);
            if (P5.on) {
                long sensor = sensor(ACCEPT);
                P5.comm(sensor, ACCEPT_OP, fd, t, c.fd(), endpoint(a.getInetAddress(), a.getPort()));
                c.describe(sensor);
            }
        }

        @Override
        protected InputStream getInputStream() throws IOException { throw new SocketException("listening"); }

        @Override
        protected OutputStream getOutputStream() throws IOException { throw new SocketException("listening"); }

        @Override
        protected int available() { return 0; }

        @Override
        protected void close() throws IOException {
            if (ch != null) ch.close();
        }

        @Override
        protected void sendUrgentData(int data) throws IOException { throw new SocketException("listening"); }

        @Override
        protected <T> void setOption(SocketOption<T> name, T value) throws IOException {
            if (ch == null) throw new SocketException("set " + name + " after binding while p5 records");
            ch.setOption(name, value);
        }

        @Override
        protected <T> T getOption(SocketOption<T> name) throws IOException {
            if (ch == null) throw new SocketException("get " + name + " after binding while p5 records");
            return ch.getOption(name);
        }

        @Override
        protected Set<SocketOption<?>> supportedOptions() {
            return Set.of(java.net.StandardSocketOptions.SO_RCVBUF, java.net.StandardSocketOptions.SO_REUSEADDR);
        }

        @Override
        public void setOption(int id, Object v) throws SocketException {
            switch (id) {
                case SO_TIMEOUT:
                    timeout = (Integer) v;
                    if (ch != null) ch.socket().setSoTimeout(timeout);
                    return;
                case SO_REUSEADDR:
                    reuse = (Boolean) v;
                    if (ch != null) ch.socket().setReuseAddress(reuse);
                    return;
                case SO_RCVBUF:
                    rcvbuf = (Integer) v;
                    if (ch != null) ch.socket().setReceiveBufferSize(rcvbuf);
                    return;
                default:
                    throw new SocketException("server socket option " + id + " is not supported while p5 records");
            }
        }

        @Override
        public Object getOption(int id) throws SocketException {
            switch (id) {
                case SO_TIMEOUT:
                    return timeout;
                case SO_REUSEADDR:
                    return ch != null ? ch.socket().getReuseAddress() : reuse;
                case SO_RCVBUF:
                    return ch != null ? ch.socket().getReceiveBufferSize() : (rcvbuf != null ? rcvbuf : 65536);
                case SO_BINDADDR:
                    return ch != null ? ch.socket().getInetAddress() : bindTo != null ? bindTo.getAddress() : null;
                default:
                    throw new SocketException("server socket option " + id + " is not supported while p5 records");
            }
        }
    }

    /** A client socket's input: every read recorded (op 2, bytes; end of stream: 0). */
    static final class In extends InputStream {
        private final InputStream in;
        private final Client c;

        In(InputStream in, Client c) {
            this.in = in;
            this.c = c;
        }

        @Override
        public int read() throws IOException {
            byte[] b = new byte[1];
            int n = read(b, 0, 1);
            return n > 0 ? b[0] & 0xff : -1;
        }

        @Override
        public int read(byte[] b, int off, int len) throws IOException {
            long t = P5.now();
            int n;
            try {
                n = in.read(b, off, len);
            } catch (IOException e) {
                if (P5.on) P5.comm(sensor(READ), RECV, c.fd(), t, failed(e), "-");
                throw e;
            }
            if (P5.on) P5.comm(sensor(READ), RECV, c.fd(), t, Math.max(n, 0), "-");
            return n;
        }

        @Override
        public int available() throws IOException { return in.available(); }

        @Override
        public void close() throws IOException { in.close(); }
    }

    /** A client socket's output: every write recorded (op 1, bytes). */
    static final class Out extends OutputStream {
        private final OutputStream out;
        private final Client c;

        Out(OutputStream out, Client c) {
            this.out = out;
            this.c = c;
        }

        @Override
        public void write(int b) throws IOException {
            write(new byte[] {(byte) b}, 0, 1);
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
            long t = P5.now();
            try {
                out.write(b, off, len);
            } catch (IOException e) {
                if (P5.on) P5.comm(sensor(WRITE), SEND, c.fd(), t, failed(e), "-");
                throw e;
            }
            if (P5.on) P5.comm(sensor(WRITE), SEND, c.fd(), t, len, "-");
        }

        @Override
        public void flush() throws IOException { out.flush(); }

        @Override
        public void close() throws IOException { out.close(); }
    }

    /** The legacy integer options ({@link java.net.SocketOptions}) on a delegate socket. */
    abstract static class Options implements java.net.SocketOptions {
        private Options() {}

        static void set(Socket s, int id, Object v) throws SocketException {
            switch (id) {
                case SO_TIMEOUT: s.setSoTimeout((Integer) v); return;
                case TCP_NODELAY: s.setTcpNoDelay((Boolean) v); return;
                case SO_LINGER:
                    if (v instanceof Integer) s.setSoLinger(true, (Integer) v);
                    else s.setSoLinger(false, 0);
                    return;
                case SO_SNDBUF: s.setSendBufferSize((Integer) v); return;
                case SO_RCVBUF: s.setReceiveBufferSize((Integer) v); return;
                case SO_KEEPALIVE: s.setKeepAlive((Boolean) v); return;
                case SO_OOBINLINE: s.setOOBInline((Boolean) v); return;
                case IP_TOS: s.setTrafficClass((Integer) v); return;
                case SO_REUSEADDR: s.setReuseAddress((Boolean) v); return;
                default: throw new SocketException("socket option " + id + " is not supported while p5 records");
            }
        }

        static Object get(Socket s, int id) throws SocketException {
            switch (id) {
                case SO_TIMEOUT: return s.getSoTimeout();
                case TCP_NODELAY: return s.getTcpNoDelay();
                case SO_LINGER: {
                    int l = s.getSoLinger();
                    return l < 0 ? (Object) Boolean.FALSE : (Object) l;
                }
                case SO_SNDBUF: return s.getSendBufferSize();
                case SO_RCVBUF: return s.getReceiveBufferSize();
                case SO_KEEPALIVE: return s.getKeepAlive();
                case SO_OOBINLINE: return s.getOOBInline();
                case IP_TOS: return s.getTrafficClass();
                case SO_REUSEADDR: return s.getReuseAddress();
                case SO_BINDADDR: return s.getLocalAddress();
                default: throw new SocketException("socket option " + id + " is not supported while p5 records");
            }
        }
    }
}
