package p5;

import java.io.FilterInputStream;
import java.io.FilterOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.SocketAddress;
import java.net.SocketOption;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.channels.spi.AbstractSelectableChannel;
import java.nio.channels.spi.AbstractSelector;
import java.util.Set;
import java.util.function.Consumer;

/**
 * Socket streams and channels that record each read and write as a communication event (op,
 * bytes, time).
 */
final class Recorded {
    private Recorded() {}

    static final int SEND = 1, RECV = 2, CONNECT = 9, ACCEPT = 10, WAIT = 13;
    static final long EINPROGRESS = 115;

    /**
     * Records a site's call on a socket the socket layer does not record (one made before
     * {@link Sockets} was installed, or with it off), describing the socket first, once.
     */
    static void own(int op, Socket socket, long sensor, long t, long result) {
        P5.noteOnce(sensor, socket);
        P5.comm(sensor, op, socket, t, result);
    }

    static final class In extends FilterInputStream {
        private final long sensor;
        private final Socket socket;

        In(InputStream in, long sensor, Socket socket) {
            super(in);
            this.sensor = sensor;
            this.socket = socket;
        }

        @Override
        public int read() throws IOException {
            long t = P5.now();
            Sockets.Site site = Sockets.SITE.get();
            long outer = site.sensor;
            boolean outerTaken = site.taken, taken;
            site.sensor = sensor;
            site.taken = false;
            int b;
            try {
                b = in.read();
            } finally {
                taken = site.taken;
                site.sensor = outer;
                site.taken = outerTaken;
            }
            if (!taken) own(RECV, socket, sensor, t, b < 0 ? 0 : 1);
            return b;
        }

        @Override
        public int read(byte[] buf, int off, int len) throws IOException {
            long t = P5.now();
            Sockets.Site site = Sockets.SITE.get();
            long outer = site.sensor;
            boolean outerTaken = site.taken, taken;
            site.sensor = sensor;
            site.taken = false;
            int n;
            try {
                n = in.read(buf, off, len);
            } finally {
                taken = site.taken;
                site.sensor = outer;
                site.taken = outerTaken;
            }
            if (!taken) own(RECV, socket, sensor, t, Math.max(n, 0));
            return n;
        }
    }

    static final class Out extends FilterOutputStream {
        private final long sensor;
        private final Socket socket;

        Out(OutputStream out, long sensor, Socket socket) {
            super(out);
            this.sensor = sensor;
            this.socket = socket;
        }

        @Override
        public void write(int b) throws IOException {
            write(new byte[] {(byte) b}, 0, 1);
        }

        @Override
        public void write(byte[] buf, int off, int len) throws IOException {
            long t = P5.now();
            Sockets.Site site = Sockets.SITE.get();
            long outer = site.sensor;
            boolean outerTaken = site.taken, taken;
            site.sensor = sensor;
            site.taken = false;
            try {
                out.write(buf, off, len);
            } finally {
                taken = site.taken;
                site.sensor = outer;
                site.taken = outerTaken;
            }
            if (!taken) own(SEND, socket, sensor, t, len);
        }
    }

    /**
     * A stand-in for a JDK socket channel during one call ({@link P5#channel}): reads, writes and
     * connects are recorded, everything else is passed on. It is never registered or kept.
     */
    static final class Channel extends SocketChannel {
        private final SocketChannel ch;
        private final long sensor;

        Channel(SocketChannel ch, long sensor) {
            super(ch.provider());
            this.ch = ch;
            this.sensor = sensor;
        }

        private long io(int op, long t, long n) {
            Socket s = ch.socket();
            P5.noteOnce(sensor, s);
            P5.comm(sensor, op, s, t, Math.max(n, 0));
            return n;
        }

        @Override
        public int read(ByteBuffer dst) throws IOException {
            long t = P5.now();
            return (int) io(RECV, t, ch.read(dst));
        }

        @Override
        public long read(ByteBuffer[] dsts, int offset, int length) throws IOException {
            long t = P5.now();
            return io(RECV, t, ch.read(dsts, offset, length));
        }

        @Override
        public int write(ByteBuffer src) throws IOException {
            long t = P5.now();
            return (int) io(SEND, t, ch.write(src));
        }

        @Override
        public long write(ByteBuffer[] srcs, int offset, int length) throws IOException {
            long t = P5.now();
            return io(SEND, t, ch.write(srcs, offset, length));
        }

        @Override
        public boolean connect(SocketAddress remote) throws IOException {
            long t = P5.now();
            boolean done = ch.connect(remote);
            Socket s = ch.socket();
            P5.comm(sensor, CONNECT, P5.fd(s), t, done ? 0 : -EINPROGRESS, P5.endpoint(remote));
            if (done) P5.noteSocket(sensor, s);
            return done;
        }

        @Override
        public SocketChannel bind(SocketAddress local) throws IOException {
            ch.bind(local);
            return this;
        }

        @Override
        public <T> SocketChannel setOption(SocketOption<T> name, T value) throws IOException {
            ch.setOption(name, value);
            return this;
        }

        @Override
        public <T> T getOption(SocketOption<T> name) throws IOException {
            return ch.getOption(name);
        }

        @Override
        public Set<SocketOption<?>> supportedOptions() {
            return ch.supportedOptions();
        }

        @Override
        public SocketChannel shutdownInput() throws IOException {
            ch.shutdownInput();
            return this;
        }

        @Override
        public SocketChannel shutdownOutput() throws IOException {
            ch.shutdownOutput();
            return this;
        }

        @Override
        public Socket socket() {
            return ch.socket();
        }

        @Override
        public boolean isConnected() {
            return ch.isConnected();
        }

        @Override
        public boolean isConnectionPending() {
            return ch.isConnectionPending();
        }

        @Override
        public boolean finishConnect() throws IOException {
            return ch.finishConnect();
        }

        @Override
        public SocketAddress getRemoteAddress() throws IOException {
            return ch.getRemoteAddress();
        }

        @Override
        public SocketAddress getLocalAddress() throws IOException {
            return ch.getLocalAddress();
        }

        @Override
        protected void implCloseSelectableChannel() throws IOException {
            ch.close();
        }

        @Override
        protected void implConfigureBlocking(boolean block) throws IOException {
            ch.configureBlocking(block);
        }
    }

    /**
     * A stand-in for one {@code select}/{@code selectNow} call on a JDK {@link Selector}: the
     * call is passed on and recorded as a wait (op 13: the number of keys selected, the time
     * spent), so the thread is drawn waiting, not calculating. Everything else is passed on.
     */
    static final class Waiter extends AbstractSelector {
        private final Selector sel;
        private final long sensor;

        Waiter(Selector sel, long sensor) {
            super(sel.provider());
            this.sel = sel;
            this.sensor = sensor;
        }

        private int waited(long t, int n) {
            P5.comm(sensor, WAIT, System.identityHashCode(sel), t, n, "-");
            return n;
        }

        @Override
        public int select() throws IOException {
            long t = P5.now();
            return waited(t, sel.select());
        }

        @Override
        public int select(long timeout) throws IOException {
            long t = P5.now();
            return waited(t, sel.select(timeout));
        }

        @Override
        public int selectNow() throws IOException {
            long t = P5.now();
            return waited(t, sel.selectNow());
        }

        @Override
        public int select(Consumer<SelectionKey> action, long timeout) throws IOException {
            long t = P5.now();
            return waited(t, sel.select(action, timeout));
        }

        @Override
        public int select(Consumer<SelectionKey> action) throws IOException {
            long t = P5.now();
            return waited(t, sel.select(action));
        }

        @Override
        public int selectNow(Consumer<SelectionKey> action) throws IOException {
            long t = P5.now();
            return waited(t, sel.selectNow(action));
        }

        @Override
        public Set<SelectionKey> keys() {
            return sel.keys();
        }

        @Override
        public Set<SelectionKey> selectedKeys() {
            return sel.selectedKeys();
        }

        @Override
        public Selector wakeup() {
            sel.wakeup();
            return this;
        }

        @Override
        protected void implCloseSelector() throws IOException {
            sel.close();
        }

        @Override
        protected SelectionKey register(AbstractSelectableChannel ch, int ops, Object att) {
            throw new java.nio.channels.IllegalSelectorException();
        }
    }
}
