"""A REST v2 consumer and the console's offset reset work from a broker that is not the group's coordinator.

Both ran their group requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch) in-process on the broker the HTTP user reached,
which answers NOT_COORDINATOR for a group another broker coordinates: behind
a load balancer a REST consumer never joined and the console could not
reset. They now ask the coordinator over its Kafka port when refused so;
and the REST consumer fetches (and lists offsets of) a partition another
broker leads from that leader, as a Kafka consumer does (it answered 500
NOT_LEADER_OR_FOLLOWER).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import requests
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkacompat.testing.cluster import BrokerCluster
from tests.cluster.test_group_describe_coordinator import _topic_led_by
from tests.cluster.test_offset_fetch_coordinator import coordinator_of
from tests.wire import Wire

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
GROUP = "rest-elsewhere"
V2 = {"Content-Type": "application/vnd.kafka.v2+json"}


@pytest.fixture
def cluster(http_cluster: BrokerCluster) -> BrokerCluster:
    return http_cluster


def _committed(cluster: BrokerCluster, topic: str) -> int:
    """The group's committed offset of partition 0, as a stock client reads it."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP})
    try:
        return int(consumer.committed([TopicPartition(topic, 0)], timeout=30)[0].offset)
    finally:
        consumer.close()


def _records(base: str, count: int) -> list[Any]:
    """GET records until `count` have come (the instance joins the group on its first polls)."""
    out: list[Any] = []
    deadline = time.monotonic() + 60
    while len(out) < count and time.monotonic() < deadline:
        answer = requests.get(base + "/records?timeout=1000", timeout=60,
                              headers={"Accept": "application/vnd.kafka.binary.v2+json"})
        assert answer.status_code == 200, answer.text
        out.extend(answer.json())
    return out


def _subscribed(broker, group: str, topic: str) -> str:
    """The base URI of a new REST consumer instance of `group` on `broker`, reading `topic` from the earliest."""
    created = requests.post(f"http://127.0.0.1:{broker.http_port}/consumers/{group}", headers=V2, timeout=30,
                            json={"name": "c1", "format": "binary", "auto.offset.reset": "earliest"})
    assert created.status_code == 200, created.text
    base = created.json()["base_uri"]
    assert requests.post(base + "/subscription", json={"topics": [topic]}, headers=V2, timeout=30).status_code == 204
    return base


def test_rest_consumer_and_console_reset_from_a_broker_not_coordinating(cluster: BrokerCluster) -> None:
    with Wire(cluster.broker(1).bootstrap) as wire:
        coordinator = coordinator_of(wire, GROUP)
    elsewhere = 2 if coordinator == 1 else 1
    other = cluster.broker(elsewhere)
    topic = _topic_led_by(cluster, coordinator)  # `other` neither coordinates the group nor leads the partition
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    for n in range(5):
        producer.produce(topic, str(n).encode(), partition=0)
    assert producer.flush(30) == 0
    base = _subscribed(other, GROUP, topic)
    assert len(_records(base, 5)) == 5
    committed = requests.post(base + "/offsets", headers=V2, timeout=60)
    assert committed.status_code == 200, committed.text
    assert _committed(cluster, topic) == 5
    got = requests.get(base + "/offsets", json={"partitions": [{"topic": topic, "partition": 0}]}, headers=V2,
                       timeout=60)
    assert got.status_code == 200 and got.json()["offsets"][0]["offset"] == 5, got.text
    assert requests.delete(base, timeout=60).status_code == 204  # leaves: the group is Empty at once

    http = f"http://127.0.0.1:{other.http_port}"  # type: ignore[attr-defined]
    for mode, value, expected in (("offset", "2", 2), ("shift", "1", 3)):  # a shift reads the offset just reset
        reset = requests.post(f"{http}/console/group/reset?id={GROUP}",
                              data={"mode": mode, "value": value, "topic": topic}, allow_redirects=False, timeout=60)
        assert reset.status_code == 303, reset.text
        assert _committed(cluster, topic) == expected


def test_rest_consumer_rebalances_with_a_kafka_consumer_from_a_broker_not_coordinating(
        cluster: BrokerCluster) -> None:
    """A rebalance's JoinGroup waits at the coordinator for every member: forwarded, it still ends in one
    generation where the REST member and a confluent-kafka member each get one partition."""
    with Wire(cluster.broker(1).bootstrap) as wire:
        coordinator = coordinator_of(wire, GROUP)
    other = cluster.broker(2 if coordinator == 1 else 1)
    topic = "two-partitions"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)], operation_timeout=10)[topic].result(timeout=20)
    http = f"http://127.0.0.1:{other.http_port}"  # type: ignore[attr-defined]
    created = requests.post(f"{http}/consumers/{GROUP}", json={"name": "c1", "format": "binary"}, headers=V2,
                            timeout=30)
    assert created.status_code == 200, created.text
    base = created.json()["base_uri"]
    assert requests.post(base + "/subscription", json={"topics": [topic]}, headers=V2, timeout=30).status_code == 204
    kafka = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP, "session.timeout.ms": 10000})
    try:
        kafka.subscribe([topic])
        deadline = time.monotonic() + 90
        mine: list[Any] = []
        while time.monotonic() < deadline:
            kafka.poll(0.2)
            requests.get(base + "/records?timeout=200", timeout=60,
                         headers={"Accept": "application/vnd.kafka.binary.v2+json"})
            mine = requests.get(base + "/assignments", timeout=60).json()["partitions"]
            if len(mine) == 1 and len(kafka.assignment()) == 1:
                break
        assert len(mine) == 1 and len(kafka.assignment()) == 1, (mine, kafka.assignment())
        assert {mine[0]["partition"], kafka.assignment()[0].partition} == {0, 1}
    finally:
        kafka.close()
    assert requests.delete(base, timeout=60).status_code == 204


def _accepted(broker) -> float:
    """The Kafka connections the broker accepted since it started, from its /metrics."""
    text = requests.get(f"http://127.0.0.1:{broker.http_port}/metrics", timeout=30).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("kafkacompat_connections_accepted_total"))


def test_a_rest_consumer_polls_the_leader_on_connections_its_broker_keeps(cluster: BrokerCluster) -> None:
    # each poll asked the partition's leader (and each heartbeat the coordinator) on a connection opened
    # for that request: one more accepted connection at the leader per poll
    with Wire(cluster.broker(1).bootstrap) as wire:
        coordinator = coordinator_of(wire, "rest-kept")
    elsewhere = 2 if coordinator == 1 else 1
    leader, other = cluster.broker(coordinator), cluster.broker(elsewhere)
    topic = _topic_led_by(cluster, coordinator)
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    producer.produce(topic, b"first", partition=0)
    assert producer.flush(30) == 0
    base = _subscribed(other, "rest-kept", topic)
    assert len(_records(base, 1)) == 1  # joined, and read from the leader
    before = _accepted(leader)
    for _ in range(10):
        answer = requests.get(base + "/records?timeout=100", timeout=60,
                              headers={"Accept": "application/vnd.kafka.binary.v2+json"})
        assert answer.status_code == 200, answer.text
    assert _accepted(leader) - before <= 2  # the kept connections (a second one while two requests overlap)
