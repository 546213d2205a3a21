import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;

class Client {
    private final Socket socket;

    Client(Socket socket) {
        this.socket = socket;
    }

    int first() throws IOException {
        InputStream in = socket.getInputStream();
        socket.getOutputStream().write(1);
        return in.read();
    }

    int ls() throws IOException, InterruptedException {
        Process p = new ProcessBuilder("ls").start();
        return p.getInputStream().read() + p.waitFor();
    }

    static Socket dial(String host) throws IOException {
        Socket s = new Socket(host, 80);
        Socket unconnected = new Socket();
        unconnected.close();
        return s;
    }

    static Socket serve(ServerSocket server) throws IOException {
        Socket peer = server.accept();
        peer.getOutputStream().write(2);
        return peer;
    }

    static long relay(ServerSocketChannel listener, InetSocketAddress to) throws IOException {
        SocketChannel in = listener.accept();
        SocketChannel out = SocketChannel.open();
        out.connect(to);
        ByteBuffer buf = ByteBuffer.allocate(64);
        long total = 0;
        for (int n = in.read(buf); n > 0; n = in.read(buf)) {
            buf.flip();
            total += out.write(buf);
            buf.clear();
        }
        Files.write(Path.of("relay.log"), new byte[] {(byte) total});
        return total;
    }
}
