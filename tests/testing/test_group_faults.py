"""Faults on the group APIs and reset() of groups, with a real consumer group."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import Consumer
from kafka.admin import KafkaAdminClient

from kafkacompat.testing import Broker


def _consume_one_in_group(broker: Broker, topic: str, group: str) -> bytes | None:
    """Join `group`, read one record and commit it, as an application would."""
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap_servers, "group.id": group,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                consumer.commit(message, asynchronous=False)
                return message.value()
        return None
    finally:
        consumer.close()


def test_a_consumer_group_rides_out_coordinator_errors(broker: Broker, topic_name: str) -> None:
    broker.produce(topic_name, b"v")
    retriable = {
        "FindCoordinator": "COORDINATOR_NOT_AVAILABLE",
        "JoinGroup": "COORDINATOR_LOAD_IN_PROGRESS",
        "SyncGroup": "REBALANCE_IN_PROGRESS",
        "OffsetFetch": "COORDINATOR_LOAD_IN_PROGRESS",
        "OffsetCommit": "COORDINATOR_LOAD_IN_PROGRESS",
    }
    for api, error in retriable.items():
        broker.faults.fail(api, error, count=1)
    try:
        assert _consume_one_in_group(broker, topic_name, f"{topic_name}-group") == b"v"
        assert broker.committed(f"{topic_name}-group", topic_name) == {0: 1}
        assert {api: broker.faults.fired(api) for api in retriable} == {api: 1 for api in retriable}
    finally:
        broker.faults.clear()


def test_reset_forgets_consumer_groups_and_their_offsets() -> None:
    with Broker() as broker:
        broker.produce("orders", b"old")
        assert _consume_one_in_group(broker, "orders", "billing") == b"old"
        assert broker.committed("billing", "orders") == {0: 1}
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            assert [g["group_id"] for g in admin.list_groups()] == ["billing"]
            broker.reset()
            assert admin.list_groups() == []
        finally:
            admin.close()
        broker.produce("orders", b"new")
        assert broker.committed("billing", "orders") == {}
        # No committed offset survives: the group starts again from the earliest record.
        assert _consume_one_in_group(broker, "orders", "billing") == b"new"


def _poll_until(consumer: Consumer, done: Callable[[list[bytes]], bool], seconds: float = 60) -> list[bytes]:
    """Poll (as the application would) until `done(received)`; returns the values received."""
    received: list[bytes] = []
    deadline = time.monotonic() + seconds
    while not done(received):
        assert time.monotonic() < deadline, "timed out"
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            received.append(message.value())
    return received


def test_a_heartbeat_error_makes_the_member_rejoin(broker: Broker, topic_name: str) -> None:
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap_servers, "group.id": f"{topic_name}-group",
        "auto.offset.reset": "earliest", "enable.auto.commit": False, "heartbeat.interval.ms": 100,
    })
    broker.faults.delay("JoinGroup", 0, count=None)  # no delay: it counts the joins
    try:
        broker.produce(topic_name, b"before")
        consumer.subscribe([topic_name])
        assert _poll_until(consumer, bool) == [b"before"]
        consumer.commit(asynchronous=False)
        joins = broker.faults.fired("JoinGroup")
        broker.faults.fail("Heartbeat", "REBALANCE_IN_PROGRESS")

        assert _poll_until(consumer, lambda _: broker.faults.fired("JoinGroup") > joins) == []
        broker.produce(topic_name, b"after")
        assert _poll_until(consumer, bool) == [b"after"]  # the rejoined member resumes from the commit
        assert broker.faults.fired("Heartbeat") == 1
    finally:
        consumer.close()
        broker.faults.clear()
