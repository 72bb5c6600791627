"""The scenario set, run against every client family (one test per client x scenario).

Each test asks a driver to do what a user of that client does and checks
what the user sees: offsets, keys, values, headers, assignments, admin
answers. Some checks also look at the broker side, where only the stored
bytes can tell (e.g. that a batch really was idempotent).

The core scenarios (marked `on_cluster`: produce and consume, keys and
partitions, headers, compression, idempotence, groups, commits and
rebalances, admin) run twice: on the in-process broker and on three broker
processes forming one cluster on PostgreSQL + S3 (the `target` parameter,
targets.py). The others run on the in-process broker only; each says why
where it is not obvious.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from kafkacompat.testing import Broker
from kafkacompat.testing.cluster import BrokerCluster

from .conftest import STREAM, compat_broker, driver_for
from .drivers import ADMIN_RETENTION_MS, Driver
from .scenario_data import CODECS, expected, headers, key_values
from .targets import Target, stored_batch_headers

on_cluster = pytest.mark.on_cluster


def acknowledged(offsets: list[int] | None, expected_offsets: list[int]) -> bool:
    """Offsets a producer reported match; kcat reports none (None)."""
    return offsets is None or offsets == expected_offsets


@on_cluster
def test_keys_and_headers(client: Driver, topic: str) -> None:
    assert acknowledged(client.produce(topic, 5), [0, 1, 2, 3, 4])
    got = client.consume(topic, 5)
    assert key_values(got) == expected("", 5)
    assert [r.headers for r in got] == [headers(i) for i in range(5)]
    assert [r.offset for r in got] == [0, 1, 2, 3, 4]


@on_cluster
def test_records_stay_in_the_partition_they_were_sent_to(client: Driver, target: Target, topic: str) -> None:
    """Three partitions, each with its own records. On the cluster each partition has a
    different leader and only a leader serves its partition (tests/cluster), so the client,
    bootstrapped from one broker, produced to and fetched from all three."""
    target.create_topic(topic, 3)
    assert set(target.leaders(topic).values()) == target.node_ids, "partitions not spread over the brokers"
    for partition in range(3):
        assert acknowledged(client.produce(topic, 3, prefix=f"p{partition}-", partition=partition), [0, 1, 2])
    for partition in range(3):
        got = client.consume(topic, 3, partition=partition)
        assert [(r.partition, r.offset) for r in got] == [(partition, 0), (partition, 1), (partition, 2)]
        assert key_values(got) == expected(f"p{partition}-", 3)


# Every codec on the in-process broker; one on the cluster, whose engine stores batches as sent
# whatever their codec (the broker checks them the same way on every engine).
COMPRESSION_RUNS = [pytest.param("broker", codec, id=f"broker-{codec}") for codec in CODECS] + [
    pytest.param("cluster", "lz4", id="cluster-lz4", marks=pytest.mark.cluster)]


@pytest.mark.parametrize("target,codec", COMPRESSION_RUNS, indirect=["target"])
def test_compression(client: Driver, target: Target, topic: str, codec: str) -> None:
    client.produce(topic, 200, compression=codec)
    got = client.consume(topic, 200)
    assert key_values(got[:200]) == expected("", 200)
    assert [r.headers for r in got[:200]] == [headers(i) for i in range(200)]
    stored = target.batch_headers(topic)
    wanted = CODECS.index(codec) + 1
    if client.name in ("librdkafka", "kcat", "kafka_python", "aiokafka"):
        # These send a batch uncompressed when compressing does not shrink it
        # (librdkafka's rd_kafka_msgset_writer_compress, kafka-python's and
        # aiokafka's DefaultRecordBatchBuilder._maybe_compress), as with a batch
        # of one small record, which a loaded machine makes. The rest must be
        # stored compressed.
        assert {h.codec for h in stored if h.record_count > 1} == {wanted}, "batches not stored compressed"
    else:
        assert {h.codec for h in stored} == {wanted}, "batches not stored compressed"


@on_cluster
def test_idempotent_producer(client: Driver, target: Target, topic: str) -> None:
    assert acknowledged(client.produce(topic, 10, idempotent=True), list(range(10)))
    assert [r.offset for r in client.consume(topic, 10)] == list(range(10))
    stored = target.batch_headers(topic)
    assert all(h.producer_id >= 0 and h.base_sequence >= 0 for h in stored), "producer sent no producer id"
    assert sorted(h.base_sequence for h in stored)[0] == 0


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(client: Driver, topic: str, acks: str) -> None:
    offsets = client.produce(topic, 5, acks=acks)
    if acks != "0":
        assert acknowledged(offsets, [0, 1, 2, 3, 4])
    got = client.consume(topic, 5)
    assert key_values(got) == expected("", 5)


def test_consume_from_earliest(client: Driver, topic: str) -> None:
    client.produce(topic, 3, prefix="a-")
    client.produce(topic, 3, prefix="b-")
    got = client.consume(topic, 6, start="earliest")
    assert key_values(got) == expected("a-", 3) + expected("b-", 3)


def test_consume_from_latest(client: Driver, topic: str) -> None:
    client.produce(topic, 4, prefix="old-")
    got = client.consume(topic, 3, start="latest", produce_after=3)[:3]
    assert all(r.key.startswith("new-") for r in got), "a consumer at latest read older records"
    assert got[0].offset >= 4
    assert [r.offset for r in got] == list(range(got[0].offset, got[0].offset + 3))
    first = int(got[0].key.removeprefix("new-k"))
    assert key_values(got) == expected("new-", first + 3, start=first)


def test_consume_by_timestamp(client: Driver, topic: str) -> None:
    client.produce(topic, 3, prefix="before-")
    later = client.consume(topic, 3, start="latest", produce_after=3)
    boundary = later[0].timestamp
    assert boundary > 0, "records carry no timestamp"
    everything = client.consume(topic, 6)
    first_at_or_after = min(r.offset for r in everything if r.timestamp >= boundary)
    by_time = client.consume(topic, 6 - first_at_or_after, start=boundary)
    assert by_time[0].offset == first_at_or_after
    assert key_values(by_time) == key_values(everything[first_at_or_after:])


@on_cluster
def test_consumer_group_of_three_with_a_member_leaving(client: Driver, target: Target, topic: str, group: str) -> None:
    target.create_topic(topic, 3)
    seen = client.group_of_three(topic, group)
    assert sorted(len(parts) for parts in seen["before"]) == [1, 1, 1]
    assert sorted(p for parts in seen["before"] for p in parts) == [0, 1, 2]
    assert len(seen["after"]) == 2 and all(seen["after"])
    assert sorted(p for parts in seen["after"] for p in parts) == [0, 1, 2]


def test_commit_and_resume_after_broker_restart(client_name: str, tmp_path, topic: str, group: str) -> None:
    data = str(tmp_path / "data")
    with compat_broker(data) as first:
        port = first.port
        client = driver_for(client_name, first.bootstrap_servers)
        client.produce(topic, 10)
        assert key_values(client.group_consume(topic, group, 4)[:4]) == expected("", 4)
    with compat_broker(data, port=port) as second:
        client = driver_for(client_name, second.bootstrap_servers)
        resumed = client.group_consume(topic, group, 3)
        assert key_values(resumed[:3]) == expected("", 7, start=4)


@pytest.mark.cluster
def test_commit_and_resume_after_coordinator_restart(client_name: str, cluster: BrokerCluster, topic: str,
                                                     group: str) -> None:
    """The cluster's form of the scenario above: the broker coordinating the group stops and
    starts again; the group (its commits in the store) moves to another broker and back."""
    client = driver_for(client_name, cluster.broker(2).bootstrap)
    client.produce(topic, 10)
    assert key_values(client.group_consume(topic, group, 4)[:4]) == expected("", 4)
    node = coordinator(cluster, group)
    assert node is not None, "the group has no coordinator"
    cluster.restart(node)
    # resumed once the group is back on the restarted broker, which loaded it from the store
    deadline = time.monotonic() + 30
    while coordinator(cluster, group) != node:
        assert time.monotonic() < deadline, f"group {group} did not move back to broker {node}"
        time.sleep(0.1)
    resumed = client.group_consume(topic, group, 3)
    assert key_values(resumed[:3]) == expected("", 7, start=4)


def coordinator(cluster: BrokerCluster, group: str) -> int | None:
    """The node id of the group's coordinator as FindCoordinator answers (None while it has none)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    try:
        return admin.describe_consumer_groups([group])[group].result(30).coordinator.id
    except KafkaException:
        return None


@on_cluster
def test_admin_create_and_describe_topic(client: Driver, topic: str) -> None:
    assert client.create_describe_topic(topic, 3) == {"partitions": 3, "listed": True}


@on_cluster
def test_admin_alter_configs(client: Driver, target: Target, topic: str) -> None:
    target.create_topic(topic, 1)
    seen = client.alter_configs(topic)
    assert seen["before"] != ADMIN_RETENTION_MS
    assert seen["after"] == ADMIN_RETENTION_MS


@on_cluster
def test_admin_create_partitions(client: Driver, target: Target, topic: str) -> None:
    target.create_topic(topic, 1)
    assert client.create_partitions(topic, 4) == 4


@on_cluster
def test_admin_delete_records(client: Driver, topic: str) -> None:
    client.produce(topic, 6)
    assert client.delete_records(topic, 4) == 4
    assert key_values(client.consume(topic, 2)) == expected("", 6, start=4)


@on_cluster
def test_admin_delete_topic(client: Driver, target: Target, topic: str) -> None:
    target.create_topic(topic, 1)
    assert client.delete_topic(topic) is False
    assert target.is_deleted(topic)


@on_cluster
def test_list_and_describe_groups(client: Driver, target: Target, topic: str, group: str) -> None:
    target.create_topic(topic, 2)
    seen = client.list_describe_groups(topic, group)
    assert seen == {"listed": True, "state": seen["state"], "members": 1, "partitions": [0, 1]}
    assert seen["state"].lower() == "stable"


# The stream scenarios run on the in-process broker only: they need a stream of their own
# (MapR's namespace, made through the store, not a Kafka API) and read its stored batches.
@pytest.fixture
def stream_broker() -> Iterator[Broker]:
    """A broker of its own holding /apps/iot/oilpump_metrics, so the topic can be named Pressure."""
    with compat_broker() as running:
        running.call(running.server.store.create_stream(STREAM))
        yield running


CANONICAL = f"{STREAM}:Pressure"
ALIAS = "apps.iot.oilpump_metrics..Pressure"


# Clients that check topic names against Kafka's legal characters before sending
# anything: they reach stream topics through the alias, which is why it exists.
REFUSES_PATH_NAMES = {
    "kafka_python": "kafka-python refuses names outside [a-zA-Z0-9._-] client-side; use the alias",
}


def test_stream_topic_by_path_name(client_name: str, stream_broker: Broker, request: pytest.FixtureRequest) -> None:
    if client_name in REFUSES_PATH_NAMES:
        request.applymarker(pytest.mark.xfail(strict=True, raises=ValueError, reason=REFUSES_PATH_NAMES[client_name]))
    client = driver_for(client_name, stream_broker.bootstrap_servers)
    assert acknowledged(client.produce(CANONICAL, 3), [0, 1, 2])
    assert key_values(client.consume(CANONICAL, 3)) == expected("", 3)
    assert key_values(client.consume(ALIAS, 3)) == expected("", 3)
    assert len(stored_batch_headers(stream_broker, "Pressure", STREAM)) >= 1


def test_stream_topic_by_kafka_legal_alias(client_name: str, stream_broker: Broker) -> None:
    client = driver_for(client_name, stream_broker.bootstrap_servers)
    assert acknowledged(client.produce(ALIAS, 3, prefix=f"{uuid.uuid4().hex[:4]}-"), [0, 1, 2])
    got = client.consume(ALIAS, 3)
    assert len(got) == 3
    assert stream_broker.server.store.get_topic(STREAM, "Pressure") is not None
    assert len(stored_batch_headers(stream_broker, "Pressure", STREAM)) >= 1
