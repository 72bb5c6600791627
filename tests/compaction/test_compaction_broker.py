"""Compaction through the broker: stock consumers over cleaned logs, idempotence after a cleaning.

The broker runs on disk (and, for stock consumers, on memory and on the
cloud engine too) with its cleaner on a long backoff; tests clean
explicitly through the store, with `now` far enough ahead for every lag.
On the cloud engine two brokers of one cluster share the store: the
partition's leader cleans, and both serve the cleaned log.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from kafkacompat.protocol.messages import make
from kafkacompat.protocol.records import Record, build_batch, record_timestamps

from kafkacompat import storage
from kafkacompat.broker.cleaner_codec import CLEANER_CODEC
from kafkacompat.testing import Broker
from kafkacompat.testing.services import ServiceUnavailable, cloud_store
from tests.cloud_engine import on_the_cloud_engine
from tests.wire import Wire

CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01",
           "delete.retention.ms": "0"}


def clean(broker: Broker) -> list:
    later = int(datetime.datetime.now().timestamp() * 1000) + 3_600_000
    return broker.call(broker.server.store.clean_logs(now=later))


def produce(wire: Wire, topic: str, batch: bytes) -> tuple[int, int]:
    """(error code, base offset) of a Produce v9 of one batch."""
    import kio.schema.produce.v9.request as m

    body = make(m.ProduceRequest, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5),
                topic_data=(make(m.TopicProduceData, name=topic, partition_data=(
                    make(m.PartitionProduceData, index=0, records=batch),)),))
    part = wire.request(0, 9, body).responses[0].partition_responses[0]
    return part.error_code.value, part.base_offset


def confluent_view(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest", "enable.partition.eof": True})
    consumer.subscribe([topic])
    out = []
    try:
        for _ in range(100):
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return out
                continue
            out.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    pytest.fail(f"no end of {topic}: {out}")


def kafka_python_view(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes, bytes | None]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=10_000)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    out = []
    try:
        for msg in consumer:
            out.append((msg.offset, msg.key, msg.value))
            if msg.offset >= end:
                break
    finally:
        consumer.close()
    return out


async def aiokafka_view(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes, bytes | None]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    await consumer.seek_to_beginning(tp)
    out = []
    try:
        while not out or out[-1][0] < end:
            batches = await asyncio.wait_for(consumer.getmany(tp, timeout_ms=1000), 15)
            out += [(m.offset, m.key, m.value) for m in batches.get(tp, [])]
    finally:
        await consumer.stop()
    return out


def produce_updates(bootstrap: str) -> list[tuple[int, bytes, bytes | None]]:
    """40 updates of four keys (one a tombstone), then a big record and a tail, each its own batch,
    with a stock producer; returns what a consumer of the compacted topic sees once it is cleaned."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "compression.type": "lz4"})
    for i in range(40):
        producer.produce("cdc", key=f"k{i % 4}", value=None if i == 37 else f"v{i}" * 60)
        producer.flush(10)
    big = os.urandom(4500)  # incompressible: the next append rolls, all of the above is sealed
    producer.produce("cdc", key="last", value=big)
    producer.flush(10)
    producer.produce("cdc", key="tail", value="t")
    assert producer.flush(10) == 0
    return [(36, b"k0", b"v36" * 60), (37, b"k1", None), (38, b"k2", b"v38" * 60),
            (39, b"k3", b"v39" * 60), (40, b"last", big), (41, b"tail", b"t")]


@pytest.mark.parametrize("engine", ["disk", "memory", "cloud"])
def test_stock_consumers_read_across_the_gaps_a_cleaning_leaves(tmp_path: Path, engine: str, monkeypatch):
    data_dir = {"memory": "memory://", "disk": str(tmp_path), "cloud": None}[engine]
    if engine == "cloud":
        on_the_cloud_engine(monkeypatch)
    with Broker(data_dir=data_dir, log_cleaner_backoff_ms=3_600_000) as broker:
        assert engine != "cloud" or broker.config.store.startswith("postgresql://")
        broker.create_topic("cdc", configs=CONFIGS)
        expected = produce_updates(broker.bootstrap_servers)
        assert clean(broker)
        assert confluent_view(broker.bootstrap_servers, "cdc") == expected
        assert kafka_python_view(broker.bootstrap_servers, "cdc", 41) == expected
        assert asyncio.run(aiokafka_view(broker.bootstrap_servers, "cdc", 41)) == expected


def test_a_retried_batch_is_still_recognised_after_cleaning_and_restart(tmp_path: Path):
    """The producer's last batch, emptied by the cleaner, still answers its retry with its offsets."""
    pid = 4242
    retried = build_batch([Record(b"a", b"1"), Record(b"b", b"1")], producer_id=pid, producer_epoch=0,
                          base_sequence=0)
    with Broker(data_dir=str(tmp_path), log_cleaner_backoff_ms=3_600_000) as broker:
        broker.create_topic("state", configs=CONFIGS)
        with Wire(broker.bootstrap_servers) as wire:
            assert produce(wire, "state", retried) == (0, 0)
            assert produce(wire, "state", build_batch([Record(b"a", b"2"), Record(b"b", b"2")])) == (0, 2)
            assert produce(wire, "state", build_batch([Record(b"big", b"x" * 4000)])) == (0, 4)
            assert produce(wire, "state", build_batch([Record(b"tail", b"t")])) == (0, 5)
        assert clean(broker)
        assert [(m.offset, m.key) for m in broker.consume("state", count=4)] == [
            (2, b"a"), (3, b"b"), (4, b"big"), (5, b"tail")]
        port = broker.port
    with Broker(data_dir=str(tmp_path), port=port, log_cleaner_backoff_ms=3_600_000) as broker:
        with Wire(broker.bootstrap_servers) as wire:
            assert produce(wire, "state", retried) == (0, 0)  # a duplicate: answered, not appended
            next_seq = build_batch([Record(b"c", b"1")], producer_id=pid, producer_epoch=0, base_sequence=2)
            assert produce(wire, "state", next_seq) == (0, 6)
        assert len(broker.consume("state", count=5)) == 5


def test_compacted_topics_refuse_records_without_a_key(tmp_path: Path):
    with Broker(data_dir=str(tmp_path)) as broker:
        broker.create_topic("keyed", configs=CONFIGS)
        errors = []
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        producer.produce("keyed", value=b"no key", on_delivery=lambda err, msg: errors.append(err))
        producer.flush(10)  # its own batch: Kafka refuses a whole batch with a keyless record
        producer.produce("keyed", key=b"k", value=b"keyed", on_delivery=lambda err, msg: errors.append(err))
        assert producer.flush(10) == 0
        assert [e and e.code() for e in errors] == [KafkaError.INVALID_RECORD, None]
        assert [m.value for m in broker.consume("keyed", count=1)] == [b"keyed"]


def test_cleanup_policy_is_validated_and_shown_like_kafka(tmp_path: Path):
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

    with Broker(data_dir=str(tmp_path)) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        # Kafka 4.1 keeps the order given and drops spaces (tests/parity/test_configs_parity.py compares)
        ok = {"compact": "compact", "delete,compact": "delete,compact", "compact, delete": "compact,delete"}
        for value in ok:
            name = f"t-{uuid.uuid4().hex[:6]}"
            admin.create_topics([NewTopic(name, 1, 1, config={"cleanup.policy": value})])[name].result(10)
            resource = ConfigResource(ResourceType.TOPIC, name)
            configs = admin.describe_configs([resource])[resource].result(10)
            assert configs["cleanup.policy"].value == ok[value]
        bad = admin.create_topics([NewTopic("bad", 1, 1, config={"cleanup.policy": "shred"})])["bad"]
        with pytest.raises(Exception, match="cleanup.policy"):
            bad.result(10)


def wait_for(what: str, check, timeout: float = 20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    pytest.fail(f"{what}: not within {timeout} s")


def cleaned_cdc(broker: Broker) -> list:
    """What a cleaning pass of `broker` did to topic cdc (its compacted internal topics aside)."""
    return [r for r in clean(broker) if r.partition.endswith(":cdc/0")]


def test_the_leader_cleans_and_every_broker_of_the_cluster_serves_the_cleaned_log():
    """Two brokers on one PostgreSQL + S3 store: only the partition's leader cleans (fenced by its
    epoch), consumers through either broker see Kafka's compacted view with offsets unchanged, and
    after the leader stops the other broker serves it, and cleans what comes next."""
    try:
        database, objects = cloud_store()
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))

    def broker(node_id: int) -> Broker:
        store = storage.open_store(database, object_store=objects, record_timestamps=record_timestamps,
                                   record_codec=CLEANER_CODEC, cleaner_backoff_ms=3_600_000, flush_ms=2)
        return Broker(store=store, cluster_url=database, node_id=node_id, cluster_lease_ms=2000,
                      cluster_heartbeat_ms=200)

    with contextlib.ExitStack() as stack:
        brokers = [stack.enter_context(broker(n)) for n in (1, 2)]
        bootstrap = ",".join(b.bootstrap_servers for b in brokers)
        wait_for("both brokers in the cluster", lambda: all(len(b.server.cluster.view.live()) == 2 for b in brokers))
        brokers[0].create_topic("cdc", configs=CONFIGS)
        key = (brokers[0].server.store.default_stream, "cdc", 0)
        expected = produce_updates(bootstrap)

        def the_leader() -> Broker | None:
            leading = [b for b in brokers if b.server.cluster.view.leads(key)]
            return leading[0] if len(leading) == 1 else None

        leader = wait_for("one leader", the_leader)
        other = brokers[1 - brokers.index(leader)]
        assert not cleaned_cdc(other)  # not its leader: it leaves the partition alone
        assert cleaned_cdc(leader)
        for b in brokers:  # a consumer bootstrapping from either broker
            assert confluent_view(b.bootstrap_servers, "cdc") == expected
        leader.stop()
        wait_for("the other broker leads", lambda: other.server.cluster.view.leads(key))
        assert confluent_view(other.bootstrap_servers, "cdc") == expected
        producer = Producer({"bootstrap.servers": other.bootstrap_servers, "linger.ms": 0})
        big = os.urandom(4500)
        for k, v in [("k0", b"w0"), ("k1", b"w1"), ("last", big), ("tail", b"t2")]:
            producer.produce("cdc", key=k, value=v)
            assert producer.flush(10) == 0
        assert cleaned_cdc(other)
        assert confluent_view(other.bootstrap_servers, "cdc") == [
            expected[2], expected[3], (41, b"tail", b"t"), (42, b"k0", b"w0"), (43, b"k1", b"w1"),
            (44, b"last", big), (45, b"tail", b"t2")]
