"""Spark 4's Kafka source and sink call pattern, on Java kafka-clients 3.9.1 (runs in CI).

SparkSourceCalls.java makes the calls Spark makes: AdminClient
describeTopics and listOffsets (earliest / latest / forTimestamp) to plan,
assign + seek + poll without a group to read a range, and an idempotent
acks=all byte-array producer to write. PySpark itself is in test_pyspark.py.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import pytest

from kafkacompat.testing import Broker

from . import matrix
from .conftest import create_topic
from .drivers import ClientUnavailable
from .test_scenarios import stored_batch_headers

pytestmark = pytest.mark.spark_java


@pytest.fixture(scope="module")
def spark_calls(broker: Broker) -> Any:
    from .drivers import java

    try:
        argv = java.java_command("SparkSourceCalls")
        version = java.kafka_clients_version()
    except ClientUnavailable as exc:
        pytest.skip(f"Java kafka-clients is not installed: {exc}")
    matrix.note_version("spark_java", f"kafka-clients {version} (Spark 4 call pattern)")

    def run(command: str, **options: Any) -> dict[str, Any]:
        done = subprocess.run(
            [*argv, command, broker.bootstrap_servers, *(f"{k}={v}" for k, v in options.items())],
            capture_output=True, text=True, timeout=120, check=False,
        )
        assert done.returncode == 0, f"SparkSourceCalls {command} exited {done.returncode}:\n{done.stderr[-4000:]}"
        return json.loads(done.stdout.strip().splitlines()[-1])

    return run


def written(run: Any, topic: str, n: int) -> dict[int, list[int]]:
    """Write n rows through the sink; partition -> offsets acknowledged."""
    by_partition: dict[int, list[int]] = {}
    for partition, offset in run("write", topic=topic, n=n)["acks"]:
        by_partition.setdefault(partition, []).append(offset)
    return by_partition


def test_sink_idempotent_byte_producer(spark_calls: Any, broker: Broker, topic: str) -> None:
    create_topic(broker, topic, 3)
    acks = written(spark_calls, topic, 30)
    assert sum(len(offsets) for offsets in acks.values()) == 30
    for partition, offsets in acks.items():
        assert offsets == list(range(len(offsets))), "offsets of a partition must be dense from 0"
        stored = stored_batch_headers(broker, topic, partition=partition)
        assert all(h.producer_id >= 0 for h in stored), "the sink's batches carry no producer id"


def test_source_plans_offsets(spark_calls: Any, broker: Broker, topic: str) -> None:
    create_topic(broker, topic, 3)
    before = int(time.time() * 1000) - 1
    acks = written(spark_calls, topic, 30)
    counts = [len(acks.get(p, [])) for p in range(3)]
    plan = spark_calls("plan", topic=topic, timestamp=before)
    assert plan["partitions"] == 3
    assert plan["earliest"] == [0, 0, 0]
    assert plan["latest"] == counts
    assert plan["by_time"] == [0 if c else -1 for c in counts]
    future = spark_calls("plan", topic=topic, timestamp=int(time.time() * 1000) + 3_600_000)
    assert future["by_time"] == [-1, -1, -1], "no record at or after T must answer -1 (Spark reads to latest)"


def test_executor_reads_offset_ranges(spark_calls: Any, broker: Broker, topic: str) -> None:
    create_topic(broker, topic, 3)
    acks = written(spark_calls, topic, 30)
    rows = []
    for partition, offsets in acks.items():
        got = spark_calls("read", topic=topic, partition=partition, **{"from": 0, "until": len(offsets)})["records"]
        assert [r["o"] for r in got] == offsets
        rows += got
    assert sorted(int(r["v"].removeprefix("row")) for r in rows) == list(range(30))
    assert all(r["k"] == "key" + r["v"].removeprefix("row") for r in rows)
    assert all(r["h"] == [["row", r["v"].removeprefix("row")]] for r in rows)
    busiest = max(acks, key=lambda p: len(acks[p]))
    end = len(acks[busiest])
    middle = spark_calls("read", topic=topic, partition=busiest, **{"from": 1, "until": end - 1})["records"]
    assert [r["o"] for r in middle] == list(range(1, end - 1))
