// The Java client's socket layer, checked from inside (package p5, so it can read the queued
// events): prints one "ok <what>" line per check, or throws.
package p5;

import java.io.InputStream;
import java.io.OutputStream;
import java.net.ConnectException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.util.ArrayList;
import java.util.List;

public class SocketsCheck {
    /** Queued comm (4) and socket (5) events of this thread: {kind, sensor, fd, op, result}. */
    static List<long[]> events() {
        List<long[]> out = new ArrayList<>();
        for (P5.Stream s : P5.STREAMS) {
            if (!s.name.equals(Thread.currentThread().getName())) continue;
            synchronized (s) {
                for (int i = 0; i + 3 < s.n; i += 4) {
                    int kind = (int) s.buf[i];
                    if (kind == 4) {
                        Object[] d = s.extra.get((int) s.buf[i + 3]);
                        out.add(new long[] {4, s.buf[i + 2], (Long) d[1], (Integer) d[0], (Long) d[3]});
                    } else if (kind == 5) {
                        Object[] d = s.extra.get((int) s.buf[i + 3]);
                        out.add(new long[] {5, s.buf[i + 2], (Long) d[0], 0, 0});
                    }
                }
            }
        }
        return out;
    }

    static long count(List<long[]> ev, long kind, long sensor, long op, long result) {
        return ev.stream().filter(e -> e[0] == kind && (sensor == 0 || e[1] == sensor) && (op == 0 || e[3] == op)
                && (result == Long.MIN_VALUE || e[4] == result)).count();
    }

    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what + ": " + describe(events()));
        System.out.println("ok " + what);
    }

    static String describe(List<long[]> ev) {
        StringBuilder b = new StringBuilder();
        for (long[] e : ev) b.append(java.util.Arrays.toString(e)).append(' ');
        return b.toString();
    }

    public static void main(String[] args) throws Exception {
        P5.mark(1); // starts the runtime
        if (args.length > 0 && args[0].equals("off")) {
            // P5_SOCKETS=0, or under the preload (which records the JVM's libc calls).
            check(!Sockets.installed, "factories left alone");
            Runtime.getRuntime().halt(0);
        }
        check(Sockets.installed, "factories installed");
        InetAddress lo = InetAddress.getLoopbackAddress();
        try (ServerSocket server = new ServerSocket(0, 5, lo);
                Socket c = new Socket(lo, server.getLocalPort());
                Socket s = server.accept()) {
            List<long[]> ev = events();
            check(count(ev, 4, Sockets.CONNECT, 9, 0) == 1 && count(ev, 4, Sockets.ACCEPT, 10, Long.MIN_VALUE) == 1,
                    "connect and accept recorded");
            check(count(ev, 5, 0, 0, Long.MIN_VALUE) == 2, "each socket described once");
            // A routed site's write: once, under the site's sensor.
            OutputStream o = P5.output(0x71L, c, x -> x.getOutputStream());
            o.write("hello".getBytes());
            InputStream in = s.getInputStream();
            byte[] buf = new byte[16];
            int n = in.read(buf);
            ev = events();
            check(n == 5 && count(ev, 4, 0x71L, 1, 5) == 1 && count(ev, 4, Sockets.WRITE, 1, Long.MIN_VALUE) == 0,
                    "a site's write recorded once under its sensor");
            check(count(ev, 4, Sockets.READ, 2, 5) == 1, "a read no site routed recorded by the socket layer");
            check(count(ev, 5, 0, 0, Long.MIN_VALUE) == 2, "no socket described again by the site");
            // Timeouts fail as before, recorded as EAGAIN.
            s.setSoTimeout(50);
            boolean timedOut = false;
            try {
                in.read(buf);
            } catch (SocketTimeoutException e) {
                timedOut = true;
            }
            check(timedOut && count(events(), 4, Sockets.READ, 2, -11) == 1, "a read timeout is -EAGAIN");
            // Options reach the connection.
            c.setTcpNoDelay(true);
            c.setSoLinger(true, 3);
            c.setKeepAlive(true);
            check(c.getTcpNoDelay() && c.getSoLinger() == 3 && c.getKeepAlive()
                    && lo.equals(c.getLocalAddress()) && c.getPort() == server.getLocalPort()
                    && s.getPort() == c.getLocalPort(), "options and addresses");
            c.setSoLinger(false, 0);
            c.shutdownOutput();
            s.setSoTimeout(5000);
            check(in.read(buf) == -1 && count(events(), 4, Sockets.READ, 2, 0) == 1, "end of stream is a 0-byte read");
            check(count(events(), 4, Sockets.SHUTDOWN, 12, 0) == 1, "shutdown recorded");
        }
        check(count(events(), 4, Sockets.CLOSE, 11, 0) == 2, "each connected socket's close recorded once");
        int closedPort;
        try (ServerSocket gone = new ServerSocket(0, 1, lo)) {
            closedPort = gone.getLocalPort();
        }
        boolean refused = false;
        try (Socket x = new Socket(lo, closedPort)) {
            // nothing listens
        } catch (ConnectException e) {
            refused = true;
        }
        check(refused && count(events(), 4, Sockets.CONNECT, 9, -111) == 1, "a refused connect is -ECONNREFUSED");
        System.out.flush();
        Runtime.getRuntime().halt(0); // no exit flush: the shipper waits out its slowed period
    }
}
