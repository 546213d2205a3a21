import java.io.IOException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.util.stream.Stream;

class Loop {
    private final Selector selector;

    Loop(Selector selector) {
        this.selector = selector;
    }

    int once(long timeout) throws IOException {
        int n = selector.select(timeout);
        n += selector.selectNow();
        long left = timeout;
        left -= 1;
        n += selector.select(left);
        n += selector.select((SelectionKey k) -> k.cancel(), 5);
        return n;
    }

    static int forever(Selector s) throws IOException {
        return s.select();
    }

    static long notASelector() {
        return Stream.of(1, 2).count();
    }
}
