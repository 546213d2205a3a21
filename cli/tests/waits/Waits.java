import java.net.InetSocketAddress;
import java.nio.channels.DatagramChannel;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;

/** Waits the Java client records: a JDK Selector idle on a datagram channel (two 50 ms selects), and a selectNow. */
public class Waits {
    public static void main(String[] args) throws Exception {
        Selector sel = Selector.open();
        DatagramChannel ch = DatagramChannel.open();
        ch.bind(new InetSocketAddress("127.0.0.1", 0));
        ch.configureBlocking(false);
        ch.register(sel, SelectionKey.OP_READ);
        int n = sel.select(50);
        n += sel.select(50);
        n += sel.selectNow();
        sel.close();
        ch.close();
        System.out.println("ready " + n);
    }
}
