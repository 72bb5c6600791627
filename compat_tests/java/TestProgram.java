import java.util.HashMap;
import java.util.Map;

/**
 * What the test programs share: they are run as `PROGRAM COMMAND BOOTSTRAP
 * key=value...` and print their answer as one JSON object.
 */
final class TestProgram {
    private TestProgram() {
    }

    /** The key=value arguments that follow COMMAND and BOOTSTRAP. */
    static Map<String, String> options(String[] args) {
        Map<String, String> opts = new HashMap<>();
        for (int i = 2; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            opts.put(kv[0], kv[1]);
        }
        return opts;
    }

    /** `s` as a JSON string, or null. */
    static String json(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
