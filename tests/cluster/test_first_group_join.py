"""The first group on a fresh cluster joins once, and the first transactional producer is not
refused by its coordinator (issue 37).

No __consumer_offsets exists yet: the broker a consumer asks FindCoordinator
creates it and names the leader of the group's partition, which learns of
the topic at its next heartbeat and catches up its partitions before it
coordinates. The consumer's JoinGroup came within milliseconds and was
answered NOT_COORDINATOR; librdkafka asked for the coordinator again and
joined about 3 s later, so the first group took a join (and a rebalance
delay) more than any later one. The named coordinator now waits for its
catch-up instead. The consumer here bootstraps from a broker that is not
the coordinator, the case where the race was lost (about half the runs
on the old code: it depends on which broker librdkafka asks).

Every coordinator-bound request waits the same way (Cluster.coordinator_error):
a transactional producer's InitProducerId, sent to the coordinator named a
moment after the offsets topic was made, was answered NOT_COORDINATOR while
that broker caught up, and librdkafka looked the coordinator up again.
"""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer
from kafkacompat.protocol.messages import make
from kio.schema.errors import ErrorCode

from kafkacompat.broker.cluster import OFFSETS_TOPIC
from kafkacompat.cluster.leadership import preferred_leader
from kafkacompat.cluster.membership import coordinator_partition
from kafkacompat.testing.cluster import BrokerCluster
from tests.cluster.client_log import ClientLog
from tests.cluster.test_shared_store import create_topic
from tests.wire import Wire

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

GROUP, OFFSETS_PARTITIONS = "first-group", 50


@pytest.fixture
def cluster(cloud_args: list[str]) -> Iterator[BrokerCluster]:
    with BrokerCluster(3, cloud_args) as running:
        yield running


def test_the_first_group_on_a_fresh_cluster_joins_once(cluster: BrokerCluster) -> None:
    topic = create_topic(cluster.bootstrap, 3)
    index = coordinator_partition(GROUP, OFFSETS_PARTITIONS)
    coordinator = preferred_leader([1, 2, 3], ("/default", OFFSETS_TOPIC, index))  # where the new row puts it
    asked = next(b for n, b in enumerate(cluster.brokers, 1) if n != coordinator)
    lines = ClientLog("rdkafka-first-group")
    consumer = Consumer({"bootstrap.servers": asked.bootstrap, "group.id": GROUP, "debug": "cgrp",
                         "logger": lines.logger, "auto.offset.reset": "earliest"})
    assigned: list[int] = []
    try:
        consumer.subscribe([topic], on_assign=lambda _, parts: assigned.append(len(parts)))
        deadline = time.monotonic() + 60
        while not assigned and time.monotonic() < deadline:
            consumer.poll(0.1)
    finally:
        consumer.close()
    joins = [line for line in lines.lines if "JoinGroup response" in line]
    assert assigned == [3], assigned
    assert any(f"coordinator is {cluster.broker(coordinator).bootstrap} id {coordinator}" in line
               for line in lines.lines), "the coordinator was not the broker predicted"
    assert not [line for line in joins if "Not coordinator" in line], joins




def _init_producer_id(wire: Wire, txn_id: str) -> ErrorCode:
    import kio.schema.init_producer_id.v5.request as ip

    return wire.request(22, 5, make(ip.InitProducerIdRequest, transactional_id=txn_id, producer_id=-1,
                                    producer_epoch=-1, transaction_timeout=datetime.timedelta(seconds=60))).error_code


def _share_group_heartbeat(wire: Wire, group: str) -> ErrorCode:
    import kio.schema.share_group_heartbeat.v1.request as sh

    return wire.request(76, 1, make(sh.ShareGroupHeartbeatRequest, group_id=group, member_id=str(uuid.uuid4()),
                                    member_epoch=0, rack_id=None, subscribed_topic_names=("t",))).error_code


@pytest.mark.parametrize("key_type, key, ask", [(1, "first-txn", _init_producer_id),
                                                (0, "first-share-group", _share_group_heartbeat)],
                         ids=["InitProducerId", "ShareGroupHeartbeat"])
def test_the_first_coordinator_request_on_a_fresh_cluster_is_not_refused(
        cluster: BrokerCluster, key_type: int, key: str, ask: Callable[[Wire, str], ErrorCode]) -> None:
    """A client's FindCoordinator to another broker creates __consumer_offsets and names the
    coordinator, which still catches the new partitions up when the client's request comes:
    a transactional producer's InitProducerId and a share consumer's first heartbeat were
    answered NOT_COORDINATOR there (as every coordinator-bound request was but those of the
    classic and consumer group protocols), and the client looked the coordinator up again."""
    import kio.schema.find_coordinator.v4.request as fc

    coordinator = preferred_leader([1, 2, 3], ("/default", OFFSETS_TOPIC, coordinator_partition(key, OFFSETS_PARTITIONS)))
    asked = next(b for n, b in enumerate(cluster.brokers, 1) if n != coordinator)
    with Wire(asked.bootstrap) as wire:
        found = wire.request(10, 4, make(fc.FindCoordinatorRequest, key_type=key_type, coordinator_keys=(key,)))
    assert (found.coordinators[0].error_code, found.coordinators[0].node_id) == (ErrorCode.none, coordinator)
    with Wire(cluster.broker(coordinator).bootstrap) as wire:
        assert ask(wire, key) == ErrorCode.none
