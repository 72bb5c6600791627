import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;

/**
 * Transactions through a cluster whose brokers come and go, as a Java user
 * writes them (tests/cluster/test_transactions_failover.py).
 *
 * Usage:
 *   produce BOOTSTRAP TOPIC TXN_ID TXNS PER_TXN PREFIX
 *       TXNS committed transactions of PER_TXN records each, spread over every
 *       partition; prints {"committed": N}.
 *   open_then_commit BOOTSTRAP TOPIC TXN_ID COUNT PREFIX
 *       opens a transaction, sends and flushes COUNT records, prints OPEN and
 *       waits for a line on stdin, then commits; prints {"outcome": "committed"}
 *       or the exception's class name.
 *   consume BOOTSTRAP TOPIC GROUP MAX IDLE_MS ISOLATION
 *       reads up to MAX records as a group member, commitSync() after each
 *       poll (the position with its leader epoch), stops after IDLE_MS without
 *       one; prints {"values": [...], "epochs": {partition: committed epoch}}.
 * The last line of stdout is the JSON result.
 */
public final class ClusterTransactions {
    public static void main(String[] args) throws Exception {
        TestProgram.answer(args[0], Map.of(
            "produce", () -> produce(args),
            "open_then_commit", () -> openThenCommit(args),
            "consume", () -> consume(args)));
        System.exit(0);
    }

    static KafkaProducer<String, String> producer(String bootstrap, String txnId) {
        KafkaProducer<String, String> producer = TestProgram.stringProducer(TestProgram.config(bootstrap,
            "transactional.id", txnId, "transaction.timeout.ms", "20000", "max.block.ms", "90000"));
        producer.initTransactions();
        return producer;
    }

    static String produce(String[] a) {
        String topic = a[2];
        int txns = Integer.parseInt(a[4]);
        int perTxn = Integer.parseInt(a[5]);
        try (KafkaProducer<String, String> producer = producer(a[1], a[3])) {
            int partitions = producer.partitionsFor(topic).size();
            for (int t = 0; t < txns; t++) {
                producer.beginTransaction();
                for (int i = 0; i < perTxn; i++) {
                    producer.send(new ProducerRecord<>(topic, i % partitions, null, a[6] + "-" + t + "-" + i));
                }
                producer.commitTransaction();
            }
        }
        return "{\"committed\": " + txns * perTxn + "}";
    }

    static String openThenCommit(String[] a) throws Exception {
        String topic = a[2];
        int count = Integer.parseInt(a[4]);
        String outcome;
        try (KafkaProducer<String, String> producer = producer(a[1], a[3])) {
            int partitions = producer.partitionsFor(topic).size();
            producer.beginTransaction();
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, i % partitions, null, a[5] + "-" + i));
            }
            producer.flush();
            System.out.println("OPEN");
            System.out.flush();
            new BufferedReader(new InputStreamReader(System.in)).readLine();
            try {
                producer.commitTransaction();
                outcome = "committed";
            } catch (KafkaException e) {
                outcome = e.getClass().getSimpleName();
            }
        }
        return "{\"outcome\": \"" + outcome + "\"}";
    }

    static String consume(String[] a) {
        Properties p = TestProgram.config(a[1], "group.id", a[3], "auto.offset.reset", "earliest",
            "enable.auto.commit", "false", "isolation.level", a[6]);
        int max = Integer.parseInt(a[4]);
        long idleMs = Long.parseLong(a[5]);
        List<String> values = new ArrayList<>();
        Map<Integer, Integer> epochs = new TreeMap<>();
        try (KafkaConsumer<String, String> consumer = TestProgram.stringConsumer(p)) {
            consumer.subscribe(Collections.singletonList(a[2]));
            long lastSeen = System.currentTimeMillis();
            while (values.size() < max && System.currentTimeMillis() - lastSeen < idleMs) {
                boolean got = false;
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    values.add(record.value());
                    got = true;
                }
                if (got) {
                    lastSeen = System.currentTimeMillis();
                    consumer.commitSync();
                }
            }
            // the markers after the last records: the position passes them, and is committed too
            long settle = System.currentTimeMillis() + 1000;
            while (System.currentTimeMillis() < settle) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    values.add(record.value());
                }
            }
            consumer.commitSync();
            Set<TopicPartition> assigned = consumer.assignment();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : consumer.committed(assigned).entrySet()) {
                if (e.getValue() != null) {
                    epochs.put(e.getKey().partition(), e.getValue().leaderEpoch().orElse(-1));
                }
            }
        }
        StringBuilder out = new StringBuilder("{\"values\": [");
        for (int i = 0; i < values.size(); i++) {
            out.append(i == 0 ? "" : ",").append('"').append(values.get(i)).append('"');
        }
        out.append("], \"epochs\": {");
        int i = 0;
        for (Map.Entry<Integer, Integer> e : epochs.entrySet()) {
            out.append(i++ == 0 ? "" : ",").append('"').append(e.getKey()).append("\": ").append(e.getValue());
        }
        return out.append("}}").toString();
    }
}
