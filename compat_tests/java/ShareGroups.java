import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.StringJoiner;
import java.util.TreeMap;

import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Share groups (KIP-932) as a Java user drives KafkaShareConsumer. Each
 * command prints one JSON object of what the consumers saw, so the same
 * steps on Kafka 4.1 and on kafkacompat can be compared:
 * <ul>
 * <li>split: two members of one group share a one-partition topic (the
 * records are produced once both are assigned it); every record reaches
 * one of them once (implicit acknowledgement);</li>
 * <li>acks: explicit ACCEPT, RELEASE and REJECT; only the released record
 * comes back, with delivery count 2;</li>
 * <li>limit: a record released at every delivery is archived after the
 * delivery count limit;</li>
 * <li>stalled: a member takes records and acknowledges nothing; another
 * member gets them once their acquisition lock times out;</li>
 * <li>hold: a member takes records and the process dies without closing
 * (the test then runs drain);</li>
 * <li>drain: another member gets what the dead one held (its connection
 * closed, so its share session ended);</li>
 * <li>prepare: only the topic, its records and the group config;</li>
 * <li>reset: Admin.alterShareGroupOffsets moves an empty group back to
 * offset 0 and a member reads everything again;</li>
 * <li>failover: a member takes N records and accepts the first half; after
 * a line on stdin (the test moved the partition's leader meanwhile) another
 * member reads what is there to read; after another line (the leadership
 * moved again) one more record is produced and a third member reads.</li>
 * <li>txn: with the group's share.isolation.level set to `isolation`, a
 * transactional producer commits, aborts and commits transactions, a plain
 * record follows, then a second one leaves a transaction open with a plain
 * record after it; a member reads until quiet, the open transaction
 * commits, and it reads until quiet again.</li>
 * </ul>
 * Usage: ShareGroups COMMAND BOOTSTRAP topic=T group=G [records=N]
 */
public final class ShareGroups {
    private static final Duration POLL = Duration.ofMillis(200);
    private static final long LOCK_MS = 3000; // both brokers run with group.share.record.lock.duration.ms=3000

    private ShareGroups() {
    }

    private static KafkaShareConsumer<String, String> consumer(String bootstrap, String group, String topic,
                                                               boolean explicit, int maxPollRecords) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        props.put("max.poll.records", Integer.toString(maxPollRecords));
        props.put("share.acknowledgement.mode", explicit ? "explicit" : "implicit");
        KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(props);
        c.subscribe(Collections.singletonList(topic));
        return c;
    }

    /** A one-partition topic with N records, each its own batch, and the group reading from the earliest
     *  (with the share.isolation.level given, if one is). */
    private static void prepare(String bootstrap, String topic, String group, int records, String isolation)
            throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(props)) {
            admin.createTopics(Collections.singletonList(new NewTopic(topic, 1, (short) 1))).all().get();
            ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
            List<AlterConfigOp> ops = new ArrayList<>();
            ops.add(new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET));
            if (isolation != null) {
                ops.add(new AlterConfigOp(new ConfigEntry("share.isolation.level", isolation), AlterConfigOp.OpType.SET));
            }
            admin.incrementalAlterConfigs(Map.of(resource, ops)).all().get();
        }
        produce(bootstrap, topic, records);
    }

    private static KafkaProducer<String, String> transactional(String bootstrap, String id) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        props.put("transactional.id", id);
        KafkaProducer<String, String> p = new KafkaProducer<>(props);
        p.initTransactions();
        return p;
    }

    /** One transaction of the values, each its own batch, committed or aborted. */
    private static void transaction(KafkaProducer<String, String> p, String topic, boolean commit, String... values)
            throws Exception {
        p.beginTransaction();
        for (String v : values) {
            p.send(new ProducerRecord<>(topic, 0, null, v)).get();
        }
        if (commit) {
            p.commitTransaction();
        } else {
            p.abortTransaction();
        }
    }

    /** Records as a member reads them (implicit acknowledgement): until none came for 3 s, within 60 s. */
    private static List<String> untilQuiet(KafkaShareConsumer<String, String> c) {
        List<String> got = new ArrayList<>();
        long quietSince = System.currentTimeMillis();
        long deadline = quietSince + 60_000;
        while (System.currentTimeMillis() - quietSince < 3_000 && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : c.poll(POLL)) {
                got.add(seen(r));
                quietSince = System.currentTimeMillis();
            }
        }
        return got;
    }

    /** Offsets: c0 0, c1 1, commit 2, a0 3, a1 4, abort 5, c2 6, commit 7, p0 8, o0 9, o1 10, p1 11, commit 12. */
    private static String txn(String bootstrap, String topic, String group) throws Exception {
        try (KafkaProducer<String, String> done = transactional(bootstrap, topic + "-done");
             KafkaProducer<String, String> open = transactional(bootstrap, topic + "-open");
             KafkaShareConsumer<String, String> c = consumer(bootstrap, group, topic, false, 500)) {
            transaction(done, topic, true, "c0", "c1");
            transaction(done, topic, false, "a0", "a1");
            transaction(done, topic, true, "c2");
            produce(bootstrap, topic, "p0");
            open.beginTransaction();
            open.send(new ProducerRecord<>(topic, 0, null, "o0")).get();
            open.send(new ProducerRecord<>(topic, 0, null, "o1")).get();
            produce(bootstrap, topic, "p1");
            List<String> first = pollUntil(c, 1, 60_000); // the member has joined and reads
            first.addAll(untilQuiet(c));
            open.commitTransaction();
            List<String> after = untilQuiet(c);
            c.poll(Duration.ZERO);
            c.close();
            return "{\"while_open\":" + list(first) + ",\"after_commit\":" + list(after)
                    + ",\"start_offset\":" + TestProgram.json(startOffset(bootstrap, topic, group)) + "}";
        }
    }

    /** The group's share-partition start offset as Admin.listShareGroupOffsets shows it. */
    private static String startOffset(String bootstrap, String topic, String group) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(props)) {
            OffsetAndMetadata info = admin.listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
                    .partitionsToOffsetAndMetadata(group).get().get(new TopicPartition(topic, 0));
            return info == null ? "none" : Long.toString(info.offset());
        }
    }

    /** One plain record to partition 0. */
    private static void produce(String bootstrap, String topic, String value) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            producer.send(new ProducerRecord<>(topic, 0, null, value)).get();
        }
    }

    /** N records v0..v(N-1) to partition 0, each its own batch. */
    private static void produce(String bootstrap, String topic, int records) throws Exception {
        produce(bootstrap, topic, 0, records);
    }

    /** Records v(from)..v(to-1) to partition 0, each its own batch. */
    private static void produce(String bootstrap, String topic, int from, int to) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int i = from; i < to; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, "v" + i)).get();
            }
        }
    }

    /** Whether the group has `members` members, each assigned the partition (Admin.describeShareGroups). */
    private static boolean joined(Admin admin, String group, int members) throws Exception {
        ShareGroupDescription d;
        try {
            d = admin.describeShareGroups(List.of(group)).describedGroups().get(group).get();
        } catch (ExecutionException e) { // no such group until the first member's heartbeat
            return false;
        }
        return d.members().size() == members
                && d.members().stream().allMatch(m -> !m.assignment().topicPartitions().isEmpty());
    }

    private static String seen(ConsumerRecord<String, String> r) {
        return r.value() + "@" + r.offset() + "#" + r.deliveryCount().map(String::valueOf).orElse("?");
    }

    private static String list(List<String> items) {
        StringJoiner out = new StringJoiner(",", "[", "]");
        items.forEach(s -> out.add(TestProgram.json(s)));
        return out.toString();
    }

    private static List<String> pollUntil(KafkaShareConsumer<String, String> c, int want, long timeoutMs) {
        List<String> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (got.size() < want && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : c.poll(POLL)) {
                got.add(seen(r));
            }
        }
        return got;
    }

    private static String outcome(Map<TopicIdPartition, Optional<KafkaException>> result) {
        StringJoiner out = new StringJoiner(",", "[", "]");
        result.values().forEach(e -> out.add(TestProgram.json(e.map(x -> x.getClass().getSimpleName()).orElse("ok"))));
        return out.toString();
    }

    private static String split(String bootstrap, String topic, String group, int records) throws Exception {
        List<String> a = new ArrayList<>();
        List<String> b = new ArrayList<>();
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        try (KafkaShareConsumer<String, String> ca = consumer(bootstrap, group, topic, false, 2);
             KafkaShareConsumer<String, String> cb = consumer(bootstrap, group, topic, false, 2);
             Admin admin = Admin.create(props)) {
            long deadline = System.currentTimeMillis() + 60_000;
            // both members share the partition before there is anything to read
            while (!joined(admin, group, 2) && System.currentTimeMillis() < deadline) {
                ca.poll(POLL);
                cb.poll(POLL);
            }
            produce(bootstrap, topic, records);
            while (a.size() + b.size() < records && System.currentTimeMillis() < deadline) {
                ca.poll(POLL).forEach(r -> a.add(seen(r)));
                cb.poll(POLL).forEach(r -> b.add(seen(r)));
            }
            // both poll once more: the last records are acknowledged (implicitly) before closing
            ca.poll(Duration.ZERO).forEach(r -> a.add(seen(r)));
            cb.poll(Duration.ZERO).forEach(r -> b.add(seen(r)));
        }
        TreeMap<Integer, String> all = new TreeMap<>();
        for (String s : a) {
            all.put(Integer.parseInt(s.substring(1, s.indexOf('@'))), s);
        }
        for (String s : b) {
            all.put(Integer.parseInt(s.substring(1, s.indexOf('@'))), s);
        }
        return "{\"records\":" + list(new ArrayList<>(all.values())) + ",\"total\":" + (a.size() + b.size())
                + ",\"both_got_some\":" + (!a.isEmpty() && !b.isEmpty()) + "}";
    }

    private static String acks(String bootstrap, String topic, String group) {
        try (KafkaShareConsumer<String, String> c = consumer(bootstrap, group, topic, true, 500)) {
            List<String> first = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 60_000;
            while (first.size() < 3 && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> got = c.poll(POLL);
                for (ConsumerRecord<String, String> r : got) {
                    first.add(seen(r));
                    AcknowledgeType type = r.value().equals("v0") ? AcknowledgeType.ACCEPT
                            : r.value().equals("v1") ? AcknowledgeType.RELEASE : AcknowledgeType.REJECT;
                    c.acknowledge(r, type);
                }
            }
            String committed = outcome(c.commitSync());
            List<String> again = new ArrayList<>();
            long until = System.currentTimeMillis() + 4_000;
            while (System.currentTimeMillis() < until) {
                for (ConsumerRecord<String, String> r : c.poll(POLL)) {
                    again.add(seen(r));
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                }
            }
            String committedAgain = outcome(c.commitSync());
            return "{\"first\":" + list(first) + ",\"commit\":" + committed + ",\"redelivered\":" + list(again)
                    + ",\"commit_again\":" + committedAgain + "}";
        }
    }

    private static String limit(String bootstrap, String topic, String group) {
        List<String> deliveries = new ArrayList<>();
        try (KafkaShareConsumer<String, String> c = consumer(bootstrap, group, topic, true, 500)) {
            long quietSince = System.currentTimeMillis();
            long deadline = quietSince + 60_000;
            while (System.currentTimeMillis() - quietSince < 3_000 && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> got = c.poll(POLL);
                for (ConsumerRecord<String, String> r : got) {
                    deliveries.add(seen(r));
                    c.acknowledge(r, AcknowledgeType.RELEASE);
                    quietSince = System.currentTimeMillis();
                }
                if (!got.isEmpty()) {
                    c.commitSync();
                }
            }
        }
        return "{\"deliveries\":" + list(deliveries) + "}";
    }

    private static String stalled(String bootstrap, String topic, String group, int records) {
        try (KafkaShareConsumer<String, String> a = consumer(bootstrap, group, topic, true, 500);
             KafkaShareConsumer<String, String> b = consumer(bootstrap, group, topic, false, 500)) {
            List<String> held = pollUntil(a, records, 60_000);
            long start = System.currentTimeMillis();
            List<String> got = pollUntil(b, records, 60_000);
            long waited = System.currentTimeMillis() - start;
            b.poll(Duration.ZERO);
            return "{\"held\":" + list(held) + ",\"redelivered\":" + list(got)
                    + ",\"after_lock_timeout\":" + (waited >= LOCK_MS / 2) + "}";
        }
    }

    private static String hold(String bootstrap, String topic, String group, int records) {
        KafkaShareConsumer<String, String> c = consumer(bootstrap, group, topic, true, 500);
        List<String> got = pollUntil(c, records, 60_000);
        System.out.println("{\"held\":" + list(got) + "}");
        System.out.flush();
        Runtime.getRuntime().halt(0); // dies as a killed process does: no acknowledgement, no leave
        return null;
    }

    private static String drain(String bootstrap, String topic, String group, int records) {
        try (KafkaShareConsumer<String, String> c = consumer(bootstrap, group, topic, false, 500)) {
            List<String> got = pollUntil(c, records, 60_000);
            c.poll(Duration.ZERO);
            return "{\"drained\":" + list(got) + "}";
        }
    }

    private static String reset(String bootstrap, String topic, String group, int records) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        TopicPartition tp = new TopicPartition(topic, 0);
        String altered;
        String listed;
        try (Admin admin = Admin.create(props)) {
            try {
                admin.alterShareGroupOffsets(group, Map.of(tp, 0L)).all().get();
                altered = "ok";
            } catch (ExecutionException e) {
                altered = e.getCause().getClass().getSimpleName();
            }
            OffsetAndMetadata info = admin.listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
                    .partitionsToOffsetAndMetadata(group).get().get(tp);
            listed = info == null ? "none" : Long.toString(info.offset());
        }
        try (KafkaShareConsumer<String, String> c = consumer(bootstrap, group, topic, false, 500)) {
            List<String> got = pollUntil(c, records, 60_000);
            c.poll(Duration.ZERO);
            return "{\"altered\":" + TestProgram.json(altered) + ",\"listed\":" + TestProgram.json(listed)
                    + ",\"read_again\":" + list(got) + "}";
        }
    }

    private static String failover(String bootstrap, String topic, String group, int records) throws Exception {
        int accepted = records / 2;
        List<String> held = new ArrayList<>();
        KafkaShareConsumer<String, String> first = consumer(bootstrap, group, topic, true, 500);
        long deadline = System.currentTimeMillis() + 60_000;
        while (held.size() < records && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : first.poll(POLL)) {
                held.add(seen(r));
                if (r.offset() < accepted) {
                    first.acknowledge(r, AcknowledgeType.ACCEPT);
                }
            }
        }
        String committed = outcome(first.commitSync());
        step("{\"held\":" + list(held) + ",\"commit\":" + committed + "}"); // the test moves the leader
        first.close(Duration.ofSeconds(5)); // its records were held on the leader before: releasing them may fail
        step("{\"after_move\":" + list(readAll(bootstrap, group, topic, records - accepted)) + "}");
        produce(bootstrap, topic, records, records + 1); // v(N) at offset N
        return "{\"after_return\":" + list(readAll(bootstrap, group, topic, 1)) + "}";
    }

    /** Print a line of what was seen, then wait until the test has done its part and writes a line. */
    private static void step(String line) throws java.io.IOException {
        System.out.println(line);
        System.out.flush();
        STDIN.readLine();
    }

    private static final java.io.BufferedReader STDIN =
            new java.io.BufferedReader(new java.io.InputStreamReader(System.in));

    /** What a new member of the group reads (accepting it): `want` records, and anything more within 3 s. */
    private static List<String> readAll(String bootstrap, String group, String topic, int want) {
        List<String> got = new ArrayList<>();
        try (KafkaShareConsumer<String, String> c = consumer(bootstrap, group, topic, false, 500)) {
            got.addAll(pollUntil(c, want, 90_000));
            got.addAll(pollUntil(c, Integer.MAX_VALUE, 3_000));
            c.poll(Duration.ZERO);
        }
        return got;
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = TestProgram.options(args);
        String bootstrap = args[1];
        String topic = opts.get("topic");
        String group = opts.get("group");
        int records = Integer.parseInt(opts.getOrDefault("records", "3"));
        if (!args[0].equals("drain") && !args[0].equals("reset")) {
            boolean later = args[0].equals("split") || args[0].equals("txn"); // these produce later
            prepare(bootstrap, topic, group, later ? 0 : records, opts.get("isolation"));
        }
        String out;
        switch (args[0]) {
            case "split":
                out = split(bootstrap, topic, group, records);
                break;
            case "acks":
                out = acks(bootstrap, topic, group);
                break;
            case "limit":
                out = limit(bootstrap, topic, group);
                break;
            case "stalled":
                out = stalled(bootstrap, topic, group, records);
                break;
            case "hold":
                out = hold(bootstrap, topic, group, records);
                break;
            case "prepare":
                out = "{}";
                break;
            case "reset":
                out = reset(bootstrap, topic, group, records);
                break;
            case "failover":
                out = failover(bootstrap, topic, group, records);
                break;
            case "txn":
                out = txn(bootstrap, topic, group);
                break;
            case "drain":
                out = drain(bootstrap, topic, group, records);
                break;
            default:
                throw new IllegalArgumentException("unknown command " + args[0]);
        }
        System.out.println(out);
    }
}
