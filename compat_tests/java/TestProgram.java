import java.util.HashMap;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * What the test programs share: they are run as `PROGRAM COMMAND BOOTSTRAP
 * key=value...` and print their answer as one JSON object.
 */
final class TestProgram {
    private TestProgram() {
    }

    /** One command of a program: its answer, one JSON object. */
    interface Command {
        String run() throws Exception;
    }

    /** Runs the command named `name` among `commands` and prints its answer (the last line of stdout). */
    static void answer(String name, Map<String, Command> commands) throws Exception {
        Command command = commands.get(name);
        if (command == null) {
            throw new IllegalArgumentException("unknown command " + name);
        }
        System.out.println(command.run());
    }

    /** Client settings: bootstrap.servers, then `settings` as key, value, key, value... */
    static Properties config(String bootstrap, String... settings) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        for (int i = 0; i < settings.length; i += 2) {
            p.put(settings[i], settings[i + 1]);
        }
        return p;
    }

    /** A producer of String keys and values. */
    static KafkaProducer<String, String> stringProducer(Properties p) {
        return new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
    }

    /** A consumer of String keys and values. */
    static KafkaConsumer<String, String> stringConsumer(Properties p) {
        return new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
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
