"""OffsetFetch is answered by the group's coordinator only; the other brokers answer NOT_COORDINATOR.

Found by the chaos campaign (cloud, seed 4, 2 min): after the group's
coordinator moved, a client still asking the old one (librdkafka keeps its
coordinator until told otherwise) read committed offsets from that broker's
copy, which lags the new coordinator's commits: "committed offset read back
as 701 after 713 was acknowledged". Kafka answers NOT_COORDINATOR there, and
the client looks the coordinator up again.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafkacompat.protocol.messages import make
from kio.schema.errors import ErrorCode

from kafkacompat.testing.cluster import BrokerCluster, cloud_cluster_args
from kafkacompat.testing.services import ServiceUnavailable
from tests.wire import Wire

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@pytest.fixture
def cluster() -> Iterator[BrokerCluster]:
    try:
        args = cloud_cluster_args(2000, 200)
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    with BrokerCluster(2, args) as running:
        yield running


def coordinator_of(wire: Wire, group: str) -> int:
    import kio.schema.find_coordinator.v4.request as fc

    answer = wire.request(10, 4, make(fc.FindCoordinatorRequest, key_type=0, coordinator_keys=(group,)))
    assert answer.coordinators[0].error_code == ErrorCode.none
    return answer.coordinators[0].node_id


def offset_fetch(wire: Wire, group: str, topic: str, version: int) -> tuple[ErrorCode, list[int]]:
    """(the group's error code, the committed offsets answered) by OffsetFetch v`version` (7 or 8)."""
    if version < 8:
        import kio.schema.offset_fetch.v7.request as of

        answer = wire.request(9, 7, make(of.OffsetFetchRequest, group_id=group, require_stable=False, topics=(
            make(of.OffsetFetchRequestTopic, name=topic, partition_indexes=(0,)),)))
        return answer.error_code, [p.committed_offset for t in answer.topics for p in t.partitions]
    import kio.schema.offset_fetch.v8.request as of

    answer = wire.request(9, 8, make(of.OffsetFetchRequest, require_stable=False, groups=(
        make(of.OffsetFetchRequestGroup, group_id=group, topics=(
            make(of.OffsetFetchRequestTopics, name=topic, partition_indexes=(0,)),)),)))
    group_answer = answer.groups[0]
    return group_answer.error_code, [p.committed_offset for t in group_answer.topics for p in t.partitions]


def test_only_the_coordinator_answers_offset_fetch(cluster: BrokerCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("fetched", 1)])["fetched"].result(30)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "g", "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition("fetched", 0, 7)], asynchronous=False)
    finally:
        consumer.close()
    with Wire(cluster.broker(1).bootstrap) as wire:
        coordinator = coordinator_of(wire, "g")
    other = 2 if coordinator == 1 else 1
    for version in (7, 8):
        with Wire(cluster.broker(coordinator).bootstrap) as wire:
            assert offset_fetch(wire, "g", "fetched", version) == (ErrorCode.none, [7])
        with Wire(cluster.broker(other).bootstrap) as wire:
            error, _ = offset_fetch(wire, "g", "fetched", version)
            assert error == ErrorCode.not_coordinator, version
