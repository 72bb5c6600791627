import java.io.FileInputStream;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** Produce one message and read it back over a secure listener: args bootstrap, client.properties, topic.
 *  Prints OK <value>, or ERROR and the exception class and message of a refused login. It returns rather
 *  than exits, so that ProgramServer can run it (compat_tests/test_security_clients.py). */
public class SecureClient {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[1])) { props.load(in); }
        props.put("bootstrap.servers", args[0]);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        props.put("max.block.ms", "15000");
        props.put("group.id", "secure-" + System.nanoTime());
        props.put("auto.offset.reset", "earliest");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            producer.send(new ProducerRecord<>(args[2], "hello-java")).get();
        } catch (Exception e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            System.out.println("ERROR " + cause.getClass().getSimpleName() + ": " + cause.getMessage());
            return;
        }
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(args[2]));
            long deadline = System.currentTimeMillis() + 30000;
            while (System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                if (!records.isEmpty()) {
                    System.out.println("OK " + records.iterator().next().value());
                    return;
                }
            }
        }
        System.out.println("ERROR nothing consumed");
    }
}
