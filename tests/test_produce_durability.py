"""When a produce is answered, per the stream's fsync policy (docs/benchmarks.md: "What an acknowledgement promises").

acks=all on one broker promises what Kafka's does, the batch in the log; only an `always`
stream holds answers (acks=1 and acks=all alike) until an fsync has covered the batch. Each
test holds the partition's fsync on a gate, so what a client sees shows whether its answer
waited for one.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from kafkacompat.storage import FsyncPolicy
from kafkacompat.storage.disk import partition as disk_partition

from kafkacompat.testing import Broker


@pytest.fixture
def gated_fsync(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[threading.Event, threading.Event]]:
    """(entered, release): the group commit's fsyncs of partition logs block until `release` is set."""
    entered, release = threading.Event(), threading.Event()
    real = disk_partition.DiskPartition._fsync_active

    def gated(self: disk_partition.DiskPartition) -> None:
        entered.set()
        release.wait(30)
        real(self)

    monkeypatch.setattr(disk_partition.DiskPartition, "_fsync_active", gated)
    yield entered, release
    release.set()


def _broker_with_policy(tmp_path, **policy: object) -> Broker:
    broker = Broker(data_dir=str(tmp_path)).start()
    store = broker.server.cluster.store
    current = store.get_stream(store.default_stream).policy
    broker.call(store.edit_stream(store.default_stream, dataclasses.replace(current, **policy)))
    return broker


def _send(bootstrap: str, acks: str, delivered: list) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0})
    producer.produce("durability", b"v", on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    return producer


@pytest.mark.parametrize("acks", ["all", "1"])
def test_interval_stream_answers_before_its_background_fsync(tmp_path, gated_fsync, acks) -> None:
    entered, _ = gated_fsync
    broker = _broker_with_policy(tmp_path, fsync=FsyncPolicy.INTERVAL, fsync_interval_ms=600_000)
    try:
        broker.create_topic("durability")
        delivered: list = []
        producer = _send(broker.bootstrap_servers, acks, delivered)
        assert producer.flush(15) == 0
        assert delivered == [(None, 0)]
        assert not entered.is_set()  # answered with no fsync begun (the next is 10 minutes away)
    finally:
        broker.stop()


@pytest.mark.parametrize("acks", ["all", "1"])
def test_always_stream_answers_only_after_an_fsync(tmp_path, gated_fsync, acks) -> None:
    entered, release = gated_fsync
    broker = _broker_with_policy(tmp_path, fsync=FsyncPolicy.ALWAYS)
    try:
        broker.create_topic("durability")
        delivered: list = []
        producer = _send(broker.bootstrap_servers, acks, delivered)
        assert entered.wait(15), "no fsync began for the batch"
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:  # the fsync is held: no answer may come meanwhile
            producer.poll(0.1)
        assert delivered == []
        release.set()
        assert producer.flush(15) == 0
        assert delivered == [(None, 0)]
    finally:
        broker.stop()
