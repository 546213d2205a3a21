package demo.net;

import java.util.List;

class Server extends Base {
    private final int port;

    public Server(int port) {
        super(port);
        this.port = port;
    }

    public Server() {
        this(8080);
    }

    public int port() {
        if (port < 0) {
            return -1;
        }
        return port;
    }

    static int total(List<Integer> xs) {
        int t = 0;
        for (int x : xs) t += x;
        return t;
    }

    interface Handler {
        void handle(int x);
        default String name() { return "h"; }
    }

    void run(Handler h) {
        h.handle(port);
        Runnable r = () -> h.handle(0);
        r.run();
    }
}

class Base {
    Base(int x) {}
}
