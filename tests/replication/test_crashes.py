"""SIGKILL of a source, a middle and a destination cluster while a producer writes: nothing lost or doubled."""

from __future__ import annotations

import threading
import time

import pytest

from kafkacompat.admin.client import AdminClient
from kafkacompat.testing.cluster_process import ClusterProcess

from .helpers import wait_for

pytestmark = pytest.mark.slow

TOPIC = "/s:load"


def _read_all(bootstrap: str, partitions: int) -> list[tuple[int, int, bytes]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False})
    out = []
    try:
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
            consumer.assign([TopicPartition(TOPIC, p, low)])
            while high > low and (not out or out[-1][:2] != (p, high - 1)):
                msg = consumer.poll(5)
                assert msg is not None and msg.error() is None
                out.append((p, msg.offset(), msg.value()))
    finally:
        consumer.close()
    return out


def _ends(bootstrap: str, partitions: int) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(partitions)]
    finally:
        consumer.close()


def test_sigkill_source_middle_and_destination_under_load(tmp_path):
    from confluent_kafka import Producer

    clusters = [ClusterProcess(n, str(tmp_path / n)) for n in ("a", "b", "c")]
    a, b, c = clusters
    try:
        for cluster in clusters:
            cluster.start()
            AdminClient(cluster.bootstrap).call("stream.create", path="/s", policy={"default_partitions": 2})
        AdminClient(a.bootstrap).call("topic.create", name=TOPIC, partitions=2)
        AdminClient(a.bootstrap).call("replica.add", path="/s", replica=f"{b.bootstrap}/s")
        AdminClient(b.bootstrap).call("replica.add", path="/s", replica=f"{c.bootstrap}/s")

        acked: list[bytes] = []
        stop = threading.Event()

        def produce() -> None:
            producer = Producer({"bootstrap.servers": a.bootstrap, "acks": "all", "linger.ms": 5,
                                 "message.timeout.ms": 60000, "reconnect.backoff.max.ms": 200})
            i = 0
            while not stop.is_set():
                value = f"m{i:06d}".encode()
                producer.produce(TOPIC, value, partition=i % 2,
                                 on_delivery=lambda err, msg: err is None and acked.append(msg.value()))
                producer.poll(0)
                i += 1
                time.sleep(0.0005)
            assert producer.flush(60) == 0

        writer = threading.Thread(target=produce)
        writer.start()
        try:
            for victim in (b, a, c):  # the middle, the source, the destination
                time.sleep(0.8)
                victim.kill()
                time.sleep(0.4)
                victim.start()
            time.sleep(0.8)
        finally:
            stop.set()
            writer.join(90)
        ends = _ends(a.bootstrap, 2)
        for cluster in (b, c):
            wait_for(lambda: _ends(cluster.bootstrap, 2) == ends, timeout=60, what=f"{cluster.name} caught up")
        source = _read_all(a.bootstrap, 2)
        assert len(source) == sum(ends) > 1000
        assert set(acked) <= {v for _, _, v in source}, "an acknowledged message is missing at the source"
        for cluster in (b, c):
            assert _read_all(cluster.bootstrap, 2) == source  # same offsets, same messages, none twice
    finally:
        for cluster in clusters:
            cluster.close()
