"""Real PySpark 4 (local mode) reading and writing through Spark's built-in Kafka source and sink.

Spark's connector jars (spark-sql-kafka-0-10, spark-token-provider-kafka-0-10,
commons-pool2) are in no registry this suite can reach: the directory
holding them is KAFKACOMPAT_SPARK_JARS, else spark-4.0/ in the shared jars
folder (../shared/jars); without either these tests skip (and pyspark is not
even imported). The Spark session is the run's one (kafkacompat.testing.spark),
shared with tests/spark. kafka-clients 3.9.1 comes from the
flink wheel the Java tests use. See docs/compatibility.md for providing the jars.
"""

from __future__ import annotations

import json
import pathlib
import time
import uuid
from typing import Any

import pytest

from kafkacompat.testing import Broker
from kafkacompat.testing.spark import spark_jars_folder

from . import matrix
from .conftest import create_topic

JARS_DIR = spark_jars_folder()
pytestmark = [
    pytest.mark.pyspark,
    pytest.mark.skipif(
        not JARS_DIR,
        reason="Spark's Kafka connector jars are in no registry here: neither KAFKACOMPAT_SPARK_JARS "
               "nor ../shared/jars/spark-4.0 holds them (see README)",
    ),
]
TRACE = b"0af7651916cd43dd8448eb211c80319c"


@pytest.fixture(scope="module", autouse=True)
def note_version(spark: Any) -> None:
    """The matrix names the PySpark and connector versions these scenarios ran with."""
    from kafkacompat.spark.jars import connector_jars

    connector = next(pathlib.Path(j).stem for j in connector_jars(JARS_DIR) if "spark-sql-kafka" in j)
    matrix.note_version("pyspark", f"pyspark {spark.version}, {connector}")


def seed(broker: Broker, topic: str, n: int, timestamps: list[int] | None = None) -> None:
    """Records k0..k(n-1) in partition 0, through librdkafka as a reference producer."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(n):
        producer.produce(
            topic, key=f"k{i}", value=f"v{i}", partition=0, headers=[("trace", TRACE)],
            timestamp=timestamps[i] if timestamps else 0,
        )
    assert producer.flush(30) == 0


def kafka_reader(spark: Any, broker: Broker, topic: str) -> Any:
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
    )


def test_batch_read_between_offsets(spark: Any, broker: Broker, topic: str) -> None:
    create_topic(broker, topic, 2)
    seed(broker, topic, 10)
    df = (
        kafka_reader(spark, broker, topic)
        .option("startingOffsets", json.dumps({topic: {"0": 2, "1": -2}}))
        .option("endingOffsets", json.dumps({topic: {"0": 7, "1": -1}}))
        .load()
    )
    rows = df.selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v", "partition", "offset").collect()
    assert sorted((r.offset, r.k, r.v) for r in rows) == [(i, f"k{i}", f"v{i}") for i in range(2, 7)]


def test_batch_read_from_timestamp(spark: Any, broker: Broker, topic: str) -> None:
    create_topic(broker, topic, 1)
    base = (int(time.time()) - 3600) * 1000  # an hour ago: within the default stream's 7-day ttl
    seed(broker, topic, 10, timestamps=[base + 1000 * i for i in range(10)])
    df = (
        kafka_reader(spark, broker, topic)
        .option("startingOffsetsByTimestamp", json.dumps({topic: {"0": base + 5000}}))
        .option("endingOffsets", "latest")
        .load()
    )
    rows = df.selectExpr("CAST(key AS STRING) k", "offset", "timestamp").orderBy("offset").collect()
    assert [r.offset for r in rows] == list(range(5, 10))
    assert [r.k for r in rows] == [f"k{i}" for i in range(5, 10)]


def kafka_stream(spark: Any, broker: Broker, topic: str) -> Any:
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
        .selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v", "offset", "headers")
    )


def finish(query: Any) -> None:
    assert query.awaitTermination(180), "the availableNow query did not finish"
    assert query.exception() is None


def test_stream_available_now_into_memory_with_headers(
    spark: Any, broker: Broker, topic: str, tmp_path: pathlib.Path
) -> None:
    create_topic(broker, topic, 1)
    seed(broker, topic, 10)
    name = f"compat_{uuid.uuid4().hex[:8]}"
    finish(
        kafka_stream(spark, broker, topic).writeStream.format("memory").queryName(name)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True).start()
    )
    rows = spark.sql(f"SELECT * FROM {name} ORDER BY offset").collect()
    assert [(r.k, r.v) for r in rows] == [(f"k{i}", f"v{i}") for i in range(10)]
    assert all([(h.key, bytes(h.value)) for h in r.headers] == [("trace", TRACE)] for r in rows)


def test_stream_resumes_from_its_checkpoint(spark: Any, broker: Broker, topic: str, tmp_path: pathlib.Path) -> None:
    """A pipeline run twice into files: the second run reads only what arrived since."""
    create_topic(broker, topic, 1)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def run() -> list[tuple[int, str]]:
        finish(
            kafka_stream(spark, broker, topic).drop("headers").writeStream.format("parquet")
            .option("path", out).option("checkpointLocation", checkpoint)
            .trigger(availableNow=True).start()
        )
        return sorted((r.offset, r.k) for r in spark.read.parquet(out).collect())

    seed(broker, topic, 4)
    assert run() == [(i, f"k{i}") for i in range(4)]
    seed(broker, topic, 3)  # offsets 4..6, keys k0..k2 again
    assert run() == [(i, f"k{i}") for i in range(4)] + [(4, "k0"), (5, "k1"), (6, "k2")]


def test_write_with_the_kafka_sink(spark: Any, broker: Broker, topic: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    create_topic(broker, topic, 1)
    df = spark.createDataFrame(
        [(f"k{i}", f"v{i}", [("trace", bytearray(TRACE))]) for i in range(5)],
        "key STRING, value STRING, headers ARRAY<STRUCT<key: STRING, value: BINARY>>",
    )
    (
        df.write.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", topic)
        .save()
    )
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "unused"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        got = consumer.consume(5, timeout=30)
    finally:
        consumer.close()
    assert sorted((m.key().decode(), m.value().decode(), tuple(m.headers())) for m in got) == [
        (f"k{i}", f"v{i}", (("trace", TRACE),)) for i in range(5)
    ]


def transactional_seed(broker: Broker, topic: str) -> list[str]:
    """Three transactions in partition 0: committed, aborted, committed; the committed keys in order."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"spark-{topic}"})
    producer.init_transactions(30)
    committed = []
    for name, commit in (("c", True), ("a", False), ("d", True)):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, key=f"{name}{i}", value=f"v{i}", partition=0)
        if commit:
            producer.commit_transaction(30)
            committed += [f"{name}{i}" for i in range(3)]
        else:
            producer.flush(30)
            producer.abort_transaction(30)
    return committed


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_batch_read_honours_the_isolation_level(spark: Any, broker: Broker, topic: str, isolation: str) -> None:
    """Spark's Kafka source over transactions: aborted records and markers never show as rows under read_committed."""
    from confluent_kafka import Consumer, TopicPartition

    create_topic(broker, topic, 1)
    transactional_seed(broker, topic)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "unused",
                         "isolation.level": isolation, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    expected = []
    try:
        while (message := consumer.poll(30)) is not None and message.error() is None:
            expected.append((message.offset(), message.key().decode()))
    finally:
        consumer.close()
    df = (
        kafka_reader(spark, broker, topic)
        .option("kafka.isolation.level", isolation)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    rows = sorted((r.offset, r.k) for r in df.selectExpr("offset", "CAST(key AS STRING) k").collect())
    assert rows == expected
    assert len(rows) == (6 if isolation == "read_committed" else 9)
