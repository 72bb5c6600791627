"""/metrics beyond request counts: per-topic traffic in and out, partitions, lag, store activity, connections.

Each test does what a user does (stock clients producing, consuming,
committing) and checks the figure a user would compare with what they did.
"""

from __future__ import annotations

import dataclasses
import socket
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafkacompat.storage import FsyncPolicy

from kafkacompat.http import metrics_detail
from kafkacompat.testing import Broker
from tests.http.test_metrics import produce, scrape, total
from tests.test_clients_produce_consume import consume_all


def sample(samples: dict, name: str, **labels: str) -> float:
    """The one sample of `name` whose labels are exactly `labels`."""
    return samples[name, tuple(sorted(labels.items()))]


def test_messages_and_bytes_in_and_out_per_topic_equal_what_clients_did() -> None:
    with Broker(http_port=0, metrics_topic_series=10) as broker:
        broker.create_topic("orders")
        broker.create_topic("other")
        values = [b"order-%d" % i for i in range(7)]
        produce(broker.bootstrap_servers, "orders", values)
        produce(broker.bootstrap_servers, "other", [b"x"])
        assert [m.value() for m in consume_all(broker.bootstrap_servers, "orders", 1, 7)] == values
        samples = scrape(broker)
        assert sample(samples, "kafkacompat_topic_messages_in_total", topic="orders") == 7
        assert sample(samples, "kafkacompat_topic_messages_out_total", topic="orders") == 7
        assert sample(samples, "kafkacompat_topic_bytes_out_total", topic="orders") == \
            sample(samples, "kafkacompat_topic_bytes_in_total", topic="orders")  # every stored batch read once
        assert sample(samples, "kafkacompat_topic_messages_in_total", topic="other") == 1
        assert ("kafkacompat_topic_messages_out_total", (("topic", "other"),)) not in samples  # never read
        assert total(samples, "kafkacompat_messages_out_total") == 7


def test_partition_size_offsets_and_partitionlets_match_the_store(tmp_path) -> None:
    with Broker(data_dir=str(tmp_path), http_port=0, metrics_topic_series=10) as broker:
        broker.create_topic("readings", partitions=2, configs={"segment.bytes": "4096"})
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        for i in range(40):
            producer.produce("readings", b"v" * 200, key=b"pump-1", partition=0)
            assert producer.flush(15) == 0  # one batch each
        samples = scrape(broker)
        partition = broker.server.cluster.store.partition(broker.server.cluster.default_stream, "readings", 0)
        chain = broker.call(partition.partitionlets())
        assert len(chain) > 1  # 40 batches of ~270 bytes roll 4 KiB partitionlets
        assert sample(samples, "kafkacompat_partition_partitionlets", topic="readings", partition="0") == len(chain)
        assert sample(samples, "kafkacompat_partition_size_bytes", topic="readings", partition="0") == \
            sample(samples, "kafkacompat_topic_bytes_in_total", topic="readings")
        assert sample(samples, "kafkacompat_partition_end_offset", topic="readings", partition="0") == 40
        assert sample(samples, "kafkacompat_partition_start_offset", topic="readings", partition="0") == 0
        assert sample(samples, "kafkacompat_partition_end_offset", topic="readings", partition="1") == 0
        assert sample(samples, "kafkacompat_volume_partitionlets", volume=str(tmp_path)) == len(chain)


def test_lag_is_the_end_offset_minus_the_committed_offset() -> None:
    with Broker(http_port=0, metrics_topic_series=10) as broker:
        broker.create_topic("jobs", partitions=2)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        for i in range(10):
            producer.produce("jobs", b"job", partition=i % 2)  # 5 per partition
        assert producer.flush(15) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "workers",
                             "enable.auto.commit": False})
        try:
            consumer.commit(offsets=[TopicPartition("jobs", 0, 4), TopicPartition("jobs", 1, 1)], asynchronous=False)
        finally:
            consumer.close()
        samples = scrape(broker)
        assert sample(samples, "kafkacompat_consumer_group_lag", group="workers", topic="jobs", partition="0") == 5 - 4
        assert sample(samples, "kafkacompat_consumer_group_lag", group="workers", topic="jobs", partition="1") == 5 - 1


def test_per_partition_and_lag_series_stay_off_without_per_topic_series() -> None:
    with Broker(http_port=0) as broker:
        produce(broker.bootstrap_servers, "plain", [b"a"])
        names = {name for name, _ in scrape(broker)}
        assert not {n for n in names if n.startswith(("kafkacompat_partition_", "kafkacompat_consumer_group_lag"))}


def test_partition_series_stop_at_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_detail, "SERIES_MAX", 3)
    with Broker(http_port=0, metrics_topic_series=10) as broker:
        broker.create_topic("wide", partitions=5)
        produce(broker.bootstrap_servers, "wide", [b"a"])
        samples = scrape(broker)
        assert len([k for k in samples if k[0] == "kafkacompat_partition_size_bytes"]) == 3


def test_fsync_and_retention_activity(tmp_path) -> None:
    with Broker(data_dir=str(tmp_path), http_port=0, retention_check_ms=3_600_000) as broker:
        broker.create_topic("capped", configs={"segment.bytes": "4096", "retention.bytes": "4096"})
        store = broker.server.cluster.store
        policy = store.get_stream(store.default_stream).policy
        broker.call(store.edit_stream(store.default_stream, dataclasses.replace(policy, fsync=FsyncPolicy.ALWAYS)))
        before = scrape(broker)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0, "acks": "all"})
        for _ in range(60):
            producer.produce("capped", b"r" * 200)
            assert producer.flush(15) == 0  # one batch each
        partition = store.partition(store.default_stream, "capped", 0)
        size_before = sum(p.size_bytes for p in broker.call(partition.partitionlets()))
        deleted = broker.call(store.enforce_retention())
        size_after = sum(p.size_bytes for p in broker.call(partition.partitionlets()))
        after = scrape(broker)
        assert total(after, "kafkacompat_log_fsyncs_total") > total(before, "kafkacompat_log_fsyncs_total")
        assert total(after, "kafkacompat_log_fsync_seconds_total") > 0
        assert total(after, "kafkacompat_log_fsync_failures_total") == 0
        assert deleted > 0
        assert total(after, "kafkacompat_retention_passes_total") == total(before, "kafkacompat_retention_passes_total") + 1
        assert total(after, "kafkacompat_retention_deleted_partitionlets_total") == deleted
        assert total(after, "kafkacompat_retention_deleted_bytes_total") == size_before - size_after


def test_connections_and_producer_ids() -> None:
    with Broker(http_port=0, max_connections_per_ip=2) as broker:
        produce(broker.bootstrap_servers, "t", [b"1"], idempotent=True)
        samples = scrape(broker)
        assert total(samples, "kafkacompat_producer_ids") == 1
        assert total(samples, "kafkacompat_producer_ids_issued_total") == 1
        accepted = total(samples, "kafkacompat_connections_accepted_total")
        assert accepted >= 1
        held = [socket.create_connection(("127.0.0.1", broker.port), timeout=5) for _ in range(3)]
        try:
            deadline = time.monotonic() + 10
            while total(scrape(broker), "kafkacompat_connections_refused_total") < 1:
                assert time.monotonic() < deadline, "the third connection was not refused"
                time.sleep(0.05)
            samples = scrape(broker)
            assert total(samples, "kafkacompat_connections_refused_total") == 1
            assert total(samples, "kafkacompat_connections_accepted_total") == accepted + 2
        finally:
            for sock in held:
                sock.close()
