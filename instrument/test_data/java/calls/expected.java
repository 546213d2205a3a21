import java.io.IOException;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntSupplier;

class Base {
    Base(int x) { p5.P5.enter(0xbf468004c1fc965bL); try {
    } finally { p5.P5.exit(0xbf468004c1fc965bL); } }
}

class Calls extends Base {
    private final List<String> names = new ArrayList<>(List.of("a"));

    Calls() {
        super(Math.abs(-1)); p5.P5.enter(0x07fbfb8314fe8d91L); try {
        { p5.P5.enter(0xbc5b5b87ca143fa1L); try { names.add("b"); } finally { p5.P5.exit(0xbc5b5b87ca143fa1L); } }
    } finally { p5.P5.exit(0x07fbfb8314fe8d91L); } }

    static int twice(int x) { p5.P5.enter(0x3d798e5678d46bb2L); try {
        return x * 2;
    } finally { p5.P5.exit(0x3d798e5678d46bb2L); } }

    int run(Socket s, int[] xs) throws IOException { p5.P5.enter(0xa05b61dec6f7fc1dL); try {
        final int first; { p5.P5.enter(0xaff5ac638076470dL); try { first = twice(xs[0]); } finally { p5.P5.exit(0xaff5ac638076470dL); } }
        int a = twice(1), b = 2;
        var c = twice(3);
        for (int i = twice(0); i < 1; i++) {
            { p5.P5.enter(0xbca56d8dfdc72aaaL); try { names.add(String.valueOf(i)); } finally { p5.P5.exit(0xbca56d8dfdc72aaaL); } }
        }
        if (a > 0) { p5.P5.enter(0xc9532eb87b14a847L); try { System.out.println(first); } finally { p5.P5.exit(0xc9532eb87b14a847L); } }
        int d = twice(twice(a)) + b;
        IntSupplier later = () -> {
            int e; { p5.P5.enter(0xd602efe2f8658be4L); try { e = twice(first); } finally { p5.P5.exit(0xd602efe2f8658be4L); } }
            return e;
        };
        int kind = switch (d) {
            case 1 -> twice(d);
            default -> {
                yield twice(d + 1);
            }
        };
        p5.P5.enter(0xa4d5ce175be02fd5L); // p5:begin send
        p5.P5.mark(0x18dd011442c1269aL); { p5.P5.enter(0xe2b2b10d75b66f81L); try { p5.P5.output(0xd55ca74cb10370a9L, s, _p5 -> _p5.getOutputStream()).write(kind); } finally { p5.P5.exit(0xe2b2b10d75b66f81L); } }
        p5.P5.mark(0x0c2d3fe9c57042fdL); { p5.P5.enter(0xef607237f303ed1eL); try { names.clear(); } finally { p5.P5.exit(0xef607237f303ed1eL); } }
        p5.P5.exit(0xa4d5ce175be02fd5L); // p5:end
        String arr[]; { p5.P5.enter(0xfc1033627054d0bbL); try { arr = names.toArray(new String[0]); } finally { p5.P5.exit(0xfc1033627054d0bbL); } }
        return c + later.getAsInt() + arr.length;
    } finally { p5.P5.exit(0xa05b61dec6f7fc1dL); } }
}
