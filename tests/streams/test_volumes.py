"""On the disk engine: a partition's partitionlets spread over volumes, as topic info shows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafkacompat.protocol.records import record_timestamps

from kafkacompat import storage
from kafkacompat.testing import Broker

from .conftest import produce_sized as produce
from .conftest import table_rows

PARTITIONLET = 4096  # the smallest partitionlet the store allows


@pytest.fixture
def volumes(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "vol_a", tmp_path / "vol_b"


@pytest.fixture
def broker(volumes) -> Iterator[Broker]:
    """A disk broker on two small volumes (16 KiB of messages each), so new partitionlets alternate."""
    first, second = volumes
    store = storage.open_store(
        str(first), volumes=[str(second)], record_timestamps=record_timestamps,
        volume_limits={str(first): 4 * PARTITIONLET, str(second): 4 * PARTITIONLET},
    )
    with Broker(data_dir=str(first), store=store) as running:
        yield running


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
