"""The per-broker partition limit with many topics: enforced at its boundary, and counted, not walked.

Each CreateTopics used to count every partition of every topic to check
max_broker_partitions, so creating N topics cost N² (issue 32: 1,309
topics/s for the first tenth of 20,000, 276/s for the last).
"""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from kafkacompat import storage
from kafkacompat.testing import Broker


def _create(admin: AdminClient, names: list[str], partitions: int = 1) -> dict[str, KafkaError | None]:
    """CreateTopics as a user sends it; each topic's error, or None."""
    outcome = {}
    for name, future in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).items():
        try:
            future.result(timeout=30)
            outcome[name] = None
        except Exception as exc:  # confluent-kafka raises KafkaException carrying the KafkaError
            outcome[name] = exc.args[0]
    return outcome


def _grow(admin: AdminClient, name: str, total: int) -> KafkaError | None:
    try:
        admin.create_partitions([NewPartitions(name, total)])[name].result(timeout=30)
        return None
    except Exception as exc:
        return exc.args[0]


def test_limit_holds_at_its_boundary_with_many_topics() -> None:
    with Broker(data_dir="tmp", max_broker_partitions=400) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for first in range(0, 398, 100):
            assert set(_create(admin, [f"t{i}" for i in range(first, min(first + 100, 398))]).values()) == {None}
        refused = _create(admin, ["three"], 3)["three"]
        assert refused.code() == KafkaError.POLICY_VIOLATION and "has 398 partitions" in refused.str()
        assert _create(admin, ["two"], 2)["two"] is None  # exactly 400
        assert _create(admin, ["one"])["one"].code() == KafkaError.POLICY_VIOLATION
        assert _grow(admin, "two", 3).code() == KafkaError.POLICY_VIOLATION
        admin.delete_topics(["t0", "t1"])["t0"].result(timeout=30)
        assert _grow(admin, "two", 3) is None  # 399: t0 and t1 gone, one partition more
        assert _create(admin, ["one"])["one"] is None  # 400 again
        assert _create(admin, ["again"])["again"].code() == KafkaError.POLICY_VIOLATION


def test_creating_topics_does_not_walk_every_topic() -> None:
    with Broker(data_dir="tmp") as broker:
        store = broker.server.store
        listings = []
        list_topics = store.list_topics

        def counted(stream: str | None = None) -> list[storage.TopicInfo]:
            listings.append(stream)
            return list_topics(stream)

        store.list_topics = counted
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for first in range(0, 1000, 100):
            assert set(_create(admin, [f"t{i}" for i in range(first, first + 100)]).values()) == {None}
        assert None not in listings, "a CreateTopics request listed every topic"
        assert store.partition_walks <= 1  # the first request counts once; later ones keep the count
        assert store.partition_count() == 1000


async def _changes(store: storage.Store) -> None:
    await store.create_stream("/iot")
    for i in range(20):
        await store.create_topic("/iot", f"t{i}", 1 + i % 3)
    assert store.partition_count() == sum(1 + i % 3 for i in range(20))
    await store.add_partitions("/iot", "t0", 5)
    await store.delete_topic("/iot", "t1")
    await store.create_topic(store.default_stream, "plain", 2)
    with pytest.raises(storage.StorageError):
        await store.create_topic("/iot", "t2", 1)  # exists: nothing counted
    walked = sum(topic.partitions for topic in store.list_topics())
    assert store.partition_count() == walked
    await store.delete_stream("/iot")
    assert store.partition_count() == 2


def test_running_count_follows_every_change_in_memory() -> None:
    async def run() -> None:
        store = storage.open_store("memory://")
        await store.open()
        await _changes(store)
        assert store.partition_walks == 1

    asyncio.run(run())


def test_running_count_follows_every_change_on_disk_and_survives_reopening(tmp_path) -> None:
    async def run() -> None:
        store = storage.open_store(str(tmp_path))
        await store.open()
        await _changes(store)
        await store.create_topic(store.default_stream, "more", 4)
        await store.close()
        reopened = storage.open_store(str(tmp_path))
        await reopened.open()
        try:
            assert reopened.partition_count() == 6
        finally:
            await reopened.close()

    asyncio.run(run())
