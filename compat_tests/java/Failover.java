import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A consumer group member as a Java user writes one, for failover between
 * replicated clusters: read up to MAX records of TOPIC in GROUP from
 * BOOTSTRAP, committing each one synchronously when COMMIT is true, and
 * stop after MAX records or IDLE_MS without one.
 *
 * Usage: Failover BOOTSTRAP TOPIC GROUP MAX COMMIT IDLE_MS; prints the values
 * read as a JSON list of strings (the last line of stdout).
 */
public final class Failover {
    public static void main(String[] args) {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[2]);
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        int max = Integer.parseInt(args[3]);
        boolean commit = Boolean.parseBoolean(args[4]);
        long idleMs = Long.parseLong(args[5]);
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(Collections.singletonList(args[1]));
            long lastSeen = System.currentTimeMillis();
            while (values.size() < max && System.currentTimeMillis() - lastSeen < idleMs) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    if (values.size() >= max) {
                        break;
                    }
                    values.add(record.value());
                    lastSeen = System.currentTimeMillis();
                    if (commit) {
                        consumer.commitSync(Map.of(new TopicPartition(record.topic(), record.partition()),
                                new OffsetAndMetadata(record.offset() + 1, "java")));
                    }
                }
            }
        }
        StringBuilder out = new StringBuilder("[");
        for (int i = 0; i < values.size(); i++) {
            out.append(i == 0 ? "" : ",").append('"').append(values.get(i)).append('"');
        }
        System.out.println(out.append(']'));
    }
}
