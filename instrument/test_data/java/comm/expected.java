import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;

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
}
