import java.io.IOException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.util.stream.Stream;

class Loop {
    private final Selector selector;

    Loop(Selector selector) { p5.P5.enter(0x92459b0fede266f1L); try {
        this.selector = selector;
    } finally { p5.P5.exit(0x92459b0fede266f1L); } }

    int once(long timeout) throws IOException { p5.P5.enter(0x8da15f6bd3665834L); try {
        int n = p5.P5.selector(0xd4fb30e763ccab10L, selector).select(timeout);
        n += p5.P5.selector(0xc84b6fbce67bc773L, selector).selectNow();
        long left = timeout;
        left -= 1;
        n += p5.P5.selector(0xbb9dae92692e49d6L, selector).select(left);
        n += p5.P5.selector(0xaeeded67ebdd6639L, selector).select((SelectionKey k) -> k.cancel(), 5);
        return n;
    } finally { p5.P5.exit(0x8da15f6bd3665834L); } }

    static int forever(Selector s) throws IOException { p5.P5.enter(0x4982c327f5f0186eL); try {
        return p5.P5.selector(0x2d62b27dc0999076L, s).select();
    } finally { p5.P5.exit(0x4982c327f5f0186eL); } }

    static long notASelector() { p5.P5.enter(0x457aa9e17eb6d968L); try {
        return Stream.of(1, 2).count();
    } finally { p5.P5.exit(0x457aa9e17eb6d968L); } }
}
