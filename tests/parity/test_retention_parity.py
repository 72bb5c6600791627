"""A topic's retention.ms as Kafka 4.1 applies it, side by side with kafkacompat.

Kafka's UnifiedLog deletes a segment once now - its largest timestamp >
retention.ms, and only a negative retention.ms keeps forever: retention.ms=0
empties the log (the active segment too) at the next retention check. A
stream's ttl 0 keeps forever (MapR's meaning); that is kafkacompat's alone and
tested in tests/storage. Both brokers here check retention every 300 ms (Kafka's
log.retention.check.interval.ms is not dynamic), so this module starts its own
Kafka 4.1.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.reference import module_reference_kafka, unique
from kafkacompat.testing import Broker
from tests.conftest import create_topic

CHECK_MS = 300


@pytest.fixture(scope="module")
def kafka_checking_often() -> Iterator[str | None]:
    # Kafka runs its first retention check log.initial.task.delay.ms (30 s) after start: most of this module's
    # time, waiting on a broker that started a moment ago; 0 starts checking at once.
    yield from module_reference_kafka({}, **{"log.retention.check.interval.ms": CHECK_MS,
                                             "log.initial.task.delay.ms": 0})


@pytest.fixture(scope="module")
def ours_checking_often() -> Iterator[Broker]:
    with Broker(data_dir="tmp", retention_check_ms=CHECK_MS) as running:
        yield running


def _sides(ours: Broker, kafka: str | None) -> dict[str, str]:
    sides = {"kafkacompat": ours.bootstrap_servers}
    if kafka is not None:
        sides["kafka"] = kafka
    return sides


def _watermarks_once_emptied(bootstrap: str, topic: str, timeout: float = 30.0) -> tuple[int, int]:
    """(log start, log end) of partition 0 once they meet, or as they stand after `timeout`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic})
    try:
        deadline = time.monotonic() + timeout
        while True:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
            if low == high or time.monotonic() > deadline:
                return low, high
            time.sleep(CHECK_MS / 1000)
    finally:
        consumer.close()


def test_retention_ms_0_deletes_every_record_already_stamped(ours_checking_often: Broker,
                                                             kafka_checking_often: str | None) -> None:
    seen = {}
    name = unique("retention-zero")
    for side, bootstrap in _sides(ours_checking_often, kafka_checking_often).items():
        topic = create_topic(bootstrap, name, configs={"retention.ms": "0"})
        producer = Producer({"bootstrap.servers": bootstrap})
        stamp = int(time.time() * 1000) - 60_000
        for _ in range(3):
            producer.produce(topic, b"v", timestamp=stamp)
        assert producer.flush(10) == 0
        seen[side] = _watermarks_once_emptied(bootstrap, topic)
    assert set(seen.values()) == {(3, 3)}, seen


def test_retention_ms_below_minus_1_is_refused(ours_checking_often: Broker, kafka_checking_often: str | None) -> None:
    seen = {}
    name = unique("retention-below")
    for side, bootstrap in _sides(ours_checking_often, kafka_checking_often).items():
        admin = AdminClient({"bootstrap.servers": bootstrap})
        future = admin.create_topics([NewTopic(name, 1, 1, config={"retention.ms": "-2"})])[name]
        with pytest.raises(KafkaException) as refused:
            future.result(15)
        error = refused.value.args[0]
        seen[side] = (error.name(), error.str())
    assert set(seen.values()) == {
        ("INVALID_CONFIG", "Invalid value -2 for configuration retention.ms: Value must be at least -1")}, seen
