package p5;

import java.io.FilterInputStream;
import java.io.FilterOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;

/** Socket streams that record each read and write as a communication event (op, bytes, time). */
final class Recorded {
    private Recorded() {}

    static final int SEND = 1, RECV = 2;

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
            int b = in.read();
            P5.comm(sensor, RECV, socket, t, b < 0 ? 0 : 1);
            return b;
        }

        @Override
        public int read(byte[] buf, int off, int len) throws IOException {
            long t = P5.now();
            int n = in.read(buf, off, len);
            P5.comm(sensor, RECV, socket, t, Math.max(n, 0));
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
            long t = P5.now();
            out.write(b);
            P5.comm(sensor, SEND, socket, t, 1);
        }

        @Override
        public void write(byte[] buf, int off, int len) throws IOException {
            long t = P5.now();
            out.write(buf, off, len);
            P5.comm(sensor, SEND, socket, t, len);
        }
    }
}
