// p5-instrument end-to-end program: constructors with super(...), early returns, exceptions,
// a loopback socket exchange.
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;

class Base {
    final int seed;

    Base(int seed) {
        this.seed = seed;
    }
}

class Echo extends Base {
    Echo() {
        super(7);
    }

    static int classify(int v) {
        if (v < 0) {
            return -1;
        }
        if (v == 0) {
            return 0;
        }
        return square(v) > 100 ? 2 : 1;
    }

    static int square(int x) {
        return x * x;
    }

    static int fails() {
        throw new IllegalStateException("no");
    }

    static int exchange() throws IOException {
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
                Socket client = new Socket(InetAddress.getLoopbackAddress(), server.getLocalPort());
                Socket peer = server.accept()) {
            OutputStream out = client.getOutputStream();
            out.write("ping".getBytes());
            out.flush();
            InputStream in = peer.getInputStream();
            byte[] buf = new byte[4];
            int n = in.readNBytes(buf, 0, 4);
            Process p = new ProcessBuilder("true").start();
            p.getInputStream().close();
            return n;
        }
    }

    static int channels() throws IOException {
        try (ServerSocketChannel listener = ServerSocketChannel.open();
                SocketChannel client = SocketChannel.open()) {
            listener.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            client.connect(listener.getLocalAddress());
            try (SocketChannel peer = listener.accept()) {
                client.write(ByteBuffer.wrap("hello".getBytes()));
                ByteBuffer buf = ByteBuffer.allocate(16);
                int n = 0;
                while (n < 5) {
                    n += peer.read(buf);
                }
                return n;
            }
        }
    }

    public static void main(String[] args) throws IOException {
        int caught = 0;
        try {
            fails();
        } catch (IllegalStateException e) {
            caught = 1;
        }
        System.out.println(classify(-3) + " " + classify(0) + " " + classify(12) + " " + new Echo().seed + " " + caught + " " + exchange() + " " + channels());
    }
}
