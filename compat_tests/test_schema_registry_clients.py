"""confluent-kafka's Schema Registry serializers against the broker's registry: the matrix's schema rows.

One row per format: librdkafka produces records framed by the stock
serializer (which registers the schema at the HTTP port's root) and
consumes them back through the stock deserializer. The registry's own
behaviour is tested in tests/schemas/test_schema_registry.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

from kafkacompat.testing import Broker
from tests.schemas.test_schema_registry import avro, reading_class, roundtrip

pytestmark = pytest.mark.librdkafka
JSON_SCHEMA = json.dumps({"type": "object", "properties": {"sensor": {"type": "string"}, "value": {"type": "number"}}})
PB = {"use.deprecated.format": False}


@pytest.fixture(scope="module")
def registry_broker() -> Iterator[Broker]:
    with Broker(http_port=0) as running:
        yield running


@pytest.mark.parametrize("schema_format", ["avro", "json_schema", "protobuf"])
def test_schema_registry_serializers(registry_broker: Broker, schema_format: str) -> None:
    client = SchemaRegistryClient({"url": registry_broker.http_url})
    topic = f"serde-{schema_format}"
    if schema_format == "avro":
        schema = avro(("sensor", "string"), ("value", "double")).schema_str
        values = [{"sensor": "p1", "value": 2.5}]
        codec = (AvroSerializer(client, schema), AvroDeserializer(client))
    elif schema_format == "json_schema":
        values = [{"sensor": "p1", "value": 2.5}]
        codec = (JSONSerializer(JSON_SCHEMA, client), JSONDeserializer(None, schema_registry_client=client))
    else:
        reading = reading_class()
        values = [reading(sensor="p1", value=2.5)]
        codec = (ProtobufSerializer(reading, client, PB), ProtobufDeserializer(reading, PB))
    assert roundtrip(registry_broker, topic, values, *codec) == values
    assert client.get_latest_version(f"{topic}-value").version == 1
