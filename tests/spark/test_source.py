"""`format("kafkacompat")` returns exactly what a Kafka consumer reads for the same topics.

The data is produced by confluent-kafka with every codec, keys and headers,
into a stream whose small partitionlets alternate between two volumes; the
reference rows come from a confluent-kafka consumer reading each partition
from its log start to its end over the broker's Kafka port.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kafkacompat.testing import Broker

from .conftest import REPO, STREAM

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PRESSURE = f"{STREAM}:Pressure"
TEMPERATURE = f"{STREAM}:Temperature"

Row = tuple[str, int, int, bytes | None, bytes | None, int, int, tuple[tuple[str, bytes | None], ...]]


def produce(broker: Broker, topic: str, count: int, codec: str = "none", tag: str = "") -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "compression.type": codec,
                         "linger.ms": 5, "enable.idempotence": True})
    for i in range(count):
        producer.produce(topic, key=f"pump-{i % 7}".encode(), value=f"{tag}{codec}-{i}".encode() * (1 + i % 5),
                         headers=[("codec", codec.encode()), ("n", str(i).encode()), ("empty", None)])
        if i % 100 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def kafka_rows(broker: Broker, topics: list[str]) -> list[Row]:
    """Every record of every partition, as a Kafka consumer sees it."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "reference",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    try:
        wanted = []
        for topic in topics:
            meta = consumer.list_topics(topic, timeout=10).topics[topic]
            for p in meta.partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                if high > low:
                    wanted.append((topic, p, low, high))
        consumer.assign([TopicPartition(t, p, low) for t, p, low, _ in wanted])
        remaining = {(t, p): high for t, p, _, high in wanted}
        rows: list[Row] = []
        deadline = time.monotonic() + 60
        while remaining and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                assert msg.error() is None, msg.error()
                ts_type, ts = msg.timestamp()
                rows.append((msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(), ts, ts_type - 1,
                             tuple((k, v) for k, v in (msg.headers() or []))))
                if msg.offset() + 1 >= remaining.get((msg.topic(), msg.partition()), 1 << 62):
                    del remaining[(msg.topic(), msg.partition())]
        assert not remaining, f"the reference consumer did not reach the end of {remaining}"
        return sorted(rows, key=lambda r: (r[0], r[1], r[2]))
    finally:
        consumer.close()


def spark_rows(df: Any) -> list[Row]:
    out = df.selectExpr("topic", "partition", "offset", "key", "value", "unix_millis(timestamp) AS ts",
                        "timestampType", "headers").collect()
    return sorted(((r.topic, r.partition, r.offset, _b(r.key), _b(r.value), r.ts, r.timestampType,
                    tuple((h.key, _b(h.value)) for h in r.headers)) for r in out), key=lambda r: (r[0], r[1], r[2]))


def _b(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def source(spark: Any, volumes: tuple[str, str], **options: str) -> Any:
    reader = spark.read.format("kafkacompat").option("dataDir", ",".join(volumes))
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_rows_match_a_kafka_consumer_across_codecs_partitionlets_and_volumes(spark, broker, volumes):
    for topic in (PRESSURE, TEMPERATURE):
        broker.create_topic(topic, partitions=3)
    for codec in CODECS:
        produce(broker, PRESSURE, 400, codec)
    produce(broker, TEMPERATURE, 300, "zstd")

    df = source(spark, volumes, stream=STREAM, topics="Pressure,Temperature", includeHeaders="true")
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    got = spark_rows(df)
    assert len(got) == 5 * 400 + 300
    assert got == kafka_rows(broker, [PRESSURE, TEMPERATURE])
    # The data really is spread: several partitionlets on each of the two volumes.
    lets = broker.call(broker.server.cluster.store.partition(STREAM, "Pressure", 0).partitionlets())
    assert len(lets) >= 3 and len({p.volume for p in lets}) == 2
    assert df.rdd.getNumPartitions() > 6  # split at partitionlet boundaries, not one task per partition


def test_offset_and_timestamp_ranges(spark, broker, volumes):
    broker.create_topic(PRESSURE, partitions=2)
    produce(broker, PRESSURE, 200, "lz4", tag="early-")
    time.sleep(0.05)  # timestamps are milliseconds: make the second wave strictly later
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    produce(broker, PRESSURE, 200, "lz4", tag="late-")
    everything = kafka_rows(broker, [PRESSURE])

    ranges = source(spark, volumes, subscribe=PRESSURE, startingOffsets='{"%s":{"0":10,"1":-2}}' % PRESSURE,
                    endingOffsets='{"%s":{"0":50,"1":-1}}' % PRESSURE, includeHeaders="true")
    assert spark_rows(ranges) == [r for r in everything if (r[1] == 0 and 10 <= r[2] < 50) or r[1] == 1]

    late = spark_rows(source(spark, volumes, subscribe=PRESSURE, startingTimestamp=str(middle),
                             includeHeaders="true"))
    assert late == [r for r in everything if r[5] >= middle]
    assert late and all(r[4].startswith(b"late-") for r in late)


def test_expired_data_is_not_returned(spark, broker, volumes):
    broker.create_topic(PRESSURE, partitions=1, configs={"retention.ms": "500"})
    produce(broker, PRESSURE, 2000, "none", tag="old-")
    wait_until(lambda: kafka_rows(broker, [PRESSURE]) == [], "retention to delete the expired partitionlets")
    store = broker.server.cluster.store
    broker.call(store.set_topic_configs(STREAM, "Pressure", {"retention.ms": "-1"}))
    produce(broker, PRESSURE, 50, "none", tag="new-")
    rows = spark_rows(source(spark, volumes, subscribe=PRESSURE, includeHeaders="true"))
    assert rows == kafka_rows(broker, [PRESSURE])
    assert [r[2] for r in rows] == list(range(2000, 2050))
    assert all(r[4].startswith(b"new-") for r in rows)


def test_reads_while_the_broker_appends_never_see_a_torn_batch(spark, broker, volumes):
    broker.create_topic(PRESSURE, partitions=1)
    produce(broker, PRESSURE, 100, "gzip")
    stop = threading.Event()

    def keep_producing() -> None:  # about 1,000 messages a second, bounded in count
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 1,
                             "compression.type": "snappy"})
        for n in range(60_000):
            if stop.is_set():
                break
            producer.produce(PRESSURE, value=f"live-{n}".encode() * 50)
            if n % 20 == 0:
                producer.poll(0)
                time.sleep(0.02)
        producer.flush(10)

    writer = threading.Thread(target=keep_producing)
    writer.start()
    try:
        seen = []
        for _ in range(3):
            offsets = [r.offset for r in source(spark, volumes, subscribe=PRESSURE).select("offset").collect()]
            assert sorted(offsets) == list(range(len(offsets)))  # dense from 0: nothing torn, nothing skipped
            seen.append(len(offsets))
    finally:
        stop.set()
        writer.join(30)
    assert seen == sorted(seen) and seen[-1] > seen[0]  # it really read while the log grew


def test_bad_options_say_what_is_wrong(spark, broker, volumes):
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    with pytest.raises((PySparkException, Py4JJavaError), match="dataDir"):
        spark.read.format("kafkacompat").option("topics", "x").load().collect()
    with pytest.raises((PySparkException, Py4JJavaError), match="does not exist"):
        source(spark, volumes, subscribe=f"{STREAM}:nope").collect()


def isolated_view(broker: Broker, topic: str, isolation: str) -> list[tuple[int, bytes]]:
    """(offset, value) of partition 0 up to where a consumer of that isolation level ends."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "isolated",
                         "isolation.level": isolation, "enable.partition.eof": True, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    rows: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                return rows  # partition EOF: the LSO for read_committed, the high watermark otherwise
            rows.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    raise AssertionError(f"{isolation} consumer did not reach the end of {topic}: {rows}")


def test_read_committed_stops_at_the_lso_and_skips_aborted_records_as_a_consumer_does(spark, broker, volumes):
    from kafkacompat.spark.options import parse_options
    from kafkacompat.spark.stream import StreamReader

    topic = f"{STREAM}:Valves"
    broker.create_topic(topic, partitions=1)
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    txn = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "valves", "linger.ms": 0})
    txn.init_transactions(30)

    def send(producer: Producer, *values: str) -> None:
        for value in values:
            producer.produce(topic, value=value.encode())
        assert producer.flush(10) == 0

    send(plain, "p0", "p1")
    for outcome in ("committed", "aborted", "committed-again"):
        txn.begin_transaction()
        send(txn, f"{outcome}-0", f"{outcome}-1")
        txn.commit_transaction(30) if outcome != "aborted" else txn.abort_transaction(30)
        send(plain, f"after-{outcome}")
    txn.begin_transaction()
    send(txn, "open-0")  # still open while Spark and the consumers read
    send(plain, "after-open")

    committed = isolated_view(broker, topic, "read_committed")
    uncommitted = isolated_view(broker, topic, "read_uncommitted")
    assert b"aborted-0" in {v for _, v in uncommitted} and b"open-0" in {v for _, v in uncommitted}
    assert b"aborted-0" not in {v for _, v in committed} and committed[-1][1] == b"after-committed-again"

    def spark_view(**options: str) -> list[tuple[int, bytes]]:
        rows = source(spark, volumes, subscribe=topic, **options).select("offset", "value").collect()
        return sorted((r.offset, bytes(r.value)) for r in rows)

    assert spark_view(**{"kafka.isolation.level": "read_committed"}) == committed
    assert spark_view() == uncommitted
    # A streaming query asks the same source for its latest offsets: the LSO under read_committed.
    opts = parse_options({"dataDir": ",".join(volumes), "subscribe": topic, "kafka.isolation.level": "read_committed"})
    stream = StreamReader(opts, None)
    end = stream.latestOffset()
    open_at = next(offset for offset, value in uncommitted if value == b"open-0")
    assert end == {topic: {"0": open_at}}  # the open transaction's first offset
    ranges = [p.value for p in stream.partitions(stream.initialOffset(), end)]
    assert {o for r in ranges for o in r.aborted} and all(r.end <= end[topic]["0"] for r in ranges)
    txn.abort_transaction(30)


def wait_until(condition: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def streaming_query(spark: Any, volumes: tuple[str, str], output: str, checkpoint: str) -> Any:
    """The same query as the killed job's, minus the rate limit.

    Spark 4.0 runs Python sources under availableNow as a single batch (it
    says so in a warning), which after a crash would only redo the
    uncommitted batch: a micro-batch trigger goes on to the end.
    """
    stream = (spark.readStream.format("kafkacompat").option("dataDir", ",".join(volumes))
              .option("subscribe", PRESSURE).load())
    return (stream.writeStream.format("parquet").option("path", output).option("checkpointLocation", checkpoint)
            .trigger(processingTime="0 seconds").start())


def batch_files(checkpoint: str, log: str) -> list[pathlib.Path]:
    """A query's offset or commit log entries (one file per micro-batch), in batch order."""
    folder = pathlib.Path(checkpoint) / log
    if not folder.is_dir():
        return []
    return sorted((f for f in folder.iterdir() if f.name.isdigit()), key=lambda f: int(f.name))


def planned_batches(checkpoint: str) -> list[dict[str, int]]:
    """The source offsets of each micro-batch in a query's offset log, in order: {partition: end}."""
    return [json.loads(batch.read_text().splitlines()[-1])[PRESSURE] for batch in batch_files(checkpoint, "offsets")]


def committed_through(checkpoint: str) -> dict[str, int] | None:
    """The source offsets the query has fully written and committed up to, from its checkpoint
    (no Spark job needed), or None before its first commit."""
    commits = batch_files(checkpoint, "commits")
    return planned_batches(checkpoint)[int(commits[-1].name)] if commits else None


@pytest.mark.timeout(900)  # two Spark drivers, one of them a killed process
def test_stream_resumes_from_its_checkpoint_after_the_job_is_killed(spark, broker, volumes, tmp_path):
    broker.create_topic(PRESSURE, partitions=2)
    produce(broker, PRESSURE, 400, "zstd", tag="first-")
    output, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    log = tmp_path / "job.log"
    with open(log, "wb") as sink:
        job = subprocess.Popen([sys.executable, "-m", "tests.spark.stream_job", ",".join(volumes), PRESSURE, output,
                                checkpoint], cwd=REPO, stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: len(batch_files(checkpoint, "commits")) >= 2,
                   f"the job to commit two micro-batches before it is killed (its log: {log})", timeout=240)
    finally:
        job.kill()
        job.wait(30)
    produce(broker, PRESSURE, 300, "lz4", tag="second-")

    before = [{"0": 0, "1": 0}, *planned_batches(checkpoint)]
    assert len(before) > 2 and all(  # the killed job's micro-batches kept to maxOffsetsPerTrigger=40
        0 < sum(b[p] - a[p] for p in b) <= 40 for a, b in zip(before, before[1:]))

    expected = sorted((r[1], r[2]) for r in kafka_rows(broker, [PRESSURE]))
    ends = {str(p): 1 + max((o for q, o in expected if q == p), default=-1) for p in (0, 1)}
    query = streaming_query(spark, volumes, output, checkpoint)
    try:  # caught up once a committed micro-batch ends at the log's end (read from the checkpoint, not by a job)
        wait_until(lambda: query.exception() is not None or committed_through(checkpoint) == ends,
                   "the restarted query to catch up", timeout=180)
    finally:
        query.stop()
    assert query.exception() is None
    rows = spark.read.parquet(output).select("partition", "offset", "value").collect()
    assert sorted((r.partition, r.offset) for r in rows) == expected  # every row exactly once
