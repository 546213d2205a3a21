import java.io.IOException;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntSupplier;

class Base {
    Base(int x) {
    }
}

class Calls extends Base {
    private final List<String> names = new ArrayList<>(List.of("a"));

    Calls() {
        super(Math.abs(-1));
        names.add("b");
    }

    static int twice(int x) {
        return x * 2;
    }

    int run(Socket s, int[] xs) throws IOException {
        final int first = twice(xs[0]);
        int a = twice(1), b = 2;
        var c = twice(3);
        for (int i = twice(0); i < 1; i++) {
            names.add(String.valueOf(i));
        }
        if (a > 0) System.out.println(first);
        int d = twice(twice(a)) + b;
        IntSupplier later = () -> {
            int e = twice(first);
            return e;
        };
        int kind = switch (d) {
            case 1 -> twice(d);
            default -> {
                yield twice(d + 1);
            }
        };
        // p5:begin send
        s.getOutputStream().write(kind);
        names.clear();
        // p5:end
        String arr[] = names.toArray(new String[0]);
        return c + later.getAsInt() + arr.length;
    }
}
