"""The test broker's helpers agree with what real clients write and read."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient

from kafkacompat import storage
from kafkacompat.testing import Broker
from kafkacompat.testing.cluster import broker_process


def _confluent_read(broker: Broker, topic: str, partition: int, count: int) -> list:
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap_servers,
        "group.id": "helper-tests",
        "enable.auto.commit": False,
    })
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        out = []
        deadline = time.monotonic() + 20
        while len(out) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                out.append(message)
        return out
    finally:
        consumer.close()


def test_produced_record_reads_back_through_librdkafka(broker: Broker, topic_name: str) -> None:
    broker.create_topic(topic_name, partitions=2)
    stamp = int(time.time() * 1000) - 60_000  # a minute ago: within the default stream's 7-day ttl
    sent = broker.produce(
        topic_name, "paid", key=b"order-7", headers={"trace": "abc", "empty": None},
        partition=1, timestamp=stamp,
    )
    second = broker.produce(topic_name, b"shipped", partition=1)
    assert (sent.partition, sent.offset, second.offset) == (1, 0, 1)

    [first, then] = _confluent_read(broker, topic_name, 1, 2)
    assert (first.key(), first.value(), first.offset()) == (b"order-7", b"paid", 0)
    assert first.headers() == [("trace", b"abc"), ("empty", None)]
    assert first.timestamp() == (1, stamp)  # CreateTime, as given
    assert (then.key(), then.value(), then.offset()) == (None, b"shipped", 1)


def test_keyed_records_land_where_kafka_python_puts_them(broker: Broker, topic_name: str) -> None:
    broker.create_topic(topic_name, partitions=5)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    try:
        keys = [f"customer-{i}".encode() for i in range(20)]
        by_client = {key: producer.send(topic_name, b"c", key=key).get(timeout=20).partition for key in keys}
    finally:
        producer.close(timeout=5)
    by_helper = {key: broker.produce(topic_name, b"h", key=key).partition for key in keys}
    assert by_helper == by_client
    assert len(set(by_client.values())) > 1  # the keys did spread


def test_consume_returns_what_a_client_produced(broker: Broker, topic_name: str) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(3):
        producer.produce(topic_name, f"v{i}".encode(), key=b"k", headers=[("n", str(i).encode())])
    assert producer.flush(20) == 0

    got = broker.consume(topic_name, count=3)  # auto-created by the producer, one partition
    assert [(m.offset, m.key, m.value, m.headers) for m in got] == [
        (i, b"k", f"v{i}".encode(), (("n", str(i).encode()),)) for i in range(3)
    ]
    assert broker.consume(topic_name, offset=2)[0].value == b"v2"
    assert broker.consume(topic_name, offset="latest") == []


def test_consume_waits_for_records_and_reports_a_shortfall(broker: Broker, topic_name: str) -> None:
    broker.create_topic(topic_name, partitions=3)
    with pytest.raises(TimeoutError, match="expected at least 1 record"):
        broker.consume(topic_name, count=1, timeout=0.2)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(broker.consume, topic_name, count=2, timeout=20)
        broker.produce(topic_name, b"a", partition=2)
        broker.produce(topic_name, b"b", partition=0)
        got = waiting.result(timeout=30)
    assert [(m.partition, m.value) for m in got] == [(0, b"b"), (2, b"a")]


def test_consume_waits_for_a_topic_a_producer_has_yet_to_create(broker: Broker, topic_name: str) -> None:
    with pytest.raises(storage.UnknownTopicError):
        broker.consume(topic_name)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(broker.consume, topic_name, count=1, timeout=20)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        producer.produce(topic_name, b"first")
        assert producer.flush(20) == 0
        assert [m.value for m in waiting.result(timeout=30)] == [b"first"]


def test_log_append_time_topic_stamps_the_broker_time(broker: Broker, topic_name: str) -> None:
    broker.create_topic(topic_name, configs={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    sent = broker.produce(topic_name, b"v", timestamp=5)
    assert sent.timestamp >= before
    [message] = _confluent_read(broker, topic_name, 0, 1)
    assert message.timestamp() == (2, sent.timestamp)  # LogAppendTime


def test_create_topic_in_a_stream_and_bad_input(broker: Broker) -> None:
    name = f"/apps/iot/pumps-{os.getpid()}:metrics"
    broker.create_topic(name, partitions=2)
    broker.produce(name, b"42", partition=1)
    assert [(m.topic, m.partition, m.value) for m in broker.consume(name)] == [(name, 1, b"42")]
    with pytest.raises(storage.TopicExistsError):
        broker.create_topic(name)
    with pytest.raises(ValueError):
        broker.produce(name, b"x", partition=2)
    with pytest.raises(ValueError):
        broker.consume(name, partition=2)
    with pytest.raises(ValueError):
        broker.create_topic("bad name!")
    with pytest.raises(ValueError, match="Unknown topic config name"):
        broker.create_topic("configured", configs={"no.such.config": "1"})


@pytest.mark.parametrize("data_dir", [None, "tmp"], ids=["memory", "disk"])
def test_reset_forgets_topics_streams_and_faults(data_dir: str | None) -> None:
    with Broker(data_dir=data_dir) as broker:
        broker.create_topic("orders", partitions=3)
        broker.create_topic("/apps/shop:payments")
        broker.produce("orders", b"old")
        broker.faults.fail("Produce", "NOT_LEADER_OR_FOLLOWER", count=None)

        broker.reset()

        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            assert admin.list_topics() == []
        finally:
            admin.close()
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "message.timeout.ms": 10000})
        reports = []
        producer.produce("orders", b"new", on_delivery=lambda err, msg: reports.append((err, msg.offset())))
        assert producer.flush(20) == 0
        assert reports == [(None, 0)]  # no fault left, and offsets start again
        assert [m.value for m in broker.consume("orders")] == [b"new"]
        with pytest.raises(storage.UnknownTopicError):
            broker.consume("/apps/shop:payments")


async def test_async_broker_serves_aiokafka_on_the_test_loop() -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as AioPartition

    async with Broker() as broker:
        await broker.acreate_topic("events", partitions=2)
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        await producer.start()
        try:
            await producer.send_and_wait("events", b"from-aiokafka", key=b"k", partition=1)
        finally:
            await producer.stop()
        [got] = await broker.aconsume("events", count=1)
        assert (got.partition, got.key, got.value) == (1, b"k", b"from-aiokafka")

        await broker.aproduce("events", b"from-helper", partition=0)
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([AioPartition("events", 0)])
            await consumer.seek_to_beginning()
            record = await asyncio.wait_for(consumer.getone(), 20)
            assert record.value == b"from-helper"
        finally:
            await consumer.stop()
        with pytest.raises(RuntimeError, match="aproduce"):
            broker.produce("events", b"blocking the loop would deadlock")


async def test_thread_broker_helpers_are_awaitable_from_any_loop(broker: Broker, topic_name: str) -> None:
    sent = await broker.aproduce(topic_name, b"v")
    assert [m.offset for m in await broker.aconsume(topic_name, count=1)] == [sent.offset]


def _disk_engine_available() -> bool:
    try:
        storage.open_store(os.path.join(os.sep, "nonexistent-probe"))
    except ValueError:
        return False
    return True


@pytest.mark.skipif(not _disk_engine_available(), reason="the on-disk storage engine has not landed yet")
def test_on_disk_broker_uses_and_removes_a_temporary_directory() -> None:
    with Broker(data_dir="tmp") as broker:
        data_dir = broker.config.data_dir
        broker.produce("kept", b"on disk")
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        producer.send("kept", b"from kafka-python").get(timeout=20)
        producer.close(timeout=5)
        assert [m.value for m in broker.consume("kept", count=2)] == [b"on disk", b"from kafka-python"]
        assert os.listdir(data_dir)
    assert not os.path.exists(data_dir)


def test_a_cluster_broker_process_removes_the_data_dir_it_made_when_closed() -> None:
    """`broker_process` (every BrokerCluster's brokers) makes a data dir per broker; a full test run
    left hundreds of them in /tmp. Closing the broker removes it, whatever the broker wrote there."""
    broker = broker_process(1, [])  # the on-disk store: the broker writes into it
    try:
        broker.start()
        broker.stop()
        assert os.listdir(broker.data_dir)
    finally:
        broker.close()
    assert not os.path.exists(broker.data_dir)
