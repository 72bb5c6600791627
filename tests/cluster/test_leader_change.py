"""What a producer and a consumer are told while a partition's leadership moves (kill -9 of its leader).

Two brokers on one PostgreSQL + S3 store. An idempotent producer's batch is
refused by the broker that does not lead yet; that broker then becomes the
leader, and the batch the producer had pipelined behind the refused one on
the same connection arrives. Kafka would answer OUT_OF_ORDER_SEQUENCE_NUMBER
(a gap), after which librdkafka bumps its epoch and resends, under new
sequence numbers, whatever it could not tell was stored: on another
partition, a batch the dead leader stored but never acknowledged is then
stored twice (librdkafka issue 4953; one such value was seen twice through a
cluster kill at load 22). The broker answers the follower as it answered the
batch it follows, so the producer resends both, in order, and nothing is
stored twice.

ListOffsets, OffsetForLeaderEpoch and the batches read name the epoch
Metadata names: the Java consumer takes the epoch of what it reads (and
ListOffsets') as the partition's last seen one and ignores Metadata naming
an older one, so a higher epoch there (the store's own counter) hid every
later leader from it, and Java consumers stalled on partitions whose leader
died; an epoch OffsetForLeaderEpoch does not know makes it reset its
position.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest
from kafkacompat.protocol.messages import make
from kafkacompat.protocol.records import Record, build_batch
from kio.schema.errors import ErrorCode

from kafkacompat.testing.cluster import BrokerCluster, cloud_cluster_args
from kafkacompat.testing.services import ServiceUnavailable
from tests.cluster.test_shared_store import create_topic, read_messages, wait_until
from tests.test_idempotence import init_producer_id
from tests.wire import Wire, request_class

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

LEASE_MS, HEARTBEAT_MS = 2000, 200
PRODUCE_V, METADATA_V, LIST_OFFSETS_V, OFFSET_FOR_LEADER_EPOCH_V = 9, 12, 7, 4


@pytest.fixture
def cluster() -> Iterator[BrokerCluster]:
    try:
        args = cloud_cluster_args(LEASE_MS, HEARTBEAT_MS)
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    with BrokerCluster(2, args) as running:
        yield running


def batch(pid: int, seq: int) -> bytes:
    return build_batch([Record(None, b"v%d" % seq, [], 1)], producer_id=pid, producer_epoch=0, base_sequence=seq)


def produce(topic: str, records: bytes) -> object:
    import kio.schema.produce.v9.request as m

    return make(m.ProduceRequest, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
                topic_data=(make(m.TopicProduceData, name=topic, partition_data=(
                    make(m.PartitionProduceData, index=0, records=records),)),))


def answer(wire: Wire) -> tuple[ErrorCode, int]:
    _, response = wire.receive(0, PRODUCE_V)
    part = response.responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def metadata_leader(bootstrap: str, topic: str) -> tuple[int, int]:
    """(leader id, leader epoch) of partition 0 as this broker's Metadata names them; (-1, -1) while this
    broker does not know the topic yet (another broker created it a moment ago)."""
    import kio.schema.metadata.v12.request as m

    with Wire(bootstrap) as wire:
        response = wire.request(3, METADATA_V, make(m.MetadataRequest, topics=(
            make(m.MetadataRequestTopic, name=topic, topic_id=None),), allow_auto_topic_creation=False,
            include_topic_authorized_operations=False))
    if not response.topics[0].partitions:
        return -1, -1
    part = response.topics[0].partitions[0]
    return part.leader_id, part.leader_epoch


def known_leader(bootstrap: str, topic: str) -> tuple[int, int]:
    """metadata_leader once this broker names a leader of partition 0 (it learns of a topic another
    broker created a moment later)."""
    found: list[tuple[int, int]] = []
    wait_until(f"{bootstrap} names a leader of {topic}",
               lambda: found.append(metadata_leader(bootstrap, topic)) or found[-1][0] >= 0, 30)
    return found[-1]


def list_offsets_epoch(bootstrap: str, topic: str, timestamp: int) -> int:
    cls = request_class(2, LIST_OFFSETS_V)
    topic_cls = cls.__dataclass_fields__["topics"].type.__args__[0]
    part_cls = topic_cls.__dataclass_fields__["partitions"].type.__args__[0]
    body = make(cls, replica_id=-1, isolation_level=0, topics=(make(topic_cls, name=topic, partitions=(
        make(part_cls, partition_index=0, current_leader_epoch=-1, timestamp=timestamp),)),))
    with Wire(bootstrap) as wire:
        part = wire.request(2, LIST_OFFSETS_V, body).topics[0].partitions[0]
    assert part.error_code == ErrorCode.none, part
    return part.leader_epoch


def epoch_end(bootstrap: str, topic: str, epoch: int, current: int) -> tuple[ErrorCode, int, int]:
    """OffsetForLeaderEpoch of partition 0 as a consumer validating its position asks it:
    (error, epoch, end offset)."""
    import kio.schema.offset_for_leader_epoch.v4.request as m

    with Wire(bootstrap) as wire:
        part = wire.request(23, OFFSET_FOR_LEADER_EPOCH_V, make(m.OffsetForLeaderEpochRequest, replica_id=-1, topics=(
            make(m.OffsetForLeaderTopic, topic=topic, partitions=(make(
                m.OffsetForLeaderPartition, partition=0, current_leader_epoch=current, leader_epoch=epoch),)),))
        ).topics[0].partitions[0]
    return part.error_code, part.leader_epoch, part.end_offset


def test_a_batch_pipelined_behind_one_refused_is_refused_alike_when_the_broker_leads_in_between(
    cluster: BrokerCluster,
) -> None:
    topic = create_topic(cluster.bootstrap, 1)
    leader_id, epoch = known_leader(cluster.brokers[0].bootstrap, topic)
    leader = cluster.broker(leader_id)
    other = next(b for b in cluster.brokers if b is not leader)
    other_id = cluster.brokers.index(other) + 1
    wait_until("the leader knows it leads", lambda: metadata_leader(leader.bootstrap, topic) == (leader_id, epoch), 30)
    for timestamp in (-2, -1):  # earliest, latest: the epoch Metadata names, on the leader
        assert list_offsets_epoch(leader.bootstrap, topic, timestamp) == epoch
    assert epoch_end(leader.bootstrap, topic, epoch, epoch) == (ErrorCode.none, epoch, 0)

    with Wire(leader.bootstrap) as wire:
        pid = init_producer_id(wire)
        wire.send(0, PRODUCE_V, produce(topic, batch(pid, 0)))
        assert answer(wire) == (ErrorCode.none, 0)

    with Wire(other.bootstrap, timeout=30) as wire:
        wire.send(0, PRODUCE_V, produce(topic, batch(pid, 1)))  # not the leader (yet)
        assert answer(wire) == (ErrorCode.not_leader_or_follower, -1)
        leader.kill()
        wait_until("the other broker leads the partition",
                   lambda: metadata_leader(other.bootstrap, topic)[0] == other_id, 30)
        # sent behind sequence 1 before the producer read its refusal: refused alike, not a gap
        wire.send(0, PRODUCE_V, produce(topic, batch(pid, 2)))
        assert answer(wire) == (ErrorCode.not_leader_or_follower, -1)
        # the producer resends both, in order
        wire.send(0, PRODUCE_V, produce(topic, batch(pid, 1)))
        wire.send(0, PRODUCE_V, produce(topic, batch(pid, 2)))
        assert [answer(wire), answer(wire)] == [(ErrorCode.none, 1), (ErrorCode.none, 2)]
        # a gap that follows no refusal is still one
        wire.send(0, PRODUCE_V, produce(topic, batch(pid, 9)))
        assert answer(wire)[0] == ErrorCode.out_of_order_sequence_number

    new_epoch = metadata_leader(other.bootstrap, topic)[1]
    assert new_epoch > epoch
    for timestamp in (-2, -1):
        assert list_offsets_epoch(other.bootstrap, topic, timestamp) == new_epoch
    # each batch carries the epoch Metadata named for its leader
    records = [(m.offset(), m.value(), m.leader_epoch()) for m in read_messages(other.bootstrap, topic, 1, 3)]
    assert records == [(0, b"v0", epoch), (1, b"v1", new_epoch), (2, b"v2", new_epoch)]
    # a consumer that read offset 0 under the first leader validates its position with the new one:
    # the first epoch ended where the new leader's first batch went, the new one ends at the end
    assert epoch_end(other.bootstrap, topic, epoch, new_epoch) == (ErrorCode.none, epoch, 1)
    assert epoch_end(other.bootstrap, topic, new_epoch, new_epoch) == (ErrorCode.none, new_epoch, 3)
    assert epoch_end(other.bootstrap, topic, new_epoch + 1, new_epoch) == (ErrorCode.none, -1, -1)
    assert epoch_end(other.bootstrap, topic, epoch, epoch)[0] == ErrorCode.fenced_leader_epoch


def test_a_broker_that_does_not_lead_a_partition_names_its_leader_in_the_produce_answer(
    cluster: BrokerCluster,
) -> None:
    """KIP-951 (Produce v10+): NOT_LEADER_OR_FOLLOWER comes with the partition's current leader and
    that broker's address, as Kafka answers, so producers go there without a Metadata round trip."""
    import kio.schema.produce.v10.request as m

    topic = create_topic(cluster.bootstrap, 1)
    leader_id, epoch = known_leader(cluster.brokers[0].bootstrap, topic)
    other = next(b for i, b in enumerate(cluster.brokers, 1) if i != leader_id)
    wait_until("the other broker knows the leader",
               lambda: metadata_leader(other.bootstrap, topic) == (leader_id, epoch), 30)
    request = make(m.ProduceRequest, transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=30),
                   topic_data=(make(m.TopicProduceData, name=topic, partition_data=(
                       make(m.PartitionProduceData, index=0, records=build_batch([Record(None, b"v", [], 1)])),)),))
    with Wire(other.bootstrap) as wire:
        wire.send(0, 10, request)
        _, response = wire.receive(0, 10)
    part = response.responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.not_leader_or_follower
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (leader_id, epoch)
    leader = cluster.broker(leader_id)
    assert [(n.node_id, n.host, n.port) for n in response.node_endpoints] == [(leader_id, "127.0.0.1", leader.port)]
