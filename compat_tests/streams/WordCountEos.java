import java.util.Arrays;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * Kafka Streams word count with processing.guarantee=exactly_once_v2 and an
 * in-memory store, as the Streams quickstart writes it.
 *
 * Usage: WordCountEos BOOTSTRAP key=value... (app, input, output, state_dir,
 * and optionally changelog_policy to override the changelog's cleanup.policy,
 * group_protocol: classic or streams, KIP-1071, and session_timeout_ms for the
 * main consumer of a classic member).
 * Runs until killed; prints RUNNING once the instance processes, then
 * ACTIVE and its active task ids (0_1,1_2,...) whenever they change.
 */
public final class WordCountEos {
    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new HashMap<>();
        for (int i = 1; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            opts.put(kv[0], kv[1]);
        }
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, opts.get("app"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATE_DIR_CONFIG, opts.get("state_dir"));
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        if (opts.containsKey("group_protocol")) {
            props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, opts.get("group_protocol"));
        }
        if (opts.containsKey("session_timeout_ms")) {  // classic members: how soon a killed instance's tasks move
            int session = Integer.parseInt(opts.get("session_timeout_ms"));
            props.put(StreamsConfig.mainConsumerPrefix("session.timeout.ms"), session);
            props.put(StreamsConfig.mainConsumerPrefix("heartbeat.interval.ms"), session / 6);
        }

        Materialized<String, Long, KeyValueStore<Bytes, byte[]>> store =
            Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("counts"))
                .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long());
        if (opts.containsKey("changelog_policy")) {
            store = store.withLoggingEnabled(Map.of("cleanup.policy", opts.get("changelog_policy")));
        }
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> lines = builder.stream(opts.get("input"));
        lines.flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
            .filter((key, word) -> !word.isEmpty())
            .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
            .count(store)
            .toStream()
            .to(opts.get("output"), Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch running = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING) running.countDown();
            if (now == KafkaStreams.State.ERROR) {
                System.out.println("ERROR");
                System.out.flush();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        running.await();
        System.out.println("RUNNING");
        System.out.flush();
        String printed = null;
        while (true) {  // the active tasks this instance holds, whenever they change
            java.util.TreeSet<String> tasks = new java.util.TreeSet<>();
            for (org.apache.kafka.streams.ThreadMetadata thread : streams.metadataForLocalThreads()) {
                for (org.apache.kafka.streams.TaskMetadata task : thread.activeTasks()) {
                    tasks.add(task.taskId().toString());
                }
            }
            String line = "ACTIVE " + String.join(",", tasks);
            if (!line.equals(printed)) {
                System.out.println(line);
                System.out.flush();
                printed = line;
            }
            Thread.sleep(200);
        }
    }
}
