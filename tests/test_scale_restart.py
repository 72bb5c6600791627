"""Stopping and restarting a disk store with many topics (issue 32, docs/operations.md "Sizing").

With 50,000 topics a clean stop took 35-42 s and, after a kill -9, the
first Metadata for all topics opened (and so recovered) every partition on
the event loop, holding every client for seconds. These tests count the
work itself, not wall clock: partitions opened by Metadata after a crash,
and partitions checkpointed by a close.
"""

from __future__ import annotations

import os
import threading

import kio.schema.metadata.v12.request as meta_v12
from confluent_kafka import Consumer, Producer
from kafkacompat.protocol.messages import make
from kafkacompat.storage.disk import chain_load, layout
from kafkacompat.storage.disk.partition import DiskPartition
from kafkacompat.storage.disk.store import DiskStore

from kafkacompat.testing.broker import Broker
from tests.wire import Wire

TOPICS = ("a", "b", "c")


def _metadata_all(bootstrap: str) -> dict[tuple[str, int], int]:
    """(topic, partition) -> leader epoch, from Metadata for all topics."""
    request = make(meta_v12.MetadataRequest, topics=None, allow_auto_topic_creation=False,
                   include_topic_authorized_operations=False)
    with Wire(bootstrap) as wire:
        answer = wire.request(3, 12, request)
    return {(t.name, p.partition_index): p.leader_epoch for t in answer.topics if t.name in TOPICS
            for p in t.partitions}


def _count_loads(monkeypatch, threads: list[str] | None = None) -> list[str]:
    loaded: list[str] = []
    real = chain_load.ChainLoader.load

    def load(self: chain_load.ChainLoader) -> chain_load.LoadedChain:
        loaded.append(self.name)
        if threads is not None:
            threads.append(threading.current_thread().name)
        return real(self)

    monkeypatch.setattr(chain_load.ChainLoader, "load", load)
    return loaded


def test_metadata_after_a_crash_recovers_no_partition_on_the_request_path(tmp_path, monkeypatch) -> None:
    data = str(tmp_path / "store")
    with Broker(data) as broker:
        for name in TOPICS:
            broker.create_topic(name, partitions=2)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(20):
            producer.produce("a", f"m{i}".encode(), partition=i % 2)
        assert producer.flush(30) == 0
        del producer  # librdkafka lets go of its connections
    os.unlink(os.path.join(data, layout.CLEAN_MARKER))  # as a kill -9 leaves it: tails are validated on open
    threads: list[str] = []
    loaded = _count_loads(monkeypatch, threads)
    with Broker(store=DiskStore([data], background_verify=False)) as broker:
        epochs = _metadata_all(broker.bootstrap_servers)
        assert len(epochs) == 6 and loaded == [], f"Metadata opened {loaded}"
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe(["a"])
        values = set()
        try:
            while len(values) < 20:
                msg = consumer.poll(10)
                assert msg is not None, f"only {len(values)} of 20 read back"
                if msg.error() is None:
                    values.add(msg.value())
        finally:
            consumer.close()
        assert values == {f"m{i}".encode() for i in range(20)}
        assert sorted(loaded) == ["/default:a/0", "/default:a/1"]  # opened (recovered) by the fetch alone
        assert all(name.startswith("partition-open") for name in threads), threads  # off the event loop
        assert _metadata_all(broker.bootstrap_servers) == epochs  # opening did not change the epoch answered


def test_close_checkpoints_only_partitions_with_unsaved_state(tmp_path, monkeypatch) -> None:
    data = str(tmp_path / "store")
    with Broker(data) as broker:
        for i in range(100):
            broker.create_topic(f"t{i:03d}")
        store = broker.server.store

        async def open_every_partition() -> None:  # as Metadata for all topics once did
            for i in range(100):
                store.partition("/default", f"t{i:03d}", 0)

        broker.call(open_every_partition())
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        producer.produce("t042", b"kept")
        assert producer.flush(30) == 0
        del producer  # librdkafka lets go of its connections
        checkpointed: list[str] = []
        real = DiskPartition.checkpoint

        async def checkpoint(self: DiskPartition) -> None:
            checkpointed.append(self.name)
            await real(self)

        monkeypatch.setattr(DiskPartition, "checkpoint", checkpoint)
    assert checkpointed == ["/default:t042/0"]
    assert os.path.exists(os.path.join(data, layout.CLEAN_MARKER))
    with Broker(data) as broker:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["t042"])
        try:
            msg = consumer.poll(20)
            assert msg is not None and msg.error() is None and msg.value() == b"kept"
        finally:
            consumer.close()
