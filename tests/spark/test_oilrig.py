"""`kafkacompat demo oilrig` end to end, checked against the simulation it runs."""

from __future__ import annotations

import collections
import json
import os
import pathlib
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, TopicPartition

from kafkacompat.demo.oilrig import START_MS, WARNINGS, reading
from kafkacompat.testing import Broker
from kafkacompat.testing.spark import spark_environment

from .conftest import REPO

SPARK_JARS = REPO.parent / "shared" / "jars" / "spark-4.0"
PUMPS, READINGS = 3, 70


def connector_folder() -> pathlib.Path | None:
    """The shared folder of Spark's Kafka connector jars, when this machine has it: it holds no
    kafka-clients jar, which the demo finds in pyflink/lib as a user's run would."""
    from kafkacompat.spark.jars import kafka_clients_jar

    return SPARK_JARS if SPARK_JARS.is_dir() and kafka_clients_jar() is not None else None


def expected_windows() -> dict[tuple[str, str, int], tuple[float, float, int]]:
    """(pump, metric, window start ms) -> (avg, max, count), computed here from the simulation."""
    values: dict[tuple[str, str, int], list[float]] = collections.defaultdict(list)
    for second in range(READINGS):
        for pump in range(PUMPS):
            for metric in ("Pressure", "Temperature"):
                start = START_MS + (second // 10) * 10_000
                values[f"pump-{pump}", metric, start].append(reading(pump, metric, second, PUMPS))
    return {k: (round(sum(v) / len(v), 2), max(v), len(v)) for k, v in values.items()}


def test_the_oilrig_pipeline_runs_end_to_end(tmp_path):
    spark_environment()
    env = dict(os.environ)
    folder = connector_folder()
    if folder is not None:
        env["KAFKACOMPAT_SPARK_JARS"] = str(folder)  # alerts through Spark's own Kafka sink
    data, out = tmp_path / "data", tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "kafkacompat", "demo", "oilrig", "--data-dir", str(data), "--output", str(out),
         "--pumps", str(PUMPS), "--readings", str(READINGS)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{PUMPS} pumps sent {PUMPS * READINGS * 2} readings" in done.stdout
    path = "Spark's Kafka sink" if folder is not None else "the broker's Kafka port"
    assert f"alerts go to {WARNINGS} through {path}" in done.stdout

    import pyarrow.parquet as pq

    table = pq.read_table(out / "aggregates").to_pylist()
    got = {(r["pump"], r["metric"], int(r["window_start"].timestamp() * 1000)): (r["avg"], r["max"], r["readings"])
           for r in table}
    expected = expected_windows()
    assert got.keys() == expected.keys()
    for key, (avg, peak, count) in expected.items():  # Spark rounds half up, Python half to even
        assert got[key] == (pytest.approx(avg, abs=0.011), peak, count), key
    assert len(table) == len(got)  # each window written once

    with Broker(data_dir=str(data)) as broker:  # the alerts are durable in the stream
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "check"})
        consumer.assign([TopicPartition(WARNINGS, 0, 0)])
        messages = consumer.consume(10, timeout=10)
        consumer.close()
    alerts = sorted((m.key().decode(), json.loads(m.value())["metric"]) for m in messages)
    assert alerts == [("pump-1", "Pressure"), (f"pump-{PUMPS - 1}", "Temperature")]
    assert "2 alerts in /apps/iot/oilpump_metrics:Warnings" in done.stdout


@pytest.mark.slow
def test_a_jar_folder_lacking_the_connector_is_warned_about_once(tmp_path):
    spark_environment()
    empty = tmp_path / "jars"
    empty.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "kafkacompat", "demo", "oilrig", "--data-dir", str(tmp_path / "data"),
         "--output", str(tmp_path / "out"), "--pumps", "1", "--readings", "10"],
        cwd=REPO, env={**os.environ, "KAFKACOMPAT_SPARK_JARS": str(empty)}, capture_output=True, text=True,
        timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count("lacks Spark's Kafka connector jars") == 1, done.stderr[-3000:]
    assert f"alerts go to {WARNINGS} through the broker's Kafka port" in done.stdout
