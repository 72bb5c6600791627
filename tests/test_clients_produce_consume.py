"""Produce and consume with stock Python clients over real sockets."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import TopicPartition as KTopicPartition

from kafkacompat.testing import Broker
from tests.conftest import create_topic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 20) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg)
    finally:
        consumer.close()
    return got


def kafka_python_poll(consumer: KafkaConsumer, expected: int, timeout: float = 20) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < expected and time.monotonic() < deadline:
            for messages in consumer.poll(timeout_ms=500).values():
                got.extend((m.offset, m.key, m.value, m.headers) for m in messages)
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_confluent_kafka_codecs_and_acks(broker: Broker, topic_name: str, codec: str, acks: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, partitions=2)
    producer = Producer({
        "bootstrap.servers": broker.bootstrap_servers, "compression.type": codec, "acks": acks,
        "linger.ms": 5, "enable.idempotence": acks == "all",
    })
    sent = {}
    for i in range(200):
        key = f"key-{i}".encode()
        sent[key] = f"{codec}-{i}".encode() * 5
        producer.produce(topic_name, key=key, value=sent[key], headers=[("n", str(i).encode())], partition=i % 2)
    assert producer.flush(20) == 0
    got = consume_all(broker.bootstrap_servers, topic_name, 2, 200)
    assert {m.key(): m.value() for m in got} == sent
    for m in got:
        assert m.headers() == [("n", m.key()[4:])]
    per_partition = {}
    for m in got:
        per_partition.setdefault(m.partition(), []).append(m.offset())
    assert all(offsets == list(range(len(offsets))) for offsets in per_partition.values())


@pytest.mark.also_on_cloud
def test_consume_from_earliest_latest_and_timestamp(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    base = int(time.time() * 1000) - 100_000
    for i in range(10):
        producer.produce(topic_name, value=b"v%d" % i, timestamp=base + i * 1000)
        producer.flush(5)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "ts"})
    try:
        found = consumer.offsets_for_times([TopicPartition(topic_name, 0, base + 4500)], timeout=10)
        assert found[0].offset == 5
        beyond = consumer.offsets_for_times([TopicPartition(topic_name, 0, base + 999_999)], timeout=10)
        assert beyond[0].offset == -1  # no record at or after T: the end
        low, high = consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10)
        assert (low, high) == (0, 10)
        consumer.assign([TopicPartition(topic_name, 0, found[0].offset)])
        msg = None
        deadline = time.monotonic() + 10
        while msg is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
        assert msg is not None and msg.value() == b"v5" and msg.timestamp()[1] == base + 5000
    finally:
        consumer.close()


@pytest.mark.also_on_cloud
def test_latest_sees_only_new_messages(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce(topic_name, b"old")
    producer.flush(5)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None)
    tp = KTopicPartition(topic_name, 0)
    consumer.assign([tp])
    consumer.seek_to_end(tp)
    try:
        assert consumer.position(tp) == 1  # "latest" resolved through ListOffsets
        producer.produce(topic_name, b"new")
        producer.flush(5)
        assert kafka_python_poll(consumer, 1) == [(1, None, b"new", [])]
    finally:
        consumer.close()


@pytest.mark.also_on_cloud
@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_round_trip(broker: Broker, topic_name: str, codec: str | None) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, compression_type=codec, acks="all")
    for i in range(20):
        producer.send(topic_name, key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"x")])
    producer.flush(10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest", group_id=None)
    consumer.assign([KTopicPartition(topic_name, 0)])
    got = kafka_python_poll(consumer, 20)
    assert got == [(i, b"k%d" % i, b"v%d" % i, [("h", b"x")]) for i in range(20)]


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
async def test_aiokafka_round_trip(topic_name: str, codec: str | None) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async with Broker() as broker:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, compression_type=codec,
                                    enable_idempotence=True)
        await producer.start()
        try:
            for i in range(20):
                await producer.send(topic_name, key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"y")])
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap_servers,
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        got = []
        try:
            async with asyncio.timeout(20):
                while len(got) < 20:
                    for messages in (await consumer.getmany(timeout_ms=500)).values():
                        got.extend((m.offset, m.key, m.value, list(m.headers)) for m in messages)
        finally:
            await consumer.stop()
    assert got == [(i, b"k%d" % i, b"v%d" % i, [("h", b"y")]) for i in range(20)]
