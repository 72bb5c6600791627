import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * A producer whose only broker goes away and comes back elsewhere: it writes
 * "one", says so on stdout ({"first":...}) and waits for a line on stdin (the
 * test restarts the broker meanwhile), then sends "two" until it is written
 * or 40 s pass, and prints {"second":"ok"|exception class,"seconds":...}.
 *
 * Usage: Rebootstrap produce BOOTSTRAP topic=T strategy=rebootstrap|none
 */
public final class Rebootstrap {
    public static void main(String[] args) throws Exception {
        Map<String, String> opts = TestProgram.options(args);
        Properties p = TestProgram.config(args[1], "metadata.recovery.strategy", opts.get("strategy"),
            "reconnect.backoff.max.ms", "500", "delivery.timeout.ms", "40000", "request.timeout.ms", "5000",
            "max.block.ms", "40000", "linger.ms", "0");
        try (KafkaProducer<String, String> producer = TestProgram.stringProducer(p)) {
            producer.send(new ProducerRecord<>(opts.get("topic"), "one")).get(30, TimeUnit.SECONDS);
            System.out.println("{\"first\":\"ok\"}");
            System.out.flush();
            new java.io.BufferedReader(new java.io.InputStreamReader(System.in)).readLine();
            long start = System.nanoTime();
            String outcome;
            try {
                producer.send(new ProducerRecord<>(opts.get("topic"), "two")).get(45, TimeUnit.SECONDS);
                outcome = "ok";
            } catch (Exception e) {
                outcome = (e.getCause() != null ? e.getCause() : e).getClass().getSimpleName();
            }
            System.out.println("{\"second\":\"" + outcome + "\",\"seconds\":" + (System.nanoTime() - start) / 1e9 + "}");
        }
    }
}
