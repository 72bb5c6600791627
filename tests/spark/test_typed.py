"""Typed rows: `format("kafkacompat")` decodes what confluent-kafka's schema serializers produced.

The producer registers its schemas with the broker's registry (HTTP port)
through confluent-kafka's own serializers; Spark reads records and schemas
from the data directory, as users run it.
"""

from __future__ import annotations

import datetime
import decimal
import json
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafkacompat.testing import Broker

TOPIC = "/rig:pumps"
UTC = datetime.timezone.utc

V1 = {"type": "record", "name": "Reading", "namespace": "rig", "fields": [
    {"name": "pump", "type": "string"},
    {"name": "pressure", "type": "double"},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["OK", "ALARM"]}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "raw", "type": "bytes"},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "counts", "type": {"type": "map", "values": "long"}},
    {"name": "valve", "type": ["null", {"type": "record", "name": "Valve", "fields": [
        {"name": "open", "type": "boolean"}, {"name": "angle", "type": "float"}]}], "default": None},
]}
V2 = {**V1, "fields": [*V1["fields"],  # BACKWARD: added fields with defaults
                       {"name": "unit", "type": "string", "default": "bar"},
                       {"name": "note", "type": ["null", "string"], "default": None}]}


@pytest.fixture
def data(tmp_path: Any) -> str:
    return str(tmp_path / "data")


@pytest.fixture
def broker(data: str) -> Iterator[Broker]:
    with Broker(data_dir=data, http_port=0) as running:
        running.create_topic(TOPIC, partitions=2)
        yield running


def reading(i: int) -> dict[str, Any]:
    return {"pump": f"pump-{i % 3}", "pressure": 100.0 + i, "at": datetime.datetime(2026, 1, 1, 0, 0, i, tzinfo=UTC),
            "day": datetime.date(2026, 1, 1 + i), "state": "ALARM" if i % 2 else "OK",
            "price": decimal.Decimal(f"{i}.25"), "raw": bytes([i]), "tags": [f"t{i}"] * (i % 3),
            "counts": {"n": i}, "valve": {"open": bool(i % 2), "angle": 0.5} if i % 2 else None}


def produce(broker: Broker, values: list[Any], serialize: Any = None, raw: list[bytes] = ()) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for value in values:
        producer.produce(TOPIC, value=serialize(value, SerializationContext(TOPIC, MessageField.VALUE)))
    for payload in raw:
        producer.produce(TOPIC, value=payload)
    assert producer.flush(30) == 0


def avro_serializer(broker: Broker, schema: dict) -> AvroSerializer:
    return AvroSerializer(SchemaRegistryClient({"url": broker.http_url}), json.dumps(schema))


def typed(spark: Any, broker: Broker, **options: str) -> Any:
    reader = spark.read.format("kafkacompat").option("dataDir", broker.server.cluster.store.root).option("subscribe", TOPIC)
    for name, value in {"decode": "value", **options}.items():
        reader = reader.option(name, value)
    return reader.load()


def by_pressure(df: Any) -> list[dict[str, Any]]:
    return sorted((r.value.asDict(recursive=True) for r in df.select("value").collect()),
                  key=lambda v: v["pressure"])


def test_avro_records_from_the_avro_serializer_are_structs_with_spark_types(spark, broker):
    produce(broker, [reading(i) for i in range(6)], avro_serializer(broker, V1))
    df = typed(spark, broker)
    assert df.schema["value"].dataType.simpleString() == (
        "struct<pump:string,pressure:double,at:timestamp,day:date,state:string,price:decimal(9,2),raw:binary,"
        "tags:array<string>,counts:map<string,bigint>,valve:struct<open:boolean,angle:float>>")
    rows = by_pressure(df)
    assert len(rows) == 6
    for i, row in enumerate(rows):
        want = reading(i)
        assert row["at"].timestamp() == want["at"].timestamp()  # Spark gives session-local naive datetimes
        assert {**row, "at": None, "raw": bytes(row["raw"])} == {**want, "at": None}
    assert df.where("value.state = 'ALARM' AND value.valve.open").count() == 3  # SQL sees the fields


def test_older_versions_are_read_as_the_latest_with_defaults_and_a_version_can_be_chosen(spark, broker):
    produce(broker, [reading(i) for i in range(3)], avro_serializer(broker, V1))
    newer = [{**reading(i), "unit": "psi", "note": "calibrated"} for i in range(3, 5)]
    produce(broker, newer, avro_serializer(broker, V2))

    rows = by_pressure(typed(spark, broker))
    assert [(r["pump"], r["unit"], r["note"]) for r in rows] == [
        ("pump-0", "bar", None), ("pump-1", "bar", None), ("pump-2", "bar", None),  # v1: the defaults
        ("pump-0", "psi", "calibrated"), ("pump-1", "psi", "calibrated")]

    as_v1 = typed(spark, broker, **{"value.schemaVersion": "1"})  # v2 records resolved to v1: fields dropped
    assert "unit" not in as_v1.schema["value"].dataType.fieldNames()
    assert [r["pump"] for r in by_pressure(as_v1)] == ["pump-0", "pump-1", "pump-2", "pump-0", "pump-1"]

    # v1 soft-deleted: its records still decode (as Confluent's deserializers still fetch its id)
    SchemaRegistryClient({"url": broker.http_url}).delete_version(f"{TOPIC}-value", 1)
    assert by_pressure(typed(spark, broker)) == rows


def test_json_schema_values_are_their_struct(spark, broker):
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Reading", "type": "object",
              "properties": {"pump": {"type": "string"}, "pressure": {"type": "number"},
                             "count": {"type": "integer"}, "ok": {"type": "boolean"},
                             "tags": {"type": "array", "items": {"type": "string"}},
                             "valve": {"type": "object", "properties": {"angle": {"type": "number"}}},
                             "extra": {}}}
    serialize = JSONSerializer(json.dumps(schema), SchemaRegistryClient({"url": broker.http_url}))
    values = [{"pump": "p1", "pressure": 1.5, "count": 3, "ok": True, "tags": ["a"], "valve": {"angle": 2.0},
               "extra": {"any": [1]}},
              {"pump": "p2", "pressure": 2.5, "count": 4, "ok": False, "tags": [], "valve": {"angle": 0.0},
               "extra": "text"}]
    produce(broker, values, serialize)
    df = typed(spark, broker)
    assert df.schema["value"].dataType.simpleString() == (
        "struct<pump:string,pressure:double,count:bigint,ok:boolean,tags:array<string>,valve:struct<angle:double>,"
        "extra:string>")
    assert by_pressure(df) == [{**values[0], "extra": '{"any": [1]}'}, {**values[1], "extra": "text"}]  # a string is itself


def test_a_bad_frame_fails_the_query_or_gives_null_and_an_error_under_permissive(spark, broker):
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    produce(broker, [reading(i) for i in range(2)], avro_serializer(broker, V1),
            raw=[b"plain text", b"\x00\x7f\xff\xff\xfe" + b"\x02", b""])
    # whichever bad record a task meets first fails the query, naming it and why
    with pytest.raises((PySparkException, Py4JJavaError),
                       match=r"/rig:pumps/\d offset \d+: the value (not Confluent-framed|schema id 2147483646 is not "
                             r"registered)"):
        typed(spark, broker).collect()

    df = typed(spark, broker, mode="PERMISSIVE")
    rows = sorted(((r.value.pump if r.value else None, r.valueError) for r in df.collect()), key=str)
    assert rows == sorted([("pump-0", None), ("pump-1", None),
                           (None, "not Confluent-framed (magic byte 0 and a 4-byte schema id)"),
                           (None, "schema id 2147483646 is not registered in the streams read"),
                           (None, "not Confluent-framed (magic byte 0 and a 4-byte schema id)")], key=str)


def test_options_that_name_no_schema_say_so(spark, broker):
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    with pytest.raises((PySparkException, Py4JJavaError), match="no schema is registered under subject"):
        typed(spark, broker).schema
    produce(broker, [reading(0)], avro_serializer(broker, V1))
    with pytest.raises((PySparkException, Py4JJavaError), match="has no version 7"):
        typed(spark, broker, **{"value.schemaVersion": "7"}).schema


def test_a_streaming_query_reads_typed_rows_and_versions_registered_after_it_started(spark, broker, tmp_path):
    import time

    produce(broker, [reading(i) for i in range(3)], avro_serializer(broker, V1))
    stream = (spark.readStream.format("kafkacompat").option("dataDir", broker.server.cluster.store.root)
              .option("subscribe", TOPIC).option("decode", "value").load())
    query = (stream.select("value.pump", "value.pressure").writeStream.format("memory").queryName("typed_pumps")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(processingTime="0 seconds").start())

    def rows_when(count: int) -> list[tuple[str, float]]:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and query.exception() is None:
            rows = sorted((r.pump, r.pressure) for r in spark.sql("SELECT * FROM typed_pumps").collect())
            if len(rows) >= count:
                return rows
            time.sleep(0.5)
        raise AssertionError(f"the query did not reach {count} rows: {query.exception()}")

    try:
        assert rows_when(3) == [("pump-0", 100.0), ("pump-1", 101.0), ("pump-2", 102.0)]
        # v2, registered while the query runs: its records are resolved to the query's schema (v1)
        produce(broker, [{**reading(3), "unit": "psi", "note": None}], avro_serializer(broker, V2))
        assert rows_when(4)[1] == ("pump-0", 103.0)
    finally:
        query.stop()


def test_avro_types_map_as_spark_maps_them():
    from pyspark.sql.types import BinaryType, DecimalType, LongType, StructType, TimestampType

    from kafkacompat.spark.options import OptionError
    from kafkacompat.spark.typed import avro_type

    node = {"type": "record", "name": "Node", "fields": [
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 4}},
        {"name": "again", "type": "Hash"},  # a named type used by name
        {"name": "amount", "type": {"type": "fixed", "name": "Amount", "size": 8, "logicalType": "decimal",
                                    "precision": 12, "scale": 3}},
        {"name": "n", "type": ["long", "null"]}]}
    mapped = avro_type(node, {})
    assert isinstance(mapped, StructType)
    assert [f.dataType for f in mapped.fields] == [TimestampType(), BinaryType(), BinaryType(), DecimalType(12, 3),
                                                   LongType()]
    with pytest.raises(OptionError, match="several non-null branches"):
        avro_type(["null", "int", "string"], {})
    with pytest.raises(OptionError, match="not defined"):
        avro_type({"type": "array", "items": "other.Thing"}, {})


def test_a_replica_of_the_stream_reads_the_same_typed_rows_with_its_own_schemas(spark, tmp_path):
    """/rig replicated from San Jose to New York carries `_schemas`; San Jose lost, Spark reads New York's store."""
    import time

    from kafkacompat.admin.client import AdminClient

    with Broker(str(tmp_path / "a"), cluster_name="sanjose", http_port=0) as a, \
            Broker(str(tmp_path / "b"), cluster_name="newyork", http_port=0) as b:
        for running in (a, b):
            AdminClient(running.bootstrap_servers, timeout=30).call("stream.create", path="/rig")
        a.create_topic(TOPIC, partitions=1)
        produce(a, [reading(i) for i in range(3)], avro_serializer(a, V1))
        AdminClient(a.bootstrap_servers, timeout=30).call("replica.add", path="/rig",
                                                          replica=f"127.0.0.1:{b.port}/rig")
        def arrived(topic: str, count: int) -> bool:
            store = b.server.store
            return store.get_topic("/rig", topic) is not None and store.partition("/rig", topic, 0).high_watermark >= count

        deadline = time.monotonic() + 60
        while not (arrived("pumps", 3) and arrived("_schemas", 1)):
            assert time.monotonic() < deadline, "the records and schemas did not reach New York"
            time.sleep(0.1)
        a.stop()  # San Jose is lost
        rows = by_pressure(typed(spark, b))
    assert [(r["pump"], r["state"]) for r in rows] == [("pump-0", "OK"), ("pump-1", "ALARM"), ("pump-2", "OK")]


def test_protobuf_values_from_the_protobuf_serializer_are_their_struct(spark, broker):
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="reading.proto", package="rig", syntax="proto3")
    message = file.message_type.add(name="Reading")  # the file's first message: the one decoded
    valve = file.message_type.add(name="Valve")
    valve.field.add(name="angle", number=1, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL)
    for number, (name, kind) in enumerate([("pump", F.TYPE_STRING), ("pressure", F.TYPE_DOUBLE),
                                           ("count", F.TYPE_INT64), ("raw", F.TYPE_BYTES)], 1):
        message.field.add(name=name, number=number, type=kind, label=F.LABEL_OPTIONAL)
    message.field.add(name="tags", number=5, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    message.field.add(name="valve", number=6, type=F.TYPE_MESSAGE, type_name=".rig.Valve", label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    reading_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("rig.Reading"))
    serialize = ProtobufSerializer(reading_class, SchemaRegistryClient({"url": broker.http_url}),
                                   {"use.deprecated.format": False})
    produce(broker, [reading_class(pump="p1", pressure=1.5, count=1 << 40, raw=b"\x01", tags=["a", "b"],
                                   valve={"angle": 0.5}),
                     reading_class(pump="p2", pressure=2.5)], serialize)
    df = typed(spark, broker)
    assert df.schema["value"].dataType.simpleString() == (
        "struct<pump:string,pressure:double,count:bigint,raw:binary,tags:array<string>,valve:struct<angle:float>>")
    assert by_pressure(df) == [
        {"pump": "p1", "pressure": 1.5, "count": 1 << 40, "raw": b"\x01", "tags": ["a", "b"], "valve": {"angle": 0.5}},
        {"pump": "p2", "pressure": 2.5, "count": 0, "raw": b"", "tags": [], "valve": None}]
