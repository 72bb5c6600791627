import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * Transactional producing as a Java user writes it; the same program runs
 * against Apache Kafka and kafkacompat and the test compares what it prints.
 *
 * Usage: Transactions COMMAND BOOTSTRAP key=value...; prints one JSON object
 * (the last line of stdout). Output holds no ids or timestamps, only what a
 * user sees that must match: values, offsets, end offsets, exception types.
 */
public final class Transactions {
    static final Duration POLL = Duration.ofMillis(200);
    static Map<String, String> opts;
    static String bootstrap;

    public static void main(String[] args) throws Exception {
        bootstrap = args[1];
        opts = TestProgram.options(args);
        TestProgram.answer(args[0], Map.of(
            "commit_abort", Transactions::commitAbort,
            "fence", Transactions::fence,
            "hanging", Transactions::hanging,
            "consume_transform_produce", Transactions::consumeTransformProduce));
        System.exit(0);
    }

    static KafkaProducer<String, String> producer(String txnId, int timeoutMs) {
        return TestProgram.stringProducer(TestProgram.config(bootstrap, "transactional.id", txnId,
            "transaction.timeout.ms", Integer.toString(timeoutMs)));
    }

    static KafkaConsumer<String, String> consumer(String isolation, String group) {
        Properties p = TestProgram.config(bootstrap, "isolation.level", isolation, "auto.offset.reset", "earliest",
            "enable.auto.commit", "false");
        if (group != null) p.put("group.id", group);
        if (opts.containsKey("group_protocol")) p.put("group.protocol", opts.get("group_protocol"));
        return TestProgram.stringConsumer(p);
    }

    static void createTopic(String topic, int partitions) throws Exception {
        try (Admin admin = Admin.create(TestProgram.config(bootstrap))) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
        }
    }

    static List<TopicPartition> partitions(String topic, int n) {
        List<TopicPartition> out = new ArrayList<>();
        for (int i = 0; i < n; i++) out.add(new TopicPartition(topic, i));
        return out;
    }

    /** Everything an isolation level shows: "p:offset=value" per record, then end offsets. */
    static String readAll(String topic, int n, String isolation) {
        List<String> seen = new ArrayList<>();
        Map<String, Long> ends = new TreeMap<>();
        try (KafkaConsumer<String, String> c = consumer(isolation, null)) {
            List<TopicPartition> tps = partitions(topic, n);
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            long deadline = System.currentTimeMillis() + 30_000;
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(POLL)) {
                    seen.add(r.partition() + ":" + r.offset() + "=" + r.value());
                }
                boolean done = true;
                for (TopicPartition tp : tps) done &= c.position(tp) >= end.get(tp);
                if (done) break;
            }
            for (TopicPartition tp : tps) {
                ends.put(Integer.toString(tp.partition()), end.get(tp));
            }
        }
        Collections.sort(seen);
        return "{\"records\":" + jsonList(seen) + ",\"end_offsets\":" + jsonMap(ends) + "}";
    }

    /**
     * Wait until no transaction is open on the topic's first n partitions: the read_committed end
     * offsets (last stable offsets) equal the read_uncommitted ones (high watermarks), 30 s at most.
     * Kafka answers EndTxn once the outcome is in its transaction log and writes the markers to the
     * partitions afterwards, so a read right after commitTransaction may still stop at the open
     * transaction. A broker that never writes them is read as it stands, and the outputs differ.
     */
    static void awaitMarkers(String topic, int n) throws InterruptedException {
        List<TopicPartition> tps = partitions(topic, n);
        try (KafkaConsumer<String, String> committed = consumer("read_committed", null);
             KafkaConsumer<String, String> uncommitted = consumer("read_uncommitted", null)) {
            long deadline = System.currentTimeMillis() + 30_000;
            while (!committed.endOffsets(tps).equals(uncommitted.endOffsets(tps))
                    && System.currentTimeMillis() < deadline) {
                Thread.sleep(100);
            }
        }
    }

    static String commitAbort() throws Exception {
        String topic = opts.get("topic");
        createTopic(topic, 2);
        try (KafkaProducer<String, String> p = producer(opts.get("txn"), 60_000)) {
            p.initTransactions();
            p.beginTransaction();
            for (int i = 0; i < 4; i++) p.send(new ProducerRecord<>(topic, i % 2, null, "committed-" + i));
            p.commitTransaction();
            p.beginTransaction();
            for (int i = 0; i < 3; i++) p.send(new ProducerRecord<>(topic, i % 2, null, "aborted-" + i));
            p.flush();
            p.abortTransaction();
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, 1, null, "committed-last"));
            p.commitTransaction();
        }
        awaitMarkers(topic, 2);
        return "{\"read_committed\":" + readAll(topic, 2, "read_committed")
            + ",\"read_uncommitted\":" + readAll(topic, 2, "read_uncommitted") + "}";
    }

    /** A second producer with the same transactional.id fences the first. */
    static String fence() throws Exception {
        String topic = opts.get("topic");
        createTopic(topic, 1);
        String first = "none";
        KafkaProducer<String, String> a = producer(opts.get("txn"), 60_000);
        a.initTransactions();
        a.beginTransaction();
        a.send(new ProducerRecord<>(topic, 0, null, "from-a-open")).get();
        try (KafkaProducer<String, String> b = producer(opts.get("txn"), 60_000)) {
            b.initTransactions(); // aborts a's open transaction and fences a
            try {
                a.send(new ProducerRecord<>(topic, 0, null, "from-a-fenced")).get();
                a.commitTransaction();
            } catch (Exception e) {
                Throwable cause = e.getCause() != null ? e.getCause() : e;
                first = cause.getClass().getSimpleName();
            }
            b.beginTransaction();
            b.send(new ProducerRecord<>(topic, 0, null, "from-b"));
            b.commitTransaction();
        }
        try {
            a.close(Duration.ofSeconds(5));
        } catch (Exception ignored) {
            // a fenced producer may complain on close
        }
        awaitMarkers(topic, 1);
        return "{\"fenced_with\":\"" + first + "\",\"topic\":" + readAll(topic, 1, "read_committed")
            + ",\"uncommitted\":" + readAll(topic, 1, "read_uncommitted") + "}";
    }

    /** An open transaction holds the LSO; its timeout aborts it (the producer is fenced). */
    static String hanging() throws Exception {
        String topic = opts.get("topic");
        createTopic(topic, 1);
        int timeoutMs = Integer.parseInt(opts.get("timeout_ms"));
        try (KafkaProducer<String, String> plain = plainProducer()) {
            plain.send(new ProducerRecord<>(topic, 0, null, "before")).get();
        }
        KafkaProducer<String, String> p = producer(opts.get("txn"), timeoutMs);
        p.initTransactions();
        p.beginTransaction();
        p.send(new ProducerRecord<>(topic, 0, null, "in-open-txn")).get();
        try (KafkaProducer<String, String> plain = plainProducer()) {
            plain.send(new ProducerRecord<>(topic, 0, null, "after")).get();
        }
        String during = readAll(topic, 1, "read_committed");
        String duringUncommitted = readAll(topic, 1, "read_uncommitted");
        // Wait for the coordinator to abort the transaction on its timeout.
        String after = during;
        long deadline = System.currentTimeMillis() + 60_000;
        while (System.currentTimeMillis() < deadline) {
            after = readAll(topic, 1, "read_committed");
            // changed, and settled: a read that raced the abort is not the answer
            if (!after.equals(during) && after.equals(readAll(topic, 1, "read_committed"))) break;
            Thread.sleep(500);
        }
        String outcome = "committed";
        try {
            p.commitTransaction();
        } catch (Exception e) {
            outcome = e.getClass().getSimpleName();
        }
        try {
            p.close(Duration.ofSeconds(5));
        } catch (Exception ignored) {
            // fenced
        }
        return "{\"during\":" + during + ",\"during_uncommitted\":" + duringUncommitted
            + ",\"after_timeout\":" + after + ",\"commit_after_timeout\":\"" + outcome + "\"}";
    }

    static KafkaProducer<String, String> plainProducer() {
        return TestProgram.stringProducer(TestProgram.config(bootstrap));
    }

    /** Read a topic in a group, write upper-cased copies and the group's offsets in one transaction. */
    static String consumeTransformProduce() throws Exception {
        String in = opts.get("topic");
        String out = in + "-out";
        String group = opts.get("group");
        createTopic(in, 1);
        createTopic(out, 1);
        try (KafkaProducer<String, String> plain = plainProducer()) {
            for (int i = 0; i < 10; i++) plain.send(new ProducerRecord<>(in, 0, null, "v" + i));
        }
        List<String> rounds = new ArrayList<>();
        try (KafkaConsumer<String, String> c = consumer("read_committed", group);
             KafkaProducer<String, String> p = producer(opts.get("txn"), 60_000)) {
            p.initTransactions();
            c.subscribe(List.of(in));
            int copied = 0;
            boolean abortNext = true;
            long deadline = System.currentTimeMillis() + 60_000;
            while (copied < 10 && System.currentTimeMillis() < deadline) {
                var records = c.poll(POLL);
                if (records.isEmpty()) continue;
                p.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                int n = 0;
                for (ConsumerRecord<String, String> r : records) {
                    p.send(new ProducerRecord<>(out, 0, null, r.value().toUpperCase()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    n++;
                }
                p.sendOffsetsToTransaction(offsets, c.groupMetadata());
                p.flush(); // what the aborted round wrote is in the log, not dropped unsent
                if (abortNext) {
                    // The first round is aborted: its output vanishes and the group rewinds.
                    p.abortTransaction();
                    abortNext = false;
                    rounds.add("aborted");
                    for (TopicPartition tp : c.assignment()) {
                        OffsetAndMetadata committed = c.committed(java.util.Set.of(tp)).get(tp);
                        c.seek(tp, committed == null ? 0 : committed.offset());
                    }
                    continue;
                }
                p.commitTransaction();
                copied += n;
                rounds.add("committed");
            }
        }
        Map<String, Long> committed = new TreeMap<>();
        try (KafkaConsumer<String, String> c = consumer("read_committed", group)) {
            TopicPartition tp = new TopicPartition(in, 0);
            OffsetAndMetadata om = c.committed(java.util.Set.of(tp)).get(tp);
            committed.put("0", om == null ? -1L : om.offset());
        }
        awaitMarkers(out, 1);
        return "{\"output\":" + readAll(out, 1, "read_committed") + ",\"first_round\":\"" + rounds.get(0)
            + "\",\"committed\":" + jsonMap(committed) + "}";
    }

    static String jsonList(List<String> items) {
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < items.size(); i++) {
            if (i > 0) sb.append(',');
            sb.append('"').append(items.get(i).replace("\"", "\\\"")).append('"');
        }
        return sb.append(']').toString();
    }

    static String jsonMap(Map<String, Long> m) {
        StringBuilder sb = new StringBuilder("{");
        boolean first = true;
        for (Map.Entry<String, Long> e : m.entrySet()) {
            if (!first) sb.append(',');
            first = false;
            sb.append('"').append(e.getKey()).append("\":").append(e.getValue());
        }
        return sb.append('}').toString();
    }
}
