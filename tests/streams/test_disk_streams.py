"""On the disk engine: ttl expiry reclaims files, and partitions spread over volumes."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import storage
from kafkacompat.testing import Broker
from protocol.records import record_timestamps

from .conftest import table_rows

PARTITIONLET = 4096  # the smallest partitionlet the store allows


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.1)


def produce(broker: Broker, topic: str, count: int, size: int) -> list[int]:
    """`count` messages of `size` bytes, one batch each (so partitionlets fill predictably); their offsets."""
    offsets: list[int] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(count):
        producer.produce(topic, bytes([65 + i % 26]) * size, partition=0,
                         on_delivery=lambda err, msg: offsets.append(-1 if err else msg.offset()))
        producer.poll(0)
    assert producer.flush(30) == 0
    return offsets


def log_files(*volumes: Path) -> list[Path]:
    return sorted(p for v in volumes for p in (v / "streams").rglob("*.log"))


@pytest.fixture
def volumes(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "vol_a", tmp_path / "vol_b"


@pytest.fixture
def broker(volumes) -> Iterator[Broker]:
    """A disk broker on two small volumes (16 KiB of messages each), so new partitionlets alternate."""
    first, second = volumes
    store = storage.open_store(
        str(first), volumes=[str(second)], record_timestamps=record_timestamps,
        volume_limits={str(first): 4 * PARTITIONLET, str(second): 4 * PARTITIONLET}, retention_check_ms=200,
    )
    with Broker(data_dir=str(first), store=store) as running:
        yield running


def test_short_ttl_expires_messages_and_reclaims_their_files(broker, cli, volumes):
    cli("stream", "create", "/iot/short", "--partitionlet-size", "4KB")  # kept forever while we look
    topic = "/iot/short:Pressure"
    cli("topic", "create", topic, "--partitions", "1")
    assert produce(broker, topic, 12, 1000) == list(range(12))
    lets = table_rows(cli("topic", "info", topic), "PARTITION  PARTITIONLET")
    assert len(lets) >= 3
    assert len(log_files(*volumes)) == len(lets)

    cli("stream", "edit", "/iot/short", "--ttl", "2")

    def expired() -> bool:
        partition = table_rows(cli("topic", "info", topic), "PARTITION  START")[0]
        return partition["START"] == "12" and partition["END"] == "12"

    wait_for(expired, 30, "the retention pass to expire every message")
    assert log_files(*volumes) == []
    assert "PARTITION  PARTITIONLET" not in cli("topic", "info", topic)

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "late"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (12, 12)
    finally:
        consumer.close()
    assert produce(broker, topic, 1, 10) == [12]  # offsets are never reused


def test_topic_info_shows_a_partition_spread_over_two_volumes(broker, cli, volumes):
    cli("stream", "create", "/iot/spread", "--partitionlet-size", "4KB")
    topic = "/iot/spread:Temperature"
    cli("topic", "create", topic, "--partitions", "1")
    assert produce(broker, topic, 16, 1000) == list(range(16))

    lets = table_rows(cli("topic", "info", topic), "PARTITION  PARTITIONLET")
    first, second = (str(v.resolve()) for v in volumes)
    assert {row["VOLUME"] for row in lets} == {first, second}
    assert [row["STATE"] for row in lets] == ["sealed"] * (len(lets) - 1) + ["active"]
    offsets = [tuple(map(int, row["OFFSETS"].split("-"))) for row in lets]
    assert offsets[0][0] == 0 and offsets[-1][1] == 15
    assert all(b[0] == a[1] + 1 for a, b in zip(offsets, offsets[1:]))  # a dense chain across volumes
