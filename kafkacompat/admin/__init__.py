"""The clients the command line (kafkacompat/cli/) drives: the private admin API's, Kafka's through
confluent-kafka, the group-less consumer, and the output formatting they share."""
