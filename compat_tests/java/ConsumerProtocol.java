import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.function.BooleanSupplier;
import java.util.regex.Pattern;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * The compatibility scenarios of the consumer group protocol (KIP-848, group.protocol=consumer)
 * as a Java user writes them: the broker assigns partitions, a member gives up only what moves.
 *
 * Usage: ConsumerProtocol COMMAND BOOTSTRAP key=value...; prints one JSON object (the last line),
 * as Scenarios does. Several members of one group are polled in turn from this one thread: the
 * consumer protocol's heartbeats run in each consumer's background thread.
 */
public final class ConsumerProtocol {
    static final long TIMEOUT_MS = 30_000;
    static Map<String, String> opts;
    static String bootstrap;

    public static void main(String[] args) throws Exception {
        bootstrap = args[1];
        opts = TestProgram.options(args);
        TestProgram.answer(args[0], Map.of(
            "group_consume", ConsumerProtocol::groupConsume,
            "join_and_leave", ConsumerProtocol::joinAndLeave,
            "regex", ConsumerProtocol::regex,
            "static_member", ConsumerProtocol::staticMember));
    }

    /** One member: its consumer and what its rebalance listener was told to give up. */
    static final class Member implements ConsumerRebalanceListener, AutoCloseable {
        final KafkaConsumer<String, String> consumer;
        final List<List<Integer>> revoked = new ArrayList<>();
        final List<ConsumerRecord<String, String>> records = new ArrayList<>();

        Member(String instanceId) {
            Properties p = TestProgram.config(bootstrap, "group.id", opts.get("group"), "group.protocol", "consumer",
                "enable.auto.commit", "false", "auto.offset.reset", "earliest");
            if (instanceId != null) {
                p.put("group.instance.id", instanceId);
            }
            consumer = TestProgram.stringConsumer(p);
        }

        Member subscribed() {
            consumer.subscribe(List.of(opts.get("topic")), this);
            return this;
        }

        void poll() {
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(50))) {
                records.add(r);
            }
        }

        List<Integer> owned() {
            return partitions(consumer.assignment());
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> parts) {
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> parts) {
            if (!parts.isEmpty()) {
                revoked.add(partitions(parts));
            }
        }

        @Override
        public void close() {
            consumer.close();
        }
    }

    static List<Integer> partitions(Collection<TopicPartition> parts) {
        List<Integer> out = new ArrayList<>(new TreeSet<>(parts.stream().map(TopicPartition::partition).toList()));
        return out;
    }

    /** Poll every member until `done`, or fail naming `what` and what each member holds. */
    static void pollUntil(List<Member> members, BooleanSupplier done, String what) {
        long deadline = System.currentTimeMillis() + 60_000;
        while (!done.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                List<List<Integer>> held = members.stream().map(Member::owned).toList();
                throw new IllegalStateException("timed out waiting for " + what + ": " + held);
            }
            members.forEach(Member::poll);
        }
    }

    static List<Integer> all(int partitions) {
        List<Integer> out = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            out.add(p);
        }
        return out;
    }

    // ------------------------------------------------------------ commands

    /** Subscribe, read n records, commit the offset after the n-th, leave. */
    static String groupConsume() {
        int n = Integer.parseInt(opts.get("n"));
        try (Member m = new Member(null).subscribed()) {
            pollUntil(List.of(m), () -> m.records.size() >= n, n + " records");
            ConsumerRecord<String, String> last = m.records.get(n - 1);
            m.consumer.commitSync(Map.of(
                new TopicPartition(last.topic(), last.partition()), new OffsetAndMetadata(last.offset() + 1)));
            return "{\"records\":" + Scenarios.Json.records(m.records.subList(0, n)) + "}";
        }
    }

    /** A holds every partition; B joins and takes its share; B leaves and A has them all again. */
    static String joinAndLeave() {
        List<Integer> every = all(Integer.parseInt(opts.get("partitions")));
        try (Member a = new Member(null).subscribed()) {
            pollUntil(List.of(a), () -> a.owned().equals(every), "the first member holding every partition");
            String alone = Scenarios.Json.list(a.owned());
            String joined;
            try (Member b = new Member(null).subscribed()) {
                List<Member> both = List.of(a, b);
                pollUntil(both, () -> !a.owned().isEmpty() && !b.owned().isEmpty()
                    && a.owned().size() + b.owned().size() == every.size(), "the second member's share");
                joined = Scenarios.Json.nested(List.of(a.owned(), b.owned()));
            }
            pollUntil(List.of(a), () -> a.owned().equals(every), "the first member taking back the leaver's share");
            return "{\"alone\":" + alone + ",\"joined\":" + joined + ",\"a_revoked\":" + Scenarios.Json.nested(a.revoked)
                + ",\"after_leave\":" + Scenarios.Json.list(a.owned()) + "}";
        }
    }

    /**
     * Subscribe to a regular expression, read n records. With kafka-clients 4.0+ the broker
     * matches it (SubscriptionPattern, RE2J syntax, KIP-848's SubscribedTopicRegex); kafka-clients
     * 3.9 has no SubscriptionPattern and matches a java.util.regex.Pattern against the topics it
     * knows, heartbeating their names. Reflection, as these programs compile against 3.9.1.
     */
    static String regex() throws Exception {
        int n = Integer.parseInt(opts.get("n"));
        try (Member m = new Member(null)) {
            String matcher = subscribeToPattern(m, opts.get("pattern"));
            pollUntil(List.of(m), () -> m.records.size() >= n, n + " records");
            return "{\"matcher\":" + TestProgram.json(matcher) + ",\"records\":" + Scenarios.Json.records(m.records) + "}";
        }
    }

    /** Subscribe `m` to `regex` the newest way its kafka-clients has; "broker" or "client" (who matches). */
    static String subscribeToPattern(Member m, String regex) throws Exception {
        Class<?> pattern;
        try {
            pattern = Class.forName("org.apache.kafka.clients.consumer.SubscriptionPattern");
        } catch (ClassNotFoundException olderThan40) {
            m.consumer.subscribe(Pattern.compile(regex), m);
            return "client";
        }
        Object subscription = pattern.getConstructor(String.class).newInstance(regex);
        KafkaConsumer.class.getMethod("subscribe", pattern, ConsumerRebalanceListener.class)
            .invoke(m.consumer, subscription, m);
        return "broker";
    }

    /** Static members a and b; a closes and comes back under its instance id (b_revoked: what b gave up since). */
    static String staticMember() {
        int partitions = Integer.parseInt(opts.get("partitions"));
        List<Member> members = new ArrayList<>(List.of(new Member("a").subscribed(), new Member("b").subscribed()));
        try {
            BooleanSupplier split = () -> !members.get(0).owned().isEmpty() && !members.get(1).owned().isEmpty()
                && members.get(0).owned().size() + members.get(1).owned().size() == partitions;
            pollUntil(members, split, "a and b sharing the partitions");
            String before = Scenarios.Json.nested(List.of(members.get(0).owned(), members.get(1).owned()));
            List<List<Integer>> bRevoked = members.get(1).revoked;
            int settled = bRevoked.size(); // what b gave up while the two first shared out the partitions
            members.remove(0).close();
            members.add(0, new Member("a").subscribed());
            pollUntil(members, split, "a back with its share");
            String after = Scenarios.Json.nested(List.of(members.get(0).owned(), members.get(1).owned()));
            return "{\"before\":" + before + ",\"after\":" + after
                + ",\"b_revoked\":" + Scenarios.Json.nested(bRevoked.subList(settled, bRevoked.size())) + "}";
        } finally {
            members.forEach(Member::close);
        }
    }
}
