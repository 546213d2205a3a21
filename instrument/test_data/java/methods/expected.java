package demo.net;

import java.util.List;

class Server extends Base {
    private final int port;

    public Server(int port) {
        super(port); p5.P5.enter(0x09abaef677b95173L); try {
        this.port = port;
    } finally { p5.P5.exit(0x09abaef677b95173L); } }

    public Server() {
        this(8080); p5.P5.enter(0x165b7020f50a3510L); try {
    } finally { p5.P5.exit(0x165b7020f50a3510L); } }

    public int port() { p5.P5.enter(0x6d22834c35b36317L); try {
        if (port < 0) {
            return -1;
        }
        return port;
    } finally { p5.P5.exit(0x6d22834c35b36317L); } }

    static int total(List<Integer> xs) { p5.P5.enter(0x21fb64062833f916L); try {
        int t = 0;
        for (int x : xs) t += x;
        return t;
    } finally { p5.P5.exit(0x21fb64062833f916L); } }

    interface Handler {
        void handle(int x);
        default String name() { p5.P5.enter(0x264096ce486d86d9L); try { return "h"; } finally { p5.P5.exit(0x264096ce486d86d9L); } }
    }

    void run(Handler h) { p5.P5.enter(0xb9f12e8085709b07L); try {
        h.handle(port);
        Runnable r = () -> h.handle(0);
        r.run();
    } finally { p5.P5.exit(0xb9f12e8085709b07L); } }
}

class Base {
    Base(int x) { p5.P5.enter(0x7bea0d131c6faebbL); try { } finally { p5.P5.exit(0x7bea0d131c6faebbL); } }
}
