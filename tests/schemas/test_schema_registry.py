"""The Schema Registry on the HTTP port, driven by confluent-kafka's SchemaRegistryClient and serializers.

Records are produced and consumed through the broker by librdkafka; every
refusal is checked for Confluent's error code and for nothing stored.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from kafkacompat.testing import Broker

pytestmark = pytest.mark.timeout(60)
CONTENT = "application/vnd.schemaregistry.v1+json"


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(http_port=0) as running:
        yield running


@pytest.fixture
def client(broker: Broker) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": broker.http_url})


def avro(*fields: tuple[str, Any] | tuple[str, Any, Any], name: str = "Reading") -> Schema:
    """An Avro record schema; a field given a third item has that default."""
    listed = [{"name": f[0], "type": f[1], **({"default": f[2]} if len(f) > 2 else {})} for f in fields]
    return Schema(json.dumps({"type": "record", "name": name, "namespace": "rig", "fields": listed}), "AVRO")


def roundtrip(broker: Broker, topic: str, values: list[Any], serialize: Callable, deserialize: Callable) -> list:
    """Produce the values through the broker with `serialize`, consume them back with `deserialize`."""
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for value in values:
        producer.produce(topic, serialize(value, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "schemas-test",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    try:
        while len(got) < len(values):
            message = consumer.poll(10)
            assert message is not None and message.error() is None, message and message.error()
            got.append(deserialize(message.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    return got


def refused(call: Callable[[], Any], code: int) -> SchemaRegistryError:
    with pytest.raises(SchemaRegistryError) as caught:
        call()
    assert caught.value.error_code == code, caught.value
    return caught.value


# --- the three formats through stock serializers -----------------------------------------------------------------


def test_avro_records_roundtrip_through_the_broker(broker: Broker, client: SchemaRegistryClient) -> None:
    schema = avro(("sensor", "string"), ("value", "double"))
    values = [{"sensor": "p1", "value": 2.5}, {"sensor": "p2", "value": -1.0}]
    got = roundtrip(broker, "readings", values, AvroSerializer(client, schema.schema_str),
                    AvroDeserializer(client))
    assert got == values
    latest = client.get_latest_version("readings-value")
    assert latest.version == 1 and client.get_schema(latest.schema_id).schema_type == "AVRO"
    answer = requests.get(f"{broker.http_url}/schemas/ids/{latest.schema_id}", timeout=10)
    assert answer.headers["Content-Type"].startswith(CONTENT)


def test_json_schema_records_roundtrip_through_the_broker(broker: Broker, client: SchemaRegistryClient) -> None:
    schema = json.dumps({"type": "object", "properties": {"sensor": {"type": "string"},
                                                          "value": {"type": "number"}},
                         "required": ["sensor"]})
    values = [{"sensor": "p1", "value": 2.5}, {"sensor": "p2"}]
    got = roundtrip(broker, "json-readings", values, JSONSerializer(schema, client),
                    JSONDeserializer(None, schema_registry_client=client))
    assert got == values
    assert client.get_latest_version("json-readings-value").schema.schema_type == "JSON"


def reading_class(*, value_type: int = descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE, package: str = "rig") -> Any:
    """A Protobuf message class rig.Reading built from its descriptor (what protoc would generate)."""
    file = descriptor_pb2.FileDescriptorProto(name="reading.proto", package=package, syntax="proto3")
    message = file.message_type.add(name="Reading")
    message.field.add(name="sensor", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=1)
    message.field.add(name="value", number=2, type=value_type, label=1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.Reading"))


def test_protobuf_records_roundtrip_through_the_broker(broker: Broker, client: SchemaRegistryClient) -> None:
    reading = reading_class()
    settings = {"use.deprecated.format": False}
    got = roundtrip(broker, "pb-readings", [reading(sensor="p1", value=2.5)],
                    ProtobufSerializer(reading, client, settings), ProtobufDeserializer(reading, settings))
    assert got == [reading(sensor="p1", value=2.5)]
    registered = client.get_latest_version("pb-readings-value")
    assert registered.schema.schema_type == "PROTOBUF"
    assert client.get_schema(registered.schema_id).schema_str == registered.schema.schema_str


# --- compatibility: each level with an accepted and a refused change ---------------------------------------------

A_INT = ("a", "int")
# (level, versions accepted in order, the change refused)
LEVELS = {
    "BACKWARD": ([avro(A_INT), avro(A_INT, ("b", "string", ""))], avro(A_INT, ("c", "string"))),
    "BACKWARD_TRANSITIVE": ([avro(A_INT), avro()], avro(("a", "string", ""))),
    "FORWARD": ([avro(A_INT), avro(A_INT, ("c", "string"))], avro(("c", "string"))),
    "FORWARD_TRANSITIVE": ([avro(A_INT), avro(("a", "int", 0))], avro()),
    "FULL": ([avro(A_INT), avro(A_INT, ("b", "string", ""))], avro(A_INT, ("c", "string"))),
    "FULL_TRANSITIVE": ([avro(A_INT), avro(("a", "int", 0))], avro()),
    "NONE": ([avro(A_INT), avro(("a", "string")), avro(("z", "boolean"))], None),
}


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_each_compatibility_level_accepts_and_refuses(client: SchemaRegistryClient, level: str) -> None:
    subject = f"level-{level.lower()}"
    client.set_compatibility(subject, level)
    accepted, bad = LEVELS[level]
    ids = [client.register_schema(subject, schema) for schema in accepted]
    assert client.get_versions(subject) == list(range(1, len(accepted) + 1))
    if bad is None:
        return
    assert client.test_compatibility_all_versions(subject, bad) is False
    if level.endswith("_TRANSITIVE"):  # the change breaks version 1 only: the latest alone would take it
        assert client.test_compatibility(subject, bad, version="latest") is True
        assert client.test_compatibility(subject, bad, version=1) is False
    refused(lambda: client.register_schema(subject, bad), 409)
    assert client.get_versions(subject) == list(range(1, len(accepted) + 1))  # nothing stored
    assert client.get_latest_version(subject).schema_id == ids[-1]


def test_json_schema_and_protobuf_compatibility(client: SchemaRegistryClient) -> None:
    obj = {"type": "object", "additionalProperties": False, "properties": {"a": {"type": "integer"}}}
    client.register_schema("js-compat", Schema(json.dumps(obj), "JSON"))
    wider = {**obj, "properties": {"a": {"type": "number"}, "b": {"type": "string"}}}
    client.register_schema("js-compat", Schema(json.dumps(wider), "JSON"))  # widened, optional property added
    narrowed = {**obj, "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
    refused(lambda: client.register_schema("js-compat", Schema(json.dumps(narrowed), "JSON")), 409)
    required = {**wider, "required": ["b"]}
    refused(lambda: client.register_schema("js-compat", Schema(json.dumps(required), "JSON")), 409)
    assert client.get_versions("js-compat") == [1, 2]

    settings = {"use.deprecated.format": False}
    context = SerializationContext("pb-compat", MessageField.VALUE)
    original = reading_class()
    ProtobufSerializer(original, client, settings)(original(sensor="x"), context)
    changed = reading_class(value_type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING)
    with pytest.raises(Exception, match="incompatible"):
        ProtobufSerializer(changed, client, settings)(changed(sensor="x"), context)
    moved = reading_class(package="platform")
    with pytest.raises(Exception, match="PACKAGE_CHANGED"):
        ProtobufSerializer(moved, client, settings)(moved(sensor="x"), context)
    assert client.get_versions("pb-compat-value") == [1]


# --- deletes -----------------------------------------------------------------------------------------------------


def test_soft_then_hard_deletes_of_versions_and_subjects(broker: Broker, client: SchemaRegistryClient) -> None:
    subject = "deleted-value"
    first = client.register_schema(subject, avro(A_INT, name="Deleted"))  # a schema no other subject has
    client.register_schema(subject, avro(A_INT, ("b", "string", ""), name="Deleted"))
    refused(lambda: client.delete_version(subject, 1, permanent=True), 40407)  # not soft-deleted first
    assert client.delete_version(subject, 1) == 1
    refused(lambda: client.get_version(subject, 1), 40402)
    refused(lambda: client.delete_version(subject, 1), 40406)  # already soft-deleted
    assert client.get_version(subject, 1, deleted=True).schema_id == first
    assert client.get_schema(first).schema_str  # an id outlives a soft delete
    assert client.delete_version(subject, 1, permanent=True) == 1
    refused(lambda: client.get_version(subject, 1, deleted=True), 40402)
    gone = requests.get(f"{broker.http_url}/schemas/ids/{first}", timeout=10)  # (the client caches ids)
    assert (gone.status_code, gone.json()["error_code"]) == (404, 40403)
    assert client.get_versions(subject) == [2]

    refused(lambda: client.delete_subject(subject, permanent=True), 40405)
    assert client.delete_subject(subject) == [2]
    assert subject not in client.get_subjects()
    refused(lambda: client.get_versions(subject), 40401)
    refused(lambda: client.delete_subject(subject), 40404)
    assert client.delete_subject(subject, permanent=True) == [2]
    refused(lambda: client.delete_subject(subject, permanent=True), 40401)


# --- bad input ---------------------------------------------------------------------------------------------------


def post(broker: Broker, path: str, body: Any) -> requests.Response:
    return requests.post(broker.http_url + path, data=body if isinstance(body, (str, bytes)) else json.dumps(body),
                         headers={"Content-Type": CONTENT}, timeout=10)


@pytest.mark.parametrize("body, code", [
    ({"schema": '{"type": "record", "name": "R", "fields": [{"name": "a"}]}'}, 42201),  # Avro field without type
    ({"schema": "{not json"}, 42201),
    ({"schema": json.dumps({"type": 12}), "schemaType": "JSON"}, 42201),
    ({"schema": "bWVzc2FnZSBSIHt9", "schemaType": "PROTOBUF"}, 42201),  # base64 of .proto text, not a descriptor
    ({"schema": '"string"', "schemaType": "XML"}, 42201),
    ({"schema": json.dumps({"type": "record", "name": "R", "fields": [
        {"name": f"f{i}", "type": "string", "doc": "x" * 1000} for i in range(600)]})}, 42201),  # > 512 KiB
    ({"schema": '"string"', "references": [{"name": "x", "subject": "nothing", "version": 1}]}, 42201),
    ({"schemaa": '"string"'}, 42201),
    ("not json at all", 400),
])
def test_bad_schemas_are_refused_with_confluents_codes_and_nothing_stored(broker: Broker, body: Any,
                                                                           code: int) -> None:
    answer = post(broker, "/subjects/bad-input-value/versions", body)
    assert answer.status_code == code // 100 if code > 999 else code
    assert answer.json()["error_code"] == code and answer.json()["message"]
    assert answer.headers["Content-Type"].startswith(CONTENT)
    assert "bad-input-value" not in requests.get(broker.http_url + "/subjects?deleted=true", timeout=10).json()


@pytest.mark.parametrize("method, path, body, status, code", [
    ("GET", "/subjects/no-such-subject/versions", None, 404, 40401),
    ("GET", "/subjects/no-such-subject/versions/latest", None, 404, 40401),
    ("POST", "/subjects/no-such-subject", {"schema": '"string"'}, 404, 40401),
    ("GET", "/subjects/readings-value/versions/99", None, 404, 40402),
    ("GET", "/subjects/readings-value/versions/one", None, 422, 42202),
    ("GET", "/subjects/readings-value/versions/0", None, 422, 42202),
    ("POST", "/subjects/readings-value", {"schema": '"long"'}, 404, 40403),
    ("GET", "/schemas/ids/7", None, 404, 40403),
    ("GET", "/schemas/ids/x", None, 404, 40403),
    ("PUT", "/config/readings-value", {"compatibility": "SIDEWAYS"}, 422, 42203),
    ("PUT", "/mode/readings-value", {"mode": "WRITEONLY"}, 422, 42204),
    ("GET", "/config/no-such-subject", None, 404, 40408),
    ("DELETE", "/mode/no-such-subject", None, 404, 40409),
    ("POST", "/subjects/%20/versions", {"schema": '"string"'}, 422, 42208),
    ("POST", "/subjects/bad%0Aname/versions", {"schema": '"string"'}, 422, 42208),
])
def test_unknown_names_and_bad_values_answer_confluents_codes(broker: Broker, client: SchemaRegistryClient,
                                                              method: str, path: str, body: Any, status: int,
                                                              code: int) -> None:
    client.register_schema("readings-value", avro(("sensor", "string"), ("value", "double")))
    answer = requests.request(method, broker.http_url + path, json=body, timeout=10)
    assert (answer.status_code, answer.json()["error_code"]) == (status, code), answer.text


# --- modes, config, references -----------------------------------------------------------------------------------


def test_readonly_refuses_and_import_registers_with_the_given_id(broker: Broker, client: SchemaRegistryClient) -> None:
    client.update_mode("frozen-value", "READONLY")
    assert client.get_mode("frozen-value") == "READONLY"
    refused(lambda: client.register_schema("frozen-value", avro(A_INT)), 42205)
    refused(lambda: client.get_versions("frozen-value"), 40401)  # nothing stored
    client.update_mode("frozen-value", "IMPORT")
    imported = post(broker, "/subjects/frozen-value/versions", {"schema": avro(A_INT).schema_str, "id": 4242,
                                                                "version": 7})
    assert imported.status_code == 200 and imported.json()["id"] == 4242, imported.text
    assert client.get_version("frozen-value", 7).schema_id == 4242
    assert json.loads(client.get_schema(4242).schema_str)["fields"] == [{"name": "a", "type": "int"}]
    taken = post(broker, "/subjects/frozen-value/versions", {"schema": avro(("z", "long")).schema_str, "id": 4242})
    assert taken.json()["error_code"] == 42207  # an id names one schema
    client.update_mode("frozen-value", "READWRITE")
    refused(lambda: client.update_mode("frozen-value", "IMPORT"), 42205)  # it has versions now
    assert client.update_mode("frozen-value", "IMPORT", force=True) == "IMPORT"
    assert client.delete_mode("frozen-value") == "IMPORT"
    refused(lambda: client.get_mode("frozen-value"), 40409)
    assert requests.get(broker.http_url + "/mode/frozen-value?defaultToGlobal=true", timeout=10).json() == {
        "mode": "READWRITE"}


def test_global_and_subject_compatibility_config(broker: Broker, client: SchemaRegistryClient) -> None:
    assert client.get_compatibility() == "BACKWARD"
    client.set_compatibility(level="FULL")
    try:
        assert client.get_compatibility() == "FULL"
        got = requests.get(broker.http_url + "/config/fresh-value?defaultToGlobal=true", timeout=10).json()
        assert got == {"compatibilityLevel": "FULL"}
        client.set_compatibility("fresh-value", "NONE")
        assert client.get_compatibility("fresh-value") == "NONE"
        assert requests.delete(broker.http_url + "/config/fresh-value", timeout=10).json() == {
            "compatibilityLevel": "NONE"}
        refused(lambda: client.get_compatibility("fresh-value"), 40408)
    finally:
        requests.delete(broker.http_url + "/config", timeout=10)
    assert client.get_compatibility() == "BACKWARD"


def test_references_resolve_and_protect_what_they_name(client: SchemaRegistryClient) -> None:
    location = Schema(json.dumps({"type": "record", "name": "Location", "namespace": "rig",
                                  "fields": [{"name": "lat", "type": "double"}]}), "AVRO")
    client.register_schema("rig.Location", location)
    outer = Schema(json.dumps({"type": "record", "name": "Pump", "namespace": "rig",
                               "fields": [{"name": "at", "type": "rig.Location"}]}), "AVRO",
                   [SchemaReference("rig.Location", "rig.Location", 1)])
    pump = client.register_schema("pumps-value", outer)
    fetched = client.get_schema(pump)
    assert [r.subject for r in fetched.references] == ["rig.Location"]
    assert client.get_referenced_by("rig.Location", 1) == [pump]
    refused(lambda: client.delete_subject("rig.Location"), 42206)
    refused(lambda: client.delete_version("rig.Location", 1), 42206)
    assert client.get_versions("rig.Location") == [1]
    AvroSerializer(client, outer)  # the serializer resolves the reference through the registry
    assert client.lookup_schema("pumps-value", outer).version == 1


def test_same_schema_has_one_id_under_every_subject(client: SchemaRegistryClient) -> None:
    schema = avro(("only", "long"), name="Shared")
    first = client.register_schema("shared-one-value", schema)
    assert client.register_schema("shared-two-value", schema) == first
    assert client.register_schema("shared-one-value", schema) == first  # again: the same version
    assert client.get_versions("shared-one-value") == [1]
    assert sorted(client.get_subjects_by_schema_id(first)) == ["shared-one-value", "shared-two-value"]
    assert {(v.subject, v.version) for v in client.get_schema_versions(first)} == {
        ("shared-one-value", 1), ("shared-two-value", 1)}
    assert client.get_schema_types() == ["JSON", "PROTOBUF", "AVRO"]


# --- kept in the stream: replicated with it, replayed at start ---------------------------------------------------


def test_schemas_travel_with_their_stream_to_another_cluster(tmp_path) -> None:
    """Registered on San Jose, replicated with /rig to New York; San Jose lost: the same id, records decoded there."""
    from kafkacompat.admin.client import AdminClient

    with Broker(str(tmp_path / "a"), cluster_name="sanjose", http_port=0) as a, \
            Broker(str(tmp_path / "b"), cluster_name="newyork", http_port=0) as b:
        for broker in (a, b):
            AdminClient(broker.bootstrap_servers, timeout=30).call("stream.create", path="/rig")
        a.create_topic("/rig:pumps")
        source = SchemaRegistryClient({"url": a.http_url})
        schema = avro(("sensor", "string"), ("psi", "double"), name="Pump")
        values = [{"sensor": "p1", "psi": 31.5}]
        roundtrip(a, "/rig:pumps", values, AvroSerializer(source, schema.schema_str), AvroDeserializer(source))
        schema_id = source.get_latest_version("/rig:pumps-value").schema_id
        assert a.server.store.get_topic("/rig", "_schemas") is not None  # kept in the subject's topic's stream

        AdminClient(a.bootstrap_servers, timeout=30).call("replica.add", path="/rig",
                                                          replica=f"127.0.0.1:{b.port}/rig")
        wait_until(lambda: _has_schema(b, schema_id), "the schema replicated to New York")
        wait_until(lambda: b.server.store.partition("/rig", "pumps", 0).high_watermark == 1, "the record")
        a.stop()  # San Jose is lost: New York serves the schemas and the data alone
        copy = SchemaRegistryClient({"url": b.http_url})
        assert json.loads(copy.get_schema(schema_id).schema_str) == json.loads(schema.schema_str)
        assert copy.get_latest_version("/rig:pumps-value").version == 1
        # the producer fails over unchanged: its serializer finds the same schema under the same id
        later = [{"sensor": "p2", "psi": 30.0}]
        got = roundtrip(b, "/rig:pumps", later, AvroSerializer(copy, schema.schema_str), AvroDeserializer(copy))
        assert got == values  # (the first record read back is San Jose's, decoded with New York's registry)
        framed = [m.value for m in b.consume("/rig:pumps")]
        assert [int.from_bytes(v[1:5], "big") for v in framed] == [schema_id, schema_id]
        context = SerializationContext("/rig:pumps", MessageField.VALUE)
        assert [AvroDeserializer(copy)(v, context) for v in framed] == values + later


def _has_schema(broker: Broker, schema_id: int) -> bool:
    return requests.get(f"{broker.http_url}/schemas/ids/{schema_id}", timeout=10).status_code == 200


def wait_until(check: Callable[[], Any], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not seen within {timeout}s")
        time.sleep(0.05)


def test_schemas_are_replayed_after_a_restart(tmp_path) -> None:
    with Broker(str(tmp_path), http_port=0) as first:
        client = SchemaRegistryClient({"url": first.http_url})
        schema_id = client.register_schema("kept-value", avro(A_INT, name="Kept"))
        client.set_compatibility("kept-value", "FULL")
        client.register_schema("kept-value", avro(A_INT, ("b", "int", 0), name="Kept"))
        client.delete_version("kept-value", 2)
    with Broker(str(tmp_path), http_port=0) as again:
        client = SchemaRegistryClient({"url": again.http_url})
        assert client.get_schema(schema_id).schema_str == json.dumps(
            json.loads(avro(A_INT, name="Kept").schema_str), separators=(",", ":"))
        assert client.get_versions("kept-value") == [1]
        assert client.get_compatibility("kept-value") == "FULL"


# --- validation at the broker ------------------------------------------------------------------------------------


def produce_outcomes(broker: Broker, topic: str, values: list[bytes]) -> list[Any]:
    """The delivery error (None: stored) of each value, produced one by one by librdkafka."""
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    outcomes: list[Any] = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda error, message: outcomes.append(error))
        producer.flush(10)
    assert len(outcomes) == len(values)
    return outcomes


def test_a_validating_topic_refuses_records_without_a_schema_id_of_its_subject(broker: Broker,
                                                                               client: SchemaRegistryClient) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, ConfigResource

    broker.create_topic("validated", configs={"confluent.value.schema.validation": "true"})
    schema = avro(("sensor", "string"), name="Validated")
    framed = AvroSerializer(client, schema.schema_str)({"sensor": "p1"},
                                                       SerializationContext("validated", MessageField.VALUE))
    elsewhere = client.register_schema("other-value", avro(("x", "long"), name="Elsewhere"))
    wrong_subject = b"\x00" + elsewhere.to_bytes(4, "big") + framed[5:]
    unknown = b"\x00" + (elsewhere ^ 0x55555).to_bytes(4, "big") + framed[5:]
    outcomes = produce_outcomes(broker, "validated", [framed, b"plain text", unknown, wrong_subject, framed])
    assert outcomes[0] is None and outcomes[4] is None
    for error in outcomes[1:4]:
        assert error is not None and error.code() == KafkaError.INVALID_RECORD, error
    stored = broker.consume("validated")
    assert [m.value for m in stored] == [framed, framed]  # nothing refused was written

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "validated")])
    configs = next(iter(described.values())).result(10)
    assert configs["confluent.value.schema.validation"].value == "true"
    assert "confluent.key.schema.validation" not in configs  # listed only where set: the rest is Kafka's list


def test_schema_validation_refusals_name_the_reason(broker: Broker, client: SchemaRegistryClient) -> None:
    """Kafka's per-record errors say why, as a Java or kafka-python client shows them."""
    from kafkacompat.protocol.records import Record

    from kafkacompat.schemas.validation import refusals

    broker.create_topic("keyed", configs={"confluent.key.schema.validation": "true"})
    key_id = client.register_schema("keyed-key", Schema('"string"', "AVRO"))

    framed = b"\x00" + key_id.to_bytes(4, "big") + b"\x02k"
    records = [Record(framed, b"any value"), Record(b"k", None), Record(b"\x00\x00\x00\x00\x07x", None)]
    found = broker.call(refusals(broker.server.cluster, {"keyed"}, records, keys="TopicNameStrategy",
                                 values=None))
    assert found == [(1, "the key is not framed with a schema id (magic byte 0 and a 4-byte id)"),
                     (2, "the key's schema id 7 is not registered")]


@pytest.mark.parametrize("strategy", ["RecordNameStrategy", "TopicRecordNameStrategy"])
def test_validation_follows_the_topics_subject_name_strategy(broker: Broker, client: SchemaRegistryClient,
                                                             strategy: str) -> None:
    """The serializer and the topic name the same strategy: its records pass, those framed by another do not."""
    from confluent_kafka.schema_registry import record_subject_name_strategy, topic_record_subject_name_strategy

    topic = f"by-record-{strategy.lower()}"
    broker.create_topic(topic, configs={"confluent.value.schema.validation": "true",
                                        "confluent.value.subject.name.strategy":
                                            f"io.confluent.kafka.serializers.subject.{strategy}"})
    namer = record_subject_name_strategy if strategy == "RecordNameStrategy" else topic_record_subject_name_strategy
    schema = avro(("n", "long"), name="Strategic").schema_str
    context = SerializationContext(topic, MessageField.VALUE)
    framed = AvroSerializer(client, schema, conf={"subject.name.strategy": namer})({"n": 1}, context)
    by_topic = AvroSerializer(client, avro(("m", "long"), name="Other").schema_str)({"m": 2}, context)
    outcomes = produce_outcomes(broker, topic, [framed, by_topic])
    assert outcomes[0] is None and outcomes[1] is not None
    expected = "rig.Strategic" if strategy == "RecordNameStrategy" else f"{topic}-rig.Strategic"
    assert expected in client.get_subjects()
    assert [m.value for m in broker.consume(topic)] == [framed]


# --- REST v3 produce of schema-framed data -----------------------------------------------------------------------


def test_rest_produce_frames_data_with_a_registered_schema(broker: Broker, client: SchemaRegistryClient) -> None:
    """Keys and values named by type, schema_id or schema_version are encoded and framed for stock deserializers."""
    broker.create_topic("rest-framed")
    schema = avro(("sensor", "string"), ("psi", "double"), name="RestFramed")
    schema_id = client.register_schema("rest-framed-value", schema)
    key_id = client.register_schema("rest-framed-key", Schema(json.dumps({"type": "string"}), "JSON"))
    url = f"{broker.http_url}/v3/clusters/{broker.server.cluster.cluster_id}/topics/rest-framed/records"
    bodies = [
        {"value": {"type": "AVRO", "data": {"sensor": "p1", "psi": 1.5}}},  # the subject's latest version
        {"value": {"schema_id": schema_id, "data": {"sensor": "p2", "psi": 2.5}}},
        {"key": {"type": "JSONSCHEMA", "data": "rig-7"}, "value": {"schema_version": 1, "data": {"sensor": "p3",
                                                                                               "psi": 3.5}}},
    ]
    for body in bodies:
        answer = requests.post(url, json=body, timeout=10)
        assert answer.status_code == 200 and answer.json()["error_code"] == 200, answer.text
    refused_body = requests.post(url, json={"value": {"type": "AVRO", "data": {"sensor": 7}}}, timeout=10)
    assert (refused_body.status_code, refused_body.json()["error_code"]) == (422, 42206), refused_body.text
    stored = broker.consume("rest-framed")
    assert len(stored) == 3  # nothing of the refused record
    decode = AvroDeserializer(client)
    context = SerializationContext("rest-framed", MessageField.VALUE)
    assert [decode(m.value, context) for m in stored] == [{"sensor": f"p{i}", "psi": i + 0.5} for i in (1, 2, 3)]
    keys = JSONDeserializer(None, schema_registry_client=client)
    assert keys(stored[2].key, SerializationContext("rest-framed", MessageField.KEY)) == "rig-7"
    assert int.from_bytes(stored[2].key[1:5], "big") == key_id


def test_rest_produce_frames_protobuf_data(broker: Broker, client: SchemaRegistryClient) -> None:
    reading = reading_class()
    ProtobufSerializer(reading, client, {"use.deprecated.format": False})(
        reading(sensor="x"), SerializationContext("rest-pb", MessageField.VALUE))  # registers rest-pb-value
    broker.create_topic("rest-pb")
    url = f"{broker.http_url}/v3/clusters/{broker.server.cluster.cluster_id}/topics/rest-pb/records"
    answer = requests.post(url, json={"value": {"type": "PROTOBUF", "data": {"sensor": "p9", "value": 9.5}}},
                           timeout=10)
    assert answer.json()["error_code"] == 200, answer.text
    (stored,) = broker.consume("rest-pb")
    decoded = ProtobufDeserializer(reading, {"use.deprecated.format": False})(
        stored.value, SerializationContext("rest-pb", MessageField.VALUE))
    assert decoded == reading(sensor="p9", value=9.5)


# --- the console ---------------------------------------------------------------------------------------------------


def test_console_lists_subjects_and_shows_what_changed_between_versions(broker: Broker,
                                                                        client: SchemaRegistryClient) -> None:
    client.register_schema("console-value", avro(A_INT, name="Console"))
    client.register_schema("console-value", avro(A_INT, ("added", "string", "none"), name="Console"))
    listing = requests.get(broker.http_url + "/console/schemas", timeout=10)
    assert listing.status_code == 200 and "console-value" in listing.text
    page = requests.get(broker.http_url + "/console/schemas?subject=console-value", timeout=10)
    assert page.status_code == 200
    diff = page.text.split('<pre id="diff">')[1].split("</pre>")[0]
    assert "--- version 1" in diff and "+++ version 2" in diff
    assert any("added" in line for line in diff.splitlines() if line.startswith("+ "))
    assert not any("added" in line for line in diff.splitlines() if line.startswith("- "))
    same = requests.get(broker.http_url + "/console/schemas?subject=console-value&from=2&to=2", timeout=10)
    assert "No difference." in same.text
    missing = requests.get(broker.http_url + "/console/schemas?subject=nothing-value", timeout=10)
    assert missing.status_code == 404


def test_registrations_at_once_take_one_version_each(tmp_path) -> None:
    """On disk (appends wait for the files), eight registrations at once get versions 1 to 8, none overwritten."""
    from concurrent.futures import ThreadPoolExecutor

    with Broker(str(tmp_path), http_port=0) as broker:
        client = SchemaRegistryClient({"url": broker.http_url})
        client.set_compatibility("racing-value", "NONE")
        schemas = [avro((f"f{i}", "int"), name="Racing").schema_str for i in range(8)]
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda text: post(broker, "/subjects/racing-value/versions", {"schema": text}),
                                    schemas))
        assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
        assert client.get_versions("racing-value") == list(range(1, 9))
        assert sorted(client.get_version("racing-value", v).schema_id for v in range(1, 9)) == sorted(
            a.json()["id"] for a in answers)


# --- the registry's own topic ------------------------------------------------------------------------------------


def test_producers_cannot_write_the_registry_topic_and_stray_records_are_skipped(broker: Broker,
                                                                                 client: SchemaRegistryClient) -> None:
    from confluent_kafka import KafkaError
    from kafkacompat.protocol.records import Record, build_batch

    kept = client.register_schema("guarded-value", avro(A_INT, name="Guarded"))
    (outcome,) = produce_outcomes(broker, "_schemas", [b'{"forged": true}'])
    assert outcome is not None and outcome.code() == KafkaError.TOPIC_EXCEPTION  # INVALID_TOPIC_EXCEPTION

    async def stray() -> None:  # what an older or foreign writer could have left there
        partition = broker.server.store.partition(broker.server.cluster.default_stream, "_schemas", 0)
        records = [Record(b"schema/guarded-value/9", b"not json"), Record(b"other", b"{}"),
                   Record(b"mode/guarded-value", b'{"no": "mode"}')]
        await partition.append(build_batch(records), len(records))

    broker.call(stray())
    assert client.get_versions("guarded-value") == [1]
    assert requests.get(broker.http_url + "/mode/guarded-value", timeout=10).json()["error_code"] == 40409
    assert client.get_version("guarded-value", 1).schema_id == kept


# --- Protobuf as .proto text ---------------------------------------------------------------------------------------

PROTO = """syntax = "proto3";
package rig;
message Reading {
  string sensor = 1;
  double value = 2;
  map<string, int64> tags = 3;
  Kind kind = 4;
  enum Kind { PUMP = 0; VALVE = 1; }
}
"""


def test_proto_text_schemas_register_compare_and_serve_serialized(broker: Broker, client: SchemaRegistryClient) -> None:
    schema_id = client.register_schema("text-proto-value", Schema(PROTO, "PROTOBUF"))
    assert client.get_schema(schema_id).schema_str == PROTO.strip()
    serialized = requests.get(f"{broker.http_url}/schemas/ids/{schema_id}?format=serialized", timeout=10).json()
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized["schema"]))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)  # a descriptor protobuf itself accepts: types resolved, the map as its entry message
    reading = message_factory.GetMessageClass(pool.FindMessageTypeByName("rig.Reading"))
    assert reading(sensor="p1", tags={"a": 1}, kind=1).SerializeToString()
    added = PROTO.replace("  Kind kind = 4;", "  Kind kind = 4;\n  string site = 5;")
    assert client.register_schema("text-proto-value", Schema(added, "PROTOBUF")) != schema_id  # a field added
    changed = added.replace("double value = 2;", "string value = 2;")
    refused(lambda: client.register_schema("text-proto-value", Schema(changed, "PROTOBUF")), 409)
    broken = post(broker, "/subjects/text-proto-value/versions", {"schema": "message Reading {", "schemaType":
                                                                   "PROTOBUF"})
    assert (broken.status_code, broken.json()["error_code"]) == (422, 42201)
    assert client.get_versions("text-proto-value") == [1, 2]


def test_deleting_a_stream_takes_its_schemas_and_latest_means_the_latest_live(broker: Broker,
                                                                             client: SchemaRegistryClient) -> None:
    from kafkacompat.admin.client import AdminClient

    broker.create_topic("/gone:readings")
    gone = client.register_schema("/gone:readings-value", avro(A_INT, name="Gone"))
    client.register_schema("/gone:readings-value", avro(A_INT, ("b", "int", 0), name="Gone"))
    assert client.delete_version("/gone:readings-value", "latest") == 2
    assert client.delete_version("/gone:readings-value", "latest") == 1  # version 2 is soft-deleted already
    AdminClient(broker.bootstrap_servers, timeout=30).call("stream.delete", path="/gone")
    assert "/gone:readings-value" not in requests.get(broker.http_url + "/subjects?deleted=true", timeout=10).json()
    assert requests.get(f"{broker.http_url}/schemas/ids/{gone}", timeout=10).json()["error_code"] == 40403
    assert "readings-value" in client.get_subjects()  # the other streams' subjects are read again, unchanged


# --- who may do what -----------------------------------------------------------------------------------------------


def test_a_streams_permissions_decide_for_its_subjects(tmp_path) -> None:
    """produce lets alice register under /secure:t-value; consume lets carol read it, not change it; bob nothing."""
    from kafkacompat.admin.client import AdminClient

    users = {"alice": "a-secret", "bob": "b-secret", "carol": "c-secret"}
    with Broker(sasl=users, listeners=["SASL_PLAINTEXT://127.0.0.1:0", "PLAINTEXT://127.0.0.1:0"], authorizer=True,
                super_users=["User:ANONYMOUS"], http_port=0) as secured:
        plain = f"127.0.0.1:{secured.server.listener_port('PLAINTEXT')}"  # the admin's (a super user)
        AdminClient(plain, timeout=30).call("stream.create", path="/secure", policy={"permissions": {
            "produce": "u:alice", "consume": "u:carol", "topic": "u:admin", "admin": "u:admin", "copy": "u:admin"}})
        AdminClient(plain, timeout=30).call("topic.create", path="/secure", name="t")

        def as_user(name: str) -> SchemaRegistryClient:
            return SchemaRegistryClient({"url": secured.http_url, "basic.auth.user.info": f"{name}:{users[name]}"})

        schema = avro(A_INT, name="Secure")
        schema_id = as_user("alice").register_schema("/secure:t-value", schema)
        assert as_user("carol").get_schema(schema_id).schema_str
        assert as_user("carol").get_latest_version("/secure:t-value").schema_id == schema_id
        refused(lambda: as_user("carol").delete_subject("/secure:t-value"), 40301)  # ALTER: the topic permission
        refused(lambda: as_user("bob").get_latest_version("/secure:t-value"), 40301)
        refused(lambda: as_user("bob").get_schema(schema_id), 40301)
        refused(lambda: as_user("bob").register_schema("/secure:t-value", avro(A_INT, name="Forged")), 40301)
        assert as_user("bob").get_subjects() == [] and as_user("carol").get_subjects() == ["/secure:t-value"]
        assert as_user("alice").get_versions("/secure:t-value") == [1]  # nothing stored by the refusals
