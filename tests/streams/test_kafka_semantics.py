"""Stream policies as stock Kafka clients meet them: autocreate, missing streams, ttl, default stream."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from kafkacompat.testing import Broker

from .conftest import block_values, run_cli


def metadata(broker: Broker, topic: str):
    """Metadata for one topic as a producer asks for it (allowing auto-creation)."""
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    return producer.list_topics(topic, timeout=10).topics[topic]


def test_autocreate_false_refuses_unknown_topics(broker, cli, stream_path):
    cli("stream", "create", stream_path, "--autocreate", "false")
    found = metadata(broker, f"{stream_path}:Pressure")
    assert found.error is not None and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert cli("topic", "list", stream_path).strip() == "No topics."


def test_autocreate_uses_the_streams_default_partitions(broker, cli, stream_path):
    cli("stream", "create", stream_path, "--partitions", "3")
    alias = stream_path[1:].replace("/", ".") + "..Temperature"
    found = metadata(broker, alias)
    assert found.error is None
    assert len(found.partitions) == 3
    info = block_values(cli("topic", "info", f"{stream_path}:Temperature"))
    assert info["Partitions"] == "3"
    assert info["Kafka name"] == alias


def test_topic_in_missing_stream_is_refused_with_a_clear_error(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    future = admin.create_topics([NewTopic("/tests/nowhere:Pressure", 1)])["/tests/nowhere:Pressure"]
    with pytest.raises(Exception) as refused:
        future.result(timeout=10)
    assert "stream /tests/nowhere does not exist" in str(refused.value)
    found = metadata(broker, "/tests/nowhere:Pressure")
    assert found.error is not None and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def retention_ms(broker: Broker, topic: str) -> str:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    return configs["retention.ms"].value


def test_retention_ms_shows_the_stream_ttl(broker, cli, stream_path):
    cli("stream", "create", stream_path, "--ttl", "7d")
    topic = f"{stream_path}:Pressure"
    cli("topic", "create", topic)
    assert retention_ms(broker, topic) == str(7 * 86400 * 1000)
    cli("stream", "edit", stream_path, "--ttl", "90")
    assert retention_ms(broker, topic) == "90000"
    cli("stream", "edit", stream_path, "--ttl", "0")
    assert retention_ms(broker, topic) == "-1"


@pytest.fixture(scope="module")
def broker_with_own_default() -> Iterator[Broker]:
    with Broker(default_stream="/kafka/plain") as running:  # `serve --default-stream /kafka/plain`
        yield running


def test_plain_names_live_in_the_configured_default_stream(broker_with_own_default):
    broker = broker_with_own_default
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce("orders", b"first")
    assert producer.flush(30) == 0

    done = run_cli(broker.bootstrap_servers, "stream", "info", "/kafka/plain")
    assert block_values(done.stdout)["Stream"] == "/kafka/plain  (default stream for plain topic names)"
    done = run_cli(broker.bootstrap_servers, "topic", "info", "/kafka/plain:orders")
    info = block_values(done.stdout)
    assert info["Topic"] == "orders"
    assert info["Kafka name"] == "orders"
    assert info["Messages"] == "1"
