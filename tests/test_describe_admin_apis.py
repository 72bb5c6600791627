"""DescribeLogDirs (volumes as log dirs) and DescribeProducers (idempotent producers) at the wire."""

from __future__ import annotations

import time

import kio.schema.describe_log_dirs.v4.request as dld
import kio.schema.describe_producers.v0.request as dp
from confluent_kafka import Producer
from kafkacompat.protocol.messages import make
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from tests.conftest import create_topic
from tests.wire import Wire


def log_dirs(bootstrap: str, topics: tuple | None = None) -> dict[str, tuple[int, int, dict]]:
    with Wire(bootstrap) as wire:
        answer = wire.request(35, 4, make(dld.DescribeLogDirsRequest, topics=topics))
    assert answer.error_code == ErrorCode.none
    return {r.log_dir: (r.total_bytes, r.usable_bytes,
                        {(t.name, p.partition_index): p.partition_size for t in r.topics for p in t.partitions})
            for r in answer.results}


def test_each_volume_is_a_log_dir_holding_the_bytes_of_its_partitionlets(tmp_path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    with Broker(data_dir=str(first), volumes=[str(second)]) as broker:
        topic = create_topic(broker.bootstrap_servers, "sized", 2)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        for i in range(5):
            producer.produce(topic, b"x" * 1000, partition=0)
            producer.flush(10)
        stored = sum(p.size_bytes for p in broker.call(broker.server.store.partition("/default", topic, 0).partitionlets()))
        dirs = log_dirs(broker.bootstrap_servers)
        assert set(dirs) == {str(first), str(second)}
        assert all(total > 0 and 0 <= usable <= total for total, usable, _ in dirs.values())
        sizes = {}
        for _total, _usable, parts in dirs.values():
            for key, size in parts.items():
                sizes[key] = sizes.get(key, 0) + size
        assert sizes[(topic, 0)] == stored > 5000 and sizes[(topic, 1)] == 0
        only = log_dirs(broker.bootstrap_servers, (make(dld.DescribableLogDirTopic, topic=topic, partitions=(1, 7)),))
        assert [parts for _t, _u, parts in only.values() if parts] == [{(topic, 1): 0}]


def test_a_memory_store_has_one_log_dir_of_unknown_size() -> None:
    with Broker() as broker:
        create_topic(broker.bootstrap_servers, "in-memory")
        [(total, usable, parts)] = log_dirs(broker.bootstrap_servers).values()
    assert (total, usable) == (-1, -1) and parts[("in-memory", 0)] == 0


def test_idempotent_producers_are_described_with_their_last_batch(broker: Broker, topic: str) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True, "linger.ms": 0})
    at = int(time.time() * 1000) - 60_000  # a minute ago: within the default stream's 7-day ttl
    for i in range(3):
        producer.produce(topic, b"v", timestamp=at + i)
        producer.flush(10)
    with Wire(broker.bootstrap_servers) as wire:
        answer = wire.request(61, 0, make(dp.DescribeProducersRequest, topics=(
            make(dp.TopicRequest, name=topic, partition_indexes=(0, 9)),)))
    ok, missing = answer.topics[0].partitions
    assert missing.error_code == ErrorCode.unknown_topic_or_partition and ok.error_code == ErrorCode.none
    [state] = ok.active_producers
    assert (state.producer_epoch, state.last_sequence, state.last_timestamp) == (0, 2, at + 2)
    assert (state.coordinator_epoch, state.current_txn_start_offset) == (-1, -1) and state.producer_id >= 0
