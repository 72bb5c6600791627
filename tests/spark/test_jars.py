"""Spark's Kafka connector jars are found the same way by the benchmark, the demo and the tests."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from kafkacompat.spark.jars import ConnectorJarsError, connector_jars, kafka_clients_jar
from kafkacompat.testing.spark import spark_environment

from .conftest import REPO

SHARED_JARS = REPO.parent / "shared" / "jars" / "spark-4.0"
CONNECTOR = ("spark-sql-kafka-0-10_2.13-4.0.0.jar", "spark-token-provider-kafka-0-10_2.13-4.0.0.jar",
             "commons-pool2-2.12.0.jar")


def folder_of(tmp_path: pathlib.Path, *names: str) -> pathlib.Path:
    for name in names:
        (tmp_path / name).write_bytes(b"")
    return tmp_path


def test_a_folder_without_kafka_clients_is_completed_from_pyflink(tmp_path, monkeypatch):
    clients = kafka_clients_jar()
    if clients is None:
        pytest.skip("pyflink/lib/kafka-clients.jar is installed by tests/run.sh (shigawire-apache-flink-libraries)")
    folder = folder_of(tmp_path, *CONNECTOR)
    monkeypatch.setenv("KAFKACOMPAT_SPARK_JARS", str(folder))
    assert connector_jars() == [*sorted(str(folder / n) for n in CONNECTOR), str(clients)]


def test_a_folder_with_its_own_kafka_clients_keeps_it(tmp_path):
    folder = folder_of(tmp_path, *CONNECTOR, "kafka-clients-3.9.1.jar")
    assert connector_jars(str(folder)) == sorted(str(p) for p in folder.iterdir())


def test_a_folder_missing_a_connector_jar_is_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.delenv("KAFKACOMPAT_SPARK_JARS", raising=False)
    assert connector_jars() == []  # no folder named: format("kafka") is simply not offered
    folder = folder_of(tmp_path, CONNECTOR[0], CONNECTOR[1])
    with pytest.raises(ConnectorJarsError, match="lacks Spark's Kafka connector jars: commons-pool2$"):
        connector_jars(str(folder))
    done = subprocess.run([sys.executable, "-m", "kafkacompat.spark.bench", "--jars", str(folder)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"kafkacompat.spark.bench: {folder} lacks Spark's Kafka connector jars: commons-pool2"]


@pytest.mark.timeout(600)
def test_the_benchmark_compares_both_readers_with_the_shared_jars_folder():
    """The shared folder holds no kafka-clients jar: the benchmark finds pyflink's, as the tests do."""
    if not SHARED_JARS.is_dir() or kafka_clients_jar() is None:
        pytest.skip("no ../shared/jars/spark-4.0 or pyflink/lib/kafka-clients.jar on this machine")
    spark_environment()
    env = {k: v for k, v in os.environ.items() if k != "KAFKACOMPAT_SPARK_JARS"}
    done = subprocess.run(
        [sys.executable, "-m", "kafkacompat.spark.bench", "--gib", "0.004", "--rounds", "1", "--partitions", "2",
         "--jars", str(SHARED_JARS)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert any(line.startswith("round 1 kafka ") for line in lines), done.stdout
    assert any(line.startswith("round 1 kafkacompat ") for line in lines), done.stdout
    assert any(line.startswith("ratio kafkacompat / kafka: ") for line in lines), done.stdout
