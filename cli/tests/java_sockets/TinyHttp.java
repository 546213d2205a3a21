// An HTTP/1.1 server on java.net.ServerSocket, a thread per connection, keep-alive: answers
// GET /item/<id> with the id, GET /quit by stopping. Its socket calls are its own (the
// instrumenter routes them); its port goes to the file named by its argument.
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;

public class TinyHttp {
    static volatile boolean quit;

    static void serve(Socket s) {
        try (s) {
            BufferedReader in = new BufferedReader(new InputStreamReader(s.getInputStream(), StandardCharsets.ISO_8859_1));
            OutputStream out = s.getOutputStream();
            while (true) {
                String request = in.readLine();
                if (request == null) {
                    return;
                }
                String line;
                while ((line = in.readLine()) != null && !line.isEmpty()) {
                    // headers: GETs only, no body
                }
                String path = request.split(" ")[1];
                boolean last = path.equals("/quit");
                String body = last ? "bye\n" : "item " + path.substring(path.lastIndexOf('/') + 1) + "\n";
                String reply = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " + body.length()
                        + (last ? "\r\nConnection: close" : "") + "\r\n\r\n" + body;
                out.write(reply.getBytes(StandardCharsets.ISO_8859_1));
                out.flush();
                if (last) {
                    quit = true;
                    return;
                }
            }
        } catch (IOException e) {
            System.err.println("TinyHttp: " + e);
        }
    }

    public static void main(String[] args) throws Exception {
        List<Thread> threads = new ArrayList<>();
        try (ServerSocket server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
            Path tmp = Path.of(args[0] + ".tmp");
            Files.writeString(tmp, Integer.toString(server.getLocalPort()));
            Files.move(tmp, Path.of(args[0]), StandardCopyOption.ATOMIC_MOVE);
            server.setSoTimeout(100);
            while (!quit) {
                Socket s;
                try {
                    s = server.accept();
                } catch (java.net.SocketTimeoutException e) {
                    continue;
                }
                Thread t = new Thread(() -> serve(s), "handler-" + threads.size());
                threads.add(t);
                t.start();
            }
        }
        for (Thread t : threads) {
            t.join();
        }
        System.out.println("TinyHttp: served " + threads.size() + " connections");
    }
}
