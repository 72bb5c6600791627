"""The oil-rig pipeline: pump sensors to alerts on one platform.

Simulated pumps produce Pressure and Temperature readings (Avro, framed by
confluent-kafka's AvroSerializer with the broker's Schema Registry, keyed by
pump, timestamped one simulated second apart) into the stream
/apps/iot/oilpump_metrics over the Kafka port. A PySpark Structured
Streaming job reads the stream's partitionlets directly (format
"kafkacompat", no broker in the data path) as typed rows, the schema read
from the stream's registry records (decode=value), computes per-pump 10-second
windowed aggregates, appends them to Parquet, and writes an alert for each
window whose peak passes its limit to the Warnings topic: through Spark's
Kafka sink when the connector jars are at hand (KAFKACOMPAT_SPARK_JARS), or
the broker's Kafka port otherwise. The alerts are then read back as a Kafka
consumer would. Micro-batches go through foreachBatch, so a crash between a
batch's writes and its checkpoint repeats that batch's alerts (at least once).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import pathlib
import random
import sys
import time
from typing import Any

log = logging.getLogger(__name__)

STREAM = "/apps/iot/oilpump_metrics"
PRESSURE, TEMPERATURE, WARNINGS = (f"{STREAM}:{t}" for t in ("Pressure", "Temperature", "Warnings"))
WINDOW = "10 seconds"
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: simulated time, the same on every run
# One schema for both metrics' topics, registered under its record name (RecordNameStrategy), so
# one Spark query reads both topics with one subject.
READING_SCHEMA = {"type": "record", "name": "Reading", "namespace": "oilrig", "fields": [
    {"name": "pump", "type": "string"}, {"name": "value", "type": "double"}]}
READING_SUBJECT = "oilrig.Reading"


@dataclasses.dataclass(frozen=True)
class Settings:
    data_dir: str
    output: str
    pumps: int = 5
    readings: int = 120
    pressure_limit: float = 180.0
    temperature_limit: float = 95.0


def reading(pump: int, metric: str, second: int, pumps: int) -> float:
    """A pump's reading: a slow wave with noise; pump 1 spikes in pressure, the last pump overheats."""
    noise = random.Random(f"{pump}/{metric}/{second}").uniform(-2, 2)
    if metric == "Pressure":
        spike = 70.0 if pump == 1 % pumps and 60 <= second < 66 else 0.0
        return round(130 + 20 * math.sin(second / 9 + pump) + noise + spike, 2)
    overheat = 35.0 if pump == pumps - 1 and 30 <= second < 34 else 0.0
    return round(72 + 8 * math.sin(second / 13 + pump) + noise + overheat, 2)


def produce_readings(bootstrap: str, registry_url: str, settings: Settings) -> int:
    """The sensors: every pump sends each metric once a simulated second, in Avro."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient, record_subject_name_strategy
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serialize = AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(READING_SCHEMA),
                               conf={"subject.name.strategy": record_subject_name_strategy})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "compression.type": "lz4"})
    sent = 0
    for second in range(settings.readings):
        for pump in range(settings.pumps):
            for metric, topic in (("Pressure", PRESSURE), ("Temperature", TEMPERATURE)):
                value = serialize({"pump": f"pump-{pump}", "value": reading(pump, metric, second, settings.pumps)},
                                  SerializationContext(topic, MessageField.VALUE))
                producer.produce(topic, key=f"pump-{pump}".encode(), value=value,
                                 timestamp=START_MS + second * 1000)
                sent += 1
        producer.poll(0)
    if producer.flush(60):
        raise RuntimeError("the sensors could not deliver every reading within 60 s")
    return sent


def spark_session(daemon: str = "kafkacompat.spark.daemon", jars: list[str] | None = None) -> Any:
    """A local Spark session with format("kafkacompat") registered; `daemon` forks its Python workers.

    `jars`: the connector jars found already (None: look for them here)."""
    from pyspark.sql import SparkSession

    from ..spark import register

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.master("local[2]").appName("oilrig")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.python.daemon.module", daemon))
    if jars is None:
        jars = connector_jars()
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def connector_jars() -> list[str]:
    """Spark's Kafka connector jars (KAFKACOMPAT_SPARK_JARS, completed with pyflink's kafka-clients),
    or [] with a warning when the folder lacks some: the alerts then go through the broker's Kafka port."""
    from ..spark.jars import ConnectorJarsError
    from ..spark.jars import connector_jars as find

    try:
        return find()
    except ConnectorJarsError as exc:
        log.warning("%s: alerts go through the broker's Kafka port", exc)
        return []


def run_pipeline(spark: Any, bootstrap: str, settings: Settings, through_spark: bool) -> None:
    """The Structured Streaming job, run until it has caught up (trigger availableNow); alerts go
    through Spark's Kafka sink when `through_spark` (its jars are there), else through a producer."""
    from pyspark.sql import functions as F

    readings = (
        spark.readStream.format("kafkacompat").option("dataDir", settings.data_dir)
        .option("stream", STREAM).option("topics", "Pressure,Temperature")
        .option("decode", "value").option("value.subject", READING_SUBJECT).load()
        .select(
            F.regexp_extract("topic", ":(.*)$", 1).alias("metric"),
            F.col("value.pump").alias("pump"),
            F.col("value.value").alias("reading"),
            "timestamp",
        )
    )
    aggregates_dir = str(pathlib.Path(settings.output) / "aggregates")

    def each_batch(batch: Any, batch_id: int) -> None:
        aggregates = (
            batch.groupBy("pump", "metric", F.window("timestamp", WINDOW))
            .agg(F.round(F.avg("reading"), 2).alias("avg"), F.max("reading").alias("max"),
                 F.count("*").alias("readings"))
            .select("pump", "metric", F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"), "avg", "max", "readings")
        ).cache()
        aggregates.write.mode("append").parquet(aggregates_dir)
        alerts = aggregates.where(
            ((F.col("metric") == "Pressure") & (F.col("max") > settings.pressure_limit))
            | ((F.col("metric") == "Temperature") & (F.col("max") > settings.temperature_limit))
        ).select(F.col("pump").alias("key"), F.to_json(F.struct("pump", "metric", "window_start", "max")).alias("value"))
        if through_spark:
            (alerts.write.format("kafka").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", WARNINGS).save())
        else:
            send_alerts(bootstrap, [(r.key, r.value) for r in alerts.collect()])
        aggregates.unpersist()

    query = (readings.writeStream.foreachBatch(each_batch)
             .option("checkpointLocation", str(pathlib.Path(settings.output) / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"the Spark job failed: {query.exception()}")


def send_alerts(bootstrap: str, alerts: list[tuple[str, str]]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for key, value in alerts:
        producer.produce(WARNINGS, key=key.encode(), value=value.encode())
    if producer.flush(30):
        raise RuntimeError("alerts could not be delivered within 30 s")


def read_alerts(bootstrap: str) -> list[dict]:
    """The Warnings topic from its start, as any Kafka consumer reads it."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "oilrig-demo", "enable.auto.commit": False})
    try:
        ends = {}
        for p in consumer.list_topics(WARNINGS, timeout=10).topics[WARNINGS].partitions:
            ends[p] = consumer.get_watermark_offsets(TopicPartition(WARNINGS, p), timeout=10)[1]
        consumer.assign([TopicPartition(WARNINGS, p, 0) for p, end in ends.items() if end])
        alerts: list[dict] = []
        deadline = time.monotonic() + 30
        while len(alerts) < sum(ends.values()) and time.monotonic() < deadline:
            for msg in consumer.consume(100, timeout=0.5):
                if msg.error() is None:
                    alerts.append(json.loads(msg.value()))
        return alerts
    finally:
        consumer.close()


def run(settings: Settings) -> int:
    """The whole demo; returns how many alerts the Warnings topic holds."""
    from ..storage import StreamPolicy
    from ..testing import Broker

    os.makedirs(settings.output, exist_ok=True)
    with Broker(data_dir=settings.data_dir, http_port=0) as broker:  # the Schema Registry on its HTTP port
        store = broker.server.cluster.store
        if store.get_stream(STREAM) is None:
            # ttl 0 (forever): the readings are dated from START_MS, older than the 7-day default ttl
            broker.call(store.create_stream(STREAM, StreamPolicy(default_partitions=3, ttl_seconds=0)))
        for topic in (PRESSURE, TEMPERATURE, WARNINGS):
            if store.get_topic(STREAM, topic.split(":")[1]) is None:
                broker.create_topic(topic, partitions=3 if topic != WARNINGS else 1)
        print(f"broker on {broker.bootstrap_servers}, data in {settings.data_dir}")
        sent = produce_readings(broker.bootstrap_servers, broker.http_url, settings)
        print(f"{settings.pumps} pumps sent {sent} readings to {PRESSURE} and {TEMPERATURE}")
        jars = connector_jars()  # once: a folder lacking jars is warned about once
        spark = spark_session(jars=jars)
        path = "Spark's Kafka sink" if jars else "the broker's Kafka port"
        print(f"alerts go to {WARNINGS} through {path}")
        try:
            run_pipeline(spark, broker.bootstrap_servers, settings, through_spark=bool(jars))
            windows = spark.read.parquet(str(pathlib.Path(settings.output) / "aggregates")).count()
        finally:
            spark.stop()
        print(f"{windows} windowed aggregates in {settings.output}/aggregates (Parquet)")
        alerts = read_alerts(broker.bootstrap_servers)
        print(f"{len(alerts)} alerts in {WARNINGS}:")
        for alert in alerts:
            print(f"  {alert['window_start']}  {alert['pump']}  {alert['metric']} peaked at {alert['max']}")
        return len(alerts)
