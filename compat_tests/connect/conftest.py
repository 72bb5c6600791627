"""Fixtures: one on-disk broker and one Connect worker for the package (see connect_kit)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from kafkacompat.testing import Broker

from .. import matrix
from .connect_kit import KAFKA_HOME, ConnectWorker


@pytest.fixture(scope="package")
def connect_home() -> str:
    if shutil.which("java") is None:
        pytest.skip("Kafka Connect needs Java (apt install openjdk-17-jdk-headless)")
    script = os.path.join(KAFKA_HOME, "bin", "connect-distributed.sh")
    if not os.path.exists(script):
        pytest.skip(f"Kafka Connect needs Apache Kafka 4.1 at {KAFKA_HOME} (or KAFKACOMPAT_KAFKA_HOME): "
                    "its connect-runtime and REST server jars are in no registry reachable here")
    return KAFKA_HOME


@pytest.fixture(scope="package")
def connect_broker(connect_home: str) -> Iterator[Broker]:
    """An on-disk broker whose log cleaner runs every half second (Connect's topics are compacted)."""
    with Broker(data_dir="tmp", log_cleaner_backoff_ms=500) as running:
        yield running


@pytest.fixture(scope="package")
def worker(connect_broker: Broker) -> Iterator[ConnectWorker]:
    root = tempfile.mkdtemp(prefix="kafkacompat-connect-")
    running = ConnectWorker(connect_broker.bootstrap_servers, root)
    try:
        running.start()
        version = running.request("GET", "/")["version"]
        plugins = {p["class"]: p["version"] for p in running.request("GET", "/connector-plugins")}
        debezium = plugins.get("io.debezium.connector.postgresql.PostgresConnector")
        matrix.note_version("kafka_connect", f"Connect {version} distributed"
                            + (f", Debezium {debezium}" if debezium else ""))
        yield running
    finally:
        running.stop()
        shutil.rmtree(root, ignore_errors=True)
