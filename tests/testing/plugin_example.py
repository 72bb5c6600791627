"""A user's test module using kafkacompat's pytest fixtures with three Python clients.

Not collected by this repository's suite: test_pytest_plugin.py runs it in
a pytest subprocess, as a user's project would be run.
"""

from __future__ import annotations

import os

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Producer
from kafka import KafkaConsumer, KafkaProducer

left_open: list[object] = []  # clients a careless test never closes


def test_kafka_python(kafka_broker, kafka_topic):
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
    producer.send(kafka_topic, b"hello", key=b"k").get(timeout=10)
    producer.close()
    assert [(m.key, m.value) for m in kafka_broker.consume(kafka_topic)] == [(b"k", b"hello")]


def test_confluent_kafka(kafka_broker, kafka_topic):
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    producer.produce(kafka_topic, b"hello")
    assert producer.flush(10) == 0
    assert [m.value for m in kafka_broker.consume(kafka_topic)] == [b"hello"]


@pytest.mark.asyncio
async def test_aiokafka(kafka_broker, kafka_topic):
    producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
    await producer.start()
    await producer.send_and_wait(kafka_topic, b"hello")
    await producer.stop()
    assert [m.value for m in await kafka_broker.aconsume(kafka_topic, count=1)] == [b"hello"]


@pytest.mark.kafka_topic(partitions=3, configs={"retention.ms": "60000"})
def test_marker_shapes_the_topic(kafka_broker, kafka_topic):
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    assert len(producer.list_topics(kafka_topic, timeout=10).topics[kafka_topic].partitions) == 3


def test_topics_are_fresh_per_test(kafka_broker, kafka_topic):
    assert kafka_broker.consume(kafka_topic) == []
    assert "fresh" in kafka_topic  # named after the test, for readable logs


def test_a_fault_left_set(kafka_broker):
    kafka_broker.faults.fail("Produce", "NOT_LEADER_OR_FOLLOWER", count=None)


def test_the_next_test_sees_no_fault(kafka_broker, kafka_topic):
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers, retries=0)
    producer.send(kafka_topic, b"ok").get(timeout=10)
    producer.close()


def test_clients_left_open(kafka_broker, kafka_topic):
    kafka_broker.produce(kafka_topic, b"x")
    consumer = KafkaConsumer(
        kafka_topic, bootstrap_servers=kafka_broker.bootstrap_servers, auto_offset_reset="earliest",
        enable_auto_commit=False, consumer_timeout_ms=5000,
    )
    assert next(consumer).value == b"x"
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    producer.produce(kafka_topic, b"unflushed")
    left_open.extend([consumer, producer])


@pytest.mark.asyncio
async def test_async_clients_left_open(kafka_broker, kafka_topic):
    consumer = AIOKafkaConsumer(kafka_topic, bootstrap_servers=kafka_broker.bootstrap_servers)
    await consumer.start()  # long-polls a fetch when the test ends
    left_open.append(consumer)


def test_storage_is_as_asked(kafka_broker):
    expected = os.environ["EXPECTED_KAFKA_STORAGE"]
    assert kafka_broker.config.data_dir.startswith("memory:") == (expected == "memory")
