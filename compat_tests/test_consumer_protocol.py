"""The consumer group protocol (KIP-848, group.protocol=consumer) with every client family.

KIP-848 moves assignment into the broker: a member heartbeats its subscription
and the coordinator hands each member its partitions, so a member joining or
leaving moves only the partitions that change owner while every other member
keeps consuming (no stop-the-world rebalance). Kafka 4.0 made it GA and
Kafka 5.0 makes it the Java consumer's default. The scenarios run with each
client family that has the protocol (Java kafka-clients, librdkafka through
confluent-kafka); for the others the matrix says they have none
(Driver.consumer_protocol_missing).

They run on a broker of their own with KIP-848's heartbeat interval at
500 ms (Kafka's default is 5 s), so each assignment change takes a second
or two rather than ten.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import ConsumerGroupType, Producer
from confluent_kafka.admin import AdminClient

from kafkacompat.testing import Broker

from .conftest import compat_broker, create_topic, driver_for
from .drivers import Driver
from .drivers.java import program_41, run_program
from .scenario_data import expected, key_values

HEARTBEAT_MS = 500
SESSION_MS = 10_000  # long enough that a static member's restart comes back before it expires
PARTITIONS = 4


@pytest.fixture(scope="module")
def kip848_broker() -> Iterator[Broker]:
    with compat_broker(group_consumer_heartbeat_interval_ms=HEARTBEAT_MS,
                       group_consumer_session_timeout_ms=SESSION_MS) as running:
        yield running


@pytest.fixture
def member(client_name: str, kip848_broker: Broker) -> Driver:
    """The client family's driver, or a skip saying why it has no consumer group protocol."""
    driver = driver_for(client_name, kip848_broker.bootstrap_servers)
    missing = driver.consumer_protocol_missing()
    if missing is not None:
        pytest.skip(f"not applicable: {missing}")  # as a NotApplicable scenario shows
    return driver


def group_type(broker: Broker, group: str) -> ConsumerGroupType:
    """The group's type as Admin describes it (ConsumerGroupDescribe): CONSUMER for a KIP-848 group."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    return admin.describe_consumer_groups([group])[group].result(30).type


def test_consumer_protocol_commit_and_resume(member: Driver, kip848_broker: Broker, topic: str, group: str) -> None:
    member.produce(topic, 10)
    assert key_values(member.kip848_group_consume(topic, group, 4)) == expected("", 4)
    assert key_values(member.kip848_group_consume(topic, group, 3)[:3]) == expected("", 7, start=4)
    assert group_type(kip848_broker, group) == ConsumerGroupType.CONSUMER


def test_consumer_protocol_member_joins_and_leaves(member: Driver, kip848_broker: Broker, topic: str,
                                                   group: str) -> None:
    """The first member gives up only what the second takes, and takes it back when it leaves."""
    create_topic(kip848_broker, topic, PARTITIONS)
    seen = member.kip848_join_and_leave(topic, group, PARTITIONS)
    every = list(range(PARTITIONS))
    assert seen["alone"] == every
    kept, taken = seen["joined"]
    assert kept and taken and sorted(kept + taken) == every
    given_up = sorted(p for parts in seen["a_revoked"] for p in parts)
    assert given_up == taken, f"the first member gave up {seen['a_revoked']}, not just the {taken} that moved"
    assert seen["after_leave"] == every


def test_consumer_protocol_regex_subscription(member: Driver, kip848_broker: Broker, topic: str, group: str) -> None:
    """The broker resolves the subscribed regular expression (RE2J syntax) to the topics it matches."""
    for suffix in ("a", "b", "c"):
        create_topic(kip848_broker, f"{topic}-{suffix}", 1)
        member.produce(f"{topic}-{suffix}", 2, prefix=f"{suffix}-")
    got = member.kip848_regex(f"^{topic}-[ab]$", group, 4)
    assert sorted(key_values(got)) == expected("a-", 2) + expected("b-", 2)


@pytest.mark.java
def test_consumer_protocol_subscription_pattern_with_kafka_clients_41(kip848_broker: Broker, topic: str,
                                                                      group: str) -> None:
    """kafka-clients 4.x subscribes with a SubscriptionPattern: the broker matches it, and the
    assignment names the topics by id, which the client looks up with Metadata v12 by id (an
    empty name beside it). 3.9.1, the Java column's client, has no SubscriptionPattern."""
    program = program_41("ConsumerProtocol", "Scenarios")
    for suffix in ("a", "b", "c"):
        create_topic(kip848_broker, f"{topic}-{suffix}", 1)
    produce(kip848_broker, [(f"{topic}-{suffix}", f"{suffix}-k0", f"{suffix}-v0") for suffix in "abc"])
    got = run_program(program, "regex", kip848_broker.bootstrap_servers, pattern=f"^{topic}-[ab]$", group=group, n="2")
    assert got["matcher"] == "broker"
    assert sorted((r["k"], r["v"]) for r in got["records"]) == [("a-k0", "a-v0"), ("b-k0", "b-v0")]


def produce(broker: Broker, records: list[tuple[str, str, str]]) -> None:
    """(topic, key, value) records through confluent-kafka, acknowledged."""
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for name, key, value in records:
        producer.produce(name, key=key, value=value)
    assert producer.flush(30) == 0


def test_consumer_protocol_static_member_rejoins(member: Driver, kip848_broker: Broker, topic: str,
                                                 group: str) -> None:
    """A static member (group.instance.id) that closes and comes back gets its partitions back;
    the other member never gives anything up meanwhile."""
    create_topic(kip848_broker, topic, PARTITIONS)
    seen = member.kip848_static_member(topic, group, PARTITIONS)
    assert seen["after"] == seen["before"]
    assert seen["b_revoked"] == []
