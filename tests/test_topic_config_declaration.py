"""Adding a topic config is one entry in catalog/topic_configs.py: its ConfigDef says all of it.

Its default, type, documentation, broker synonym and the values it accepts are
fields of the one declaration; CreateTopics checks values by it and
DescribeConfigs lists it with Kafka's sources and synonyms, with no other table
to find. A config added here at run time is used by a stock client as it would
use one of Kafka's.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from kafkacompat.catalog import topic_configs
from kafkacompat.catalog.topic_configs import DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG, ConfigDef
from kafkacompat.testing import Broker

NAME = "test.added.config"
ADDED = ConfigDef("5", 3, "A config this test adds.", synonym="log.test.added.config", at_least=1)


@pytest.fixture
def admin(broker: Broker, monkeypatch: pytest.MonkeyPatch) -> AdminClient:
    monkeypatch.setitem(topic_configs.TOPIC_CONFIGS, NAME, ADDED)
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def _create(admin: AdminClient, configs: dict[str, str]) -> str:
    name = f"declared-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, 1, config=configs)])[name].result(timeout=30)
    return name


def _described(admin: AdminClient, topic: str) -> tuple[str, int, list[tuple[str, str, int]]]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entry = admin.describe_configs([resource])[resource].result(timeout=30)[NAME]
    return entry.value, entry.source, [(s.name, s.value, s.source) for s in entry.synonyms.values()]


def test_a_config_declared_once_is_created_described_and_checked(admin: AdminClient) -> None:
    topic = _create(admin, {NAME: "7"})
    assert _described(admin, topic) == ("7", DYNAMIC_TOPIC_CONFIG, [
        (NAME, "7", DYNAMIC_TOPIC_CONFIG), ("log.test.added.config", "5", DEFAULT_CONFIG)])

    plain = _create(admin, {})
    assert _described(admin, plain) == ("5", DEFAULT_CONFIG, [("log.test.added.config", "5", DEFAULT_CONFIG)])

    with pytest.raises(KafkaException, match="Value must be at least 1"):
        _create(admin, {NAME: "0"})
