import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;

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
}
