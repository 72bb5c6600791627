"""Produce v13 (KIP-516: topics named by id) against Apache Kafka 4.1 and kafkacompat: the same request, compared."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafkacompat.protocol.messages import make
from kafkacompat.protocol.records import Record, build_batch
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from tests.test_produce_topic_ids import METADATA, _produce_v13
from tests.wire import Wire

from .reference import ReferenceKafka

pytestmark = [pytest.mark.differential, pytest.mark.slow]


def _ready(wire: Wire, name: str) -> uuid.UUID:
    """The topic's id once every partition has a leader: Kafka's metadata cache lags CreateTopics a moment."""
    import kio.schema.metadata.v12.request as m

    request = make(m.MetadataRequest, topics=(make(m.MetadataRequestTopic, name=name, topic_id=None),),
                   allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    deadline = time.monotonic() + 15
    while True:
        (topic,) = wire.request(METADATA, 12, request).topics
        if topic.error_code == ErrorCode.none and topic.partitions and all(p.leader_id >= 0 for p in topic.partitions):
            return topic.topic_id
        assert time.monotonic() < deadline, f"{name} has no leaders: {topic}"
        time.sleep(0.1)


def _answers(bootstrap: str) -> dict[tuple[str, int], tuple[int, int]]:
    """(which topic id, partition) -> (error code, base offset) for one request mixing known and unknown ids."""
    name = f"by-id-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: the future dies with its client
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(30)
    with Wire(bootstrap) as wire:
        known = _ready(wire, name)
        unknown = uuid.uuid4()
        batch = build_batch([Record(None, b"v", [], 1_700_000_000_000)])
        deadline = time.monotonic() + 15
        while _produce_v13(wire, [(known, 1, batch)])[(known, 1)][0] != 0:  # Kafka: leader a moment after metadata
            assert time.monotonic() < deadline, f"{name}-1 never took a produce by id"
            time.sleep(0.1)
        answers = _produce_v13(wire, [(known, 1, batch), (unknown, 0, batch), (known, 7, batch)])
    label = {known: "known", unknown: "unknown"}
    return {(label[topic_id], index): outcome for (topic_id, index), outcome in answers.items()}


def test_produce_by_topic_id_agrees(reference_kafka: ReferenceKafka, differential_broker: Broker) -> None:
    kafka = _answers(reference_kafka.bootstrap_servers)
    assert kafka[("known", 1)] == (0, 1)  # the request itself is right (after the one that waited for a leader)
    assert _answers(differential_broker.bootstrap_servers) == kafka
