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

    Client(Socket socket) { p5.P5.enter(0x28bab8350f86dc03L); try {
        this.socket = socket;
    } finally { p5.P5.exit(0x28bab8350f86dc03L); } }

    int first() throws IOException { p5.P5.enter(0x1d5c1ed8f1350096L); try {
        InputStream in = p5.P5.input(0x120e1357f45b458eL, socket, _p5 -> _p5.getInputStream());
        p5.P5.output(0x0560522d770dc7f1L, socket, _p5 -> _p5.getOutputStream()).write(1);
        return in.read();
    } finally { p5.P5.exit(0x1d5c1ed8f1350096L); } }

    int ls() throws IOException, InterruptedException { p5.P5.enter(0xaf51b77bf3c4b0edL); try {
        Process p = new ProcessBuilder("ls").start();
        return p5.P5.input(0x869da40019850d79L, p, _p5 -> _p5.getInputStream()).read() + p.waitFor();
    } finally { p5.P5.exit(0xaf51b77bf3c4b0edL); } }

    static Socket dial(String host) throws IOException { p5.P5.enter(0x2156198a63018a5cL); try {
        Socket s = p5.P5.connected(0xa55ece8e5a708348L, p5.P5.now(), new Socket(host, 80));
        Socket unconnected = new Socket();
        unconnected.close();
        return s;
    } finally { p5.P5.exit(0x2156198a63018a5cL); } }

    static Socket serve(ServerSocket server) throws IOException { p5.P5.enter(0x9a6fcc63bca7e515L); try {
        Socket peer = p5.P5.accept(0xb6a982dd6b845651L, server, _p5 -> _p5.accept());
        p5.P5.output(0xc3574407e8d1d3eeL, peer, _p5 -> _p5.getOutputStream()).write(2);
        return peer;
    } finally { p5.P5.exit(0x9a6fcc63bca7e515L); } }

    static long relay(ServerSocketChannel listener, InetSocketAddress to) throws IOException { p5.P5.enter(0x676e6e9b9c68e1a7L); try {
        SocketChannel in = p5.P5.accept(0x0ee1ecc87b537747L, listener, _p5 -> _p5.accept());
        SocketChannel out = SocketChannel.open();
        p5.P5.channel(0x1b91adf2f8a45ae4L, out).connect(to);
        ByteBuffer buf = ByteBuffer.allocate(64);
        long total = 0;
        for (int n = p5.P5.channel(0xf5846a7380b5160dL, in).read(buf); n > 0; n = p5.P5.channel(0x02342b9dfe05f9aaL, in).read(buf)) {
            buf.flip();
            total += p5.P5.channel(0x419ef17270939fbbL, out).write(buf);
            buf.clear();
        }
        Files.write(Path.of("relay.log"), new byte[] {(byte) total});
        return total;
    } finally { p5.P5.exit(0x676e6e9b9c68e1a7L); } }
}
