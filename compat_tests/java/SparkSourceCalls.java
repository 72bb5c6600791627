import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Kafka calls Spark 4's Kafka source and sink make, without Spark.
 *
 * The driver plans offset ranges through the AdminClient (describeTopics,
 * listOffsets earliest / latest / forTimestamp); executors read each range
 * with a consumer that is assigned, seeks and polls, without a group; the
 * sink writes byte arrays with an idempotent acks=all producer.
 * Usage: SparkSourceCalls COMMAND BOOTSTRAP key=value...; prints one JSON
 * object as its last line.
 */
public final class SparkSourceCalls {
    static final long TIMEOUT_MS = 30_000;
    static Map<String, String> opts;
    static String bootstrap;

    public static void main(String[] args) throws Exception {
        bootstrap = args[1];
        opts = TestProgram.options(args);
        TestProgram.answer(args[0], Map.of(
            "plan", SparkSourceCalls::plan,
            "read", SparkSourceCalls::read,
            "write", SparkSourceCalls::write));
    }

    /** Driver side: partitions, then earliest, latest and by-time offsets per partition. */
    static String plan() throws Exception {
        String topic = opts.get("topic");
        long timestamp = Long.parseLong(opts.get("timestamp"));
        try (Admin admin = Admin.create(TestProgram.config(bootstrap, "default.api.timeout.ms",
                Long.toString(TIMEOUT_MS)))) {
            TopicDescription description = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            List<TopicPartition> parts = new ArrayList<>();
            for (TopicPartitionInfo info : description.partitions()) {
                parts.add(new TopicPartition(topic, info.partition()));
            }
            return "{\"partitions\":" + parts.size()
                + ",\"earliest\":" + offsets(admin, parts, OffsetSpec.earliest())
                + ",\"latest\":" + offsets(admin, parts, OffsetSpec.latest())
                + ",\"by_time\":" + offsets(admin, parts, OffsetSpec.forTimestamp(timestamp)) + "}";
        }
    }

    static String offsets(Admin admin, List<TopicPartition> parts, OffsetSpec spec) throws Exception {
        Map<TopicPartition, OffsetSpec> wanted = new HashMap<>();
        for (TopicPartition tp : parts) {
            wanted.put(tp, spec);
        }
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> found = admin.listOffsets(wanted).all().get();
        List<String> items = new ArrayList<>();
        for (TopicPartition tp : parts) {
            items.add(Long.toString(found.get(tp).offset()));
        }
        return "[" + String.join(",", items) + "]";
    }

    /** Executor side: one offset range [from, until) of one partition, no group. */
    static String read() {
        TopicPartition tp = new TopicPartition(opts.get("topic"), Integer.parseInt(opts.get("partition")));
        long from = Long.parseLong(opts.get("from"));
        long until = Long.parseLong(opts.get("until"));
        Properties p = TestProgram.config(bootstrap, "enable.auto.commit", "false", "auto.offset.reset", "none");
        List<String> records = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer =
                 new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            consumer.assign(List.of(tp));
            consumer.seek(tp, from);
            long deadline = System.currentTimeMillis() + TIMEOUT_MS;
            long next = from;
            while (next < until) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("timed out at offset " + next + " of [" + from + ", " + until + ")");
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    if (r.offset() >= until) {
                        continue;
                    }
                    if (r.offset() != next) {
                        throw new IllegalStateException("expected offset " + next + " but got " + r.offset());
                    }
                    next = r.offset() + 1;
                    List<String> headers = new ArrayList<>();
                    for (Header h : r.headers()) {
                        headers.add("[" + TestProgram.json(h.key()) + "," + TestProgram.json(new String(h.value())) + "]");
                    }
                    records.add("{\"p\":" + r.partition() + ",\"o\":" + r.offset()
                        + ",\"k\":" + TestProgram.json(r.key() == null ? null : new String(r.key()))
                        + ",\"v\":" + TestProgram.json(new String(r.value())) + ",\"ts\":" + r.timestamp()
                        + ",\"h\":[" + String.join(",", headers) + "]}");
                }
            }
        }
        return "{\"records\":[" + String.join(",", records) + "]}";
    }

    /** The sink: byte arrays through an idempotent acks=all producer, keyed. */
    static String write() throws Exception {
        Properties p = TestProgram.config(bootstrap, "acks", "all", "enable.idempotence", "true");
        String topic = opts.get("topic");
        int n = Integer.parseInt(opts.get("n"));
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer =
                 new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = 0; i < n; i++) {
                RecordHeaders headers = new RecordHeaders();
                headers.add("row", Integer.toString(i).getBytes());
                sent.add(producer.send(new ProducerRecord<>(
                    topic, null, ("key" + i).getBytes(), ("row" + i).getBytes(), headers)));
            }
            producer.flush();
            List<String> acks = new ArrayList<>();
            for (Future<RecordMetadata> f : sent) {
                RecordMetadata m = f.get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
                acks.add("[" + m.partition() + "," + m.offset() + "]");
            }
            return "{\"acks\":[" + String.join(",", acks) + "]}";
        }
    }
}
