"""A group is described by its coordinator only; the REST proxy and console of any broker show it all the same.

Kafka's DescribeGroups answers NOT_COORDINATOR from a broker that is not the
group's coordinator (AdminClient looks the coordinator up first). Every
broker answered it from its own view instead, where a group coordinated
elsewhere is stale: the REST proxy and the web console, which run on the
broker they are reached at, showed a Stable group with a member as EMPTY
(the state last written to the database) from any other broker, and a lag
of 0 for a partition another broker leads. They now ask the coordinator
(and the partition's leader) over its Kafka port.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from typing import Any

import kio.schema.describe_groups.v5.request as dg
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafkacompat.protocol.messages import make
from kio.schema.errors import ErrorCode

from kafkacompat.cluster.leadership import preferred_leader
from kafkacompat.testing.cluster import BrokerCluster
from tests.cluster.test_offset_fetch_coordinator import coordinator_of
from tests.wire import Wire

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
GROUP = "described"


@pytest.fixture
def cluster(http_cluster: BrokerCluster) -> BrokerCluster:
    return http_cluster


def _rest(broker: Any, path: str) -> Any:
    return json.loads(_page(broker, path))


def _page(broker: Any, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.http_port}{path}", timeout=30) as answer:
        return str(answer.read().decode())


def _state(wire: Wire) -> tuple[ErrorCode, str]:
    answer = wire.request(15, 5, make(dg.DescribeGroupsRequest, groups=(GROUP,), include_authorized_operations=False))
    return answer.groups[0].error_code, answer.groups[0].group_state


def _topic_led_by(cluster: BrokerCluster, node_id: int) -> str:
    """A new one-partition topic whose leader is broker `node_id` (where a topic's partitions start)."""
    name = next(name for name in (f"t-{uuid.uuid4().hex[:8]}" for _ in range(1000))
                if preferred_leader([1, 2], ("/default", name, 0)) == node_id)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=10)[name].result(timeout=20)
    return name


def test_a_group_is_described_from_every_broker(cluster: BrokerCluster) -> None:
    with Wire(cluster.broker(1).bootstrap) as wire:
        coordinator = coordinator_of(wire, GROUP)
    other = cluster.broker(2 if coordinator == 1 else 1)
    topic = _topic_led_by(cluster, coordinator)  # the REST asks another broker for its end offset, too
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    for n in range(10):
        producer.produce(topic, str(n).encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        consumer.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
        with Wire(cluster.broker(coordinator).bootstrap) as wire:
            assert _state(wire) == (ErrorCode.none, "Stable")
        with Wire(other.bootstrap) as wire:
            assert _state(wire) == (ErrorCode.not_coordinator, "")  # as Kafka: the client looks it up
        cid = _rest(other, "/v3/clusters")["data"][0]["cluster_id"]
        group = _rest(other, f"/v3/clusters/{cid}/consumer-groups/{GROUP}")
        assert (group["state"], group["type"]) == ("STABLE", "CLASSIC")
        lag = _rest(other, f"/v3/clusters/{cid}/consumer-groups/{GROUP}/lag-summary")
        assert (lag["max_lag_topic_name"], lag["total_lag"]) == (topic, 3)
        page = _page(other, f"/console/group?id={GROUP}")
        assert '<dd id="group-state">Stable</dd>' in page and '<dd id="total-lag">3</dd>' in page, page
        admin = AdminClient({"bootstrap.servers": other.bootstrap})
        described = admin.describe_consumer_groups([GROUP], request_timeout=30)[GROUP].result()
        assert (described.state.name, len(described.members)) == ("STABLE", 1)
    finally:
        consumer.close()
