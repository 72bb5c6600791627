"""kafkacompat: a Kafka wire-protocol broker with MapR-style streams."""

__version__ = "0.1.0"
