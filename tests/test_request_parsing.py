"""Requests are parsed as Kafka parses them, quirks of real clients included."""

from __future__ import annotations

from confluent_kafka import Producer

from kafkacompat.testing import Broker


def test_librdkafka_list_topics_as_its_first_request(broker: Broker, topic_name: str) -> None:
    # librdkafka 2.16's first Metadata v12 carries bytes after the body;
    # Kafka ignores them, so must this broker.
    broker.create_topic(topic_name, partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    topics = producer.list_topics(timeout=10).topics
    assert len(topics[topic_name].partitions) == 2
