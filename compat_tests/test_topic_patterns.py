"""Pattern subscriptions reach stream topics, whichever spelling a client can take.

Clients match a pattern against the names an all-topics Metadata answer
lists. kafka-python rejects any name outside Kafka's legal characters, so
it is listed the Kafka-legal alias (apps.iot.oilpump_metrics..Pressure);
clients that take any name (librdkafka, Java) keep the canonical
/apps/iot/oilpump_metrics:Pressure, as before.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from kafkacompat.testing import Broker

from .conftest import STREAM, compat_broker

TOPICS = ("Pressure", "Temperature")
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def patterned() -> Iterator[Broker]:
    """Two stream topics with one record each, and a plain topic no pattern below should match."""
    with compat_broker() as broker:
        broker.call(broker.server.store.create_stream(STREAM))
        for name in TOPICS:
            broker.produce(f"{STREAM}:{name}", f"{name} reading".encode(), key=name.encode())
        broker.produce("orders", b"not a reading")
        yield broker


@pytest.mark.kafka_python
def test_kafka_python_pattern_matches_stream_topics_by_alias(patterned: Broker) -> None:
    import kafka

    consumer = kafka.KafkaConsumer(
        bootstrap_servers=patterned.bootstrap_servers, group_id=f"pattern-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest", consumer_timeout_ms=1000,
    )
    try:
        consumer.subscribe(pattern=r"apps\.iot\.oilpump_metrics\.\..*")
        seen: dict[str, bytes] = {}
        deadline = time.monotonic() + TIMEOUT
        while len(seen) < len(TOPICS) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                seen.update((r.topic, r.value) for r in records)
        assert seen == {f"apps.iot.oilpump_metrics..{name}": f"{name} reading".encode() for name in TOPICS}
        assert consumer.subscription() == {f"apps.iot.oilpump_metrics..{name}" for name in TOPICS}
    finally:
        consumer.close()


@pytest.mark.kafka_python
def test_kafka_python_match_all_pattern_lists_only_legal_names(patterned: Broker) -> None:
    """'.*' used to match '/apps/...:Pressure' too, and kafka-python's poll raised ValueError."""
    import kafka

    consumer = kafka.KafkaConsumer(
        bootstrap_servers=patterned.bootstrap_servers, group_id=f"pattern-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
    )
    try:
        consumer.subscribe(pattern=".*")
        deadline = time.monotonic() + TIMEOUT
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(timeout_ms=500)
        assert consumer.subscription() == {"orders", *(f"apps.iot.oilpump_metrics..{name}" for name in TOPICS)}
    finally:
        consumer.close()


@pytest.mark.librdkafka
def test_librdkafka_pattern_still_matches_canonical_names(patterned: Broker) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({
        "bootstrap.servers": patterned.bootstrap_servers, "group.id": f"pattern-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest",
    })
    try:
        consumer.subscribe([f"^{STREAM}:.*"])
        seen: dict[str, bytes] = {}
        deadline = time.monotonic() + TIMEOUT
        while len(seen) < len(TOPICS) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen[message.topic()] = message.value()
        assert seen == {f"{STREAM}:{name}": f"{name} reading".encode() for name in TOPICS}
    finally:
        consumer.close()
