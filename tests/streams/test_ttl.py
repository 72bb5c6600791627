"""On the disk engine: a stream's ttl expires messages and reclaims their files."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from kafkacompat.testing import Broker

from .conftest import produce_sized as produce
from .conftest import table_rows


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.1)


def log_files(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "streams").rglob("*.log"))


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def broker(data_dir) -> Iterator[Broker]:
    """A disk broker whose retention pass runs every 200 ms (`serve --retention-check-ms 200`)."""
    with Broker(data_dir=str(data_dir), retention_check_ms=200) as running:
        yield running


def test_short_ttl_expires_messages_and_reclaims_their_files(broker, cli, data_dir):
    cli("stream", "create", "/iot/short", "--partitionlet-size", "4KB")  # kept forever while we look
    topic = "/iot/short:Pressure"
    cli("topic", "create", topic, "--partitions", "1")
    assert produce(broker, topic, 12, 1000) == list(range(12))
    lets = table_rows(cli("topic", "info", topic), "PARTITION  PARTITIONLET")
    assert len(lets) >= 3
    assert len(log_files(data_dir)) == len(lets)

    cli("stream", "edit", "/iot/short", "--ttl", "2")

    def expired() -> bool:
        partition = table_rows(cli("topic", "info", topic), "PARTITION  START")[0]
        return partition["START"] == "12" and partition["END"] == "12"

    wait_for(expired, 30, "the retention pass to expire every message")
    assert log_files(data_dir) == []
    assert "PARTITION  PARTITIONLET" not in cli("topic", "info", topic)

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "late"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (12, 12)
    finally:
        consumer.close()
    assert produce(broker, topic, 1, 10) == [12]  # offsets are never reused
