"""Typed-rows benchmark: Avro decoded by format("kafkacompat") against bytes decoded in a Python UDF, same run.

    python -m kafkacompat.spark.typed_bench --gib 1

Fills a disk broker (with its registry on the HTTP port) with Avro
records framed by confluent-kafka's AvroSerializer (a pool of distinct
payloads, cycled, so filling is not bound by Python serializing), then
times two queries over the same topic, each computing count(*) and
sum(value.pressure) after decoding every whole record:

- typed: `format("kafkacompat")` with `decode=value` (schemas read from
  the stream's `_schemas`, records decoded in the task into Arrow);
- udf: `format("kafkacompat")` giving bytes, decoded by a Python UDF
  (fastavro with the writer schema fetched from the registry), the way
  users decode Confluent-framed Avro in Spark without a typed source.

Each query runs once untimed first (JVM compiling, Python workers). MB/s
counts the framed value bytes.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import tempfile
import time
from typing import Any

TOPIC = "/bench/typed:readings"
SAMPLES = 96  # doubles per record: about 900 bytes of Avro each
SCHEMA = {"type": "record", "name": "Reading", "namespace": "bench", "fields": [
    {"name": "pump", "type": "string"},
    {"name": "pressure", "type": "double"},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["OK", "ALARM"]}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "samples", "type": {"type": "array", "items": "double"}},
]}


def payloads(registry_url: str, count: int) -> list[bytes]:
    """`count` distinct values framed by confluent-kafka's AvroSerializer (which registers the schema)."""
    import datetime

    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serialize = AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(SCHEMA))
    context = SerializationContext(TOPIC, MessageField.VALUE)
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    return [serialize({"pump": f"pump-{i % 50}", "pressure": float(i % 1000), "at": start,
                       "state": "ALARM" if i % 7 == 0 else "OK", "note": None if i % 3 else "checked",
                       "samples": [i * 0.5 + k for k in range(SAMPLES)]}, context) for i in range(count)]


def fill(broker: Any, total_bytes: int, partitions: int) -> tuple[int, int]:
    """(records, value bytes): the pool cycled until `total_bytes` of values are written."""
    from confluent_kafka import Producer

    broker.create_topic(TOPIC, partitions=partitions)
    pool = payloads(broker.http_url, 1000)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20,
                         "batch.size": 1 << 20, "queue.buffering.max.kbytes": 1 << 20})
    count = size = 0
    while size < total_bytes:
        value = pool[count % len(pool)]
        try:
            producer.produce(TOPIC, value=value, partition=count % partitions)
        except BufferError:
            producer.poll(0.05)
            continue
        count, size = count + 1, size + len(value)
    if producer.flush(300):
        raise RuntimeError("the producer could not deliver everything in 300 s")
    return count, size


def source(spark: Any, data: str, ending: str, **options: str) -> Any:
    reader = (spark.read.format("kafkacompat").option("dataDir", data).option("subscribe", TOPIC)
              .option("endingOffsets", ending))
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def udf_query(raw: Any, registry_url: str, value_type: Any) -> Any:
    """Bytes from the source, decoded per row by a Python UDF that asks the registry for writer schemas."""
    from pyspark.sql.functions import col, udf

    @udf(returnType=value_type)
    def decode(value: bytes) -> Any:
        return _decode(registry_url, value)

    return raw.select(decode(col("value")).alias("value"))


_WRITERS: dict[int, Any] = {}


def _decode(registry_url: str, value: bytes) -> Any:
    import fastavro

    schema_id = int.from_bytes(value[1:5], "big")
    writer = _WRITERS.get(schema_id)
    if writer is None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        text = SchemaRegistryClient({"url": registry_url}).get_schema(schema_id).schema_str
        writer = _WRITERS[schema_id] = fastavro.parse_schema(json.loads(text))
    return fastavro.schemaless_reader(io.BytesIO(value[5:]), writer, None)


def timed(df: Any) -> tuple[int, float]:
    started = time.perf_counter()
    row = df.selectExpr("count(*) AS n", "sum(value.pressure) AS p").collect()[0]
    return row.n, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--gib", type=float, default=1.0, help="value bytes to write and scan (default 1 GiB)")
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()

    from ..demo.oilrig import spark_session
    from ..testing import Broker

    with tempfile.TemporaryDirectory(prefix="kafkacompat-typed-bench-") as data, \
            Broker(data_dir=data, http_port=0) as broker:
        started = time.perf_counter()
        count, size = fill(broker, int(args.gib * (1 << 30)), args.partitions)
        print(f"filled {count:,} Avro records, {size / 1e6:,.0f} MB of values, in {time.perf_counter() - started:.1f} s "
              f"(load {' '.join(open('/proc/loadavg').read().split()[:3])}, {os.cpu_count()} cores)")
        spark = spark_session()
        try:
            def queries(ending: str) -> dict[str, Any]:
                typed = source(spark, data, ending, decode="value")
                value_type = typed.schema["value"].dataType
                return {"typed": typed, "udf": udf_query(source(spark, data, ending), broker.http_url, value_type)}

            warm_up = json.dumps({TOPIC: {str(p): 2000 for p in range(args.partitions)}})
            for name, df in queries(warm_up).items():
                n, seconds = timed(df)
                print(f"warm-up {name:6s} {n / seconds:10,.0f} rows/s ({n:,} rows, untimed)")
            for name, df in queries("latest").items():
                n, seconds = timed(df)
                if n != count:
                    raise RuntimeError(f"{name} read {n} rows, expected {count}")
                print(f"{name:6s} {n / seconds:10,.0f} rows/s {size / seconds / 1e6:8.1f} MB/s {seconds:7.1f} s")
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
