import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * The compatibility scenarios as a user of the Java client writes them.
 *
 * Usage: Scenarios COMMAND BOOTSTRAP key=value...; prints one JSON object
 * on stdout (the last line). The Python driver (compat_tests/drivers/java.py)
 * calls one command per JVM and the tests judge the answer.
 */
public final class Scenarios {
    static final long TIMEOUT_MS = 30_000;
    static final String TRACE = "0af7651916cd43dd8448eb211c80319c"; // header value, as in scenario_data.py
    static Map<String, String> opts;
    static String bootstrap;

    public static void main(String[] args) throws Exception {
        bootstrap = args[1];
        opts = TestProgram.options(args);
        TestProgram.answer(args[0], Map.of(
            "produce", Scenarios::produce,
            "consume", Scenarios::consume,
            "group_consume", Scenarios::groupConsume,
            "group_of_three", Scenarios::groupOfThree,
            "create_describe_topic", Scenarios::createDescribeTopic,
            "alter_configs", Scenarios::alterConfigs,
            "create_partitions", Scenarios::createPartitions,
            "delete_records", Scenarios::deleteRecords,
            "delete_topic", Scenarios::deleteTopic,
            "list_describe_groups", Scenarios::listDescribeGroups));
    }

    static String opt(String name, String fallback) {
        return opts.getOrDefault(name, fallback);
    }

    static int num(String name, int fallback) {
        return Integer.parseInt(opt(name, Integer.toString(fallback)));
    }

    // ------------------------------------------------------------ clients

    static KafkaProducer<String, String> producer(String acks, String compression, boolean idempotent) {
        return TestProgram.stringProducer(TestProgram.config(bootstrap, "acks", acks, "compression.type", compression,
            "enable.idempotence", Boolean.toString(idempotent), "linger.ms", "5",
            "delivery.timeout.ms", Long.toString(TIMEOUT_MS), "request.timeout.ms", "10000"));
    }

    static KafkaConsumer<String, String> consumer(String group) {
        Properties p = TestProgram.config(bootstrap, "enable.auto.commit", "false", "auto.offset.reset", "earliest");
        if (group != null) {
            p.put("group.id", group);
            p.put("session.timeout.ms", "10000");
            p.put("heartbeat.interval.ms", "500");
        }
        return TestProgram.stringConsumer(p);
    }

    static Admin admin() {
        return Admin.create(TestProgram.config(bootstrap, "default.api.timeout.ms", Long.toString(TIMEOUT_MS)));
    }

    static List<Long> send(KafkaProducer<String, String> producer, String topic, int n, String prefix, int partition)
            throws Exception {
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            RecordHeaders headers = new RecordHeaders();
            headers.add("src", "compat".getBytes());
            headers.add("trace", TRACE.getBytes());
            sent.add(producer.send(new ProducerRecord<>(
                topic, partition, null, prefix + "k" + i, prefix + "v" + i, headers)));
        }
        producer.flush();
        List<Long> offsets = new ArrayList<>();
        for (Future<RecordMetadata> f : sent) {
            RecordMetadata m = f.get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
            offsets.add(m.hasOffset() ? m.offset() : -1L);
        }
        return offsets;
    }

    static List<ConsumerRecord<String, String>> read(KafkaConsumer<String, String> consumer, int n) {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        long deadline = System.currentTimeMillis() + TIMEOUT_MS;
        while (out.size() < n) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("timed out after " + out.size() + " of " + n + " records");
            }
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                out.add(r);
            }
        }
        return out;
    }

    // ------------------------------------------------------------ commands

    static String produce() throws Exception {
        boolean idempotent = Boolean.parseBoolean(opt("idempotent", "false"));
        try (KafkaProducer<String, String> producer = producer(
                opt("acks", "all"), opt("compression", "none"), idempotent)) {
            List<Long> offsets = send(producer, opt("topic", ""), num("n", 1), opt("prefix", ""), num("partition", 0));
            return "{\"offsets\":" + Json.list(offsets) + "}";
        }
    }

    static String consume() throws Exception {
        String topic = opt("topic", "");
        TopicPartition tp = new TopicPartition(topic, num("partition", 0));
        String start = opt("start", "earliest");
        try (KafkaConsumer<String, String> consumer = consumer(null)) {
            consumer.assign(List.of(tp));
            if (start.equals("earliest")) {
                consumer.seekToBeginning(List.of(tp));
            } else if (start.equals("latest")) {
                consumer.seekToEnd(List.of(tp));
            } else {
                Map<TopicPartition, OffsetAndTimestamp> found =
                    consumer.offsetsForTimes(Map.of(tp, Long.parseLong(start)));
                OffsetAndTimestamp at = found.get(tp);
                if (at == null) {
                    throw new IllegalStateException("no offset for timestamp " + start);
                }
                consumer.seek(tp, at.offset());
            }
            int after = num("produce_after", 0);
            if (after > 0) {
                consumer.position(tp, Duration.ofMillis(TIMEOUT_MS)); // resolves "latest" now
                try (KafkaProducer<String, String> producer = producer("all", "none", true)) {
                    send(producer, topic, after, "new-", tp.partition());
                }
            }
            return "{\"records\":" + Json.records(read(consumer, num("n", 1))) + "}";
        }
    }

    static String groupConsume() {
        String topic = opt("topic", "");
        int n = num("n", 1);
        try (KafkaConsumer<String, String> consumer = consumer(opt("group", ""))) {
            consumer.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> got = read(consumer, n).subList(0, n);
            ConsumerRecord<String, String> last = got.get(n - 1);
            consumer.commitSync(Map.of(
                new TopicPartition(topic, last.partition()), new OffsetAndMetadata(last.offset() + 1)));
            return "{\"records\":" + Json.records(got) + "}";
        }
    }

    static List<List<Integer>> owned(List<KafkaConsumer<String, String>> members) {
        List<List<Integer>> out = new ArrayList<>();
        for (KafkaConsumer<String, String> m : members) {
            List<Integer> parts = new ArrayList<>();
            for (TopicPartition tp : m.assignment()) {
                parts.add(tp.partition());
            }
            Collections.sort(parts);
            out.add(parts);
        }
        return out;
    }

    static boolean spread(List<KafkaConsumer<String, String>> members) {
        Set<Integer> all = new TreeSet<>();
        int count = 0;
        for (List<Integer> parts : owned(members)) {
            if (parts.isEmpty()) {
                return false;
            }
            all.addAll(parts);
            count += parts.size();
        }
        return count == 3 && all.equals(Set.of(0, 1, 2));
    }

    static void pollUntilSpread(List<KafkaConsumer<String, String>> members, String what) {
        long deadline = System.currentTimeMillis() + 60_000;
        while (!spread(members)) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("timed out waiting for " + what + ": " + owned(members));
            }
            for (KafkaConsumer<String, String> m : members) {
                m.poll(Duration.ofMillis(50));
            }
        }
    }

    static String groupOfThree() {
        String topic = opt("topic", "");
        List<KafkaConsumer<String, String>> members = new ArrayList<>();
        try {
            for (int i = 0; i < 3; i++) {
                KafkaConsumer<String, String> m = consumer(opt("group", ""));
                m.subscribe(List.of(topic));
                members.add(m);
            }
            pollUntilSpread(members, "three members holding a partition each");
            String before = Json.nested(owned(members));
            members.remove(0).close();
            pollUntilSpread(members, "two members holding all partitions");
            return "{\"before\":" + before + ",\"after\":" + Json.nested(owned(members)) + "}";
        } finally {
            for (KafkaConsumer<String, String> m : members) {
                m.close();
            }
        }
    }

    static int partitions(Admin admin, String topic) throws Exception {
        return admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
    }

    static String createDescribeTopic() throws Exception {
        String topic = opt("topic", "");
        try (Admin admin = admin()) {
            admin.createTopics(List.of(new NewTopic(topic, num("partitions", 1), (short) 1))).all().get();
            // "It may take several seconds after CreateTopicsResult returns success for all the brokers to
            // become aware that the topics have been created" (Kafka's Admin javadoc), as after deleteTopics
            long deadline = System.currentTimeMillis() + 10_000;
            boolean listed;
            while (!(listed = admin.listTopics().names().get().contains(topic)) && System.currentTimeMillis() < deadline) {
                Thread.sleep(100);
            }
            return "{\"partitions\":" + partitions(admin, topic) + ",\"listed\":" + listed + "}";
        }
    }

    static String retention(Admin admin, ConfigResource resource) throws Exception {
        return admin.describeConfigs(List.of(resource)).all().get().get(resource).get("retention.ms").value();
    }

    static String alterConfigs() throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, opt("topic", ""));
        try (Admin admin = admin()) {
            String before = retention(admin, resource);
            Map<ConfigResource, Collection<AlterConfigOp>> change = Map.of(resource, List.of(new AlterConfigOp(
                new ConfigEntry("retention.ms", opt("value", "")), AlterConfigOp.OpType.SET)));
            admin.incrementalAlterConfigs(change).all().get();
            return "{\"before\":" + TestProgram.json(before)
                + ",\"after\":" + TestProgram.json(retention(admin, resource)) + "}";
        }
    }

    static String createPartitions() throws Exception {
        String topic = opt("topic", "");
        try (Admin admin = admin()) {
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(num("total", 1)))).all().get();
            return "{\"partitions\":" + partitions(admin, topic) + "}";
        }
    }

    static String deleteRecords() throws Exception {
        TopicPartition tp = new TopicPartition(opt("topic", ""), 0);
        try (Admin admin = admin()) {
            admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(num("before", 0)))).all().get();
            long low = admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp).get().offset();
            return "{\"low\":" + low + "}";
        }
    }

    static String deleteTopic() throws Exception {
        String topic = opt("topic", "");
        try (Admin admin = admin()) {
            admin.deleteTopics(List.of(topic)).all().get();
            // "it may take several seconds ... for all the brokers to become aware that the topics are gone"
            long deadline = System.currentTimeMillis() + 10_000;
            boolean listed;
            while ((listed = admin.listTopics().names().get().contains(topic)) && System.currentTimeMillis() < deadline) {
                Thread.sleep(100);
            }
            return "{\"listed\":" + listed + "}";
        }
    }

    static String listDescribeGroups() throws Exception {
        String topic = opt("topic", "");
        String group = opt("group", "");
        try (KafkaConsumer<String, String> member = consumer(group); Admin admin = admin()) {
            member.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + TIMEOUT_MS;
            while (member.assignment().isEmpty()) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("timed out waiting for an assignment");
                }
                member.poll(Duration.ofMillis(100));
            }
            boolean listed = false;
            for (ConsumerGroupListing g : admin.listConsumerGroups().all().get()) {
                listed |= g.groupId().equals(group);
            }
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            List<Integer> parts = new ArrayList<>();
            for (MemberDescription m : d.members()) {
                for (TopicPartition tp : m.assignment().topicPartitions()) {
                    parts.add(tp.partition());
                }
            }
            Collections.sort(parts);
            return "{\"listed\":" + listed + ",\"state\":" + TestProgram.json(d.state().toString())
                + ",\"members\":" + d.members().size() + ",\"partitions\":" + Json.list(parts) + "}";
        }
    }

    /** Just enough JSON for the answers above. */
    static final class Json {
        static String list(List<?> items) {
            List<String> parts = new ArrayList<>();
            for (Object o : items) {
                parts.add(String.valueOf(o));
            }
            return "[" + String.join(",", parts) + "]";
        }

        static String nested(List<List<Integer>> items) {
            List<String> parts = new ArrayList<>();
            for (List<Integer> l : items) {
                parts.add(list(l));
            }
            return "[" + String.join(",", parts) + "]";
        }

        static String records(List<ConsumerRecord<String, String>> records) {
            List<String> parts = new ArrayList<>();
            for (ConsumerRecord<String, String> r : records) {
                List<String> headers = new ArrayList<>();
                for (Header h : r.headers()) {
                    headers.add("[" + TestProgram.json(h.key()) + "," + TestProgram.json(new String(h.value())) + "]");
                }
                parts.add("{\"p\":" + r.partition() + ",\"o\":" + r.offset() + ",\"k\":" + TestProgram.json(r.key())
                    + ",\"v\":" + TestProgram.json(r.value()) + ",\"ts\":" + r.timestamp()
                    + ",\"h\":[" + String.join(",", headers) + "]}");
            }
            return "[" + String.join(",", parts) + "]";
        }
    }
}
