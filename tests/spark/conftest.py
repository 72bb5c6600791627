"""A local Spark session (PySpark from PyPI, no connector jars) and a disk broker on two volumes."""

from __future__ import annotations

import os
import pathlib
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from kafkacompat import storage
from kafkacompat.protocol.records import record_timestamps
from kafkacompat.testing import Broker

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


def spark_environment() -> None:
    """Spark's Python workers must run this interpreter and import this checkout's kafkacompat."""
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # loopback only, whatever the host name resolves to
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))


def connector_jars() -> list[str]:
    """Spark's Kafka connector jars when this run has them (KAFKACOMPAT_SPARK_JARS).

    The first Spark session of a process fixes its JVM's classpath, so ours
    carries them too: compat_tests' Spark tests run later in the same process.
    """
    from kafkacompat.spark.jars import connector_jars as find

    return find()


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    spark_environment()
    from pyspark.sql import SparkSession

    from kafkacompat.spark import register

    builder = SparkSession.builder
    jars = connector_jars()
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    session = (
        builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


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
