import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import p5.Wire;

/** Checks p5.Wire byte for byte against wire/test_vectors/vectors.json (JDK only). */
public final class WireTest {
    private final String s;
    private int i;

    private WireTest(String s) { this.s = s; }

    private void ws() { while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++; }

    private Object value() {
        ws();
        char c = s.charAt(i);
        if (c == '{') {
            Map<String, Object> m = new LinkedHashMap<>();
            i++;
            ws();
            if (s.charAt(i) == '}') { i++; return m; }
            while (true) {
                ws();
                String k = (String) value();
                ws();
                i++; // :
                m.put(k, value());
                ws();
                if (s.charAt(i++) == '}') return m;
            }
        }
        if (c == '[') {
            List<Object> l = new ArrayList<>();
            i++;
            ws();
            if (s.charAt(i) == ']') { i++; return l; }
            while (true) {
                l.add(value());
                ws();
                if (s.charAt(i++) == ']') return l;
            }
        }
        if (c == '"') {
            StringBuilder b = new StringBuilder();
            i++;
            while (s.charAt(i) != '"') {
                char ch = s.charAt(i++);
                if (ch == '\\') {
                    char e = s.charAt(i++);
                    if (e == 'u') { b.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; }
                    else b.append(e == 'n' ? '\n' : e == 't' ? '\t' : e);
                } else b.append(ch);
            }
            i++;
            return b.toString();
        }
        int start = i;
        while (i < s.length() && "-+0123456789.eE".indexOf(s.charAt(i)) >= 0) i++;
        if (start == i) { // true / false / null
            String w = s.startsWith("true", i) ? "true" : s.startsWith("false", i) ? "false" : "null";
            i += w.length();
            return w.equals("null") ? null : Boolean.valueOf(w);
        }
        return new java.math.BigInteger(s.substring(start, i)).longValue();
    }

    private static long n(Map<String, Object> m, String k) { return (Long) m.get(k); }

    @SuppressWarnings("unchecked")
    private static byte[] encode(Map<String, Object> in) {
        switch ((String) in.get("frame")) {
            case "hello":
                return Wire.hello((int) n(in, "version"), n(in, "caps"), n(in, "process_uid"), n(in, "pid"),
                        n(in, "ppid"), n(in, "start_wall_ns"), n(in, "start_mono_ns"), (int) n(in, "clock"),
                        (int) n(in, "runtime"), (String) in.get("host_id"), (String) in.get("boot_id"),
                        (String) in.get("hostname"), (String) in.get("program"), (String) in.get("session"),
                        (List<String>) in.get("argv"));
            case "stream_open":
                return Wire.streamOpen((int) n(in, "stream"), n(in, "seq"), n(in, "t_p"), (int) n(in, "kind"),
                        n(in, "tid"), (String) in.get("name"));
            case "stream_close":
                return Wire.streamClose((int) n(in, "stream"), n(in, "seq"), n(in, "t_p"), n(in, "t_end"),
                        n(in, "dropped"));
            case "ping":
                return Wire.ping(n(in, "t_p"), n(in, "echo_t_s"), n(in, "echo_t_p"));
            case "goodbye":
                return Wire.goodbye(n(in, "t_p"));
            case "sensors":
                return Wire.sensors((int) n(in, "stream"), n(in, "seq"), n(in, "t_p"), (String) in.get("table"));
            case "events": {
                Wire.Events b = new Wire.Events();
                List<String> ops = List.of("", "send", "recv", "sendto", "recvfrom", "sendmsg", "recvmsg",
                        "read", "write", "connect", "accept", "close", "shutdown");
                for (Object o : (List<Object>) in.get("events")) {
                    Map<String, Object> e = (Map<String, Object>) o;
                    String k = (String) e.get("kind");
                    long t = n(e, "t"), sensor = n(e, "sensor");
                    switch (k) {
                        case "enter": b.add(0, t, sensor, 0); break;
                        case "exit": b.add(1, t, sensor, 0); break;
                        case "mark": b.add(2, t, sensor, 0); break;
                        case "counter": b.add(3, t, sensor, n(e, "value")); break;
                        case "comm":
                            b.comm(t, sensor, ops.indexOf((String) e.get("op")), n(e, "fd"), n(e, "duration"),
                                    n(e, "result"), (String) e.get("peer"));
                            break;
                        case "socket":
                            b.socket(t, sensor, n(e, "fd"), (int) n(e, "proto"), (String) e.get("local"),
                                    (String) e.get("peer"));
                            break;
                        default:
                            return null; // kernel events: not produced by this runtime
                    }
                }
                return b.encode((int) n(in, "stream"), n(in, "seq"), n(in, "t_p"), n(in, "dropped"));
            }
            default:
                return null;
        }
    }

    private static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b) sb.append(String.format("%02x", x));
        return sb.toString();
    }

    @SuppressWarnings("unchecked")
    public static void main(String[] args) throws Exception {
        String text = new String(Files.readAllBytes(Paths.get(args[0])));
        Map<String, Object> root = (Map<String, Object>) new WireTest(text).value();
        int done = 0, failed = 0;
        for (Object o : (List<Object>) root.get("vectors")) {
            Map<String, Object> v = (Map<String, Object>) o;
            byte[] got = encode((Map<String, Object>) v.get("input"));
            if (got == null) continue;
            done++;
            if (!hex(got).equals(v.get("hex"))) {
                failed++;
                System.out.println("MISMATCH " + v.get("name") + "\n  got  " + hex(got) + "\n  want " + v.get("hex"));
            }
        }
        System.out.println(done + " vectors checked, " + failed + " failed");
        if (failed > 0 || done < 7) System.exit(1);
    }
}
