// Asks TinyHttp through the JDK's HttpURLConnection (keep-alive, its connections pooled by the
// JDK): `threads` threads make `requests` GETs each, then one GET /quit. None of its socket
// calls are in this file: the JDK makes them.
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

public class UrlClient {
    static String get(String url) throws Exception {
        HttpURLConnection c = (HttpURLConnection) new URL(url).openConnection();
        try (InputStream in = c.getInputStream()) {
            return c.getResponseCode() + " " + new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    public static void main(String[] args) throws Exception {
        Path portFile = Path.of(args[0]);
        int threads = Integer.parseInt(args[1]), requests = Integer.parseInt(args[2]);
        for (int i = 0; i < 3000 && !Files.exists(portFile); i++) {
            Thread.sleep(10);
        }
        String base = "http://127.0.0.1:" + Files.readString(portFile).trim();
        AtomicInteger ok = new AtomicInteger();
        List<Thread> workers = new ArrayList<>();
        for (int k = 0; k < threads; k++) {
            String name = "client-" + k;
            Thread t = new Thread(() -> {
                try {
                    for (int i = 0; i < requests; i++) {
                        String id = name + "-" + i;
                        if (get(base + "/item/" + id).equals("200 item " + id + "\n")) {
                            ok.incrementAndGet();
                        }
                    }
                } catch (Exception e) {
                    System.err.println(name + ": " + e);
                }
            }, name);
            workers.add(t);
            t.start();
        }
        for (Thread t : workers) {
            t.join();
        }
        String bye = get(base + "/quit");
        System.out.println("UrlClient: " + threads * requests + " requests, " + ok.get() + " answered, quit "
                + (bye.equals("200 bye\n") ? "ok" : "failed"));
    }
}
