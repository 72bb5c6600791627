import java.io.IOException;
import java.time.Duration;
import java.util.Collection;
import java.util.Collections;
import java.util.Properties;
import java.util.StringJoiner;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A consumer group member as a Java user writes one: subscribe with a
 * rebalance listener, poll, commit synchronously after every batch. Each
 * event is one line on stdout, so a test can follow the member live:
 * "assign 0,1,2", "revoke 0,1,2", "record PARTITION OFFSET VALUE",
 * "committed", "commit-error MESSAGE". It stops (and closes, which revokes)
 * when its stdin closes.
 *
 * Usage: GroupMember BOOTSTRAP TOPIC GROUP PROTOCOL (classic or consumer)
 */
public final class GroupMember {
    private static String partitions(Collection<TopicPartition> parts) {
        StringJoiner out = new StringJoiner(",");
        parts.stream().map(TopicPartition::partition).sorted().forEach(p -> out.add(Integer.toString(p)));
        return out.toString();
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[2]);
        props.put("group.protocol", args[3]);
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        AtomicBoolean halt = new AtomicBoolean();
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // a test writes nothing: end of input means stop
                }
            } catch (IOException ignored) {
                // stop as well
            }
            halt.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(Collections.singletonList(args[1]), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    say("assign " + partitions(parts));
                }

                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    say("revoke " + partitions(parts));
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> parts) {
                    say("revoke " + partitions(parts));
                }
            });
            boolean uncommitted = false;
            while (!halt.get()) {
                ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> record : batch) {
                    say("record " + record.partition() + " " + record.offset() + " " + record.value());
                }
                if (!batch.isEmpty() || uncommitted) {
                    try {
                        consumer.commitSync();
                        uncommitted = false;
                        say("committed");
                    } catch (KafkaException e) {
                        uncommitted = true;
                        say("commit-error " + e);
                    }
                }
            }
        }
    }
}
