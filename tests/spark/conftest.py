"""The run's shared Spark session (kafkacompat.testing.spark) and a disk broker on two volumes."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest
from kafkacompat.protocol.records import record_timestamps

from kafkacompat import storage
from kafkacompat.testing import Broker
from kafkacompat.testing.spark import spark  # noqa: F401 - the run's one Spark session, for every test here

pytest.importorskip("pyspark", reason="PySpark is installed by tests/run.sh (pip install '.[test]')")
pytest.importorskip("pyarrow", reason="pyarrow is installed by tests/run.sh (pip install '.[test]')")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here starts a JVM (Spark) and takes tens of seconds: not in the quick subset."""
    here = pathlib.Path(__file__).resolve().parent
    for item in items:
        if here in pathlib.Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.slow)


REPO = pathlib.Path(__file__).resolve().parents[2]
STREAM = "/apps/iot/oilpump_metrics"
PARTITIONLET = 8 * 1024


@pytest.fixture
def volumes(tmp_path: pathlib.Path) -> tuple[str, str]:
    return str(tmp_path / "vol_a"), str(tmp_path / "vol_b")


@pytest.fixture
def broker(volumes: tuple[str, str]) -> Iterator[Broker]:
    """A disk broker whose partitionlets alternate between two capped volumes."""
    first, second = volumes
    store = storage.open_store(
        first, volumes=[second], record_timestamps=record_timestamps,
        volume_limits={first: 64 << 20, second: 64 << 20}, retention_check_ms=100,
    )
    with Broker(data_dir=first, store=store, retention_check_ms=100) as running:
        running.call(running.server.cluster.store.create_stream(
            STREAM, storage.StreamPolicy(partitionlet_bytes=PARTITIONLET, default_partitions=3)))
        yield running
